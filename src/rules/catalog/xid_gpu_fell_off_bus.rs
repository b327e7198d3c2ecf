//! `xid-gpu-fell-off-bus`: Xid 79, the driver lost a GPU on the PCIe bus;
//! everything using it hangs or fails until the node is rebooted.

use crate::correlate::Incident;
use crate::model::{KernelEvent, KernelEventKind, Xid};
use crate::rules::support::{add_owner_units, confidence, kernel_time};
use crate::rules::xid::{self, same_bus};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: XidGpuFellOffBus = XidGpuFellOffBus;

pub struct XidGpuFellOffBus;

static META: RuleMeta = RuleMeta {
    id: "xid-gpu-fell-off-bus",
    category: Category::XidGpuFellOffBus,
    severity: Severity::Critical,
    summary: "a GPU fell off the PCIe bus (Xid 79): its processes hang and the node needs a reboot",
    anchors: &[
        xid::LOST_GPU_ANCHORS[0],
        xid::LOST_GPU_ANCHORS[1],
        xid::LOST_GPU_ANCHORS[2],
        xid::LOST_GPU_ANCHORS[3],
        xid::NCCL_WATCHDOG_ANCHOR,
    ],
    doc: r#"
## What it means
`NVRM: Xid (PCI:0000:ba:00): 79, pid=…, name=…, GPU has fallen off the
bus.`: the driver can no longer reach the GPU over PCIe. Every process
using it blocks inside the driver (state `D`, immune to SIGKILL), its peers
in a tensor-parallel group wait in collectives until the NCCL watchdog
gives up, and nvidia-smi prints `Unable to determine the device handle for
GPU…: Unknown Error` or `[GPU requires reset]` instead of the GPU's row.
Recent drivers add Xid 154 `GPU recovery action changed … (Node Reboot
Required)`.

## Why it happens
A PCIe link that went down (riser, slot, retimer), a power or thermal
event on the board, a failing GPU, more rarely a driver bug. The `pid=` of
the line is the process whose work was on the GPU, not a cause.

## How to confirm
`dmesg -T | grep -E 'Xid|fallen off|AER|pcieport'` for the Xid and PCIe AER
errors just before it; `nvidia-smi` no longer lists the GPU;
`ps -eo pid,stat,cmd` shows its processes in `D`; `lspci -s BUS -vv` shows
the link state.

## How to fix
Drain the node (no new work), stop the services that used its GPUs, then
reboot: a GPU that fell off the bus is not recoverable from software in
most cases. Check the BMC/IPMI event log for power and PCIe events. If it
happens again on the same board or slot, open a hardware case (RMA):
reseat or swap the GPU and its riser.

## Safety
Advice only: draining and rebooting take down every workload of the node
and need a person's decision.
"#,
};

impl Rule for XidGpuFellOffBus {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for bus in xid::buses(incident, &[79]) {
            let xids: Vec<_> = xid::on_bus(incident, bus.as_deref(), &[79]).collect();
            let Some(&(first, first_xid)) = xids.first() else {
                continue;
            };
            let gpu = xid::gpu_at(incident, bus.as_deref());
            let label = gpu.label();
            let short = gpu.short();
            let mut f = Finding::new(META.id, META.category, META.severity);
            f.occurrences = xids.len() as u32;
            f.entities.xid.insert(79);
            xid::name_gpu(&mut f, &gpu, bus.as_deref());
            let when = kernel_time(incident, first).map(crate::rules::support::when);
            cite_xids(&mut f, &xids, &label);
            let fell = cite_fell(&mut f, incident, bus.as_deref(), &short);
            let recovery = xid::cite_recovery(&mut f, incident, bus.as_deref());
            let reboot = recovery.iter().any(|(_, a)| xid::is_reboot(a));
            cite_lost(&mut f, incident);
            let healths = gpu.health(incident);
            let sick = xid::cite_health(&mut f, &healths, &short);
            let unreachable = xid::cite_unreachable(&mut f, incident, &gpu) || sick.unreadable;
            let peers = xid::cite_peer_timeouts(&mut f, incident, kernel_time(incident, first));
            let hung = xid::cite_hung_tasks(&mut f, incident);
            f.entities.pids.extend(hung.iter().copied());
            let known: Vec<u32> = f.entities.pids.iter().copied().collect();
            let stuck = xid::cite_stuck(&mut f, incident, &known);
            add_owner_units(&mut f, incident);
            f.condition("the kernel logged Xid 79", true);
            f.condition(
                "the driver confirms the GPU fell off the bus or asks for a reboot",
                !fell.is_empty() || !recovery.is_empty(),
            );
            f.condition(
                "nvidia-smi can no longer read the GPU",
                unreachable || sick.reset_required,
            );
            f.condition("the GPU is identified by its index", gpu.index.is_some());
            f.condition(
                "processes are stuck in D state or the Xid names the process",
                !stuck.is_empty() || !hung.is_empty() || first_xid.pid.is_some(),
            );
            f.title = format!("{label} fell off the bus (Xid 79)");
            f.headline = format!(
                "{} fell off the PCIe bus (Xid 79{}): the driver can no longer reach it, so every process using it hangs or fails until the node is rebooted.",
                crate::rules::support::capitalise(&label),
                when.map(|w| format!(" at {w}")).unwrap_or_default()
            );
            let blocked = stuck.len().max(hung.len());
            f.chain.extend(chain(&short, peers.len(), blocked, reboot));
            f.explanation = format!(
                "Xid 79 means the driver lost the GPU over PCIe (link, power or board failure). Software on it cannot recover: processes block in the driver, NCCL peers time out, and restarts of the service fail or hang until the node is rebooted. Catalog action: {}.{}",
                xid::info(79).map_or("", |i| i.bucket),
                gpu.inferred
                    .as_ref()
                    .map(|w| format!(" The index is inferred: {w}."))
                    .unwrap_or_default()
            );
            f.actions.extend(actions(&short));
            f.confidence = confidence(&f, 0.85, 0.99);
            out.push(f);
        }
    }
}

