//! A daemon's status block without `Duration:` (systemd before v250, or a
//! block cut short): its run length is the time between PID 1's `Started`
//! (or `Starting`) line of the run and the `since` of `Active: inactive (dead) since …`;
//! and the detached child that systemd stopped with the unit's cgroup, by
//! the child's own line that it received SIGTERM (batch Y's 1686,
//! https://github.com/freedomofpress/securedrop/pull/5638: ossec-remoted's
//! parent exits 0 and its worker logs `SIGNAL [(15)-(Terminated)]
//! Received`).

use std::sync::LazyLock;

use regex::Regex;

use super::SHORT_RUN_SECS;
use crate::correlate::{Incident, UnitEventKind};
use crate::model::UnitStatus;
use crate::source::Span;

/// A process's own line that it received SIGTERM: `Received SIGTERM`,
/// `caught SIGTERM`, OSSEC's `SIGNAL [(15)-(Terminated)] Received`,
/// `signal 15`.
static TERMINATED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bSIGTERM\b|\bsignal\W{1,4}15\b|\(15\)-\(Terminated\)").expect("regex")
});

/// How long the unit's last run lasted, from PID 1's `Started` (or, cut
/// before it, `Starting`) line, the last within a minute before the
/// block's `since`, to the `since`, and that line. The
/// journal's short format has no year: the `since`'s date is read in the
/// `Started` line's year.
pub(super) fn run_from_started(incident: &Incident, s: &UnitStatus) -> Option<(f64, Span)> {
    let since = s.since?;
    incident
        .units
        .get(&s.unit)?
        .events
        .iter()
        .filter(|e| matches!(e.kind, UnitEventKind::Started | UnitEventKind::Starting))
        .filter_map(|e| {
            let secs = incident.time_of(e.span)?.secs_to(since)?;
            (0..SHORT_RUN_SECS as i64)
                .contains(&secs)
                .then_some((secs as f64, e.span))
        })
        .max_by_key(|(_, span)| *span)
}

/// The unit's other processes that logged receiving SIGTERM within the
/// short run after `started`: writers with the main process's identifier
/// (`env[1136]` then `env[1137]`) and another PID, the children systemd
/// stopped with the cgroup once the main process exited.
pub(super) fn children_stopped(
    incident: &Incident,
    s: &UnitStatus,
    started: Span,
) -> Vec<(u32, Span)> {
    let Some(main) = s.main_pid else {
        return Vec::new();
    };
    let journal = &incident.facts.journal;
    let Some(ident) = journal
        .iter()
        .find(|e| e.pid == Some(main) && e.span.source == started.source)
        .map(|e| e.identifier.as_str())
    else {
        return Vec::new();
    };
    let Some(t0) = incident.time_of(started) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, Span)> = journal
        .iter()
        .filter(|e| e.span.source == started.source && e.span > started)
        .filter(|e| e.identifier == ident && e.pid.is_some_and(|p| p != main && p != 1))
        .filter(|e| TERMINATED.is_match(&e.message))
        .filter(|e| {
            incident.time_of(e.span).is_some_and(|t| {
                (0..SHORT_RUN_SECS as i64).contains(&(t.utc_seconds() - t0.utc_seconds()))
            })
        })
        .filter_map(|e| Some((e.pid?, e.span)))
        .collect();
    out.dedup_by_key(|(p, _)| *p);
    out
}
