//! `vllm-custom-allreduce-expandable-segments`: vLLM's custom all-reduce
//! died on `invalid argument` (its CUDACHECK in `custom_all_reduce.cuh`)
//! in a process whose PyTorch allocator was set to expandable segments:
//! the legacy CUDA IPC it shares its CUDA-graph buffers with cannot export
//! memory from that allocator (vllm-project/vllm#42609).

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: VllmCustomAllreduceExpandableSegments = VllmCustomAllreduceExpandableSegments;

pub struct VllmCustomAllreduceExpandableSegments;

/// The allocator setting (`PYTORCH_CUDA_ALLOC_CONF=…expandable_segments:True…`).
const SETTING: &str = "stacks-torch.expandable-segments-set";
/// CUDA's `invalid argument`, in whatever envelope printed it.
const INVALID: &str = "cuda.invalid-value";
/// The custom all-reduce's source, which its CUDACHECK names
/// (`Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 '…'`).
const SOURCE_FILE: &str = "custom_all_reduce.cuh";

static META: RuleMeta = RuleMeta {
    id: "vllm-custom-allreduce-expandable-segments",
    category: Category::CudaGraphCaptureFailure,
    severity: Severity::Error,
    summary: "vLLM's custom all-reduce cannot share CUDA-graph buffers allocated with PyTorch's expandable segments",
    anchors: &[],
    doc: r#"
## What it means
vLLM's custom all-reduce (tensor parallelism on one node) shares its
buffers, and at the end of CUDA-graph capture the graphs' buffers, with
the other ranks through CUDA IPC (`cudaIpcGetMemHandle` in
`get_graph_buffer_ipc_meta`). Its CUDACHECK printed `Failed: Cuda error
…/csrc/custom_all_reduce.cuh:455 'invalid argument'` and the worker
exited, in a process whose PyTorch allocator was set to expandable
segments (`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`): memory from
that allocator is mapped with CUDA's virtual memory API, which the legacy
IPC call refuses with `invalid argument`.

## Why it happens
`expandable_segments:True` in the server's environment (set against
fragmentation or copied from PyTorch's out-of-memory hint) together with
the custom all-reduce, which vLLM enables by default for tensor
parallelism within a node. Reported on 2×RTX 3090 with NVLink, 4×H100,
4×H200 and 2×RTX 5090 (vllm-project/vllm#42609, #49101, #56180).

## How to confirm
The worker dies right after weight loading and `torch.compile`, during
CUDA-graph capture, with no Python traceback. Starting the same server
without `expandable_segments:True`, or with `--disable-custom-all-reduce`,
boots cleanly. Without the setting in the inputs this rule does not
fire: the same CUDA error from `cudaIpcOpenMemHandle` has other causes
(vllm-project/vllm#9774, a MoE model's buffers).

## How to fix
Remove `expandable_segments:True` from `PYTORCH_CUDA_ALLOC_CONF` for the
server (keep the other settings), or start vLLM with
`--disable-custom-all-reduce` (NCCL all-reduce, a few per cent slower), or
upgrade to a vLLM that turns the custom all-reduce off by itself when the
setting is on (vllm-project/vllm#55135, #56193).

## Safety
Advice only: a configuration change and a restart.
"#,
};

impl Rule for VllmCustomAllreduceExpandableSegments {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let Some((setting, _)) = incident.known(SETTING).next() else {
            return;
        };
        let failed: Vec<&Message> = incident
            .known(INVALID)
            .map(|(m, _)| m)
            .filter(|m| m.text.contains(SOURCE_FILE))
            .collect();
        let Some(first) = failed.first() else {
            return;
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.evidence_marked(
            setting.span,
            "PyTorch's allocator is set to expandable segments: its memory is mapped with CUDA's virtual memory API",
            "expandable_segments:True",
        );
        f.evidence_marked(
            first.span,
            "the custom all-reduce's CUDACHECK: CUDA refused to share a buffer with the other ranks (`invalid argument`), and the process exits",
            "invalid argument",
        );
        if let Some(m) = first.pid {
            f.entities.pids.insert(m);
        }
        f.condition(
            "the custom all-reduce's CUDACHECK failed with `invalid argument`",
            true,
        );
        f.condition(
            "expandable_segments:True is set for the server's PyTorch allocator",
            true,
        );
        f.condition(
            "the setting is shown in the failing server's own environment (missing: the server's environment, `cat /proc/PID/environ | tr '\\0' '\\n' | grep ALLOC_CONF`)",
            false,
        );
        f.title =
            "custom all-reduce cannot share buffers allocated with expandable segments".to_owned();
        f.headline = "vLLM's custom all-reduce failed with `invalid argument` while it shared buffers with the other ranks (its CUDA-graph buffers, at capture): PYTORCH_CUDA_ALLOC_CONF sets expandable_segments:True, whose memory the legacy CUDA IPC cannot export; remove the setting or start with --disable-custom-all-reduce.".to_owned();
        f.chain
            .push("the worker exited and the server shut down".to_owned());
        f.chain.push(
            "cudaIpcGetMemHandle refused the CUDA-graph buffers with `invalid argument`".to_owned(),
        );
        f.chain.push(
            "expandable segments back the buffers with CUDA virtual-memory mappings, which legacy IPC cannot export".to_owned(),
        );
        f.explanation = "PyTorch's expandable segments map memory with CUDA's virtual memory API (cuMemCreate, cuMemMap) instead of cudaMalloc. vLLM's custom all-reduce shares its buffers with the other tensor-parallel ranks through legacy CUDA IPC (cudaIpcGetMemHandle), which accepts only cudaMalloc memory and answers `invalid argument` for the rest; its CUDACHECK prints the error and exits the process.".to_owned();
        f.actions.push(Action::advice(
            "remove expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF for the server (keep its other settings), then restart it",
            None,
        ));
        f.actions.push(Action::advice(
            "or keep the setting and start vLLM with --disable-custom-all-reduce (NCCL's all-reduce, a few per cent slower)",
            None,
        ));
        f.actions.push(Action::advice(
            "or upgrade to a vLLM that turns the custom all-reduce off when expandable segments are on (vllm-project/vllm#55135, #56193)",
            None,
        ));
        f.confidence = crate::rules::support::confidence(&f, 0.5, 0.9);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;
    use crate::testing::findings_of;

    /// vllm-project/vllm#42609 (steamEngineer's comment): the reporter's
    /// setting, then the crash.
    const ISSUE: &str = "\
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:512   # custom all-reduce ON
...
Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'
Worker proc VllmWorker-1 died unexpectedly, shutting down executor.
";

    #[test]
    fn the_setting_and_the_crash() {
        let f = findings_of(super::META.id, ISSUE);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::CudaGraphCaptureFailure);
        assert!(f[0].confidence > 0.7, "{}", f[0].confidence);
        let d = crate::testing::analyze_paste(ISSUE).diagnosis;
        let root = d
            .findings
            .iter()
            .find(|f| Some(&f.id) == d.root_cause.as_ref());
        assert_eq!(
            root.map(|r| r.rule),
            Some(super::META.id),
            "{:?}",
            d.findings
        );
    }

    /// vllm-project/vllm#9774: the same CUDA error from cudaIpcOpenMemHandle
    /// with a MoE model and no expandable segments: none; the setting
    /// alone: none.
    #[test]
    fn the_error_or_the_setting_alone_is_none() {
        let moe =
            "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:336 'invalid argument'\n";
        assert!(findings_of(super::META.id, moe).is_empty());
        let setting = ISSUE.lines().next().unwrap_or_default();
        assert!(findings_of(super::META.id, setting).is_empty());
    }
}
