//! The failure with neither a block count nor the size check's frame, and
//! an nvidia-smi snapshot taken after it: the engine that failed at
//! start-up has exited by then, so the memory the GPU still shows in use is
//! another process's. vLLM V1 before PR #19312 (0.9.1) charged every byte
//! in use on the GPU to its `gpu_memory_utilization` budget, so memory
//! another process holds is missing from the KV cache (vllm#18854).

use super::META;
use crate::correlate::{Gpu, Incident};
use crate::model::{Framework, Message};
use crate::rules::support::server::printed_flag;
use crate::rules::support::{COMPUTE_APPS, confidence};
use crate::rules::{Action, Category, Finding};
use crate::source::Span;

/// vLLM's default `gpu_memory_utilization`.
const DEFAULT_UTIL: f64 = 0.9;
/// Memory in use that explains the failure: at least this share of the
/// server's budget (utilization x total).
const EXPLAINS_SHARE: f64 = 0.5;

/// The GPU an nvidia-smi snapshot taken after `failure` shows most used,
/// with its figures, when the memory in use covers [`EXPLAINS_SHARE`] of
/// the server's budget.
pub(super) fn finding(incident: &Incident, failure: &Message) -> Option<Finding> {
    let failed_at = incident.times.get(&failure.span)?;
    let flag = printed_flag(incident, None, Framework::Vllm, "gpu-memory-utilization");
    let util = flag
        .as_ref()
        .and_then(|p| p.value.parse::<f64>().ok())
        .filter(|u| *u > 0.0 && *u <= 1.0)
        .unwrap_or(DEFAULT_UTIL);
    let (gpu, used, total, usage) = incident
        .gpus
        .iter()
        .filter_map(|g| {
            let (used, total, usage) = (g.memory_used_mib?, g.memory_total_mib?, g.usage_span?);
            // The snapshot's time: the last timed line at or above its row
            // in the same input (the table's date line).
            let (_, at) = incident
                .times
                .range(..=usage)
                .next_back()
                .filter(|(s, _)| s.source == usage.source)?;
            (at > failed_at && total > 0).then_some((g, used, total, usage))
        })
        .max_by_key(|(_, used, _, _)| *used)?;
    let budget = util * total as f64;
    if (used as f64) < EXPLAINS_SHARE * budget {
        return None;
    }
    Some(write(
        failure,
        gpu,
        used,
        total,
        usage,
        util,
        flag.map(|p| (p.printed, p.span)),
    ))
}

fn write(
    failure: &Message,
    gpu: &Gpu,
    used: u64,
    total: u64,
    usage: Span,
    util: f64,
    flag: Option<(String, Span)>,
) -> Finding {
    let budget = (util * total as f64).round() as u64;
    let share = (used as f64 / budget as f64 * 100.0).round();
    let index = gpu.index;
    let mut f = Finding::new(
        META.id,
        Category::GpuMemoryHeldByOtherProcess,
        META.severity,
    );
    f.entities.gpus.insert(index);
    f.evidence(
        failure.span,
        "vLLM failed while sizing its KV cache (_initialize_kv_caches)",
    );
    f.evidence(
        usage,
        format!("after the failure, GPU {index} still had {used} MiB of {total} MiB in use: not the failed server's"),
    );
    let asked = match &flag {
        Some((printed, span)) => {
            f.evidence(
                *span,
                format!("the server may use {util} of the GPU: {budget} MiB"),
            );
            format!("`{printed}`")
        }
        None => format!("the default utilization {util}"),
    };
    f.condition("vLLM failed in its KV-cache sizing", true);
    f.condition(
        "the nvidia-smi snapshot is later than the failure (the failed engine had exited)",
        true,
    );
    f.condition(
        format!(
            "the memory in use ({used} MiB) is at least half the server's budget ({budget} MiB)"
        ),
        true,
    );
    f.condition("a process table names the holder (missing)", false);
    f.chain.push(format!(
        "GPU {index} had {used} MiB of {total} MiB in use after this server failed: another process holds it"
    ));
    f.chain.push(format!(
        "the server asked for {asked} = {budget} MiB; vLLM counts memory in use on the GPU against that budget, so {used} MiB held elsewhere ({share}% of it) left no room for the KV cache"
    ));
    f.title = format!(
        "another process holds {used} MiB of GPU {index}: no room left for vLLM's KV cache"
    );
    f.headline = format!(
        "vLLM failed sizing its KV cache on GPU {index}, where another process (such as a first server) holds {used} MiB of {total} MiB: {share}% of the {budget} MiB this server may use ({asked})."
    );
    f.explanation = "vLLM's budget is gpu_memory_utilization x total; the V1 engine before 0.9.1 charged all memory in use on the GPU to it (vllm#18854), so what another process holds is missing from the KV cache. The snapshot, taken after the failed engine exited, shows memory that is not its own.".to_owned();
    f.actions.push(Action::advice(
        "list the GPU's processes: the first server or job that holds the memory",
        Some(COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "run one server per GPU, or stop the other process; two servers on one GPU need utilizations that add up to less than 1 and a vLLM that counts only its own memory (0.9.1 or later)",
        None,
    ));
    f.confidence = confidence(&f, 0.5, 0.85);
    f
}
