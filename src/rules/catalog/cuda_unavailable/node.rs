//! `cudaErrorDevicesUnavailable` inside a batch job whose abort names the
//! compute node (Cray MPICH's `MPICH ERROR [Rank 2047] [job id …] [DATE]
//! [nid004069] - Abort(1) …`, catalogs/stacks-slurm.toml). A batch job
//! owns its node's GPUs: with no other process shown holding them, a GPU
//! that refuses the job a context is more likely in trouble itself (a
//! fault, a process the scheduler left behind, a wrong compute mode) than
//! taken by another of the user's programs. The finding names the node,
//! so that it can be checked, reported and excluded (batch Q 1080,
//! E3SM-Project/E3SM#8699: the same few Perlmutter nodes fail every job).

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Category, Finding};

/// Cray MPICH's abort line: rank, job, node.
const ABORT: &str = "stacks-slurm.cray-mpich-abort";

/// Rewrites `f` (the GPUs busy or unavailable, `lines` the CUDA errors)
/// when no holder is shown and an abort line of the same input names the
/// node the failing rank ran on.
pub(super) fn apply(incident: &Incident, f: &mut Finding, lines: &[&Message]) {
    // A holder shown (a process, a GPU's memory in use) keeps the finding.
    let shown = f
        .evidence
        .iter()
        .any(|e| lines.iter().all(|l| l.span != e.span));
    if !f.entities.pids.is_empty() || shown {
        return;
    }
    let Some((m, node, rank, job)) = incident.known(ABORT).find_map(|(m, hit)| {
        let node = hit.get("node")?;
        lines
            .iter()
            .any(|l| l.span.source == m.span.source)
            .then(|| (m, node, hit.get("rank"), hit.get("job")))
    }) else {
        return;
    };
    let rank = rank
        .map(|r| format!("rank {r}"))
        .unwrap_or("a rank".to_owned());
    let job = job.map(|j| format!(" of job {j}")).unwrap_or_default();
    f.evidence(
        m.span,
        format!("{rank}{job} aborted on node {node} after the CUDA error"),
    );
    f.category = Category::XidOther;
    f.condition(
        format!(
            "the failing {rank} ran on compute node {node}, inside a batch job that owns its GPUs"
        ),
        true,
    );
    f.condition("another process is shown holding the GPU", false);
    f.title = format!("CUDA is unavailable on node {node}: its GPU refused the job a context");
    f.headline = format!(
        "CUDA is unavailable on compute node {node}: {rank}{job} could not get a context (cudaErrorDevicesUnavailable: busy or unavailable) although the batch job owns the node's GPUs, and aborted the job. Most likely the node's GPU is in trouble (a fault, a process a previous job left, a wrong compute mode): check it, report it and exclude it from your jobs."
    );
    if let Some(last) = f.chain.last_mut() {
        *last = format!(
            "a GPU of node {node} refused a new context: unhealthy, left held by an earlier job, or in an exclusive compute mode"
        );
    }
    f.explanation = format!(
        "cudaErrorDevicesUnavailable says no GPU would take another context: in an exclusive compute mode each already holds one, or the GPU is unavailable. A batch scheduler gives the job the node's GPUs, so a holder would be a process an earlier job left behind; otherwise the GPU itself is failing (an Xid in the node's kernel log, which the job's output does not show). The same node failing job after job points at the node: {node}."
    );
    f.actions.clear();
    f.actions.push(Action::advice(
        format!("keep your jobs off {node} until it is checked"),
        Some(&format!(
            "sbatch --exclude={node} …   # or srun --exclude={node}"
        )),
    ));
    f.actions.push(Action::advice(
        format!("report {node} to the site's support: its GPUs' compute mode, leftover processes and kernel Xid lines (nvidia-smi -q -d COMPUTE; nvidia-smi; dmesg | grep -i xid on the node)"),
        Some("sacct -j JOB --format=JobID,State,ExitCode,NodeList"),
    ));
    f.confidence = 0.55;
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of("cuda-unavailable", text)
    }

    /// E3SM-Project/E3SM#8699 (batch Q 1080): Kokkos' cudaSetDevice error
    /// 46 on rank 2047, then Cray MPICH's abort naming node nid004069.
    const CUDA: &str = "2047: cudaSetDevice(cuda_device_id) error( cudaErrorDevicesUnavailable): CUDA-capable device(s) is/are busy or unavailable /global/u1/w/whannah/E3SM/E3SM_SRC1/externals/ekat/extern/kokkos/core/src/Cuda/Kokkos_Cuda_Instance.cpp:544\n";
    const ABORT: &str = "2047: MPICH ERROR [Rank 2047] [job id 57638547.0] [Fri Aug 28 22:45:13 2026] [nid004069] - Abort(1) (rank 2047 in comm 432): application called MPI_Abort(comm=0xC4000001, 1) - process 2047\n";

    #[test]
    fn busy_gpus_in_a_job_that_names_its_node_are_the_nodes_gpu() {
        let f = findings(&format!("{CUDA}{ABORT}"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::XidOther);
        assert!(f[0].title.contains("nid004069"), "{}", f[0].title);
        assert!(f[0].headline.contains("rank 2047"), "{}", f[0].headline);
    }

    /// Without the abort line the reading stays the holder's.
    #[test]
    fn busy_gpus_alone_stay_held_by_another_process() {
        let f = findings(CUDA);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
    }
}
