//! `cuda-oom-at-context-creation`: a raw CUDA call (context creation,
//! NCCL's buffers, cuBLAS) found no memory: the GPU was already full,
//! usually of another process.

use crate::catalogs::Via;
use crate::correlate::{Gpu, Incident};
use crate::model::{Message, OomSource, ServerEvent, ServerEventKind};
use crate::rules::support::holders::{Holders, held_mib};
use crate::rules::support::server::in_graph_capture;
use crate::rules::support::{cite_gpu_memory, confidence, distinct, mib};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: CudaOomAtContextCreation = CudaOomAtContextCreation;

pub struct CudaOomAtContextCreation;

/// CUDA's out-of-memory code (cudaErrorMemoryAllocation /
/// CUDA_ERROR_OUT_OF_MEMORY, 2) as the CUDA catalog reads it: by name, by
/// number, or by its string in any wrapper (`CUDA error: out of memory`,
/// NCCL's `Cuda failure 'out of memory'`, Caffe's `(2 vs. 0)  out of memory`).
const ALLOCATION: &str = "cuda.memory-allocation";
/// The CUDA catalog's wrappers for TensorRT and TensorRT-LLM.
const TENSORRT_WRAPPERS: &[&str] = &[
    "cuda.wrapper.trtllm",
    "cuda.wrapper.tensorrt",
    "cuda.wrapper.tensorrt-7",
];

/// A GPU this full has no room for another CUDA context.
const FULL: f64 = 0.9;

