//! vLLM's memory accounting as its start-up log states it: the budget
//! (`total x gpu_memory_utilization`), the weights, the profiled activation
//! peak and what was left for the KV cache. Shared by the KV-cache rules.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{Framework, Landmark, ServerEventKind};
use crate::rules::support::matches;
use crate::rules::support::server::{before, gib, launch_args};
use crate::source::Span;

/// v0 and V1 ≤ 0.9: `the current vLLM instance can use total_gpu_memory
/// (79.15GiB) x gpu_memory_utilization (0.90) = 71.24GiB`.
static BUDGET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"total_gpu_memory \((?P<t>[0-9.]+) ?Gi?B\) x gpu_memory_utilization \((?P<u>[0-9.]+)\) = (?P<b>[0-9.]+) ?Gi?B",
    )
    .expect("budget regex")
});
/// `model weights take 34.05GiB; non_torch_memory takes 0.25GiB; PyTorch
/// activation peak memory takes 6.09GiB; the rest of the memory reserved for
/// KV Cache is 30.85GiB.`
static SPLIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"model weights take (?P<w>[0-9.]+) ?Gi?B; non_torch_memory takes (?P<n>-?[0-9.]+) ?Gi?B; PyTorch activation peak memory takes (?P<a>[0-9.]+) ?Gi?B; the rest of the memory reserved for KV Cache is (?P<r>-?[0-9.]+) ?Gi?B",
    )
    .expect("split regex")
});
/// V1 ≥ 0.10 prints a negative value too.
static KV_AVAILABLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Available KV cache memory: (?P<kv>-?[0-9.]+) ?Gi?B").expect("kv regex")
});

/// The anchors these lines need to reach the rules.
pub const ANCHORS: [&str; 4] = [
    "x gpu_memory_utilization",
    "model weights take",
    "Available KV cache memory",
    "Model loading took",
];

/// Every number in GiB, with the line it came from.
#[derive(Debug, Default)]
pub struct VllmMemory {
    pub total: Option<(f64, Span)>,
    pub util: Option<(f64, Span)>,
    pub budget: Option<(f64, Span)>,
    pub weights: Option<(f64, Span)>,
    pub non_torch: Option<f64>,
    pub activation: Option<f64>,
    /// What was left for the KV cache (negative when nothing was).
    pub kv: Option<(f64, Span)>,
    pub tp: Option<u32>,
}

impl VllmMemory {
    /// What vLLM's log says before the failure at `failure`.
    pub fn before(incident: &Incident, failure: Span) -> VllmMemory {
        let mut m = VllmMemory::default();
        let earlier = |span: Span| span.source != failure.source || span.line <= failure.line;
        if let Some((msg, c)) = matches(incident, &BUDGET)
            .filter(|(m, _)| earlier(m.span))
            .last()
        {
            m.total = c["t"].parse().ok().map(|v| (v, msg.span));
            m.util = c["u"].parse().ok().map(|v| (v, msg.span));
            m.budget = c["b"].parse().ok().map(|v| (v, msg.span));
        }
        if let Some((msg, c)) = matches(incident, &SPLIT)
            .filter(|(m, _)| earlier(m.span))
            .last()
        {
            m.weights = c["w"].parse().ok().map(|v| (v, msg.span));
            m.non_torch = c["n"].parse().ok();
            m.activation = c["a"].parse().ok();
            m.kv = c["r"].parse().ok().map(|v| (v, msg.span));
        }
        if m.kv.is_none() {
            m.kv = matches(incident, &KV_AVAILABLE)
                .filter(|(m, _)| earlier(m.span))
                .last()
                .and_then(|(msg, c)| Some((c["kv"].parse().ok()?, msg.span)));
        }
        if m.weights.is_none() {
            m.weights = before(incident, failure).find_map(|e| match &e.kind {
                ServerEventKind::Landmark(Landmark::ModelLoaded { weights_bytes, .. }) => {
                    Some((gib(*weights_bytes), e.span))
                }
                _ => None,
            });
        }
        if let Some((a, span)) = launch_args(incident, Framework::Vllm) {
            if m.util.is_none() {
                m.util = a.gpu_memory_utilization.map(|u| (u, span));
            }
            m.tp = a.tp_size;
        }
        if m.total.is_none() {
            // nvidia-smi's total is a little above what CUDA reports; close
            // enough for advice.
            m.total = incident
                .gpus
                .first()
                .and_then(|g| Some((g.memory_total_mib? as f64 / 1024.0, *g.spans.first()?)));
        }
        m
    }
}

