//! A rendezvous that only part of its world joined: launchers that log
//! each member as it enters `init_process_group` with its place in the
//! world (Lightning's `initializing ddp: GLOBAL_RANK: 3, MEMBER: 4/8`) and
//! fewer distinct members than the world's size, then silence. The
//! missing members are the story, not the GPUs' peer-to-peer path: they
//! were never launched, were launched with the wrong ranks, or cannot
//! reach the master.

use super::*;
use std::collections::BTreeSet;

pub(super) const MEMBERS: (&str, &str, &str) = (
    "a distributed rendezvous that only part of its world joined waits for the members that never arrived: they were never launched (a scheduler that started fewer tasks than the world size: Slurm without srun, or --ntasks-per-node not matching the GPUs per node the trainer uses, or --nodes not matching num_nodes), were launched with the wrong ranks or world size, or cannot reach the master address and port",
    "Make the launch start every member of the world: one task per GPU on every node (Slurm: srun, --ntasks-per-node equal to the trainer's GPUs per node, --nodes equal to its num_nodes), the same MASTER_ADDR, MASTER_PORT and world size on every node; read the missing members' own logs on the other nodes",
    "scontrol show job JOBID | grep -E 'NumNodes|NumTasks|TRES'; py-spy dump --pid PID",
);

/// The members a launcher's rendezvous lines name at `reached`, when they
/// are fewer than the world size those lines give, and not NCCL's own.
pub(super) fn missing(startup: &Startup<'_>, reached: Stage) -> Option<(usize, u32)> {
    if reached != Stage::DistributedInit {
        return None;
    }
    let mut ranks = BTreeSet::new();
    let mut world = None;
    for (m, s, _) in &startup.lines {
        if *s != reached || startup.nccl.contains(&m.span) {
            continue;
        }
        if let Some(&(rank, Some(n), false)) = startup.ranks.get(&m.span) {
            ranks.insert(rank);
            world = world.max(Some(n));
        }
    }
    let world = world?;
    (!ranks.is_empty() && ranks.len() < world as usize).then_some((ranks.len(), world))
}
