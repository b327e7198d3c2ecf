//! `sglang-watchdog-timeout`: an SGLang forward batch did not finish within
//! `--watchdog-timeout` and the server killed itself; names what stalled it
//! when the inputs show it (a GPU fault, a stuck NCCL collective).

use crate::correlate::Incident;
use crate::model::{
    Framework, KernelEvent, NcclLevel, ServerEvent, ServerEventKind, Timestamp, TorchDistKind, Xid,
};
use crate::rules::support::server::{launch_args, target};
use crate::rules::support::{confidence, distinct};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: SglangWatchdogTimeout = SglangWatchdogTimeout;

pub struct SglangWatchdogTimeout;

/// Events this close (seconds) to the timeout, before it by up to the
/// timeout itself plus this, can have caused it.
const WINDOW_SECS: i64 = 120;

/// Xids that mean the GPU hung or was lost.
const HANG_XIDS: &[u32] = &[8, 13, 31, 43, 48, 62, 74, 79, 94, 95, 109, 119, 120, 154];

static META: RuleMeta = RuleMeta {
    id: "sglang-watchdog-timeout",
    category: Category::ServerHang,
    severity: Severity::Critical,
    summary: "an SGLang forward batch ran past --watchdog-timeout and the server killed itself",
    anchors: &[
        "Watchdog timeout (self.watchdog_timeout=",
        "watchdog timeout (self.watchdog_timeout=",
    ],
    doc: r#"
## What it means
SGLang's scheduler watchdog saw a forward batch that had not finished after
`--watchdog-timeout` seconds (default 300): `Watchdog timeout
(self.watchdog_timeout=300)` (0.5.23: `Scheduler watchdog timeout
(self.watchdog_timeout=300.0, self.soft=False)`). It dumps the stacks and
kills the server, which then dies by SIGKILL like any SGLang child failure.

The finding's category is `nccl-timeout` when c10d or NCCL trouble is seen
with it, and `server-hang` otherwise: a hung batch with no visible cause is
not claimed to be a stuck collective (docs/report-schema.md). A concurrent
GPU fault (Xid) is the root cause by its layer.

## Why it happens
1. The GPU hung or was lost: the kernel log has an Xid (79, 109, 119, 62…) at
   the same time.
2. An NCCL collective is stuck because a peer rank died or hung: PyTorch's
   c10d watchdog or NCCL warnings appear around the same time.
3. Very long work in one batch (a huge `--chunked-prefill-size` on slow
   GPUs), or a deadlock in the server.

## How to confirm
The kernel log (`NVRM: Xid`) and the c10d/NCCL lines in the minutes before
the timeout; `nvidia-smi` during a hang shows 100 % utilisation with no
progress.

## How to fix
Resolve the underlying GPU or NCCL failure first (the report lists it as the
root cause when the inputs show it). Only for legitimately long batches raise
`--watchdog-timeout` or lower `--chunked-prefill-size`.

## Safety
Advice only.
"#,
};

