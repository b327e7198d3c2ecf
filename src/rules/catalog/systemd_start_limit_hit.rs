//! `systemd-start-limit-hit`: systemd gave up restarting a unit.

use crate::correlate::{Incident, UnitEvent, UnitEventKind, is_manager};
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

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
findings of the report name it. When the main process exited by itself
with status 0 (`Main PID: N (code=exited, status=0/SUCCESS)`) and nothing
failed, nothing crashed: the unit's `Type=` and `Restart=` do not fit its
program (a script that does its work and returns, or a daemon that forks
into the background, run as `Type=simple` with `Restart=always`), and the
finding says so.

Lines cut at a terminal's width (`Start request repeated `,
`Failed with result 'exi`) are read by the start of systemd's message
when one row's wording alone begins so; the finding then has a lower
confidence and asks for the whole lines.

## How to confirm
`systemctl status UNIT` shows `Active: failed (Result: start-limit-hit)`;
the journal shows the failures before it.

## How to fix
Fix the cause of the failures, then `systemctl reset-failed UNIT` and start
it again. For a main process that returns with status 0:
`Type=oneshot` with `RemainAfterExit=yes`, `Type=forking`, or
`Restart=on-failure`.

## Safety
Only advice: `reset-failed` alone restarts the loop.
"#,
};

impl Rule for SystemdStartLimitHit {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for unit in limited_units(incident) {
            out.push(finding(incident, unit));
        }
    }
}

/// The finding for one unit systemd stopped restarting.
fn finding(incident: &Incident, unit: &str) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.units.insert(unit.to_owned());
    let facts = incident.units.get(unit);
    let events = facts.map_or(&[][..], |u| &u.events);
    cite_limit(incident, unit, events, &mut f);
    let earlier = events.iter().find_map(|e| match &e.kind {
        UnitEventKind::FailedWithResult(r) if !r.contains("start-limit") => Some((e.span, r)),
        _ => None,
    });
    if let Some((span, r)) = earlier {
        f.evidence(span, format!("an earlier run failed with result '{r}'"));
    }
    cite_loop(events, &mut f);
    let exit = main_exit(incident, unit, events);
    if let Some(x) = &exit {
        f.entities.pids.extend(x.pid);
        f.evidence(x.span, format!("its last run's main process: {}", x.how));
    } else if let Some(p) = start_command(incident, unit) {
        // A block cut before the status (`(code=exited, statu`): the start
        // command's process is named all the same.
        f.entities.pids.insert(p.pid);
        f.evidence_marked(
            p.span,
            format!(
                "its last run's start command, PID {} (how it ended is cut off the line)",
                p.pid
            ),
            p.pid.to_string(),
        );
    }
    let failures = events
        .iter()
        .filter(|e| matches!(e.kind, UnitEventKind::MainProcessExited { .. }))
        .count();
    let restarts = facts.map_or(0, |u| u.restarts());
    f.condition("systemd reported start-limit-hit", true);
    f.condition(
        format!("the journal shows the failed runs before it ({failures} seen)"),
        failures > 0,
    );
    let cut: Vec<Span> = facts.map_or(Vec::new(), |u| u.cut.clone());
    if !cut.is_empty() {
        f.condition(
            format!(
                "its lines are whole ({} cut at the terminal's width, read by the start of systemd's message)",
                cut.len()
            ),
            false,
        );
    }
    f.title = format!("systemd gave up restarting {unit} (start-limit-hit)");
    f.chain
        .push(format!("{unit} is failed with result 'start-limit-hit'"));
    f.chain.push(match (failures, earlier, restarts) {
        (1.., _, _) => format!("{unit} failed {failures} time(s) in a row before that"),
        (0, Some((_, r)), 1..) => format!(
            "{unit} failed with result '{r}' and systemd restarted it (at least {restarts} time(s)) before that"
        ),
        (0, Some((_, r)), 0) => format!("{unit} failed with result '{r}' before that"),
        (0, None, 1..) => format!(
            "systemd restarted {unit} (at least {restarts} time(s)) before that; how each run ended is not in the inputs"
        ),
        (0, None, 0) => format!(
            "{unit} failed again and again before that; those runs are not in the inputs"
        ),
    });
    let returned = exit.as_ref().filter(|x| x.zero).is_some() && !failed_by_itself(events);
    if returned {
        type_mismatch(unit, &mut f);
    } else {
        f.headline = format!("{unit} failed too often in a row and systemd stopped restarting it.");
        f.explanation =
            "The start limit ends a crash loop; the cause is the failure of the runs before it."
                .to_owned();
    }
    let user = if by_user_manager(incident, events) {
        " --user"
    } else {
        ""
    };
    if !cut.is_empty() {
        f.headline.push_str(&format!(
            " Some pasted lines are cut at the terminal's width ({} read by their start): the journal has them whole.",
            cut.len()
        ));
        f.actions.push(Action::advice(
            format!("read {unit}'s journal with whole lines, for the error each run ended with"),
            Some(&format!("journalctl{user} -u {unit} -b --no-pager")),
        ));
    }
    f.actions.push(Action::advice(
        format!("once the cause is fixed, clear the failure state of {unit} and start it"),
        Some(&format!(
            "systemctl{user} reset-failed {unit} && systemctl{user} start {unit}"
        )),
    ));
    f.confidence = confidence(&f, 0.8, 0.97);
    f
}

