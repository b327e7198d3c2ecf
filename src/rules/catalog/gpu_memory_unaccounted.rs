//! `gpu-memory-unaccounted`: a GPU with a large share of its memory in use,
//! no process listed for it, and nothing of a workload in the inputs: the
//! memory of a run that ended (an interrupted job's workers, a stopped
//! server's engine, a notebook's kernel) or of a process in another
//! container. A note (info) from the table alone (a live job's
//! preallocation looks the same), an error when the run's end is logged
//! before it.
//! Advice only: there is no PID to act on.

use crate::correlate::{Gpu, Incident, is_serving};
use crate::model::{ProcessListingKind, ServerEventKind, Uvicorn};
use crate::rules::support::{confidence, mib};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: GpuMemoryUnaccounted = GpuMemoryUnaccounted;

pub struct GpuMemoryUnaccounted;

/// The share of the card in use that is a loaded model or a job's working
/// set, not a desktop's: a quarter, since this rule reads a table alone
/// (beside a failure, gpustat's `(null)` owner asks for 5%).
const MIN_SHARE: f64 = 0.25;

static META: RuleMeta = RuleMeta {
    id: "gpu-memory-unaccounted",
    category: Category::StaleServingInstance,
    severity: Severity::Error,
    summary: "a GPU holds much of its memory with no process listed and nothing of a workload in the inputs",
    anchors: &[],
    doc: r#"
## What it means
nvidia-smi shows a GPU with a large share of its memory in use (at least a
quarter of the card and 1 GiB), but no process on it: the process block says
`No running processes found`, is empty, or is not in the paste at all, and
the inputs show nothing else running (no server log, no model server in
`ps`, no loader's own lines of the memory it put on the GPU: llama.cpp's
`CUDA0 buffer size = … MiB`, vLLM's `Loading model weights took`,
SGLang's `Load weight end`). Memory is held by a process nobody is looking at: most often what a
run left behind when it ended (workers of an interrupted job, the engine of
a stopped server, a notebook's kernel), or a process in another container
or PID namespace, which nvidia-smi inside a container does not list.

The same holds for the part of a GPU's memory its process rows do not
explain: used minus the sum of the listed rows, per GPU. A card at
`1996MiB /  1998MiB` whose only row is Xorg's `137MiB` is full of a process
the table does not list (a first server in another container or PID
namespace, or a row cut from the paste); the display is not the holder.
That reading names the category `gpu-memory-held-by-other-process`, and a
full card (at least 98% in use) is an error by itself: nothing else can
start on it. Rows printed `N/A` (Windows) say nothing of the sum and are
not read.

A GPU in an exclusive compute mode (`E. Process`, `E. Thread`) takes one
CUDA context at a time, so there the share does not matter: idle (0%
`GPU-Util`) with more memory in use than an idle GPU of any generation
shows with no context (128 MiB: a K40m shows 74 MiB, a V100 10 MiB, a GTX
1080 1 MiB) and no process listed, it holds a context, and no other process
can open it (`all CUDA-capable devices are busy or unavailable`). That
reading names `gpu-memory-held-by-other-process` as an error at a modest
confidence (whose the context is the table does not show, and
`fuser -v /dev/nvidia*` settles it), and as a note when another exclusive
GPU of the table is free: on a shared node a scheduler gives each job its
own GPUs, so one held GPU beside free ones is as likely another job's.

The table alone cannot tell such memory from a live job's own
preallocation (a vLLM server idle between requests keeps 90% of its
cards), so alone it is a note (info) that names the command that settles it.
When the inputs also have `fuser -v /dev/nvidia*` over more than the held
GPUs, a process that has the held GPU's device node open and no other
GPU's is its likely holder (a desktop session opens every GPU's node; a
job opens the GPUs it uses): the finding names those processes and is
`gpu-memory-held-by-other-process`, an error, advice only (fuser does not
say how much each holds).
When the inputs log the run's end before the table (uvicorn's `Finished
server process [N]`, a `KeyboardInterrupt`, or a process asked about twice
at a prompt, `ps aux | grep PID`, listed by the first answer and gone from
the later one) and nothing after it, the memory outlived its run: an error.

## Why it happens
A job stopped with Ctrl+C or killed leaves child processes (data-loader or
tensor-parallel workers, a vLLM `EngineCore`) that keep their CUDA context;
a crashed program's process stays until it is reaped; a notebook kernel
keeps its tensors until it is restarted; a container's processes are not
visible from another container.

## How to confirm
`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`
on the host (not inside a container) lists the holders; `fuser -v
/dev/nvidia*` (or `lsof /dev/nvidia*`) names the processes that have the GPU
open; `ps -o pid,ppid,lstart,etimes,cmd -p PID` tells a leftover (PPID 1, a
start time before the run you stopped) from a live job.

## How to fix
End the leftover processes of the old run (restart the notebook kernel,
stop the old server's process group) once the commands above name them and
you are sure they are not a live job; then check the memory is free.

## Safety
Advice only: the inputs name no process, so no step signals anything.
"#,
};

impl Rule for GpuMemoryUnaccounted {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // A process row the merge could not place on a GPU may be the
        // holder of any of them.
        if incident.gpu_processes.iter().any(|p| p.gpu.is_none()) {
            return;
        }
        let Some(ended) = nothing_running(incident) else {
            return;
        };
        // Exclusive-mode GPUs holding a context while idle: closed to
        // everyone else, whatever share of the card the context is.
        let closed: Vec<&Gpu> = incident
            .gpus
            .iter()
            .filter(|g| exclusive::held(incident, g))
            .collect();
        if !closed.is_empty() {
            out.push(exclusive::finding(incident, &closed, ended.clone()));
        }
        let held: Vec<&Gpu> = incident
            .gpus
            .iter()
            .filter(|g| !closed.iter().any(|c| c.index == g.index))
            .filter(|g| {
                unaccounted(g)
                    && !incident
                        .gpu_processes
                        .iter()
                        .any(|p| p.gpu == Some(g.index))
            })
            .collect();
        if !held.is_empty() {
            let free = taken::free_beside(incident, &held);
            out.push(finding(incident, &held, ended.clone(), &free));
        }
        // GPUs with rows that explain only a fraction of their memory.
        let parts: Vec<_> = incident
            .gpus
            .iter()
            .filter(|g| !held.iter().chain(&closed).any(|h| h.index == g.index))
            .filter_map(|g| partial::partially_listed(incident, g))
            .collect();
        if !parts.is_empty() {
            out.push(partial::finding(&parts, ended));
        }
    }
}

