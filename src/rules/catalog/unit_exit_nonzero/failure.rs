//! What systemd said about a unit around its main process's failed exit:
//! the start it reports failed, the failed state, the restarts it made
//! below the start limit, the state `systemctl status` shows it in, and the
//! drop-ins that change the unit. Each makes the exit a unit failure even
//! when the unit's own lines are not in the inputs.

use crate::correlate::{Incident, UnitEventKind, UnitFacts};
use crate::rules::{Action, Finding};
use crate::source::Span;

/// systemd's account of one unit's failure.
pub(super) struct Failed {
    /// `Failed to start <description>.`
    failed_start: Option<Span>,
    /// `Unit X entered failed state.` / `X: Unit entered failed state.`
    entered_failed: Option<Span>,
    /// `Failed with result 'X'` for a result other than success.
    result: Option<Span>,
    /// `Service hold-off time over, scheduling restart.` / `Scheduled
    /// restart job, restart counter is at N.`, in order.
    restarts: Vec<Span>,
    /// `Stopped <description>.` after the last restart.
    stopped: Option<Span>,
    /// `Active: inactive (dead) (Result: exit-code) since …` and its text.
    down: Option<(Span, String)>,
    /// The drop-ins that change the unit, from `systemctl status`.
    drop_ins: Vec<(String, Span)>,
    /// systemd stopped restarting it (`Start request repeated too
    /// quickly.`, result `start-limit-hit`).
    pub(super) limit_hit: bool,
    /// systemctl's answer where it was run: `Job for X failed because the
    /// control process exited with error code.`, and the result it names.
    pub(super) job: Option<(Span, Option<String>)>,
}

impl Failed {
    pub(super) fn of(incident: &Incident, facts: &UnitFacts) -> Failed {
        let first = |pred: &dyn Fn(&UnitEventKind) -> bool| {
            facts.events.iter().find(|e| pred(&e.kind)).map(|e| e.span)
        };
        let restarts: Vec<Span> = facts
            .events
            .iter()
            .filter(|e| e.kind.is_restart())
            .map(|e| e.span)
            .collect();
        let stopped = restarts.last().and_then(|last| {
            facts
                .events
                .iter()
                .find(|e| matches!(e.kind, UnitEventKind::Stopped) && e.span > *last)
                .map(|e| e.span)
        });
        let status = facts
            .status
            .and_then(|i| incident.facts.unit_statuses.get(i));
        let down = status.and_then(|s| {
            let result = s.result.as_deref().filter(|r| *r != "success")?;
            let state = s.active_state.as_deref()?;
            let sub = s.sub_state.as_deref().unwrap_or(state);
            matches!(state, "inactive" | "failed" | "activating").then(|| {
                (
                    s.active_span.unwrap_or(s.span),
                    format!("{state} ({sub}), result '{result}'"),
                )
            })
        });
        Failed {
            failed_start: first(&|k| matches!(k, UnitEventKind::FailedToStart)),
            entered_failed: first(&|k| matches!(k, UnitEventKind::EnteredFailedState)),
            result: first(&|k| matches!(k, UnitEventKind::FailedWithResult(r) if r != "success")),
            restarts,
            stopped,
            down,
            drop_ins: status.map(|s| s.drop_ins.clone()).unwrap_or_default(),
            limit_hit: facts.events.iter().any(|e| {
                matches!(&e.kind, UnitEventKind::StartLimitHit)
                    || matches!(&e.kind, UnitEventKind::FailedWithResult(r) if r.contains("start-limit"))
            }) || status.is_some_and(|s| s.result.as_deref().is_some_and(|r| r.contains("start-limit"))),
            job: facts.events.iter().find_map(|e| match &e.kind {
                UnitEventKind::JobFailed { result } => Some((e.span, result.clone())),
                _ => None,
            }),
        }
    }

    /// Whether systemd says the unit failed or restarted it.
    pub(super) fn is_failure(&self) -> bool {
        self.failed_start.is_some()
            || self.entered_failed.is_some()
            || self.result.is_some()
            || self.down.is_some()
            || !self.restarts.is_empty()
            || self.job.is_some()
    }

    /// Cites the line that says the start failed, alone: systemd's side
    /// of a failure the unit's own lines explain.
    pub(super) fn cite_start(&self, f: &mut Finding) {
        if let Some(s) = self.failed_start {
            f.evidence(s, "systemd reports that the start failed");
        }
        self.cite_job(f);
    }

    /// Cites systemctl's answer to the failed job, with the result it names.
    pub(super) fn cite_job(&self, f: &mut Finding) {
        if let Some((s, result)) = &self.job {
            f.evidence(
                *s,
                match result {
                    Some(r) => format!("systemctl reports that the job failed, result '{r}'"),
                    None => "systemctl reports that the job failed".to_owned(),
                },
            );
        }
    }

    pub(super) fn cite(&self, f: &mut Finding, unit: &str) {
        if let Some(s) = self.failed_start {
            f.evidence(s, "systemd reports that the start failed");
        }
        self.cite_job(f);
        if let Some(s) = self.entered_failed {
            f.evidence(s, format!("{unit} entered the failed state"));
        }
        if let Some((s, state)) = &self.down {
            f.evidence(*s, format!("{unit} is down: {state}"));
        }
        let n = self.restarts.len();
        for (i, s) in self.restarts.iter().enumerate() {
            if i == 0 || i + 1 == n {
                f.evidence(*s, "systemd restarts the unit after its restart delay");
            }
        }
        if let Some(s) = self.stopped {
            f.evidence(s, "the restarted unit stopped again");
        }
        for (file, s) in &self.drop_ins {
            f.evidence(*s, format!("drop-in {file} changes {unit}'s own unit file"));
        }
    }

    /// Adds what systemd's lines say to the finding's headline.
    pub(super) fn extend_headline(&self, headline: &mut String) {
        let n = self.restarts.len();
        if n > 0 && self.limit_hit {
            headline.push_str(" systemd restarted it until its start limit.");
        } else if n > 0 {
            let times = if n == 1 { "once" } else { "again" };
            headline.push_str(&format!(
                " systemd restarted it {times} below its start limit (a crash loop in progress: each start fails the same way)."
            ));
        } else if self.failed_start.is_some() {
            headline.push_str(" systemd reports that the unit failed to start.");
        } else if self.job.is_some() {
            headline.push_str(" systemctl reports that its job failed.");
        }
        if !self.drop_ins.is_empty() {
            let files: Vec<&str> = self.drop_ins.iter().map(|(f, _)| f.as_str()).collect();
            headline.push_str(&format!(
                " Drop-in {} changes the unit: a changed ExecStart= or environment is the first suspect.",
                files.join(", ")
            ));
        }
    }

    pub(super) fn push_actions(&self, f: &mut Finding, unit: &str) {
        if !self.drop_ins.is_empty() {
            f.actions.push(Action::advice(
                format!(
                    "see what the drop-ins change in {unit} (its start command, flags, environment)"
                ),
                Some(&format!("systemctl cat {unit}")),
            ));
        }
        if self.is_failure() {
            f.actions.push(Action::advice(
                format!("once the cause is fixed, clear the failed state and start {unit} again"),
                Some(&format!(
                    "systemctl reset-failed {unit}; systemctl start {unit}"
                )),
            ));
        }
    }
}
