//! `fabric-manager-start-failure`: NVIDIA's Fabric Manager stopped at
//! start-up on an error of its configuration (catalogs/fabricmanager.toml),
//! and when the same error repeats, whatever restarts it (systemd, a Talos
//! extension service, a GPU operator's driver pod) runs it in a loop.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::fabric_manager::{FabricManagerUnitEnd, fabric_manager_unit_ends};
use crate::rules::support::round2;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: FabricManagerStartFailure = FabricManagerStartFailure;

pub struct FabricManagerStartFailure;

/// The rows of the Fabric Manager's errors that stop it at start-up, every
/// time it starts, whatever restarts it; each with the capture that names
/// what it stopped on.
const ROWS: &[(&str, &str)] = &[("fabricmanager.config-item-invalid", "item")];

static META: RuleMeta = RuleMeta {
    id: "fabric-manager-start-failure",
    category: Category::UnitCrashLoop,
    severity: Severity::Error,
    summary: "NVIDIA's Fabric Manager stops at start-up on an error of its configuration; repeated, it is restarted in a loop",
    // The catalog rows' anchors, which `rules::anchors` adds for every run;
    // the unit's own name for its failure lines.
    anchors: &["nvidia-fabricmanager"],
    doc: r#"
## What it means
`nv-fabricmanager` (the `nvidia-fabricmanager` unit) configures the
NVSwitch fabric of HGX/DGX systems at boot. It checks its configuration
file first, and an item it cannot use (`fabric manager config file item:
FABRIC_NODE_CONFIG_FILE has an invalid value`) makes it exit before it
configures anything. The same line repeated is the Fabric Manager started
again and again by whatever supervises it (systemd's `Restart=`, a Talos
extension service, a GPU operator's driver pod), failing the same way each
time: a restart loop.

## Why it happens
A configuration written for another release or another package layout: a
path whose folder does not exist on this host (the topology files, the
state file, a node configuration file), a number out of range. A container
or system extension that ships the default file without the folders it
names.

## How to confirm
Read the item in `fabricmanager.cfg` and check the folder it names;
compare the file with the one the installed package ships;
`nv-fabricmanager --version` against the driver's version.

## How to fix
Set the item to a value this release accepts (for a path, one whose
folder exists; the topology files of this GPU generation where
`TOPOLOGY_FILE_PATH` points), then restart the unit. Without the Fabric
Manager, CUDA on NVSwitch GPUs fails with error 802 (`system not yet
initialized`).

## Safety
Advice only: nothing is stopped or changed.
"#,
};

impl Rule for FabricManagerStartFailure {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for &(id, capture) in ROWS {
            let mut lines: Vec<(&Message, Option<&str>)> = incident
                .known(id)
                .map(|(m, hit)| (m, hit.get(capture)))
                .collect();
            lines.sort_by_key(|(m, _)| m.span);
            if let Some(f) = finding(incident, &lines) {
                out.push(f);
            }
        }
    }
}

/// The unit's own end, as PID 1 reports it (not a start job's line).
fn unit_failed(incident: &Incident) -> Vec<&Message> {
    fabric_manager_unit_ends(incident)
        .filter(|(_, end)| !matches!(end, FabricManagerUnitEnd::FailedToStart { .. }))
        .map(|(m, _)| m)
        .collect()
}

