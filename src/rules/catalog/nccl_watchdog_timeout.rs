//! `nccl-watchdog-timeout`: PyTorch's NCCL watchdog aborted ranks whose
//! collective never completed; finds the rank that stalled (the one that did
//! not report, or completed the least work), what it failed with, and a
//! desynchronised program.

use std::collections::{BTreeMap, BTreeSet};

use crate::correlate::Incident;
use crate::model::{
    Framework, KernelEventKind, NcclDetail, PyException, ServerEvent, ServerEventKind,
    TorchDistKind, root_cause,
};
use crate::rules::support::server::{launch_args, shorten, target};
use crate::rules::support::{confidence, distinct};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod behind;
mod first_failure;
mod init_gpu;
use first_failure::*;

pub static RULE: NcclWatchdogTimeout = NcclWatchdogTimeout;

pub struct NcclWatchdogTimeout;

static META: RuleMeta = RuleMeta {
    id: "nccl-watchdog-timeout",
    category: Category::NcclTimeout,
    severity: Severity::Critical,
    summary: "PyTorch's NCCL watchdog aborted ranks stuck in a collective; names the rank that stalled",
    anchors: &[
        "Watchdog caught collective operation timeout",
        "failure detected by watchdog",
        "watchdog got stuck",
        "Heartbeat monitor timed out",
        "Exception in worker",
        "hit an exception",
    ],
    doc: r#"
## What it means
A collective (all-reduce, all-gather, broadcast…) did not complete on a rank
within the process group's timeout, and PyTorch's watchdog took the process
down: `[Rank 3] Watchdog caught collective operation timeout:
WorkNCCL(SeqNum=918223, OpType=ALLREDUCE, NumelIn=…, Timeout(ms)=600000) ran
for 600044 milliseconds before timing out.`, then `To avoid data
inconsistency, we are taking the entire process down.` and a C++ abort
(SIGABRT: `status=6/ABRT`, vLLM `exit code: -6`).

## Why it happens
1. A peer rank died or hung first (an exception, a GPU fault, an OOM kill);
   the others wait for it on their next collective. The rank that does *not*
   report the timeout, or whose `last completed work` is lowest, is that
   peer.
2. A GPU hang on one rank (Xid 79/109/119 in the kernel log).
3. An interconnect failure (Xid 74, IB/RoCE errors).
4. A desynchronised program: ranks report different `OpType`/`NumelIn` for
   the same `SeqNum` (a software bug).
5. Legitimately long work on one rank before a collective (start-up only).

With every rank reporting and none silent, the one rank whose timed-out
collective has the lowest `SeqNum` (`[Rank 7] … SeqNum=64088` while rank 0
times out at 96117–96125, pytorch/pytorch#118369) is named as the rank
furthest behind: the others went on issuing collectives it never reached.

## How to confirm
Line up the ranks' reports by `SeqNum`; find the silent rank's own error
before the first timeout, an Xid for its GPU, or an OOM kill of its PID.

## How to fix
Fix the first failure; restart the whole server, not one rank. For slow
start-up work, pre-download and pre-compile, or raise the distributed
timeout (SGLang `--dist-timeout`).

## Safety
Advice only.

The timeouts are reported in the runtime layer (`nccl-timeout`), so a GPU
fault or an OOM kill found elsewhere explains them. When the rank that failed
first raised an exception no other rule classifies, this rule reports that
exception as the cause (`server-exception`) and the timeouts as its
consequence.
"#,
};

/// One rank's report of the timed-out collective.
#[derive(Clone, Copy)]
struct Report<'a> {
    event: &'a ServerEvent,
    rank: Option<u32>,
    seq: u64,
    op: &'a str,
    numel: Option<i64>,
    /// `None` where the line was cut before it and no joined rest says it.
    timeout_ms: Option<u64>,
}

/// The watchdog's sentence as a catalog row: its `timeout` capture fills a
/// report whose line a paste wrapped, once the stream joined the rest.
const WATCHDOG_ROW: &str = "stacks-torch.nccl-watchdog-timeout";

/// `after 600 s`, or `after its timeout` where the line did not say.
fn after(timeout_ms: Option<u64>) -> String {
    timeout_ms.map_or("after its timeout".to_owned(), |t| {
        format!("after {} s", t / 1000)
    })
}

