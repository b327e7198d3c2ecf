//! `trtllm-kv-cache-too-small`: TensorRT-LLM's paged KV cache cannot hold
//! one sequence of the engine's maximum length.

use crate::catalogs::Hit;
use crate::correlate::Incident;
use crate::rules::support::{confidence, distinct};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: TrtllmKvCacheTooSmall = TrtllmKvCacheTooSmall;

pub struct TrtllmKvCacheTooSmall;

/// The batch manager's refusal (`maxTokensInPagedKvCache (29184) must be
/// large enough to process at least 1 sequence to completion (i.e. must be
/// larger than beam_width (1) * tokensPerBlock (128) * maxBlocksPerSeq
/// (272))`; v0.5–0.7 without the numbers) and what the runtime found room
/// for (`Allocate 956301312 bytes for k/v cache.`, `Using 29184 total tokens
/// in paged KV cache, and 272 blocks per sequence`, `Allocated 0.56 GiB for
/// max tokens in paged KV cache (8224).`), as their catalog rows read them
/// (catalogs/stacks-trtllm.toml).
const CHECK: &str = "stacks-trtllm.paged-kv-cache-too-small";
const SIZE: &str = "stacks-trtllm.kv-cache-size";

static META: RuleMeta = RuleMeta {
    id: "trtllm-kv-cache-too-small",
    category: Category::KvCacheTooSmall,
    severity: Severity::Critical,
    summary: "TensorRT-LLM's paged KV cache cannot hold one sequence of the engine's maximum length",
    // The rows bring their own anchors.
    anchors: &[],
    doc: r#"
## What it means
`maxTokensInPagedKvCache (29184) must be large enough to process at least 1
sequence to completion (i.e. must be larger than beam_width (1) *
tokensPerBlock (128) * maxBlocksPerSeq (272))`: after the weights and the
runtime buffers were placed, the paged KV cache got room for fewer tokens
than one sequence of the engine's maximum length (beam width x tokens per
block x blocks per sequence) needs, so TensorRT-LLM refuses to start. Under
Triton the model fails to load (`Failed to create instance: unexpected error
when creating modelInstanceState`). Older versions print the same sentence
without the figures, after `Using N tokens in paged KV cache.`.

## Why it happens
The KV cache gets `kv_cache_free_gpu_mem_fraction` (default 0.9) of the
memory free after loading, or `max_tokens_in_paged_kv_cache` when set; a low
fraction, a small cap, another process on the GPU or large runtime buffers
leave too little. The need grows with the engine's maximum sequence length
(`max_input_len` + `max_output_len`) and beam width.

## How to confirm
The figures in the message: tokens in the cache against beam_width x
tokensPerBlock x maxBlocksPerSeq. `nvidia-smi` shows whether something else
holds memory.

## How to fix
Raise `kv_cache_free_gpu_mem_fraction` or `max_tokens_in_paged_kv_cache` in
the `tensorrt_llm` model config, build the engine with a shorter maximum
sequence length, free the GPU of other processes, or use more GPUs.

## Safety
Advice only.

## Seen in
- https://github.com/triton-inference-server/tensorrtllm_backend/issues/366 (the wording with figures: 29184 < 1 x 128 x 272): `pos-0.8-triton-figures`
- https://github.com/NVIDIA/TensorRT-LLM/issues/494 (the older wording without figures, after `Using 693 tokens in paged KV cache.`): `pos-0.5-triton-no-figures`
- also https://github.com/NVIDIA/TensorRT-LLM/issues/542
"#,
};

