//! `trtllm-cuda-oom`: a TensorRT-LLM (or TensorRT) runtime allocation ran
//! out of GPU memory, usually while loading an engine whose build-time
//! maxima ask for more than the GPU has.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: TrtllmCudaOom = TrtllmCudaOom;

pub struct TrtllmCudaOom;

/// The runtime's and TensorRT's own out-of-memory errors, as their catalog
/// rows read them (catalogs/stacks-trtllm.toml): TensorRT-LLM's `CUDA runtime
/// error in <call>: out of memory (file:line)`, TensorRT's `Error Code 1: Cuda
/// Runtime (out of memory)`, `Error Code 2: OutOfMemory (Requested size was N
/// bytes.)`, `Requested amount of GPU memory (N bytes) could not be
/// allocated`.
const OOM_ROWS: &[&str] = &[
    "stacks-trtllm.cuda-runtime-oom",
    "stacks-trtllm.tensorrt-oom",
];

/// The engine's build-time maxima, as `trtllm-build`/`build.py` flags
/// (`--max_batch_size "32"`), as the runtime logs them (`max_batch_size=64`)
/// or in a Triton config (`max_batch_size: 32`).
static LIMIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?:^|[\s,({])-{0,2}(?P<key>max_batch_size|max_input_len|max_output_len|max_seq_len|max_num_tokens|max_beam_width)(?:=|:\s*|\s+)"?(?P<value>[0-9]+)"?"#,
    )
    .expect("regex")
});

/// The other side of the equation: what the runtime left for the KV cache.
static KV_FRACTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"kv_cache_free_gpu_mem_fraction|free_gpu_memory_fraction").expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "trtllm-cuda-oom",
    category: Category::CudaOom,
    severity: Severity::Critical,
    summary: "a TensorRT-LLM runtime buffer could not be allocated: the GPU ran out of memory",
    // The out-of-memory rows bring their own anchors.
    anchors: &[
        "max_batch_size",
        "max_input_len",
        "max_output_len",
        "max_seq_len",
        "max_num_tokens",
        "max_beam_width",
    ],
    doc: r#"