/// What a window around the timeout takes where the line did not say:
/// PyTorch's longest default (30 min).
const DEFAULT_TIMEOUT_S: u64 = 1800;

impl Rule for NcclWatchdogTimeout {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let (reports, completed) = reports(incident);
        let Some(first) = reports.first().copied() else {
            return;
        };
        let reporting: BTreeSet<u32> = reports.iter().filter_map(|r| r.rank).collect();
        let laggard = behind::furthest_behind(&reports);
        let culprit = culprit(incident, &reporting, &completed).or(laggard.map(behind::why));
        let desync = desynchronised(&reports);

        let tgt = target(
            incident,
            reports.iter().map(|r| r.event),
            first.event.framework,
        );
        let who = tgt
            .as_ref()
            .map_or("the server", |t| t.0.as_str())
            .to_owned();
        let stall = culprit.and_then(|(rank, _)| stall_of(incident, &reports, rank));

        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = reports.len() as u32;
        cite_reports(&mut f, incident, &reports);
        behind::cite(&mut f, laggard);
        init_gpu::cite(incident, &reporting, &mut f);
        if let Some((u, _, _)) = &tgt {
            f.entities.units.insert(u.clone());
        }
        let ranks_text = ranks_phrase(&reporting);
        f.chain.push(format!(
            "{who}'s {ranks_text} aborted: {} SeqNum={} did not complete {}",
            first.op,
            first.seq,
            first
                .timeout_ms
                .map_or("within its timeout".to_owned(), |t| format!(
                    "within {} s",
                    t / 1000
                ))
        ));
        f.condition(
            "PyTorch's NCCL watchdog reported a timed-out collective",
            true,
        );
        f.condition(
            "the rank that stalled is identified (the only silent rank, or the least completed work)",
            culprit.is_some(),
        );
        cite_never_completed(&mut f, &completed);
        let others_text = others_text(&reporting, culprit);
        if let Some((rank, why)) = culprit {
            if let Some((c, span)) = completed.get(&rank) {
                f.evidence(*span, format!("rank {rank}'s last completed work: {c}"));
            }
            f.chain.push(format!("rank {rank} {why}: it stalled first"));
        }
        if desync {
            f.chain.push(
                "the ranks report different collectives for the same sequence number: the program is desynchronised"
                    .to_owned(),
            );
        }
        let mut culprit_finding = None;
        match (&stall, culprit) {
            (Some(stall), Some((rank, _))) => {
                blame_stall(&mut f, stall, rank, &who, first, &others_text, &ranks_text);
                // An exception no other rule classifies is reported here, as
                // the cause of the timeouts.
                if let Some(x) = stall
                    .exception
                    .as_ref()
                    .filter(|(e, x)| !classified_elsewhere(incident, e, x))
                {
                    culprit_finding = Some(exception_finding(
                        rank,
                        x,
                        stall,
                        &who,
                        first,
                        &others_text,
                        first.timeout_ms,
                        &f,
                    ));
                }
            }
            _ => no_stall(&mut f, culprit, &who, first, &ranks_text, desync),
        }
        f.actions.push(Action::advice(
            "restart the whole server (every rank), not one rank",
            tgt.as_ref()
                .map(|t| format!("systemctl restart {}", t.0))
                .as_deref(),
        ));
        f.confidence = confidence(&f, 0.6, 0.95);
        if let Some(c) = culprit_finding {
            out.push(c);
        }
        out.push(f);
    }
}

/// The ranks' reports of timed-out collectives (a report repeated by the
/// abort's `what():` once), and each rank's last completed work with its
/// line.
/// The timeout a wrapped report states on its joined rest (the stream
/// joins a line cut inside the sentence with the line that completes it).
fn joined_timeout(incident: &Incident, span: Span) -> Option<u64> {
    incident
        .known(WATCHDOG_ROW)
        .find(|(m, _)| m.span == span)
        .and_then(|(_, hit)| hit.get("timeout")?.parse().ok())
}

