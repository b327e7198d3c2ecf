//! `vllm-cuda-graph-capture-oom`: vLLM ran out of GPU memory while it
//! captured its CUDA graphs, after the weights and the KV cache had taken
//! their share; the graphs need memory outside that budget.

use crate::correlate::Incident;
use crate::model::{CudaOom, Framework, OomSource, ServerEvent, ServerEventKind};
use crate::rules::support::confidence;
use crate::rules::support::server::{
    cite_target, fraction, gib, in_graph_capture, launch_args, target,
};
use crate::rules::support::vllm::{self, GraphCapture, VllmMemory};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

use super::torch_cuda_oom::listed_writer;

pub static RULE: VllmCudaGraphCaptureOom = VllmCudaGraphCaptureOom;

pub struct VllmCudaGraphCaptureOom;

/// How much lower the utilization goes to leave the graphs room: vLLM's own
/// estimate is 1-3 GiB per GPU, a few hundredths of a large GPU.
const STEP: f64 = 0.05;

static META: RuleMeta = RuleMeta {
    id: "vllm-cuda-graph-capture-oom",
    category: Category::CudaGraphCaptureFailure,
    severity: Severity::Critical,
    summary: "vLLM ran out of GPU memory while capturing its CUDA graphs",
    anchors: &[
        vllm::GRAPH_ANCHORS[0],
        vllm::GRAPH_ANCHORS[1],
        vllm::GRAPH_ANCHORS[2],
        vllm::GRAPH_ANCHORS[3],
        vllm::GRAPH_ANCHORS[4],
        vllm::GRAPH_ANCHORS[5],
        vllm::GRAPH_ANCHORS[6],
        "CUDA out of memory",
        "CUDA error: out of memory",
    ],
    doc: r#"
## What it means
After loading the weights and sizing the KV cache (`# GPU blocks: N`,
`Available KV cache memory`), vLLM records CUDA graphs for the decode batch
sizes: `Capturing the model for CUDA graphs.` (≤ 0.6.3), `Capturing
cudagraphs for decoding.` (0.6.4 – 0.8), `Capturing CUDA graph shapes` /
`Capturing CUDA graphs (…)` (V1). The capture raised `torch.OutOfMemoryError:
CUDA out of memory` or `RuntimeError: CUDA error: out of memory`, in a
traceback through `capture_model` / `torch/cuda/graphs.py`, or with no
`Graph capturing finished` after the capture started.

## Why it happens
The graphs, their memory pool and the activations of the largest captured
batch live outside the budget `gpu_memory_utilization x total` that the
weights and the KV cache filled (vLLM warns: "CUDA graphs can take additional
1~3 GiB memory per GPU"). A utilization close to 1, a large `max_num_seqs`
(more and larger graphs), or a GPU that is nearly full with the weights alone
leave too little for them.

## How to confirm
The OOM's traceback (`capture_model`) or the last lines before it
(`Capturing … CUDA graphs`, no `Graph capturing finished`); the OOM's own
figures (`Tried to allocate`, what was free). A process in PyTorch's list
that holds what PyTorch allocated is the server itself (a container's host
PID), not another job.

## How to fix
Start with `--enforce-eager` (no graphs: slower decoding, no capture
memory), or leave the graphs room: lower `--gpu-memory-utilization` (by
0.05 or so) or `--max-num-seqs` (fewer and smaller graphs), or shorten
`--max-model-len`.

## Safety
Advice and flag diffs only; the server's own process is never signalled.
"#,
};

impl Rule for VllmCudaGraphCaptureOom {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits = capture_ooms(incident);
        // The copy with the most detail (the allocator's figures) leads.
        let Some(lead) = hits
            .iter()
            .enumerate()
            .max_by_key(|(i, (_, o, gc))| {
                (
                    o.source == OomSource::Allocator,
                    gc.traceback.is_some(),
                    std::cmp::Reverse(*i),
                )
            })
            .map(|(i, _)| i)
        else {
            return;
        };
        let (event, oom, gc) = &hits[lead];
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = hits.len() as u32;
        f.evidence(event.span, "out of memory while capturing CUDA graphs");
        for span in &gc.started {
            f.evidence(*span, "the CUDA graph capture was under way");
        }
        for (e, _, _) in &hits {
            if let Some(p) = e.pid {
                f.entities.pids.insert(p);
            }
        }
        f.entities.pids.extend(gc.pids.iter().copied());
        f.entities.pids.extend(oom.processes.iter().map(|p| p.pid));
        if let Some(g) = oom.gpu {
            f.entities.gpus.insert(g);
        }
        let tgt = target(incident, Some(*event), Framework::Vllm);
        let unit = cite_target(&mut f, &tgt);
        let who = unit.clone().unwrap_or_else(|| "the vLLM server".to_owned());
        f.chain.push(format!(
            "{who} failed at start-up: it ran out of GPU memory while capturing CUDA graphs"
        ));
        f.condition("a CUDA out-of-memory error", true);
        f.condition(
            "its traceback runs through the graph capture",
            gc.traceback.is_some(),
        );
        f.condition(
            "the log shows a graph capture that started and never finished",
            !gc.started.is_empty(),
        );
        explain_memory(&mut f, oom);
        let mem = VllmMemory::before(incident, event.span);
        let util = launch_args(incident, Framework::Vllm)
            .and_then(|(a, _)| a.gpu_memory_utilization)
            .or(mem.util.map(|u| u.0));
        f.title = "CUDA graph capture ran out of memory".to_owned();
        f.headline = format!(
            "{who} ran out of memory during CUDA graph capture: the graphs need memory outside the KV-cache budget{}; --enforce-eager skips the capture.",
            util.map_or(String::new(), |u| format!(
                " that gpu_memory_utilization {} left",
                fraction(u)
            ))
        );
        f.explanation = "vLLM sizes the KV cache to fill gpu_memory_utilization x the GPU's total, then captures CUDA graphs; the graphs and their memory pool come on top (vLLM's estimate: 1-3 GiB per GPU). Nothing else needs to hold the GPU for this to fail.".to_owned();
        push_actions(incident, &mut f, unit.as_deref(), util, event.span);
        f.confidence = confidence(&f, 0.7, 0.95);
        out.push(f);
    }
}

