//! A unit's journal that shows it ended right after it started: PID 1's
//! `Started …` then, within a minute, `Deactivated successfully.`, under a
//! pasted unit file that runs it as `Type=simple` (batch S's 1204,
//! https://github.com/alou-S/omen-fan/issues/9: the fan unit's `bash -c`
//! wrapper).

use super::{META, SHORT_RUN_SECS, stopped_on_request};
use crate::correlate::{Incident, UnitEventKind, UnitFacts};
use crate::model::UnitProperties;
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};
use crate::source::Span;

/// The journal of a unit whose pasted unit file declares `Type=simple` (or
/// none: simple is the default for a unit with `ExecStart=`): PID 1's
/// `Started DESCRIPTION.`, then within a minute, with no stop asked for and
/// no restart, `Deactivated successfully.` (or `Main process exited,
/// code=exited, status=0/SUCCESS`). Its main process ended by itself right
/// after it started: a program that forks into the background (or a
/// wrapper, `bash -c "…"`, that starts one and returns) under Type=simple,
/// whose detached child systemd then stops with the unit. The unit file
/// settles what the journal alone leaves open (a one-shot job that ended
/// as meant is `Type=oneshot`); a file pasted without `systemctl cat`'s
/// header is the unit's when its `Description=` is the one `Started` names.
pub(super) fn simple_unit_gone_at_start(
    incident: &Incident,
    unit: &str,
    facts: &UnitFacts,
) -> Option<Finding> {
    let exit = facts.events.iter().find(|e| match &e.kind {
        UnitEventKind::MainProcessExited { code, status } => {
            code == "exited" && status.starts_with("0/")
        }
        UnitEventKind::Deactivated => true,
        _ => false,
    })?;
    let started = facts.events.iter().rfind(|e| {
        e.kind == UnitEventKind::Started
            && e.span.source == exit.span.source
            && e.span.line < exit.span.line
    })?;
    let restarted_or_stopped = facts.events.iter().any(|e| {
        matches!(
            e.kind,
            UnitEventKind::ScheduledRestart(_)
                | UnitEventKind::RestartDue
                | UnitEventKind::StopTimedOut { .. }
                | UnitEventKind::Stopped
        )
    });
    if restarted_or_stopped || stopped_on_request(incident, unit) {
        return None;
    }
    let lasted =
        incident.time_of(exit.span)?.utc_seconds() - incident.time_of(started.span)?.utc_seconds();
    if !(0..SHORT_RUN_SECS as i64).contains(&lasted) {
        return None;
    }
    let description = started_description(incident, started.span);
    let file = incident.facts.unit_properties.iter().rev().find(|p| {
        p.exec_main_code.is_none()
            && p.properties.contains_key("ExecStart")
            && match &p.unit {
                Some(u) => u == unit,
                None => description.is_some() && p.description == description,
            }
    })?;
    let declared = file
        .properties
        .get("Type")
        .map(|(t, span)| (t.trim(), *span));
    if declared.is_some_and(|(t, _)| t != "simple" && t != "exec") {
        return None;
    }
    if matches!(file.restart.as_deref(), Some("always" | "on-success")) {
        return None;
    }
    let run = Run {
        unit,
        what: description.as_deref().unwrap_or(unit),
        started: started.span,
        exit: exit.span,
        lasted,
        file,
        declared,
    };
    Some(finding(incident, &run))
}

/// What [`simple_unit_gone_at_start`] found: the unit, its description,
/// the lines that started and ended it, how long it ran, and its file.
struct Run<'a> {
    unit: &'a str,
    what: &'a str,
    started: Span,
    exit: Span,
    lasted: i64,
    file: &'a UnitProperties,
    declared: Option<(&'a str, Span)>,
}

fn finding(incident: &Incident, run: &Run<'_>) -> Finding {
    let Run {
        unit,
        what,
        started,
        exit,
        lasted,
        file,
        declared,
    } = *run;
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.units.insert(unit.to_owned());
    f.evidence(started, format!("systemd started {unit} ({what})"));
    // What the unit's own processes wrote while it ran: its main process.
    let writers: Vec<_> = incident
        .facts
        .journal
        .iter()
        .filter(|e| {
            !e.is_pid1()
                && e.span.source == exit.source
                && e.span.line > started.line
                && e.span.line < exit.line
                && e.pid.is_some_and(|p| {
                    incident.owner(p).is_some_and(|o| o.unit == unit)
                        || incident
                            .unit_pids
                            .get(unit)
                            .is_some_and(|pids| pids.contains(&p))
                })
        })
        .collect();
    for e in writers.iter().rev().take(2).rev() {
        f.evidence(e.span, "what its process wrote before it exited");
    }
    f.entities.pids.extend(writers.iter().filter_map(|e| e.pid));
    f.evidence(
        exit,
        format!("{lasted} s later its main process had exited with status 0 and systemd deactivated {unit}"),
    );
    let t = match declared {
        Some((t, span)) => {
            f.evidence(
                span,
                format!("{unit} runs under Type={t}: systemd takes its main process's exit for the end of the service"),
            );
            t.to_owned()
        }
        None => {
            if let Some((_, span)) = file.properties.get("ExecStart") {
                f.evidence(
                    *span,
                    format!("{unit} sets no Type=: with ExecStart= it runs under Type=simple, the default"),
                );
            }
            "simple".to_owned()
        }
    };
    f.condition(
        format!("{unit} started and its main process exited with status 0 {lasted} s later"),
        true,
    );
    f.condition("no stop was asked for and systemd did not restart it", true);
    f.condition(format!("its unit file is in the inputs: Type={t}"), true);
    f.title = format!(
        "{unit} exited with status 0 {lasted} s after it started (Type={t}): the service is not running"
    );
    f.headline = format!(
        "{unit} ({what}) ended {lasted} s after systemd started it: its main process exited with status 0 and systemd logged Deactivated successfully. Under Type={t} the main process must stay in the foreground; one that starts the program in the background and returns (a forking daemon, a `bash -c` wrapper) ends the service, and systemd stops what it left behind."
    );
    f.chain.push(format!(
        "{unit} is not running, and nothing reports a failure"
    ));
    f.chain.push(format!(
        "its main process exited with status 0 {lasted} s after it started, under Type={t}"
    ));
    f.explanation = format!(
        "Under Type={t} systemd takes the first process it started for the service: when it exits, the service has ended, and with the default KillMode=control-group systemd stops every process still in the unit's control group. A program that detaches (forks and lets its first process return), or a wrapper that starts it in the background, exits 0 right after `Started`, and because status 0 is a success no Restart=on-failure fires."
    );
    super::confirm(
        &mut f,
        unit,
        "see how the unit starts the program (a daemon that forks needs Type=forking)",
    );
    f.actions.push(Action::advice(
        "run the program in the foreground under Type=simple (exec it, no `&`, no daemon flag), or declare Type=forking with PIDFile= for a daemon that forks; then systemctl daemon-reload and restart the unit",
        None,
    ));
    f.confidence = confidence(&f, 0.5, 0.8);
    f
}

/// The description PID 1's `Started …` line gives the unit: `Started
/// DESCRIPTION.` (≤ v251), `Started UNIT - DESCRIPTION.` (v252+).
fn started_description(incident: &Incident, span: Span) -> Option<String> {
    let e = incident.facts.journal.iter().find(|e| e.span == span)?;
    let what = e.message.strip_prefix("Started ")?.trim_end();
    let what = what.strip_suffix('.').unwrap_or(what);
    let what = what.split_once(" - ").map_or(what, |(_, d)| d);
    Some(what.to_owned())
}
