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
    /// The last exception is the unit's own: a line its run's processes
    /// wrote in the exit's input, or one printed there without a journal
    /// prefix.
    pub own_exception: bool,
    /// Where its Go program crashed, when its last lines are a goroutine
    /// dump.
    pub go: Option<goroutine::GoCrash>,
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
        // A goroutine dump says where a Go program crashed: its stated
        // reason when no line of its says more.
        let go = goroutine::of(incident, &words.pids, span);
        let stated = stated.or_else(|| {
            go.as_ref()
                .filter(|_| last_exception.is_none())
                .map(|g| (g.place, g.said()))
        });
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
        let own_exception = last_exception
            .is_some_and(|(espan, _, _)| own_exception(incident, &words, espan, span));
        Reasons {
            words,
            bare,
            last_exception,
            stated,
            exec,
            own_exception,
            go,
        }
    }
}

/// Whether the exception at `espan` is the unit's own, of the run that
/// ended at `exit`, and no catalog row's: a journal line one of the run's
/// PIDs wrote, or a line of the same input that no journal prefix names
/// (the program's output pasted bare above systemd's exit line).
fn own_exception(
    incident: &Incident,
    words: &crate::correlate::LastWords<'_>,
    espan: Span,
    exit: Span,
) -> bool {
    // A line a catalog row knows (`No CUDA GPUs are available`) is that
    // row's or its rule's to explain, before the unit's failure.
    let known = incident.known.iter().any(|k| {
        k.hit.row.is_some()
            && incident
                .facts
                .messages
                .get(k.message)
                .is_some_and(|m| m.span == espan)
    });
    if espan.source != exit.source || known {
        return false;
    }
    match incident.facts.journal.iter().find(|e| e.span == espan) {
        Some(e) => e.pid.is_some_and(|p| words.pids.contains(&p)),
        None => true,
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
