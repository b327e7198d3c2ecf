//! `vllm-kv-cache-init-failed`: vLLM counted its KV-cache blocks and then
//! failed in `initialize_cache`, but the decisive message is missing: the
//! capacity check is the likely cause, at a lower confidence.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

mod held;

pub static RULE: VllmKvCacheInitFailed = VllmKvCacheInitFailed;

pub struct VllmKvCacheInitFailed;

/// vLLM v0 (0.3–0.6): `# GPU blocks: 378, # CPU blocks: 1638` (0.6.x also
/// `# cuda blocks:`, `# GPU blocks: 0`).
static BLOCKS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"# (?:GPU|gpu|cuda|CUDA) blocks: (?P<gpu>[0-9]+)(?:, # CPU blocks: (?P<cpu>[0-9]+))?",
    )
    .expect("regex")
});

/// The failure that follows: the executor's `Error executing method
/// initialize_cache. This might cause deadlock in distributed execution.`,
/// or a frame of the traceback (`in initialize_cache`,
/// `raise_if_cache_size_invalid`, `_verify_kv_cache`).
static INIT_FAILED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Error executing method '?initialize_cache|processing method '?initialize_cache|in (?:initialize_cache|raise_if_cache_size_invalid|_initialize_kv_caches)\b|raise_if_cache_size_invalid\(")
        .expect("regex")
});

/// The decisive messages the other KV rules read: when present, they answer.
static DECISIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"is larger than the maximum number of tokens that can be stored in KV cache|No available memory for the cache blocks|KV cache is needed, which is larger than the available KV cache memory")
        .expect("regex")
});

/// The engine's config line: `max_seq_len=8192`, `block_size=16`.
static MAX_LEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bmax_(?:seq|model)_len=(?P<len>[0-9]+)").expect("regex"));
static BLOCK_SIZE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bblock_size=(?P<bs>[0-9]+)").expect("regex"));

/// `(LLMRayActor pid=20770)`, `(VllmWorkerProcess pid=161)`.
static PROCESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\((?P<name>[A-Za-z][0-9A-Za-z_.-]*) pid=(?P<pid>[0-9]+)\)").expect("regex")
});

/// vLLM v0's default block size in tokens.
const DEFAULT_BLOCK_SIZE: u64 = 16;

