//! What the inputs say of why a unit's process exited: its last words, the
//! last exception before the exit, the error lines that state a reason, and
//! systemd's own word on a command it could not execute.

use super::*;

/// Why the unit's process exited, as the inputs say it (each part empty
/// where they do not).
pub(super) struct Reasons<'a> {
    pub words: crate::correlate::LastWords<'a>,
    pub bare: Vec<&'a crate::model::Message>,
    pub last_exception: Option<(Span, &'a String, &'a String)>,
    pub stated: Option<(Span, String)>,
    pub exec: Option<exec::ExecFailure<'a>>,
}

impl<'a> Reasons<'a> {
    pub(super) fn of(incident: &'a Incident, unit: &str, status: &str, span: Span) -> Reasons<'a> {
        let words = last_words(incident, unit, span);
        // A paste of the unit's own output without the journal's prefix.
        let bare = if words.lines.is_empty() {
            bare_last_words(incident, unit, span)
        } else {
            Vec::new()
        };
        let last_exception = last_exception_before(incident, span)
            .filter(|(s, _, _)| !bare.iter().any(|m| m.span == *s));
        // Without an exception (which the server's own rules classify),
        // the unit's last error lines are its stated reason.
        let stated = stated_reason(&words, &bare).filter(|_| last_exception.is_none());
        // systemd's own word on the command it could not execute, unless an
        // exception before the exit says more.
        let exec = exec::of(
            incident,
            unit,
            status,
            span,
            only_unit_systemd_failed(incident, unit),
        )
        .filter(|_| last_exception.is_none());
        Reasons {
            words,
            bare,
            last_exception,
            stated,
            exec,
        }
    }
}

/// Whether `unit` is the only unit of the inputs whose main process
/// exited with one of systemd's own statuses (a line of systemd's about a
/// command that names no unit is about it).
fn only_unit_systemd_failed(incident: &Incident, unit: &str) -> bool {
    let mut failed = incident.units.iter().filter(|(name, facts)| {
        exits_of(incident, name, facts)
            .iter()
            .any(|e| exec::is_systemds(&e.status))
    });
    failed.next().is_some_and(|(name, _)| name == unit) && failed.next().is_none()
}

/// The stated reason: the unit's last error lines in the journal, else
/// the bare lines of its output the paste shows.
fn stated_reason(
    words: &crate::correlate::LastWords<'_>,
    bare: &[&crate::model::Message],
) -> Option<(Span, String)> {
    words
        .reason()
        .map(|e| (e.span, e.message.clone()))
        .or_else(|| {
            bare.iter()
                .rev()
                .find(|m| states_reason(&m.text))
                .or(bare.last())
                .map(|m| (m.span, m.text.trim().to_owned()))
        })
}

/// The last exception before the exit at `span`, if the log has one: its
/// span, name and message.
fn last_exception_before(incident: &Incident, span: Span) -> Option<(Span, &String, &String)> {
    incident
        .facts
        .server_events
        .iter()
        .rev()
        .filter(|e| e.span.source != span.source || e.span.line < span.line)
        .find_map(|e| match &e.kind {
            ServerEventKind::Exception(x) => Some((e.span, &x.name, &x.message)),
            _ => None,
        })
}
