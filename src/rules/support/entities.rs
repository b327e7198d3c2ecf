//! A finding's entities from its evidence: every PID, GPU, unit and Xid
//! that a cited line states as a fact (a GPU process row, a `ps` row, a
//! kernel line, a journal line's writer and unit, a server line's writer, a
//! systemd message about a unit, a `systemctl status`/`show` block), so that
//! no rule has to list them by hand and none forgets one.
//!
//! One exception keeps the holder findings exact: where the category says
//! that one process holds what another needs (GPU memory, a port), the
//! rule's own PIDs are the holders, and the writer of a cited line (the
//! victim reporting its failure) is not added as one more; its unit is.

use std::collections::BTreeSet;

use crate::correlate::{Incident, UnitEventKind};
use crate::model::{KernelEventKind, ServerEventKind, Uvicorn};
use crate::rules::{Category, Finding};
use crate::source::Span;

/// Adds to `f.entities` the PIDs (and their GPUs) of the process rows its
/// evidence cites. GPU rows cited for contrast (an idle GPU of the group)
/// add nothing: a GPU is the finding's only through a process on it or the
/// rule's own say.
pub fn from_evidence(incident: &Incident, f: &mut Finding) {
    let cited: BTreeSet<Span> = f.evidence.iter().map(|e| e.span).collect();
    if cited.is_empty() {
        return;
    }
    for p in &incident.gpu_processes {
        if p.spans.iter().any(|s| cited.contains(s)) {
            f.entities.pids.insert(p.pid);
            if let Some(g) = p.gpu {
                f.entities.gpus.insert(g);
            }
        }
    }
    for r in &incident.facts.ps {
        if cited.contains(&r.span) {
            f.entities.pids.insert(r.pid);
        }
    }
    for e in &incident.facts.kernel_events {
        if !cited.contains(&e.span) {
            continue;
        }
        match &e.kind {
            KernelEventKind::Xid(x) => {
                f.entities.xid.insert(x.code);
                f.entities.pids.extend(x.pid);
                name_bus(incident, f, x.bus_id.as_deref());
            }
            KernelEventKind::FellOffBus { bus_id } => name_bus(incident, f, bus_id.as_deref()),
            _ => {}
        }
    }
    gpu_xids(incident, f);
    let writers = !names_holders(f.category);
    // PID 1 is systemd speaking about a unit, never the unit's process.
    let pid = |p: Option<u32>| p.filter(|p| *p > 1);
    for j in &incident.facts.journal {
        if cited.contains(&j.span) {
            if writers {
                f.entities.pids.extend(pid(j.pid));
            }
            f.entities.units.extend(j.unit.clone());
        }
    }
    for e in &incident.facts.server_events {
        if !cited.contains(&e.span) {
            continue;
        }
        if writers {
            f.entities.pids.extend(pid(e.pid));
            f.entities.pids.extend(pid(named_pid(&e.kind)));
        }
        f.entities.units.extend(e.unit.clone());
    }
    for (span, unit) in &incident.unit_lines {
        if cited.contains(span) {
            f.entities.units.insert(unit.clone());
        }
    }
    for (name, u) in &incident.units {
        for e in u.events.iter().filter(|e| cited.contains(&e.span)) {
            f.entities.units.insert(name.clone());
            if let UnitEventKind::RemainsRunning { pid: p }
            | UnitEventKind::LeftOverProcess { pid: p }
            | UnitEventKind::KillingProcess { pid: p } = e.kind
            {
                f.entities.pids.extend(pid(Some(p)));
            }
        }
    }
    for s in &incident.facts.unit_statuses {
        let spans = [Some(s.span), s.active_span, s.main_pid_span];
        let members = s.cgroup.iter().map(|m| m.span);
        if spans
            .into_iter()
            .flatten()
            .chain(members)
            .any(|x| cited.contains(&x))
        {
            f.entities.units.insert(s.unit.clone());
            if writers && s.main_pid_span.is_some_and(|x| cited.contains(&x)) {
                f.entities.pids.extend(pid(s.main_pid));
            }
        }
    }
    for p in &incident.facts.unit_properties {
        let cites = |key: &str| {
            p.properties
                .get(key)
                .is_some_and(|(_, s)| cited.contains(s))
        };
        if !p.properties.values().any(|(_, s)| cited.contains(s)) {
            continue;
        }
        f.entities.units.extend(p.unit.clone());
        if writers && cites("MainPID") {
            f.entities.pids.extend(pid(p.main_pid));
        }
        if writers && cites("ExecMainPID") {
            f.entities.pids.extend(pid(p.exec_main_pid));
        }
    }
}

