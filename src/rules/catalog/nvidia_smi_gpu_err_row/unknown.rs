//! The same GPU seen in `nvidia-smi -q`: a value of the GPU's block read
//! as `Unknown Error` (NVML_ERROR_UNKNOWN), such as `Product Brand :
//! Unknown Error`, under its `GPU 00000000:00:16.0` line. A field some
//! drivers cannot read on any GPU (`Addressing Mode` on 535, gpud's
//! `TestParseWithAddressingModeError`) is not a GPU's fault: such a field,
//! or one that reads `Unknown Error` on every GPU of the report, is
//! passed over.

use crate::correlate::Incident;
use crate::model::{GpuHealth, Message, SickValue};
use crate::rules::{Action, Finding, xid};

/// Fields that read `Unknown Error` on healthy GPUs where the driver does
/// not support them (normalised: lower case, `_` for spaces).
const UNSUPPORTED_ON_SOME_DRIVERS: &[&str] = &["addressing_mode"];

fn normal(field: &str) -> String {
    field.trim().to_ascii_lowercase().replace([' ', '-'], "_")
}

fn unknown_error(v: &SickValue) -> bool {
    v.token.trim_matches(['[', ']']) == "Unknown Error"
}

/// The GPU blocks with a value read as `Unknown Error` that says the GPU
/// itself no longer answers, one finding each.
pub(super) fn findings(incident: &Incident, echo: &[&Message]) -> Vec<Finding> {
    let health = &incident.facts.gpu_health;
    // A field every GPU block reads as `Unknown Error` (several blocks) is
    // the driver's, not one GPU's.
    let everywhere = |field: &str| {
        health.len() > 1
            && health.iter().all(|h| {
                h.sick_values
                    .iter()
                    .any(|v| unknown_error(v) && normal(&v.field) == field)
            })
    };
    health
        .iter()
        // An Xid on that GPU is the kernel's account of it.
        .filter(|h| {
            !incident
                .xids()
                .any(|(_, x)| xid::same_bus(x.bus_id.as_deref(), h.bus_id.as_deref()))
        })
        .filter_map(|h| {
            let sick: Vec<&SickValue> = h
                .sick_values
                .iter()
                .filter(|v| unknown_error(v))
                .filter(|v| {
                    let field = normal(&v.field);
                    !UNSUPPORTED_ON_SOME_DRIVERS
                        .iter()
                        .any(|u| field.ends_with(u))
                        && !everywhere(&field)
                })
                .collect();
            (!sick.is_empty()).then(|| finding(incident, h, &sick, echo))
        })
        .collect()
}

fn finding(incident: &Incident, h: &GpuHealth, sick: &[&SickValue], echo: &[&Message]) -> Finding {
    let mut f = Finding::new(super::META.id, super::META.category, super::META.severity);
    let bus = h.bus_id.as_deref();
    // nvidia-smi's index when a table lists the bus, else the block's own.
    let at = xid::GpuAt {
        bus: bus.map(str::to_owned),
        index: bus
            .and_then(|b| incident.gpu_by_bus_id(b))
            .map(|g| g.index)
            .or(h.index),
        gpu: None,
        inferred: None,
    };
    let label = at.label();
    // By index; else by the bus id as the kernel's Xid line names the GPU
    // (`PCI:0000:00:16`, the line `journalctl -k | grep -i xid` is to find)
    // and as nvidia-smi spells it (`0000:00:16.0`).
    xid::name_gpu(&mut f, &at, None);
    if at.index.is_none() {
        if let Some(b) = bus.and_then(xid::normal_bus) {
            f.entities.gpu_bus_ids.insert(b);
        }
    }
    for v in sick {
        f.evidence_marked(
            v.span,
            format!(
                "nvidia-smi -q cannot read {label}'s {}: NVML answers `Unknown Error`",
                v.field
            ),
            "Unknown Error",
        );
    }
    f.condition(
        "nvidia-smi -q reads `Unknown Error` for the GPU's own attributes",
        true,
    );
    f.condition(
        "the kernel log names the GPU's Xid (missing: dmesg -T | grep -i xid)",
        false,
    );
    f.confidence = 0.4;
    super::cite_echo(&mut f, echo);
    f.title = format!("{label} no longer answers NVML: nvidia-smi -q reads Unknown Error");
    f.headline = format!(
        "nvidia-smi -q cannot read {label}'s attributes ({} reads `Unknown Error`): the driver can no longer query that GPU, most often a GPU lost from the bus (Xid 79) or whose firmware stopped answering (Xid 119); the kernel log says which.",
        sick[0].field
    );
    f.chain
        .push(format!("{label} no longer answers NVML queries"));
    f.chain.push(
        "NVML's queries of it fail with an unknown error (nvidia-smi, the container hook, DCGM)"
            .to_owned(),
    );
    f.explanation = "nvidia-smi -q prints `Unknown Error` where NVML's query of a value failed with NVML_ERROR_UNKNOWN. A GPU's basic attributes (its brand, name, serial) failing to read is a GPU the driver can no longer talk to; the kernel log holds the Xid that says why.".to_owned();
    f.actions.push(Action::advice(
        "find the GPU's Xid in the kernel log (79: fallen off the bus; 119/120: GSP firmware timeout; 48/74: a fatal memory or NVLink error)",
        Some("journalctl -k | grep -i xid"),
    ));
    if let Some(b) = bus {
        f.actions.push(Action::advice(
            "check whether the device still answers on the PCI bus (absent or `rev ff`: lost)",
            Some(&format!("lspci -s {b}")),
        ));
    }
    f.actions.push(Action::advice(
        "drain the node's work from that GPU, then reset it once nothing uses it (`nvidia-smi -r -i N`) or reboot the node; reseat or replace the board if it happens again",
        None,
    ));
    f
}
