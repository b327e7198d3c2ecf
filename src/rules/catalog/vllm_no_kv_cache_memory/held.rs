//! vLLM 0.6.4–0.6.5's memory profile read for another process's share:
//! `initial_memory_usage` is what was in use on the GPU when profiling
//! began, after the weights loaded (this server's weights and context and
//! every other process's memory), and that version charges all of it to
//! the server's budget. The weights figure splits it; without one, more
//! than half of the GPU in use is read as another process's, with the
//! split left open as a failed condition.

use crate::rules::support::vllm::VllmMemory;
use crate::rules::{Action, Category, Finding};
use crate::source::Span;

/// The worker's own CUDA context and allocator slack beside its weights
/// (GiB): vllm#10517's profile shows 15.34 in use for 14.99 of weights.
const CONTEXT_GIB: f64 = 1.0;
/// Another process's share counts from this much (GiB), or from a tenth of
/// the GPU where that is more.
const MIN_OTHERS_GIB: f64 = 2.0;
const MIN_OTHERS_SHARE: f64 = 0.1;
/// With no weights figure: the share of the GPU in use before profiling
/// that is read as another process's.
const UNSPLIT_SHARE: f64 = 0.5;

/// The memory profile's two figures, with the line and the figures as
/// printed.
pub(super) struct Profile {
    pub span: Span,
    pub total: f64,
    pub initial: f64,
    pub total_text: String,
    pub initial_text: String,
}

/// What the profile says is not this server's: the GiB the weights figure
/// leaves (`split`), or nothing split (`None`: no weights figure).
pub(super) struct Others {
    split: Option<(f64, f64)>,
}

/// Another process's share of the memory in use before profiling, when
/// the numbers show one.
pub(super) fn others(p: &Profile, mem: &VllmMemory) -> Option<Others> {
    if p.total <= 0.0 {
        return None;
    }
    match mem.weights {
        Some((w, _)) => {
            let others = p.initial - w - CONTEXT_GIB;
            (others >= MIN_OTHERS_GIB.max(MIN_OTHERS_SHARE * p.total)).then_some(Others {
                split: Some((others, w)),
            })
        }
        None => (p.initial >= UNSPLIT_SHARE * p.total).then_some(Others { split: None }),
    }
}

/// Words the verdict: another process's memory was charged to the budget.
pub(super) fn explain(f: &mut Finding, p: &Profile, o: &Others, who: &str) {
    let (initial, total) = (&p.initial_text, &p.total_text);
    let pct = (p.initial / p.total * 100.0).round();
    f.category = Category::GpuMemoryHeldByOtherProcess;
    let held = match o.split {
        Some((others, weights)) => {
            f.chain.push(format!(
                "{initial} GiB of the GPU's {total} GiB were in use when profiling began; this server's weights take {weights:.2} GiB and its CUDA context about {CONTEXT_GIB:.0} GiB: about {others:.2} GiB is another process's"
            ));
            f.condition(
                format!("the weights figure splits the memory in use: about {others:.2} GiB is not this server's"),
                true,
            );
            format!("about {others:.2} GiB of it another process's")
        }
        None => {
            f.chain.push(format!(
                "{initial} GiB of the GPU's {total} GiB ({pct}%) were in use when profiling began, more than half of the GPU"
            ));
            f.condition(
                "a weights figure (`Loading model weights took`) says how much of it is this server's own (missing)",
                false,
            );
            "most likely another process's (the log has no weights figure to split it)".to_owned()
        }
    };
    f.chain.push(
        "vLLM 0.6.4–0.6.5 charges all memory in use on the GPU to this server's budget (gpu_memory_utilization x total), another process's included: nothing was left for KV-cache blocks"
            .to_owned(),
    );
    f.condition(
        "a process table names the holder (missing: nvidia-smi --query-compute-apps)",
        false,
    );
    f.title = format!(
        "another process holds memory on vLLM's GPU: {initial} of {total} GiB in use before profiling"
    );
    f.headline = format!(
        "{who} had no memory for its KV cache because {initial} GiB of the GPU's {total} GiB were in use before it profiled, {held} (another workload, such as a second server on the same GPU); vLLM counted it against this server's budget."
    );
    f.explanation = "In vLLM 0.6.4–0.6.5 `initial_memory_usage` is what the GPU had in use when profiling began, after the weights loaded: this server's weights and context and every other process's memory. That version subtracts all of it from gpu_memory_utilization x total, so a second server on the same GPU leaves the new one no KV cache (vllm#10533; vllm#2248: vLLM attributes any occupied GPU memory to the running instance). Raising gpu_memory_utilization hides it only while the GPU has room for both.".to_owned();
    f.actions.push(Action::advice(
        "find the other process on the GPU (a first vLLM instance, another job) before changing any flag",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "size the instances together (each one's gpu_memory_utilization is a share of the whole GPU, and this version also charges it the other's memory), give each its own GPU, or stop the other process",
        None,
    ));
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;
    use crate::testing::findings_of;

    const ID: &str = "vllm-no-kv-cache-memory";

    /// https://github.com/vllm-project/vllm/issues/10533 (fixtures/real/679):
    /// a second vLLM 0.6.4 server on an A100 the first one holds; the
    /// thread's copy ends inside the profile line.
    const SECOND_INSTANCE: &str = "\
ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
Memory profiling results: total_gpu_memory=79.15GiB initial_memory_usage=68.01GiB peak_torch_memory=
";

    /// https://github.com/vllm-project/vllm/issues/10517's profile: 15.34
    /// GiB in use for 14.99 GiB of weights, this server's own.
    const OWN: &str = "\
Loading model weights took 14.9888 GB
Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.98GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=2.89GiB gpu_memory_utilization=0.90
ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
";

    #[test]
    fn memory_in_use_before_profiling_is_another_process_s() {
        let f = findings_of(ID, SECOND_INSTANCE);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
        // Numbers before blame: the figures as printed, and the split
        // the paste cannot make stays an open condition.
        assert!(
            f[0].headline.contains("68.01 GiB of the GPU's 79.15 GiB"),
            "{}",
            f[0].headline
        );
        assert!(
            f[0].conditions
                .iter()
                .any(|c| !c.met && c.text.contains("weights figure"))
        );
    }

    #[test]
    fn a_weights_figure_splits_the_memory_in_use() {
        // The server's own weights and context explain what was in use: no
        // other process (the rule's other readings decide).
        let f = findings_of(ID, OWN);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_ne!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
        // The same profile with the weights figure of a smaller model
        // (vllm#10517's wording, another size): about 10 GiB is another's.
        let small = OWN.replace("took 14.9888 GB", "took 4.3456 GB");
        let f = findings_of(ID, &small);
        assert_eq!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
        assert!(
            f[0].chain
                .iter()
                .any(|c| c.contains("about 9.99 GiB is another process's")),
            "{:?}",
            f[0].chain
        );
    }
}
