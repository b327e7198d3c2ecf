//! The GPU of each timed-out rank, read from that rank's own communicator
//! line (`ncclCommInitRank comm 0x… rank 3 nranks 4 cudaDev 3 … - Init
//! COMPLETE`): the watchdog names the rank, NCCL's init line its device.

use std::collections::{BTreeMap, BTreeSet};

use crate::correlate::Incident;
use crate::rules::Finding;
use crate::source::Span;

/// NCCL's communicator ready (catalogs/startup.toml).
const INIT: &str = "startup.nccl-init-complete";

/// Adds the GPU of each rank in `ranks` that the inputs' init lines name
/// one device for, citing the line. Only the group of every rank (the
/// largest `nranks`) counts: a subgroup's rank 3 is another process.
pub(super) fn cite(incident: &Incident, ranks: &BTreeSet<u32>, f: &mut Finding) {
    let inits: Vec<(Span, u32, u32, u32)> = incident
        .known(INIT)
        .filter_map(|(m, hit)| {
            let n = |k: &str| hit.get(k).and_then(|v| v.parse::<u32>().ok());
            Some((m.span, n("rank")?, n("nranks")?, n("dev")?))
        })
        .collect();
    let Some(world) = inits.iter().map(|i| i.2).max() else {
        return;
    };
    let mut devices: BTreeMap<u32, (BTreeSet<u32>, Span)> = BTreeMap::new();
    for &(span, rank, nranks, dev) in &inits {
        if nranks == world && ranks.contains(&rank) {
            devices
                .entry(rank)
                .or_insert_with(|| (BTreeSet::new(), span))
                .0
                .insert(dev);
        }
    }
    for (rank, (devs, span)) in devices {
        let [dev] = devs.into_iter().collect::<Vec<_>>()[..] else {
            continue;
        };
        f.entities.gpus.insert(dev);
        f.evidence(
            span,
            format!("rank {rank}'s communicator was built on GPU {dev} (cudaDev {dev})"),
        );
    }
}

#[cfg(test)]
mod tests {
    /// batch L 917 (Lightning-AI/pytorch-lightning#20434): rank 3's own
    /// `ncclCommInitRank … rank 3 nranks 4 cudaDev 3 … Init COMPLETE`,
    /// then its watchdog's timeout: the finding names GPU 3. Another
    /// rank's init line names nothing.
    #[test]
    fn the_timed_out_ranks_gpu_is_read_from_its_init_line() {
        let init = "babel-0-31:2324239:2324522 [3] NCCL INFO ncclCommInitRank comm 0x5584021f39f0 rank 3 nranks 4 cudaDev 3 nvmlDev 3 busId e1000 commId 0xb886029f29f1a815 - Init COMPLETE\n";
        let timeout = "[rank3]:[E1119 13:21:12.512781555 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800000 milliseconds before timing out.\n";
        let f = crate::testing::findings_of("nccl-watchdog-timeout", &format!("{init}{timeout}"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].entities.gpus.iter().copied().collect::<Vec<_>>(), [3]);
        assert!(f[0].evidence.iter().any(|e| e.span.line == 1));
        let other = init.replace("rank 3 nranks", "rank 2 nranks");
        let f = crate::testing::findings_of("nccl-watchdog-timeout", &format!("{other}{timeout}"));
        assert!(f[0].entities.gpus.is_empty(), "{:?}", f[0].entities.gpus);
    }
}