/// Cites the lines that say systemd stopped restarting `unit`: the
/// journal's, `systemctl status`'s and `systemctl show`'s.
fn cite_limit(incident: &Incident, unit: &str, events: &[UnitEvent], f: &mut Finding) {
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
            .filter(|_| s.result.as_deref().is_some_and(is_start_limit))
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
            .filter(|_| p.result.as_deref().is_some_and(is_start_limit))
        {
            f.evidence(
                span,
                format!("systemctl show: {unit} ended with Result=start-limit-hit"),
            );
        }
    }
}

/// Cites systemd's account of the loop before the limit: the first failed
/// start, and the first and last restart.
fn cite_loop(events: &[UnitEvent], f: &mut Finding) {
    if let Some(e) = events
        .iter()
        .find(|e| matches!(e.kind, UnitEventKind::FailedToStart))
    {
        f.evidence(e.span, "systemd reports that the start failed");
    }
    let restarts: Vec<Span> = events
        .iter()
        .filter(|e| e.kind.is_restart())
        .map(|e| e.span)
        .collect();
    for s in [restarts.first(), restarts.last()].into_iter().flatten() {
        f.evidence(*s, "systemd restarts the unit after its restart delay");
    }
}

/// How the unit's last run's main process ended, as the inputs say it.
struct MainExit {
    /// `code=exited, status=0/SUCCESS` as printed.
    how: String,
    span: Span,
    pid: Option<u32>,
    /// It exited by itself with status 0.
    zero: bool,
}

/// The unit's main process's last exit: PID 1's last `Main process
/// exited` line, else `systemctl status`'s `Main PID: N (code=…)` or
/// `Process: N ExecStart=… (code=…)` line.
fn main_exit(incident: &Incident, unit: &str, events: &[UnitEvent]) -> Option<MainExit> {
    let zero =
        |code: &str, status: &str| code == "exited" && (status == "0" || status.starts_with("0/"));
    let journal = events.iter().rev().find_map(|e| match &e.kind {
        UnitEventKind::MainProcessExited { code, status } => Some(MainExit {
            how: format!("code={code}, status={status}"),
            span: e.span,
            pid: None,
            zero: zero(code, status),
        }),
        _ => None,
    });
    journal.or_else(|| {
        let st = incident
            .facts
            .unit_statuses
            .iter()
            .rev()
            .find(|s| s.unit == unit)?;
        let (how, span, pid) = st.main_process_exit()?;
        let status = how.strip_prefix("code=exited, status=");
        Some(MainExit {
            zero: status.is_some_and(|s| zero("exited", s)),
            how: how.to_owned(),
            span,
            pid,
        })
    })
}