/// Whether `g` holds a large share of its memory.
fn unaccounted(g: &Gpu) -> bool {
    match (g.memory_used_mib, g.memory_total_mib) {
        (Some(used), Some(total)) if total > 0 => {
            crate::rules::support::holds_working_set(used, total, MIN_SHARE)
        }
        _ => false,
    }
}

/// A loader's own account of the device memory it took (catalog rows):
/// llama.cpp's `CUDA0 buffer size = … MiB` (weights, KV cache, compute
/// buffer), vLLM's `Loading model weights took …`, SGLang's `Load weight
/// end. … avail mem=…`. The paste shows whose the memory is: a workload.
/// (llama.cpp's `KV self size` is not one: a CPU-only load prints it too.)
const LOADER_ROWS: &[&str] = &[
    "stacks-llamacpp.device-buffer",
    "stacks-vllm.weights-loaded",
    "stacks-sglang.load-weight-end",
];

/// `Some` when the inputs show nothing of a workload that could own the
/// memory: no journal or unit, no model server in `ps`, no loader's own
/// device-buffer lines, and no server log, or one that ends (uvicorn's
/// `Finished server process [N]`, a `KeyboardInterrupt`) before the GPU
/// table: `Some(Some(that end))`.
fn nothing_running(incident: &Incident) -> Option<Option<Ended>> {
    let facts = &incident.facts;
    if !facts.journal.is_empty()
        || !facts.unit_statuses.is_empty()
        || !facts.kernel_events.is_empty()
        || facts.ps.iter().any(|p| is_serving(&p.cmd, p.ppid))
        || LOADER_ROWS
            .iter()
            .any(|id| incident.known(id).next().is_some())
    {
        return None;
    }
    // A process asked about twice at a prompt, gone by the later answer,
    // and a GPU table after it: the memory outlived that process.
    if let Some(end) = asked::gone(incident) {
        let after = |s: &Span| s.source == end.span.source && s.line > end.span.line;
        let spans = || incident.gpus.iter().flat_map(|g| &g.spans);
        if spans().next().is_some() && spans().all(after) {
            return Some(Some(end));
        }
    }
    if facts.server_events.is_empty() {
        return Some(None);
    }
    let end = facts.server_events.iter().rev().find_map(|e| {
        let what = match &e.kind {
            ServerEventKind::Uvicorn(Uvicorn::FinishedProcess { pid }) => {
                (format!("the server, PID {pid}, finished"), Some(*pid))
            }
            ServerEventKind::Exception(x) if x.name == "KeyboardInterrupt" => (
                "the run was interrupted (KeyboardInterrupt)".to_owned(),
                None,
            ),
            _ => return None,
        };
        Some(Ended {
            what: what.0,
            pid: what.1,
            span: e.span,
        })
    })?;
    // The table after the end, in the same input, and the log silent
    // after it: the memory outlived the run.
    let after = |s: &Span| s.source == end.span.source && s.line > end.span.line;
    let gpus_after = incident.gpus.iter().flat_map(|g| &g.spans).all(after);
    let log_ends = facts.server_events.iter().all(|e| !after(&e.span));
    (gpus_after && log_ends).then_some(Some(end))
}

