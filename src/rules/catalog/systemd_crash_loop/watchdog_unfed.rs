//! A unit that systemd's own watchdog kills exactly WatchdogSec= after
//! each start (`Started …` at 21:58:48, `Watchdog timeout (limit 3min)!`
//! at 22:01:48, again on the next start): the program never sent a single
//! keep-alive (`WATCHDOG=1`), so the unit's configuration, not a hang of
//! the program, ends every run. A timeout long after a start, when the
//! program had been feeding the watchdog, is a hang (the catalog row
//! `systemd.watchdog-timeout`'s reading).

use crate::correlate::{Incident, UnitEventKind, UnitFacts};
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};
use crate::source::Span;

use super::META;

/// systemd's watchdog line (catalogs/systemd.toml).
const WATCHDOG_TIMEOUT: &str = "systemd.watchdog-timeout";

/// How far from the limit a timeout may be, in seconds: the journal's
/// times are whole seconds, and systemd's timer fires within its accuracy.
const SLACK_SECS: i64 = 1;

/// Starts whose every run the watchdog ended at the limit for this to be
/// the unit's configuration rather than one hang at start-up.
const MIN_RUNS: usize = 2;

/// One run: its start, its watchdog timeout, and the limit.
struct Run {
    start: Span,
    timeout: Span,
    limit: String,
}

/// systemd's time span (`3min`, `10s`, `1min 30s`, `500ms`) in seconds.
fn seconds(span: &str) -> Option<i64> {
    let mut total_ms: i64 = 0;
    for part in span.split_whitespace() {
        let at = part.find(|c: char| !c.is_ascii_digit())?;
        let (n, unit) = part.split_at(at);
        let n: i64 = n.parse().ok()?;
        let ms = match unit {
            "us" => 0,
            "ms" => 1,
            "s" => 1_000,
            "min" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return None,
        };
        total_ms += n * ms;
    }
    Some(total_ms / 1_000)
}

/// Each watchdog timeout of `unit` with the start before it, when the
/// timeout came exactly its limit after that start.
fn runs(incident: &Incident, unit: &str, facts: &UnitFacts) -> Option<Vec<Run>> {
    let starts: Vec<Span> = facts
        .events
        .iter()
        .filter(|e| matches!(e.kind, UnitEventKind::Started))
        .map(|e| e.span)
        .collect();
    let mut runs: Vec<Run> = Vec::new();
    for (m, hit) in incident.known(WATCHDOG_TIMEOUT) {
        if hit.get("unit") != Some(unit) {
            continue;
        }
        let limit = hit.get("limit")?.trim_end_matches(')').to_owned();
        let start = starts
            .iter()
            .copied()
            .filter(|s| s.source == m.span.source && *s < m.span)
            .max()?;
        let gap = incident.time_of(m.span)?.utc_seconds() - incident.time_of(start)?.utc_seconds();
        if (gap - seconds(&limit)?).abs() > SLACK_SECS || runs.iter().any(|r| r.start == start) {
            return None;
        }
        runs.push(Run {
            start,
            timeout: m.span,
            limit,
        });
    }
    (runs.len() >= MIN_RUNS).then_some(runs)
}