/// One finding for the lines of one row: a start-up failure, or, repeated,
/// a restart loop.
fn finding(incident: &Incident, lines: &[(&Message, Option<&str>)]) -> Option<Finding> {
    let (first, what) = *lines.first()?;
    let (last, _) = *lines.last()?;
    let n = lines.len();
    let what = what.unwrap_or("an item");
    let looped = n >= 2;
    let category = if looped {
        Category::UnitCrashLoop
    } else {
        Category::ServerException
    };
    let mut f = Finding::new(META.id, category, Severity::Critical);
    f.occurrences = u32::try_from(n).unwrap_or(u32::MAX);
    f.entities
        .units
        .insert("nvidia-fabricmanager.service".to_owned());
    f.evidence_marked(
        first.span,
        format!("the Fabric Manager stops at start-up: its configuration item {what} has an invalid value"),
        what,
    );
    if looped {
        f.evidence(
            last.span,
            format!("the same error again: {n} times, the Fabric Manager restarted each time and failing the same way"),
        );
    }
    let failed = unit_failed(incident);
    for m in failed.iter().take(2) {
        f.evidence(m.span, "the unit fails");
    }
    f.condition(
        format!("the Fabric Manager rejected its configuration item {what}"),
        true,
    );
    let again = f.condition(
        "the same error repeats: it is restarted and fails again",
        looped,
    );
    let unit = f.condition(
        "the unit's own failure is in the inputs",
        !failed.is_empty(),
    );
    f.title = if looped {
        format!(
            "the Fabric Manager fails at start-up on its configuration item {what}, over and over"
        )
    } else {
        format!("the Fabric Manager fails at start-up on its configuration item {what}")
    };
    f.headline = if looped {
        format!(
            "NVIDIA's Fabric Manager stops at start-up because its configuration item {what} has an invalid value, and is restarted into the same error ({n} times): the NVSwitch fabric is never configured, so CUDA on these GPUs cannot start (error 802)."
        )
    } else {
        format!(
            "NVIDIA's Fabric Manager stops at start-up because its configuration item {what} has an invalid value: the NVSwitch fabric is not configured, so CUDA on these GPUs cannot start (error 802) until it runs."
        )
    };
    f.chain
        .push("CUDA on the NVSwitch GPUs cannot start: the fabric is not configured".to_owned());
    f.chain.push(format!(
        "nv-fabricmanager exits at start-up on fabricmanager.cfg's {what}{}",
        if looped {
            ", every time it is restarted"
        } else {
            ""
        }
    ));
    f.chain.push(format!(
        "{what} names something this host or this release does not have (a path whose folder is missing, a value out of range)"
    ));
    f.explanation = "The Fabric Manager checks each item of its configuration file before it starts; a path whose folder does not exist, or a number out of range, stops it with this one line. Restarting it changes nothing: the file, or the folders it names, must change.".to_owned();
    f.actions.push(Action::advice(
        format!("read {what} in the Fabric Manager's configuration and check that what it names exists on the host (for a path, its folder; the topology files of this GPU generation where TOPOLOGY_FILE_PATH points)"),
        Some(&format!(
            "grep -n '^{what}' /usr/share/nvidia/nvswitch/fabricmanager.cfg"
        )),
    ));
    f.actions.push(Action::advice(
        "compare the file with the default the installed nvidia-fabricmanager package ships, and its version with the driver's",
        Some("nv-fabricmanager --version; cat /proc/driver/nvidia/version"),
    ));
    f.actions.push(Action::advice(
        "once fixed, restart the unit and read its log",
        Some("systemctl restart nvidia-fabricmanager; journalctl -u nvidia-fabricmanager -n 50"),
    ));
    // One line proves the failure; its repeats prove the loop; the unit's
    // own failure line ties it to the unit.
    f.confidence = round2(match (again, unit) {
        (true, true) => 0.85,
        (true, false) => 0.8,
        (false, true) => 0.7,
        (false, false) => 0.6,
    });
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// siderolabs/extensions#511's line (the `<node ip>` placeholder is the
    /// reporter's).
    const LINE: &str = "<node ip>: fabric manager config file item: FABRIC_NODE_CONFIG_FILE has an invalid value\n";

    #[test]
    fn one_config_error_is_a_start_up_failure_and_repeats_a_loop() {
        let one = findings(LINE);
        assert_eq!(one.len(), 1, "{one:?}");
        assert_eq!(one[0].category, Category::ServerException);
        assert!(
            one[0].headline.contains("FABRIC_NODE_CONFIG_FILE"),
            "{}",
            one[0].headline
        );
        let three = findings(&LINE.repeat(3));
        assert_eq!(three.len(), 1, "{three:?}");
        assert_eq!(three[0].category, Category::UnitCrashLoop);
        assert_eq!(three[0].occurrences, 3);
        assert!(three[0].confidence > one[0].confidence);
    }

    #[test]
    fn another_fabric_manager_line_is_not_this_failure() {
        let text = "Nov 15 14:15:47 leon-NF5468M6 nv-fabricmanager[4177]: request to query NVSwitch device information from NVSwitch driver failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]\n";
        assert!(findings(text).is_empty());
    }
}
