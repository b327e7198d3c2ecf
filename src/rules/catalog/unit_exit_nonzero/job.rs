//! A unit whose job systemctl reports failed (`Job for X failed because
//! the control process exited with error code.`) where the inputs show no
//! exit of its processes: a shell's or Ansible's paste of `systemctl
//! start`'s answer alone. The failure is the unit's; why is in its
//! journal, which the finding asks for.

use std::sync::LazyLock;

use regex::Regex;

use super::*;

/// Ansible's task result for one host (`fatal: [ubuntu-xenial-01]:
/// FAILED! => {…}`, `failed: [host] => {…}`): the host it ran on.
static ANSIBLE_HOST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:fatal|failed): \[(?P<host>[^\]\s]+)\]").expect("ansible host regex")
});

/// The finding for `unit` when systemctl's answer that a job failed with
/// result `exit-code` is all the inputs say of the unit: not when PID 1's
/// lines, a status block or `systemctl show` tell more (the other rules
/// read them: a start limit, a crash loop).
pub(super) fn finding(incident: &Incident, unit: &str, facts: &UnitFacts) -> Option<Finding> {
    let failed = failure::Failed::of(incident, facts);
    let (first, result) = failed.job.clone()?;
    let running = facts
        .status
        .and_then(|i| incident.facts.unit_statuses.get(i))
        .is_some_and(|s| matches!(s.active_state.as_deref(), Some("active" | "reloading")));
    // Only systemctl's answer: any other account of the unit (PID 1's
    // lines, a status block, `systemctl show`) is the other rules' to read.
    let alone = facts
        .events
        .iter()
        .all(|e| matches!(e.kind, UnitEventKind::JobFailed { .. }));
    if !alone
        || facts.status.is_some()
        || facts.properties.is_some()
        || failed.limit_hit
        || result.as_deref() != Some("exit-code")
        || started_after(facts, first)
        || running
    {
        return None;
    }
    let mut f = Finding::new(META.id, Category::UnitCrashLoop, META.severity);
    f.entities.units.insert(unit.to_owned());
    let mut hosts: Vec<String> = Vec::new();
    for e in &facts.events {
        let UnitEventKind::JobFailed { result } = &e.kind else {
            continue;
        };
        if result.as_deref() != Some("exit-code") {
            continue;
        }
        let host = host_of(incident, e.span);
        let on = host
            .as_ref()
            .map(|h| format!(" on {h}"))
            .unwrap_or_default();
        f.evidence(
            e.span,
            format!("systemctl reports that {unit}'s job failed{on}: the control process exited with error code (result 'exit-code')"),
        );
        hosts.extend(host.filter(|h| !hosts.contains(h)));
    }
    f.occurrences = f.evidence.len() as u32;
    f.condition("systemctl reports that the unit's job failed", true);
    f.condition("the unit's own lines say why", false);
    let on = match hosts.len() {
        0 => String::new(),
        _ => format!(" on {}", hosts.join(", ")),
    };
    f.title = format!("{unit} failed to start{on} (result 'exit-code')");
    f.headline = format!(
        "{unit} failed to start{on}: systemctl reports that the control process exited with error code (result 'exit-code'). The inputs hold none of the unit's own lines: its journal says why."
    );
    f.chain.push(format!("{unit}'s start job failed{on}"));
    f.chain.push(
        "its start command (or, for a Type=forking daemon, the daemon's start-up) exited with a failure status"
            .to_owned(),
    );
    f.explanation = "systemctl's answer names only the unit's result; the reason is in the unit's own lines, which the inputs do not hold.".to_owned();
    f.actions.push(Action::advice(
        format!("read why {unit} failed: its status and its last lines{on}"),
        Some(&format!(
            "systemctl status {unit} --no-pager; journalctl -u {unit} -b -n 100 --no-pager"
        )),
    ));
    f.actions.push(Action::advice(
        format!("once the cause is fixed, clear the failed state and start {unit} again"),
        Some(&format!(
            "systemctl reset-failed {unit}; systemctl start {unit}"
        )),
    ));
    f.confidence = confidence(&f, 0.3, 0.5);
    Some(f)
}

/// The host an Ansible task result at `span` ran on.
fn host_of(incident: &Incident, span: Span) -> Option<String> {
    let m = incident.facts.messages.iter().find(|m| m.span == span)?;
    Some(ANSIBLE_HOST.captures(&m.text)?["host"].to_owned())
}