/// The end of a run the inputs log before the GPU table.
#[derive(Clone)]
struct Ended {
    what: String,
    pid: Option<u32>,
    span: Span,
}

/// What the process listings say of the held GPUs, for the finding.
fn listing_note(incident: &Incident) -> (&'static str, Option<Span>) {
    let listing = incident.facts.process_listings.last();
    match listing.map(|l| l.kind) {
        Some(ProcessListingKind::NoneFound) => (
            "the process block says no process runs on it",
            listing.map(|l| l.span),
        ),
        Some(ProcessListingKind::EmptyBlock) => (
            "the process block is empty (processes it cannot resolve: another PID namespace)",
            listing.map(|l| l.span),
        ),
        Some(ProcessListingKind::Rows) => (
            "the process table lists no process on it",
            listing.map(|l| l.span),
        ),
        None => ("the inputs have no process rows for it", None),
    }
}

fn finding(incident: &Incident, held: &[&Gpu], ended: Option<Ended>, free: &[&Gpu]) -> Finding {
    // The table alone cannot tell a leftover from a live job's own (a note
    // naming the command that settles it); a run that ends before the table
    // makes it a leftover; fuser's holders of only its node, its holders.
    let holders = device_files::holders(incident, held);
    if ended.is_none() && !free.is_empty() && holders.is_empty() {
        return taken::finding(incident, held, free);
    }
    let (category, severity) = match (holders.is_empty(), ended.is_some()) {
        (false, _) => (Category::GpuMemoryHeldByOtherProcess, META.severity),
        (true, true) => (META.category, META.severity),
        (true, false) => (META.category, Severity::Info),
    };
    let mut f = Finding::new(META.id, category, severity);
    device_files::cite(&mut f, &holders);
    let (note, listing) = listing_note(incident);
    let mut parts = Vec::new();
    for g in held {
        f.entities.gpus.insert(g.index);
        let amount = format!("{} of {}", mib(g.memory_used_mib), mib(g.memory_total_mib));
        // The figures also as the table prints them, for a search.
        let printed = match (g.memory_used_mib, g.memory_total_mib) {
            (Some(u), Some(t)) => format!(" ({u}MiB / {t}MiB)"),
            _ => String::new(),
        };
        // A GPU that computes runs something: a live job, or (on a wedged
        // GPU) a kernel that never returned.
        let live = match g.utilization_pct {
            Some(u) if taken::computes(g) => {
                format!(
                    "; it computes ({u}% GPU-Util): something still runs there (a live job, or a kernel that never returned)"
                )
            }
            _ => String::new(),
        };
        if let Some(span) = g.spans.last() {
            f.evidence(
                *span,
                format!("GPU {} has {amount} in use{printed}; {note}{live}", g.index),
            );
        }
        parts.push(format!("GPU {} ({amount})", g.index));
    }
    cite_listing_and_end(&mut f, listing, note, ended.as_ref());
    let gpus: Vec<String> = held.iter().map(|g| format!("GPU {}", g.index)).collect();
    f.condition(
        "a large share of the GPU's memory is in use with no process listed for it",
        true,
    );
    f.condition(
        "nothing in the inputs runs on the GPU (no server log, no model server in ps)",
        true,
    );
    f.condition(
        "the run that used the GPU ended before the table was taken",
        ended.is_some(),
    );
    if !incident.facts.device_holders.is_empty() {
        f.condition(
            "fuser shows processes holding only the held GPU's device node",
            !holders.is_empty(),
        );
    }
    f.condition(
        "a process table names the holder (missing: nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv)",
        false,
    );
    f.condition(
        "the holder's start time and parent show it left over (missing: ps -o pid,ppid,lstart,etimes,cmd -p PID)",
        false,
    );
    f.title = format!("{} memory held with no process listed", gpus.join(", "));
    let has = if held.len() == 1 { "has" } else { "have" };
    f.headline = match &ended {
        Some(e) => format!(
            "{} still {has} memory in use after {}, and no process is listed for it: processes left over from that run (its workers, its engine) most likely hold it (inferred: the inputs do not name the holder).",
            parts.join(", "),
            e.what
        ),
        None if !holders.is_empty() => device_files::headline(&parts.join(", "), has, &holders),
        None => format!(
            "{} {has} memory in use but no process is listed for it, and nothing in the inputs runs there. Whose it is the paste does not show: a leftover of a run that ended (an interrupted job's workers, a stopped server's engine, a notebook's kernel), a process in another container, or a live job's own preallocation; if nothing should run there, find the holder before starting the next job.",
            parts.join(", ")
        ),
    };
    f.chain.push(format!(
        "{} memory is not free for the next job",
        gpus.join(", ")
    ));
    f.chain.push(if ended.is_some() {
        "a process of the run that ended still holds it (inferred)".to_owned()
    } else {
        "a process the table does not list holds it: a leftover of a run that ended, another container's, or a live job's own (not shown)".to_owned()
    });
    f.explanation = "A CUDA process keeps its memory until it exits. The table shows the memory taken but names no one: a process of a run that ended without all of its processes (workers, an engine core, a notebook kernel), or one in another container or PID namespace, which nvidia-smi inside a container does not list.".to_owned();
    push_actions(&mut f, held);
    f.confidence = confidence(&f, 0.3, 0.8);
    f
}

