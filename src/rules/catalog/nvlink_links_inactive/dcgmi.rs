//! DCGM's view of the links: `dcgmi nvlink --link-status` rows
//! (`ingest::dcgmi_nvlink`), one letter per link. A `D` is a link the GPU
//! has (NVML answers for it) and NVML says is inactive; DCGM's own health
//! watch fails the GPU for each (`GPU 0's NvLink link 0 is currently
//! down`, `DCGM_FR_NVLINK_DOWN`). Links down beside links up, on a host
//! whose NVSwitches are listed, or on a GPU whose model has NVLink built in
//! are a fault. Every link of every GPU down with nothing else is also what
//! a PCIe card installed without its bridge shows (NVIDIA/DCGM#49,
//! NVIDIA/NVSentinel#1481): said, as a warning, with both readings.

use crate::correlate::Incident;
use crate::model::NvlinkStates;
use crate::rules::support::confidence;
use crate::rules::{Action, ActionKind, Finding, Safety, Severity};
use crate::source::Span;

/// The findings of each listing with a GPU link down.
pub(super) fn check(incident: &Incident, out: &mut Vec<Finding>) {
    let rows = &incident.facts.nvlink_states;
    let mut titles: Vec<Span> = rows.iter().map(|r| r.title).collect();
    titles.dedup();
    for title in titles {
        let listing: Vec<&NvlinkStates> = rows.iter().filter(|r| r.title == title).collect();
        if let Some(f) = finding(incident, title, &listing) {
            out.push(f);
        }
    }
}

/// The GPU's model as nvidia-smi names it, when the inputs list it.
fn model_of(incident: &Incident, id: u32) -> Option<&str> {
    incident
        .gpus
        .iter()
        .find(|g| g.index == id)
        .and_then(|g| g.name.as_deref())
}

fn finding(incident: &Incident, title: Span, listing: &[&NvlinkStates]) -> Option<Finding> {
    let down: Vec<&NvlinkStates> = listing
        .iter()
        .filter(|r| !r.switch && r.count('D') > 0)
        .copied()
        .collect();
    if down.is_empty() {
        return None;
    }
    let up = listing.iter().find(|r| r.count('U') > 0);
    let switches = listing.iter().any(|r| r.switch);
    let built_in = down
        .iter()
        .find_map(|r| model_of(incident, r.id).filter(|n| super::nvlink_built_in(n)));
    let sure = up.is_some() || switches || built_in.is_some();
    let severity = if sure {
        super::META.severity
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(super::META.id, super::META.category, severity);
    f.evidence(
        title,
        "dcgmi nvlink --link-status: each GPU's NVLinks as DCGM sees them",
    );
    let mut all_down = true;
    for r in &down {
        f.entities.gpus.insert(r.id);
        let has = r.states.chars().filter(|c| *c != '_').count();
        let (d, u) = (r.count('D'), r.count('U'));
        all_down &= u == 0;
        f.evidence(
            r.span,
            if u == 0 {
                format!(
                    "dcgmi: GPU {}: every one of its {has} NVLinks is Down",
                    r.id
                )
            } else {
                format!("dcgmi: GPU {}: {d} of its {has} NVLinks Down, {u} Up", r.id)
            },
        );
    }
    if let Some(r) = up.filter(|r| r.count('D') == 0) {
        let whose = if r.switch { "NVSwitch" } else { "GPU" };
        f.evidence(r.span, format!("dcgmi: {whose} {}'s NVLinks are Up", r.id));
    }
    let names = down
        .iter()
        .map(|r| r.id.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let gpus = if down.len() == 1 {
        format!("GPU {names}")
    } else {
        format!("GPUs {names}")
    };
    f.condition("dcgmi lists a link of the host Up", up.is_some());
    f.condition("dcgmi lists NVSwitches", switches);
    f.condition(
        "the GPU's model has its NVLinks built in (SXM)",
        built_in.is_some(),
    );
    f.condition(
        "the kernel's log of the failure (an NVLink Xid) is in the inputs",
        false,
    );
    write(&mut f, &gpus, sure, all_down);
    f.confidence = confidence(&f, if sure { 0.5 } else { 0.3 }, 0.7);
    Some(f)
}

/// The finding's words and actions: a fault (`sure`), or every link down
/// with nothing to tell a missing bridge from a card without one.
fn write(f: &mut Finding, gpus: &str, sure: bool, all_down: bool) {
    let which = if all_down { "every NVLink" } else { "NVLinks" };
    if sure {
        f.title = format!("dcgmi: {which} of {gpus} down: a GPU, bridge or fabric fault");
        f.headline = format!(
            "DCGM lists {which} of {gpus} as Down while other links of the host are up or the GPUs' NVLinks are part of the board: peer traffic over those links fails or falls back to PCIe, and NCCL slows or hangs. No Xid line is in the inputs; a passing dcgmi diag does not clear it."
        );
    } else {
        f.title = format!(
            "dcgmi: every NVLink of {gpus} is down: a missing or failed NVLink bridge, or a card installed without one"
        );
        f.headline = format!(
            "DCGM lists every NVLink of {gpus} as Down, and its health check fails a GPU for each such link. On GPUs joined by an NVLink bridge (H100 NVL or A100 PCIe pairs) the bridge is missing, unseated or failed, and traffic between them goes over PCIe; on a PCIe card installed without a bridge the same listing is normal. A passing dcgmi diag does not tell the two apart."
        );
    }
    f.chain.push(format!(
        "peer traffic between {gpus} and their peers is slow or fails"
    ));
    let verb = if all_down { "is" } else { "are" };
    f.chain
        .push(format!("{which} of {gpus} {verb} down (dcgmi)"));
    f.explanation = "dcgmi prints D for a link the GPU has and NVML reports inactive (X when MIG is on, _ for a link the GPU does not have); DCGM's NVLink health watch fails the GPU for each D. With links up elsewhere, NVSwitches listed or an SXM board, a D is a fault; with every link of every GPU down and nothing else, it may also be a card that never had a bridge.".to_owned();
    f.actions.push(Action::advice(
        "compare with nvidia-smi's view of the links and the topology between the GPUs",
        Some(
            "nvidia-smi nvlink -s; nvidia-smi topo -m; dmesg -T | grep -i -e Xid -e SXid -e nvlink",
        ),
    ));
    f.actions.push(Action::advice(
        "check that every NVLink bridge is present and seated (NVSwitch systems: systemctl status nvidia-fabricmanager); expect P2P and NCCL over NVLink to fail or fall back to PCIe meanwhile",
        None,
    ));
    if sure {
        f.actions.push(Action::new(
            ActionKind::Drain { host: None },
            Safety::AdvisoryOnly,
            "drain the node before reseating the bridge, resetting the GPU or rebooting",
        ));
    }
}