/// An Xid finding is about its GPU's Xid record: every code the kernel
/// reported for the GPUs it names (by index or bus id), and the PIDs those
/// lines name, even on the lines it does not cite (the Xid 109 after the
/// cited Xid 13s, the Xid 62 between an Xid 31 and the flood of 45s).
fn gpu_xids(incident: &Incident, f: &mut Finding) {
    if !matches!(
        f.category,
        Category::XidOther | Category::XidEcc | Category::XidGpuFellOffBus
    ) {
        return;
    }
    let buses: BTreeSet<_> = f
        .entities
        .gpu_bus_ids
        .iter()
        .filter_map(|b| crate::correlate::bus_key(b))
        .collect();
    let mut codes = BTreeSet::new();
    let mut pids = BTreeSet::new();
    for (_, x) in incident.xids() {
        let Some(bus) = x.bus_id.as_deref() else {
            continue;
        };
        let on_index = incident
            .gpu_by_bus_id(bus)
            .is_some_and(|g| f.entities.gpus.contains(&g.index));
        let on_bus = crate::correlate::bus_key(bus).is_some_and(|k| buses.contains(&k));
        if on_index || on_bus {
            codes.insert(x.code);
            pids.extend(x.pid);
        }
    }
    f.entities.xid.extend(codes);
    f.entities.pids.extend(pids);
}

/// Categories whose PIDs are the holders of what the failed server needed:
/// there the rule names them, and a cited line's writer is the victim.
fn names_holders(c: Category) -> bool {
    matches!(
        c,
        Category::GpuMemoryHeldByOtherProcess
            | Category::StaleServingInstance
            | Category::PortInUse
    )
}

/// A PID a server line names as its subject rather than its writer: the
/// API server of uvicorn's `Started`/`Finished server process [N]`, the job
/// a shell reports `Killed`.
pub(crate) fn named_pid(kind: &ServerEventKind) -> Option<u32> {
    match kind {
        ServerEventKind::Uvicorn(
            Uvicorn::StartedProcess { pid } | Uvicorn::FinishedProcess { pid },
        )
        | ServerEventKind::ShellJobSignaled { pid, .. } => Some(*pid),
        _ => None,
    }
}

