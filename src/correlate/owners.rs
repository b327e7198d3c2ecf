//! PID → systemd unit, from the strongest evidence available.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{UnitEventKind, UnitFacts};
use crate::model::{CgroupOwner, Facts};
use crate::source::Span;

/// How a PID was tied to a unit, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OwnerBasis {
    /// Listed under the unit's `CGroup:` tree in `systemctl status`.
    CgroupTree,
    /// `/proc/PID/cgroup` names the unit's cgroup.
    ProcCgroup,
    /// The unit's `Main PID:` in `systemctl status`.
    MainPid,
    /// The unit's `MainPID=` in `systemctl show`.
    ShowMainPid,
    /// The journal's `_SYSTEMD_UNIT` field of a line the PID wrote.
    JournalField,
    /// PID 1 named the PID in a message about the unit
    /// (`Killing process N`, `Unit process N remains running`).
    SystemdMessage,
    /// Plain `-o short` output: the PID first wrote right after PID 1 logged
    /// `Started UNIT`. A guess, and reported as one.
    InferredFromJournalOrder,
}

impl OwnerBasis {
    pub fn describe(self) -> &'static str {
        match self {
            OwnerBasis::CgroupTree => "listed in the unit's CGroup tree (systemctl status)",
            OwnerBasis::ProcCgroup => "its /proc/PID/cgroup is the unit's cgroup",
            OwnerBasis::MainPid => "the unit's Main PID (systemctl status)",
            OwnerBasis::ShowMainPid => "the unit's MainPID= (systemctl show)",
            OwnerBasis::JournalField => "_SYSTEMD_UNIT of its journal entries",
            OwnerBasis::SystemdMessage => "named by systemd in a message about the unit",
            OwnerBasis::InferredFromJournalOrder => {
                "inferred: it first logged right after systemd started the unit"
            }
        }
    }

    /// How much a conclusion resting on this link can be trusted.
    pub fn confidence(self) -> f64 {
        match self {
            OwnerBasis::CgroupTree
            | OwnerBasis::ProcCgroup
            | OwnerBasis::MainPid
            | OwnerBasis::ShowMainPid
            | OwnerBasis::JournalField => 1.0,
            OwnerBasis::SystemdMessage => 0.9,
            OwnerBasis::InferredFromJournalOrder => 0.7,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Ownership {
    pub unit: String,
    pub basis: OwnerBasis,
    /// The line that ties the PID to the unit.
    pub span: Span,
    /// For inferred links: the `Started UNIT` line the inference rests on.
    pub via: Option<Span>,
}

pub fn attribute(facts: &Facts, units: &BTreeMap<String, UnitFacts>) -> BTreeMap<u32, Ownership> {
    let mut owners: BTreeMap<u32, Ownership> = BTreeMap::new();
    let mut offer = |pid: u32, o: Ownership| {
        if pid <= 1 {
            return;
        }
        match owners.get(&pid) {
            Some(existing) if existing.basis <= o.basis => {}
            _ => {
                owners.insert(pid, o);
            }
        }
    };
    let own = |unit: &str, basis, span| Ownership {
        unit: unit.to_owned(),
        basis,
        span,
        via: None,
    };

    for s in &facts.unit_statuses {
        for m in &s.cgroup {
            offer(m.pid, own(&s.unit, OwnerBasis::CgroupTree, m.span));
        }
        if let (Some(pid), Some(span)) = (s.main_pid, s.main_pid_span) {
            offer(pid, own(&s.unit, OwnerBasis::MainPid, span));
        }
    }
    for c in &facts.proc_cgroups {
        // Only services: a session, a container or a pod is not a unit
        // that `systemctl` should act on.
        if let (Some(pid), CgroupOwner::SystemUnit(unit)) = (c.pid, &c.owner) {
            if unit.ends_with(".service") {
                offer(pid, own(unit, OwnerBasis::ProcCgroup, c.span));
            }
        }
    }
    for p in &facts.unit_properties {
        if let (Some(unit), Some(pid)) = (&p.unit, p.main_pid) {
            let span = p.span_of("MainPID").unwrap_or(p.span);
            offer(pid, own(unit, OwnerBasis::ShowMainPid, span));
        }
    }
    for e in facts.journal.iter().filter(|e| !e.is_manager()) {
        if let (Some(pid), Some(unit)) = (e.pid, &e.unit) {
            offer(pid, own(unit, OwnerBasis::JournalField, e.span));
        }
    }
    for (unit, u) in units {
        for ev in &u.events {
            if let UnitEventKind::RemainsRunning { pid }
            | UnitEventKind::LeftOverProcess { pid }
            | UnitEventKind::KillingProcess { pid } = ev.kind
            {
                offer(pid, own(unit, OwnerBasis::SystemdMessage, ev.span));
            }
        }
    }

    // Inference over plain journal output: attribute each PID, at its first
    // line, to the unit PID 1 most recently started.
    let started: HashMap<Span, &str> = units
        .iter()
        .flat_map(|(name, u)| {
            u.events
                .iter()
                .filter(|e| matches!(e.kind, UnitEventKind::Started | UnitEventKind::Starting))
                .map(move |e| (e.span, name.as_str()))
        })
        .collect();
    let mut last_started: Option<(&str, Span)> = None;
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    for e in &facts.journal {
        if e.is_manager() {
            if let Some(unit) = started.get(&e.span) {
                last_started = Some((unit, e.span));
            }
            continue;
        }
        let (Some(pid), None) = (e.pid, &e.unit) else {
            continue;
        };
        if e.identifier == "kernel" || !seen.insert(pid) {
            continue;
        }
        if let Some((unit, via)) = last_started {
            offer(
                pid,
                Ownership {
                    unit: unit.to_owned(),
                    basis: OwnerBasis::InferredFromJournalOrder,
                    span: e.span,
                    via: Some(via),
                },
            );
        }
    }
    owners
}
