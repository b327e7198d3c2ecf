//! `gpu-fell-off-bus-no-xid`: the driver says a GPU fell off the bus or was
//! lost, but no Xid 79 for it is in the captures (it scrolled away, or the
//! capture started later).

use crate::correlate::Incident;
use crate::model::{KernelEvent, KernelEventKind};
use crate::rules::support::{confidence, kernel_time};
use crate::rules::xid::{self, same_bus};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: GpuFellOffBusNoXid = GpuFellOffBusNoXid;

pub struct GpuFellOffBusNoXid;

static META: RuleMeta = RuleMeta {
    id: "gpu-fell-off-bus-no-xid",
    category: Category::XidGpuFellOffBus,
    severity: Severity::Critical,
    summary: "the driver lost a GPU (fallen off the bus, NV_ERR_GPU_IS_LOST) and the Xid 79 line is not in the captures",
    anchors: &[
        "Unable to determine the device handle",
        "Unable to detect the device handle",
        "GPU requires reset",
        "GPU is lost",
        "blocked for more than",
        // The first line of the driver's wrapped report, which names the bus.
        "The NVIDIA GPU ",
        // The process block's title: the GPU rows above it are all there
        // are (a table that stops before it may be a paste cut short).
        "Processes:",
        "Compute processes:",
    ],
    doc: r#"
## What it means
The NVIDIA driver logged `NVRM: GPU 0000:ba:00.0: GPU has fallen off the
bus.` or driver calls failing with `GPU lost from the bus
[NV_ERR_GPU_IS_LOST]`, but the captures hold no `Xid … 79` line for that
GPU. The failure is the same as Xid 79: the GPU cannot be reached over
PCIe.

## Why it happens
The Xid line was printed earlier than the capture reaches (a ring buffer
that wrapped, a `journalctl --since` that started later, a grep that kept
only some lines); the causes are those of Xid 79: PCIe link, power, a
failing board.

## How to confirm
`journalctl -k -b | grep -E 'Xid|fallen off'` for the whole boot; nvidia-smi
no longer lists the GPU or prints `Unable to determine the device handle`;
processes using it sit in `D` state.

With no kernel message at all, an absence can still hint at it: nvidia-smi
lists an odd number (three or more) of boards of one model whose bus ids pair
up (`03`/`04`) except one (`84` without `83`), as GPUs behind PCIe switches
do. That is reported at a low confidence, naming what would settle it:
`lspci | grep -i nvidia` (the missing board absent, or `rev ff`) and
`dmesg | grep -i xid` (Xid 79). Lower still when the table stops before
its process block: a paste cut after the GPU rows may have left boards
out, so with nothing else to count the boards by (the process block's
title after the rows, a process listing) the absence is only a warning
that names the commands that count them (`nvidia-smi -L`, `lspci -d
10de:`), never a root cause. And only a warning when boards of the table are nearly full with no
process listed for them: the numbers (memory held by processes the table
does not show, `gpu-memory-unaccounted`) come before an absence.

## How to fix
As for Xid 79: drain the node, stop its GPU services, reboot; open a
hardware case if it repeats on the same board or slot.

## Safety
Advice only: draining and rebooting take down every workload of the node.
"#,
};

impl Rule for GpuFellOffBusNoXid {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let xid79: Vec<Option<&str>> = incident
            .xids()
            .filter(|(_, x)| x.code == 79)
            .map(|(_, x)| x.bus_id.as_deref())
            .collect();
        let mut groups = unexplained(incident, &xid79);
        let lost: Vec<&KernelEvent> = incident
            .facts
            .kernel_events
            .iter()
            .filter(|e| matches!(e.kind, KernelEventKind::GpuLost { .. }))
            .collect();
        // `GPU lost` lines name no bus id: evidence for the single GPU that
        // fell off, or a finding of their own when nothing else says which.
        if groups.is_empty() && !lost.is_empty() && xid79.is_empty() {
            // nvidia-smi failing on exactly one GPU says which one was lost.
            let unreachable = xid::unreachable_buses(incident);
            let bus = match unreachable.as_slice() {
                [one] => Some(one.clone()),
                _ => None,
            };
            groups.push((bus, Vec::new()));
        }
        if groups.is_empty() && lost.is_empty() && xid79.is_empty() {
            if let Some(f) = missing_sibling(incident) {
                out.push(f);
            }
        }
        let single = groups.len() == 1;
        for (bus, fell) in groups {
            out.push(finding(incident, bus, &fell, &lost, single));
        }
    }
}

