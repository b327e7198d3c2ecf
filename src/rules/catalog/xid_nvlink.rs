//! `xid-nvlink`: NVLink errors (Xid 74); multi-GPU collectives over the
//! link fail. A failed peer GPU makes its neighbours log 74 too, so the
//! peers' Xids at the same time decide which GPU is at fault.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{KernelEvent, Xid};
use crate::rules::support::{confidence, kernel_time, seconds_between};
use crate::rules::xid::{self, same_bus};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: XidNvlink = XidNvlink;

pub struct XidNvlink;

/// Faults of a GPU as a whole, which its NVLink neighbours see as link errors.
const PEER_FAULTS: [u32; 9] = [48, 62, 64, 79, 95, 109, 119, 120, 154];

/// How close in time a peer's fault must be to explain the link errors.
const PEER_WINDOW_SECS: i64 = 60;

static LINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\blink (?P<link>\d+)\b").expect("regex"));

static META: RuleMeta = RuleMeta {
    id: "xid-nvlink",
    category: Category::XidOther,
    severity: Severity::Critical,
    summary: "NVLink errors (Xid 74): collectives between the GPUs fail",
    anchors: &[],
    doc: r#"
## What it means
`NVRM: Xid (PCI:…): 74, pid=…, name=…, NVLink: fatal error detected on
link 6(0x10000, …)`: an NVLink connection of the GPU, to another GPU or an
NVSwitch, failed. Collectives over it (tensor-parallel all-reduce) fail or
hang: NCCL errors and watchdog timeouts follow on every rank. The link
stays down until the GPU is reset.

## Why it happens
A fault on the link (cable, connector, NVSwitch), or the far end: a peer
GPU that failed (Xid 79, 48/95, 119) makes its neighbours log Xid 74. When
a peer had such an Xid at the same time, the peer is the cause.

## How to confirm
`nvidia-smi nvlink -s` (link state) and `nvidia-smi nvlink -e` (error
counters) per GPU; the kernel log for other Xids in the same minute; on
NVSwitch systems the Fabric Manager's log.

## How to fix
If a peer failed, follow that peer's recovery. Otherwise drain the GPUs,
reset them (on NVSwitch systems all GPUs of the baseboard are reset
together) or reboot; if the errors persist after a reset, open a hardware
case.

## Safety
Advice only: a GPU reset ends every process on the GPUs.
"#,
};

impl Rule for XidNvlink {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let links: Vec<(&KernelEvent, &Xid)> =
            incident.xids().filter(|(_, x)| x.code == 74).collect();
        let Some(&(first, _)) = links.first() else {
            return;
        };
        let buses = xid::buses(incident, &[74]);
        let gpus: Vec<_> = buses
            .iter()
            .map(|b| xid::gpu_at(incident, b.as_deref()))
            .collect();
        // A peer's own fault at about the same time.
        let first_time = kernel_time(incident, first);
        let peer = incident.xids().find(|(e, x)| {
            PEER_FAULTS.contains(&x.code)
                && (x.code != 154 || x.recovery_action.as_deref().is_some_and(|a| a != "None"))
                && !buses
                    .iter()
                    .any(|b| same_bus(b.as_deref(), x.bus_id.as_deref()))
                && match (first_time, kernel_time(incident, e)) {
                    (Some(a), Some(b)) => seconds_between(a, b).abs() <= PEER_WINDOW_SECS,
                    _ => true,
                }
        });
        let severity = if peer.is_some() {
            Severity::Warning
        } else {
            META.severity
        };
        let mut f = Finding::new(META.id, META.category, severity);
        f.occurrences = links.len() as u32;
        f.entities.xid.insert(74);
        let mut names: Vec<String> = Vec::new();
        for (gpu, bus) in gpus.iter().zip(&buses) {
            if let Some(i) = gpu.index {
                f.entities.gpus.insert(i);
            }
            names.push(gpu.short());
            let on: Vec<_> = xid::on_bus(incident, bus.as_deref(), &[74]).collect();
            let mut seen: Vec<String> = Vec::new();
            for (e, x) in on {
                let link = LINK
                    .captures(&x.message)
                    .map(|c| c["link"].to_owned())
                    .unwrap_or_else(|| "?".to_owned());
                if seen.contains(&link) {
                    continue;
                }
                f.evidence(
                    e.span,
                    format!("Xid 74 on {}: NVLink {link} failed", gpu.short()),
                );
                seen.push(link);
                if let Some(pid) = x.pid {
                    f.entities.pids.insert(pid);
                }
            }
            let healths = gpu.health(incident);
            xid::cite_health(&mut f, &healths, &gpu.short());
        }
        let peer_label = peer.map(|(e, x)| {
            let g = xid::gpu_at(incident, x.bus_id.as_deref());
            // The peer's GPU and process: the finding is about it too.
            if let Some(i) = g.index {
                f.entities.gpus.insert(i);
            }
            if let Some(pid) = x.pid {
                f.entities.pids.insert(pid);
            }
            f.evidence(
                e.span,
                format!(
                    "at the same time {} had {}: a failed peer makes its neighbours log Xid 74",
                    g.short(),
                    xid::describe(x.code)
                ),
            );
            (g.short(), xid::describe(x.code))
        });
        let pids: Vec<u32> = f.entities.pids.iter().copied().collect();
        for pid in pids {
            if let Some(o) = incident.owner(pid) {
                f.entities.units.insert(o.unit.clone());
            }
        }
        f.condition("the kernel logged Xid 74", true);
        f.condition(
            "no peer GPU failed at the same time (the link itself is at fault)",
            peer.is_none(),
        );
        f.condition(
            "the GPUs are identified by their index",
            gpus.iter().all(|g| g.index.is_some()),
        );
        let list = names.join(", ");
        f.title = match &peer_label {
            Some((g, what)) => format!("NVLink errors on {list} (Xid 74), following {what} on {g}"),
            None => format!("NVLink errors on {list} (Xid 74)"),
        };
        f.headline = match &peer_label {
            Some((g, what)) => format!(
                "NVLink errors on {list} (Xid 74) follow {what} on {g}: the failed peer, not the links, is the likely cause."
            ),
            None => format!(
                "NVLink failed on {list} (Xid 74): collectives between the GPUs fail until they are reset."
            ),
        };
        f.chain
            .push("multi-GPU collectives (all-reduce) fail or time out".to_owned());
        f.chain.push(format!("NVLink failed on {list} (Xid 74)"));
        if let Some((g, what)) = &peer_label {
            f.chain.push(format!("{g} failed first ({what})"));
        }
        f.explanation = format!(
            "Xid 74 takes a link down until the GPU is reset (catalog action: {}). A peer GPU failing makes its NVLink neighbours log 74 as well, so the other GPUs' Xids at the same time decide where the fault is.",
            xid::info(74).map_or("", |i| i.bucket)
        );
        f.actions.push(Action::advice(
            "look at the link state and error counters of each GPU",
            Some("nvidia-smi nvlink -s; nvidia-smi nvlink -e"),
        ));
        if peer_label.is_some() {
            f.actions.push(Action::advice(
                "follow the recovery of the peer GPU's fault first; check the links again after it",
                None,
            ));
        } else {
            f.actions.push(Action::advice(
                "drain the GPUs, stop their workloads, then reset them (on NVSwitch systems the whole baseboard) or reboot",
                Some("nvidia-smi -r"),
            ));
            f.actions.push(Action::advice(
                "if Xid 74 returns after the reset, open a hardware case for the GPU, its NVLink connectors or the NVSwitch",
                None,
            ));
        }
        f.confidence = confidence(&f, 0.7, 0.95);
        out.push(f);
    }
}
