//! What the GPU-fault rules share: which GPU a kernel bus id names, what
//! each Xid code means and which recovery NVIDIA's catalog gives it
//! (docs/catalogs/kernel.md), the driver's own recovery verdict (Xid 154), and the
//! `nvidia-smi` readings that show a GPU is sick (E4).

use std::sync::LazyLock;

use regex::Regex;

use super::Finding;
use super::support::matches;
use crate::correlate::{Gpu, Incident, bus_key};
use crate::model::{
    BusId, EccScope, GpuHealth, KernelEvent, PsRecord, Reading, ServerEventKind, TorchDistKind, Xid,
};
use crate::source::Span;

/// One Xid code of NVIDIA's Xid catalog: its meaning in a few words and
/// its resolution bucket, as the catalog row `kernel.xid-N` says
/// (`catalogs/kernel.toml`; the knowledge lives there).
pub struct XidInfo {
    pub meaning: &'static str,
    pub bucket: &'static str,
}

/// The Xids that report an NVLink error: 74 (all GPUs with NVLink) and
/// 144–150 (the NVLink units of Hopper and later).
pub fn is_nvlink(code: u32) -> bool {
    code == 74 || (144..=150).contains(&code)
}

static CAUSED_BY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"caused by previous Xid (?P<code>[0-9]+)").expect("regex"));

/// The earlier Xid a line says it follows: `…, Ch 00000001 caused by
/// previous Xid 149` (Xid 45 of r570+ drivers).
pub fn declared_cause(x: &Xid) -> Option<u32> {
    CAUSED_BY.captures(&x.message)?["code"].parse().ok()
}

/// `0000:dc:00`: a bus id as the kernel prints it (no function), for GPUs
/// the inputs know only by their bus.
pub fn kernel_bus(bus: &str) -> Option<String> {
    Some(BusId::parse(bus)?.kernel())
}

/// Names the GPU in the finding's entities: by index when the captures
/// resolve one, else by the bus id as an Xid line prints it (`0000:dc:00`).
pub fn name_gpu(f: &mut Finding, gpu: &GpuAt<'_>, bus: Option<&str>) {
    match gpu.index {
        Some(i) => {
            f.entities.gpus.insert(i);
        }
        None => {
            if let Some(b) = bus.or(gpu.bus.as_deref()).and_then(kernel_bus) {
                f.entities.gpu_bus_ids.insert(b);
            }
        }
    }
}

/// The catalog's word on an Xid code, `None` for a code it does not list.
pub fn info(code: u32) -> Option<XidInfo> {
    let row = crate::catalogs::catalogs().row(&format!("kernel.xid-{code}"))?;
    Some(XidInfo {
        meaning: row.strings.first()?.text.as_str(),
        bucket: row
            .resolution
            .as_deref()
            .unwrap_or("not in NVIDIA's catalog"),
    })
}

/// `Xid 48 (double-bit ECC error)`.
pub fn describe(code: u32) -> String {
    match info(code) {
        Some(i) => format!("Xid {code} ({})", i.meaning),
        None => format!("Xid {code}"),
    }
}

/// The PCIe AER lines about the GPU at `bus`: the catalog row
/// `kernel.aer-uncorrected-fatal` naming it as the device the error came
/// from (`AER: Uncorrected (Fatal) error received: 0000:1b:00.0`, `… error
/// message received from 0000:1b:00.0`), and `kernel.aer-gpu`, the nvidia
/// driver's own device (`nvidia 0000:1b:00.0: AER: can't recover …`).
pub fn aer_fatal_on(incident: &Incident, bus: Option<&str>) -> Vec<Span> {
    let from = incident
        .known("kernel.aer-uncorrected-fatal")
        .filter(|(_, hit)| {
            hit.get("rest")
                .and_then(|rest| ANY_BUS.find(rest))
                .is_some_and(|b| same_bus(Some(b.as_str()), bus))
        });
    let own = incident
        .known("kernel.aer-gpu")
        .filter(|(_, hit)| same_bus(hit.get("bus"), bus));
    let mut spans: Vec<Span> = from.chain(own).map(|(m, _)| m.span).collect();
    spans.sort();
    spans.dedup();
    spans
}

/// A PCI bus id with its domain, in any text.
static ANY_BUS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?\b").expect("regex")
});

/// Whether two bus ids name the same PCI device, whatever their spelling.
pub fn same_bus(a: Option<&str>, b: Option<&str>) -> bool {
    BusId::same(a, b)
}

