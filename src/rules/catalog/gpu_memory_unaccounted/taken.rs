//! GPUs of one table nearly full with no process listed while another GPU
//! of the same table is free, and nothing in the inputs runs: the host's
//! GPUs are not all one job's, and these are taken by processes the table
//! does not show (another job's, another container's). cBio/cbio-cluster
//! #422: on the node a scheduler allocated, GPUs 0 and 1 at `5872MiB /
//! 6143MiB` and `5771MiB / 6143MiB`, GPU 2 at `85MiB`, before the user's
//! job started. One full GPU alone (fixtures/real/665) stays a note: a live
//! job's own preallocation looks the same; so does a full GPU that computes
//! (its `GPU-Util` at 10% or more): a live job runs there, the user's own as
//! likely as anyone's.

use crate::correlate::{Gpu, Incident};
use crate::rules::support::{COMPUTE_APPS, confidence};
use crate::rules::{Action, Category, Finding, Severity};

use super::{listing_note, push_actions};

/// In use, as a share of the card, at which the next job cannot start on it.
const NEARLY_FULL: f64 = 0.9;

/// In use, as a share of the card, at which a GPU is free (a context or a
/// display's few hundred MiB at most).
const FREE: f64 = 0.1;

/// `GPU-Util` at which a GPU computes: a live job runs on it. Memory a
/// leftover or another user's idle job holds shows 0% (cbio-cluster #422:
/// `0%` on both full TITANs); a training step shows tens of percent
/// (fixtures/real/961: `10916MiB / 11175MiB |     59%`,
/// the user's own job seen from a container whose nvidia-smi lists no
/// process of another PID namespace).
pub(super) const COMPUTES_PCT: u32 = 10;

/// Whether `g` computes now (its `GPU-Util`, when the capture shows it).
pub(super) fn computes(g: &Gpu) -> bool {
    g.utilization_pct.is_some_and(|u| u >= COMPUTES_PCT)
}

/// The GPUs of the same table as `held` that are free, when at least one
/// held GPU is nearly full and no process row nor `ps` listing is in the
/// inputs at all (nothing of the user's is shown); empty otherwise.
pub(super) fn free_beside<'a>(incident: &'a Incident, held: &[&Gpu]) -> Vec<&'a Gpu> {
    // Anything of the user's shown (a process row, a `ps` listing: a
    // zombie beside the table) says whose the memory may be.
    if !incident.gpu_processes.is_empty() || !incident.facts.ps.is_empty() {
        return Vec::new();
    }
    let full = |g: &Gpu| {
        g.memory_used_mib
            .zip(g.memory_total_mib)
            .is_some_and(|(u, t)| crate::rules::support::holds_working_set(u, t, NEARLY_FULL))
    };
    // A full GPU that computes runs a live job: nothing says it is not the
    // user's own, whose processes a container's nvidia-smi does not list.
    if held.iter().any(|g| full(g) && computes(g)) {
        return Vec::new();
    }
    let Some(source) = held
        .iter()
        .find(|g| full(g))
        .and_then(|g| g.spans.last())
        .map(|s| s.source)
    else {
        return Vec::new();
    };
    incident
        .gpus
        .iter()
        .filter(|g| !held.iter().any(|h| h.index == g.index))
        .filter(|g| g.spans.iter().any(|s| s.source == source))
        .filter(|g| match (g.memory_used_mib, g.memory_total_mib) {
            (Some(u), Some(t)) if t > 0 => (u as f64) <= FREE * t as f64,
            _ => false,
        })
        .collect()
}

/// The figures as the table prints them: `5872MiB / 6143MiB`.
fn printed(g: &Gpu) -> String {
    match (g.memory_used_mib, g.memory_total_mib) {
        (Some(u), Some(t)) => format!("{u}MiB / {t}MiB"),
        _ => "?".to_owned(),
    }
}

pub(super) fn finding(incident: &Incident, held: &[&Gpu], free: &[&Gpu]) -> Finding {
    let mut f = Finding::new(
        super::META.id,
        Category::GpuMemoryHeldByOtherProcess,
        Severity::Error,
    );
    let (note, listing) = listing_note(incident);
    for g in held {
        f.entities.gpus.insert(g.index);
        if let Some(span) = g.spans.last() {
            f.evidence(
                *span,
                format!("GPU {} has {} in use; {note}", g.index, printed(g)),
            );
        }
    }
    for g in free {
        if let Some(span) = g.spans.last() {
            f.evidence(
                *span,
                format!("GPU {} has {} in use: free", g.index, printed(g)),
            );
        }
    }
    if let Some(span) = listing {
        f.evidence(span, note);
    }
    let taken: Vec<String> = held
        .iter()
        .map(|g| format!("GPU {} ({})", g.index, printed(g)))
        .collect();
    let open: Vec<String> = free
        .iter()
        .map(|g| format!("GPU {} ({})", g.index, printed(g)))
        .collect();
    let visible: Vec<String> = free.iter().map(|g| g.index.to_string()).collect();
    f.condition(
        "GPUs of the table are nearly full with no process listed for them",
        true,
    );
    f.condition(
        "another GPU of the same table is free: the host's GPUs are not all one job's",
        true,
    );
    f.condition(
        "nothing in the inputs runs on the GPUs (no server log, no model server in ps, no process rows)",
        true,
    );
    f.condition(
        format!("a process table names the holder (missing: {COMPUTE_APPS} on the host)"),
        false,
    );
    let ids: Vec<String> = held.iter().map(|g| format!("GPU {}", g.index)).collect();
    f.title = format!(
        "{} taken by processes the table does not list, while {} is free",
        ids.join(", "),
        free.iter()
            .map(|g| format!("GPU {}", g.index))
            .collect::<Vec<_>>()
            .join(", ")
    );
    f.headline = format!(
        "{} {} nearly full with no process listed, while {} {} free: processes the table does not show hold them (another job's or another container's, or a leftover of an earlier run), so a job started there runs out of memory. Find the owner before using them; meanwhile use the free GPU (CUDA_VISIBLE_DEVICES={}).",
        taken.join(" and "),
        if held.len() == 1 { "is" } else { "are" },
        open.join(" and "),
        if free.len() == 1 { "is" } else { "are" },
        visible.join(",")
    );
    f.chain.push(format!(
        "a job started on {} runs out of memory",
        ids.join(" or ")
    ));
    f.chain.push(
        "processes the table does not list hold that memory (another job's, another container's, or left over)"
            .to_owned(),
    );
    f.explanation = "nvidia-smi's used figure counts every process's memory; the process rows list only what it can see and name, and a paste cut after the GPU rows lists none. Some GPUs of a host nearly full while another sits free, with nothing of the user's running, is memory other processes hold: jobs of other users placed on GPUs a scheduler did not give them, another container's, or a leftover.".to_owned();
    push_actions(&mut f, held);
    f.actions.push(Action::advice(
        format!(
            "meanwhile, run on the free GPU: CUDA_VISIBLE_DEVICES={}",
            visible.join(",")
        ),
        None,
    ));
    f.confidence = confidence(&f, 0.3, 0.8).min(0.6);
    f
}
