//! TensorRT's own figures of the device's memory in use, read where
//! TensorRT-LLM loads an engine: `Loaded engine size: 3937 MiB`, then
//! `[MemUsageChange] Init cuBLAS/cuBLASLt: CPU +0, GPU +8, now: CPU 4064,
//! GPU 77667 (MiB)` before the engine's weights are placed. An `Init`
//! stage's GPU total is cudaMemGetInfo's, every process's memory: at that
//! point the loading process holds its CUDA context and little else, so a
//! total far above it is memory another process or model instance holds
//! (triton-inference-server/server#7255: a second instance of a model
//! placed on the GPU the first one's KV cache fills).

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Finding};

const ENGINE: &str = "stacks-trtllm.loaded-engine-size";
const INIT: &str = "stacks-trtllm.mem-usage-init";
const RANK: &str = "stacks-trtllm.rank-device";

/// What the loading process itself may hold at an `Init` stage: its CUDA
/// context, cuBLAS's and cuDNN's workspaces (about 1.1 GiB on a 3090 with
/// a 777 MiB engine in tensorrtllm_backend's Triton logs).
const OWN_MIB: u64 = 2048;

/// Held by others below this (MiB) says nothing without the card's total.
const MIN_HELD_MIB: u64 = 8192;

/// Lines between `Loaded engine size` and the `Init` figure read with it.
const WITHIN: u32 = 4;

/// One engine load with the device's memory in use before its weights.
struct Load<'a> {
    engine: &'a Message,
    engine_mib: u64,
    init: &'a Message,
    used_mib: u64,
    rank: Option<(&'a Message, u32)>,
}

fn loads(incident: &Incident) -> Vec<Load<'_>> {
    let inits: Vec<(&Message, u64)> = incident
        .known(INIT)
        .filter_map(|(m, h)| Some((m, h.get("used")?.parse().ok()?)))
        .collect();
    let ranks: Vec<(&Message, u32)> = incident
        .known(RANK)
        .filter_map(|(m, h)| Some((m, h.get("gpu")?.parse().ok()?)))
        .collect();
    let mut out = Vec::new();
    for (engine, h) in incident.known(ENGINE) {
        let Some(engine_mib) = h.get("engine").and_then(|v| v.parse().ok()) else {
            continue;
        };
        let at = engine.span;
        // The first `Init` figure after it: before the weights are placed.
        let Some(&(init, used_mib)) = inits
            .iter()
            .filter(|(m, _)| {
                m.span.source == at.source
                    && m.span.line > at.line
                    && m.span.line - at.line <= WITHIN
            })
            .min_by_key(|(m, _)| m.span.line)
        else {
            continue;
        };
        let rank = ranks
            .iter()
            .filter(|(m, _)| m.span.source == at.source && m.span.line < at.line)
            .max_by_key(|(m, _)| m.span.line)
            .copied();
        out.push(Load {
            engine,
            engine_mib,
            init,
            used_mib,
            rank,
        });
    }
    out
}