/// The steps: list the holders on the host, name the processes that have
/// the GPUs open, tell a leftover from a live job before ending anything.
/// Cites the process listing that shows no holder and the end of the run
/// that used the GPU, where the inputs have them.
fn cite_listing_and_end(f: &mut Finding, listing: Option<Span>, note: &str, ended: Option<&Ended>) {
    if let Some(span) = listing {
        f.evidence(span, note);
    }
    if let Some(e) = ended {
        if let Some(pid) = e.pid {
            f.entities.pids.insert(pid);
        }
        f.evidence(e.span, format!("{} before the GPU table was taken", e.what));
    }
}

fn push_actions(f: &mut Finding, held: &[&Gpu]) {
    let devices: Vec<String> = held
        .iter()
        .map(|g| format!("/dev/nvidia{}", g.index))
        .collect();
    f.actions.push(Action::advice(
        "list the processes that hold the memory, on the host (not inside a container)",
        Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
    ));
    f.actions.push(Action::advice(
        "name the processes that have the GPU open",
        Some(&format!("fuser -v {}", devices.join(" "))),
    ));
    f.actions.push(Action::advice(
        "tell a leftover (PPID 1, started before the run you stopped) from a live job before ending anything; end the old run's processes (restart a notebook kernel, stop the old server's process group), then check the memory is free",
        Some("ps -o pid,ppid,lstart,etimes,cmd -p PID"),
    ));
}

mod asked;
mod device_files;
mod exclusive;
mod partial;
mod taken;
#[cfg(test)]
mod tests;