/// The lines vLLM (and PyTorch under it) print when CUDA graph capture
/// starts, across versions: `Capturing the model for CUDA graphs.` (≤ 0.6.3),
/// `Capturing cudagraphs for decoding.` (0.6.4 – 0.8), the `Capturing CUDA
/// graph shapes` / `Capturing CUDA graphs (…)` progress bars (V1), the hint
/// `CUDA graphs can take additional 1~3 GiB memory per GPU`, and PyTorch's
/// `Waiting for pending NCCL work to finish before starting graph capture`;
/// and the capture's frames in a traceback cut above its header (`in
/// capture_model`, `self.model_runner.capture_model(…)`).
static CAPTURE_START: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Capturing (?:the model for CUDA graphs|cudagraphs? for|CUDA graphs?\b)|CUDA graphs can take additional|before starting graph capture|\bin (?:capture_model|_capture_cudagraphs)\b|\.capture_model\(",
    )
    .expect("capture start regex")
});
/// `Graph capturing finished in 12 secs` (0.4 – V1): the capture completed.
static CAPTURE_DONE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Graph capturing finished in").expect("capture done regex"));

/// The writer's PID in vLLM's and Ray's line prefix, `(VllmWorkerProcess
/// pid=13109)`, `(RayWorkerVllm pid=74362)`, when no server event has it.
static WRITER_PID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*\((?:[A-Za-z_][0-9A-Za-z_]*\s+)?(?:[0-9A-Za-z_]+=\S+\s+)*pid=(?P<pid>[0-9]+)[,)]",
    )
    .expect("pid regex")
});

/// The anchors the graph-capture lines need to reach the rules.
pub const GRAPH_ANCHORS: [&str; 7] = [
    "Capturing the model for CUDA graphs",
    "Capturing cudagraph",
    "Capturing CUDA graph",
    "CUDA graphs can take additional",
    "before starting graph capture",
    "Graph capturing finished",
    "capture_model",
];

/// A frame of the capture: vLLM's `capture_model` / `_capture_cudagraphs`,
/// its `CUDAGraphRunner.capture`, PyTorch's `torch/cuda/graphs.py`
/// (`capture_begin`/`capture_end`), vLLM V1's `compilation/cuda_graph.py`.
fn capture_frame(frame: &crate::model::Frame) -> bool {
    let f = frame.function.as_deref().unwrap_or("");
    f == "capture_model"
        || f.starts_with("_capture_cudagraph")
        || f == "capture_begin"
        || f == "capture_end"
        || (f == "capture" && frame.file.contains("model_runner"))
        || frame.file.ends_with("cuda/graphs.py")
        || frame.file.ends_with("compilation/cuda_graph.py")
}

/// How the inputs show that a vLLM out-of-memory error happened while
/// capturing CUDA graphs.
#[derive(Debug)]
pub struct GraphCapture {
    /// The exception whose traceback runs through the capture.
    pub traceback: Option<Span>,
    /// Capture-start lines of a capture that never finished, at most three.
    pub started: Vec<Span>,
    /// The PIDs that wrote those lines.
    pub pids: Vec<u32>,
}

/// Whether the OOM at `oom` happened during vLLM's CUDA graph capture: its
/// traceback runs through the capture, or the log shows a capture that
/// started and never finished (`Graph capturing finished` absent for that
/// writer). Line order is not used: pastes come newest first too. SGLang
/// reports its own capture failures.
pub fn graph_capture(incident: &Incident, oom: &crate::model::ServerEvent) -> Option<GraphCapture> {
    if oom.framework == Framework::Sglang {
        return None;
    }
    let events = &incident.facts.server_events;
    // The OOM's exception and the chain around it.
    let mut traceback = None;
    let mut x = super::server::exception_at(incident, oom.span).map(|(_, x)| x);
    for _ in 0..events.len() {
        let Some(e) = x else { break };
        if e.frames.iter().any(capture_frame) {
            traceback = Some(oom.span);
            break;
        }
        x = e
            .wrapped_by
            .and_then(|up| super::server::exception_at(incident, up).map(|(_, x)| x));
    }
    let pid_of = |m: &crate::model::Message| {
        super::server::events_at(incident, m.span)
            .find_map(|e| e.pid)
            .or_else(|| WRITER_PID.captures(&m.text)?["pid"].parse().ok())
    };
    let done: Vec<Option<u32>> = matches(incident, &CAPTURE_DONE)
        .map(|(m, _)| pid_of(m))
        .collect();
    let mut started = Vec::new();
    let mut pids = Vec::new();
    for (m, _) in matches(incident, &CAPTURE_START) {
        if m.span.source != oom.span.source {
            continue;
        }
        let pid = pid_of(m);
        if done
            .iter()
            .any(|d| *d == pid || d.is_none() || pid.is_none())
        {
            continue;
        }
        if started.len() < 3 {
            started.push(m.span);
        }
        if let Some(p) = pid
            && !pids.contains(&p)
        {
            pids.push(p);
        }
    }
    (traceback.is_some() || !started.is_empty()).then_some(GraphCapture {
        traceback,
        started,
        pids,
    })
}
