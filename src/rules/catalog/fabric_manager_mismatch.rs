//! `fabric-manager-mismatch`: on an NVSwitch system CUDA cannot initialise
//! (error 802) because the Fabric Manager is not running or does not match
//! the driver.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: FabricManagerMismatch = FabricManagerMismatch;

pub struct FabricManagerMismatch;

static ERROR_802: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)Error 802: system not yet initialized|CUDA error: system not yet initialized|cudaErrorSystemNotReady").expect("regex")
});
static FM_VERSION: LazyLock<Regex> = LazyLock::new(|| {
    // A paste cut after the first version still says which one it runs.
    Regex::new(r"fabric manager NVIDIA GPU driver interface version (?P<fm>[0-9]+(?:\.[0-9]+)*)(?: don't match with driver version (?P<drv>[0-9]+(?:\.[0-9]+)*))?")
        .expect("regex")
});
static FM_DOWN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"nvidia-fabricmanager\.service: (?:Main process exited|Control process exited|Failed with result)|Failed to start nvidia-fabricmanager")
        .expect("regex")
});

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
        let errors: Vec<_> = matches(incident, &ERROR_802).map(|(m, _)| m).collect();
        let versions: Vec<_> = matches(incident, &FM_VERSION).collect();
        if errors.is_empty() && versions.is_empty() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(errors.iter().copied()).into_iter().take(3) {
            f.evidence(m.span, format!("CUDA is not initialised: error 802 ({n}x)"));
        }
        let driver = |c: &regex::Captures<'_>| {
            c.name("drv")
                .map_or("a driver of another version", |d| d.as_str())
                .to_owned()
        };
        for (m, c) in versions.iter().take(1) {
            f.evidence(
                m.span,
                format!("Fabric Manager {} against driver {}", &c["fm"], driver(c)),
            );
        }
        // The Fabric Manager's own process and unit.
        for m in versions
            .iter()
            .map(|(m, _)| *m)
            .chain(matches(incident, &FM_DOWN).map(|(m, _)| m))
        {
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
        let down: Vec<_> = matches(incident, &FM_DOWN)
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
            .map(|(_, c)| format!(" (Fabric Manager {}, driver {})", &c["fm"], driver(c)));
        f.title = match &pair {
            Some(p) => format!("the Fabric Manager does not match the driver{p}"),
            None => "CUDA waits for the Fabric Manager (error 802)".to_owned(),
        };
        f.headline = format!(
            "CUDA cannot initialise on this NVSwitch system because the Fabric Manager is {}.",
            match &pair {
                Some(p) => format!("of another version than the driver{p}"),
                None => "not running".to_owned(),
            }
        );
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