static META: RuleMeta = RuleMeta {
    id: "vllm-kv-cache-init-failed",
    category: Category::KvCacheTooSmall,
    severity: Severity::Error,
    summary: "vLLM failed in initialize_cache after counting its KV-cache blocks; the capacity check is the likely cause",
    anchors: &[
        "GPU blocks:",
        "cuda blocks:",
        "initialize_cache",
        "raise_if_cache_size_invalid",
        "_initialize_kv_caches",
        "max_seq_len=",
        "max_model_len=",
        "block_size=",
    ],
    doc: r#"
## What it means
vLLM (v0, 0.3–0.6) logged how many KV-cache blocks fit (`# GPU blocks: 378,
# CPU blocks: 1638`) and then failed while allocating them (`Error executing
method initialize_cache. This might cause deadlock in distributed
execution.`), but the line that says why is not in the input (a cut paste,
a truncated traceback). Right after counting the blocks vLLM checks them:
with 0 blocks it raises `No available memory for the cache blocks`, with
fewer than one sequence needs (blocks x block_size < max_model_len) `The
model's max seq len (N) is larger than the maximum number of tokens that can
be stored in KV cache (M)`. A low block count followed by this failure is
almost always that check.

With no block count and no check frame, an nvidia-smi snapshot taken after
the failure (its date line later than the traceback) still says something:
the engine that failed at start-up has exited, so the memory the GPU shows
in use is another process's. When it covers at least half of the server's
budget (`--gpu-memory-utilization` x total), the finding names it
(gpu-memory-held-by-other-process): the V1 engine before 0.9.1 counted all
memory in use against that budget.

## Why it happens
Too little memory left for the KV cache after the weights and the profiling
peak: `gpu_memory_utilization` too low, a long context (`max_model_len`,
often the model's default), other processes on the GPU, or a model too large
for the tensor-parallel size.

## How to confirm
The end of the traceback names the check and the figures. blocks x
block_size (16 by default) against max_model_len.

## How to fix
Lower `--max-model-len` below the KV capacity, or raise
`--gpu-memory-utilization` when the GPU is not shared; more GPUs
(tensor parallelism) also help.

## Safety
Advice only.

## Seen in
- https://github.com/OpenRLHF/OpenRLHF/issues/336 (378 blocks, Ray actor, ValueError cut off): `pos-ray-actor-378-blocks`
- https://github.com/vllm-project/vllm/issues/6746 (the `raise_if_cache_size_invalid` frames, cut before the ValueError): `pos-0.5-size-check-frame`
- near miss from https://github.com/vllm-project/vllm/issues/10517 (blocks counted, no failure)
- https://github.com/vllm-project/vllm/issues/19125 (a second server; nvidia-smi after the failure shows the first one's 3578 MiB), reduced: `pos-second-server-smi-after-failure-reduced`
"#,
};

impl Rule for VllmKvCacheInitFailed {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        if matches(incident, &DECISIVE).next().is_some() {
            return;
        }
        let failures: Vec<&Message> = matches(incident, &INIT_FAILED).map(|(m, _)| m).collect();
        let Some(failure) = failures.first().copied() else {
            return;
        };
        // `raise_if_cache_size_invalid` raises only for the two KV checks.
        let check_frame = failures
            .iter()
            .copied()
            .find(|m| m.text.contains("raise_if_cache_size_invalid"));
        let blocks = blocks_before(incident, failure);
        if blocks.is_none() && check_frame.is_none() {
            // No figure of the KV cache: an nvidia-smi snapshot taken after
            // the failure may still show another process's memory.
            out.extend(held::finding(incident, failure));
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        if let Some((m, gpu, _)) = blocks {
            f.evidence(
                m.span,
                format!("vLLM found room for {gpu} KV-cache blocks on the GPU"),
            );
        }
        f.evidence(failure.span, "then it failed in initialize_cache");
        if let Some(m) = check_frame
            && m.span != failure.span
        {
            f.evidence(m.span, "the failure is raised by the KV-cache size check");
        }
        add_pids(&mut f, blocks.iter().map(|b| b.0).chain([failure]));
        let anchor = blocks.map(|b| b.0.span).unwrap_or(failure.span);
        let config = |re: &Regex, name: &str| {
            matches(incident, re)
                .filter(|(m, _)| m.span.source == anchor.source && m.span < anchor)
                .last()
                .and_then(|(m, c)| Some((m.span, c[name].parse::<u64>().ok()?)))
        };
        let block_size = config(&BLOCK_SIZE, "bs");
        let max_len = config(&MAX_LEN, "len");
        let bs = block_size.map(|b| b.1).unwrap_or(DEFAULT_BLOCK_SIZE);
        let gpu = blocks.map(|b| b.1);
        let tokens = gpu.map(|g| g * bs);
        if let Some((span, v)) = max_len {
            f.evidence(
                span,
                format!("the engine was configured for max_model_len {v}"),
            );
        }
        let short = matches!((tokens, max_len), (Some(t), Some((_, v))) if t < v);
        f.condition("vLLM failed in initialize_cache", true);
        f.condition(
            "the KV-cache size check raised it, or a block count precedes it",
            check_frame.is_some() || blocks.is_some(),
        );
        f.condition("the decisive error line is in the input", false);
        f.condition(
            "max_model_len is known and exceeds the blocks' capacity",
            short,
        );
        let size_note = size_note(gpu, block_size.is_some(), bs);
        let cpu_note = blocks
            .and_then(|b| b.2)
            .map(|c| format!(" (and {c} CPU swap blocks)"))
            .unwrap_or_default();
        f.title = title(gpu, tokens);
        f.headline = headline(gpu, max_len.map(|(_, v)| v), short, &size_note);
        f.chain
            .push("the vLLM engine failed in initialize_cache".to_owned());
        if gpu.is_some() {
            f.chain.push(format!(
                "after profiling, its KV cache had {size_note}{cpu_note}"
            ));
        }
        f.chain.push(
            "the capacity check failed: one sequence of max_model_len does not fit (or no block fits at all)".to_owned(),
        );
        f.explanation = if short || gpu == Some(0) {
            "vLLM checks the KV-cache blocks right after counting them; these figures fail that check.".to_owned()
        } else {
            "Missing: the end of the traceback (the ValueError naming max_model_len and the KV capacity) and the configured max_model_len. Without them this is the likely cause, not a proven one.".to_owned()
        };
        push_actions(&mut f, tokens);
        f.confidence = confidence(&f, 0.45, 0.8);
        out.push(f);
    }
}

/// Returns the last block count before `failure`, in its input: the line,
/// the GPU blocks and the CPU blocks when printed.
fn blocks_before<'a>(
    incident: &'a Incident,
    failure: &Message,
) -> Option<(&'a Message, u64, Option<u64>)> {
    matches(incident, &BLOCKS)
        .filter(|(m, _)| m.span.source == failure.span.source && m.span < failure.span)
        .last()
        .and_then(|(m, c)| {
            let gpu = c["gpu"].parse::<u64>().ok()?;
            let cpu = c.name("cpu").and_then(|v| v.as_str().parse::<u64>().ok());
            Some((m, gpu, cpu))
        })
}

