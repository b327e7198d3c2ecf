//! `unit-exited-zero-no-restart`: the engine died but the unit's main
//! process exited with status 0, so `Restart=on-failure` never fires.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Incident, UnitEventKind};
use crate::model::{UnitProperties, UnitStatus};
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod since;
mod started;

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
    // `Deactivated successfully.` is the catalog row `systemd.deactivated`.
    anchors: &["status=0/SUCCESS", "ExecMainStatus="],
    doc: r#"
## What it means
The serving engine failed (an engine-core or worker death, a scheduler
exception), yet the unit's main process exited with status 0 and systemd
logged `Deactivated successfully`. With `Restart=on-failure` (the usual
setting) systemd restarts only failures, so the service stays down and
nothing pages anyone.

From `systemctl show` alone (`ActiveState=inactive`, `SubState=dead`,
`ExecMainCode=1` (exited), `ExecMainStatus=0`, `NRestarts=0`) the same
story is told by numbers: the main process exited by itself with status 0
and systemd never restarted it. Without the journal the report cannot tell
a crash hidden by a clean exit from a deliberate stop, so the finding says
what is missing (the unit's journal, its `Restart=` setting, the unit name
when the paste lacks `Id=`) and the commands that settle it. A unit with
`Restart=always`, a `Type=oneshot` unit, or one that is still active is not
this failure.

