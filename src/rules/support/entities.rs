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
use std::sync::LazyLock;

use regex::Regex;

use crate::catalogs::Hit;
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
                // The bus as the Xid line prints it (`0000:3b:00`).
                name_bus(incident, f, x.bus_id.as_deref());
            }
            KernelEventKind::FellOffBus { bus_id } => name_bus(incident, f, bus_id.as_deref()),
            _ => {}
        }
    }
    health_gpus(incident, f, &cited);
    let writers = !names_holders(f.category);
    captured(incident, f, &cited, writers);
    gpu_xids(incident, f);
    // PID 1 is systemd speaking about a unit, never the unit's process.
    let pid = |p: Option<u32>| p.filter(|p| *p > 1);
    for j in &incident.facts.journal {
        if cited.contains(&j.span) {
            if writers && !j.speaks_for_others() {
                f.entities.pids.extend(pid(j.pid));
            }
            f.entities.units.extend(incident.writer_unit(j));
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
            // NCCL's `host:pid:tid` header: the process that wrote it.
            if writers {
                f.entities.pids.extend(pid(Some(n.pid)));
            }
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

/// What a cited line's catalog row captures as a typed fact (docs in
/// CONTRIBUTING.md, "Add a message"): `pid` and `pids` (the processes a
/// line names: NCCL's `host:pid:tid` header, torch's `Process N has … in
/// use`, a harness's list of leftovers), `gpu` and `device` (a GPU by the
/// index or CUDA ordinal the line prints: `GPU 2`, `current device: 0`,
/// `CUDA0`), `unit`, `bus` and `xid`; for every finding that cites the line,
/// not only the row's own. A row with a `block` (upstream prints it with
/// the lines around it as one message: ggml's CUDA error) lends its facts
/// to a finding that cites any line of the block. In a holder finding a
/// line's PIDs are added only where the line's row is of the finding's own
/// category (the row then says the line names a holder); elsewhere they
/// are the victim's.
fn captured(incident: &Incident, f: &mut Finding, cited: &BTreeSet<Span>, writers: bool) {
    for k in &incident.known {
        let Some(m) = incident.facts.messages.get(k.message) else {
            continue;
        };
        let block = k.hit.row.and_then(|r| r.block);
        if !cites_block(cited, m.span, block) {
            continue;
        }
        let own_row = k.hit.row.is_some_and(|r| r.category == Some(f.category));
        from_hit(incident, f, &k.hit, writers || own_row);
        if let Some(subject) = k.hit.row.and_then(|r| r.subject.as_deref())
            && let Some((_, hit)) = incident
                .known(subject)
                .filter(|(s, _)| s.span.source == m.span.source && s.span < m.span)
                .last()
        {
            from_hit(incident, f, hit, true);
        }
    }
}

/// The facts one catalog hit's typed captures state (`captured`), its PIDs
/// only where `pids` says they are the finding's: `known-message` adds
/// those of every line of its row, cited or only counted.
pub fn from_hit(incident: &Incident, f: &mut Finding, hit: &Hit<'_>, pids: bool) {
    if pids {
        f.entities.pids.extend(hit.get("pid").and_then(number));
        let listed = hit.get("pids").unwrap_or_default();
        f.entities.pids.extend(
            listed
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(number),
        );
    }
    for name in ["gpu", "device"] {
        if let Some(named) = hit.get(name) {
            gpu_ref(incident, f, named);
        }
    }
    if let Some(listed) = hit.get("gpus") {
        for named in gpu_list(listed) {
            gpu_ref(incident, f, named);
        }
    }
    f.entities.xid.extend(hit.get("xid").and_then(number));
    if let Some(unit) = hit.get("unit") {
        f.entities.units.insert(unit.to_owned());
    }
    name_bus(incident, f, hit.get("bus"));
}

/// The GPUs a `gpus` capture lists: each `Device N`, `GPU N` or `cuda:N`
/// in it (Kaldi's `Device 0: … busy or unavailable.  Device 1: …`), else
/// each whole number (`[0, 1]`, `0,1`).
fn gpu_list(listed: &str) -> Vec<&str> {
    static NAMED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)\b(?:device|gpu|cuda:?) ?([0-9]{1,3})\b").expect("gpu list regex")
    });
    let named: Vec<&str> = NAMED
        .captures_iter(listed)
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    if !named.is_empty() {
        return named;
    }
    listed
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .collect()
}

/// A whole number as a line prints it (`0`, `9292`); a word (`nvidia0`,
/// a UUID) is no index.
fn number(s: &str) -> Option<u32> {
    s.parse().ok()
}

