//! GPUs in an exclusive compute mode (`E. Process`, `E. Thread`), idle (0%
//! `GPU-Util`), with more memory in use than an idle GPU shows and no
//! process listed: a CUDA context is held on each, and in that mode no
//! other process can open the GPU until its holder exits. The NVIDIA forum
//! paste of four TITAN X (batch P 1034, driver 390.30) after the user's
//! program was killed: `602MiB / 12196MiB |      0%   E. Process |` on
//! GPU 0, 536–600 MiB on GPUs 1–3, the process block cut after its header.
//! An idle GPU with no context shows a few MiB (fixtures/real/647's GTX 1080
//! in `E. Process` mode: `1MiB`), so a few hundred MiB is a context's worth,
//! far below the quarter of the card the table-only note asks for.
//! An error (the GPU is closed to everyone else) at a modest confidence: the
//! table does not say whose the context is (a leftover of the killed run, a
//! process in another container, a live job idle between steps). A note
//! when another exclusive GPU of the table is free: on a shared node a
//! scheduler gives each job its own GPUs, so one held GPU beside free ones
//! is as likely another job's (fixtures/real/501's V100s: GPU 0 at
//! `1092MiB`, GPU 1 at `10MiB`).

use crate::correlate::{Gpu, Incident};
use crate::rules::support::{IDLE_GPU_MAX_MIB, confidence, mib};
use crate::rules::{Category, Finding, Severity};

use super::{Ended, cite_listing_and_end, listing_note, push_actions};

/// Whether `g` is an idle exclusive-mode GPU holding a context that no
/// process row explains.
pub(super) fn held(incident: &Incident, g: &Gpu) -> bool {
    let exclusive = g
        .compute_mode
        .as_deref()
        .is_some_and(|m| m.starts_with("E. "));
    exclusive
        && g.utilization_pct == Some(0)
        && g.memory_used_mib.is_some_and(|u| u > IDLE_GPU_MAX_MIB)
        && incident.processes_on(g.index).next().is_none()
}

pub(super) fn finding(incident: &Incident, held: &[&Gpu], ended: Option<Ended>) -> Finding {
    // Another exclusive GPU of the table free: a shared node's other job.
    let free_beside = incident.gpus.iter().any(|g| {
        g.compute_mode
            .as_deref()
            .is_some_and(|m| m.starts_with("E. "))
            && g.memory_used_mib.is_some_and(|u| u <= IDLE_GPU_MAX_MIB)
    });
    let severity = if free_beside {
        Severity::Info
    } else {
        Severity::Error
    };
    let mut f = Finding::new(
        super::META.id,
        Category::GpuMemoryHeldByOtherProcess,
        severity,
    );
    let (note, listing) = listing_note(incident);
    let mut parts = Vec::new();
    for g in held {
        f.entities.gpus.insert(g.index);
        let mode = g.compute_mode.as_deref().unwrap_or("E. Process");
        let printed = match (g.memory_used_mib, g.memory_total_mib) {
            (Some(u), Some(t)) => format!("{u}MiB / {t}MiB"),
            (Some(u), None) => format!("{u}MiB"),
            _ => String::new(),
        };
        if let Some(span) = g.usage_span.or(g.spans.last().copied()) {
            f.evidence(
                span,
                format!(
                    "GPU {} has {printed} in use at 0% GPU-Util in {mode} mode; {note}",
                    g.index
                ),
            );
        }
        parts.push(format!("GPU {} ({})", g.index, mib(g.memory_used_mib)));
    }
    cite_listing_and_end(&mut f, listing, note, ended.as_ref());
    let gpus: Vec<String> = held.iter().map(|g| format!("GPU {}", g.index)).collect();
    f.condition(
        "the GPU is in an exclusive compute mode: one context closes it to every other process",
        true,
    );
    f.condition(
        format!(
            "idle (0% GPU-Util) with more memory in use than an idle GPU shows ({IDLE_GPU_MAX_MIB} MiB), and no process listed for it"
        ),
        true,
    );
    f.condition(
        "no other exclusive GPU of the table is free (a shared node's scheduler would give another job its own)",
        !free_beside,
    );
    f.condition(
        "the run that used the GPU ended before the table was taken",
        ended.is_some(),
    );
    f.condition(
        "a process table names the holder (missing: fuser -v /dev/nvidia*)",
        false,
    );
    f.title = format!(
        "{} held in exclusive-process mode with no process listed",
        gpus.join(", ")
    );
    let each = if held.len() == 1 {
        "it holds"
    } else {
        "each holds"
    };
    f.headline = format!(
        "{} {} in an exclusive compute mode and {each} a CUDA context's worth of memory while idle, with no process listed: no other process can open {} until the holder exits. Whose the context is the table does not show (a leftover of a run that was killed, its children, a process in another container, or a live job idle between steps); find it before starting the next job.",
        parts.join(", "),
        if held.len() == 1 { "is" } else { "are" },
        if held.len() == 1 { "it" } else { "them" },
    );
    f.chain.push(format!(
        "a context holds {} in exclusive-process mode (inferred from memory in use at 0% GPU-Util)",
        gpus.join(", ")
    ));
    f.chain.push("any other process that asks for the GPU gets `all CUDA-capable devices are busy or unavailable` (cudaErrorDevicesUnavailable, 46)".to_owned());
    f.explanation = "In exclusive-process mode a GPU takes one CUDA context at a time. An idle GPU with no context shows a few MiB in use (a GTX 1080's 1 MiB, a V100's 10 MiB, a K40m's 74 MiB); a few hundred MiB at 0% utilisation is a context someone still holds, and nvidia-smi lists no process for it when the holder is in another container or PID namespace or the process block is cut from the paste.".to_owned();
    push_actions(&mut f, held);
    f.confidence = confidence(&f, 0.3, 0.8);
    f
}