/// Returns the CUDA OOMs (not NCCL's) that happened during vLLM's CUDA
/// graph capture, each with that capture; those inside SGLang's capture
/// are left to `sglang-cuda-graph-capture-failed`.
fn capture_ooms(incident: &Incident) -> Vec<(&ServerEvent, &CudaOom, GraphCapture)> {
    let mut hits: Vec<(&ServerEvent, &CudaOom, GraphCapture)> = Vec::new();
    for e in &incident.facts.server_events {
        let ServerEventKind::CudaOom(o) = &e.kind else {
            continue;
        };
        if o.source == OomSource::Nccl {
            continue;
        }
        let text = incident
            .facts
            .messages
            .iter()
            .find(|m| m.span == e.span)
            .map_or("", |m| m.text.as_str());
        if in_graph_capture(incident, e.span, text) {
            continue;
        }
        if let Some(gc) = vllm::graph_capture(incident, e) {
            hits.push((e, o, gc));
        }
    }
    hits
}

/// Pushes onto the chain what the capture asked for against what was free,
/// and who held the rest: vLLM's own process, with the weights and the KV
/// cache.
fn explain_memory(f: &mut Finding, oom: &CudaOom) {
    let size = |b: u64| {
        if b < 1 << 30 {
            format!("{:.0} MiB", b as f64 / (1024.0 * 1024.0))
        } else {
            format!("{:.2} GiB", gib(b))
        }
    };
    if let (Some(t), Some(fr)) = (oom.tried_bytes, oom.free_bytes) {
        f.chain.push(format!(
            "the capture asked for {} with {} free{}",
            size(t),
            size(fr),
            oom.total_bytes
                .map_or(String::new(), |tot| format!(" of {}", size(tot)))
        ));
    }
    let writer = oom
        .this_process_bytes
        .map(|b| (None, b))
        .or_else(|| listed_writer(oom).map(|(p, b)| (Some(p), b)));
    match writer {
        Some((Some(pid), bytes)) => f.chain.push(format!(
            "PID {pid}, listed with {:.2} GiB, is vLLM's own process (it holds what PyTorch allocated): the weights and the KV cache filled the GPU before the graphs",
            gib(bytes)
        )),
        Some((None, bytes)) => f.chain.push(format!(
            "vLLM's own process held {:.2} GiB: the weights and the KV cache filled the GPU before the graphs",
            gib(bytes)
        )),
        None => f.chain.push(
            "the weights and the KV cache left too little outside vLLM's budget for the graphs"
                .to_owned(),
        ),
    }
}

