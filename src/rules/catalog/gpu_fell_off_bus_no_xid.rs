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
        "GPU requires reset",
        "GPU is lost",
        "blocked for more than",
        // The first line of the driver's wrapped report, which names the bus.
        "The NVIDIA GPU ",
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
        let explained = |bus: Option<&str>| {
            xid79
                .iter()
                .any(|b| bus.is_none() || b.is_none() || same_bus(*b, bus))
        };
        // One group per bus id the driver named; lines naming none form a
        // group of their own.
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
        let single = groups.len() == 1;
        for (bus, fell) in groups {
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
            for e in fell.iter().take(1).chain(fell.iter().skip(1).last()) {
                f.evidence(
                    e.span,
                    format!("the driver: {short} has fallen off the bus"),
                );
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
            let recovery = xid::recovery_actions(incident, bus.as_deref());
            if let Some((e, action)) = recovery.last() {
                f.evidence(
                    e.span,
                    format!("Xid 154: the driver now asks for: {action}"),
                );
                f.entities.xid.insert(154);
            }
            let healths = gpu.health(incident);
            let sick = xid::cite_health(&mut f, &healths, &short);
            let unreachable = xid::cite_unreachable(&mut f, incident, &gpu) || sick.unreadable;
            let hung = xid::cite_hung_tasks(&mut f, incident);
            f.entities.pids.extend(hung.iter().copied());
            let stuck = xid::stuck_processes(incident, &hung);
            for p in stuck.iter().take(4) {
                f.evidence(
                    p.span,
                    format!(
                        "PID {} `{}` is in D state: blocked inside the driver",
                        p.pid, p.cmd
                    ),
                );
                f.entities.pids.insert(p.pid);
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
            f.title = if fell.is_empty() && bus.is_none() {
                "the driver lost a GPU (NV_ERR_GPU_IS_LOST, no Xid 79 in the captures)".to_owned()
            } else if fell.is_empty() {
                format!(
                    "{label} was lost from the bus (NV_ERR_GPU_IS_LOST, no Xid 79 in the captures)"
                )
            } else {
                format!("{label} fell off the bus (no Xid 79 in the captures)")
            };
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
            f.actions.push(Action::advice(
                "find the Xid and the PCIe errors before it in the whole boot's kernel log",
                Some("journalctl -k -b --no-pager | grep -iE 'Xid|fallen off|AER|pcieport'"),
            ));
            f.actions.push(Action::advice(
                "drain the node and stop the services that use its GPUs, then reboot it (processes in D state will not exit before)",
                None,
            ));
            f.actions.push(Action::advice(
                "if it happens again on the same board or slot, reseat or replace the GPU and its riser (RMA)",
                None,
            ));
            f.confidence = confidence(&f, 0.7, 0.92);
            out.push(f);
        }
    }
}

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