/// Cites the first and the last Xid 79 line of the GPU `label` with the
/// process that owned the work on it, and adds the PIDs the lines name.
fn cite_xids(f: &mut Finding, xids: &[(&KernelEvent, &Xid)], label: &str) {
    for (e, x) in xids.iter().take(1).chain(xids.iter().skip(1).last()) {
        f.evidence(
            e.span,
            format!(
                "Xid 79 on {label}: the driver lost the GPU on the PCIe bus; {} owned the work on it",
                xid::owner_of(x)
            ),
        );
        if let Some(pid) = x.pid {
            f.entities.pids.insert(pid);
        }
    }
}

/// Cites the driver's own `fallen off the bus` line for `bus` (the GPU
/// `short`) and any fatal PCIe (AER) error on its link; returns the
/// driver's `fallen off the bus` events for the bus.
fn cite_fell<'a>(
    f: &mut Finding,
    incident: &'a Incident,
    bus: Option<&str>,
    short: &str,
) -> Vec<&'a KernelEvent> {
    // The driver's own statement, next to the Xid.
    let fell: Vec<_> = incident
        .facts
        .kernel_events
        .iter()
        .filter(|e| match &e.kind {
            KernelEventKind::FellOffBus { bus_id } => {
                bus_id.is_none() || same_bus(bus_id.as_deref(), bus)
            }
            _ => false,
        })
        .collect();
    if let Some(e) = fell.first() {
        f.evidence(
            e.span,
            format!("the driver: {short} has fallen off the bus"),
        );
    }
    // A fatal PCIe error reported for the GPU's own link: how it fell.
    for span in xid::aer_fatal_on(incident, bus) {
        if !f.evidence.iter().any(|e| e.span == span) {
            f.evidence(
                span,
                format!("a fatal PCIe (AER) error on {short}'s link before it was lost"),
            );
        }
    }
    fell
}

/// Cites the first `NV_ERR_GPU_IS_LOST` line of the driver, with how many
/// there are: noise of the same loss.
fn cite_lost(f: &mut Finding, incident: &Incident) {
    let lost: Vec<_> = incident
        .facts
        .kernel_events
        .iter()
        .filter(|e| matches!(e.kind, KernelEventKind::GpuLost { .. }))
        .collect();
    if let Some(e) = lost.first() {
        f.evidence(
            e.span,
            format!(
                "driver calls fail with NV_ERR_GPU_IS_LOST ({} line(s)): noise of the same loss",
                lost.len()
            ),
        );
    }
}

/// The causal chain, symptom first: the hung processes or the peers' NCCL
/// watchdogs (`peers` ranks timed out), the `blocked` processes in D
/// state, and the fall off the bus (with the driver's reboot verdict).
fn chain(short: &str, peers: usize, blocked: usize, reboot: bool) -> Vec<String> {
    let mut chain = Vec::new();
    if peers == 0 {
        chain.push(format!(
            "the processes on {short} and their tensor-parallel peers hang or fail"
        ));
    } else {
        chain.push(format!(
            "the NCCL watchdogs of {peers} other rank(s) timed out: their peer on {short} never answered"
        ));
    }
    if blocked > 0 {
        chain.push(format!(
            "{blocked} process(es) are stuck in the driver (D state) and survive SIGKILL"
        ));
    }
    chain.push(format!(
        "{short} fell off the PCIe bus (Xid 79){}",
        if reboot {
            "; the driver asks for a node reboot"
        } else {
            ""
        }
    ));
    chain
}

/// What to do for the GPU `short`: drain the node, collect the driver's
/// state, reboot, and check the GPU after it.
fn actions(short: &str) -> Vec<Action> {
    vec![
        Action::advice(
            "drain the node: stop scheduling work to it and stop the services that use its GPUs (processes in D state will not exit; that is expected)",
            None,
        ),
        Action::advice(
            "collect the driver's state before the reboot, and look for PCIe AER and power events just before the Xid",
            Some("nvidia-bug-report.sh; dmesg -T | grep -iE 'AER|pcieport|Xid|fallen off'"),
        ),
        Action::advice(
            "reboot the node: a GPU that fell off the bus cannot be reset from software in most cases",
            None,
        ),
        Action::advice(
            format!(
                "after the reboot check that {short} is back and healthy; if Xid 79 repeats on the same board or slot, reseat or replace the GPU and its riser (RMA)"
            ),
            Some("nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER,ECC"),
        ),
    ]
}
