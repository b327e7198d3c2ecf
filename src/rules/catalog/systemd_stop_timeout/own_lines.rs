//! What the unit's own process printed while systemd waited for it to stop:
//! a server that acknowledged SIGTERM and then started again (actix's
//! `SIGTERM received; starting graceful shutdown` followed by `starting 4
//! workers`) is why the stop timed out.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::JournalEntry;
use crate::rules::{Action, Finding};
use crate::source::Span;

/// A line of the program's own that says it got the stop signal or began
/// to shut down.
static STOP_ACK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\bSIGTERM\b|\bgraceful(?:ly)? shut ?down\b|\bshutting down\b|\breceived signal\b",
    )
    .expect("stop acknowledgement regex")
});

/// A line that says the program started something (workers, a service,
/// a listener): after a stop signal, it did not exit.
static STARTS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bstart(?:ing|ed)\b").expect("start regex"));

/// Cites the lines of `unit`'s own process before systemd's stop timeout at
/// `timeout`: its acknowledgement of the stop and what it started after it
/// (up to two lines), or, with no acknowledgement, its last line. Names
/// the process's PID. An acknowledgement followed by a start (the process
/// came back up instead of exiting) adds its condition to the finding.
pub(super) fn cite(f: &mut Finding, incident: &Incident, unit: &str, timeout: Span) {
    let ident = unit.strip_suffix(".service").unwrap_or(unit);
    let pids = incident.unit_pids.get(unit);
    let own: Vec<&JournalEntry> = incident
        .facts
        .journal
        .iter()
        .filter(|j| j.span.source == timeout.source && j.span < timeout && !j.is_pid1())
        .filter(|j| within_stop(incident, j.span, timeout))
        .filter(|j| {
            j.identifier == ident
                || j.unit.as_deref() == Some(unit)
                || j.pid.is_some_and(|p| pids.is_some_and(|s| s.contains(&p)))
        })
        .collect();
    let Some(last) = own.last() else {
        return;
    };
    let ack = own.iter().position(|j| STOP_ACK.is_match(&j.message));
    let restarted: Vec<&&JournalEntry> = ack
        .map(|i| {
            own[i + 1..]
                .iter()
                .filter(|j| STARTS.is_match(&j.message) && !STOP_ACK.is_match(&j.message))
                .take(2)
                .collect()
        })
        .unwrap_or_default();
    let name = |j: &JournalEntry| {
        j.pid
            .map_or_else(|| ident.to_owned(), |p| format!("{ident} (PID {p})"))
    };
    if let Some(j) = ack.map(|i| own[i]) {
        f.evidence(j.span, format!("{} acknowledged the stop", name(j)));
        f.entities.pids.extend(j.pid);
    }
    if restarted.is_empty() {
        if ack.map(|i| own[i].span) != Some(last.span) {
            f.evidence(
                last.span,
                format!(
                    "{} was still running: its last line before the stop timed out",
                    name(last)
                ),
            );
            f.entities.pids.extend(last.pid);
        }
        return;
    }
    f.actions.push(Action::advice(
        "the server came back up after the stop signal instead of exiting: fix its shutdown handling (a signal handler that restarts workers or the service); until then a shorter TimeoutStopSec= bounds the wait",
        Some(&format!("journalctl -u {unit} -o short-precise | tail -n 50")),
    ));
    for j in restarted {
        f.evidence(
            j.span,
            format!(
                "{} then started again instead of exiting: why the stop timed out",
                name(j)
            ),
        );
    }
    // Only where it is so: a stop stuck in the kernel is no less sure for
    // a program that did not start again.
    f.condition("the server started again after the stop signal", true);
}

/// Whether systemd's own timeout line says it is sending SIGKILL
/// (`State 'stop-sigterm' timed out. Killing.`): the stop ends in a kill
/// even when no `Killing process N` line follows in the paste.
pub(super) fn says_killing(incident: &Incident, timeouts: &[Span]) -> bool {
    incident.known("systemd.stop-timed-out").any(|(m, h)| {
        timeouts.contains(&m.span)
            && h.get("action")
                .is_some_and(|a| a.trim_start().to_ascii_lowercase().starts_with("killing"))
    })
}

/// Whether the line at `span` falls in the stop's window: at most
/// [`STOP_WINDOW_S`] before the timeout (TimeoutStopSec= is 90 s by
/// default), or either line carries no time.
fn within_stop(incident: &Incident, span: Span, timeout: Span) -> bool {
    match (incident.time_of(span), incident.time_of(timeout)) {
        (Some(a), Some(b)) => (0..=STOP_WINDOW_S).contains(&(b.utc_seconds() - a.utc_seconds())),
        _ => true,
    }
}

/// The longest stop the rule reads the program's lines for (seconds).
const STOP_WINDOW_S: i64 = 600;
