//! `fabric-manager-mismatch`: on an NVSwitch system CUDA cannot initialise
//! (error 802) because the Fabric Manager is not running or does not match
//! the driver.

use crate::correlate::Incident;
use crate::rules::support::fabric_manager::{FabricManagerUnitEnd, fabric_manager_unit_ends};
use crate::rules::support::{confidence, distinct};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: FabricManagerMismatch = FabricManagerMismatch;

pub struct FabricManagerMismatch;

/// CUDA's error 802 (catalogs/cuda.toml).
const ERROR_802: &str = "cuda.system-not-ready";
/// The Fabric Manager's version check (catalogs/fabricmanager.toml): its
/// version, and the driver's unless the paste cut the line before it.
const FM_VERSION: &str = "fabricmanager.driver-version-mismatch";

/// The unit's ends that say the Fabric Manager went down.
fn down(end: FabricManagerUnitEnd) -> bool {
    !matches!(end, FabricManagerUnitEnd::FailedToStart { by_unit: false })
}

static META: RuleMeta = RuleMeta {
    id: "fabric-manager-mismatch",
    category: Category::DriverLibraryMismatch,
    severity: Severity::Critical,
    summary: "CUDA cannot start on an NVSwitch system: the Fabric Manager is down or does not match the driver",
    anchors: &[
        "system not yet initialized",
        "cudaErrorSystemNotReady",
        "don't match with driver version",
        "driver interface version",
        "nvidia-fabricmanager",
    ],
    doc: r#"
## What it means
On HGX/DGX systems whose GPUs talk through NVSwitch, CUDA stays
uninitialised until `nvidia-fabricmanager` has configured the fabric. Every
CUDA program fails with error 802, `system not yet initialized`.

## Why it happens
The Fabric Manager is not running, or its version differs from the driver's
(`fabric manager NVIDIA GPU driver interface version X don't match with
driver version Y`), typically after a driver upgrade that did not upgrade
the `nvidia-fabricmanager` package in step.

## How to confirm
`systemctl status nvidia-fabricmanager`, `nv-fabricmanager --version`
against `nvidia-smi`'s driver version.

## How to fix
Install the Fabric Manager of exactly the driver's version and start it;
then restart the GPU workloads.

## Safety
Advice only: package changes belong in a maintenance window.
"#,
};

impl Rule for FabricManagerMismatch {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let errors: Vec<_> = incident.known(ERROR_802).map(|(m, _)| m).collect();
        let versions: Vec<_> = incident.known(FM_VERSION).collect();
        if errors.is_empty() && versions.is_empty() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(errors.iter().copied()).into_iter().take(3) {
            f.evidence(m.span, format!("CUDA is not initialised: error 802 ({n}x)"));
        }
        cite_job(incident, &errors, &mut f);
        // A version ends where the sentence does (`… driver version
        // 530.41.03. Please update …`).
        let version = |v: &str| v.trim_end_matches('.').to_owned();
        let fm = |c: &crate::catalogs::Hit<'_>| c.get("fm").map(version).unwrap_or_default();
        let driver = |c: &crate::catalogs::Hit<'_>| {
            c.get("drv")
                .map_or_else(|| "a driver of another version".to_owned(), version)
        };
        for (m, c) in versions.iter().take(1) {
            f.evidence(
                m.span,
                format!("Fabric Manager {} against driver {}", fm(c), driver(c)),
            );
        }
        // The Fabric Manager's own process and unit.
        for m in versions.iter().map(|(m, _)| *m).chain(
            fabric_manager_unit_ends(incident)
                .filter(|(_, end)| down(*end))
                .map(|(m, _)| m),
        ) {
            if let Some(e) = incident.facts.journal.iter().find(|e| e.span == m.span) {
                if let Some(pid) = e.pid.filter(|_| !e.is_pid1()) {
                    f.entities.pids.insert(pid);
                }
                if let Some(u) = e
                    .unit
                    .as_ref()
                    .or(e.pid.and_then(|p| incident.owner(p)).map(|o| &o.unit))
                {
                    f.entities.units.insert(u.clone());
                }
            }
        }
        // The Fabric Manager's own start-up errors are it going down too
        // (catalogs/fabricmanager.toml): error 802 is their consequence.
        let down: Vec<_> = fabric_manager_unit_ends(incident)
            .filter(|(_, end)| down(*end))
            .map(|(m, _)| m)
            .chain(
                incident
                    .known("fabricmanager.config-item-invalid")
                    .map(|(m, _)| m),
            )
            .collect();
        for m in down.iter().take(2) {
            f.evidence(m.span, "the Fabric Manager service failed");
        }
        f.condition(
            "CUDA reported error 802 (system not yet initialized)",
            !errors.is_empty(),
        );
        f.condition(
            "the Fabric Manager's version differs from the driver's",
            !versions.is_empty(),
        );
        f.condition("the Fabric Manager service failed", !down.is_empty());
        if errors.is_empty() && down.is_empty() {
            return;
        }
        let pair = versions
            .first()
            .map(|(_, c)| format!(" (Fabric Manager {}, driver {})", fm(c), driver(c)));
        f.title = match &pair {
            Some(p) => format!("the Fabric Manager does not match the driver{p}"),
            None => "CUDA waits for the Fabric Manager (error 802)".to_owned(),
        };
        f.headline = match (&pair, down.is_empty()) {
            (Some(p), _) => format!("CUDA cannot initialise on this NVSwitch system because the Fabric Manager is of another version than the driver{p}."),
            (None, false) => "CUDA cannot initialise on this NVSwitch system because the Fabric Manager is not running.".to_owned(),
            // Only CUDA's error: what 802 means on an NVSwitch system, the
            // daemon's state not in the inputs.
            (None, true) => "CUDA refuses work with error 802 (system not yet initialized): on an NVSwitch system that is the Fabric Manager not running or not of the driver's version; its state is not in the inputs.".to_owned(),
        };
        f.chain
            .push("every CUDA program fails with error 802, system not yet initialized".to_owned());
        f.chain.push(f.title.clone());
        f.actions.push(Action::advice(
            "compare the Fabric Manager's version with the driver's and check the service",
            Some("nv-fabricmanager --version; nvidia-smi --query-gpu=driver_version --format=csv,noheader; systemctl status nvidia-fabricmanager"),
        ));
        f.actions.push(Action::advice(
            "install the Fabric Manager of exactly the driver's version, start it, then restart the GPU workloads",
            None,
        ));
        f.confidence = confidence(&f, 0.6, 0.97);
        out.push(f);
    }
}

