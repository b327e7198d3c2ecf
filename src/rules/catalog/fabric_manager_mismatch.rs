//! `fabric-manager-mismatch`: on an NVSwitch system CUDA cannot initialise
//! (error 802) because the Fabric Manager is not running or does not match
//! the driver.

use crate::correlate::Incident;
use crate::rules::support::fabric_manager::{
    FabricManagerUnitEnd, NotStartedWhy, UNKNOWN_OPTION, fabric_manager_not_started,
    fabric_manager_progress_before, fabric_manager_unit_ends,
};
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
        // The start script's option error over its usage, and its progress
        // lines (support::fabric_manager).
        UNKNOWN_OPTION,
        "Detected NVL5+ system",
        "Detected Pre-NVL5 system",
        "Starting NVIDIA fabric manager daemon",
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
the `nvidia-fabricmanager` package in step. Its own start-up lines say why
it is not running: on NVLink5 systems its start-up check refuses to start
it while the `ib_umad` kernel module is not loaded (`Kernel module "ib_umad"
has not been loaded, fabric manager cannot be started`); started before the
GPUs and NVSwitches are ready it exits with `failed to configure all the
available GPUs or NVSwitches`; a driver container that calls its start
script with an argument it does not take gets `Unknown option: …` and the
script's usage, and no Fabric Manager.

## How to confirm
`systemctl status nvidia-fabricmanager`, `nv-fabricmanager --version`
against `nvidia-smi`'s driver version.

## How to fix
Install the Fabric Manager of exactly the driver's version and start it;
then restart the GPU workloads. Load a kernel module its check asks for
(`modprobe ib_umad`, and at boot); start it through its unit once the GPUs
are up; call its start script with its options (`--fm-config-file FILE`).

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
        let not_started = fabric_manager_not_started(incident);
        if errors.is_empty() && versions.is_empty() && not_started.is_empty() {
            return;
        }
        // A kernel module its check asks for, and nothing else: the fix is
        // loading a module.
        let category = if errors.is_empty()
            && versions.is_empty()
            && not_started
                .iter()
                .all(|n| matches!(n.why, NotStartedWhy::ModuleMissing { .. }))
        {
            Category::DriverNotLoaded
        } else {
            META.category
        };
        let mut f = Finding::new(META.id, category, META.severity);
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
        name_fabric_manager(incident, versions.iter().map(|(m, _)| *m), &mut f);
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
        let why = cite_not_started(incident, &not_started, &mut f);
        f.condition(
            "CUDA reported error 802 (system not yet initialized)",
            !errors.is_empty(),
        );
        f.condition(
            "the Fabric Manager's version differs from the driver's",
            !versions.is_empty(),
        );
        f.condition(
            "the Fabric Manager service failed, or its own lines say it did not start",
            !down.is_empty() || why.is_some(),
        );
        if errors.is_empty() && down.is_empty() && why.is_none() {
            return;
        }
        let pair = versions
            .first()
            .map(|(_, c)| format!(" (Fabric Manager {}, driver {})", fm(c), driver(c)));
        tell(
            &mut f,
            pair.as_deref(),
            why.as_ref(),
            down.is_empty(),
            errors.is_empty(),
        );
        f.chain.push(f.title.clone());
        if let Some(w) = &why {
            f.actions.push(w.action.clone());
        }
        // The version check's advice, unless the Fabric Manager's own lines
        // say another reason and no version is in question.
        if why.is_none() || pair.is_some() {
            f.actions.push(Action::advice(
                "compare the Fabric Manager's version with the driver's and check the service",
                Some("nv-fabricmanager --version; nvidia-smi --query-gpu=driver_version --format=csv,noheader; systemctl status nvidia-fabricmanager"),
            ));
            f.actions.push(Action::advice(
                "install the Fabric Manager of exactly the driver's version, start it, then restart the GPU workloads",
                None,
            ));
        }
        f.confidence = confidence(&f, 0.6, 0.97);
        out.push(f);
    }
}

