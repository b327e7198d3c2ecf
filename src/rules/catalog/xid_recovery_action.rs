//! `xid-recovery-action`: the driver's Xid 154 says what a GPU now needs
//! (a reset, a node reboot, a drain) after a fault no other rule reports,
//! such as an Xid 62 (internal micro-controller halt).

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::GpuUuid;
use crate::model::{KernelEvent, KernelEventKind, Xid};
use crate::rules::support::{confidence, matches};
use crate::rules::xid::{self, same_bus};
use crate::rules::{Action, ActionKind, Category, Finding, Rule, RuleMeta, Safety, Severity};

pub static RULE: XidRecoveryAction = XidRecoveryAction;

pub struct XidRecoveryAction;

/// Xids whose own rule cites the Xid 154 that follows them: fallen off the
/// bus (79), ECC and row remapping (48, 63, 64, 94, 95), GSP (119, 120).
const TOLD_ELSEWHERE: [u32; 8] = [48, 63, 64, 79, 94, 95, 119, 120];

/// The bus id as the Xid line printed it (`PCI:0000:01:00`).
static PRINTED_BUS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"PCI:(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)")
        .expect("regex")
});

/// The GSP's word that the PMU halted, which comes with Xid 62.
static PMU_HALTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"NVRM: .*PMU has halted").expect("regex"));

/// The GSP heartbeat lost before the verdict (`NVRM: _kgspRpcRecvPoll: GSP
/// RM heartbeat timed out`).
static GSP_HEARTBEAT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"NVRM: .*[Hh]eartbeat timed out").expect("regex"));

static META: RuleMeta = RuleMeta {
    id: "xid-recovery-action",
    category: Category::XidOther,
    severity: Severity::Critical,
    summary: "the driver's Xid 154 asks for a GPU reset, node reboot or drain after a fault that no other rule reports (e.g. Xid 62)",
    anchors: &[
        "PMU has halted",
        "): 154,",
        "heartbeat timed out",
        "Heartbeat timed out",
    ],
    doc: r#"
## What it means
`NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0
(None) to 0x1 (GPU Reset Required)`: since driver R550 the driver says in
so many words what a GPU needs after a fault: `GPU Reset Required`,
`Node Reboot Required`, `Drain P2P` or `Drain and Reset`. Until that is
done the GPU stays unusable, whatever the workload does.

The fault before it is often an Xid without a dedicated rule, e.g. Xid 62
(an internal micro-controller halted; the line carries a hex dump instead
of a description, and with the GSP firmware `Received signal from GSP that
PMU has halted`). When the earlier Xid is one with its own rule (79, the
ECC family, 119/120), that rule reports the recovery action instead.

## Why it happens
A firmware or driver fault on the GPU, a thermal or power event, or a
failing board. Xid 62 under heavy, long inference is reported on several
driver branches.

## How to confirm
`nvidia-smi -q -d RECOVERY_ACTION` (or `nvidia-smi -q | grep -i
recovery`); `dmesg -T | grep Xid` for the fault before the 154.

## How to fix
Do what the line says: drain the GPU and reset it (`nvidia-smi -r -i N`,
with nothing using it) for `GPU Reset Required`, reboot the node for `Node
Reboot Required`. If it recurs, collect `nvidia-bug-report.sh`, update
the driver and run the GPU diagnostics; repeated faults on one board are a
hardware case.

## Safety
A GPU reset is scripted only with confirmation and after checking the
GPU's UUID; a drain or reboot is advice.
"#,
};