/// `0000:ba:00.0`, however the bus id was spelled.
pub fn normal_bus(bus: &str) -> Option<String> {
    Some(BusId::parse(bus)?.to_string())
}

/// The GPU a kernel message names by its bus id, as far as the captures
/// allow to identify it.
#[derive(Debug, Clone)]
pub struct GpuAt<'a> {
    pub bus: Option<String>,
    pub index: Option<u32>,
    pub gpu: Option<&'a Gpu>,
    /// How the index was found when nvidia-smi no longer lists the GPU.
    pub inferred: Option<String>,
}

impl GpuAt<'_> {
    /// `GPU 5 (0000:ba:00.0)`, `GPU 5`, `the GPU at 0000:ba:00.0`.
    pub fn label(&self) -> String {
        match (self.index, &self.bus) {
            (Some(i), Some(b)) => format!("GPU {i} ({b})"),
            (Some(i), None) => format!("GPU {i}"),
            (None, Some(b)) => format!("the GPU at {b}"),
            (None, None) => "a GPU (bus id not logged)".to_owned(),
        }
    }

    /// `GPU 5`, or the bus id: for short titles.
    pub fn short(&self) -> String {
        match (self.index, &self.bus) {
            (Some(i), _) => format!("GPU {i}"),
            (None, Some(b)) => format!("GPU {b}"),
            (None, None) => "a GPU".to_owned(),
        }
    }

    /// What `nvidia-smi -q` said about this GPU.
    pub fn health<'i>(&self, incident: &'i Incident) -> Vec<&'i GpuHealth> {
        incident
            .facts
            .gpu_health
            .iter()
            .filter(|h| {
                same_bus(h.bus_id.as_deref(), self.bus.as_deref())
                    || (h.uuid.is_some() && self.gpu.is_some_and(|g| g.uuid == h.uuid))
                    || (h.bus_id.is_none()
                        && h.uuid.is_none()
                        && h.index.is_some()
                        && h.index == self.index)
            })
            .collect()
    }
}

/// The GPU at `bus`: nvidia-smi's index when a capture lists it; when
/// nvidia-smi no longer lists it (a GPU that fell off the bus disappears),
/// the index is inferred from the gap it leaves in the PCI order, which is
/// nvidia-smi's default enumeration order.
pub fn gpu_at<'a>(incident: &'a Incident, bus: Option<&str>) -> GpuAt<'a> {
    let mut at = GpuAt {
        bus: bus.map(str::to_owned),
        index: None,
        gpu: None,
        inferred: None,
    };
    let Some(bus) = bus else { return at };
    if let Some(g) = incident.gpu_by_bus_id(bus) {
        at.index = Some(g.index);
        at.gpu = Some(g);
        return at;
    }
    if let Some(h) = incident
        .facts
        .gpu_health
        .iter()
        .find(|h| same_bus(h.bus_id.as_deref(), Some(bus)) && h.index.is_some())
    {
        at.index = h.index;
        return at;
    }
    let Some(key) = bus_key(bus) else { return at };
    let mut listed: Vec<(u32, BusId)> = incident
        .gpus
        .iter()
        .filter_map(|g| Some((g.index, g.bus_id.as_deref().and_then(bus_key)?)))
        .collect();
    listed.sort();
    let in_pci_order = listed.windows(2).all(|w| w[0].1 < w[1].1);
    if listed.is_empty() || !in_pci_order {
        return at;
    }
    let before = listed.iter().rev().find(|(_, k)| *k < key);
    let after = listed.iter().find(|(_, k)| *k > key);
    let guess = match (before, after) {
        (Some(b), Some(a)) if b.0 + 2 == a.0 => Some(b.0 + 1),
        (None, Some(a)) if a.0 == 1 => Some(0),
        (Some(b), None) if b.0 as usize + 1 == listed.len() => Some(b.0 + 1),
        _ => None,
    };
    if let Some(i) = guess {
        at.index = Some(i);
        let shown: Vec<String> = listed.iter().map(|(x, _)| x.to_string()).collect();
        at.inferred = Some(format!(
            "nvidia-smi lists GPUs {} but not this bus id; index {i} is the gap it leaves in their PCI order",
            shown.join(", ")
        ));
    }
    at
}

