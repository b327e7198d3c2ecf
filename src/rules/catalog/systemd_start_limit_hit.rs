//! `systemd-start-limit-hit`: systemd gave up restarting a unit.

use crate::correlate::{Incident, UnitEventKind};
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: SystemdStartLimitHit = SystemdStartLimitHit;

pub struct SystemdStartLimitHit;

static META: RuleMeta = RuleMeta {
    id: "systemd-start-limit-hit",
    category: Category::UnitCrashLoop,
    severity: Severity::Error,
    summary: "systemd stopped restarting a unit: too many starts in too short a time",
    // The catalog rows `systemd.start-limit` and `systemd.result-start-limit-hit`.
    anchors: &[],
    doc: r#"
## What it means
The unit was started more than `StartLimitBurst` times within
`StartLimitIntervalSec` (defaults: 5 in 10 s) and systemd gave up:
`Start request repeated too quickly.` then `Failed with result
'start-limit-hit'`. The unit stays failed until someone intervenes.

## Why it happens
It ends a crash loop. The cause is whatever made each start fail; the other
findings of the report name it.

## How to confirm
`systemctl status UNIT` shows `Active: failed (Result: start-limit-hit)`;
the journal shows the failures before it.

## How to fix
Fix the cause of the failures, then `systemctl reset-failed UNIT` and start
it again.

## Safety
Only advice: `reset-failed` alone restarts the loop.
"#,
};

impl Rule for SystemdStartLimitHit {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let units = limited_units(incident);
        for unit in units {
            let mut f = Finding::new(META.id, META.category, META.severity);
            f.entities.units.insert(unit.to_owned());
            let events = incident.units.get(unit).map_or(&[][..], |u| &u.events);
            for e in events {
                match e.kind {
                    UnitEventKind::StartRepeatedTooQuickly => {
                        f.evidence(e.span, "systemd refuses to start it again")
                    }
                    UnitEventKind::StartLimitHit => f.evidence(
                        e.span,
                        format!("{unit} failed with result 'start-limit-hit'"),
                    ),
                    _ => {}
                }
            }
            for s in incident
                .facts
                .unit_statuses
                .iter()
                .filter(|s| s.unit == unit)
            {
                if let Some(span) = s
                    .active_span
                    .filter(|_| s.result.as_deref() == Some("start-limit-hit"))
                {
                    f.evidence(
                        span,
                        "systemctl status shows the unit failed by start-limit-hit",
                    );
                }
            }
            for p in incident
                .facts
                .unit_properties
                .iter()
                .filter(|p| p.unit.as_deref() == Some(unit))
            {
                if let Some(span) = p
                    .span_of("Result")
                    .filter(|_| p.result.as_deref() == Some("start-limit-hit"))
                {
                    f.evidence(
                        span,
                        format!("systemctl show: {unit} ended with Result=start-limit-hit"),
                    );
                }
            }
            let failures = events
                .iter()
                .filter(|e| matches!(e.kind, UnitEventKind::MainProcessExited { .. }))
                .count();
            f.condition("systemd reported start-limit-hit", true);
            f.condition(
                format!("the journal shows the failed runs before it ({failures} seen)"),
                failures > 0,
            );
            f.title = format!("systemd gave up restarting {unit} (start-limit-hit)");
            f.headline =
                format!("{unit} failed too often in a row and systemd stopped restarting it.");
            f.chain
                .push(format!("{unit} is failed with result 'start-limit-hit'"));
            f.chain.push(format!(
                "{unit} failed {failures} time(s) in a row before that"
            ));
            f.explanation = "The start limit ends a crash loop; the cause is the failure of the runs before it.".to_owned();
            f.actions.push(Action::advice(
                format!("once the cause is fixed, clear the failure state of {unit} and start it"),
                Some(&format!(
                    "systemctl reset-failed {unit} && systemctl start {unit}"
                )),
            ));
            f.confidence = confidence(&f, 0.8, 0.97);
            out.push(f);
        }
    }
}

/// Returns the units systemd stopped restarting: those whose journal says
/// the start limit was hit (or a start was repeated too quickly), then those
/// `systemctl status` or `systemctl show` reports with result start-limit-hit.
fn limited_units(incident: &Incident) -> Vec<&str> {
    let mut units: Vec<&str> = incident
        .units
        .iter()
        .filter(|(_, u)| {
            // `Start request repeated too quickly.` says it alone: the
            // result that follows may be cut off, or be the last run's
            // (`Failed with result 'exit-code'`).
            u.events.iter().any(|e| {
                matches!(
                    e.kind,
                    UnitEventKind::StartLimitHit | UnitEventKind::StartRepeatedTooQuickly
                )
            })
        })
        .map(|(n, _)| n.as_str())
        .collect();
    for s in &incident.facts.unit_statuses {
        if s.result.as_deref() == Some("start-limit-hit") && !units.contains(&s.unit.as_str()) {
            units.push(&s.unit);
        }
    }
    for p in &incident.facts.unit_properties {
        if let (Some(unit), Some("start-limit-hit")) = (&p.unit, p.result.as_deref()) {
            if !units.contains(&unit.as_str()) {
                units.push(unit);
            }
        }
    }
    units
}