/// The finding for an engine load onto a device whose memory others
/// already hold.
pub(super) fn held_at_load(incident: &Incident) -> Option<Finding> {
    let all = loads(incident);
    let load = all
        .iter()
        .find(|l| l.used_mib.saturating_sub(OWN_MIB) >= MIN_HELD_MIB)?;
    let held = load.used_mib.saturating_sub(OWN_MIB);
    let gpu = load.rank.map(|(_, g)| g);
    let device = gpu.map_or("the GPU".to_owned(), |g| format!("GPU {g}"));
    let mut f = super::finding();
    if let Some((m, g)) = load.rank {
        f.evidence(m.span, format!("the engine is loaded on GPU {g}"));
        f.entities.gpus.insert(g);
    }
    f.evidence(
        load.engine.span,
        format!(
            "an engine of {} MiB is about to be placed on {device}",
            load.engine_mib
        ),
    );
    let used = format!("{} MiB", load.used_mib);
    f.evidence_marked(
        load.init.span,
        format!(
            "before its weights, {device} already has {used} in use: about {} GiB more than this process's CUDA context",
            held / 1024
        ),
        load.used_mib.to_string(),
    );
    f.condition(
        "TensorRT's figure of the device's memory in use is read before the engine's weights are placed",
        true,
    );
    f.condition(
        "that figure is far above what the loading process holds then (its CUDA context)",
        true,
    );
    f.title = format!("{device} already had {used} in use when the engine was loaded");
    f.headline = format!(
        "{device} already had {used} in use before this engine's {} MiB of weights were placed: another process or model instance (an earlier instance's KV cache) holds that memory, so this instance gets only the rest.",
        load.engine_mib
    );
    f.chain.push(format!(
        "this engine and its KV cache get only what is left of {device}"
    ));
    f.chain.push(format!(
        "another process or model instance holds about {} GiB of {device}",
        held / 1024
    ));
    f.explanation = "TensorRT prints the device's memory in use (cudaMemGetInfo: every process's) as it initialises CUDA, cuBLAS and cuDNN. Right after `Loaded engine size` the loading process holds only its CUDA context, so the rest of the figure belongs to something else on the same GPU: most often another instance of the model, whose KV cache took most of the device (TensorRT-LLM gives the KV cache a share of the free memory, kv_cache_free_gpu_mem_fraction, 0.9 by default).".to_owned();
    f.actions.push(Action::advice(
        "list what holds the GPU's memory (another Triton model instance or server)",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "place each instance on its own GPU (the backend's gpu_device_ids, or CUDA_VISIBLE_DEVICES per instance), or lower kv_cache_free_gpu_mem_fraction so that both fit",
        None,
    ));
    f.confidence = crate::rules::support::confidence(&f, 0.5, 0.7);
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::rules::{Category, Severity};

    const RULE: &str = "gpu-memory-taken-before-load";

    /// https://github.com/triton-inference-server/server/issues/7255 (batch
    /// M's 957): the second instance's engine load on GPU 0, which already
    /// has 77667 MiB in use.
    const SECOND: &str = "\
[TensorRT-LLM][INFO] MPI size: 1, rank: 0
[TensorRT-LLM][INFO] Rank 0 is using GPU 0
[TensorRT-LLM][INFO] TRTGptModel maxNumSequences: 1
[TensorRT-LLM][INFO] TRTGptModel maxBatchSize: 1
[TensorRT-LLM][INFO] TRTGptModel mMaxAttentionWindowSize: 33280
[TensorRT-LLM][INFO] TRTGptModel enableTrtOverlap: 0
[TensorRT-LLM][INFO] TRTGptModel normalizeLogProbs: 1
[TensorRT-LLM][INFO] The logger passed into createInferRuntime differs from one already provided for an existing builder, runtime, or refitter. Uses of the global logger, returned by nvinfer1::getLogger(), will return the existing value.
[TensorRT-LLM][INFO] Loaded engine size: 3937 MiB
[TensorRT-LLM][INFO] [MemUsageChange] Init cuBLAS/cuBLASLt: CPU +0, GPU +8, now: CPU 4064, GPU 77667 (MiB)
[TensorRT-LLM][INFO] [MemUsageChange] Init cuDNN: CPU +0, GPU +10, now: CPU 4064, GPU 77677 (MiB)
[TensorRT-LLM][INFO] [MemUsageChange] TensorRT-managed allocation in engine deserialization: CPU +0, GPU +3934, now: CPU 0, GPU 7868 (MiB)
";

    #[test]
    fn an_engine_load_onto_a_nearly_full_device_is_memory_held_by_another_instance() {
        let f = crate::testing::findings_of(RULE, SECOND);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
        assert_eq!(f[0].severity, Severity::Error);
        assert!(
            f[0].headline
                .starts_with("GPU 0 already had 77667 MiB in use")
        );
        assert!(f[0].entities.gpus.contains(&0));
        let lines: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
        assert!(lines.contains(&2) && lines.contains(&10), "{lines:?}");
    }

    #[test]
    fn a_load_with_only_a_context_in_use_or_tensorrts_own_totals_is_nothing() {
        // The first instance's load (a variant: the figures a load onto an
        // empty A100 prints, a context and cuBLAS).
        let first = SECOND
            .replace("GPU 77667 (MiB)", "GPU 1129 (MiB)")
            .replace("GPU 77677 (MiB)", "GPU 1139 (MiB)");
        assert!(crate::testing::findings_of(RULE, &first).is_empty());
        // TensorRT-managed totals are TensorRT's own allocations, and a
        // figure with no engine load before it is no load's.
        let managed: String = SECOND
            .lines()
            .filter(|l| !l.contains("Init cu"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(crate::testing::findings_of(RULE, &managed).is_empty());
        let unloaded: String = SECOND
            .lines()
            .filter(|l| !l.contains("Loaded engine size"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(crate::testing::findings_of(RULE, &unloaded).is_empty());
    }
}