/// The Xid 154 lines for `bus`, with the recovery each asks for.
pub fn recovery_actions<'a>(
    incident: &'a Incident,
    bus: Option<&str>,
) -> Vec<(&'a KernelEvent, &'a str)> {
    incident
        .xids()
        .filter(|(_, x)| x.code == 154 && same_bus(x.bus_id.as_deref(), bus))
        .filter_map(|(e, x)| Some((e, x.recovery_action.as_deref()?)))
        .collect()
}

/// Cites the last Xid 154 for `bus` (the recovery the driver now asks for)
/// and adds Xid 154 to the finding; returns every Xid 154 line for `bus`
/// with its recovery, as [`recovery_actions`] does.
pub fn cite_recovery<'a>(
    f: &mut Finding,
    incident: &'a Incident,
    bus: Option<&str>,
) -> Vec<(&'a KernelEvent, &'a str)> {
    let recovery = recovery_actions(incident, bus);
    if let Some((e, action)) = recovery.last() {
        f.evidence(
            e.span,
            format!("Xid 154: the driver now asks for: {action}"),
        );
        f.entities.xid.insert(154);
    }
    recovery
}

/// Whether the driver's recovery verdict is a node reboot.
pub fn is_reboot(action: &str) -> bool {
    let a = action.to_ascii_lowercase();
    a.contains("reboot")
}

/// What nvidia-smi showed of a sick GPU, once cited.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sickness {
    pub uncorrectable: bool,
    pub remap_pending: bool,
    pub remap_failed: bool,
    pub no_spare_rows: bool,
    pub sram_threshold: bool,
    pub retirement_pending: bool,
    pub reset_required: bool,
    pub recovery_action: bool,
    pub unreadable: bool,
    /// DCGM's last Xid of the GPU, when a capture shows it: which fault a
    /// reset asked for follows. Not a sickness by itself (an old Xid 13 of
    /// an application is one too).
    pub last_xid: Option<u32>,
}

impl Sickness {
    /// A condition that sends the board down the replacement path (E4).
    pub fn rma(&self) -> bool {
        self.remap_failed || self.no_spare_rows || self.sram_threshold
    }

    pub fn any(&self) -> bool {
        self.uncorrectable
            || self.remap_pending
            || self.remap_failed
            || self.no_spare_rows
            || self.sram_threshold
            || self.retirement_pending
            || self.reset_required
            || self.recovery_action
            || self.unreadable
    }
}

fn yes(r: &Option<Reading<bool>>) -> Option<&Reading<bool>> {
    r.as_ref().filter(|r| r.value)
}

/// Cites what `nvidia-smi -q` says is wrong with a GPU: uncorrectable
/// counters, pending or failed row remaps, the SRAM threshold, a required
/// reset, the recovery action and unreadable values. Correctable counts are
/// not cited: alone they are normal wear.
pub fn cite_health(f: &mut Finding, healths: &[&GpuHealth], label: &str) -> Sickness {
    let mut s = Sickness::default();
    for h in healths {
        for c in h.uncorrectable_errors() {
            let scope = match c.scope {
                EccScope::Volatile => "since the last reset",
                EccScope::Aggregate => "over the board's lifetime",
            };
            f.evidence(
                c.span,
                format!(
                    "{label}: {} uncorrectable {} ECC error(s) {scope}",
                    c.count, c.location
                ),
            );
            s.uncorrectable = true;
        }
        if let Some(r) = yes(&h.remapped_rows_pending) {
            f.evidence(
                r.span,
                format!("{label}: a row remap is pending; it applies at the next GPU reset"),
            );
            s.remap_pending = true;
        }
        if let Some(r) = yes(&h.remapping_failed) {
            f.evidence(
                r.span,
                format!("{label}: row remapping failed: no spare row was left"),
            );
            s.remap_failed = true;
        }
        if let Some(r) = h.banks_without_spare_rows.as_ref().filter(|r| r.value > 0) {
            f.evidence(
                r.span,
                format!(
                    "{label}: {} memory bank(s) have no spare rows left",
                    r.value
                ),
            );
            s.no_spare_rows = true;
        }
        if let Some(r) = yes(&h.sram_threshold_exceeded) {
            f.evidence(
                r.span,
                format!("{label}: the SRAM uncorrectable-error threshold is exceeded"),
            );
            s.sram_threshold = true;
        }
        if let Some(r) = yes(&h.retired_pages_pending) {
            f.evidence(
                r.span,
                format!("{label}: a page retirement is pending until the next reset"),
            );
            s.retirement_pending = true;
        }
        if let Some(r) = yes(&h.reset_required) {
            f.evidence(
                r.span,
                format!("{label}: nvidia-smi says a reset is required"),
            );
            s.reset_required = true;
        }
        if let Some(r) = h
            .recovery_action
            .as_ref()
            .filter(|r| !r.value.eq_ignore_ascii_case("none"))
        {
            f.evidence(
                r.span,
                format!("{label}: GPU Recovery Action is {}", r.value),
            );
            s.recovery_action = true;
        }
        if let Some(r) = &h.last_xid {
            f.evidence(
                r.span,
                format!(
                    "{label}: DCGM's last Xid (field 230, XIDER) is Xid {}",
                    r.value
                ),
            );
            f.entities.xid.insert(r.value);
            s.last_xid = Some(r.value);
        }
        if let Some(v) = h.sick_values.first() {
            f.evidence(
                v.span,
                format!(
                    "{label}: nvidia-smi cannot read it ({} is `{}`)",
                    v.field, v.token
                ),
            );
            s.unreadable = true;
        }
    }
    s
}

