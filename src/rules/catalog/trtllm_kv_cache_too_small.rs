//! `trtllm-kv-cache-too-small`: TensorRT-LLM's paged KV cache cannot hold
//! one sequence of the engine's maximum length.

use std::sync::LazyLock;

use regex::Regex;

use crate::catalogs::Hit;
use crate::correlate::Incident;
use crate::model::Message;
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
without the figures, after `Using N tokens in paged KV cache.`. From 0.10
the KV cache manager logs `Max KV cache pages per sequence: N` (the blocks
one sequence needs) and runs this check on its next statement: that line
followed by TensorRT-LLM's `Assertion failed`, even cut short by a paste
(`… what(): [TensorRT-LLM][ERROR] Assertion failed: maxTo`), is the same
refusal; so is a primary pool (`Number of blocks in KV cache primary pool:
N`) of fewer blocks than one sequence needs.

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
- https://github.com/janhq/cortex.cpp/issues/981 (Cortex's engine: `Max KV cache pages per sequence: 16`, then the assertion, cut by the paste)
"#,
};

impl Rule for TrtllmKvCacheTooSmall {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = incident.known(CHECK).collect();
        let (first, caps) = match hits.first() {
            Some((m, c)) => (*m, Some(*c)),
            None => match check_after_pages(incident) {
                Some(m) => (m, None),
                None => return,
            },
        };
        let num = |c: Option<&Hit<'_>>, n: &str| c?.get(n).and_then(|v| v.parse::<u64>().ok());
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = hits.len().max(1) as u32;
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(2) {
            f.evidence(
                m.span,
                format!("the KV cache cannot hold one full sequence ({n}x)"),
            );
        }
        if caps.is_none() && ASSERTION.is_match(&first.text) {
            f.evidence(
                first.span,
                "TensorRT-LLM's assertion right after it sized the pages per sequence: the KV cache manager's check that one sequence fits",
            );
        }
        // The sizes logged before the check, in its input.
        let mut s = Sizes {
            tokens: num(caps, "tokens"),
            blocks: num(caps, "mbps"),
            ..Sizes::default()
        };
        for (m, c) in incident
            .known(SIZE)
            .filter(|(m, _)| m.span.source == first.span.source && m.span <= first.span)
        {
            s.read(&mut f, m.span, c);
        }
        let beam = num(caps, "beam");
        let tpb = num(caps, "tpb");
        let needed = match (beam, tpb, s.blocks) {
            (Some(b), Some(t), Some(k)) => Some(b * t * k),
            _ => None,
        };
        f.condition(
            "TensorRT-LLM refused to start: the KV cache is smaller than one sequence",
            true,
        );
        let reconciles = matches!((s.tokens, needed), (Some(t), Some(n)) if t < n)
            || matches!((s.pool, s.blocks), (Some(p), Some(k)) if p < k);
        f.condition(
            "the figures reconcile: cache tokens < beam x tokens per block x blocks per sequence",
            reconciles,
        );
        tell(&mut f, &s, needed, beam, tpb);
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

/// What the runtime logged about the cache before its check.
#[derive(Default)]
struct Sizes {
    tokens: Option<u64>,
    bytes: Option<u64>,
    gib: Option<f64>,
    /// Blocks (pages) one sequence needs.
    blocks: Option<u64>,
    /// Blocks in the cache's primary pool.
    pool: Option<u64>,
}

impl Sizes {
    /// Reads one size line `c` at `span`, citing what it says.
    fn read(&mut self, f: &mut Finding, span: crate::source::Span, c: &Hit<'_>) {
        let num = |n: &str| c.get(n).and_then(|v| v.parse::<u64>().ok());
        if let Some(b) = num("bytes") {
            self.bytes = Some(b);
            f.evidence(span, format!("{b} bytes were allocated for the KV cache"));
        }
        if let Some(t) = num("tokens").or(num("max")) {
            self.tokens = self.tokens.or(Some(t));
            f.evidence(span, format!("the KV cache holds {t} tokens"));
        }
        if let Some(g) = c.get("gib").and_then(|g| g.parse::<f64>().ok()) {
            self.gib = Some(g);
        }
        if let Some(p) = num("pool") {
            self.pool = Some(p);
            f.evidence(span, format!("the KV cache's primary pool has {p} blocks"));
        }
        if let Some(k) = num("pages") {
            self.blocks = self.blocks.or(Some(k));
            f.evidence(
                span,
                format!("one sequence of the engine's maximum length needs {k} blocks (pages) of the cache"),
            );
        }
        self.blocks = self.blocks.or(num("blocks"));
    }
}

/// The finding's title, headline and the chain's figures.
fn tell(f: &mut Finding, s: &Sizes, needed: Option<u64>, beam: Option<u64>, tpb: Option<u64>) {
    let size = match (s.bytes, s.gib) {
        (Some(b), _) => format!(" ({:.2} GB)", b as f64 / 1e9),
        (None, Some(g)) => format!(" ({g:.2} GiB)"),
        _ => String::new(),
    };
    match (s.tokens, needed, beam, tpb, s.blocks, s.pool) {
        (Some(t), Some(n), Some(b), Some(p), Some(k), _) => {
            f.title = format!("TensorRT-LLM's KV cache holds {t} tokens, one sequence needs {n}");
            f.headline = format!(
                "The model failed to load: the paged KV cache left after loading holds {t} tokens{size}, but one sequence of the engine's maximum length needs beam_width {b} x {p} tokens per block x {k} blocks = {n}."
            );
            f.chain.push(format!(
                "maxTokensInPagedKvCache {t} < {b} x {p} x {k} = {n} tokens for one maximum-length sequence"
            ));
        }
        (_, _, _, _, Some(k), Some(p)) if p < k => {
            f.title = format!("TensorRT-LLM's KV cache has {p} blocks, one sequence needs {k}");
            f.headline = format!(
                "The model failed to load: the paged KV cache left after loading has {p} blocks{size}, but one sequence of the engine's maximum length needs {k}."
            );
        }
        (Some(t), _, _, _, k, _) => {
            let need = k
                .map(|k| format!(" ({k} blocks of the cache)"))
                .unwrap_or_default();
            f.title = format!("TensorRT-LLM's KV cache ({t} tokens) cannot hold one sequence");
            f.headline = format!(
                "The model failed to load: the paged KV cache left after loading holds {t} tokens{size}, fewer than one sequence of the engine's maximum length needs{need}."
            );
        }
        (None, _, _, _, Some(k), _) => {
            f.title = format!("TensorRT-LLM's KV cache cannot hold one sequence of {k} blocks");
            f.headline = format!(
                "The model failed to load: the paged KV cache left after loading{size} is smaller than one sequence of the engine's maximum length, which needs {k} blocks (pages) of it."
            );
        }
        _ => {
            f.title = "TensorRT-LLM's KV cache cannot hold one sequence".to_owned();
            f.headline = "The model failed to load: the paged KV cache left after loading is smaller than one sequence of the engine's maximum length.".to_owned();
        }
    }
}

/// TensorRT-LLM's KV cache manager logs the blocks (pages) one sequence
/// needs and checks, on its next statement, that its pool holds them
/// (kvCacheManager.cpp: `TLLM_LOG_INFO("Max KV cache pages per sequence:
/// %d", …)`, then `TLLM_CHECK_WITH_INFO(maxNumTokens >= beam * blocks *
/// tokensPerBlock, "maxTokensInPagedKvCache (%d) must be large enough …")`):
/// a pages line followed by TensorRT-LLM's `Assertion failed`, however
/// much of the assertion's text the paste kept, is that check failing; so
/// is a primary pool of fewer blocks than one sequence needs. Returns the
/// line to cite as the failure.
fn check_after_pages(incident: &Incident) -> Option<&Message> {
    let sizes: Vec<_> = incident.known(SIZE).collect();
    sizes.iter().find_map(|(m, c)| {
        let pages = c.get("pages")?.parse::<u64>().ok()?;
        let next = incident
            .facts
            .messages
            .iter()
            .filter(|n| n.span.source == m.span.source && n.span > m.span)
            .min_by_key(|n| n.span)?;
        if ASSERTION.is_match(&next.text) {
            return Some(next);
        }
        let pool = sizes
            .iter()
            .filter(|(p, _)| p.span.source == m.span.source && p.span < m.span)
            .find_map(|(_, p)| p.get("pool")?.parse::<u64>().ok())?;
        (pool < pages).then_some(*m)
    })
}

/// TensorRT-LLM's failed check, as TLLM_CHECK prints it.
static ASSERTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\[TensorRT-LLM\]\[ERROR\] Assertion failed").expect("assertion regex")
});

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// A reduction of batch AA 1919 (janhq/cortex.cpp#981, Cortex's
    /// TensorRT-LLM engine): the pages one sequence needs, then the
    /// manager's assertion, which the paste cut after `maxTo`.
    #[test]
    fn an_assertion_right_after_the_pages_per_sequence_is_the_one_sequence_check() {
        let text = "[TensorRT-LLM][INFO] Max KV cache pages per sequence: 16\n20240806 09:33:16.023000 UTC 10952 ERROR Unhandled exception in /inferences/server/loadmodel, what(): [TensorRT-LLM][ERROR] Assertion failed: maxTo\n";
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::KvCacheTooSmall);
        assert!(f[0].title.contains("16 blocks"), "{}", f[0].title);
        assert_eq!(f[0].evidence.len(), 2, "{:?}", f[0].evidence);
    }

    /// NVIDIA/TensorRT-LLM's memory reference guide (its `memory.md`):
    /// a pool of 4060 blocks for sequences of 32, and the cache allocated
    /// after the check: it fits. The same block with the pool altered to 20
    /// blocks (an edit, not a printed line) does not.
    #[test]
    fn the_pool_against_one_sequences_pages_decides() {
        let fits = "[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 4060\n[TensorRT-LLM][INFO] Number of blocks in KV cache secondary pool: 0, onboard blocks to primary memory before reuse: true\n[TensorRT-LLM][INFO] Max KV cache pages per sequence: 32\n[TensorRT-LLM][INFO] Number of tokens per block: 64.\n[TensorRT-LLM][INFO] [MemUsageChange] Allocated 63.44 GiB for max tokens in paged KV cache (259840).\n";
        assert!(findings(fits).is_empty());
        let short = fits.replace("primary pool: 4060", "primary pool: 20");
        let f = findings(&short);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].title.contains("has 20 blocks, one sequence needs 32"),
            "{}",
            f[0].title
        );
    }
}
