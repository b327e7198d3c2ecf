//! `gpu-uninitialisable-after-jobs`: a node check run after a job (a
//! scheduler's epilog) found that CUDA can no longer initialise the node's
//! GPUs (`cudaGetDeviceCount: initialization error`). The node ran the job,
//! so its driver and libraries worked: the GPUs, or the driver's state of
//! them, faulted during or after it. GPU health without an Xid line, until
//! the GPUs are reset or the node rebooted.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{matches, round2};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: GpuUninitialisableAfterJobs = GpuUninitialisableAfterJobs;

pub struct GpuUninitialisableAfterJobs;

/// The CUDA catalog's row of `cudaErrorInitializationError` /
/// `CUDA_ERROR_NOT_INITIALIZED` (`initialization error`), read in every
/// wrapper the catalog knows (`catalogs/cuda.toml`).
const ROW: &str = "cuda.initialization-error";

/// A scheduler's post-job script: Slurm's and LSF's `Epilog`, IBM CSM's
/// `epilog.d`, a drain reason `Epilog error`.
static EPILOG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bepilog").expect("epilog regex"));

/// The most failing lines the finding cites.
const MAX_CITED: usize = 4;

static META: RuleMeta = RuleMeta {
    id: "gpu-uninitialisable-after-jobs",
    category: Category::XidOther,
    severity: Severity::Critical,
    summary: "a node check after a job (an epilog) found that CUDA can no longer initialise the node's GPUs: a GPU fault without an Xid line, until a reset or a reboot",
    anchors: &["epilog", "Epilog", "EPILOG"],
    doc: r#"
## What it means
A check that a scheduler runs on a node after each job (Slurm's or LSF's
`Epilog`, IBM CSM's `epilog.d`, a site's `test_node` program) makes the
first CUDA call and prints its error: `FAILED: sierra1133 Failed during
cudaGetDeviceCount: initialization error` (`cudaErrorInitializationError`,
the driver API's `CUDA_ERROR_NOT_INITIALIZED`). The node just ran a job on
its GPUs, so its driver and CUDA libraries worked: what changed is the
GPUs, or the driver's state of them. Until the GPUs are reset or the node
rebooted, no job can use them. Seen on one node it is that node's fault;
on several, a fault that jobs leave behind.

The same message with no sign of a job before it (a first install, a
container) is read by the catalog row alone, as a driver/library problem
at low confidence: there the version mismatch is the usual cause.

## Why it happens
A GPU that faulted during the job (an Xid 79 fallen off the bus, 48 or 94
ECC, 119/120 GSP, 109 context-switch timeout) and was not recovered; a
process of the job stuck in the driver; the driver's state of the device
corrupted. The kernel log of the node says which, when it was kept.

## How to confirm
On the node: `dmesg -T | grep -E 'NVRM|Xid'` around the job's end;
`nvidia-smi` (a GPU missing, `ERR!`, `Unknown Error`) and `nvidia-smi -q
-d PAGE_RETIREMENT,ROW_REMAPPER,ECC`; `ps -eo pid,stat,cmd | grep ' D'`
for a process stuck in the driver.

## How to fix
Drain the node so the scheduler sends no job to it, then reset the GPUs
(`nvidia-smi -r`, with nothing running on them) or reboot the node; run the
check again before returning it to service. A GPU that faults again after
a reboot is a hardware case (field diagnostics, RMA).

## Safety
Advice only: draining, resetting the GPUs and rebooting take the node out
of service.
"#,
};

impl Rule for GpuUninitialisableAfterJobs {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let failed: Vec<&Message> = incident.known(ROW).map(|(m, _)| m).collect();
        if failed.is_empty() {
            return;
        }
        // A post-job check: the failing line, or a line of its input (the
        // prompt in the epilog's folder), names an epilog.
        let epilog: Vec<&Message> = matches(incident, &EPILOG)
            .map(|(m, _)| m)
            .filter(|e| failed.iter().any(|m| m.span.source == e.span.source))
            .collect();
        let Some(first_epilog) = epilog.first() else {
            return;
        };
        let failed: Vec<&Message> = failed
            .into_iter()
            .filter(|m| m.span.source == first_epilog.span.source)
            .collect();
        // One line per report: the same text twice is one report pasted
        // twice; two nodes' reports differ by their names.
        let mut cited: Vec<&Message> = Vec::new();
        for m in &failed {
            if !cited.iter().any(|c| c.text.trim() == m.text.trim()) {
                cited.push(m);
            }
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        if !cited.iter().any(|m| m.span == first_epilog.span) {
            f.evidence(
                first_epilog.span,
                "the check runs in a job epilog: after a job, on a node whose GPUs had just served it",
            );
        }
        for m in cited.iter().take(MAX_CITED) {
            f.evidence(
                m.span,
                "CUDA cannot initialise the node's GPUs: the first CUDA call of the check fails with `initialization error` (cudaErrorInitializationError)",
            );
        }
        f.occurrences = u32::try_from(failed.len()).unwrap_or(u32::MAX);
        f.condition("CUDA's first call failed with initialization error", true);
        f.condition(
            "the check ran after a job (an epilog): the node's driver and libraries had worked",
            true,
        );
        let several = f.condition(
            "the failure is reported more than once (several nodes, or runs)",
            cited.len() > 1,
        );
        let xid = f.condition(
            "a kernel Xid line in the inputs names the GPU's fault",
            incident
                .facts
                .kernel_events
                .iter()
                .any(|k| matches!(k.kind, crate::model::KernelEventKind::Xid(_))),
        );
        f.confidence = round2(if several { 0.65 } else { 0.55 });
        f.title =
            "CUDA can no longer initialise the GPUs of a node that ran a job (initialization error after the job)"
                .to_owned();
        f.headline = format!(
            "A node check run after a job found that CUDA can no longer initialise the node's GPUs (initialization error){}: the node ran the job, so its driver and libraries worked; the GPUs, or the driver's state of them, faulted during or after it{}. No job can use them until they are reset or the node is rebooted.",
            if cited.len() > 1 {
                format!(", in {} reports", cited.len())
            } else {
                String::new()
            },
            if xid {
                ""
            } else {
                ", with no Xid line in these inputs"
            }
        );
        f.chain
            .push("the node's post-job check fails its first CUDA call".to_owned());
        f.chain.push(
            "CUDA cannot initialise the GPUs: initialization error, on a node whose GPUs had just served a job"
                .to_owned(),
        );
        f.chain.push(
            "a GPU fault the job left behind (a fallen-off or faulted GPU, a process stuck in the driver), not a version mismatch: a reset or reboot clears it"
                .to_owned(),
        );
        f.explanation = "A version mismatch between the driver and its libraries, the usual cause of `initialization error` on a fresh install, does not appear between two jobs on the same node: what changed after the job is the state of its GPUs. The node's kernel log around the job's end usually has the Xid that says which GPU and what fault.".to_owned();
        f.actions.push(Action::advice(
            "drain the node so that no job is sent to it while its GPUs cannot be initialised",
            Some("scontrol update nodename=NODE state=drain reason=\"CUDA initialization error after job\""),
        ));
        f.actions.push(Action::advice(
            "read the node's kernel log around the job's end for the GPU's fault (an Xid) and see which GPU is missing or in error",
            Some("dmesg -T | grep -E 'NVRM|Xid'; nvidia-smi; nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER,ECC"),
        ));
        f.actions.push(Action::advice(
            "reset the GPUs with nothing running on them, or reboot the node, then run the check again before returning the node to service",
            Some("nvidia-smi -r"),
        ));
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// IBM/CAST#123 (fixtures/real/990), verbatim: LLNL's epilog check and
    /// the CSM summary of its failures.
    const SIERRA: &str = "[root@sierra1133:epilog.d]# /admin/scripts/test_sierra_node\n\
FAILED: sierra1133 Failed during cudaGetDeviceCount: initialization error\n\
compute:    \"GPU 0 failed cudaMalloc 1\":                                                            1: sierra3061\n\
compute:    \"epilog: FAILED: sierra1133 Failed during cudaGetDeviceCount: initialization error\":    1: sierra1133\n\
compute:    \"epilog: FAILED: sierra1301 Failed during cudaGetDeviceCount: initialization error\":    1: sierra1301\n";

    #[test]
    fn cuda_that_cannot_initialise_after_a_job_is_a_gpu_fault() {
        let f = findings(SIERRA);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::XidOther);
        assert_eq!(f[0].evidence.len(), 4, "{:?}", f[0].evidence);
        assert!(f[0].confidence > 0.6, "{}", f[0].confidence);
        // One report: the same reading, said less firmly.
        let one: String = SIERRA.lines().take(2).map(|l| format!("{l}\n")).collect();
        let f = findings(&one);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].confidence < 0.6, "{}", f[0].confidence);
    }

    /// ccsb-scripts/AutoDock-GPU#192, verbatim: the same error at a
    /// program's start with no job before it: not this rule's.
    #[test]
    fn the_error_with_no_job_before_it_is_not_read_as_a_fault() {
        let text = "AutoDock-GPU version: v1.5-release\n\nRunning 1 docking calculation\n\ncudaGetDeviceCount failed initialization error\nautodock_gpu_128wi: ./host/src/performdocking.cpp:128: void setup_gpu_for_docking(GpuData&, GpuTempData&): Assertion `0' failed.\nAborted\n";
        assert!(findings(text).is_empty());
        // An epilog with no CUDA failure is a job's end, nothing more.
        assert!(
            findings("[root@sierra1133:epilog.d]# /admin/scripts/test_sierra_node\n").is_empty()
        );
    }
}