/// The driver's `fallen off the bus` reports that no Xid 79 (at `xid79`'s
/// bus ids) explains, one group per bus id they name (a wrapped report's
/// from its first line); lines naming none form a group of their own.
fn unexplained<'a>(
    incident: &'a Incident,
    xid79: &[Option<&str>],
) -> Vec<(Option<String>, Vec<&'a KernelEvent>)> {
    let explained = |bus: Option<&str>| {
        xid79
            .iter()
            .any(|b| bus.is_none() || b.is_none() || same_bus(*b, bus))
    };
    let mut groups: Vec<(Option<String>, Vec<&KernelEvent>)> = Vec::new();
    for e in &incident.facts.kernel_events {
        let KernelEventKind::FellOffBus { bus_id } = &e.kind else {
            continue;
        };
        // `NVRM: The NVIDIA GPU 0000:b3:00.0` / `NVRM: (PCI ID: …) installed
        // in this system has` / `NVRM: fallen off the bus …`: the bus id is
        // on the first line of the wrapped report.
        let wrapped = bus_id.is_none().then(|| wrapped_bus(incident, e)).flatten();
        let bus_id = &bus_id.clone().or(wrapped);
        if explained(bus_id.as_deref()) {
            continue;
        }
        match groups.iter_mut().find(|(b, _)| match (b, bus_id) {
            (Some(b), Some(x)) => same_bus(Some(b), Some(x)),
            (None, None) => true,
            _ => false,
        }) {
            Some((_, events)) => events.push(e),
            None => groups.push((bus_id.clone(), vec![e])),
        }
    }
    groups
}

/// The finding for the GPU at `bus` whose `fallen off the bus` reports are
/// `fell` (none when only the driver's `lost` lines tell of it); the
/// `lost` lines are cited when it is the `single` such GPU.
fn finding(
    incident: &Incident,
    bus: Option<String>,
    fell: &[&KernelEvent],
    lost: &[&KernelEvent],
    single: bool,
) -> Finding {
    let gpu = xid::gpu_at(incident, bus.as_deref());
    let label = gpu.label();
    let short = gpu.short();
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.xid.insert(79);
    match gpu.index {
        Some(i) => {
            f.entities.gpus.insert(i);
        }
        // The driver's own line prints the function: `0000:b3:00.0`.
        None => f
            .entities
            .gpu_bus_ids
            .extend(bus.as_deref().and_then(xid::normal_bus)),
    }
    let first = fell.first().copied().or_else(|| lost.first().copied());
    let when = first
        .and_then(|e| kernel_time(incident, e))
        .map(crate::rules::support::when);
    cite_driver(&mut f, fell, lost, single, &short);
    xid::cite_recovery(&mut f, incident, bus.as_deref());
    let healths = gpu.health(incident);
    let sick = xid::cite_health(&mut f, &healths, &short);
    let unreachable = xid::cite_unreachable(&mut f, incident, &gpu) || sick.unreadable;
    let hung = xid::cite_hung_tasks(&mut f, incident);
    f.entities.pids.extend(hung.iter().copied());
    let stuck = xid::cite_stuck(&mut f, incident, &hung);
    for p in stuck.iter().take(4) {
        if let Some(o) = incident.owner(p.pid) {
            f.entities.units.insert(o.unit.clone());
        }
    }
    f.condition("the driver says the GPU fell off the bus", !fell.is_empty());
    f.condition(
        "the GPU is identified",
        gpu.index.is_some() || bus.is_some(),
    );
    f.condition(
        "nvidia-smi can no longer read it",
        unreachable || sick.reset_required,
    );
    f.condition(
        "processes are stuck in the driver (D state, hung tasks)",
        !stuck.is_empty() || !hung.is_empty(),
    );
    f.title = title(fell.is_empty(), bus.is_none(), &label);
    f.headline = format!(
        "{} fell off the PCIe bus{}: the Xid 79 line is not in the captures, but the driver can no longer reach the GPU, so everything using it hangs or fails until the node is rebooted.",
        crate::rules::support::capitalise(&label),
        when.map(|w| format!(" (driver messages from {w})"))
            .unwrap_or_default()
    );
    f.chain.push(format!(
        "the processes on {short} hang or fail{}",
        if stuck.is_empty() && hung.is_empty() {
            ""
        } else {
            "; some are stuck in D state"
        }
    ));
    f.chain.push(format!(
        "{short} fell off the PCIe bus (the driver's messages; the Xid line is outside the capture)"
    ));
    f.explanation = "The driver's `fallen off the bus` and `NV_ERR_GPU_IS_LOST` lines follow an Xid 79; the Xid line itself is missing from the captures (ring buffer wrapped, or the capture starts later). Read the whole boot's kernel log to find it and the PCIe errors before it.".to_owned();
    f.actions.extend(actions());
    f.confidence = confidence(&f, 0.7, 0.92);
    f
}