/// The start command's process of `unit`'s last status block (`Process:
/// 21395 ExecStart=…`), where the block says no exit of it.
fn start_command<'a>(incident: &'a Incident, unit: &str) -> Option<&'a crate::model::UnitProcess> {
    incident
        .facts
        .unit_statuses
        .iter()
        .rev()
        .find(|s| s.unit == unit)?
        .processes
        .iter()
        .rev()
        .find(|p| p.setting.as_deref() == Some("ExecStart"))
}

/// Whether any run's main process failed by itself: a non-zero status
/// or a signal.
fn failed_by_itself(events: &[UnitEvent]) -> bool {
    events.iter().any(|e| match &e.kind {
        UnitEventKind::MainProcessExited { code, status } => {
            code != "exited" || !(status == "0" || status.starts_with("0/"))
        }
        UnitEventKind::FailedWithResult(r) => r != "success" && !r.contains("start-limit"),
        _ => false,
    })
}

/// The finding's reading when the main process exited 0 each time: no
/// crash, but a unit whose Type= and Restart= do not fit its program.
fn type_mismatch(unit: &str, f: &mut Finding) {
    f.condition(
        "its main process exited by itself with status 0: it returned, it did not crash",
        true,
    );
    f.headline = format!(
        "{unit}'s main process exits with status 0 and systemd starts it again each time, until the start limit: the unit is dead and refuses starts. Its Type= and Restart= do not fit its program (a script that does its work and returns, or a daemon that forks into the background, run as Type=simple with Restart=always)."
    );
    f.chain
        .push("its main process returned with status 0 and Restart= started it again".to_owned());
    f.explanation = "Restart=always restarts a main process that ends, even with status 0; one that returns at once reaches the start limit like a crash.".to_owned();
    f.actions.push(Action::advice(
        format!("make {unit} fit its program: Type=oneshot with RemainAfterExit=yes for a command that does its work and returns, Type=forking (with PIDFile=) for a daemon that forks into the background, or Restart=on-failure"),
        Some(&format!("systemctl cat {unit}")),
    ));
}

/// Whether a user manager (`systemd[1315]`), not PID 1, wrote the unit's
/// lines: its journal is read with `--user`.
fn by_user_manager(incident: &Incident, events: &[UnitEvent]) -> bool {
    events.iter().any(|e| {
        incident
            .facts
            .journal
            .iter()
            .any(|j| j.span == e.span && is_manager(j) && !j.is_pid1())
    })
}