A daemon found `inactive (dead)` by `systemctl status` with `Main PID: N
(code=exited, status=0/SUCCESS)` and a `Duration:` of seconds is the same
silence at start-up: its first process exited 0 right after it started.
That is how a daemon that forks into the background (its vendor's unit says
`Type=forking`, as NVIDIA's `nvidia-persistenced` template does) ends under
`Type=simple`: systemd takes the first process's exit for the end of the
service. Only a unit whose description calls it a daemon, a server or a
service, that lasted under a minute and that no timer, socket or path
triggers is read so (a one-shot job ends the same way on purpose).
Before systemd v250 the block has no `Duration:`: the run length is then
read from PID 1's `Started` (or `Starting`) line of the run to the state's
`since`, and a line of another process of the same program saying it
received SIGTERM in that moment (OSSEC's `SIGNAL [(15)-(Terminated)]
Received`) is the detached child systemd stopped with the cgroup.

A unit whose pasted unit file says `Type=simple` (or no `Type=`, the
default with `ExecStart=`) and whose journal shows `Started …` then, within
a minute and with no stop asked for, `Deactivated successfully` is the same
mistake told by the journal: the main process (a daemon that forks, or a
`bash -c` wrapper that starts one and returns) exited 0 right after it
started. A unit file pasted without `systemctl cat`'s header is the unit's
when its `Description=` is the one `Started` names; `Type=oneshot` and
`Type=forking` units, and units that restart, are not this failure.

## Why it happens
A wrapper script that does not propagate the exit status (no `exec`, no
`set -e`), or an API server that shuts down cleanly after its engine died.

## How to confirm
`journalctl -u UNIT`: the engine's error lines, then `Main process exited,
code=exited, status=0/SUCCESS` or `Deactivated successfully`.
`systemctl show -p Restart UNIT`.

## How to fix
For a forking daemon: `Type=forking` with `PIDFile=`, or start it in the
foreground under `Type=simple`. Otherwise make the failure visible to systemd: `exec` the server in the wrapper, exit
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
        let before = out.len();
        self.journal_findings(incident, out);
        let found: Vec<String> = out[before..]
            .iter()
            .flat_map(|f| f.entities.units.iter().cloned())
            .collect();
        let mut found = found;
        for (unit, facts) in &incident.units {
            if found.contains(unit) {
                continue;
            }
            if let Some(f) = started::simple_unit_gone_at_start(incident, unit, facts) {
                found.push(unit.clone());
                out.push(f);
            }
        }
        for p in &incident.facts.unit_properties {
            if p.unit.as_ref().is_some_and(|u| found.contains(u)) {
                continue;
            }
            if let Some(f) = from_properties(incident, p) {
                found.extend(f.entities.units.iter().cloned());
                out.push(f);
            }
        }
        for s in &incident.facts.unit_statuses {
            if found.contains(&s.unit) {
                continue;
            }
            if let Some(f) = daemon_gone_at_start(incident, s) {
                found.push(s.unit.clone());
                out.push(f);
            }
        }
    }
}

/// A run this short ended at start-up: no daemon means to stop by then.
pub(super) const SHORT_RUN_SECS: f64 = 60.0;

/// What a unit's description calls a service that stays up.
static DAEMON_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:daemon|server|service|manager|exporter|engine)\b").expect("regex")
});

/// A unit's declared `Type=` and the line that says it.
type Declared = (String, Span);

/// Whether status block `s` is a daemon gone at start-up, with how long it
/// ran and the unit's declared `Type=`: `inactive (dead)` after a short
/// run, or the same failure a moment earlier, `deactivating
/// (stop-sigterm)` with the main process already gone with status 0 and
/// systemd stopping what is left (no `Duration:` yet), where a pasted unit
/// file says `Type=simple`.
/// What [`gone_at_start`] found: how long the run lasted, PID 1's
/// `Started` line when the length comes from it, the declared `Type=`.
type Gone = (Option<f64>, Option<Span>, Option<Declared>);

fn gone_at_start(incident: &Incident, s: &UnitStatus) -> Option<Gone> {
    let dead =
        s.active_state.as_deref() == Some("inactive") && s.sub_state.as_deref() == Some("dead");
    let stopping = s.active_state.as_deref() == Some("deactivating")
        && s.sub_state
            .as_deref()
            .is_some_and(|x| x.starts_with("stop"));
    let exit = s.main_exit.as_deref()?;
    if !(dead || stopping)
        || !(exit.contains("code=exited") && exit.contains("status=0/"))
        || s.triggered
    {
        return None;
    }
    // NVIDIA's one-shot helpers (`nvidia-suspend.service`: "NVIDIA system
    // suspend actions") are GPU software too: the description decides.
    let daemon = s
        .description
        .as_deref()
        .is_some_and(|d| DAEMON_WORDS.is_match(d));
    let declared = declared_type(incident, &s.unit);
    let simple = match declared.as_ref().map(|(t, _)| t.as_str()) {
        Some("oneshot" | "forking") => return None,
        Some(t) => t == "simple",
        None => false,
    };
    // No `Duration:` (systemd before v250): PID 1's `Started` line to the
    // `since` of the state.
    let started = (s.duration_secs.is_none() && dead)
        .then(|| since::run_from_started(incident, s))
        .flatten();
    let lasted = s
        .duration_secs
        .filter(|d| *d < SHORT_RUN_SECS)
        .or(started.map(|(d, _)| d));
    let short = if dead { lasted.is_some() } else { simple };
    (daemon && short && !stopped_on_request(incident, &s.unit)).then_some((
        lasted,
        started.map(|(_, span)| span),
        declared,
    ))
}

/// `systemctl status` of a daemon that is gone seconds after it started:
/// `inactive (dead)`, `Main PID: N (code=exited, status=0/SUCCESS)`,
/// `Duration: 2.102s`. A daemon that forks into the background (its
/// vendor's unit says `Type=forking`) run under `Type=simple` looks like
/// this: its first process exits 0 once the child is detached and systemd
/// takes the service for finished (and, under the default
/// `KillMode=control-group`, stops what is left). A one-shot job looks the
/// same, so the description must call the unit a daemon or a server and
/// no timer, socket or path may trigger it.
fn daemon_gone_at_start(incident: &Incident, s: &UnitStatus) -> Option<Finding> {
    let (lasted, started, declared) = gone_at_start(incident, s)?;
    let unit = &s.unit;
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.units.insert(unit.clone());
    let pid = s.main_pid;
    if let Some(p) = pid {
        f.entities.pids.insert(p);
    }
    let seconds = lasted.map_or_else(|| "seconds".to_owned(), format_secs);
    let state = format!(
        "{} ({})",
        s.active_state.as_deref().unwrap_or_default(),
        s.sub_state.as_deref().unwrap_or_default()
    );
    if let Some(span) = s.active_span {
        f.evidence(span, format!("{unit} is not running: {state}"));
    }
    if let Some(span) = s.duration_span {
        f.evidence(span, format!("its last run lasted {seconds}"));
    }
    if let Some(span) = started {
        f.evidence(
            span,
            format!("PID 1 started it {seconds} before the state's `since`"),
        );
    }
    if let Some(span) = s.main_pid_span {
        f.evidence(
            span,
            format!(
                "its main process{} exited by itself with status 0 (SUCCESS)",
                pid.map_or(String::new(), |p| format!(" {p}"))
            ),
        );
    }
    for (child, span) in started
        .map(|at| since::children_stopped(incident, s, at))
        .unwrap_or_default()
    {
        f.entities.pids.insert(child);
        f.evidence(
            span,
            format!("its detached child {child} got SIGTERM the same moment: systemd stopping what was left of the unit's cgroup, not a crash"),
        );
    }
    let what = s.description.as_deref().unwrap_or(unit.as_str());
    f.condition(format!("{unit} is a daemon ({what})"), true);
    f.condition(
        format!("its main process exited with status 0 {seconds} after it started"),
        true,
    );
    f.condition("no timer, socket or path starts it on demand", true);
    cite_type(&mut f, unit, declared.as_ref());
    f.title = format!(
        "{unit} exited with status 0 {seconds} after it started: the daemon is not running"
    );
    f.headline = format!(
        "{unit} ({what}) is {state}: its main process exited with status 0 {seconds} after it started, so systemd took the service for finished. A daemon that forks into the background (Type=forking in its vendor unit) run under Type=simple ends this way, with no error anywhere."
    );
    f.chain.push(format!(
        "{unit} is not running, and nothing reports a failure"
    ));
    f.chain.push(format!(
        "its main process exited with status 0 after {seconds}: the parent of a daemon that forked, or a daemon that gave up"
    ));
    f.explanation = format!(
        "A daemon that detaches (forks and lets its first process exit) must run under Type=forking, ideally with PIDFile=: under Type=simple systemd takes the first process's exit as the end of the service, and with the default KillMode=control-group stops the detached child too. Restart=on-failure does not fire, because status 0 is a success. {}",
        match &declared {
            Some((t, _)) => format!("The unit runs under Type={t}."),
            None => format!(
                "The status block does not show the unit's Type=; `systemctl cat {unit}` settles it."
            ),
        }
    );
    confirm(
        &mut f,
        unit,
        "see the unit's Type=, PIDFile= and ExecStart= (a daemon that forks needs Type=forking)",
    );
    f.actions.push(Action::advice(
        "run the daemon as it expects: Type=forking with PIDFile= (as NVIDIA's template unit for nvidia-persistenced does), or keep Type=simple and start it in the foreground; then systemctl daemon-reload and restart it",
        None,
    ));
    f.confidence = confidence(&f, 0.45, 0.8);
    Some(f)
}

/// A stop someone asked for (`Stopping …`) ends a daemon with status 0 too.
pub(super) fn stopped_on_request(incident: &Incident, unit: &str) -> bool {
    incident.facts.journal.iter().any(|e| {
        e.is_pid1() && e.unit.as_deref() == Some(unit) && e.message.starts_with("Stopping ")
    })
}

/// The unit's own `Type=`, from a pasted unit file (`systemctl cat`) or
/// `systemctl show`: it settles what the status block leaves open. A
/// one-shot job is done when it exits 0, and a forking daemon's parent
/// exits 0 by design (its child's fate is another story).
/// A file pasted without `systemctl cat`'s header names no unit: its
/// `Description=` ties it to the unit whose status block says the same.
fn declared_type(incident: &Incident, unit: &str) -> Option<(String, Span)> {
    let description = incident
        .units
        .get(unit)
        .and_then(|u| u.description.as_deref());
    incident
        .facts
        .unit_properties
        .iter()
        .filter(|p| match &p.unit {
            Some(u) => u == unit,
            None => description.is_some() && p.description.as_deref() == description,
        })
        .find_map(|p| p.properties.get("Type"))
        .map(|(v, span)| (v.trim().to_owned(), *span))
}

/// Cites the unit's `Type=` line, or says it is missing.
fn cite_type(f: &mut Finding, unit: &str, declared: Option<&(String, Span)>) {
    match declared {
        Some((t, span)) => {
            f.evidence(
                *span,
                format!("{unit} runs under Type={t}: systemd takes its first process's exit for the end of the service"),
            );
            f.condition(format!("the unit's Type= is known: Type={t}"), true);
        }
        None => {
            f.condition("the unit's Type= is known (missing: systemctl cat)", false);
        }
    }
}

/// `2.102 s`, `45 s`: as systemctl printed it.
fn format_secs(secs: f64) -> String {
    format!("{secs} s")
}

impl UnitExitedZeroNoRestart {
    fn journal_findings(&self, incident: &Incident, out: &mut Vec<Finding>) {
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

/// The same failure told by `systemctl show` alone: the main process exited
/// (`ExecMainCode=1`) with status 0, the unit is dead and was never
/// restarted. Partial evidence: the finding names what is missing.
fn from_properties(incident: &Incident, p: &UnitProperties) -> Option<Finding> {
    if !dead_after_clean_exit(p) {
        return None;
    }
    let name = p.unit.clone();
    let label = name.clone().unwrap_or_else(|| "the unit".to_owned());
    let arg = name.clone().unwrap_or_else(|| "UNIT".to_owned());
    // A stop someone asked for also ends with status 0 when the server
    // handles SIGTERM: the journal tells them apart.
    if name
        .as_deref()
        .is_some_and(|u| stopped_on_request(incident, u))
    {
        return None;
    }
    let mut f = Finding::new(META.id, META.category, META.severity);
    if let Some(u) = &name {
        f.entities.units.insert(u.clone());
    }
    cite_properties(&mut f, p);
    f.condition("the main process exited by itself with status 0", true);
    f.condition(
        "the unit is dead and systemd did not restart it",
        p.n_restarts == Some(0),
    );
    f.condition(
        "the restart policy is known (Restart=)",
        p.restart.is_some(),
    );
    f.condition("the unit is named (Id=)", name.is_some());
    f.condition("the journal shows why the server ended", false);
    f.title = format!("{label} exited with status 0 and was not restarted");
    f.headline = format!(
        "{} exited with status 0 (ExecMainStatus=0) and systemd never restarted it (NRestarts=0): with Restart=on-failure a clean exit hides a crash, so the service stays down.",
        crate::rules::support::capitalise(&label)
    );
    f.chain
        .push(format!("{label} is down and systemd did not restart it"));
    f.chain.push(
        "its main process exited with status 0, which Restart=on-failure treats as an intended stop"
            .to_owned(),
    );
    let mut missing = Vec::new();
    if name.is_none() {
        missing.push("the unit's name (no Id= in the properties)");
    }
    missing.push("the unit's journal (what the server logged before it exited)");
    if p.restart.is_none() {
        missing.push("its Restart= setting");
    }
    f.explanation = format!(
        "systemd restarts only failures; an exit status of 0 tells it the service ended on purpose. A server whose engine died but which shut down cleanly (vLLM after EngineDeadError, a wrapper script without `exec`) looks exactly like this. Only the properties are in the inputs: missing are {}.",
        missing.join(", ")
    );
    f.actions.push(Action::advice(
        format!(
            "read what {label} logged before it exited (an engine or worker death, a traceback)"
        ),
        Some(&format!("journalctl -u {arg} -n 200 --no-pager")),
    ));
    f.actions.push(Action::advice(
        format!("check {label}'s restart policy"),
        Some(&format!(
            "systemctl show {arg} -p Restart -p Id -p ExecStart"
        )),
    ));
    f.actions.push(Action::advice(
        "make the failure reach systemd: exec the server from the wrapper and exit non-zero when the engine dies, or use Restart=always with RestartSec=10s and a health check",
        None,
    ));
    f.confidence = confidence(&f, 0.4, 0.75);
    Some(f)
}

/// Whether the properties show a main process that exited by itself
/// (`ExecMainCode=1`) with status 0 and a unit left dead, with no restart to
/// come. Not if: restarting is on for clean exits too, or off altogether (a
/// unit with Restart=no that ended with status 0 and Result=success ended
/// as configured: no restart was ever to come), the unit is a one-shot job
/// (exiting is its purpose), or systemd did restart it.
fn dead_after_clean_exit(p: &UnitProperties) -> bool {
    let prop = |k: &str| p.properties.get(k).map(|(v, _)| v.trim());
    if p.exec_main_code != Some(1) || p.exec_main_status != Some(0) {
        return false;
    }
    if !matches!(p.active_state.as_deref(), Some("inactive" | "failed")) {
        return false;
    }
    if p.sub_state
        .as_deref()
        .is_some_and(|s| s != "dead" && s != "failed")
    {
        return false;
    }
    if matches!(p.restart.as_deref(), Some("always" | "on-success" | "no")) {
        return false;
    }
    !(matches!(prop("Type"), Some("oneshot")) || p.n_restarts.is_some_and(|n| n > 0))
}

/// Cites the properties that tell the story: the exit, the state, the
/// restarts, the main PID and the restart policy, those that are there.
fn cite_properties(f: &mut Finding, p: &UnitProperties) {
    let cite = |f: &mut Finding, key: &str, note: &str| {
        if let Some(span) = p.span_of(key) {
            f.evidence(span, note.to_owned());
        }
    };
    cite(f, "ExecMainStatus", "the main process exited with status 0");
    cite(
        f,
        "ExecMainCode",
        "ExecMainCode=1: it exited by itself (not killed by a signal)",
    );
    cite(f, "ActiveState", "the unit is not running");
    cite(
        f,
        "SubState",
        "dead: nothing is scheduled to start it again",
    );
    cite(f, "NRestarts", "systemd never restarted it");
    cite(f, "MainPID", "no main process");
    cite(f, "Restart", "the restart policy");
}

/// The two commands that settle how a unit starts its program and what it
/// said when it did: both ways this rule reaches a unit (a status block, a
/// journal's Started→Deactivated) advise them.
fn confirm(f: &mut Finding, unit: &str, how: &str) {
    f.actions.push(Action::advice(
        how,
        Some(&format!(
            "systemctl cat {unit}; systemctl show -p Type -p PIDFile -p ExecStart -p Restart {unit}"
        )),
    ));
    f.actions.push(Action::advice(
        format!("read what {unit} logged when it started"),
        Some(&format!("journalctl -b -u {unit} --no-pager")),
    ));
}

#[cfg(test)]
mod tests;