/// Cites the driver's account of the GPU `short`: the first and the last of
/// its `fell` reports, the rest of the first report's lines, and (for the
/// `single` GPU) its first `lost` line with how many there are.
fn cite_driver(
    f: &mut Finding,
    fell: &[&KernelEvent],
    lost: &[&KernelEvent],
    single: bool,
    short: &str,
) {
    for e in fell.iter().take(1).chain(fell.iter().skip(1).last()) {
        f.evidence(
            e.span,
            format!("the driver: {short} has fallen off the bus"),
        );
    }
    // The rest of the driver's report (`… installed in this system
    // has` / `fallen off the bus and is not responding to commands.`).
    if let Some(e) = fell.first() {
        for span in &e.related {
            if !f.evidence.iter().any(|x| x.span == *span) {
                f.evidence(*span, "the driver's report goes on");
            }
        }
    }
    if single {
        if let Some(e) = lost.first() {
            f.evidence(
                e.span,
                format!(
                    "driver calls fail with NV_ERR_GPU_IS_LOST ({} line(s))",
                    lost.len()
                ),
            );
        }
    }
}

/// The title: a GPU (`label`) that fell off the bus, or one the driver lost
/// (no `fallen off the bus` line: `no_report`), named when its bus is
/// known (`no_bus`: not).
fn title(no_report: bool, no_bus: bool, label: &str) -> String {
    if no_report && no_bus {
        "the driver lost a GPU (NV_ERR_GPU_IS_LOST, no Xid 79 in the captures)".to_owned()
    } else if no_report {
        format!("{label} was lost from the bus (NV_ERR_GPU_IS_LOST, no Xid 79 in the captures)")
    } else {
        format!("{label} fell off the bus (no Xid 79 in the captures)")
    }
}

/// What to do: find the Xid in the whole boot's log, drain and reboot the
/// node, reseat or replace the board if it recurs.
fn actions() -> Vec<Action> {
    vec![
        Action::advice(
            "find the Xid and the PCIe errors before it in the whole boot's kernel log",
            Some("journalctl -k -b --no-pager | grep -iE 'Xid|fallen off|AER|pcieport'"),
        ),
        Action::advice(
            "drain the node and stop the services that use its GPUs, then reboot it (processes in D state will not exit before)",
            None,
        ),
        Action::advice(
            "if it happens again on the same board or slot, reseat or replace the GPU and its riser (RMA)",
            None,
        ),
    ]
}

/// A table that stops inside its last GPU's block (that GPU's memory row
/// never came, while the others have theirs) is a paste cut short, not a
/// host with a GPU missing: more boards may have followed.
fn cut_short(gpus: &[crate::correlate::Gpu]) -> bool {
    let Some(last) = gpus.iter().max_by_key(|g| g.index) else {
        return false;
    };
    last.memory_total_mib.is_none() && gpus.iter().any(|g| g.memory_total_mib.is_some())
}

/// The bus number of a PCI address such as `0000:84:00.0` (`0x84`), when it
/// is device 0 function 0 (one GPU per bus); `None` for any other address.
fn bus_number(bus: &str) -> Option<u32> {
    let mut parts = bus.split([':', '.']);
    let (_, Some(b), Some("00"), Some("0")) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    u32::from_str_radix(b, 16).ok()
}