fn reports(incident: &Incident) -> (Vec<Report<'_>>, BTreeMap<u32, (i64, Span)>) {
    let events = &incident.facts.server_events;
    let mut reports: Vec<Report<'_>> = Vec::new();
    let mut completed: BTreeMap<u32, (i64, Span)> = BTreeMap::new();
    for e in events {
        let ServerEventKind::TorchDist(t) = &e.kind else {
            continue;
        };
        let rank = t.rank.or(e.rank.and_then(|r| r.global.or(r.tp)));
        match &t.kind {
            TorchDistKind::WatchdogTimeout {
                seq,
                op,
                numel_in,
                timeout_ms,
                ..
                // The same report again (the `what():` of the abort) is
                // skipped.
            } if !reports
                .iter()
                .any(|r| r.rank == rank && r.seq == *seq && rank.is_some()) =>
            {
                reports.push(Report {
                    event: e,
                    rank,
                    seq: *seq,
                    op,
                    numel: *numel_in,
                    timeout_ms: timeout_ms.or_else(|| joined_timeout(incident, e.span)),
                });
            }
            TorchDistKind::FailureDetected { last_completed, .. } => {
                if let Some(r) = rank {
                    completed.entry(r).or_insert((*last_completed, e.span));
                }
            }
            _ => {}
        }
    }
    (reports, completed)
}

/// The rank that stalled and why it is the one: the only rank of the
/// group that did not report the timeout, or else the one rank whose last
/// completed work is the lowest.
fn culprit(
    incident: &Incident,
    reporting: &BTreeSet<u32>,
    completed: &BTreeMap<u32, (i64, Span)>,
) -> Option<(u32, &'static str)> {
    let world = world_size(incident, reporting);
    let silent: Vec<u32> = (0..world).filter(|r| !reporting.contains(r)).collect();
    // Lowest last-completed work, when it is one rank's alone.
    let lowest = completed.values().map(|c| c.0).min();
    let laggards: Vec<u32> = completed
        .iter()
        .filter(|(_, c)| Some(c.0) == lowest)
        .map(|(r, _)| *r)
        .collect();
    let lagging = (laggards.len() == 1
        && completed.len() > 1
        && completed.values().any(|c| Some(c.0) != lowest))
    .then(|| laggards[0]);
    if silent.len() == 1 {
        Some((silent[0], "did not report the timeout"))
    } else {
        lagging.map(|r| (r, "completed the least work"))
    }
}

/// Where every rank that gave its group's progress says no work ever
/// completed (`last completed NCCL work: -1`): the communicator never
/// worked. Cites the first three such lines.
fn cite_never_completed(f: &mut Finding, completed: &BTreeMap<u32, (i64, Span)>) {
    if completed.is_empty() || completed.values().any(|c| c.0 >= 0) {
        return;
    }
    for (rank, (c, span)) in completed.iter().take(3) {
        f.evidence(
            *span,
            format!("rank {rank}'s last completed NCCL work: {c}: no collective of the group ever completed"),
        );
    }
    f.chain.push(
        "no reporting rank ever completed a collective of the group (last completed NCCL work: -1): the communicator never worked"
            .to_owned(),
    );
}

