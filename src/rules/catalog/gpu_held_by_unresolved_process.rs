//! `gpu-held-by-unresolved-process`: nvidia-smi lists processes that hold
//! GPU memory but whose name it cannot resolve (`Unknown Error`): processes
//! that died without being reaped (zombies) and still hold their memory;
//! or gpustat shows memory in use with `(null)` for its processes (the
//! driver's PIDs resolve to nothing here: a process killed but not yet
//! released, or one in another PID namespace); or `ps` says a process on
//! the GPU is stopped (`T`): it holds its memory and runs nothing. Advice
//! only.

mod no_owner;
mod null_owner;
mod stopped;

use crate::correlate::{GpuProcess, Incident};
use crate::rules::support::{confidence, mib};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: GpuHeldByUnresolvedProcess = GpuHeldByUnresolvedProcess;

pub struct GpuHeldByUnresolvedProcess;

/// The name nvidia-smi prints for a process whose name the driver cannot
/// read any more.
const UNRESOLVED: &str = "Unknown Error";

static META: RuleMeta = RuleMeta {
    id: "gpu-held-by-unresolved-process",
    category: Category::GpuMemoryHeldByOtherProcess,
    severity: Severity::Error,
    summary: "GPU memory held by processes that cannot release it: ones the tools cannot resolve (nvidia-smi's `Unknown Error`, gpustat's `(null)`, nvtop's `N/A`: dead but unreleased, or in another PID namespace), or stopped ones (ps state `T`)",
    anchors: &[UNRESOLVED, null_owner::NO_PROCESS],
    doc: r#"
## What it means
nvidia-smi's process table lists a PID with memory in use whose process
name reads `Unknown Error`: the driver still accounts the memory to the
process, but can no longer resolve the process itself. It is a process that
exited (often killed) without being reaped, a zombie or one stuck on its way
out, and its GPU memory is not free for anyone else.

## Why it happens
The process died while a child (a data-loader worker, an I/O process) or its
parent still holds the process's CUDA context: the memory is released only
when every process sharing the context is gone and the dead one is reaped.
A process stuck in the driver (`D` state) after a GPU fault looks the same.

gpustat says it differently: memory in use and `(null)` where the processes
belong (`[6] NVIDIA A100 80GB PCIe | 52'C, 100 % | 10151 / 81920 MB |
(null)`): NVML reports PIDs that resolve to no process here. Either the
process was killed and its memory is not yet released (`kill` answers "no
such process"), or it runs in another container or PID namespace (the
driver reports host PIDs).

A process on the GPU that `ps` shows stopped (STAT `T` or `Tl`: Ctrl+Z,
SIGSTOP; `t`: a debugger) holds its memory the same way while it runs
nothing: nvidia-smi's row of the PID (`|    0   N/A  N/A      1395      C
python      25081MiB |`) joined with its `ps` row (`thomased  1395 … pts/2
Tl May25 147:37 python train.py …`) names the holder, its memory, its GPU
and since when it exists (its START column).

nvtop says it its way: a process row with memory in use and `N/A` for
the user and the command (`5986  N/A  0 Compute  637MB …  N/A`), a PID it
cannot read: gone from this PID namespace (`kill` answers "No such
process") while the driver still accounts its memory, or in another
container. `fuser -v /dev/nvidia*` in the same paste names who still has
the GPU: the processes that map its device node (`F...m`) other than the
desktop (Xorg, the compositor) and the viewers, most often children of the
dead run that outlived their parent. With them it is an error naming
their PIDs (end them, not the PID nvtop shows); without them a warning
(nvtop also prints `N/A` for live processes it cannot read).

## How to confirm
`ps -o pid,ppid,stat,lstart,cmd -p PID`: state `Z` (zombie) or `D`, or no
process at all; `fuser -v /dev/nvidia*` lists the live processes that still
have the GPU open (the dead one's children or parent).

## How to fix
A zombie cannot be killed: end the process that keeps it (its parent, or
the child still holding the device, found with `fuser`) after checking it is
the one you mean, so the zombie is reaped and the memory released. For
gpustat's `(null)`, first get the PIDs with `nvidia-smi
--query-compute-apps=pid,used_memory --format=csv`, on the host when in a
container, and ask their owner to stop them. A process
in `D` state, or memory that stays held with no process left, needs a GPU
reset (`nvidia-smi -r -i N`) or a reboot. The other processes of the table
are live jobs and are not part of this. A stopped process is resumed
(`kill -CONT PID`) to finish, or ended once its owner or the scheduler
confirms no live job needs it (it acts on SIGTERM only once continued).

## Safety
Advice only: a PID the driver cannot resolve cannot be verified, so no step
signals it.
"#,
};

impl Rule for GpuHeldByUnresolvedProcess {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        if let Some(f) = null_owner::finding(incident) {
            out.push(f);
        }
        if let Some(f) = stopped::finding(incident) {
            out.push(f);
        }
        if let Some(f) = no_owner::finding(incident) {
            out.push(f);
        }
        let held: Vec<_> = incident
            .gpu_processes
            .iter()
            .filter(|p| p.name.trim() == UNRESOLVED && p.used_mib.is_some_and(|m| m > 0))
            .collect();
        if held.is_empty() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        let parts = held_evidence(&mut f, &held);
        let in_ps = held
            .iter()
            .filter_map(|p| incident.facts.ps.iter().find(|r| r.pid == p.pid))
            .collect::<Vec<_>>();
        for r in &in_ps {
            f.evidence(r.span, format!("ps: PID {} `{}`", r.pid, r.cmd));
        }
        f.condition(
            "nvidia-smi accounts memory to processes it cannot name",
            true,
        );
        f.condition(
            "ps shows their state (Z: zombie, D: stuck in the driver)",
            !in_ps.is_empty(),
        );
        let live = incident
            .gpu_processes
            .iter()
            .filter(|p| p.name.trim() != UNRESOLVED)
            .count();
        f.title = format!(
            "GPU memory held by {} process(es) nvidia-smi cannot resolve (`{UNRESOLVED}`)",
            held.len()
        );
        let (verb, them, what) = if held.len() == 1 {
            (
                "holds",
                "it",
                "a dead process not yet reaped, whose memory is not free until it is",
            )
        } else {
            (
                "hold",
                "them",
                "dead processes not yet reaped, whose memory is not free until they are",
            )
        };
        f.headline = format!(
            "{} still {verb} GPU memory although nvidia-smi shows no process name for {them} (`{UNRESOLVED}`): {what}.",
            parts.join(", ")
        );
        f.chain
            .push("the GPU memory they hold is not available to new jobs".to_owned());
        f.chain.push(
            "the processes died without being reaped (zombies), or are stuck in the driver"
                .to_owned(),
        );
        f.explanation = format!(
            "`{UNRESOLVED}` in the process-name column means the driver still accounts memory to a PID whose process it cannot read: it exited but is not reaped, because its parent or a child sharing its CUDA context is still alive. {}",
            if live > 0 {
                format!(
                    "The {live} other process(es) of the table are live jobs and are not part of this."
                )
            } else {
                String::new()
            }
        );
        let pids: Vec<String> = held.iter().map(|p| p.pid.to_string()).collect();
        f.actions.push(Action::advice(
            "check each PID: state Z (zombie) or D (stuck in the driver), and its parent",
            Some(&format!(
                "ps -o pid,ppid,stat,lstart,cmd -p {}",
                pids.join(",")
            )),
        ));
        f.actions.push(Action::advice(
            "find the live processes that still have the GPU open (the dead one's parent or children); a plain kill of a zombie does nothing: end the process that keeps it, after checking it is the one you mean",
            Some("fuser -v /dev/nvidia*"),
        ));
        f.actions.push(Action::advice(
            "if the memory stays held with nothing left to end, reset the GPU or reboot the node",
            None,
        ));
        f.confidence = confidence(&f, 0.6, 0.85);
        out.push(f);
    }
}

/// Names `p`'s PID and GPU on `f`; returns ` on GPU g` (empty when the row
/// has no GPU) for the finding's text.
fn name_holder(f: &mut Finding, p: &GpuProcess) -> String {
    f.entities.pids.insert(p.pid);
    match p.gpu {
        Some(g) => {
            f.entities.gpus.insert(g);
            format!(" on GPU {g}")
        }
        None => String::new(),
    }
}

/// Cites each held process's nvidia-smi row and names its PID and GPU on
/// `f`; returns one `PID n (memory on GPU g)` part per process, for the
/// headline.
fn held_evidence(f: &mut Finding, held: &[&GpuProcess]) -> Vec<String> {
    let mut parts = Vec::new();
    for p in held {
        let on = name_holder(f, p);
        parts.push(format!("PID {} ({}{on})", p.pid, mib(p.used_mib)));
        if let Some(span) = p.spans.first() {
            f.evidence(
                *span,
                format!(
                    "PID {} holds {}{on}, but nvidia-smi cannot resolve its name",
                    p.pid,
                    mib(p.used_mib)
                ),
            );
        }
    }
    parts
}