/// Pushes the actions: confirm with --enforce-eager, then leave the graphs
/// room (a lower --gpu-memory-utilization for `unit` when the current one,
/// `util`, is known; advice otherwise) or shrink them.
fn push_actions(
    incident: &Incident,
    f: &mut Finding,
    unit: Option<&str>,
    util: Option<f64>,
    oom: Span,
) {
    f.actions.push(Action::advice(
        "restart the server with --enforce-eager (no CUDA graphs: no capture memory, slower decoding) to confirm the capture is the trigger",
        None,
    ));
    match util {
        Some(u) if u - STEP >= 0.1 => {
            let new = fraction(((u - STEP) * 100.0).floor() / 100.0);
            let action = crate::rules::support::server::flag_action(
                incident,
                f,
                unit,
                "--gpu-memory-utilization",
                &new,
                "leaves room outside the KV cache for the CUDA graphs",
                [oom],
            );
            f.actions.push(action);
        }
        _ => f.actions.push(Action::advice(
            "or keep the graphs and leave them room: lower --gpu-memory-utilization (by about 0.05)",
            None,
        )),
    }
    f.actions.push(Action::advice(
        "or lower --max-num-seqs (fewer and smaller graphs) or --max-model-len",
        None,
    ));
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    /// The root cause's rule and category for a paste, and how many steps
    /// would stop or signal a process.
    fn root(text: &str) -> (&'static str, Category, usize) {
        let a = crate::testing::analyze_paste(text);
        let report = a.report();
        let f = report.root_cause().expect("a root cause");
        let kills = f
            .actions
            .iter()
            .filter(|x| x.kind.name().contains("terminate") || x.kind.name().contains("stop"))
            .count();
        (f.rule, f.category, kills)
    }

    // vLLM 0.3 lines as a RunPod worker printed them (runpod-workers/worker-vllm#40).
    const BLOCKS: &str =
        "INFO 02-03 03:43:48 llm_engine.py:316] # GPU blocks: 7754, # CPU blocks: 2048";
    const CAPTURING: &str = "INFO 02-03 03:43:49 model_runner.py:625] Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI.";
    const OOM: &str = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 112.00 MiB. GPU 0 has a total capacty of 44.35 GiB of which 53.38 MiB is free. Process 3663367 has 44.28 GiB memory in use. Of the allocated memory 37.38 GiB is allocated by PyTorch, and 1.11 GiB is reserved by PyTorch but unallocated.";
    // vLLM 0.8 (a blog's log of a run that went on to serve).
    const FINISHED: &str = "INFO 11-03 15:47:45 [model_runner.py:1671] Graph capturing finished in 2 secs, took 0.11 GiB";

    #[test]
    fn an_oom_while_capturing_is_the_capture_in_either_line_order() {
        let forward = format!("{BLOCKS}\n{CAPTURING}\n{OOM}\n");
        let reversed = format!("{OOM}\n{CAPTURING}\n{BLOCKS}\n");
        for text in [forward, reversed] {
            let (rule, category, kills) = root(&text);
            assert_eq!(rule, "vllm-cuda-graph-capture-oom", "{text}");
            assert_eq!(category, Category::CudaGraphCaptureFailure);
            // PID 3663367 holds what PyTorch allocated: the server itself.
            assert_eq!(kills, 0);
        }
    }

    #[test]
    fn an_oom_after_the_capture_finished_is_a_plain_oom() {
        let (rule, category, _) = root(&format!("{BLOCKS}\n{CAPTURING}\n{FINISHED}\n{OOM}\n"));
        assert_eq!(rule, "torch-cuda-oom");
        assert_eq!(category, Category::CudaOom);
    }

    #[test]
    fn an_oom_at_model_load_stays_a_cuda_oom() {
        let (rule, category, _) = root(&format!("{OOM}\n"));
        assert_eq!(rule, "torch-cuda-oom");
        assert_eq!(category, Category::CudaOom);
    }
}
