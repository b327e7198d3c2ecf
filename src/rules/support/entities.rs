//! A finding's entities from its evidence: every PID, GPU and Xid that a
//! cited line states as a fact (a GPU process row, a `ps` row, a kernel Xid
//! line), so that no rule has to list them by hand and none forgets one.

use std::collections::BTreeSet;

use crate::correlate::Incident;
use crate::model::KernelEventKind;
use crate::rules::Finding;
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
            if let Some(b) = crate::rules::xid::kernel_bus(bus) {
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
