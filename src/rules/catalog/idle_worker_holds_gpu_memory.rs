//! `idle-worker-holds-gpu-memory`: a GPU process table lists a Ray worker
//! that is idle (`ray::IDLE`) yet holds GPU memory beyond a CUDA context:
//! what the tasks it ran left allocated, kept from every later job.

use crate::correlate::Incident;
use crate::rules::support::{COMPUTE_APPS, confidence};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: IdleWorkerHoldsGpuMemory = IdleWorkerHoldsGpuMemory;

pub struct IdleWorkerHoldsGpuMemory;

/// The process titles of a worker pool's idle workers: Ray sets
/// `ray::IDLE` on a worker between tasks (ray-project/ray
/// python/ray/_private/ray_constants.py `WORKER_PROCESS_TYPE_IDLE_WORKER`).
const IDLE_TITLES: &[&str] = &["ray::IDLE"];

/// A CUDA context alone takes 300–600 MiB; from this much an idle worker
/// holds what its finished tasks allocated.
const MIN_HELD_MIB: u64 = 1024;

static META: RuleMeta = RuleMeta {
    id: "idle-worker-holds-gpu-memory",
    category: Category::GpuMemoryHeldByOtherProcess,
    severity: Severity::Error,
    summary: "an idle Ray worker (ray::IDLE) still holds GPU memory after its tasks finished",
    anchors: &[],
    doc: r#"
## What it means
A GPU process table (nvidia-smi's process rows, a compute-apps query)
lists a process titled `ray::IDLE` with 1 GiB or more of GPU memory. Ray
names a worker `ray::IDLE` while it waits for its next task: nothing runs
in it, yet the memory its finished tasks allocated (a model, the PyTorch
caching allocator's blocks, the CUDA context) stays allocated for as long
as the worker lives, and is missing from every later job on the GPU.

## Why it happens
1. Ray reuses workers between tasks: a GPU task that leaves tensors or a
   trainer referenced (a library holding a global, an exception's
   traceback) leaves their memory in the idle worker (ray#29606, Composer
   before 0.12).
2. A CUDA context is never released before the process exits, so even a
   clean task leaves a few hundred MiB.

## How to confirm
`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`
after the jobs finished; `ray list workers` or `ps -o pid,etime,args -p
PID` for the worker.

## How to fix
End the idle workers once no Ray job runs (`ray stop`, or the PID), and
stop them from holding memory: `@ray.remote(num_gpus=1, max_calls=1)` so a
GPU task's worker exits after it, an actor killed with `ray.kill`, or the
library's fix for what it keeps referenced.

## Safety
Advice only: a worker of a running Ray job must not be killed.
"#,
};

impl Rule for IdleWorkerHoldsGpuMemory {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let idle: Vec<_> = incident
            .gpu_processes
            .iter()
            .filter(|p| IDLE_TITLES.contains(&p.name.trim()) && !p.name_truncated)
            .filter(|p| p.used_mib.is_some_and(|m| m >= MIN_HELD_MIB))
            .collect();
        let Some(first) = idle.first() else {
            return;
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        let mut listed = Vec::new();
        for p in &idle {
            let mib = p.used_mib.unwrap_or_default();
            let on = p.gpu.map(|g| format!(" on GPU {g}")).unwrap_or_default();
            if let Some(span) = p.spans.first() {
                f.evidence_marked(
                    *span,
                    format!(
                        "PID {} ({}) is an idle Ray worker and holds {mib} MiB{on}",
                        p.pid, p.name
                    ),
                    format!("{mib}MiB"),
                );
            }
            f.entities.pids.insert(p.pid);
            if let Some(g) = p.gpu {
                f.entities.gpus.insert(g);
            }
            listed.push(format!("PID {} ({mib} MiB{on})", p.pid));
        }
        let list = listed.join(", ");
        let mib = first.used_mib.unwrap_or_default();
        f.condition(
            format!("the idle worker holds {mib} MiB: more than a CUDA context alone ({MIN_HELD_MIB} MiB or more)"),
            true,
        );
        f.chain.push(format!(
            "Ray titles a worker `ray::IDLE` while it waits for a task: {list} runs nothing, yet keeps GPU memory"
        ));
        f.chain.push(
            "Ray reuses workers, so what a finished GPU task left allocated stays with the worker until it exits; every later job on the GPU has that much less"
                .to_owned(),
        );
        f.title = format!("an idle Ray worker holds GPU memory: {list}");
        f.headline = format!(
            "An idle Ray worker ({list}) still holds GPU memory after its tasks finished: the memory stays allocated until the worker exits."
        );
        f.explanation = "Ray keeps workers alive between tasks; a GPU task's allocations (and its CUDA context) live as long as the worker, so an idle worker can hold memory that later jobs need.".to_owned();
        f.actions.push(Action::advice(
            "list what holds the GPU once no job runs",
            Some(COMPUTE_APPS),
        ));
        f.actions.push(Action::advice(
            format!("once no Ray job runs, end the idle worker ({list}): `ray stop` on the node, or the PID"),
            None,
        ));
        f.actions.push(Action::advice(
            "give GPU tasks `@ray.remote(num_gpus=..., max_calls=1)` so their worker exits after each task (or use an actor and `ray.kill` it), and upgrade a library that keeps its trainer referenced",
            None,
        ));
        f.confidence = confidence(&f, 0.6, 0.8);
        out.push(f);
    }
}