impl Rule for SglangWatchdogTimeout {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let events = &incident.facts.server_events;
        let timeouts: Vec<(&ServerEvent, Option<f64>)> = events
            .iter()
            .filter_map(|e| match e.kind {
                ServerEventKind::WatchdogTimeout { timeout_secs } => Some((e, timeout_secs)),
                _ => None,
            })
            .collect();
        let Some(&(first, secs)) = timeouts.first() else {
            return;
        };
        let secs = secs.unwrap_or(300.0);
        let when = incident.time_of(first.span).or(first.time);
        // Whether a time falls in the window in which it could have stalled
        // the batch: from before the batch started until just after.
        let near = |t: Option<Timestamp>| match (when, t) {
            (Some(w), Some(t)) => {
                let d = t.utc_seconds() - w.utc_seconds();
                d >= -(secs as i64) - WINDOW_SECS && d <= WINDOW_SECS
            }
            _ => false,
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(
            timeouts
                .iter()
                .filter_map(|(e, _)| incident.facts.messages.iter().find(|m| m.span == e.span)),
        )
        .into_iter()
        .take(2)
        {
            f.evidence(
                m.span,
                format!("a forward batch ran past {secs:.0} s ({n}x)"),
            );
        }
        f.occurrences = timeouts.len() as u32;
        // The schedulers' rows in a process listing (`top`, `ps`): their
        // PIDs, and whether they were running (busy) or asleep.
        for r in incident
            .facts
            .ps
            .iter()
            .filter(|r| r.cmd.contains("sglang::sched"))
            .take(8)
        {
            let state = r
                .stat
                .as_deref()
                .map_or(String::new(), |s| format!(", state {s}"));
            f.evidence(r.span, format!("an SGLang scheduler: PID {}{state}", r.pid));
        }
        let tgt = target(
            incident,
            timeouts.iter().map(|(e, _)| *e),
            Framework::Sglang,
        );
        if let Some((u, _, _)) = &tgt {
            f.entities.units.insert(u.clone());
        }
        let who = tgt
            .as_ref()
            .map_or("the SGLang server", |t| t.0.as_str())
            .to_owned();
        f.chain.push(format!(
            "{who} killed itself: a forward batch did not finish within {secs:.0} s"
        ));
        f.condition("SGLang's watchdog reported a timeout", true);

        let xids: Vec<_> = incident
            .xids()
            .filter(|(e, x)| HANG_XIDS.contains(&x.code) && near(e.time.wall))
            .collect();
        let stuck = stuck_collectives(incident, near);
        f.condition(
            "the inputs show what stalled the batch (an Xid or NCCL trouble at the same time)",
            !xids.is_empty() || !stuck.is_empty(),
        );
        if let Some((e, x)) = xids.first() {
            explain_xid(incident, &mut f, &who, secs, e, x);
        } else if let Some(e) = stuck.first() {
            explain_stuck(&mut f, &who, secs, e);
        } else {
            explain_unexplained(incident, &mut f, &who, secs);
        }
        f.confidence = confidence(&f, 0.6, 0.9);
        out.push(f);
    }
}

/// Returns the c10d and NCCL trouble (a watchdog timeout, a failure, a stuck
/// collective, an NCCL warning or error) at a time `near` says could have
/// stalled the batch.
fn stuck_collectives(
    incident: &Incident,
    near: impl Fn(Option<Timestamp>) -> bool,
) -> Vec<&ServerEvent> {
    incident
        .facts
        .server_events
        .iter()
        .filter(|e| match &e.kind {
            ServerEventKind::TorchDist(t) => matches!(
                t.kind,
                TorchDistKind::WatchdogTimeout { .. }
                    | TorchDistKind::FailureDetected { .. }
                    | TorchDistKind::WatchdogStuck { .. }
                    | TorchDistKind::HeartbeatTimeout
                    | TorchDistKind::NcclError { .. }
            ),
            ServerEventKind::Nccl(n) => n.level >= NcclLevel::Warn && n.level != NcclLevel::Trace,
            _ => false,
        })
        .filter(|e| near(incident.time_of(e.span).or(e.time)))
        .collect()
}

/// Writes the category, chain, title, headline, explanation and action when
/// the GPU reported a hang Xid (`x`, on line `e`) near the timeout, and cites it.
fn explain_xid(
    incident: &Incident,
    f: &mut Finding,
    who: &str,
    secs: f64,
    e: &KernelEvent,
    x: &Xid,
) {
    f.entities.xid.insert(x.code);
    f.evidence(
        e.span,
        format!("Xid {} at the same time: the GPU faulted or hung", x.code),
    );
    if let Some(g) = x.bus_id.as_deref().and_then(|b| incident.gpu_by_bus_id(b)) {
        f.entities.gpus.insert(g.index);
    }
    f.category = Category::ServerHang;
    f.chain.push(format!(
        "the GPU reported Xid {} at the same time: the batch waited on a faulted GPU",
        x.code
    ));
    f.title = format!("SGLang's watchdog fired after Xid {} on the GPU", x.code);
    f.headline = format!(
        "{who} hit its {secs:.0} s watchdog because the GPU reported Xid {} at the same time; the GPU fault is the cause.",
        x.code
    );
    f.explanation = "A kernel that never completes on a faulted GPU keeps the batch from finishing; the watchdog only notices. Follow the Xid finding.".to_owned();
    f.actions.push(Action::advice(
        "handle the GPU fault first (see the Xid finding); the watchdog timeout follows from it",
        None,
    ));
}

