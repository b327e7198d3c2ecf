//! `fabric-manager-no-nvswitch`: the Fabric Manager failed on a host that has
//! no NVSwitch. Harmless, and said so, so that it is not mistaken for a cause.

use crate::correlate::Incident;
use crate::rules::support::fabric_manager::{
    FabricManagerUnitEnd, fabric_manager_irrelevant, fabric_manager_unit_ends,
};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: FabricManagerNoNvswitch = FabricManagerNoNvswitch;

pub struct FabricManagerNoNvswitch;

/// The unit's ends that say the Fabric Manager failed: its main process's
/// exit with a code, its result, a failed start job.
fn failed(end: FabricManagerUnitEnd) -> bool {
    !matches!(
        end,
        FabricManagerUnitEnd::ControlExited | FabricManagerUnitEnd::MainExited { code: false }
    )
}

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
        let failed: Vec<_> = fabric_manager_unit_ends(incident)
            .filter(|(_, end)| failed(*end))
            .map(|(m, _)| m)
            .collect();
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

#[cfg(test)]
mod tests {
    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// https://github.com/data-infra/cube-studio/issues/29's query line
    /// (the catalog's sample of `fabricmanager.nvswitch-query-failed`) and
    /// its control process's exit; the unit's result is assembled as
    /// systemd's unit.c words it (`Failed with result '%s'.`), not from the
    /// thread. NV_WARN_NOTHING_TO_DO is read from its row, the unit's
    /// failure from systemd's; the control process's exit alone is not read
    /// as the unit's failure here, as before.
    #[test]
    fn nothing_to_do_and_the_units_result_come_from_their_rows() {
        let query = "Sep 18 03:19:01 ubuntu2404 nvidia-fabricmanager-start.sh[4756]: request to query NVSwitch device information from NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n";
        let result = "Sep 18 03:19:01 ubuntu2404 systemd[1]: nvidia-fabricmanager.service: Failed with result 'exit-code'.\n";
        let control = "Sep 18 03:19:01 ubuntu2404 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE\n";
        let f = findings(&format!("{query}{result}"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].evidence.iter().any(|e| e.span.line == 1), "{f:?}");
        assert!(f[0].evidence.iter().any(|e| e.span.line == 2), "{f:?}");
        assert!(findings(&format!("{query}{control}")).is_empty());
        assert!(findings(result).is_empty());
    }
}