/// NCCL's `unhandled cuda error` as the framework reports it (PyTorch's
/// `NCCL error in: …ProcessGroupNCCL.cpp:1691, unhandled cuda error`),
/// the nearest before the first 802 of its input (a line that names its
/// source place first): the job that failed on it, its place as printed.
fn cite_job(incident: &Incident, errors: &[&crate::model::Message], f: &mut Finding) {
    let Some(first) = errors.iter().map(|m| m.span).min() else {
        return;
    };
    let job = incident
        .known("nccl.unhandled-cuda-error")
        .filter(|(m, _)| m.span.source == first.source && m.span < first)
        .filter(|(m, _)| first.line - m.span.line <= 5)
        .max_by_key(|(m, _)| (PLACE.is_match(&m.text), m.span));
    if let Some((m, _)) = job {
        let note = "NCCL failed on a CUDA call while building its communicator (`unhandled cuda error`): that call's error is the 802";
        match PLACE.find(&m.text) {
            Some(p) => f.evidence_marked(m.span, note, p.as_str()),
            None => f.evidence(m.span, note),
        }
    }
}

/// A source place as a program prints it (`ProcessGroupNCCL.cpp:1691`).
static PLACE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"[A-Za-z_][A-Za-z0-9_]*\.(?:cpp|cc|cu|c|h|hpp|py):[0-9]+")
        .expect("place regex")
});

#[cfg(test)]
mod tests {
    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// The Akash provider FAQ's `systemctl status nvidia-fabricmanager`
    /// (https://github.com/akash-network/website/pull/632): the version
    /// check's whole line, the driver's version read from its row's capture
    /// (its sentence's full stop left out), the unit's control process
    /// exit as the Fabric Manager going down.
    const WHOLE: &str = "\
Nov 05 13:55:26 node1 systemd[1]: Starting NVIDIA fabric manager service...
Nov 05 13:55:26 node1 nv-fabricmanager[104230]: fabric manager NVIDIA GPU driver interface version 550.127.05 don't match with driver version 550.120. Please update with matching NVIDIA driver package.
Nov 05 13:55:26 node1 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE
";

    #[test]
    fn the_version_pair_and_the_units_end_come_from_their_rows() {
        let f = findings(WHOLE);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].title
                .ends_with("(Fabric Manager 550.127.05, driver 550.120)"),
            "{}",
            f[0].title
        );
        assert!(f[0].evidence.iter().any(|e| e.span.line == 3), "{f:?}");
        assert!(f[0].entities.pids.contains(&104230));
    }

    /// fixtures/real/029 (https://github.com/dstackai/dstack/issues/2348):
    /// CUDA's error 802, and the version line cut after the Fabric
    /// Manager's own version: the cut wording still names it.
    #[test]
    fn a_cut_version_line_still_names_the_fabric_managers_version() {
        let text = "\
/opt/conda/envs/workflow/lib/python3.9/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)
Feb 24 09:28:28 ip-172-31-92-157 nv-fabricmanager[1507]: fabric manager NVIDIA GPU driver interface version 535.183.01 don'
";
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].title
                .contains("(Fabric Manager 535.183.01, driver a driver of another version)"),
            "{}",
            f[0].title
        );
        // Neither CUDA's error nor a failed unit: no finding from the
        // version line alone.
        assert!(findings(&text[text.find("Feb 24").unwrap()..]).is_empty());
    }
}