/// nvidia-smi lists an odd number (≥ 3) of boards of one model whose bus
/// numbers pair up (`03`/`04`, `83`/`84`) except one: its sibling is likely
/// a GPU that fell off the bus. An absence only, so a low-confidence finding
/// that names what would settle it.
fn missing_sibling(incident: &Incident) -> Option<Finding> {
    let mut models: std::collections::BTreeMap<&str, Vec<(u32, &crate::correlate::Gpu)>> =
        std::collections::BTreeMap::new();
    for g in &incident.gpus {
        let (Some(name), Some(bus)) = (g.name.as_deref(), g.bus_id.as_deref()) else {
            continue;
        };
        let Some(b) = bus_number(bus) else {
            continue;
        };
        models.entry(name).or_default().push((b, g));
    }
    for (name, mut gpus) in models {
        if gpus.len() < 3 || gpus.len() % 2 == 0 || gpus.len() != incident.gpus.len() {
            continue;
        }
        if cut_short(&incident.gpus) {
            continue;
        }
        gpus.sort_by_key(|(b, _)| *b);
        let buses: Vec<u32> = gpus.iter().map(|(b, _)| *b).collect();
        let paired = |b: u32| buses.contains(&(b + 1)) || (b > 0 && buses.contains(&(b - 1)));
        let lone: Vec<&(u32, &crate::correlate::Gpu)> =
            gpus.iter().filter(|(b, _)| !paired(*b)).collect();
        let [(lone_bus, lone_gpu)] = lone.as_slice() else {
            continue;
        };
        // The pairs start on one parity (`03`/`04`: odd); the lone GPU's
        // sibling is on the other side of it.
        let first_of_pair = buses.iter().find(|b| buses.contains(&(*b + 1)))?;
        let sibling = if lone_bus % 2 == first_of_pair % 2 {
            lone_bus + 1
        } else {
            lone_bus.checked_sub(1)?
        };
        return Some(sibling_finding(
            incident,
            name,
            &gpus,
            (*lone_bus, lone_gpu.index),
            sibling,
        ));
    }
    None
}

