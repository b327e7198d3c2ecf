//! Every PID the inputs tie to a unit, weak ties included: what a report
//! lists as the unit's processes (a finding's entities, the inventory), never
//! what an action rests on ([`super::owners`] is that: one unit per PID,
//! the strongest tie, with its basis).
//!
//! A PID is a unit's when `systemctl status` shows it (`Main PID:`,
//! `Process:` lines, the CGroup tree), `systemctl show` does (`MainPID=`,
//! `ExecMainPID=`), the journal says so (`_SYSTEMD_UNIT`), systemd names it in
//! a message about the unit (`Killing process N`), it is systemd's forked
//! child before `exec` (`systemd[17836]: ollama.service: Failed to execute
//! …`: the child logs as `systemd` under its own PID, with the unit's name in
//! front), it writes under the unit's name (`ollama[2521]:` for
//! `ollama.service`, `gemma3.server[391350]:` for snapd's
//! `snap.gemma3.server.service`: a unit's lines carry its executable's name
//! or the `SyslogIdentifier=` its unit sets), or the owners' inference from
//! journal order put it there. PID 1 is never a unit's: it is the manager.

use std::collections::{BTreeMap, BTreeSet};

use super::{Ownership, UnitFacts};
use crate::model::Facts;
use crate::source::Span;

/// PIDs by unit name.
pub fn collect(
    facts: &Facts,
    units: &BTreeMap<String, UnitFacts>,
    unit_lines: &BTreeMap<Span, String>,
    owners: &BTreeMap<u32, Ownership>,
) -> BTreeMap<String, BTreeSet<u32>> {
    let mut out: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut add = |unit: &str, pid: Option<u32>| {
        if let Some(pid) = pid.filter(|p| *p > 1) {
            out.entry(unit.to_owned()).or_default().insert(pid);
        }
    };
    for (pid, o) in owners {
        add(&o.unit, Some(*pid));
    }
    for s in &facts.unit_statuses {
        add(&s.unit, s.main_pid);
        for p in &s.processes {
            add(&s.unit, Some(p.pid));
        }
        for m in &s.cgroup {
            add(&s.unit, Some(m.pid));
        }
    }
    for p in &facts.unit_properties {
        if let Some(unit) = &p.unit {
            add(unit, p.main_pid);
            add(unit, p.exec_main_pid);
        }
    }
    // The names a unit's own lines carry: its name without the suffix, and
    // for snapd's units (`snap.<snap>.<app>.service`) the `<snap>.<app>`
    // that snapd sets as their identifier.
    let mut by_ident: BTreeMap<&str, &str> = BTreeMap::new();
    for unit in units.keys().chain(unit_lines.values()) {
        if let Some(stem) = unit.strip_suffix(".service") {
            by_ident.entry(stem).or_insert(unit);
            if let Some(app) = stem.strip_prefix("snap.") {
                by_ident.entry(app).or_insert(unit);
            }
        }
    }
    for e in &facts.journal {
        if e.is_pid1() || e.is_kernel() {
            continue;
        }
        if let Some(unit) = &e.unit {
            add(unit, e.pid);
        } else if e.identifier == "systemd" {
            // systemd's forked child, before it runs the unit's command: only
            // the child prints these (`systemd[17836]: ollama.service: Failed
            // to execute /usr/local/bin/ollama: Permission denied`, then
            // `Failed at step EXEC spawning …`, ollama/ollama#8372); a user
            // manager's own lines (`systemd[1500]: x.service: …`) are not
            // its units' PIDs.
            if let Some((unit, rest)) = super::units::unit_prefix(&e.message) {
                let child = ["Failed to execute ", "Failed at step "];
                if child.iter().any(|c| rest.starts_with(c)) {
                    add(unit, e.pid);
                }
            }
        } else if let Some(unit) = by_ident.get(e.identifier.as_str()) {
            add(unit, e.pid);
        }
    }
    for (ident, pid, _) in &facts.frame_writers {
        if let Some(unit) = by_ident.get(ident.as_str()) {
            add(unit, Some(*pid));
        }
    }
    for (name, u) in units {
        for ev in &u.events {
            if let super::UnitEventKind::RemainsRunning { pid }
            | super::UnitEventKind::LeftOverProcess { pid }
            | super::UnitEventKind::KillingProcess { pid } = ev.kind
            {
                add(name, Some(pid));
            }
        }
    }
    out
}
