//! `nvidia-driver-not-loaded`: nvidia-smi cannot talk to a driver, or sees
//! no GPU at all.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Incident, UnitEventKind};
use crate::model::PackageChange;
use crate::rules::support::{capitalise, confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: NvidiaDriverNotLoaded = NvidiaDriverNotLoaded;

pub struct NvidiaDriverNotLoaded;

static NOT_LOADED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver|^No devices were found\s*$")
        .expect("regex")
});
/// The module failing to load: udev's `nvidia: Process '/sbin/modprobe
/// nvidia-uvm' failed with exit code 1.` (systemd-udevd's spawn report),
/// and modprobe's own `modprobe: ERROR: could not insert 'nvidia': …` /
/// `modprobe: FATAL: Module nvidia not found in directory /lib/modules/…`.
static LOAD_FAILED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        Process\x20'(?:/usr)?/s?bin/modprobe\x20(?:-\S+\x20)*(?P<udev>nvidia[0-9A-Za-z_-]*)[^']*'\x20failed\x20with\x20exit\x20code\x20(?P<code>[0-9]+)
        |modprobe:\x20ERROR:\x20could\x20not\x20insert\x20'(?P<insert>nvidia[0-9A-Za-z_-]*)':\x20(?P<why>.+)
        |modprobe:\x20FATAL:\x20Module\x20(?P<missing>nvidia[0-9A-Za-z_-]*)\x20not\x20found",
    )
    .expect("regex")
});
/// The core module came up and went again: `nvidia-nvlink: Unregistered
/// Nvlink Core, major device number 509`, right after `… is being
/// initialized`, when nvidia.ko's init fails.
static NVLINK_UNREGISTERED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"nvidia-nvlink: Unregistered Nvlink Core").expect("regex"));
static FELL_OFF: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"fallen off the bus|NVRM: Xid \([^)]*\): 79,").expect("regex"));

static META: RuleMeta = RuleMeta {
    id: "nvidia-driver-not-loaded",
    category: Category::DriverNotLoaded,
    severity: Severity::Critical,
    summary: "nvidia-smi cannot reach the NVIDIA driver, or the driver sees no GPU",
    anchors: &[
        "couldn't communicate with the NVIDIA driver",
        "No devices were found",
        "modprobe",
        "Unregistered Nvlink Core",
    ],
    doc: r#"
## What it means
`NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA
driver`: the kernel module is not loaded. `No devices were found`: it is
loaded but sees no GPU.

## Why it happens
A kernel update without a matching DKMS build, a blacklisted module, Secure
Boot refusing an unsigned module; or every GPU fell off the bus.

udev's `Process '/sbin/modprobe nvidia-uvm' failed with exit code 1`,
`modprobe: ERROR: could not insert 'nvidia': …` and `modprobe: FATAL:
Module nvidia not found in directory /lib/modules/…` say the module did
not load; `nvidia-nvlink: Unregistered Nvlink Core` right after it was
initialised says nvidia.ko's own start failed. Services that need the
module (nvidia-persistenced, fabric manager) then fail in a loop: a
consequence.

## How to confirm
`lsmod | grep nvidia`, `dkms status`, the kernel log for module load errors
or Xid 79.

## How to fix
Build or install the module for the running kernel (`dkms autoinstall`) and
reboot; if the GPUs fell off the bus, follow that finding instead.

## Safety
Advice only: module and kernel changes need a maintenance window.
"#,
};

