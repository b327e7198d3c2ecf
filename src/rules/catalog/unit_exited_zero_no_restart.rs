//! `unit-exited-zero-no-restart`: the engine died but the unit's main
//! process exited with status 0, so `Restart=on-failure` never fires.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Incident, UnitEventKind};
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: UnitExitedZeroNoRestart = UnitExitedZeroNoRestart;

pub struct UnitExitedZeroNoRestart;

/// What a dying engine writes before its front-end gives up.
static ENGINE_DIED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"EngineCore encountered a fatal error|Engine core proc \S+ died unexpectedly|Worker proc \S+ died unexpectedly|EngineDeadError|hit an exception: |Received sigquit from a child process|Traceback \(most recent call last\)",
    )
    .expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "unit-exited-zero-no-restart",
    category: Category::UnitExitedZeroNoRestart,
    severity: Severity::Error,
    summary: "the server's engine died but its unit exited with status 0, so systemd did not restart it",
    anchors: &["Deactivated successfully", "Succeeded.", "status=0/SUCCESS"],
    doc: r#"
## What it means
The serving engine failed (an engine-core or worker death, a scheduler
exception), yet the unit's main process exited with status 0 and systemd
logged `Deactivated successfully`. With `Restart=on-failure` (the usual
setting) systemd restarts only failures, so the service stays down and
nothing pages anyone.

## Why it happens
A wrapper script that does not propagate the exit status (no `exec`, no
`set -e`), or an API server that shuts down cleanly after its engine died.

## How to confirm
`journalctl -u UNIT`: the engine's error lines, then `Main process exited,
code=exited, status=0/SUCCESS` or `Deactivated successfully`.
`systemctl show -p Restart UNIT`.

## How to fix
Make the failure visible to systemd: `exec` the server in the wrapper, exit
non-zero when the engine dies, or use `Restart=always` with a `RestartSec=`.
Then handle the engine's own error.

## Safety
Advice only: changing a unit file needs `systemctl daemon-reload` and a
restart, in a window of your choosing.
"#,
};

impl Rule for UnitExitedZeroNoRestart {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for (unit, facts) in &incident.units {
            // A clean stop asked for by someone is not this failure.
            let stop_requested = facts
                .events
                .iter()
                .any(|e| matches!(e.kind, UnitEventKind::StopTimedOut { .. }))
                || incident.facts.journal.iter().any(|e| {
                    e.is_pid1()
                        && e.unit.as_deref() == Some(unit.as_str())
                        && e.message.starts_with("Stopping ")
                });
            let clean_exit = facts.events.iter().find(|e| match &e.kind {
                UnitEventKind::MainProcessExited { code, status } => {
                    code == "exited" && status.starts_with("0/")
                }
                UnitEventKind::Deactivated => true,
                _ => false,
            });
            let Some(exit) = clean_exit else { continue };
            if stop_requested {
                continue;
            }
            // The engine's failure, written by the unit's own processes before the exit.
            let died: Vec<_> = incident
                .facts
                .journal
                .iter()
                .filter(|e| {
                    !e.is_pid1()
                        && e.span.source == exit.span.source
                        && e.span.line < exit.span.line
                })
                .filter(|e| {
                    e.unit.as_deref() == Some(unit.as_str())
                        || e.pid
                            .and_then(|p| incident.owner(p))
                            .is_some_and(|o| &o.unit == unit)
                })
                .filter(|e| ENGINE_DIED.is_match(&e.message))
                .collect();
            if died.is_empty() {
                continue;
            }
            let mut f = Finding::new(META.id, META.category, META.severity);
            f.entities.units.insert(unit.clone());
            for e in died.iter().take(3) {
                f.evidence(e.span, "the engine failed");
            }
            f.evidence(exit.span, format!("{unit} then ended with success"));
            let restarted = facts
                .events
                .iter()
                .any(|e| matches!(e.kind, UnitEventKind::ScheduledRestart(_)));
            f.condition("the engine logged a fatal error", true);
            f.condition(format!("{unit} exited with status 0 afterwards"), true);
            f.condition("systemd did not schedule a restart", !restarted);
            if restarted {
                continue;
            }
            f.title = format!("{unit}'s engine died but the unit exited 0: no restart");
            f.headline = format!(
                "{unit}'s engine died, but its main process exited with status 0, so systemd's Restart=on-failure never restarted it."
            );
            f.chain
                .push(format!("{unit} is down and systemd did not restart it"));
            f.chain.push(format!(
                "{unit} exited with status 0 although its engine had died"
            ));
            f.explanation = "systemd restarts only failures; an exit status of 0 tells it the service ended on purpose.".to_owned();
            f.actions.push(Action::advice(
                format!("check {unit}'s restart policy and its ExecStart wrapper"),
                Some(&format!("systemctl show -p Restart -p ExecStart {unit}")),
            ));
            f.actions.push(Action::advice(
                "make the failure reach systemd: exec the server from the wrapper and exit non-zero when the engine dies, or use Restart=always with RestartSec=10s",
                None,
            ));
            f.confidence = confidence(&f, 0.6, 0.9);
            out.push(f);
        }
    }
}