/// nvidia-smi's per-GPU failure up to the bus id it names: `Unable to
/// determine the device handle for GPU0000:BA:00.0` (older drivers: `… for
/// GPU 0000:BA:00.0`; `nvidia-smi -L`: `gpu`; Windows' nvidia-smi.exe:
/// `Unable to detect the device handle for GPU0000:B1:00.0`,
/// jamesstringer90/Easy-GPU-PV#276). The domain is read with any number of
/// digits: a bus id retyped by hand keeps fewer than four
/// (`GPU 000:BA:80.0`, NVIDIA/dcgm-exporter#604), and is the GPU named.
/// Newer drivers put the GPU's index before the bus id (`… for GPU1:
/// 0000:82:00.0: Unknown Error`, 610 series); the bus id is still the GPU.
pub const NO_HANDLE_BUS: &str = r"Unable to (?:determine|detect) the device handle for (?:[Gg][Pp][Uu]\s?(?:[0-9]{1,3}:\s?)?)?(?P<bus>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])";

/// [`NO_HANDLE_BUS`] and what nvidia-smi says of the GPU (`Unknown Error`,
/// `GPU is lost.  Reboot …`).
static NO_HANDLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"{NO_HANDLE_BUS}:\s*(?P<why>.*)")).expect("regex"));

/// Literals of the lines [`cite_unreachable`] reads (the hung tasks of
/// [`cite_hung_tasks`] are a catalog row, whose anchor the prefilter has).
pub const LOST_GPU_ANCHORS: [&str; 4] = [
    "Unable to determine the device handle",
    "GPU requires reset",
    "GPU is lost",
    "Unable to detect the device handle",
];

/// Cites the kernel's hung-task reports (a process blocked in the driver);
/// returns their PIDs.
pub fn cite_hung_tasks(f: &mut Finding, incident: &Incident) -> Vec<u32> {
    let mut pids = Vec::new();
    for t in crate::rules::support::hung_tasks(incident) {
        if pids.contains(&t.pid) {
            continue;
        }
        if pids.len() < 3 {
            f.evidence(
                t.message.span,
                format!(
                    "the kernel: PID {} ({}) has been blocked for more than {} s",
                    t.pid, t.comm, t.secs
                ),
            );
        }
        pids.push(t.pid);
    }
    pids
}

static SICK_CELL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[GPU requires reset\]|\[GPU is lost\]").expect("regex"));

/// Cites nvidia-smi failing to reach the GPU: the `Unable to determine the
/// device handle` line for its bus id, a CSV row of it showing `[GPU requires
/// reset]`, or (when the captures list the other GPUs) its missing row.
/// Returns whether anything was cited.
pub fn cite_unreachable(f: &mut Finding, incident: &Incident, gpu: &GpuAt<'_>) -> bool {
    let label = gpu.short();
    let mut cited = false;
    for (m, c) in matches(incident, &NO_HANDLE) {
        if same_bus(Some(&c["bus"]), gpu.bus.as_deref()) {
            f.evidence_once(
                m.span,
                format!(
                    "nvidia-smi cannot open {label}: {}",
                    c["why"].trim().trim_end_matches('.')
                ),
            );
            cited = true;
        }
    }
    let uuid = gpu.gpu.and_then(|g| g.uuid.as_deref());
    for (m, _) in matches(incident, &SICK_CELL) {
        if uuid.is_some_and(|u| m.text.contains(u)) {
            f.evidence_once(m.span, format!("nvidia-smi reports {label} needs a reset"));
            cited = true;
        }
    }
    if let Some(why) = &gpu.inferred {
        if let Some(span) = incident.gpus.iter().flat_map(|g| g.spans.first()).next() {
            f.evidence(*span, format!("{label}: {why}"));
            cited = true;
        }
    }
    cited
}