/// The finding for `unit` when every run of it ended in a watchdog
/// timeout exactly its limit after the start, on at least two starts.
pub(super) fn finding(incident: &Incident, unit: &str, facts: &UnitFacts) -> Option<Finding> {
    let runs = runs(incident, unit, facts)?;
    let limit = runs[0].limit.clone();
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.units.insert(unit.to_owned());
    f.occurrences = runs.len() as u32;
    for run in &runs {
        f.evidence(
            run.start,
            "systemd started the unit: its watchdog clock starts here",
        );
        f.evidence(
            run.timeout,
            format!("the watchdog fired exactly {limit} (WatchdogSec=) after that start: not one keep-alive (WATCHDOG=1) arrived in the whole run"),
        );
        // The exit systemd's watchdog signal caused, right after.
        if let Some(exit) = facts.events.iter().find(|e| {
            e.span > run.timeout
                && e.span.source == run.timeout.source
                && matches!(e.kind, UnitEventKind::MainProcessExited { .. })
        }) && let UnitEventKind::MainProcessExited { code, status } = &exit.kind
        {
            f.evidence(
                exit.span,
                format!("systemd's watchdog signal ended the run (code={code}, status={status}): the kill, not a crash of the program's own"),
            );
        }
    }
    f.condition(
        format!(
            "every one of the {} runs ended in a watchdog timeout",
            runs.len()
        ),
        true,
    );
    f.condition(
        format!("each timeout came exactly {limit} after its start (journal timestamps)"),
        true,
    );
    f.title = format!(
        "{unit} is killed by its watchdog {limit} after every start: it never sends a keep-alive"
    );
    f.headline = format!(
        "systemd's watchdog killed {unit} exactly {limit} after each of its {} starts: the program never sent a keep-alive (WATCHDOG=1), so the unit's WatchdogSec= ends every run (a program without sd_notify watchdog support, or one that cannot reach the notify socket).",
        runs.len()
    );
    f.explanation = "With WatchdogSec= set, systemd expects the service to send WATCHDOG=1 through sd_notify() more often than the limit; a service that never does is killed (WatchdogSignal=, SIGABRT by default, so the exit reads as a core dump) exactly the limit after it started, on every start. A hang of a program that had been feeding the watchdog fires at any time, not at the limit after the start.".to_owned();
    f.chain.push(format!("{unit} fails on every run"));
    f.chain.push(format!(
        "systemd's watchdog kills it {limit} after each start"
    ));
    f.chain.push("no keep-alive ever arrived: WatchdogSec= is set for a program that does not send WATCHDOG=1 (or cannot reach the notify socket)".to_owned());
    f.actions.push(Action::advice(
        "Read the unit's watchdog settings and whether the program supports sd_notify's watchdog (its documentation, its version's changelog); a fixed version sends WATCHDOG=1",
        Some(format!("systemctl cat {unit}; systemctl show {unit} -p WatchdogUSec,Type,NotifyAccess").as_str()),
    ));
    f.actions.push(Action::advice(
        "Until then, turn the watchdog off for it with a drop-in (`[Service]` `WatchdogSec=0`) and restart it; read the core dump only if the program does send keep-alives",
        Some(format!("systemctl edit {unit}; coredumpctl list {unit}").as_str()),
    ));
    f.confidence = confidence(&f, 0.7, 0.85);
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// systemd/systemd#2010: systemd-journal-upload on systemd 227, killed
    /// by its watchdog three minutes after each start.
    const UNFED: &str = "\
Nov 23 21:58:48 goweb1 systemd[1]: Started Journal Remote Upload Service.
Nov 23 22:01:48 goweb1 systemd[1]: systemd-journal-upload.service: Watchdog timeout (limit 3min)!
Nov 23 22:01:48 goweb1 systemd[1]: systemd-journal-upload.service: Main process exited, code=dumped, status=6/ABRT
Nov 23 22:01:48 goweb1 systemd[1]: systemd-journal-upload.service: Unit entered failed state.
Nov 23 22:01:48 goweb1 systemd[1]: systemd-journal-upload.service: Failed with result 'core-dump'.
Nov 23 22:57:35 goweb1 systemd[1]: Started Journal Remote Upload Service.
Nov 23 23:00:35 goweb1 systemd[1]: systemd-journal-upload.service: Watchdog timeout (limit 3min)!
Nov 23 23:00:35 goweb1 systemd[1]: systemd-journal-upload.service: Main process exited, code=dumped, status=6/ABRT
Nov 23 23:00:35 goweb1 systemd[1]: systemd-journal-upload.service: Unit entered failed state.
Nov 23 23:00:35 goweb1 systemd[1]: systemd-journal-upload.service: Failed with result 'core-dump'.
";

    #[test]
    fn a_timeout_at_the_limit_after_every_start_is_the_units_failure() {
        let f = findings_of("systemd-crash-loop", UNFED);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].title.contains("never sends a keep-alive"),
            "{}",
            f[0].title
        );
        assert!(
            f[0].entities
                .units
                .contains("systemd-journal-upload.service")
        );
    }

    #[test]
    fn a_timeout_long_after_a_start_is_not() {
        // The second run's timeout a minute later than its limit: the
        // program had been answering, then stopped (a hang).
        let text = UNFED.replace("Nov 23 23:00:35", "Nov 23 23:01:35");
        assert!(findings_of("systemd-crash-loop", &text).is_empty());
    }

    #[test]
    fn one_run_alone_is_not_enough() {
        let one: String = UNFED.lines().take(5).map(|l| format!("{l}\n")).collect();
        assert!(findings_of("systemd-crash-loop", &one).is_empty());
    }

    #[test]
    fn systemds_time_spans_read_in_seconds() {
        assert_eq!(super::seconds("3min"), Some(180));
        assert_eq!(super::seconds("1min 30s"), Some(90));
        assert_eq!(super::seconds("10s"), Some(10));
        assert_eq!(super::seconds("3 min"), None);
    }
}
