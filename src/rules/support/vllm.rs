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