/// The bus ids nvidia-smi could not open (`Unable to determine the device
/// handle for GPU…`), distinct, in input order.
pub fn unreachable_buses(incident: &Incident) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, c) in matches(incident, &NO_HANDLE) {
        let Some(bus) = normal_bus(&c["bus"]) else {
            continue;
        };
        if !out.iter().any(|b| same_bus(Some(b), Some(&bus))) {
            out.push(bus);
        }
    }
    out
}

/// Titles and names of GPU server processes.
const GPU_PROCESSES: &[&str] = &["sglang::", "VLLM::", "ray::", "pt_main_thread"];

/// Processes in uninterruptible sleep (`D`) that are GPU work: one of
/// `known` (the Xid's PID, hung tasks), a server process title, or a
/// Python process. A process stuck on NFS is not the GPU's doing.
pub fn stuck_processes<'a>(incident: &'a Incident, known: &[u32]) -> Vec<&'a PsRecord> {
    incident
        .facts
        .ps
        .iter()
        .filter(|p| p.stat.as_deref().is_some_and(|s| s.starts_with('D')))
        .filter(|p| {
            known.contains(&p.pid)
                || GPU_PROCESSES.iter().any(|t| p.cmd.starts_with(t))
                || p.cmd.contains("python")
        })
        .collect()
}

/// Cites the first four of the [`stuck_processes`] (`known` as there) as
/// blocked inside the driver and adds their PIDs to the finding; returns
/// all of them.
pub fn cite_stuck<'a>(f: &mut Finding, incident: &'a Incident, known: &[u32]) -> Vec<&'a PsRecord> {
    let stuck = stuck_processes(incident, known);
    for p in stuck.iter().take(4) {
        f.evidence(
            p.span,
            format!(
                "PID {} `{}` is in D state: blocked inside the driver",
                p.pid, p.cmd
            ),
        );
        f.entities.pids.insert(p.pid);
    }
    stuck
}

/// `pid=4318 (sglang::schedul)`, for notes.
pub fn owner_of(x: &Xid) -> String {
    match (x.pid, &x.name) {
        (Some(p), Some(n)) => format!("PID {p} ({n})"),
        (Some(p), None) => format!("PID {p}"),
        (None, Some(n)) => n.clone(),
        (None, None) => "an unidentified process".to_owned(),
    }
}

/// The Xids of one GPU (by bus id), in input order.
pub fn on_bus<'a>(
    incident: &'a Incident,
    bus: Option<&'a str>,
    codes: &'a [u32],
) -> impl Iterator<Item = (&'a KernelEvent, &'a Xid)> + 'a {
    incident.xids().filter(move |(_, x)| {
        codes.contains(&x.code)
            && (same_bus(x.bus_id.as_deref(), bus) || (bus.is_none() && x.bus_id.is_none()))
    })
}

/// The distinct bus ids (in input order) of the Xids with one of `codes`.
pub fn buses(incident: &Incident, codes: &[u32]) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = Vec::new();
    for (_, x) in incident.xids().filter(|(_, x)| codes.contains(&x.code)) {
        let known = out.iter().any(|b| match (b, &x.bus_id) {
            (Some(b), Some(x)) => same_bus(Some(b), Some(x)),
            (None, None) => true,
            _ => false,
        });
        if !known {
            out.push(x.bus_id.clone());
        }
    }
    out
}

/// A GPU row of the nvidia-smi table, whose last column of the first line
/// is `Volatile Uncorr. ECC`:
/// `|   0  NVIDIA H100 80GB HBM3   On  |   00000000:18:00.0 Off |    2 |`.
static TABLE_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\|\s*(?P<index>[0-9]+)\s+.+\|\s*(?P<bus>[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+\S+\s*\|\s*(?P<ecc>[0-9]+)\s*\|",
    )
    .expect("regex")
});

/// The literal every table row of a GPU in PCI domain 0 carries.
pub const TABLE_ROW_ANCHOR: &str = "00000000:";