impl Rule for XidRecoveryAction {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for bus in buses_asking(incident) {
            let on_bus: Vec<(&KernelEvent, &Xid)> = incident
                .xids()
                .filter(|(_, x)| same(x.bus_id.as_deref(), bus.as_deref()))
                .collect();
            if on_bus.iter().any(|(_, x)| TOLD_ELSEWHERE.contains(&x.code))
                || fell_off(incident, bus.as_deref())
            {
                continue;
            }
            let asks: Vec<&(&KernelEvent, &Xid)> = on_bus
                .iter()
                .filter(|(_, x)| x.code == 154 && asks_something(x))
                .collect();
            let Some((last_event, last)) = asks.last().map(|p| **p) else {
                continue;
            };
            let action = last.recovery_action.clone().unwrap_or_default();
            let gpu = xid::gpu_at(incident, bus.as_deref());
            let mut f = Finding::new(META.id, META.category, META.severity);
            name_gpu(&mut f, incident, last_event, gpu.index, bus.as_deref());
            let label = gpu.label();
            let short = gpu.short();
            let (causes, causes_gsp) = cite_causes(&mut f, incident, &on_bus, &short);
            f.entities.xid.insert(154);
            f.evidence(
                last_event.span,
                format!("Xid 154: the driver now asks for: {action}"),
            );
            let healths = gpu.health(incident);
            let sick = xid::cite_health(&mut f, &healths, &short);
            f.condition("the driver states the recovery it needs (Xid 154)", true);
            f.condition(
                "the fault before it is in the inputs",
                !causes.is_empty() || causes_gsp,
            );
            f.condition(
                "the GPU is identified",
                gpu.index.is_some() || bus.is_some(),
            );
            let cause_text = cause_text(&causes, causes_gsp);
            f.title = format!("{label} needs recovery: {action}{cause_text}");
            f.headline = format!(
                "{} hit a fault{cause_text} and the driver now requires: {action}. The GPU stays unusable until that is done.",
                crate::rules::support::capitalise(&label)
            );
            f.chain.push(format!(
                "work on {short} fails or hangs until it is recovered"
            ));
            f.chain.push(format!("the driver requires: {action}"));
            if !cause_text.is_empty() {
                f.chain.push(format!("{short} faulted{cause_text}"));
            }
            f.explanation = "Xid 154 is the driver's verdict after a fault: it names the recovery the GPU needs before it can be used again. It is not a fault of its own; the Xid before it is.".to_owned();
            if sick.recovery_action {
                f.explanation
                    .push_str(" nvidia-smi -q shows the same recovery action.");
            }
            f.actions.extend(actions(&action, &gpu, &short));
            f.confidence = confidence(&f, 0.7, 0.92);
            out.push(f);
        }
    }
}

/// The GPUs (by bus id, `None` for lines without one) with an Xid 154 that
/// asks for something, in order of first appearance.
fn buses_asking(incident: &Incident) -> Vec<Option<String>> {
    let mut buses: Vec<Option<String>> = Vec::new();
    for (_, x) in incident.xids() {
        if x.code != 154 || !asks_something(x) {
            continue;
        }
        if !buses
            .iter()
            .any(|b| same(b.as_deref(), x.bus_id.as_deref()))
        {
            buses.push(x.bus_id.clone());
        }
    }
    buses
}

/// Whether the driver says a GPU fell off the bus that may be the one at
/// `bus` (either side naming no bus counts): xid-gpu-fell-off-bus's case.
fn fell_off(incident: &Incident, bus: Option<&str>) -> bool {
    incident.facts.kernel_events.iter().any(|e| match &e.kind {
        KernelEventKind::FellOffBus { bus_id } => {
            bus_id.is_none() || bus.is_none() || same_bus(bus_id.as_deref(), bus)
        }
        _ => false,
    })
}

/// Names the GPU in the finding's entities: by its nvidia-smi `index`,
/// else by the bus id as the Xid 154 line `at` printed it (or as `bus`
/// groups it).
fn name_gpu(
    f: &mut Finding,
    incident: &Incident,
    at: &KernelEvent,
    index: Option<u32>,
    bus: Option<&str>,
) {
    let printed = incident
        .facts
        .messages
        .iter()
        .find(|m| m.span == at.span)
        .and_then(|m| PRINTED_BUS.captures(&m.text))
        .map(|c| c["bus"].to_owned())
        .or_else(|| bus.map(str::to_owned));
    match (index, printed) {
        (Some(i), _) => {
            f.entities.gpus.insert(i);
        }
        (None, Some(b)) => {
            f.entities.gpu_bus_ids.insert(b);
        }
        _ => {}
    }
}