/// Writes the category, chain, title, headline, explanation and action when a
/// collective was stuck (c10d or NCCL trouble on line `e`) near the timeout.
fn explain_stuck(f: &mut Finding, who: &str, secs: f64, e: &ServerEvent) {
    f.category = Category::NcclTimeout;
    f.evidence(e.span, "NCCL/c10d trouble at the same time");
    f.chain.push(
        "a collective was stuck at the same time (c10d/NCCL report it): a peer rank died or hung"
            .to_owned(),
    );
    f.title = "SGLang's watchdog fired while an NCCL collective was stuck".to_owned();
    f.headline = format!(
        "{who} hit its {secs:.0} s watchdog because an NCCL collective was stuck; find the rank that failed first."
    );
    f.explanation = "With tensor parallelism every forward step runs collectives; one rank that died or hung leaves the others waiting until a watchdog fires.".to_owned();
    f.actions.push(Action::advice(
        "find the rank that failed or stalled first (its own error, or an Xid on its GPU) and fix that",
        None,
    ));
}

/// Writes the chain, title, headline, explanation and actions when nothing
/// in the inputs shows what stalled the batch.
fn explain_unexplained(incident: &Incident, f: &mut Finding, who: &str, secs: f64) {
    let tp = launch_args(incident, Framework::Sglang).and_then(|(a, _)| a.tp_size);
    f.chain.push(
        "nothing in the inputs shows why: no Xid, no NCCL or c10d error at the same time"
            .to_owned(),
    );
    f.title = format!("an SGLang forward batch hung for {secs:.0} s");
    f.headline = format!(
        "{who} killed itself because a forward batch did not finish within {secs:.0} s; the inputs do not show why{}.",
        if tp.is_some_and(|t| t > 1) {
            " (a stuck collective or GPU hang is the usual cause)"
        } else {
            ""
        }
    );
    f.explanation = "A hang with no visible cause: capture the kernel log and the stacks (SGLang dumps them before exiting) around the next occurrence.".to_owned();
    f.actions.push(Action::advice(
        "check the kernel log for an Xid and the log for the dumped stacks around the timeout",
        Some("journalctl -k --since '-1h' | grep -E 'NVRM: Xid'"),
    ));
    f.actions.push(Action::advice(
        "if a batch legitimately takes that long (very long prefills on slow GPUs), lower --chunked-prefill-size or raise --watchdog-timeout",
        None,
    ));
}

#[cfg(test)]
mod tests {
    /// https://github.com/sgl-project/sglang/issues/3752: the watchdog on
    /// every rank, then `top` showing the schedulers running: the finding
    /// cites them and names their PIDs.
    #[test]
    fn the_schedulers_a_listing_shows_are_cited() {
        let f = crate::testing::findings_of(
            super::META.id,
            concat!(
                "[2025-03-09 00:57:15 TP4] Watchdog timeout (self.watchdog_timeout=300)\n",
                "[2025-03-09 00:57:16 TP0] Watchdog timeout (self.watchdog_timeout=300)\n",
                "PID USER PR NI VIRT RES SHR S %CPU %MEM TIME+ COMMAND\n",
                "22098 root 20 0 125.2g 4.1g 1.4g R 300.7 0.2 260:17.42 sglang::schedul\n",
                "22094 root 20 0 125.0g 4.1g 1.4g R 300.3 0.2 292:08.84 sglang::schedul\n",
            ),
        );
        assert_eq!(f.len(), 1, "{f:?}");
        let pids: Vec<u32> = f[0].entities.pids.iter().copied().collect();
        assert_eq!(pids, [22094, 22098]);
        assert!(f[0].evidence.iter().any(|e| e.note.contains("state R")));
    }
}
