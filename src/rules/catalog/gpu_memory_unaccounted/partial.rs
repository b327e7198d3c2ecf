//! The listed rows explain a fraction of the used memory: per GPU, used
//! minus the sum of its process rows is memory held by a process the table
//! does not list (another container or PID namespace, or a row cut from the
//! paste). nvidia-smi printed `1996MiB / 1998MiB` with one row, Xorg's
//! `137MiB` (NVIDIA/gpu-rest-engine#10): a full card whose display holds
//! almost nothing of it. A note from the table alone; an error when the
//! card is full (nothing else can start on it) or the run that used it
//! ended before the table.

use crate::correlate::{Gpu, GpuProcess, Incident};
use crate::rules::support::{confidence, holds_working_set, mib};
use crate::rules::{Action, Category, Finding, Severity};

use super::{Ended, MIN_SHARE, push_actions};

/// In use, as a share of the card, at which nothing else can start on it:
/// a CUDA context alone needs a few hundred MiB.
const FULL: f64 = 0.98;

/// A GPU whose process rows account for a fraction of its used memory.
pub(super) struct Partial<'a> {
    gpu: &'a Gpu,
    rows: Vec<&'a GpuProcess>,
    used: u64,
    total: u64,
    listed: u64,
}

impl Partial<'_> {
    fn unlisted(&self) -> u64 {
        self.used - self.listed
    }
    fn full(&self) -> bool {
        self.used as f64 >= FULL * self.total as f64
    }
}

/// `g` with its rows when they leave a working set unaccounted for: at
/// least one row, every row with a figure (Windows prints `N/A` per
/// process, which says nothing of the sum), and used minus the rows at
/// least 1 GiB and a quarter of the card.
pub(super) fn partially_listed<'a>(incident: &'a Incident, g: &'a Gpu) -> Option<Partial<'a>> {
    let rows: Vec<&GpuProcess> = incident
        .gpu_processes
        .iter()
        .filter(|p| p.gpu == Some(g.index))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let listed = rows.iter().map(|p| p.used_mib).sum::<Option<u64>>()?;
    let (used, total) = (g.memory_used_mib?, g.memory_total_mib?);
    if total == 0 || listed >= used || !holds_working_set(used - listed, total, MIN_SHARE) {
        return None;
    }
    Some(Partial {
        gpu: g,
        rows,
        used,
        total,
        listed,
    })
}

/// What the rows name, for the headline: `137 MiB (Xorg)`.
fn listed_text(p: &Partial) -> String {
    let names: Vec<String> = p
        .rows
        .iter()
        .take(3)
        .map(|r| {
            let base = r.name.rsplit('/').next().unwrap_or(&r.name);
            format!("PID {} {base}", r.pid)
        })
        .collect();
    let more = if p.rows.len() > 3 { ", …" } else { "" };
    format!("{} ({}{more})", mib(Some(p.listed)), names.join(", "))
}

pub(super) fn finding(parts: &[Partial], ended: Option<Ended>) -> Finding {
    let full = parts.iter().any(Partial::full);
    let severity = if full || ended.is_some() {
        Severity::Error
    } else {
        Severity::Info
    };
    let mut f = Finding::new(
        super::META.id,
        Category::GpuMemoryHeldByOtherProcess,
        severity,
    );
    let said = cite(&mut f, parts);
    if let Some(e) = &ended {
        if let Some(pid) = e.pid {
            f.entities.pids.insert(pid);
        }
        f.evidence(e.span, format!("{} before the GPU table was taken", e.what));
    }
    let unlisted: u64 = parts.iter().map(Partial::unlisted).sum();
    let gpus: Vec<String> = parts
        .iter()
        .map(|p| format!("GPU {}", p.gpu.index))
        .collect();
    let gpus = gpus.join(", ");
    f.condition(
        "the listed process rows account for a fraction of the used memory",
        true,
    );
    f.condition(
        "nothing in the inputs runs on the GPU (no server log, no model server in ps)",
        true,
    );
    f.condition(
        "the GPU is full (at least 98% in use): nothing else can start on it",
        full,
    );
    f.condition(
        format!(
            "a process table names the holder (missing: {} on the host)",
            crate::rules::support::COMPUTE_APPS
        ),
        false,
    );
    f.title = format!(
        "{gpus}: {} held by processes the table does not list",
        mib(Some(unlisted))
    );
    f.headline = format!(
        "{}: about {} is held by processes the table does not list (in another container or PID namespace, or rows cut from the paste){}. The listed processes are not the holder; find the one that is before starting another job there.",
        said.join("; "),
        mib(Some(unlisted)),
        if full {
            ", and the card is full, so nothing else can start on it"
        } else {
            ""
        }
    );
    f.chain.push(format!(
        "{gpus} memory is not free for the next job{}",
        if full { ": the card is full" } else { "" }
    ));
    f.chain.push(format!(
        "a process the table does not list holds about {} (another container, another PID namespace, or a row cut from the paste)",
        mib(Some(unlisted))
    ));
    f.explanation = "nvidia-smi's used figure counts every process's memory; its process rows list only the processes it can see and name. Used minus the rows is memory of a process in another container or PID namespace (a first server, a job of another user), or of rows left out of the paste. A display's few hundred MiB are not the reason a card is full.".to_owned();
    let held: Vec<&Gpu> = parts.iter().map(|p| p.gpu).collect();
    push_actions(&mut f, &held);
    f.actions.push(Action::advice(
        "if the holder is an earlier instance of the same server, stop it or start the new one on another GPU (CUDA_VISIBLE_DEVICES): a small card fits one server",
        None,
    ));
    f.confidence = confidence(&f, 0.3, 0.8);
    f
}

/// Cites each GPU's figures and its listed rows on `f`; says, per GPU, what
/// the rows hold, for the headline.
fn cite(f: &mut Finding, parts: &[Partial]) -> Vec<String> {
    let mut said = Vec::new();
    for p in parts {
        let g = p.gpu;
        f.entities.gpus.insert(g.index);
        let share = p.unlisted() as f64 * 100.0 / p.total as f64;
        if let Some(span) = g.spans.last() {
            f.evidence(
                *span,
                format!(
                    "GPU {} has {}MiB / {}MiB in use; its listed processes hold {}: {} ({share:.0}% of the card) is held by processes the table does not list",
                    g.index,
                    p.used,
                    p.total,
                    mib(Some(p.listed)),
                    mib(Some(p.unlisted()))
                ),
            );
        }
        for r in p.rows.iter().take(3) {
            if let Some(span) = r.spans.last() {
                f.evidence(
                    *span,
                    format!(
                        "a listed process: PID {} holds {}, not the rest",
                        r.pid,
                        mib(r.used_mib)
                    ),
                );
            }
        }
        said.push(format!(
            "GPU {} has {}MiB / {}MiB in use and its listed processes hold {}",
            g.index,
            p.used,
            p.total,
            listed_text(p)
        ));
    }
    said
}