/// Whether the ranks report different collectives under one sequence
/// number: the program is desynchronised.
fn desynchronised(reports: &[Report<'_>]) -> bool {
    let mut by_seq: BTreeMap<u64, BTreeSet<(&str, Option<i64>)>> = BTreeMap::new();
    for r in reports {
        by_seq.entry(r.seq).or_default().insert((r.op, r.numel));
    }
    by_seq.values().any(|s| s.len() > 1)
}

/// The stalled `rank`'s own failure before the first of the `reports`.
fn stall_of<'a>(incident: &'a Incident, reports: &[Report<'a>], rank: u32) -> Option<Stall<'a>> {
    let first = reports[0];
    let reporter_pids: BTreeSet<u32> = reports.iter().filter_map(|r| r.event.pid).collect();
    let first_time = reports
        .iter()
        .filter_map(|r| incident.time_of(r.event.span).or(r.event.time))
        .min();
    let timeout_s = first.timeout_ms.map_or(DEFAULT_TIMEOUT_S, |t| t / 1000);
    first_failure(
        incident,
        rank,
        &reporter_pids,
        first.event,
        first_time,
        timeout_s,
    )
}

/// Cites the reports' PIDs and their lines (the first three distinct).
fn cite_reports(f: &mut Finding, incident: &Incident, reports: &[Report<'_>]) {
    for r in reports {
        let from_text = || {
            incident
                .facts
                .messages
                .iter()
                .find(|m| m.span == r.event.span)
                .and_then(|m| LINE_PID.captures(&m.text))
                .and_then(|c| c["pid"].parse().ok())
        };
        if let Some(p) = r.event.pid.or_else(from_text) {
            f.entities.pids.insert(p);
        }
    }
    for (m, n) in distinct(reports.iter().filter_map(|r| {
        incident
            .facts
            .messages
            .iter()
            .find(|m| m.span == r.event.span)
    }))
    .into_iter()
    .take(3)
    {
        let note = reports
            .iter()
            .find(|r| r.event.span == m.span)
            .map(|r| {
                let rank = r.rank.map(|k| format!("rank {k}'s ")).unwrap_or_default();
                let limit = r
                    .timeout_ms
                    .map(|t| format!(" (Timeout(ms)={t})"))
                    .unwrap_or_default();
                format!("{rank}{} SeqNum={} timed out{limit} ({n}x)", r.op, r.seq)
            })
            .unwrap_or_else(|| format!("a rank's collective timed out ({n}x)"));
        f.evidence(m.span, note);
    }
}

/// The reporting ranks other than the culprit, as a list (`0-2, 4`).
fn others_text(reporting: &BTreeSet<u32>, culprit: Option<(u32, &str)>) -> String {
    let others: BTreeSet<u32> = reporting
        .iter()
        .copied()
        .filter(|r| culprit.is_none_or(|(c, _)| c != *r))
        .collect();
    rank_list(&others)
}

/// Tells the timeouts as the consequence of the stalled `rank`'s own
/// failure: its evidence, the title, headline, explanation and fix.
fn blame_stall(
    f: &mut Finding,
    stall: &Stall<'_>,
    rank: u32,
    who: &str,
    first: Report<'_>,
    others_text: &str,
    ranks_text: &str,
) {
    let after = after(first.timeout_ms);
    f.severity = Severity::Error;
    for (span, note) in &stall.evidence {
        f.evidence(*span, note.clone());
    }
    if let Some(p) = stall.pid {
        f.entities.pids.insert(p);
    }
    f.entities.gpus.extend(stall.gpu);
    f.chain.push(stall.what.clone());
    f.condition("the stalled rank's own failure precedes the timeouts", true);
    f.title = format!("NCCL timeouts on {ranks_text}: rank {rank} failed first");
    f.headline = format!(
        "Rank {rank} of {who} failed first ({}); ranks {others_text} then waited in {} SeqNum={} until the NCCL watchdog aborted them {after}.",
        stall.short, first.op, first.seq
    );
    f.explanation = "The timeouts are consequences: every other rank waits for the failed one on its next collective until the watchdog fires.".to_owned();
    f.actions.push(Action::advice(
        format!(
            "fix rank {rank}'s failure ({}); the timeouts follow from it",
            stall.short
        ),
        None,
    ));
}

/// Tells the timeouts with no failure of the stalled rank in the inputs:
/// the rank that stalled if known, a desynchronised program, a first
/// collective that never completed, and where to look.
fn no_stall(
    f: &mut Finding,
    culprit: Option<(u32, &str)>,
    who: &str,
    first: Report<'_>,
    ranks_text: &str,
    desync: bool,
) {
    let after = after(first.timeout_ms);
    f.condition(
        "the stalled rank's own failure precedes the timeouts",
        false,
    );
    f.title = match culprit {
        Some((rank, _)) => format!(
            "NCCL watchdog timeout in {} on {ranks_text}; rank {rank} stalled",
            first.op
        ),
        None => format!("NCCL watchdog timeout in {} on {ranks_text}", first.op),
    };
    f.headline = if desync {
        format!(
            "{who}'s ranks timed out in mismatched collectives for the same sequence number: the program is desynchronised (a software bug), not a slow peer."
        )
    } else {
        match culprit {
            Some((rank, why)) => format!(
                "{who}'s {ranks_text} timed out {after} in {} (SeqNum={}); rank {rank} {why}: find why it stalled (its log, an Xid on its GPU, an OOM kill).",
                first.op, first.seq
            ),
            None => format!(
                "{who}'s {ranks_text} timed out {after} in {} (SeqNum={}); the inputs do not show which rank stalled.",
                first.op, first.seq
            ),
        }
    };
    f.explanation = "A collective completes only when every rank joins it; one rank that died, hung or ran a different collective leaves the others waiting until the watchdog aborts them.".to_owned();
    if first.seq <= 1 {
        f.explanation.push_str(" Here the very first collective (SeqNum=1) never completed: the communicator never worked, which points at the transport between the GPUs (peer-to-peer over PCIe, IOMMU/ACS, a firewall between nodes) rather than at a rank that stalled mid-run.");
        f.actions.push(Action::advice(
            "test the transport: rerun with NCCL_DEBUG=INFO and NCCL_P2P_DISABLE=1 (P2P over PCIe is broken on many consumer boards and with IOMMU/ACS on); check the GPU topology",
            Some("nvidia-smi topo -m"),
        ));
    }
    f.actions.push(Action::advice(
        "find the stalled rank's first error: its own log lines, an Xid for its GPU, an OOM kill of its PID",
        Some("journalctl -k --since '-2h' | grep -E 'NVRM: Xid|Killed process'"),
    ));
    if desync {
        f.actions.push(Action::advice(
            "a desynchronised program is a software bug: report it with the ranks' SeqNum/OpType lines; upgrade the server",
            None,
        ));
    }
}

/// How many ranks the group has: NCCL's `nranks`, the launch arguments, or
/// the highest rank seen.
fn world_size(incident: &Incident, reporting: &BTreeSet<u32>) -> u32 {
    let nccl = incident
        .facts
        .server_events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::Nccl(n) => match n.detail {
                NcclDetail::CommInit { nranks, .. } => Some(nranks),
                _ => None,
            },
            _ => None,
        })
        .max();
    let args = launch_args(incident, Framework::Unknown)
        .map(|(a, _)| a.tp_size.unwrap_or(1) * a.pp_size.unwrap_or(1));
    // Every rank any line names (a silent rank may still have logged).
    let named = incident
        .facts
        .server_events
        .iter()
        .filter_map(|e| e.rank.and_then(|r| r.global))
        .chain(reporting.iter().copied())
        .max();
    let seen = named.map_or(0, |m| m + 1);
    nccl.or(args.filter(|a| *a > 1)).unwrap_or(seen).max(seen)
}

/// `rank 3`, `ranks 0-7`.
fn ranks_phrase(ranks: &BTreeSet<u32>) -> String {
    if ranks.len() == 1 {
        format!("rank {}", rank_list(ranks))
    } else {
        format!("ranks {}", rank_list(ranks))
    }
}

/// `(RayWorkerVllm pid=5085)` in front of a line whose prefix was not peeled.
static LINE_PID: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"\([0-9A-Za-z_]+ pid=(?P<pid>[0-9]+)\)").expect("regex")
});