/// Cites the faults before the verdict on the GPU `short`: each other Xid
/// code of `on_bus` once (and adds every code), the GSP's word that the PMU
/// halted and its lost heartbeat; returns the codes in order and whether
/// the heartbeat was lost.
fn cite_causes(
    f: &mut Finding,
    incident: &Incident,
    on_bus: &[(&KernelEvent, &Xid)],
    short: &str,
) -> (Vec<u32>, bool) {
    let mut causes: Vec<u32> = Vec::new();
    let mut causes_gsp = false;
    for (e, x) in on_bus.iter().filter(|(_, x)| x.code != 154) {
        f.entities.xid.insert(x.code);
        if !causes.contains(&x.code) {
            causes.push(x.code);
            f.evidence(e.span, format!("{} on {short}", xid::describe(x.code)));
        }
    }
    if let Some((m, _)) = matches(incident, &PMU_HALTED).next() {
        f.evidence(
            m.span,
            "the GSP firmware reports the GPU's power management unit (PMU) halted",
        );
    }
    if let Some((m, _)) = matches(incident, &GSP_HEARTBEAT).next() {
        f.evidence(
            m.span,
            "before it, the GSP firmware stopped answering the driver (heartbeat timed out)",
        );
        causes_gsp = true;
    }
    (causes, causes_gsp)
}

/// ` after Xid 62 (…)`, ` after a GSP heartbeat timeout`, or nothing when
/// no fault before the verdict is known.
fn cause_text(causes: &[u32], causes_gsp: bool) -> String {
    match causes {
        [] if causes_gsp => " after a GSP heartbeat timeout".to_owned(),
        [] => String::new(),
        list => format!(
            " after {}",
            list.iter()
                .map(|c| xid::describe(*c))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// What to do when the driver asks for `action` on `gpu` (`short`): confirm
/// it, drain, reboot, or reset the GPU (scripted, with confirmation, when
/// its index and UUID are known), and a bug report if it recurs.
fn actions(action: &str, gpu: &xid::GpuAt<'_>, short: &str) -> Vec<Action> {
    let lower = action.to_ascii_lowercase();
    let reboot = xid::is_reboot(action);
    let reset = lower.contains("reset");
    let drain = lower.contains("drain");
    let mut actions = vec![Action::advice(
        "confirm what the driver asks and find the fault before it",
        Some("nvidia-smi -q -d RECOVERY_ACTION; dmesg -T | grep -i xid"),
    )];
    if drain {
        actions.push(Action::new(
            ActionKind::Drain { host: None },
            Safety::AdvisoryOnly,
            format!("drain {short}'s workloads as the driver asks ({action})"),
        ));
    }
    if reboot {
        actions.push(Action::new(
            ActionKind::Reboot { host: None },
            Safety::AdvisoryOnly,
            format!("reboot the node: the driver requires it for {short}"),
        ));
    } else if reset {
        let uuid = gpu
            .gpu
            .and_then(|g| g.uuid.as_deref())
            .and_then(|u| GpuUuid::new(u).ok());
        match (gpu.index, uuid) {
            (Some(i), Some(uuid)) => actions.push(Action::new(
                ActionKind::ResetGpu { gpu: i, uuid },
                Safety::NeedsConfirmation,
                format!("the driver requires a reset of {short}"),
            )),
            _ => actions.push(Action::advice(
                format!(
                    "stop everything on {short} and reset it (GPU Reset Required), or reboot the node; nvidia-smi -L gives its index for the reset"
                ),
                Some("nvidia-smi -L"),
            )),
        }
    }
    actions.push(Action::advice(
        "if it recurs, collect a bug report, update the driver and run the GPU diagnostics; repeated faults on one board are a hardware case",
        Some("nvidia-bug-report.sh"),
    ));
    actions
}

/// Whether an Xid 154 asks for anything (not a change back to `None`).
fn asks_something(x: &Xid) -> bool {
    x.recovery_action
        .as_deref()
        .is_some_and(|a| !a.trim().is_empty() && !a.trim().eq_ignore_ascii_case("none"))
}

/// Two optional bus ids naming the same GPU (two `None`s are one group).
fn same(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (None, None) => true,
        _ => same_bus(a, b),
    }
}