/// A table row whose `Volatile Uncorr. ECC` is above zero.
pub struct TableEcc {
    pub index: u32,
    pub bus: String,
    pub count: u64,
    pub span: Span,
}

pub fn table_ecc(incident: &Incident) -> Vec<TableEcc> {
    matches(incident, &TABLE_ROW)
        .filter_map(|(m, c)| {
            Some(TableEcc {
                index: c["index"].parse().ok()?,
                bus: c["bus"].to_owned(),
                count: c["ecc"].parse().ok().filter(|n| *n > 0)?,
                span: m.span,
            })
        })
        .collect()
}

/// Cites the table's `Volatile Uncorr. ECC` count of this GPU.
pub fn cite_table_ecc(f: &mut Finding, incident: &Incident, gpu: &GpuAt<'_>) -> bool {
    let mut cited = false;
    for row in table_ecc(incident) {
        if same_bus(Some(&row.bus), gpu.bus.as_deref()) {
            f.evidence_once(
                row.span,
                format!(
                    "nvidia-smi: GPU {} has {} volatile uncorrectable ECC error(s)",
                    row.index, row.count
                ),
            );
            cited = true;
        }
    }
    cited
}

/// The literal of the lines [`cite_peer_timeouts`] reads.
pub const NCCL_WATCHDOG_ANCHOR: &str = "Watchdog caught collective operation timeout";

/// How long after a GPU fault the peers' NCCL watchdogs may fire: ten
/// minutes by default, thirty in older PyTorch, plus the time to notice.
const PEER_TIMEOUT_WINDOW: std::ops::RangeInclusive<i64> = 0..=2400;

/// Cites the NCCL watchdog timeouts of the other ranks after a GPU fault at
/// `at` (all of them when the fault is untimed); returns the ranks.
pub fn cite_peer_timeouts(
    f: &mut Finding,
    incident: &Incident,
    at: Option<crate::model::Timestamp>,
) -> Vec<u32> {
    // The c10d reader's records of the sentence (its catalog row,
    // `stacks-torch.nccl-watchdog-timeout`), each with the `[Rank N]` before it.
    let hits: Vec<(Span, u32)> = incident
        .facts
        .server_events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::TorchDist(t)
                if matches!(t.kind, TorchDistKind::WatchdogTimeout { .. }) =>
            {
                Some((e.span, t.rank?))
            }
            _ => None,
        })
        .filter(|(span, _)| match (at, incident.time_of(*span)) {
            (Some(a), Some(b)) => {
                PEER_TIMEOUT_WINDOW.contains(&super::support::seconds_between(a, b))
            }
            _ => true,
        })
        .collect();
    let mut ranks: Vec<u32> = hits.iter().map(|(_, rank)| *rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    if let Some((span, _)) = hits.first() {
        let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
        f.evidence(
            *span,
            format!(
                "then the NCCL watchdogs of rank(s) {} timed out waiting for the lost peer",
                list.join(", ")
            ),
        );
    }
    ranks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_compare_however_spelled() {
        let cases = [
            ("0000:3b:00", "00000000:3B:00.0", true),
            ("PCI:0000:3b:00.0", "0000:3b:00", true),
            ("0000:3b:00.0", "0000:3c:00.0", false),
            ("0001:3b:00.0", "0000:3b:00.0", false),
        ];
        for (a, b, same) in cases {
            assert_eq!(same_bus(Some(a), Some(b)), same, "{a} {b}");
        }
        assert!(!same_bus(None, Some("0000:3b:00.0")));
        assert_eq!(
            normal_bus("00000000:AB:00.0").as_deref(),
            Some("0000:ab:00.0")
        );
        assert_eq!(normal_bus("GPU0000:AB"), None);
    }

    #[test]
    fn codes_are_described_with_their_meaning() {
        assert_eq!(describe(79), "Xid 79 (GPU has fallen off the bus)");
        assert_eq!(describe(48), "Xid 48 (double-bit ECC error)");
        assert_eq!(describe(9999), "Xid 9999");
        let gsp = info(119).expect("the catalog lists Xid 119");
        assert_eq!((gsp.meaning, gsp.bucket), ("GSP RPC timeout", "RESET_GPU"));
        assert!(is_reboot("Node Reboot Required") && is_reboot("OS Reboot"));
        assert!(!is_reboot("GPU Reset Required"));
    }
}
