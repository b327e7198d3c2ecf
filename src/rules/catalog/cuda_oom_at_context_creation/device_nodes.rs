//! The holders `fuser -v /dev/nvidia*` names beside a raw CUDA
//! out-of-memory error: the step the rule's own advice asks for, read when
//! the paste already has it. A process with a GPU's device node open that
//! is not the failing one holds a CUDA context there, and maybe much more:
//! fuser does not say how much, and nvidia-smi's table may not list it
//! (another PID namespace, a process it cannot resolve).

use std::collections::BTreeMap;

use crate::correlate::Incident;
use crate::model::DeviceHolder;
use crate::rules::{Action, Category, Finding};

/// Says on `f` that the processes holding the GPUs' device nodes, other
/// than the failing process (`failing`, when its PID is known) and those
/// nvidia-smi lists with their memory, are the likely holders. Returns
/// whether there was any.
pub(super) fn explain(
    f: &mut Finding,
    incident: &Incident,
    who: &str,
    failing: Option<u32>,
) -> bool {
    let listed = |pid: u32| {
        incident
            .facts
            .gpu_processes
            .iter()
            .any(|p| p.pid == pid && p.used_mib.is_some())
    };
    // Each holder once, at its first GPU node's row (else its first row).
    let mut by_pid: BTreeMap<u32, Vec<&DeviceHolder>> = BTreeMap::new();
    for h in &incident.facts.device_holders {
        if Some(h.pid) != failing && !listed(h.pid) {
            by_pid.entry(h.pid).or_default().push(h);
        }
    }
    if by_pid.is_empty() {
        return false;
    }
    let mut names = Vec::new();
    for (pid, rows) in &by_pid {
        let first = rows.iter().find(|h| h.gpu.is_some()).unwrap_or(&rows[0]);
        let gpus: Vec<u32> = rows.iter().filter_map(|h| h.gpu).collect();
        f.evidence(
            first.span,
            format!(
                "PID {pid} ({}, user {}) has {} open",
                first.command, first.user, first.file
            ),
        );
        f.entities.pids.insert(*pid);
        f.entities.gpus.extend(gpus);
        names.push(format!("PID {pid} ({})", first.command));
    }
    let names = names.join(", ");
    f.category = Category::GpuMemoryHeldByOtherProcess;
    f.condition(
        "another process has the GPU's device node open (fuser), not in nvidia-smi's table with its memory",
        true,
    );
    f.condition("how much memory that process holds is known", false);
    f.chain.push(format!(
        "{names} still had the GPU open: a likely holder of the memory {who} could not get"
    ));
    f.title = format!("out of GPU memory while {names} had the GPU's device node open");
    f.headline = format!(
        "{who} ran out of GPU memory while {names}, which nvidia-smi's table does not account for, had the GPU's device nodes open: most likely a leftover (a notebook kernel, an interrupted run) still holding the memory."
    );
    f.explanation = "`fuser -v /dev/nvidia*` lists every process with the driver open, including those nvidia-smi's table misses (a dangling Jupyter kernel, another PID namespace); a process other than the failing one that has the GPU's node open holds at least a CUDA context there, and often the memory the failing call wanted. fuser does not say how much.".to_owned();
    f.actions.push(Action::advice(
        "check what each process holding the GPU's node is and how much it holds; if it is a leftover of yours (an old notebook kernel, an interrupted run), end it (restart the kernel) and run again",
        Some("ps -o pid,ppid,lstart,args -p PID; nvidia-smi --query-compute-apps=pid,used_memory --format=csv"),
    ));
    true
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;
    use crate::testing::findings_of;

    /// dmlc/gluon-nlp#338: MXNet's kernel check fails out of memory on a
    /// 16 GB V100 whose nvidia-smi table lists one python (17750, 1576MiB);
    /// `fuser -v /dev/nvidia*` shows a dangling notebook kernel (4411) with
    /// GPU 0's node open: the holder candidate, its memory unknown, never
    /// a kill.
    #[test]
    fn a_device_node_holder_beside_a_raw_oom_is_the_candidate() {
        let paste = include_str!(
            "../../../../fixtures/real-incoming/batch-t/1222-mxnet-gluonnlp-eval-oom-dangling-notebook-kernel-seen-only-by-device-node-holders/input.log"
        );
        let f = findings_of("cuda-oom-at-context-creation", paste);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
        assert_eq!(
            f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
            [4411]
        );
        assert!(f[0].entities.gpus.contains(&0));
        assert!(f[0].confidence <= 0.6, "{}", f[0].confidence);
        assert!(
            f[0].actions.iter().all(|a| !a.is_scripted()),
            "{:?}",
            f[0].actions
        );
        // Without fuser's rows the same error names no holder.
        let alone: String = paste.lines().take(2).map(|l| format!("{l}\n")).collect();
        let f = findings_of("cuda-oom-at-context-creation", &alone);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::CudaOom);
    }
}