/// `0-3, 5`, or `?` for no rank.
fn rank_list(ranks: &BTreeSet<u32>) -> String {
    let list = crate::rules::support::rank_ranges(ranks, "");
    if list.is_empty() {
        "?".to_owned()
    } else {
        list
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    /// https://github.com/sgl-project/sglang/issues/1093: the issue form
    /// wrapped the watchdog's sentence after `Timeout(ms)`. The head names
    /// the rank, op and SeqNum; the rest, joined back, the timeout.
    #[test]
    fn a_wrapped_report_is_read_from_its_head_and_its_rest_joined() {
        let text = "\
[rank5]:[E814 17:27:59.408557873 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4476, OpType=_ALLGATHER_BASE, NumelIn=4096, NumelOut=32768, Timeout(ms)
=600000) ran for 600012 milliseconds before timing out.
";
        let f = crate::testing::findings_of(super::META.id, text);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].category, Category::NcclTimeout);
        assert!(
            f[0].title.contains("_ALLGATHER_BASE on rank 5"),
            "{}",
            f[0].title
        );
        assert!(
            f[0].evidence[0]
                .note
                .contains("SeqNum=4476 timed out (Timeout(ms)=600000)")
        );
        // Cut with no rest: still the report, its timeout unknown.
        let head = text.lines().next().unwrap_or_default();
        let f = crate::testing::findings_of(super::META.id, head);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].headline.contains("after its timeout"),
            "{}",
            f[0].headline
        );
    }
}