## What it means
`[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n,
mCudaStream->get()): out of memory (…/runtime/tllmBuffers.h:112)`: the
TensorRT-LLM runtime could not allocate one of its GPU buffers. Under
Triton the model then fails to load (`version 1 is at UNAVAILABLE state:
Internal: unexpected error when creating modelInstanceState: …`); in
`run.py`/the executor the session is not created, or a request fails in
`forwardAsync`. TensorRT's own wordings are `Error Code 1: Cuda Runtime (out
of memory)`, `Error Code 2: OutOfMemory (Requested size was N bytes.)` and
`Requested amount of GPU memory (N bytes) could not be allocated`.

## Why it happens
TensorRT-LLM sizes its runtime buffers (activations, decoder, logits) from
the maxima the engine was built with: `max_batch_size` x (`max_input_len` +
`max_output_len`), `max_num_tokens`, `max_beam_width`. Large maxima ask for
more memory than the GPU has once the weights and the KV cache are placed;
the KV cache takes `kv_cache_free_gpu_mem_fraction` (default 0.9) of what is
free after loading. Another process holding GPU memory has the same effect.

## How to confirm
The build command or the engine's `config.json` gives the maxima;
`nvidia-smi` shows whether anything else holds memory on the GPUs.

## How to fix
Rebuild the engine with smaller maxima (`--max_batch_size`,
`--max_input_len`/`--max_seq_len`, `--max_num_tokens`), or lower
`kv_cache_free_gpu_mem_fraction` in the Triton model config so that the
runtime buffers fit next to the KV cache; free the GPUs of other processes;
or use more GPUs (tensor parallelism).

## Safety
Advice only: rebuilding an engine and changing the model config are the
operator's decisions.

## Seen in
- https://github.com/triton-inference-server/tensorrtllm_backend/issues/281 (v0.7.1 under Triton, max_batch_size 32 x 32256 + 16384 tokens; fixed by a smaller max_batch_size): `pos-0.7-triton-build-limits`
- https://github.com/NVIDIA/TensorRT-LLM/issues/498 (gptSessionBenchmark, the doubled `[TensorRT-LLM][ERROR]` prefix): `pos-0.5-session-benchmark`
- https://github.com/NVIDIA/TensorRT-LLM/issues/3636 (0.18, `cudaMallocAsync(ptr, n, mMemPool->getPool(), …)` in `forwardAsync`): `pos-0.18-forward-async`
- https://github.com/pytorch/TensorRT/issues/2836 (TensorRT's own `Error Code 1: Cuda Runtime (out of memory)`): `pos-tensorrt-builder`
- also https://github.com/triton-inference-server/tensorrtllm_backend/issues/195 and https://github.com/NVIDIA/TensorRT-LLM/issues/1060 (`CUDA runtime error in error: out of memory (…ipcUtils.cpp:48)`)
"#,
};

impl Rule for TrtllmCudaOom {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut hits: Vec<_> = OOM_ROWS.iter().flat_map(|id| incident.known(id)).collect();
        hits.sort_by_key(|(m, _)| m.span);
        hits.dedup_by_key(|(m, _)| m.span);
        let Some((_, first)) = hits.first() else {
            return;
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = hits.len() as u32;
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(3) {
            f.evidence(
                m.span,
                format!("a runtime allocation ran out of GPU memory ({n}x)"),
            );
        }
        // `::cudaMallocAsync(ptr, n, …)`: the call's name.
        let call = first
            .get("call")
            .and_then(|c| c.trim_start_matches(':').split('(').next())
            .map(|c| c.trim().to_owned())
            .filter(|c| c.starts_with("cuda"));
        let bytes = first
            .get("size")
            .or(first.get("req"))
            .and_then(|b| b.parse::<u64>().ok());
        let limits = build_limits(incident);
        cite_limits(&mut f, &limits);
        let limit = |k: &str| limits.get(k).map(|(v, _)| *v);
        let batch = limit("max_batch_size");
        let seq = match (limit("max_input_len"), limit("max_output_len")) {
            (Some(i), Some(o)) => Some(i + o),
            _ => limit("max_seq_len"),
        };
        let tuned_fraction = matches(incident, &KV_FRACTION).next().map(|(m, _)| m.span);
        f.condition(
            "TensorRT-LLM or TensorRT reported an out-of-memory allocation",
            true,
        );
        f.condition(
            "the engine's build-time limits are known",
            !limits.is_empty(),
        );
        // TensorRT's own wordings come from plain TensorRT engines too.
        let engine = if hits.iter().any(|(m, _)| {
            ["TensorRT-LLM", "TRT-LLM", "tensorrt_llm", "tllm"]
                .iter()
                .any(|k| m.text.contains(k))
        }) {
            "TensorRT-LLM"
        } else {
            "TensorRT"
        };
        let what = match (&call, bytes) {
            (Some(c), _) => format!("{c} of a {engine} runtime buffer"),
            (None, Some(b)) => format!("an allocation of {b} bytes"),
            (None, None) => format!("a {engine} runtime allocation"),
        };
        let sizes = sizes_sentence(batch, seq);
        f.title = format!("{engine} ran out of GPU memory: {what} failed");
        f.headline = format!(
            "The model failed to load: {what} ran out of GPU memory (cudaMalloc/cudaMallocAsync: out of memory).{sizes}"
        );
        f.chain.push(format!(
            "the {engine} model could not be loaded (or its session created)"
        ));
        f.chain.push(format!("{what} returned out of memory"));
        f.chain.push(if batch.is_some() || seq.is_some() {
            "the engine's build-time maxima (max_batch_size, sequence lengths, max_num_tokens) ask for more memory than is left next to the weights and the KV cache".to_owned()
        } else {
            "the runtime buffers, sized from the engine's build-time maxima, do not fit next to the weights and the KV cache (or another process holds GPU memory)".to_owned()
        });
        f.explanation = "TensorRT-LLM allocates its runtime buffers from the engine's build-time maxima, after the weights and next to the KV cache, which takes kv_cache_free_gpu_mem_fraction of the free memory. Smaller maxima, a smaller KV fraction or more GPUs make them fit.".to_owned();
        f.actions.push(Action::advice(
            "rebuild the engine with smaller build-time maxima (--max_batch_size, --max_input_len/--max_seq_len, --max_num_tokens)",
            None,
        ));
        f.actions.push(Action::advice(
            match tuned_fraction {
                Some(_) => "lower kv_cache_free_gpu_mem_fraction in the model config so that the runtime buffers fit next to the KV cache",
                None => "or set kv_cache_free_gpu_mem_fraction (default 0.9) lower in the tensorrt_llm model config so that the runtime buffers fit next to the KV cache",
            },
            None,
        ));
        f.actions.push(Action::advice(
            "check that no other process holds memory on the engine's GPUs",
            Some(crate::rules::support::COMPUTE_APPS),
        ));
        f.confidence = confidence(&f, 0.75, 0.9);
        out.push(f);
    }
}

/// The first value of each build-time maximum the log prints, with its
/// line.
fn build_limits(incident: &Incident) -> BTreeMap<&'static str, (u64, &Message)> {
    let mut limits: BTreeMap<&'static str, (u64, &Message)> = BTreeMap::new();
    for (m, _) in matches(incident, &LIMIT) {
        for c in LIMIT.captures_iter(&m.text) {
            let key = KEYS.iter().find(|k| **k == &c["key"]);
            if let (Some(key), Ok(v)) = (key, c["value"].parse::<u64>()) {
                limits.entry(key).or_insert((v, m));
            }
        }
    }
    limits
}

/// Cites the build-time limits: one evidence line per input line, naming
/// every limit it sets.
fn cite_limits(f: &mut Finding, limits: &BTreeMap<&'static str, (u64, &Message)>) {
    let mut by_line: BTreeMap<crate::source::Span, Vec<String>> = BTreeMap::new();
    for (key, (v, m)) in limits {
        by_line
            .entry(m.span)
            .or_default()
            .push(format!("{key} = {v}"));
    }
    for (span, set) in by_line {
        f.evidence(
            span,
            format!("the engine's build-time limits: {}", set.join(", ")),
        );
    }
}

/// The headline's sentence on the sizes the engine was built for (with a
/// leading space), empty when the log does not give max_batch_size.
fn sizes_sentence(batch: Option<u64>, seq: Option<u64>) -> String {
    match (batch, seq) {
        (Some(b), Some(s)) => format!(
            " The engine was built for max_batch_size {b} x {s} tokens per sequence ({} tokens), and the runtime sizes its buffers from these maxima.",
            b * s
        ),
        (Some(b), None) => format!(
            " The engine was built for max_batch_size {b}, and the runtime sizes its buffers from its maxima."
        ),
        _ => String::new(),
    }
}

const KEYS: &[&str] = &[
    "max_batch_size",
    "max_input_len",
    "max_output_len",
    "max_seq_len",
    "max_num_tokens",
    "max_beam_width",
];