static META: RuleMeta = RuleMeta {
    id: "cuda-oom-at-context-creation",
    category: Category::CudaOom,
    severity: Severity::Critical,
    summary: "a raw CUDA call found no GPU memory (context creation, NCCL buffers): the GPU was already full",
    // The catalog row's anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
Not PyTorch's allocator but a raw CUDA call failed for lack of memory:
`RuntimeError: CUDA error: out of memory` (creating the CUDA context,
`cudaSetDevice`, `mem_get_info`, a cuBLAS workspace) or NCCL's `NCCL WARN
Cuda failure 'out of memory'` while allocating its buffers. Typical at
start-up, when the GPU is already (nearly) full.

## Why it happens
Another process or a leftover server instance fills the GPU; too many
processes share one GPU (each CUDA context costs 0.3–1 GiB); MPS or MIG
limits; NCCL buffers at high tensor parallelism on nearly full GPUs.

## How to confirm
nvidia-smi: `memory.used` close to `memory.total` on the GPU, and who holds
it.

## How to fix
Free the GPU (stop the holder's unit after confirming whose it is), or run
fewer processes per GPU. Lowering `NCCL_BUFFSIZE` is a last resort.

## Safety
Stopping a unit and signalling a process need confirmation and are re-checked
before they run.
"#,
};

impl Rule for CudaOomAtContextCreation {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let typed: Vec<&ServerEvent> = incident
            .facts
            .server_events
            .iter()
            .filter(|e| {
                matches!(&e.kind, ServerEventKind::CudaOom(o) if o.source != OomSource::Allocator)
            })
            .collect();
        let lines = oom_lines(incident, &typed);
        let Some(first) = lines.first() else {
            return;
        };
        let event = typed.iter().copied().find(|e| e.span == first.span);
        let framework = event.map_or(crate::model::Framework::Unknown, |e| e.framework);
        let holders = Holders::of_run(incident, event, framework);
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = lines.len() as u32;
        let nccl = lines.iter().any(|m| m.text.contains("Cuda failure"));
        for (m, n) in distinct(lines.iter().copied()).into_iter().take(3) {
            f.evidence(m.span, format!("a CUDA call found no memory ({n}x)"));
        }
        if let Some((u, _, _)) = &holders.target {
            f.entities.units.insert(u.clone());
        }
        if let Some(p) = event.and_then(|e| e.pid) {
            f.entities.pids.insert(p);
        }
        // NCCL's `[N]` is the CUDA device the failing call ran on.
        for m in &lines {
            for e in incident
                .facts
                .server_events
                .iter()
                .filter(|e| e.span == m.span)
            {
                if let ServerEventKind::Nccl(n) = &e.kind {
                    f.entities.gpus.extend(n.cuda_dev);
                    f.entities.pids.insert(n.pid);
                }
            }
        }
        let who = holders
            .target
            .as_ref()
            .map_or("the server", |t| t.0.as_str())
            .to_owned();
        let what = if nccl {
            "NCCL could not allocate its buffers"
        } else {
            "a CUDA call (context creation, cuBLAS, mem_get_info) found no memory"
        };
        f.chain.push(format!("{who} failed: {what}"));
        f.condition("a raw CUDA call reported out of memory", true);
        // Nearly full GPUs, the fullest first.
        let mut full: Vec<_> = incident
            .gpus
            .iter()
            .filter(|g| match (g.memory_used_mib, g.memory_total_mib) {
                (Some(u), Some(t)) if t > 0 => u as f64 >= t as f64 * FULL,
                _ => false,
            })
            .collect();
        full.sort_by_key(|g| std::cmp::Reverse(g.memory_used_mib));
        f.condition(
            "nvidia-smi shows a GPU at least 90 % full",
            !full.is_empty(),
        );
        let all: Vec<u32> = incident.gpus.iter().map(|g| g.index).collect();
        let held = holders.most_held(full.iter().map(|g| g.index), 1024);
        match (held, full.first()) {
            (Some((gpu, list)), _) => {
                let held = held_mib(&list);
                let name = holders.report(&mut f, gpu, &list, &all);
                f.title = format!("GPU {gpu} is full: {name} holds {}", mib(Some(held)));
                f.headline = format!(
                    "GPU {gpu} was full, {name} holding {}, so {who} could not even allocate its CUDA context or buffers.",
                    mib(Some(held))
                );
                f.explanation = "Creating a CUDA context or NCCL's buffers needs a few hundred MiB to a few GiB; a GPU another process has filled cannot give it.".to_owned();
            }
            (None, Some(g)) => explain_unlisted_holder(&mut f, g, &who),
            (None, None) => explain_unknown_holder(&mut f, &who, nccl),
        }
        f.confidence = confidence(&f, 0.6, 0.95);
        out.push(f);
    }
}

/// The raw CUDA out-of-memory lines this rule explains, in input order: the
/// typed OOM events outside PyTorch's allocator that no graph capture
/// explains, and the catalog's allocation lines outside TensorRT.
fn oom_lines<'a>(incident: &'a Incident, typed: &[&'a ServerEvent]) -> Vec<&'a Message> {
    let text = |span| {
        incident
            .facts
            .messages
            .iter()
            .find(|m| m.span == span)
            .map_or("", |m| m.text.as_str())
    };
    let mut lines: Vec<_> = typed
        .iter()
        .filter(|e| !in_graph_capture(incident, e.span, text(e.span)))
        // vLLM's graph-capture rule reports an OOM while capturing.
        .filter(|e| crate::rules::support::vllm::graph_capture(incident, e).is_none())
        .filter_map(|e| incident.facts.messages.iter().find(|m| m.span == e.span))
        .collect();
    // TensorRT's and TensorRT-LLM's own out-of-memory lines are
    // `trtllm-cuda-oom`'s to explain (the engine's own reservations); a
    // typed OOM event was judged above.
    for (m, _) in incident.known(ALLOCATION).filter(
        |(_, h)| !matches!(h.via, Via::Wrapper(w) if TENSORRT_WRAPPERS.contains(&w.id.as_str())),
    ) {
        if !typed.iter().any(|e| e.span == m.span) && !in_graph_capture(incident, m.span, &m.text) {
            lines.push(m);
        }
    }
    lines.sort_by_key(|m| m.span);
    lines
}

/// Says on `f` that GPU `g` was full with no listed process to account for
/// it (another container or the host holds it): the title, the headline
/// and how to find the holder.
fn explain_unlisted_holder(f: &mut Finding, g: &Gpu, who: &str) {
    f.category = Category::GpuMemoryHeldByOtherProcess;
    f.entities.gpus.insert(g.index);
    cite_gpu_memory(f, g);
    f.chain.push(format!(
        "GPU {} was full ({} of {}) with no process listed to account for it",
        g.index,
        mib(g.memory_used_mib),
        mib(g.memory_total_mib)
    ));
    f.title = format!(
        "GPU {} was full, held by a process the inputs do not show",
        g.index
    );
    f.headline = format!(
        "GPU {} was full when {who} started, held by a process nvidia-smi does not list here (another container or the host).",
        g.index
    );
    f.explanation = "The memory is in use but no listed process accounts for it: find the holder from the host.".to_owned();
    f.actions.push(Action::advice(
        "list the GPU's processes from the host, outside any container",
        Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
    ));
}

/// Says on `f` that a raw CUDA call (`nccl`: NCCL's buffers) found no
/// memory and the inputs do not show what filled the GPU: the title, the
/// headline and what to check.
fn explain_unknown_holder(f: &mut Finding, who: &str, nccl: bool) {
    f.title = if nccl {
        "NCCL could not allocate its buffers: out of GPU memory".to_owned()
    } else {
        "CUDA out of memory outside PyTorch's allocator".to_owned()
    };
    f.headline = format!(
        "{who} could not allocate GPU memory outside PyTorch ({}); the inputs do not show what filled the GPU.",
        if nccl {
            "NCCL's buffers"
        } else {
            "CUDA context or library workspace"
        }
    );
    f.explanation = "Capture nvidia-smi when it happens to see what fills the GPU; too many processes per GPU, MPS/MIG limits, or NCCL buffers at high TP on nearly full GPUs are the other causes.".to_owned();
    f.actions.push(Action::advice(
        "see what holds the GPU's memory, and run fewer processes per GPU",
        Some("nvidia-smi; nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
    ));
    if nccl {
        // The usual filler is the server itself: a static
        // reservation that leaves NCCL no room.
        f.actions.push(Action::advice(
            "if the server reserves the GPU up front, lower its static fraction so NCCL's buffers fit: TensorRT-LLM kv_cache_free_gpu_mem_fraction, vLLM --gpu-memory-utilization, SGLang --mem-fraction-static",
            None,
        ));
        f.actions.push(Action::advice(
            "as a last resort, lower NCCL_BUFFSIZE for the server",
            None,
        ));
    }
}
