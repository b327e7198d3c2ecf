//! `systemd-crash-loop`: a unit keeps failing and systemd keeps restarting it.

use crate::correlate::{Incident, UnitEventKind, UnitFacts, exit_meaning, last_words};
use crate::model::UnitStatus;
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod watchdog_unfed;

pub static RULE: SystemdCrashLoop = SystemdCrashLoop;

pub struct SystemdCrashLoop;

/// A restart or two after a transient failure is what `Restart=` is for.
const MIN_RESTARTS: u32 = 3;

/// A process that dumps core on every start is not transient: two restarts
/// that crash the same way are a loop.
const MIN_RESTARTS_CORE_DUMPS: u32 = 2;

static META: RuleMeta = RuleMeta {
    id: "systemd-crash-loop",
    category: Category::UnitCrashLoop,
    severity: Severity::Error,
    summary: "a unit fails again and again and systemd keeps restarting it",
    // PID 1's messages are the systemd catalog's rows, whose anchors reach
    // the prefilter by themselves; `systemctl status` says this one.
    anchors: &["auto-restart"],
    doc: r#"
## What it means
systemd restarted the unit at least three times (`Scheduled restart job,
restart counter is at N` from systemd 235 on; before, each restart shows only
as `X holdoff time over, scheduling restart.` (≤ 219), `Service hold-off time
over, scheduling restart.` (220–238) or `Service RestartSec=… expired,
scheduling restart.`), or twice when every run dumps core
(`code=dumped, status=11/SEGV`, result `core-dump`): every run fails the same
way. `systemctl status` showing `activating (auto-restart)` is the loop
caught between two runs.

The exit status says how each run ended: `127` is a shell's or the loader's
"command not found" (the executable, its interpreter or a shared library is
missing), `203/EXEC` is systemd failing to execute `ExecStart=`,
`11/SEGV` a crash in native code.

A unit that systemd's own watchdog ends on every run, exactly its limit
after each start (`Started …` at 21:58:48, `Watchdog timeout (limit
3min)!` at 22:01:48, on two starts or more), fails by its configuration:
the program never sent one keep-alive (`WATCHDOG=1`), so WatchdogSec=
kills it each time, restarted or not (its SIGABRT reads as a core dump,
`status=6/ABRT`). A watchdog timeout at any other time is a hang of a
program that had been answering (`server-hang`).

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
            match crash_loop(incident, unit, facts) {
                Some(f) => out.push(f),
                None => out.extend(watchdog_unfed::finding(incident, unit, facts)),
            }
        }
    }
}

/// How a run's main process ended: its `code`, `status` and line.
type Exit<'a> = (&'a str, &'a str, Span);

/// The finding for `unit` when systemd restarted it often enough to call
/// it a loop (fewer times when every run after a restart dumped core), or
/// `None`.
fn crash_loop(incident: &Incident, unit: &str, facts: &UnitFacts) -> Option<Finding> {
    let restarts = restarts(facts);
    let counter = facts.restarts();
    let exits: Vec<Exit<'_>> = facts
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            UnitEventKind::MainProcessExited { code, status } => {
                Some((code.as_str(), status.as_str(), e.span))
            }
            _ => None,
        })
        .collect();
    // Every run after the first restart dumped core.
    let first_restart = restarts.first().map(|r| r.1);
    let later: Vec<_> = exits
        .iter()
        .filter(|(_, _, s)| first_restart.is_some_and(|r| *s > r))
        .collect();
    let core_dumps = !later.is_empty() && later.iter().all(|(code, _, _)| *code == "dumped");
    let needed = if core_dumps {
        MIN_RESTARTS_CORE_DUMPS
    } else {
        MIN_RESTARTS
    };
    if counter < needed && (restarts.len() as u32) < needed {
        return None;
    }
    let status = facts.status.map(|i| &incident.facts.unit_statuses[i]);
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.units.insert(unit.to_owned());
    f.occurrences = restarts.len() as u32;
    let reason = cite_first_failure(&mut f, incident, unit, facts);
    cite_results(&mut f, facts);
    let mut ending = most_frequent(&exits);
    if let Some(st) = status {
        cite_status(&mut f, st, &mut ending);
    }
    cite_later_run(&mut f, facts, later.last().copied());
    for (n, span) in restarts.iter().take(3) {
        f.evidence(*span, restart_note(*n));
    }
    if let Some((n, span)) = restarts.last() {
        f.evidence(*span, restart_note(*n));
    }
    let times: Vec<i64> = restarts
        .iter()
        .filter_map(|(_, s)| incident.time_of(*s))
        .map(|t| t.utc_seconds())
        .collect();
    let spacing =
        (times.len() >= 2).then(|| (times[times.len() - 1] - times[0]) / (times.len() as i64 - 1));
    f.condition(
        if core_dumps {
            format!("systemd restarted {unit} at least {needed} times, and every run dumped core")
        } else {
            format!("systemd restarted {unit} at least {needed} times")
        },
        true,
    );
    f.condition("restarts are timed (journal timestamps)", spacing.is_some());
    f.condition(
        "the unit's own lines say why a run failed",
        reason.is_some()
            || ending
                .as_ref()
                .is_some_and(|(c, s, _)| exit_meaning(c, s).is_some()),
    );
    let how = ending.as_ref().map(|(code, st, n)| {
        let each = if *n > 1 { "each run" } else { "a run" };
        match exit_meaning(code, st) {
            Some(m) => format!("{each} {}: {m}", ended(code, st)),
            None => format!("{each} {}", ended(code, st)),
        }
    });
    let counted_by = if restarts.iter().any(|r| r.0.is_some()) {
        "restart counter"
    } else {
        "restarts announced by systemd"
    };
    f.title = format!("{unit} is in a crash loop ({counter} restarts)");
    describe(&mut f, unit, counter, counted_by, &reason, &how, spacing);
    push_actions(&mut f, unit, &ending);
    f.confidence = confidence(&f, 0.7, 0.95);
    Some(f)
}