impl Rule for NvidiaDriverNotLoaded {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = matches(incident, &NOT_LOADED).map(|(m, _)| m).collect();
        let loads: Vec<_> = matches(incident, &LOAD_FAILED).collect();
        if hits.is_empty() && loads.is_empty() {
            return;
        }
        // All GPUs lost after a bus fault look the same from nvidia-smi;
        // that is the fell-off-the-bus finding's story, not a driver problem.
        if matches(incident, &FELL_OFF).next().is_some() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(hits.iter().copied()) {
            f.evidence(m.span, format!("nvidia-smi cannot use the driver ({n}x)"));
        }
        for (m, c) in loads.iter().take(4) {
            f.evidence(m.span, load_note(c));
        }
        if !loads.is_empty() {
            for (m, n) in distinct(matches(incident, &NVLINK_UNREGISTERED).map(|(m, _)| m))
                .into_iter()
                .take(1)
            {
                f.evidence(
                    m.span,
                    format!("the driver's core came up and was unloaded again ({n}x): nvidia.ko failed to start"),
                );
            }
        }
        // The driver's own daemons (nvidia-persistenced, the fabric
        // manager) cannot start without the module: their failures are
        // consequences, cited as such.
        if !loads.is_empty() {
            cite_daemons(&mut f, incident);
        }
        // The package manager's last change to the driver: an upgrade the
        // module for the running kernel did not follow (unattended-upgrade
        // at night, a new kernel without a DKMS build).
        cite_upgrade(&mut f, incident);
        let no_module =
            !loads.is_empty() || hits.iter().any(|m| m.text.contains("couldn't communicate"));
        f.condition(
            if hits.is_empty() {
                "the module failed to load"
            } else {
                "nvidia-smi failed to reach the driver or found no GPU"
            },
            true,
        );
        f.condition(
            "no GPU fell off the bus (that would explain it instead)",
            true,
        );
        f.title = if !loads.is_empty() {
            "the NVIDIA kernel module fails to load".to_owned()
        } else if no_module {
            "the NVIDIA kernel module is not loaded".to_owned()
        } else {
            "the NVIDIA driver sees no GPU".to_owned()
        };
        f.headline = format!(
            "{}: no process can use a GPU on this host.",
            capitalise(&f.title)
        );
        f.chain
            .push("nvidia-smi fails and CUDA finds no device".to_owned());
        f.chain.push(f.title.clone());
        f.explanation = "Usually a kernel update without a module built for it, a blacklisted module or Secure Boot refusing an unsigned module.".to_owned();
        f.actions.push(Action::advice(
            "check whether the module is loaded and built for the running kernel",
            Some("lsmod | grep nvidia; dkms status; uname -r"),
        ));
        if !loads.is_empty() {
            f.actions.push(Action::advice(
                "load the module by hand to see the kernel's reason, and check Secure Boot (an unsigned module is refused)",
                Some("modprobe nvidia; dmesg | grep -i nvidia | tail -n 20; mokutil --sb-state"),
            ));
        }
        f.actions.push(Action::advice(
            "look for module load errors in the kernel log",
            Some("journalctl -k -b | grep -iE 'nvidia|NVRM'"),
        ));
        f.confidence = confidence(&f, 0.8, 0.95);
        out.push(f);
    }
}

/// What a failed module load says: udev's modprobe exit code, modprobe's
/// reason for not inserting the module, or the module it cannot find.
fn load_note(c: &regex::Captures<'_>) -> String {
    if let Some(module) = c.name("udev") {
        format!(
            "udev: modprobe {} failed with exit code {}",
            module.as_str(),
            &c["code"]
        )
    } else if let Some(module) = c.name("insert") {
        format!(
            "modprobe could not load {}: {}",
            module.as_str(),
            c["why"].trim()
        )
    } else {
        format!(
            "modprobe finds no {} module for the running kernel",
            &c["missing"]
        )
    }
}

/// Cites on `f`, as consequences, the driver's own daemons (`nvidia-*`
/// units: nvidia-persistenced, the fabric manager) that systemd gave up on
/// or that failed, and names their units.
fn cite_daemons(f: &mut Finding, incident: &Incident) {
    for (name, unit) in incident
        .units
        .iter()
        .filter(|(n, _)| n.starts_with("nvidia-"))
    {
        let given_up = unit.events.iter().find(|e| {
            matches!(
                e.kind,
                UnitEventKind::StartRepeatedTooQuickly | UnitEventKind::StartLimitHit
            )
        });
        let failed = unit.events.iter().find(|e| {
            matches!(
                e.kind,
                UnitEventKind::FailedToStart | UnitEventKind::FailedWithResult(_)
            )
        });
        if let Some(e) = given_up.or(failed) {
            f.entities.units.insert(name.clone());
            let said = match e.kind {
                UnitEventKind::StartRepeatedTooQuickly => "Start request repeated too quickly",
                UnitEventKind::StartLimitHit => "start-limit-hit",
                _ => "failed",
            };
            f.evidence(
                e.span,
                format!(
                    "systemd: {name}: {said}; it cannot start without the module (a consequence)"
                ),
            );
        }
    }
}

/// Cites on `f` the package manager's last change to the NVIDIA driver (an
/// upgrade the module for the running kernel did not follow), if any.
fn cite_upgrade(f: &mut Finding, incident: &Incident) {
    let upgrade = incident
        .facts
        .package_changes
        .iter()
        .filter(|c| c.is_nvidia_driver() && c.to.is_some())
        .max_by_key(|c| (c.time, c.span));
    if let Some(c) = upgrade {
        let to = c.to.as_deref().unwrap_or_default();
        let to = PackageChange::driver_version(to).unwrap_or(to);
        let from = c
            .from
            .as_deref()
            .map(|v| format!(" from {}", PackageChange::driver_version(v).unwrap_or(v)))
            .unwrap_or_default();
        let by =
            c.by.as_deref()
                .and_then(|b| b.split_whitespace().next())
                .map(|b| format!(" by {}", b.rsplit('/').next().unwrap_or(b)))
                .unwrap_or_default();
        f.evidence(
            c.span,
            format!(
                "{} was changed{from} to {to}{by}: the driver's packages changed before it",
                c.package
            ),
        );
    }
}