/// Names the Fabric Manager's own process and unit: those of its version
/// lines (`versions`) and of its unit's ends that took it down.
fn name_fabric_manager<'a>(
    incident: &'a Incident,
    versions: impl Iterator<Item = &'a crate::model::Message>,
    f: &mut Finding,
) {
    let ends = fabric_manager_unit_ends(incident)
        .filter(|(_, end)| down(*end))
        .map(|(m, _)| m);
    for m in versions.chain(ends) {
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
}

/// The finding's title, headline and first link: the version pair when
/// one is in question (`pair`), else the Fabric Manager's own reason
/// (`why`), else CUDA's error alone (`quiet`: no sign of the service).
fn tell(f: &mut Finding, pair: Option<&str>, why: Option<&Why>, quiet: bool, no_errors: bool) {
    f.title = match (pair, why) {
        (Some(p), _) => format!("the Fabric Manager does not match the driver{p}"),
        (None, Some(w)) => format!("the Fabric Manager is not running: {}", w.said),
        (None, None) => "CUDA waits for the Fabric Manager (error 802)".to_owned(),
    };
    f.headline = match (pair, quiet && why.is_none()) {
        (Some(p), _) => format!("CUDA cannot initialise on this NVSwitch system because the Fabric Manager is of another version than the driver{p}."),
        (None, false) => match why {
            Some(w) => format!("The Fabric Manager is not running on this NVSwitch system: {}. Until it runs the GPUs do not join the NVLink fabric and CUDA on them fails with error 802 (system not yet initialized).", w.said),
            None => "CUDA cannot initialise on this NVSwitch system because the Fabric Manager is not running.".to_owned(),
        },
        // Only CUDA's error: what 802 means on an NVSwitch system, the
        // daemon's state not in the inputs.
        (None, true) => "CUDA refuses work with error 802 (system not yet initialized): on an NVSwitch system that is the Fabric Manager not running or not of the driver's version; its state is not in the inputs.".to_owned(),
    };
    f.chain.push(if no_errors {
        "the NVSwitch GPUs do not join the NVLink fabric: CUDA on them fails with error 802 until the Fabric Manager runs".to_owned()
    } else {
        "every CUDA program fails with error 802, system not yet initialized".to_owned()
    });
}

/// What the Fabric Manager's own lines say of why it did not start: the
/// words for the headline, and what to do about it.
struct Why {
    said: String,
    action: Action,
}

/// Cites the Fabric Manager's own lines that say it did not start (the
/// first of each reason, its start script's progress line before the
/// first) and returns the first reason.
fn cite_not_started(
    incident: &Incident,
    not_started: &[crate::rules::support::fabric_manager::NotStarted<'_>],
    f: &mut Finding,
) -> Option<Why> {
    let first = not_started.first()?;
    if let Some(p) = fabric_manager_progress_before(incident, first.message.span) {
        f.evidence_marked(
            p.span,
            "what the Fabric Manager's start-up was doing",
            p.text.trim(),
        );
    }
    let mut seen: Vec<std::mem::Discriminant<NotStartedWhy>> = Vec::new();
    for n in not_started {
        let d = std::mem::discriminant(&n.why);
        let n_of = not_started
            .iter()
            .filter(|o| std::mem::discriminant(&o.why) == d)
            .count();
        if seen.contains(&d) {
            if n_of > 1 && f.evidence.len() < 6 {
                f.evidence(n.message.span, "the same start-up failure, further on");
            }
            continue;
        }
        seen.push(d);
        f.evidence_marked(n.message.span, why_of(&n.why).said, n.matched.as_str());
    }
    Some(why_of(&first.why))
}

/// The words and the action for one reason the Fabric Manager did not start.
fn why_of(why: &NotStartedWhy) -> Why {
    match why {
        NotStartedWhy::ModuleMissing { module } => Why {
            said: format!("its start-up check refused to start it because the kernel module {module} is not loaded"),
            action: Action::advice(
                format!("load {module} now and at every boot, then start the Fabric Manager"),
                Some(&format!(
                    "sudo modprobe {module}; echo {module} | sudo tee /etc/modules-load.d/nvidia-fabricmanager.conf; sudo systemctl restart nvidia-fabricmanager"
                )),
            ),
        },
        NotStartedWhy::FabricNotConfigured => Why {
            said: "it exited because it could not configure all the GPUs and NVSwitches (its local instances did not finish their configuration)".to_owned(),
            action: Action::advice(
                "start the Fabric Manager through its unit once the GPUs and NVSwitches are up (not from an early boot script), and retry before failing; if it fails the same way every time, check the GPUs' and NVSwitches' health",
                Some("journalctl -u nvidia-fabricmanager -n 100; nvidia-smi -q | grep -A3 -i fabric; dmesg | grep -i -e xid -e sxid"),
            ),
        },
        NotStartedWhy::ScriptMisused { option } => Why {
            said: format!("its start script was called with an argument it does not take ({UNKNOWN_OPTION}{option}) and printed its usage instead of starting it"),
            action: Action::advice(
                "call nvidia-fabricmanager-start.sh with its options (the configuration file as `--fm-config-file FILE`), or use a driver container / operator release that does; then check that the Fabric Manager runs",
                Some("ps -ef | grep -e nv-fabricmanager -e nvlsm; nvidia-smi -q | grep -A3 -i fabric"),
            ),
        },
        NotStartedWhy::ProgramFailed { command } => Why {
            said: format!("its start script reports that {command} failed"),
            action: Action::advice(
                "read the Fabric Manager's own error just before its start script's line, and its log",
                Some("journalctl -u nvidia-fabricmanager -n 100; tail -50 /var/log/fabricmanager.log"),
            ),
        },
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