/// The unit's restarts with systemd's count: counted by systemd (v235+),
/// else announced (no count).
fn restarts(facts: &UnitFacts) -> Vec<(Option<u32>, Span)> {
    let counted: Vec<_> = facts
        .events
        .iter()
        .filter_map(|e| match e.kind {
            UnitEventKind::ScheduledRestart(n) => Some((Some(n), e.span)),
            _ => None,
        })
        .collect();
    if counted.is_empty() {
        facts
            .events
            .iter()
            .filter(|e| matches!(e.kind, UnitEventKind::RestartDue))
            .map(|e| (None, e.span))
            .collect()
    } else {
        counted
    }
}

/// Cites the first failure of the loop and what the unit said before it;
/// returns the line that states the reason, and its text.
fn cite_first_failure(
    f: &mut Finding,
    incident: &Incident,
    unit: &str,
    facts: &UnitFacts,
) -> Option<(Span, String)> {
    let first_failure = facts.events.iter().find(|e| {
        matches!(
            e.kind,
            UnitEventKind::MainProcessExited { .. }
                | UnitEventKind::FailedWithResult(_)
                | UnitEventKind::EnteredFailedState
        )
    });
    let mut reason = None;
    if let Some(first) = first_failure {
        let words = last_words(incident, unit, first.span);
        f.entities.pids.extend(words.pids.iter().copied());
        reason = words.reason().map(|e| (e.span, e.message.clone()));
        for e in &words.lines {
            f.evidence(
                e.span,
                format!("{unit}'s last words before its first failure"),
            );
        }
        f.evidence(
            first.span,
            format!("the first failure of the loop: look at {unit}'s lines before it"),
        );
    }
    reason
}

/// Cites systemd's verdict on the runs: the first line of each result
/// (`exit-code` for the first run, `core-dump` for the next …), so that
/// every result line this loop explains is cited.
fn cite_results(f: &mut Finding, facts: &UnitFacts) {
    let mut results: Vec<&str> = Vec::new();
    for e in &facts.events {
        let UnitEventKind::FailedWithResult(r) = &e.kind else {
            continue;
        };
        if results.contains(&r.as_str()) {
            continue;
        }
        f.evidence(
            e.span,
            if results.is_empty() {
                "and how systemd classified it".to_owned()
            } else {
                format!("systemd classified a later run as '{r}'")
            },
        );
        results.push(r);
    }
}

