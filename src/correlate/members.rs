//! Every PID the inputs tie to a unit, weak ties included: what a report
//! lists as the unit's processes (a finding's entities, the inventory), never
//! what an action rests on ([`super::owners`] is that: one unit per PID,
//! the strongest tie, with its basis).
//!
//! A PID is a unit's when `systemctl status` shows it (`Main PID:`,
//! `Process:` lines, the CGroup tree, the writers of the journal lines it
//! prints under the block), `systemctl show` does (`MainPID=`,
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
        for e in status_tail(facts, s) {
            add(&s.unit, e.pid);
        }
    }
    for p in &facts.unit_properties {
        if let Some(unit) = &p.unit {
            add(unit, p.main_pid);
            add(unit, p.exec_main_pid);
        }
    }
    let by_ident = by_identifier(units.keys().chain(unit_lines.values()));
    for e in &facts.journal {
        if e.is_manager() || e.is_kernel() {
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

/// The units of `names` by the identifier their own lines carry: the
/// unit's name without the suffix, and for snapd's units
/// (`snap.<snap>.<app>.service`) the `<snap>.<app>` that snapd sets as
/// their identifier. The first unit of a name wins.
fn by_identifier<'a>(names: impl Iterator<Item = &'a String>) -> BTreeMap<&'a str, &'a str> {
    let mut by_ident: BTreeMap<&str, &str> = BTreeMap::new();
    for unit in names {
        if let Some(stem) = unit.strip_suffix(".service") {
            by_ident.entry(stem).or_insert(unit);
            if let Some(app) = stem.strip_prefix("snap.") {
                by_ident.entry(app).or_insert(unit);
            }
        }
    }
    by_ident
}

impl super::Incident {
    /// The unit a journal line was written for: the one the journal
    /// records (`_SYSTEMD_UNIT`), else the unit of the inputs whose name
    /// the writer logs under (`ollama[2521]:` for `ollama.service`,
    /// `gemma3.server[391350]:` for `snap.gemma3.server.service`), else the
    /// unit the inputs tie the writer's PID to (`Incident::unit_pids`: a
    /// `Process:` line, the lines `systemctl status` printed under its
    /// block), else, where the inputs tie it to none, the one its installer
    /// creates (`programs::INSTALLED_UNITS`: `ollama[27605]:` is
    /// `ollama.service`'s). None for the manager's and the kernel's lines.
    pub fn writer_unit(&self, e: &crate::model::JournalEntry) -> Option<String> {
        if let Some(unit) = &e.unit {
            return Some(unit.clone());
        }
        if e.speaks_for_others() || e.is_kernel() {
            return None;
        }
        let by_ident = by_identifier(self.units.keys().chain(self.unit_lines.values()));
        if let Some(unit) = by_ident.get(e.identifier.as_str()) {
            return Some((*unit).to_owned());
        }
        let pid = e.pid.filter(|p| *p > 1);
        if let Some((unit, _)) =
            pid.and_then(|p| self.unit_pids.iter().find(|(_, ps)| ps.contains(&p)))
        {
            return Some(unit.clone());
        }
        super::programs::installed_unit(&e.identifier).map(|u| u.unit.to_owned())
    }
}

/// How many lines after a `systemctl status` block its journal tail may
/// take: systemctl prints the unit's last 10 (`--lines=10`, its default)
/// after a blank line, and a notice may stand among them.
const TAIL_LINES: u32 = 12;

/// The writers of the journal lines `systemctl status` printed under its
/// block: the unit's last lines (`_SYSTEMD_UNIT=` of it), written by its
/// processes whatever name they log under (`nvidia-smi[1407]:` under
/// `nvidia-persistenced.service`, run by its `ExecStartPost=`). A writer
/// counts when its first line in the input stands in the block's tail:
/// the lines right after it, up to systemctl's ten and before the next
/// block or typed command (the first line of each PID is read with the
/// prefilter on too, so the answer is the same either way). The manager's
/// lines about the unit (`systemd[1]:`, a user manager's `systemd[1315]:`)
/// and the kernel's are no process of it.
fn status_tail<'a>(
    facts: &'a Facts,
    s: &crate::model::UnitStatus,
) -> impl Iterator<Item = &'a crate::model::JournalEntry> {
    let end = s.end;
    let source = end.map(|e| e.source);
    let after =
        move |span: Span| end.is_some_and(|e| span.source == e.source && span.line > e.line);
    let stops = facts
        .unit_statuses
        .iter()
        .map(|o| o.span)
        .chain(facts.typed_commands.iter().map(|c| c.span))
        .filter(|sp| after(*sp))
        .map(|sp| sp.line);
    let last = end.map_or(0, |e| e.line.saturating_add(TAIL_LINES));
    let last = stops.fold(last, |l, stop| l.min(stop.saturating_sub(1)));
    let mut first: BTreeMap<u32, &crate::model::JournalEntry> = BTreeMap::new();
    for e in facts
        .journal
        .iter()
        .filter(|e| Some(e.span.source) == source)
    {
        if let Some(pid) = e.pid {
            let at = first.entry(pid).or_insert(e);
            if e.span.line < at.span.line {
                *at = e;
            }
        }
    }
    first.into_values().filter(move |e| {
        after(e.span) && e.span.line <= last && !e.speaks_for_others() && !e.is_kernel()
    })
}