/// The finding for `gpus` of model `name`, the `lone` GPU (its bus number
/// and index) without its `sibling` bus.
fn sibling_finding(
    incident: &Incident,
    name: &str,
    gpus: &[(u32, &crate::correlate::Gpu)],
    lone: (u32, u32),
    sibling: u32,
) -> Finding {
    let (lone_bus, lone_index) = lone;
    // Numbers before absence: the table's own structure says whether
    // the count can be trusted (a cut paste lists fewer boards), and
    // boards full with no process listed are a reading of their own
    // (memory held by processes not shown) that an absence does not
    // outweigh.
    let complete = table_complete(incident, gpus);
    let held = held_unlisted(incident);
    // A count read from a table that may be cut is no finding of a lost
    // board: a warning at most, whose advice counts the boards.
    let severity = if held.is_empty() && complete {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(META.id, META.category, severity);
    for (_, g) in gpus {
        f.entities.gpus.insert(g.index);
    }
    if let Some(h) = incident.facts.smi_headers.first() {
        f.evidence(h.span, format!("nvidia-smi, driver {}", h.driver_version));
    }
    for (_, g) in gpus {
        if let Some(span) = g.spans.first() {
            f.evidence(
                *span,
                format!(
                    "GPU {} {name} at {}",
                    g.index,
                    g.bus_id.as_deref().unwrap_or("?")
                ),
            );
        }
    }
    f.condition(
        "nvidia-smi lists its boards in pairs but one, so a GPU may be missing",
        true,
    );
    f.condition(
            "the table is complete (its process block follows the GPU rows), so the count is not a cut paste",
            complete,
        );
    f.condition("the driver says a GPU fell off the bus (Xid 79)", false);
    f.condition("lspci shows the missing board absent or as `rev ff`", false);
    f.title = format!(
        "a GPU may be missing{}: nvidia-smi lists {} {name} boards, and GPU {} at bus {lone_bus:02x} has no sibling at {sibling:02x}",
        if complete {
            ""
        } else {
            ", or the table is cut"
        },
        gpus.len(),
        lone_index
    );
    f.headline = format!(
        "nvidia-smi lists {} {name} boards whose bus ids pair up except GPU {}'s ({lone_bus:02x}): the board at bus {sibling:02x} may have fallen off the bus. Only an absence says so; no kernel log is in the captures to confirm it{}{}.",
        gpus.len(),
        lone_index,
        if complete {
            ""
        } else {
            ", and the table ends before its process block, so the paste may simply be cut"
        },
        match held.as_slice() {
            [] => String::new(),
            _ => format!(
                "; {} full with no process listed weighs first (memory held by processes the table does not show)",
                held.iter()
                    .map(|i| format!("GPU {i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    );
    f.chain.push(format!(
        "nvidia-smi lists {} GPUs, not an even number",
        gpus.len()
    ));
    f.chain.push(format!(
        "the GPU at bus {sibling:02x} is no longer visible to the driver (fell off the bus?)"
    ));
    f.explanation = "GPUs behind PCIe switches come in pairs of adjacent bus numbers; one board without its pair, and an odd count of one model, suggest a GPU the driver no longer sees. Missing: the kernel log (Xid 79, `fallen off the bus`) and the PCI device list, which settle it.".to_owned();
    f.actions.extend(sibling_actions(complete));
    let cap = match (complete, held.is_empty()) {
        (false, _) => 0.25,
        (true, false) => 0.3,
        (true, true) => 0.45,
    };
    f.confidence = confidence(&f, 0.3, 0.9).min(cap);
    f
}

/// What settles a missing sibling: the PCI device list, the kernel's Xid
/// 79, and what to do if a board is gone; for a table that may be cut
/// (not `complete`), first the count of the boards the driver and the bus
/// see.
fn sibling_actions(complete: bool) -> Vec<Action> {
    let mut actions = Vec::new();
    if !complete {
        actions.push(Action::advice(
            "the table may be cut: count the boards the driver sees, and those on the PCI bus (NVIDIA's vendor id 10de), before reading an absence",
            Some("nvidia-smi -L; lspci -d 10de:"),
        ));
    }
    actions.extend([
        Action::advice(
            "check whether the node still sees every board on the PCI bus (a missing one is absent or shows `rev ff`)",
            Some("lspci | grep -i nvidia"),
        ),
        Action::advice(
            "look for Xid 79 (GPU has fallen off the bus) in the kernel log",
            Some("dmesg | grep -i xid"),
        ),
        Action::advice(
            "if a board is gone: drain the node, reboot it, and reseat or replace the GPU if it happens again",
            None,
        ),
    ]);
    actions
}

/// Whether the table the `gpus` come from shows itself complete: a process
/// listing (rows, `No running processes found`, or an empty block), or the
/// process block's title (`Processes:`, drivers ≤ 384 `Compute
/// processes:`) even where the paste stops under it, after its last GPU
/// row in the same input. A paste that stops after the GPU rows may have
/// cut more boards.
fn table_complete(incident: &Incident, gpus: &[(u32, &crate::correlate::Gpu)]) -> bool {
    let Some(last) = gpus.iter().flat_map(|(_, g)| g.spans.iter()).max() else {
        return false;
    };
    let after = |s: &crate::source::Span| s.source == last.source && s.line > last.line;
    let titled = |text: &str| {
        let t = text.trim().trim_start_matches('|').trim_start();
        t.starts_with("Processes:") || t.starts_with("Compute processes:")
    };
    incident
        .facts
        .process_listings
        .iter()
        .any(|l| after(&l.span))
        || incident
            .facts
            .messages
            .iter()
            .any(|m| after(&m.span) && titled(&m.text))
}

/// The GPUs nearly full (at least [`NEARLY_FULL`] of the card and 1 GiB)
/// with no process listed for them: memory held by processes the table
/// does not show, a reading of the numbers that comes before an absence.
fn held_unlisted(incident: &Incident) -> Vec<u32> {
    incident
        .gpus
        .iter()
        .filter(|g| {
            g.memory_used_mib
                .zip(g.memory_total_mib)
                .is_some_and(|(u, t)| crate::rules::support::holds_working_set(u, t, NEARLY_FULL))
                && incident.processes_on(g.index).next().is_none()
        })
        .map(|g| g.index)
        .collect()
}

/// The share of a card in use at which it is full for the next job.
const NEARLY_FULL: f64 = 0.9;

/// `NVRM: The NVIDIA GPU 0000:b3:00.0`, up to three lines above the line
/// that says the GPU fell off the bus.
static WRAPPED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"The NVIDIA GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])",
    )
    .expect("regex")
});

fn wrapped_bus(incident: &Incident, e: &KernelEvent) -> Option<String> {
    incident
        .facts
        .messages
        .iter()
        .filter(|m| {
            m.span.source == e.span.source
                && m.span.line <= e.span.line
                && m.span.line + 3 >= e.span.line
        })
        .find_map(|m| WRAPPED.captures(&m.text))
        .and_then(|c| xid::normal_bus(&c["bus"]))
}

#[cfg(test)]
mod tests;