/// How the runs ended: the most frequent exit code and status, and how
/// many runs ended so.
fn most_frequent(exits: &[Exit<'_>]) -> Option<(String, String, usize)> {
    let mut statuses: Vec<(&str, &str, usize)> = Vec::new();
    for (code, st, _) in exits {
        match statuses.iter_mut().find(|(c, s, _)| c == code && s == st) {
            Some(entry) => entry.2 += 1,
            None => statuses.push((code, st, 1)),
        }
    }
    statuses.sort_by_key(|s| std::cmp::Reverse(s.2));
    statuses
        .first()
        .map(|(c, s, n)| ((*c).to_owned(), (*s).to_owned(), *n))
}

/// Cites `systemctl status`: the last run's main process (its exit is the
/// `ending` when no exit line gave one) and a unit caught waiting for its
/// next restart.
fn cite_status(f: &mut Finding, st: &UnitStatus, ending: &mut Option<(String, String, usize)>) {
    if let (Some(pid), Some(span)) = (st.main_pid, st.main_pid_span) {
        f.entities.pids.insert(pid);
        let exit = st.main_exit.clone().unwrap_or_default();
        f.evidence(
            span,
            format!("the last run's main process, PID {pid} ({exit})"),
        );
        if ending.is_none() {
            *ending = parse_exit(&exit).map(|(c, s)| (c, s, 1));
        }
    }
    if st.sub_state.as_deref() == Some("auto-restart") {
        if let Some(span) = st.active_span {
            f.evidence(
                span,
                "systemctl status caught the unit waiting for its next restart",
            );
        }
    }
}

/// Cites how the last run after a restart ended, and systemd's verdict on
/// it.
fn cite_later_run(f: &mut Finding, facts: &UnitFacts, last: Option<&Exit<'_>>) {
    if let Some((code, st, span)) = last {
        f.evidence(
            *span,
            format!(
                "a run after a restart ended the same way: {}",
                ended(code, st)
            ),
        );
        if let Some(r) = facts.events.iter().find(|e| {
            e.span > *span
                && matches!(&e.kind, UnitEventKind::FailedWithResult(r) if r == "core-dump" || r == "signal")
        }) {
            f.evidence(r.span, "systemd's verdict on that run");
        }
    }
}

/// Sets the headline, chain and explanation: the restarts, why the runs
/// failed (the unit's own `reason`, else `how` they ended), and the pace
/// of the loop (seconds between restarts, `spacing`).
fn describe(
    f: &mut Finding,
    unit: &str,
    counter: u32,
    counted_by: &str,
    reason: &Option<(Span, String)>,
    how: &Option<String>,
    spacing: Option<i64>,
) {
    let fast = spacing.is_some_and(|s| s < 60);
    f.headline = match (reason, how) {
        (Some((_, words)), _) => format!(
            "{unit} keeps failing: systemd restarted it {counter} times; before failing it said: {}",
            shorten(words)
        ),
        (None, Some(how)) => {
            format!("{unit} keeps failing: systemd restarted it {counter} times; {how}.")
        }
        (None, None) => {
            format!("{unit} keeps failing: systemd restarted it {counter} times.")
        }
    };
    f.chain.push(format!(
        "systemd restarted {unit} {counter} times ({counted_by})"
    ));
    match (reason, how) {
        (Some((_, words)), _) => f.chain.push(format!("each run failed: {}", shorten(words))),
        (None, Some(how)) => f.chain.push(how.clone()),
        (None, None) => f.chain.push(
            "each run failed: the loop is a symptom of the failure of the first run".to_owned(),
        ),
    }
    let pace = match spacing {
        Some(s) if fast => format!(
            "About {s} s between restarts: a fast loop, typical of a configuration or environment problem (flags, paths, ports, driver)."
        ),
        Some(s) => format!(
            "About {s} s between restarts: a slow loop, typical of a failure after the model loaded (memory, NCCL, GPU faults)."
        ),
        None => "The restarts carry no timestamps, so fast and slow loops cannot be told apart."
            .to_owned(),
    };
    f.explanation = match how {
        Some(how) => format!("{pace} How the runs ended: {how}."),
        None => pace,
    };
}

/// Adds the steps: check the binary (status 126/127/203) or read the core
/// dump (a crash), fix the first failure and reset the unit, and space the
/// restarts.
fn push_actions(f: &mut Finding, unit: &str, ending: &Option<(String, String, usize)>) {
    if let Some((code, st, _)) = ending {
        if code == "exited"
            && (st.starts_with("127") || st.starts_with("203") || st.starts_with("126"))
        {
            f.actions.push(Action::advice(
                format!("check that {unit}'s ExecStart= binary exists, is executable by the unit's user, and finds its libraries"),
                Some(&format!("systemctl show -p ExecStart {unit}")),
            ));
        } else if code == "dumped" || ["11/", "6/", "7/", "4/"].iter().any(|p| st.starts_with(p)) {
            f.actions.push(Action::advice(
                format!("read the core dump of {unit}'s last crash (the backtrace names the failing library)"),
                Some(&format!("coredumpctl info {unit}")),
            ));
        }
    }
    f.actions.push(Action::advice(
        format!("fix the cause of the first failure, then clear the failure state of {unit} and start it"),
        Some(&format!("systemctl reset-failed {unit}")),
    ));
    f.actions.push(Action::advice(
        "give the GPU server RestartSec=10s or more, so GPU memory is released before the next start",
        Some(&format!("systemctl show -p Restart -p RestartUSec {unit}")),
    ));
}

/// `exited with status 127/n/a`, `dumped core (signal 11/SEGV)`.
fn ended(code: &str, status: &str) -> String {
    match code {
        "exited" => format!("exited with status {status}"),
        "dumped" => format!("dumped core (signal {status})"),
        _ => format!("was killed by signal {status}"),
    }
}

fn restart_note(n: Option<u32>) -> String {
    match n {
        Some(n) => format!("restart number {n}"),
        None => {
            "systemd schedules another restart (this systemd prints no restart counter)".to_owned()
        }
    }
}

/// `code=exited, status=127` of `systemctl status` → (`exited`, `127`).
fn parse_exit(text: &str) -> Option<(String, String)> {
    let code = text
        .split("code=")
        .nth(1)?
        .split(',')
        .next()?
        .trim()
        .to_owned();
    let status = text
        .split([',', ' '])
        .find_map(|p| {
            p.strip_prefix("status=")
                .or_else(|| p.strip_prefix("signal="))
        })?
        .trim_end_matches(')')
        .to_owned();
    Some((code, status))
}

/// The first line of a message, cut to fit a headline.
fn shorten(text: &str) -> String {
    let text = text.lines().next().unwrap_or("");
    match text.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}
