//! The holders `fuser -v /dev/nvidia*` names beside a GPU whose memory no
//! process of nvidia-smi's table accounts for: the processes that have the
//! held GPU's device node open and no other GPU's. A desktop session
//! (Xorg, a compositor, browsers, chat clients) opens every GPU's node;
//! the job that allocated the memory opens the nodes of the GPUs it uses
//! (titan RTX's five `python` processes on `/dev/nvidia1` only, batch X's
//! 1563). They are the likely holders; fuser does not say how much each
//! holds, so the finding names them as candidates and acts on none.

use std::collections::BTreeMap;

use crate::correlate::Gpu;
use crate::correlate::Incident;
use crate::model::DeviceHolder;
use crate::rules::Finding;

/// The processes (each with its first row on a held GPU's node) that hold
/// a node of a GPU in `held` and the node of no GPU outside it, by PID.
pub(super) fn holders<'a>(incident: &'a Incident, held: &[&Gpu]) -> Vec<&'a DeviceHolder> {
    let is_held = |gpu: u32| held.iter().any(|g| g.index == gpu);
    let mut by_pid: BTreeMap<u32, (Option<&DeviceHolder>, bool)> = BTreeMap::new();
    for h in &incident.facts.device_holders {
        let Some(gpu) = h.gpu else { continue };
        let entry = by_pid.entry(h.pid).or_insert((None, false));
        if is_held(gpu) {
            entry.0.get_or_insert(h);
        } else {
            entry.1 = true;
        }
    }
    // Only where fuser listed some GPU other than the held ones: with one
    // GPU's node alone listed, every holder opens it (the desktop too).
    let others_listed = incident
        .facts
        .device_holders
        .iter()
        .any(|h| h.gpu.is_some_and(|g| !is_held(g)));
    if !others_listed {
        return Vec::new();
    }
    by_pid
        .into_values()
        .filter_map(|(first, elsewhere)| first.filter(|_| !elsewhere))
        .collect()
}

/// Cites each holder's row and names its PID on `f`.
pub(super) fn cite(f: &mut Finding, holders: &[&DeviceHolder]) {
    for h in holders {
        f.entities.pids.insert(h.pid);
        f.evidence(
            h.span,
            format!(
                "PID {} ({}, user {}) has {} open and no other GPU's node: a likely holder",
                h.pid, h.command, h.user, h.file
            ),
        );
    }
}

/// The finding's headline when fuser names the likely holders of `gpus`.
pub(super) fn headline(gpus: &str, has: &str, holders: &[&DeviceHolder]) -> String {
    let names: Vec<String> = holders
        .iter()
        .map(|h| format!("PID {} ({})", h.pid, h.command))
        .collect();
    format!(
        "{gpus} {has} memory in use that nvidia-smi's table lists no process for, and fuser shows {} holding that GPU's device node and no other: the likely holders (fuser does not say how much each holds); if they are not a live job of yours, they are what keeps the memory.",
        names.join(", ")
    )
}