/// A GPU a kernel line names by bus id: its index when the captures know
/// it, else the bus id as the kernel prints it — but only for a finding
/// that names no GPU by index yet: a rule that did has placed the bus
/// itself (a GPU that fell off the bus is missing from a later nvidia-smi,
/// and the rule knows it by its UUID or rank), and the same GPU must not
/// be listed twice.
fn name_bus(incident: &Incident, f: &mut Finding, bus: Option<&str>) {
    let Some(bus) = bus else { return };
    match incident.gpu_by_bus_id(bus) {
        Some(g) => {
            f.entities.gpus.insert(g.index);
        }
        None if f.entities.gpus.is_empty() => {
            if let Some(b) = crate::model::BusId::parse(bus).map(|b| b.kernel()) {
                f.entities.gpu_bus_ids.insert(b);
            }
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{Category, Severity};
    use crate::source::{Source, SourceMap};

    #[test]
    fn cited_process_rows_name_their_pid_and_gpu_and_nothing_else_does() {
        let mut sources = SourceMap::default();
        sources.add(Source::new(
            "paste",
            b"index, uuid, name, memory.used [MiB], memory.total [MiB]\n\
              3, GPU-bb3cdc90-8130-ed6c-9db3-d58a6f1c1ee5, NVIDIA H100 80GB HBM3, 61392 MiB, 81559 MiB\n\
              \n\
              gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n\
              GPU-bb3cdc90-8130-ed6c-9db3-d58a6f1c1ee5, 48213, sglang::scheduler_TP3, 61378 MiB\n",
        ));
        let a = crate::analyze(sources);
        let row = a.incident.gpu_processes[0].spans[0];
        let gpu_row = a.incident.gpus[0].spans[0];
        let mut f = Finding::new("test", Category::Unknown, Severity::Info);
        f.evidence(gpu_row, "a GPU row for contrast");
        from_evidence(&a.incident, &mut f);
        assert!(f.entities.pids.is_empty() && f.entities.gpus.is_empty());
        f.evidence(row, "the holder");
        from_evidence(&a.incident, &mut f);
        assert_eq!(
            f.entities.pids.iter().copied().collect::<Vec<_>>(),
            vec![48213]
        );
        assert_eq!(f.entities.gpus.iter().copied().collect::<Vec<_>>(), vec![3]);
    }

    #[test]
    fn cited_journal_lines_name_their_writer_and_unit_but_not_a_holders_victim() {
        let mut sources = SourceMap::default();
        sources.add(Source::new(
            "journal",
            b"Nov 27 09:38:52 ct200 python3[31544]: [2026-11-27 09:38:52] Received sigquit from a child process. It usually means the child failed.\n\
              Nov 27 09:38:53 ct200 systemd[1]: sglang-k26.service: Main process exited, code=killed, status=9/KILL\n\
              Nov 27 09:38:53 ct200 systemd[1]: sglang-k26.service: Consumed 1min 3.201s CPU time.\n",
        ));
        let a = crate::analyze(sources);
        let spans: Vec<Span> = a.incident.facts.journal.iter().map(|j| j.span).collect();
        assert_eq!(spans.len(), 3);
        let mut f = Finding::new("test", Category::Unknown, Severity::Info);
        for s in &spans {
            f.evidence(*s, "a line");
        }
        from_evidence(&a.incident, &mut f);
        assert_eq!(
            f.entities.pids.iter().copied().collect::<Vec<_>>(),
            vec![31544]
        );
        assert_eq!(
            f.entities
                .units
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            vec!["sglang-k26.service"]
        );
        // A line PID 1 wrote about a unit, in no event `correlate` knows,
        // still names the unit.
        let mut only = Finding::new("test", Category::Unknown, Severity::Info);
        only.evidence(spans[2], "an unknown unit message");
        from_evidence(&a.incident, &mut only);
        assert!(only.entities.units.contains("sglang-k26.service"));
        assert!(
            only.entities.pids.is_empty(),
            "PID 1 is not the unit's process"
        );
        // In a holder finding the writer is the victim, not a holder.
        let mut held = Finding::new(
            "test",
            Category::GpuMemoryHeldByOtherProcess,
            Severity::Error,
        );
        held.evidence(spans[0], "the victim's report");
        from_evidence(&a.incident, &mut held);
        assert!(held.entities.pids.is_empty(), "{:?}", held.entities);
    }

    #[test]
    fn an_xid_finding_lists_every_xid_of_its_gpu() {
        let mut sources = SourceMap::default();
        sources.add(Source::new(
            "dmesg",
            b"[14328.198504] NVRM: Xid (PCI:0000:0a:00): 31, pid=13332, name=cuda_plot_k32_v, Ch 00000010, intr 00000000. MMU Fault: ENGINE CE2 HUBCLIENT_CE0 faulted @ 0x7f29_5b8c9000. Fault is of type FAULT_PRIV_VIOLATION\n\
              [14370.687545] NVRM: Xid (PCI:0000:0a:00): 62, pid='<unknown>', name=<unknown>, 2023b230 20238a3a 2023e8b6 2023eac4\n\
              [14372.202098] NVRM: Xid (PCI:0000:0b:00): 43, pid=777, name=python3, Ch 00000009\n",
        ));
        let a = crate::analyze(sources);
        let first = a.incident.xids().next().expect("an Xid").0.span;
        let mut f = Finding::new("test", Category::XidOther, Severity::Error);
        f.evidence(first, "the Xid 31");
        from_evidence(&a.incident, &mut f);
        assert_eq!(
            f.entities.xid.iter().copied().collect::<Vec<_>>(),
            vec![31, 62]
        );
        assert_eq!(
            f.entities.pids.iter().copied().collect::<Vec<_>>(),
            vec![13332]
        );
        // Other categories list only the codes they cite.
        let mut g = Finding::new("test", Category::Unknown, Severity::Error);
        g.evidence(first, "the Xid 31");
        from_evidence(&a.incident, &mut g);
        assert_eq!(g.entities.xid.iter().copied().collect::<Vec<_>>(), vec![31]);
    }

    #[test]
    fn a_cited_xid_line_names_its_code_pid_and_bus() {
        let mut sources = SourceMap::default();
        sources.add(Source::new(
            "dmesg",
            b"[Wed Feb 19 10:02:11 2025] NVRM: Xid (PCI:0000:cb:00): 13, pid=1797828, name=python3, Graphics Exception\n",
        ));
        let a = crate::analyze(sources);
        let (e, _) = a.incident.xids().next().expect("an Xid");
        let mut f = Finding::new("test", Category::Unknown, Severity::Info);
        f.evidence(e.span, "the Xid");
        from_evidence(&a.incident, &mut f);
        assert_eq!(f.entities.xid.iter().copied().collect::<Vec<_>>(), vec![13]);
        assert!(f.entities.pids.contains(&1797828));
        assert!(
            f.entities.gpu_bus_ids.contains("0000:cb:00"),
            "{:?}",
            f.entities
        );
    }
}