/// The GPU a `gpu` or `device` capture names, however the line spells it:
/// an index or CUDA ordinal (`3`, `cuda:1`, `CUDA:0`, `CUDA0`, `ROCm1`,
/// `GPU0`, `GPU 2`, `gpu(0)`), which is the GPU's index as the line prints
/// it; a UUID (`GPU-5b1e…`), which is the index of the GPU the captures
/// list with it and nothing where none does; a PCI bus id, placed as a
/// kernel line's is (`name_bus`). The one place that reads these
/// spellings, so that a row captures the reference as printed.
fn gpu_ref(incident: &Incident, f: &mut Finding, named: &str) {
    let s = named.trim();
    if s.len() > 4 && s[..4].eq_ignore_ascii_case("GPU-") {
        let index = incident
            .gpus
            .iter()
            .find(|g| g.uuid.as_deref().is_some_and(|u| u.eq_ignore_ascii_case(s)))
            .map(|g| g.index);
        f.entities.gpus.extend(index);
        return;
    }
    if s.contains(':') && crate::model::BusId::parse(s).is_some() {
        name_bus(incident, f, Some(s));
        return;
    }
    f.entities.gpus.extend(ordinal(s));
}

/// The number of a GPU spelt as an ordinal: bare, or after `cuda:`,
/// `cuda`, `rocm`, `gpu` (with a space or a colon) or in `gpu(N)`, case
/// as printed.
fn ordinal(s: &str) -> Option<u32> {
    let lower = s.to_ascii_lowercase();
    let inner = lower
        .strip_prefix("gpu(")
        .and_then(|l| l.strip_suffix(')'))
        .unwrap_or(&lower);
    let rest = ["cuda:", "cuda", "rocm", "gpu:", "gpu"]
        .iter()
        .find_map(|p| inner.strip_prefix(p))
        .unwrap_or(inner);
    number(rest.trim_start())
}

/// A GPU's health readings (`nvidia-smi -q`'s `GPU Recovery Action`,
/// its ECC and remapping counters, `ERR!` cells, DCGM's last Xid): a
/// cited reading names the GPU of its block, by index or bus id.
fn health_gpus(incident: &Incident, f: &mut Finding, cited: &BTreeSet<Span>) {
    for h in &incident.facts.gpu_health {
        let spans = [
            h.reset_required.as_ref().map(|r| r.span),
            h.drain_and_reset_recommended.as_ref().map(|r| r.span),
            h.recovery_action.as_ref().map(|r| r.span),
            h.sram_threshold_exceeded.as_ref().map(|r| r.span),
            h.retired_pages_pending.as_ref().map(|r| r.span),
            h.retired_pages_single_bit.as_ref().map(|r| r.span),
            h.retired_pages_double_bit.as_ref().map(|r| r.span),
            h.remapped_rows_uncorrectable.as_ref().map(|r| r.span),
            h.remapped_rows_pending.as_ref().map(|r| r.span),
            h.remapping_failed.as_ref().map(|r| r.span),
            h.banks_without_spare_rows.as_ref().map(|r| r.span),
            h.last_xid.as_ref().map(|r| r.span),
        ];
        let cites = spans.into_iter().flatten().any(|s| cited.contains(&s))
            || h.ecc.iter().any(|c| cited.contains(&c.span))
            || h.hw_slowdowns.iter().any(|r| cited.contains(&r.span))
            || h.sick_values.iter().any(|v| cited.contains(&v.span));
        if !cites {
            continue;
        }
        match (h.index, h.bus_id.as_deref()) {
            (Some(i), _) => {
                f.entities.gpus.insert(i);
            }
            (None, bus) => name_bus(incident, f, bus),
        }
    }
}

/// Whether `cited` holds `span`, or, for a line that is part of a block
/// (`[first, last]` lines relative to it), any line of that block.
fn cites_block(cited: &BTreeSet<Span>, span: Span, block: Option<[i32; 2]>) -> bool {
    if cited.contains(&span) {
        return true;
    }
    let Some([first, last]) = block else {
        return false;
    };
    let at = |d: i32| Span {
        source: span.source,
        line: span.line.saturating_add_signed(d).max(1),
    };
    cited.range(at(first)..=at(last)).next().is_some()
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
            let Some(id) = crate::model::BusId::parse(bus) else {
                return;
            };
            // The rule may have named it already, spelt another way
            // (`0000:04:01.0`).
            let named = f
                .entities
                .gpu_bus_ids
                .iter()
                .any(|b| crate::model::BusId::parse(b) == Some(id));
            // As the line spells it: with the function where it prints
            // one (`0000:3b:00.0`: amdgpu, sysfs, AER), without where it
            // does not (an Xid's `0000:3b:00`).
            if !named {
                let spelled = if bus.contains('.') {
                    id.to_string()
                } else {
                    id.kernel()
                };
                f.entities.gpu_bus_ids.insert(spelled);
            }
        }
        None => {}
    }
}

#[cfg(test)]
mod tests;
