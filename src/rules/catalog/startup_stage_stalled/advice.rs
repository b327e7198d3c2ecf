//! What usually stops a start-up at each stage, what to do about it, and
//! the command that shows it.

use super::*;

pub(super) const P2P: (&str, &str, &str) = (
    "a multi-GPU start-up that goes silent while its NCCL group forms or at its first collective is most often peer-to-peer (P2P) traffic between the GPUs blocked or broken: PCIe ACS, an IOMMU, a virtualised host",
    "Test with NCCL_P2P_DISABLE=1; if that starts, disable PCIe ACS in the BIOS or boot with iommu=pt (or keep P2P off); check the topology with nvidia-smi topo -m and the P2P path with nccl-tests",
    "NCCL_DEBUG=INFO NCCL_P2P_DISABLE=1 <the server's command>; nvidia-smi topo -m; py-spy dump --pid PID",
);

pub(super) const FIRST_COLLECTIVE: (&str, &str, &str) = (
    "a group that posted its first collective and went silent waits for a rank that never joined it: a rank missing or stuck (on another node, whose log is not here), or the traffic between the ranks blocked (peer to peer between the GPUs, or the network between the nodes: a firewall, the wrong interface)",
    "Check that every rank of every node reached the same collective (NCCL_DEBUG=INFO on all nodes); test the path with NCCL_P2P_DISABLE=1 on one node, NCCL_SOCKET_IFNAME and the firewall between nodes; set a collective timeout so that a hang becomes an error",
    "py-spy dump --pid PID; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL <the job's command>",
);

pub(super) const NETWORK: (&str, &str, &str) = (
    "ranks that reach each other over the network (NCCL via NET/Socket or NET/IB: several nodes) and went silent once their group formed, or while it formed, wait for a rank that never joined: a rank missing or stuck on another node (whose log is not here), or the network between the nodes blocked (a firewall or security group on NCCL's ports, the wrong interface)",
    "Run with NCCL_DEBUG=INFO on every node and compare which ranks reached Init COMPLETE; open the ports between the nodes (or test with the firewall off) and pin the interface with NCCL_SOCKET_IFNAME; dump a stuck rank's stacks; set a collective timeout so that a hang becomes an error",
    "py-spy dump --pid PID; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET <the job's command>",
);

pub(super) const TRAINING: (&str, &str, &str) = (
    "a training job that set itself up and never logged its first step is most often stuck in the first collective of that step (or of the engine's set-up): a rank missing, stuck or slow to start (on this node or another, whose log is not here), or the traffic between the ranks blocked; less often its data loading",
    "Dump the stacks of every rank to see where each one waits; run with NCCL_DEBUG=INFO on every node to see which rank never joined; set a timeout on init_process_group so that a hang becomes an error; compare with a single-GPU run",
    "py-spy dump --pid PID; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL <the job's command>",
);

/// Whether the input's NCCL lines route traffic over the network (`via
/// NET/Socket/0`, `via NET/IB/0`): ranks on several nodes.
pub(super) fn over_network(incident: &Incident, source: crate::source::SourceId) -> bool {
    incident
        .facts
        .messages
        .iter()
        .any(|m| m.span.source == source && m.text.contains("via NET/"))
}

/// What usually stops a start-up at `stage`, what to do, and the command
/// that shows it.
pub(super) fn advice(
    stage: Stage,
    multi_gpu: bool,
    over_network: bool,
) -> (&'static str, &'static str, &'static str) {
    match stage {
        Stage::FirstCollective => FIRST_COLLECTIVE,
        // Ranks that reach each other over the network (NCCL's `via
        // NET/Socket`, `via NET/IB`): the nodes' path, not the GPUs' P2P.
        Stage::DistributedInit | Stage::DistributedReady if over_network => NETWORK,
        Stage::Training => TRAINING,
        Stage::DistributedInit | Stage::DistributedReady => P2P,
        Stage::WeightsLoaded | Stage::KvCache | Stage::Ready if multi_gpu => P2P,
        Stage::GraphCapture => (
            "CUDA graph capture that never finishes is a kernel or collective that deadlocks under capture",
            "Run without CUDA graphs to confirm (vLLM --enforce-eager, SGLang --disable-cuda-graph), then upgrade or report the regression",
            "py-spy dump --pid PID",
        ),
        Stage::Launched | Stage::WeightsLoading => (
            "a start-up stuck before or while loading the weights waits on storage, a download, or another rank",
            "Check the model's storage and download (disk I/O, network, the Hugging Face cache) and that every rank started",
            "py-spy dump --pid PID; iostat -x 5",
        ),
        _ => (
            "a start-up that goes silent after loading is waiting in its first forward pass or warm-up",
            "Look at where the process waits, and at the GPU's state",
            "py-spy dump --pid PID; nvidia-smi",
        ),
    }
}
