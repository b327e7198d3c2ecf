//! A unit's death that systemd's watchdog caused: the unit stopped
//! answering its watchdog (`Watchdog timeout (limit 2s)!`, `Failed with
//! result 'watchdog'`, a status block's `Result: watchdog`) and systemd
//! killed it with WatchdogSignal= (SIGABRT by default), so the `6/ABRT`
//! exit is the hang's consequence, not a crash of the program's own.

use crate::correlate::{Incident, UnitEventKind, UnitFacts};
use crate::source::Span;

/// systemd's watchdog judged the unit hung (`Watchdog timeout (limit
/// 2s)!`, `Failed with result 'watchdog'`, a status block's `Result:
/// watchdog`) and killed it: the `Killing process N (comm) with signal
/// SIGX.` line for the unit after the timeout, where the inputs have it.
struct WatchdogKill {
    signal: Option<String>,
    line: Option<Span>,
}

/// The row of systemd's watchdog line and of its kill lines.
const WATCHDOG_TIMEOUT: &str = "systemd.watchdog-timeout";
const KILLING_PROCESS: &str = "systemd.killing-process";

/// Whether the death recorded at `exit` is systemd's watchdog kill of
/// `unit`: the watchdog fired for the unit before the exit (or systemd's
/// verdict is 'watchdog'), and no other signal was sent to it since.
fn watchdog_kill(
    incident: &Incident,
    unit: &str,
    facts: &UnitFacts,
    exit: Span,
) -> Option<WatchdogKill> {
    let fired = incident
        .known(WATCHDOG_TIMEOUT)
        .filter(|(m, hit)| hit.get("unit") == Some(unit) && m.span.source == exit.source)
        .map(|(m, _)| m.span)
        .filter(|s| *s <= exit)
        .max();
    let verdict = facts
        .events
        .iter()
        .any(|e| matches!(&e.kind, UnitEventKind::FailedWithResult(r) if r == "watchdog"))
        || facts
            .status
            .and_then(|i| incident.facts.unit_statuses.get(i))
            .is_some_and(|s| s.result.as_deref() == Some("watchdog"));
    if fired.is_none() && !verdict {
        return None;
    }
    // The last kill line for the unit before the exit, after the timeout.
    let kill = incident
        .known(KILLING_PROCESS)
        .filter(|(m, hit)| {
            hit.get("unit") == Some(unit)
                && m.span.source == exit.source
                && m.span <= exit
                && fired.is_none_or(|f| m.span > f)
        })
        .max_by_key(|(m, _)| m.span);
    Some(WatchdogKill {
        signal: kill.and_then(|(_, hit)| hit.get("signal").map(str::to_owned)),
        line: kill.map(|(m, _)| m.span),
    })
}

/// A death as `unit_deaths` words it (`span`, how, crashed), with the
/// kill line that caused it where the watchdog's: then it is said to be
/// systemd's kill, and not a crash.
pub(super) fn recast(
    incident: &Incident,
    unit: &str,
    facts: &UnitFacts,
    (span, how, crashed): (Span, String, bool),
) -> (Span, String, bool, Option<Span>) {
    match watchdog_kill(incident, unit, facts, span) {
        Some(kill) => {
            let by = kill
                .signal
                .map(|s| format!(" with SIG{s}"))
                .unwrap_or_default();
            (
                span,
                format!("killed by systemd's watchdog{by}, after it stopped answering ({how})"),
                false,
                kill.line,
            )
        }
        None => (span, how, crashed, None),
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::{Category, Severity};

    use super::super::tests::deaths;

    /// systemd's watchdog kills a unit it judged hung with WatchdogSignal=
    /// (SIGABRT by default): the `6/ABRT` exit is that kill, not a crash
    /// of the program's own (batch O's 1012,
    /// https://github.com/canonical/snapd/pull/12776). The same exit with
    /// no watchdog line is the program's abort.
    #[test]
    fn a_watchdogs_kill_is_no_crash_of_the_programs_own() {
        let journal = "\
Apr 25 17:23:12 ubuntu systemd[1]: Started Service for snap application test-snapd-service-watchdog.direct-watchdog-ok.
Apr 25 17:23:14 ubuntu systemd[1]: snap.test-snapd-service-watchdog.direct-watchdog-ok.service: Watchdog timeout (limit 2s)!
Apr 25 17:23:14 ubuntu systemd[1]: snap.test-snapd-service-watchdog.direct-watchdog-ok.service: Killing process 6221 (snap-exec) with signal SIGABRT.
Apr 25 17:23:14 ubuntu systemd[1]: snap.test-snapd-service-watchdog.direct-watchdog-ok.service: Main process exited, code=killed, status=6/ABRT
";
        let f = deaths(journal);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning, "{f:?}");
        assert!(
            f[0].title
                .contains("killed by systemd's watchdog with SIGABRT")
                && f[0].title.contains("6/ABRT"),
            "{}",
            f[0].title
        );
        assert!(f[0].evidence.iter().any(|e| e.span.line == 3), "{f:?}");
        // Without the watchdog's line the abort is the program's own.
        let alone: String = journal
            .lines()
            .filter(|l| !l.contains("Watchdog timeout"))
            .map(|l| format!("{l}\n"))
            .collect();
        let f = deaths(&alone);
        assert!(
            f.len() == 1
                && f[0].severity == Severity::Error
                && !f[0].title.contains("systemd's watchdog"),
            "{f:?}"
        );
        // The whole report: the hang leads and explains the kill.
        let findings = crate::testing::analyze_paste(journal).diagnosis.findings;
        assert_eq!(findings[0].category, Category::ServerHang, "{findings:?}");
        assert!(findings[0].explains.len() == 1, "{findings:?}");
    }
}
