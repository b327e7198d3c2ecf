//! A finding's entities from its evidence: every PID, GPU, unit and Xid
//! that a cited line states as a fact (a GPU process row, a `ps` row, a
//! kernel line, a journal line's writer and unit, a server line's writer, a
//! core dump's process and unit, a
//! systemd message about a unit, a `systemctl status`/`show` block), so that
//! no rule has to list them by hand and none forgets one.
//!
//! One exception keeps the holder findings exact: where the category says
//! that one process holds what another needs (GPU memory, a port), the
//! rule's own PIDs are the holders, and the writer of a cited line (the
//! victim reporting its failure) is not added as one more; its unit is.

use std::collections::BTreeSet;

use crate::correlate::{Incident, UnitEventKind};
use crate::model::{KernelEventKind, NcclDetail, NcclLine, ServerEventKind, Uvicorn, VllmFailure};
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
    // A core dump's block: its PID and unit, whichever of its lines is cited.
    for c in &incident.facts.core_dumps {
        let lines = [Some(c.span), c.signal_span, c.unit_span];
        if lines.into_iter().flatten().any(|s| cited.contains(&s)) {
            f.entities.pids.insert(c.pid);
            f.entities.units.extend(c.unit.clone());
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
        if let ServerEventKind::Nccl(n) = &e.kind {
            nccl_gpu(incident, f, n);
        }
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
        let processes = s.processes.iter().map(|p| p.span);
        if spans
            .into_iter()
            .flatten()
            .chain(members)
            .chain(processes)
            .any(|x| cited.contains(&x))
        {
            f.entities.units.insert(s.unit.clone());
            if writers && s.main_pid_span.is_some_and(|x| cited.contains(&x)) {
                f.entities.pids.extend(pid(s.main_pid));
            }
            if writers {
                let ran = s.processes.iter().filter(|p| cited.contains(&p.span));
                f.entities.pids.extend(ran.map(|p| p.pid));
            }
        }
    }
    // A prefixed server line no event was made of (vLLM's `(Worker_TP1
    // pid=15193) ERROR …`, Ray's `(RayWorkerVllm pid=5310) …`): the
    // writer its prefix names, recorded on the kept line.
    if writers {
        for m in &incident.facts.messages {
            if cited.contains(&m.span) {
                f.entities.pids.extend(pid(m.pid));
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
    if writers {
        unit_pids(incident, f);
    }
}

/// A finding about a unit is about its processes: every PID the inputs tie
/// to a unit it names (`Incident::unit_pids`: its Main PID, its `Process:`
/// lines, the PIDs its journal lines were written by, systemd's forked
/// child that failed to exec, the PIDs systemd killed or found left over).
/// Not in a holder finding: there `pids` are the holders, and the unit is
/// often the victim's.
fn unit_pids(incident: &Incident, f: &mut Finding) {
    for unit in &f.entities.units {
        if let Some(pids) = incident.unit_pids.get(unit) {
            f.entities.pids.extend(pids);
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
/// a shell reports `Killed`, the worker vLLM reports dead (`Worker
/// VllmWorkerProcess pid 82 died, exit code: -15`).
pub(crate) fn named_pid(kind: &ServerEventKind) -> Option<u32> {
    match kind {
        ServerEventKind::Uvicorn(
            Uvicorn::StartedProcess { pid } | Uvicorn::FinishedProcess { pid },
        )
        | ServerEventKind::ShellJobSignaled { pid, .. } => Some(*pid),
        ServerEventKind::VllmFailure(VllmFailure::WorkerDied { pid, .. }) => *pid,
        _ => None,
    }
}

/// The GPU a cited NCCL line names: by bus id where the captures know it
/// (a rank's `Init COMPLETE`, a channel before NCCL 2.12), else by the NVML
/// index a channel line gives after its rank (`2[6]`), else by the CUDA
/// ordinal in brackets, which is nvidia-smi's index unless
/// `CUDA_VISIBLE_DEVICES` renumbered the GPUs: a fact as the line prints it.
fn nccl_gpu(incident: &Incident, f: &mut Finding, n: &NcclLine) {
    let (bus, nvml) = match &n.detail {
        NcclDetail::CommInit { bus_id, .. } => (bus_id.as_deref(), None),
        NcclDetail::ShmChannel { nvml_dev, bus_id } => (bus_id.as_deref(), *nvml_dev),
        _ => (None, None),
    };
    let known = bus.and_then(|b| incident.gpu_by_bus_id(b)).map(|g| g.index);
    if let Some(index) = known.or(nvml).or(n.cuda_dev) {
        f.entities.gpus.insert(index);
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

    fn analysis(text: &str) -> crate::Analysis {
        let mut sources = SourceMap::default();
        sources.add(Source::new("paste", text.as_bytes()));
        crate::analyze(sources)
    }

    fn cite(a: &crate::Analysis, category: Category, lines: &[u32]) -> Finding {
        let mut f = Finding::new("test", category, Severity::Error);
        for &line in lines {
            let span = Span {
                source: crate::source::SourceId(0),
                line,
            };
            f.evidence(span, "a line");
        }
        from_evidence(&a.incident, &mut f);
        f
    }

    fn pids(f: &Finding) -> Vec<u32> {
        f.entities.pids.iter().copied().collect()
    }

    /// A prefixed worker line no event is made of still names its writer
    /// (fixtures/real/473, vllm-project/vllm: `(Worker_TP1 pid=15193)`), and
    /// so does Ray's prefix (fixtures/real/020).
    #[test]
    fn a_cited_prefixed_line_names_its_writer() {
        let a = analysis(
            "(Worker_TP1 pid=15193) ERROR 05-08 19:06:38 [multiproc_executor.py:962] Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n\
             (Worker_TP1 pid=15193) ERROR 05-08 19:06:38 [multiproc_executor.py:962] For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n",
        );
        assert_eq!(pids(&cite(&a, Category::Unknown, &[1])), [15193]);
        let a = analysis(
            " [36m(RayWorkerVllm pid=5310) [0m [W CUDAGraph.cpp:145] Warning: Waiting for pending NCCL work to finish before starting graph capture. (function operator()) [32m [repeated 6x across cluster] [0m\n",
        );
        assert_eq!(pids(&cite(&a, Category::Unknown, &[1])), [5310]);
        // An uncited line adds nothing.
        let a = analysis(
            "(Worker_TP1 pid=15193) ERROR 05-08 19:06:38 [multiproc_executor.py:962] Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n",
        );
        assert!(pids(&cite(&a, Category::Unknown, &[])).is_empty());
    }

    /// fixtures/real/444 (ollama/ollama#8372): PID 1's lines name the unit;
    /// the unit's PID is its forked child's, which failed to exec; PID 1 is
    /// never one.
    #[test]
    fn a_unit_finding_names_the_forked_child_and_not_pid_1() {
        let a = analysis(
            "1月 10 22:38:05 czj-Vector-GP76-12UGSO systemd[1]: ollama.service: Main process exited, code=exited, status=1/FAILURE\n\
             1月 10 22:38:05 czj-Vector-GP76-12UGSO systemd[1]: ollama.service: Failed with result 'exit-code'.\n\
             1月 10 22:38:08 czj-Vector-GP76-12UGSO systemd[1]: ollama.service: Scheduled restart job, restart counter is at 472.\n\
             1月 10 22:38:08 czj-Vector-GP76-12UGSO systemd[1]: Stopped Ollama Service.\n\
             1月 10 22:38:08 czj-Vector-GP76-12UGSO systemd[1]: Started Ollama Service.\n\
             1月 10 22:38:08 czj-Vector-GP76-12UGSO systemd[17836]: ollama.service: Failed to execute /usr/local/bin/ollama: Permission denied\n\
             1月 10 22:38:08 czj-Vector-GP76-12UGSO systemd[17836]: ollama.service: Failed at step EXEC spawning /usr/local/bin/ollama: Permission denied\n",
        );
        let f = cite(&a, Category::UnitCrashLoop, &[1, 3]);
        assert!(
            f.entities.units.contains("ollama.service"),
            "{:?}",
            f.entities
        );
        assert_eq!(pids(&f), [17836]);
        // In a holder finding the unit is often the victim's: its PIDs are
        // not added as holders.
        assert!(pids(&cite(&a, Category::StaleServingInstance, &[1])).is_empty());
    }

    /// fixtures/real/445 (old systemd, no bullet): the `Process:` lines and
    /// the Main PID are the unit's, cited or not, once a finding names it.
    #[test]
    fn a_unit_finding_names_the_pids_of_its_status_block() {
        let a = analysis(
            "nvidia-docker.service - NVIDIA Docker plugin\n\
             \x20  Loaded: loaded (/usr/lib/systemd/system/nvidia-docker.service; disabled; vendor preset: disabled)\n\
             \x20  Active: failed (Result: start-limit) since Thu 2021-03-18 20:35:04 CST; 9s ago\n\
             \x20    Docs: https://github.com/NVIDIA/nvidia-docker/wiki\n\
             \x20 Process: 82396 ExecStopPost=/bin/rm -f $SPEC_FILE (code=exited, status=0/SUCCESS)\n\
             \x20 Process: 82378 ExecStart=/usr/bin/nvidia-docker-plugin -s $SOCK_DIR (code=exited, status=1/FAILURE)\n\
             \x20Main PID: 82378 (code=exited, status=1/FAILURE)\n\
             \n\
             Mar 18 20:35:04 HikvisionOS systemd[1]: start request repeated too quickly for nvidia-docker.service\n",
        );
        let status = &a.incident.facts.unit_statuses[0];
        assert_eq!(
            status.processes.iter().map(|p| p.pid).collect::<Vec<_>>(),
            [82396, 82378]
        );
        let f = cite(&a, Category::UnitCrashLoop, &[9]);
        assert!(
            f.entities.units.contains("nvidia-docker.service"),
            "{:?}",
            f.entities
        );
        assert_eq!(pids(&f), [82378, 82396]);
        // A cited `Process:` line names its PID and unit by itself.
        let g = cite(&a, Category::Unknown, &[5]);
        assert!(g.entities.pids.contains(&82396));
        assert!(g.entities.units.contains("nvidia-docker.service"));
    }

    /// fixtures/real/449 (canonical/inference-snaps#214): `snap logs` names
    /// the writer `gemma3.server`, which is snapd's unit
    /// `snap.gemma3.server.service`; fixtures/real/452 (ollama/ollama#9322):
    /// `ollama[2521]` writes for `ollama.service`.
    #[test]
    fn a_unit_finding_names_the_pids_that_write_under_its_name() {
        let a = analysis(
            "$ sudo snap logs -f gemma3.server\n\
             2025-12-01T14:54:47Z gemma3.server[391350]: main: exiting due to model loading error\n\
             2025-12-01T14:54:47Z gemma3.server[391330]: Error: exit status 1\n\
             2025-12-01T14:54:47Z systemd[1]: snap.gemma3.server.service: Main process exited, code=exited, status=1/FAILURE\n\
             2025-12-01T14:54:47Z systemd[1]: snap.gemma3.server.service: Start request repeated too quickly.\n",
        );
        let f = cite(&a, Category::UnitCrashLoop, &[5]);
        assert_eq!(pids(&f), [391330, 391350], "{:?}", a.incident.unit_pids);
        let a = analysis(
            "Feb 24 15:36:32 adl ollama[2521]: time=2025-02-24T15:36:32.318-08:00 level=INFO source=memory.go:356 msg=\"offload to cuda\"\n\
             Feb 24 11:16:31 adl systemd[1]: ollama.service: A process of this unit has been killed by the OOM killer.\n\
             Feb 24 11:16:32 adl sshd[2600]: Accepted publickey for root\n",
        );
        let f = cite(&a, Category::HostOomKiller, &[2]);
        assert_eq!(
            pids(&f),
            [2521],
            "another program's writer is not the unit's"
        );
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
