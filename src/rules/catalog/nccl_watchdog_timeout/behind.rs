//! The rank furthest behind in the sequence of collectives: with every
//! rank reporting and none silent, the one whose timed-out collective has
//! the lowest `SeqNum` (pytorch/pytorch#118369: `[Rank 7] … SeqNum=64088`
//! while rank 0 times out at 96117–96125).

use std::collections::BTreeMap;

use super::Report;
use crate::rules::Finding;

/// The one rank whose timed-out collective is earlier than every other
/// rank's (`[Rank 7] … SeqNum=64088` against rank 0's `SeqNum=96117`): the
/// others went on issuing collectives it never reached. Each rank's lowest
/// reported sequence number counts; none when two ranks share the lowest
/// or only one rank reported.
#[derive(Clone, Copy)]
pub(super) struct Behind<'a> {
    rank: u32,
    report: Report<'a>,
    ahead_rank: u32,
    ahead_seq: u64,
}

pub(super) fn furthest_behind<'a>(reports: &[Report<'a>]) -> Option<Behind<'a>> {
    let mut lowest: BTreeMap<u32, Report<'a>> = BTreeMap::new();
    for r in reports {
        let Some(rank) = r.rank else { continue };
        let e = lowest.entry(rank).or_insert(*r);
        if r.seq < e.seq {
            *e = *r;
        }
    }
    if lowest.len() < 2 {
        return None;
    }
    let (&rank, &report) = lowest.iter().min_by_key(|(_, r)| r.seq)?;
    // The nearest rank ahead of it, so the gap is the smallest one.
    let (&ahead_rank, ahead) = lowest
        .iter()
        .filter(|(k, _)| **k != rank)
        .min_by_key(|(_, r)| r.seq)?;
    (ahead.seq > report.seq).then_some(Behind {
        rank,
        report,
        ahead_rank,
        ahead_seq: ahead.seq,
    })
}

/// The culprit's reason, as [`super::culprit`] gives one.
pub(super) fn why(b: Behind<'_>) -> (u32, &'static str) {
    (
        b.rank,
        "is furthest behind: its timed-out collective has the lowest SeqNum",
    )
}

/// Cites the laggard's own report with the gap to the nearest rank ahead.
pub(super) fn cite(f: &mut Finding, laggard: Option<Behind<'_>>) {
    let Some(b) = laggard else {
        return;
    };
    f.evidence(
        b.report.event.span,
        format!(
            "rank {} timed out at SeqNum={}, {} collectives behind rank {}'s SeqNum={}: the rank furthest behind",
            b.rank,
            b.report.seq,
            b.ahead_seq - b.report.seq,
            b.ahead_rank,
            b.ahead_seq
        ),
    );
    f.condition(
        "the ranks' timed-out sequence numbers differ: one rank is behind the others",
        true,
    );
}