impl Rule for TrtllmKvCacheTooSmall {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = incident.known(CHECK).collect();
        let Some((first, caps)) = hits.first() else {
            return;
        };
        let num = |c: &Hit<'_>, n: &str| c.get(n).and_then(|v| v.parse::<u64>().ok());
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = hits.len() as u32;
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(2) {
            f.evidence(
                m.span,
                format!("the KV cache cannot hold one full sequence ({n}x)"),
            );
        }
        // The sizes logged before the check, in its input.
        let mut tokens = num(caps, "tokens");
        let mut bytes = None;
        let mut gib = None;
        let mut blocks = num(caps, "mbps");
        for (m, c) in incident
            .known(SIZE)
            .filter(|(m, _)| m.span.source == first.span.source && m.span < first.span)
        {
            if let Some(b) = num(c, "bytes") {
                bytes = Some(b);
                f.evidence(m.span, format!("{b} bytes were allocated for the KV cache"));
            }
            if let Some(t) = num(c, "tokens").or(num(c, "max")) {
                tokens = tokens.or(Some(t));
                f.evidence(m.span, format!("the KV cache holds {t} tokens"));
            }
            if let Some(g) = c.get("gib").and_then(|g| g.parse::<f64>().ok()) {
                gib = Some(g);
            }
            blocks = blocks.or(num(c, "blocks"));
        }
        let beam = num(caps, "beam");
        let tpb = num(caps, "tpb");
        let needed = match (beam, tpb, blocks) {
            (Some(b), Some(t), Some(k)) => Some(b * t * k),
            _ => None,
        };
        let size = match (bytes, gib) {
            (Some(b), _) => format!(" ({:.2} GB)", b as f64 / 1e9),
            (None, Some(g)) => format!(" ({g:.2} GiB)"),
            _ => String::new(),
        };
        f.condition(
            "TensorRT-LLM refused to start: the KV cache is smaller than one sequence",
            true,
        );
        let reconciles = matches!((tokens, needed), (Some(t), Some(n)) if t < n);
        f.condition(
            "the figures reconcile: cache tokens < beam x tokens per block x blocks per sequence",
            reconciles,
        );
        match (tokens, needed, beam, tpb, blocks) {
            (Some(t), Some(n), Some(b), Some(p), Some(k)) => {
                f.title =
                    format!("TensorRT-LLM's KV cache holds {t} tokens, one sequence needs {n}");
                f.headline = format!(
                    "The model failed to load: the paged KV cache left after loading holds {t} tokens{size}, but one sequence of the engine's maximum length needs beam_width {b} x {p} tokens per block x {k} blocks = {n}."
                );
                f.chain.push(format!(
                    "maxTokensInPagedKvCache {t} < {b} x {p} x {k} = {n} tokens for one maximum-length sequence"
                ));
            }
            (Some(t), _, _, _, _) => {
                f.title = format!("TensorRT-LLM's KV cache ({t} tokens) cannot hold one sequence");
                f.headline = format!(
                    "The model failed to load: the paged KV cache left after loading holds {t} tokens{size}, fewer than one sequence of the engine's maximum length needs."
                );
            }
            _ => {
                f.title = "TensorRT-LLM's KV cache cannot hold one sequence".to_owned();
                f.headline = "The model failed to load: the paged KV cache left after loading is smaller than one sequence of the engine's maximum length.".to_owned();
            }
        }
        f.chain.insert(
            0,
            "the TensorRT-LLM model instance could not be created".to_owned(),
        );
        f.chain.push("too little GPU memory was left for the KV cache after the weights and runtime buffers (kv_cache_free_gpu_mem_fraction, max_tokens_in_paged_kv_cache, or another process on the GPU)".to_owned());
        f.explanation = "This is a capacity check, not a CUDA out-of-memory: the cache was allocated, but it is smaller than one sequence at the engine's maximum length.".to_owned();
        f.actions.push(Action::advice(
            "give the KV cache more room: raise kv_cache_free_gpu_mem_fraction, or set max_tokens_in_paged_kv_cache to at least one full sequence, in the tensorrt_llm model config",
            None,
        ));
        f.actions.push(Action::advice(
            "or build the engine with a shorter maximum sequence length (max_input_len + max_output_len / max_seq_len)",
            None,
        ));
        f.actions.push(Action::advice(
            "check what else occupies the GPUs",
            Some(crate::rules::support::COMPUTE_APPS),
        ));
        f.confidence = confidence(&f, 0.8, 0.95);
        out.push(f);
    }
}