/// Adds the PIDs that wrote `lines` (`(VllmWorkerProcess pid=161)`).
fn add_pids<'a>(f: &mut Finding, lines: impl Iterator<Item = &'a Message>) {
    for m in lines {
        if let Some(c) = PROCESS.captures(&m.text)
            && let Ok(pid) = c["pid"].parse::<u32>()
        {
            f.entities.pids.insert(pid);
        }
    }
}

/// Returns the KV cache's size in words: `gpu` blocks of `bs` tokens
/// (`logged_size`: the block size was logged, not vLLM's default).
fn size_note(gpu: Option<u64>, logged_size: bool, bs: u64) -> String {
    match (gpu, logged_size) {
        (Some(g), true) => format!("{g} blocks x {bs} tokens = {} tokens", g * bs),
        (Some(g), false) => format!(
            "{g} blocks x {bs} tokens (vLLM's default block size) = {} tokens",
            g * bs
        ),
        (None, _) => "too few blocks".to_owned(),
    }
}

/// Returns the title: no block at all, a cache of `gpu` blocks (`tokens`)
/// likely too small, or the size check alone.
fn title(gpu: Option<u64>, tokens: Option<u64>) -> String {
    match (gpu, tokens) {
        (Some(0), _) => {
            "vLLM found no room for KV-cache blocks and failed in initialize_cache".to_owned()
        }
        (Some(g), Some(t)) => format!(
            "vLLM's KV cache ({g} blocks, {t} tokens) is likely too small: initialize_cache failed"
        ),
        _ => "vLLM's KV-cache size check failed in initialize_cache".to_owned(),
    }
}

/// Returns the headline: no block at all, a cache `short` of one sequence
/// of `max_len`, a cache likely too small, or the size check alone.
fn headline(gpu: Option<u64>, max_len: Option<u64>, short: bool, size_note: &str) -> String {
    match (gpu, max_len) {
        (Some(0), _) => "vLLM found room for no KV-cache block on the GPU and failed in initialize_cache: nothing is left for the KV cache after the weights.".to_owned(),
        (Some(_), Some(v)) if short => format!(
            "vLLM's KV cache holds {size_note}, fewer than one sequence of max_model_len {v}, and it failed in initialize_cache: the KV-capacity check."
        ),
        (Some(_), _) => format!(
            "vLLM's KV cache holds only {size_note} and it then failed in initialize_cache; most likely the model's max_model_len is larger than that (the error line itself is missing)."
        ),
        (None, _) => "vLLM's KV-cache size check (raise_if_cache_size_invalid) failed in initialize_cache: either no block fits or one sequence of max_model_len does not (the error line that says which is missing).".to_owned(),
    }
}

/// Pushes the advice: read the traceback's end, fit max_model_len into the
/// capacity (`tokens`, when known) or raise the utilization, look at the GPUs.
fn push_actions(f: &mut Finding, tokens: Option<u64>) {
    let capacity = tokens.map(|t| format!(" ({t} tokens)")).unwrap_or_default();
    f.actions.push(Action::advice(
        "read the end of the traceback: the ValueError names the check and the figures",
        Some("grep -n -A3 -E 'ValueError|max seq len|cache blocks' LOGFILE"),
    ));
    f.actions.push(Action::advice(
        format!("lower --max-model-len (max_model_len) below the KV capacity{capacity}, or raise --gpu-memory-utilization (gpu_memory_utilization) if nothing else uses the GPU"),
        None,
    ));
    f.actions.push(Action::advice(
        "check what else holds memory on the GPUs",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
}