/// The result systemd gives a unit it stopped restarting: `start-limit-hit`
/// from v230, `start-limit` before (src/core/service.c,
/// service_result_table).
fn is_start_limit(result: &str) -> bool {
    matches!(result, "start-limit-hit" | "start-limit")
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
        if s.result.as_deref().is_some_and(is_start_limit) && !units.contains(&s.unit.as_str()) {
            units.push(&s.unit);
        }
    }
    for p in &incident.facts.unit_properties {
        if let (Some(unit), Some(r)) = (&p.unit, p.result.as_deref()) {
            if is_start_limit(r) && !units.contains(&unit.as_str()) {
                units.push(unit);
            }
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use crate::rules::Severity;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// Each advice's text and command, as one line.
    fn advice(f: &crate::rules::Finding) -> Vec<String> {
        f.actions
            .iter()
            .filter_map(|a| match &a.kind {
                crate::rules::ActionKind::Advice { text, command } => {
                    Some(format!("{text} $ {}", command.as_deref().unwrap_or("")))
                }
                _ => None,
            })
            .collect()
    }

    /// nix-community/nixos-vscode-server#9: a user unit whose main process
    /// exits 0 is restarted by the user manager until the start limit.
    const USER_UNIT: &str = include_str!(
        "../../../fixtures/rules/systemd-start-limit-hit/pos-user-unit-main-exits-0/status.txt"
    );
    /// David00/rpi-power-monitor#39: a Python script as a system service,
    /// the same mismatch in PID 1's whole lines.
    const SCRIPT: &str = include_str!(
        "../../../fixtures/rules/systemd-start-limit-hit/pos-python-script-exits-0/status.txt"
    );
    /// NVIDIA/nvidia-docker#394: a Chinese-locale journal cut at the
    /// terminal's width.
    const CUT: &str = include_str!(
        "../../../fixtures/rules/systemd-start-limit-hit/pos-cut-at-terminal-width-zh-dates/journal.txt"
    );
    #[test]
    fn a_main_process_that_exits_0_until_the_limit_is_a_type_mismatch() {
        for (text, unit, pid, user) in [
            (USER_UNIT, "auto-fix-vscode-server.service", 4607, " --user"),
            (SCRIPT, "power-monitor.service", 23982, ""),
        ] {
            let f = findings(text);
            assert_eq!(f.len(), 1, "{f:?}");
            let f = &f[0];
            assert!(f.entities.units.contains(unit), "{f:?}");
            assert!(f.entities.pids.contains(&pid), "{f:?}");
            assert!(f.headline.contains("status 0"), "{}", f.headline);
            assert!(f.headline.contains("Type="), "{}", f.headline);
            assert!(
                advice(f).iter().any(|a| a.contains("Type=oneshot")),
                "{:?}",
                advice(f)
            );
            let reset = format!("$ systemctl{user} reset-failed {unit}");
            assert!(
                advice(f).iter().any(|a| a.contains(&reset)),
                "{:?}",
                advice(f)
            );
            // The paste is about that unit alone: an error, GPU or not.
            let all = crate::testing::analyze_paste(text);
            let report = all.report();
            let root = report.root_cause().expect("a root cause");
            assert_eq!(root.rule, super::META.id);
            assert_eq!(root.severity, Severity::Error);
        }
    }

    #[test]
    fn lines_cut_at_the_terminal_are_read_at_a_lower_confidence() {
        let f = findings(CUT);
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert!(f.entities.units.contains("nvidia-docker.service"));
        // `Start request repeated ` (line 8) and the cut result (line 5).
        let lines: Vec<u32> = f.evidence.iter().map(|e| e.span.line).collect();
        assert!(lines.contains(&8) && lines.contains(&5), "{lines:?}");
        assert!(f.headline.contains("cut"), "{}", f.headline);
        assert!(
            advice(f)
                .iter()
                .any(|a| a.contains("$ journalctl -u nvidia-docker.service -b --no-pager")),
            "{:?}",
            advice(f)
        );
        // The whole lines of the same journal (assembled, not copied: 811's
        // lines as systemd v232 prints them in full) give a higher one.
        let whole = CUT
            .replace("failed sta\n", "failed state.\n")
            .replace("result 'exi\n", "result 'exit-code'.\n")
            .replace("time o\n", "time over, scheduling restart.\n")
            .replace("repeated \n", "repeated too quickly.\n");
        let w = findings(&whole);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].confidence > f.confidence,
            "{} {}",
            w[0].confidence,
            f.confidence
        );
    }

    /// The same cut journal with the dates of other locales (assembled, not
    /// copied: 811's lines with journalctl's `%b` of ja_JP, ko_KR, de_DE).
    #[test]
    fn cut_lines_are_read_whatever_the_locales_dates() {
        for date in ["6月 04", "6월 04", "Jun 04"] {
            let text = CUT.replace("6月 04", date);
            let f = findings(&text);
            assert_eq!(f.len(), 1, "{date}: {f:?}");
            assert!(f[0].entities.units.contains("nvidia-docker.service"));
        }
    }
}
