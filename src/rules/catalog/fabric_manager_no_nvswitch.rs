//! `fabric-manager-no-nvswitch`: the Fabric Manager failed on a host that has
//! no NVSwitch. Harmless, and said so, so that it is not mistaken for a cause.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::rules::support::{fabric_manager_irrelevant, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: FabricManagerNoNvswitch = FabricManagerNoNvswitch;

pub struct FabricManagerNoNvswitch;

static FM_FAILED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"nvidia-fabricmanager\.service: (?:Main process exited, code=exited|Failed with result)|Failed to start (?:nvidia-fabricmanager\.service|NVIDIA fabric manager)")
        .expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "fabric-manager-no-nvswitch",
    category: Category::Unknown,
    severity: Severity::Info,
    summary: "the Fabric Manager failed on a host without NVSwitch: harmless",
    anchors: &["nvidia-fabricmanager", "NV_WARN_NOTHING_TO_DO"],
    doc: r#"
## What it means
`nvidia-fabricmanager.service` failed, but this host has no NVSwitch (PCIe
GPUs, or NVLink bridges between pairs): the Fabric Manager has nothing to
manage and says so (`NV_WARN_NOTHING_TO_DO`).

## Why it happens
The driver meta-package installed and enabled the Fabric Manager on a host
that does not need it.

## How to confirm
The Fabric Manager's own log says it found no NVSwitch; `nvidia-smi -q`
shows no fabric; the GPUs are PCIe boards.

## How to fix
Nothing is broken. Disable the unit to keep the failure out of monitoring:
`systemctl disable --now nvidia-fabricmanager`.

## Safety
Advice only; do not disable it on HGX/DGX systems, which need it.
"#,
};

impl Rule for FabricManagerNoNvswitch {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let failed: Vec<_> = matches(incident, &FM_FAILED).map(|(m, _)| m).collect();
        let Some(why) = fabric_manager_irrelevant(incident) else {
            return;
        };
        if failed.is_empty() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.entities
            .units
            .insert("nvidia-fabricmanager.service".to_owned());
        for m in failed.iter().take(2) {
            f.evidence(m.span, "the Fabric Manager failed");
        }
        f.evidence(why.0, why.1);
        f.condition("the Fabric Manager failed", true);
        f.condition("the host has no NVSwitch", true);
        f.title = "the Fabric Manager failed, harmlessly: this host has no NVSwitch".to_owned();
        f.headline = "nvidia-fabricmanager failed, but this host has no NVSwitch: it is not a cause of anything.".to_owned();
        f.chain
            .push("nvidia-fabricmanager.service failed".to_owned());
        f.chain
            .push("it has no NVSwitch to manage on this host".to_owned());
        f.actions.push(Action::advice(
            "disable the unit so the failure stops showing up (not on HGX/DGX systems)",
            Some("systemctl disable --now nvidia-fabricmanager"),
        ));
        f.confidence = 0.9;
        out.push(f);
    }
}
