//! `systemd-crash-loop`: a unit keeps failing and systemd keeps restarting it.

use crate::correlate::{Incident, UnitEventKind};
use crate::rules::support::{confidence, unit_event};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: SystemdCrashLoop = SystemdCrashLoop;

pub struct SystemdCrashLoop;

/// A restart or two after a transient failure is what `Restart=` is for.
const MIN_RESTARTS: u32 = 3;

static META: RuleMeta = RuleMeta {
    id: "systemd-crash-loop",
    category: Category::UnitCrashLoop,
    severity: Severity::Error,
    summary: "a unit fails again and again and systemd keeps restarting it",
    anchors: &["Scheduled restart job"],
    doc: r#"
## What it means
systemd restarted the unit at least three times (`Scheduled restart job,
restart counter is at N`): every run fails the same way.

## Why it happens
The crash loop is a symptom, never the root cause. Fast loops (seconds
between restarts) point at configuration or environment: a bad path or
flag, a port in use, CUDA unavailable, a driver mismatch. Slow loops
(minutes) point at failures after the model loaded: memory, NCCL, GPU
faults.

## How to confirm
Take the first failure of the loop (the first `Main process exited` after a
`Started`) and read the service's own lines between the two; the other
findings of this report classify them.

## How to fix
Fix the root cause first, then `systemctl reset-failed UNIT` and start it.
Give GPU servers `RestartSec=10s` or more so that GPU memory is released
before the next start.

## Safety
Only advice: restarting a unit that fails for a reason not yet fixed just
continues the loop.
"#,
};

impl Rule for SystemdCrashLoop {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for (unit, facts) in &incident.units {
            let restarts: Vec<_> = facts
                .events
                .iter()
                .filter_map(|e| match e.kind {
                    UnitEventKind::ScheduledRestart(n) => Some((n, e.span)),
                    _ => None,
                })
                .collect();
            let counter = restarts.iter().map(|r| r.0).max().unwrap_or(0);
            if counter < MIN_RESTARTS && (restarts.len() as u32) < MIN_RESTARTS {
                continue;
            }
            let mut f = Finding::new(META.id, META.category, META.severity);
            f.entities.units.insert(unit.clone());
            f.occurrences = restarts.len() as u32;
            if let Some(first_exit) = unit_event(incident, unit, |k| {
                matches!(k, UnitEventKind::MainProcessExited { .. })
            }) {
                f.evidence(
                    first_exit,
                    format!("the first failure of the loop: look at {unit}'s lines before it"),
                );
            }
            if let Some(result) = unit_event(incident, unit, |k| {
                matches!(k, UnitEventKind::FailedWithResult(_))
            }) {
                f.evidence(result, "and how systemd classified it");
            }
            for (n, span) in restarts.iter().take(3) {
                f.evidence(*span, format!("restart number {n}"));
            }
            if let Some((n, span)) = restarts.last() {
                f.evidence(*span, format!("restart number {n}"));
            }
            let times: Vec<i64> = restarts
                .iter()
                .filter_map(|(_, s)| incident.time_of(*s))
                .map(|t| t.utc_seconds())
                .collect();
            let spacing = (times.len() >= 2)
                .then(|| (times[times.len() - 1] - times[0]) / (times.len() as i64 - 1));
            f.condition(
                format!("systemd restarted {unit} at least {MIN_RESTARTS} times"),
                true,
            );
            let fast = spacing.is_some_and(|s| s < 60);
            f.condition("restarts are timed (journal timestamps)", spacing.is_some());
            f.title = format!("{unit} is in a crash loop ({counter} restarts)");
            f.headline = format!("{unit} keeps failing: systemd restarted it {counter} times.");
            f.chain
                .push(format!("systemd restarted {unit} {counter} times"));
            f.chain.push(
                "each run failed: the loop is a symptom of the failure of the first run".to_owned(),
            );
            f.explanation = match spacing {
                Some(s) if fast => format!(
                    "About {s} s between restarts: a fast loop, typical of a configuration or environment problem (flags, paths, ports, driver)."
                ),
                Some(s) => format!(
                    "About {s} s between restarts: a slow loop, typical of a failure after the model loaded (memory, NCCL, GPU faults)."
                ),
                None => {
                    "The restarts carry no timestamps, so fast and slow loops cannot be told apart."
                        .to_owned()
                }
            };
            f.actions.push(Action::advice(
                format!("fix the cause of the first failure, then clear the failure state of {unit} and start it"),
                Some(&format!("systemctl reset-failed {unit}")),
            ));
            f.actions.push(Action::advice(
                "give the GPU server RestartSec=10s or more, so GPU memory is released before the next start",
                Some(&format!("systemctl show -p Restart -p RestartUSec {unit}")),
            ));
            f.confidence = confidence(&f, 0.7, 0.95);
            out.push(f);
        }
    }
}
