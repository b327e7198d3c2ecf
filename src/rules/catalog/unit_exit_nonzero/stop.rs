//! An exit during a stop that was asked for: PID 1's `Stopping X...` (an
//! operator's `systemctl stop` or `restart`, a shutdown), then the main
//! process exiting with a failure status, then `Stopped X.`. Many programs
//! exit non-zero on SIGTERM (status 1, or 143 from a wrapper shell); systemd
//! then records `Failed with result 'exit-code'`, though nothing broke: the
//! program did what it was asked, with the wrong status. The exit is said as
//! such, for information, unless the program's own error lines before it say more.

use crate::correlate::{UnitEventKind, UnitFacts};
use crate::rules::{Action, Finding};
use crate::source::Span;

/// The `Stopping X...` line of the stop that `exit` ended: the unit's last
/// job line before the exit in the same input, when it is a stop (a
/// `Starting`/`Started` after it would make the exit the next run's).
pub(super) fn requested(facts: &UnitFacts, exit: Span) -> Option<Span> {
    facts
        .events
        .iter()
        .filter(|e| e.span.source == exit.source && e.span < exit)
        .filter(|e| {
            matches!(
                e.kind,
                UnitEventKind::Stopping
                    | UnitEventKind::Starting
                    | UnitEventKind::Started
                    | UnitEventKind::Stopped
            )
        })
        .max_by_key(|e| e.span)
        .filter(|e| matches!(e.kind, UnitEventKind::Stopping))
        .map(|e| e.span)
}

/// Cites the stop and says what the exit was, with what would make the
/// next stop clean.
pub(super) fn explain(f: &mut Finding, unit: &str, status: &str, stopping: Span) {
    f.evidence(
        stopping,
        format!("systemd began stopping {unit} here: the exit below is its answer to SIGTERM"),
    );
    let code = status.split('/').next().unwrap_or(status);
    f.title = format!("{unit} exited with status {status} when it was stopped");
    f.headline = format!(
        "{unit} exited with status {status} while systemd was stopping it: the stop was asked for \
         (an operator's stop or restart, or a shutdown) and the program ends with a failure status \
         on SIGTERM; nothing else failed"
    );
    f.explanation = "systemd marks a unit failed when its main process exits non-zero, \
                     even when the exit answers a stop it was asked for: the program's exit \
                     status on SIGTERM is the only thing wrong."
        .to_owned();
    f.actions.push(Action::advice(
        format!(
            "if {unit} exits with status {code} on SIGTERM by design, tell systemd so: \
             `SuccessExitStatus={code}` in a drop-in (`systemctl edit {unit}`)"
        ),
        None,
    ));
}
