//! `nvml-driver-library-mismatch`: the driver's user-space libraries were
//! upgraded while the old kernel module is still loaded.

use std::sync::LazyLock;

use regex::{Captures, Regex};

use crate::correlate::{Incident, UnitEventKind};
use crate::model::{KernelEvent, KernelEventKind, Message};
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: NvmlDriverLibraryMismatch = NvmlDriverLibraryMismatch;

pub struct NvmlDriverLibraryMismatch;

static MISMATCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)Failed to initialize NVML: Driver/library version mismatch|nvml error: driver/library version mismatch|Impossible to initialize nvidia nvml ?: Driver/library version mismatch")
        .expect("regex")
});
/// The first line of the 575+ report names the client:
/// `NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)`.
static CLIENT_NAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"API mismatch: the client '(?P<name>[^']*)' \(pid (?P<pid>[0-9]+)\)")
        .expect("regex")
});
/// `NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  …` of
/// /proc/driver/nvidia/version: the loaded module.
static PROC_VERSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"NVRM version: NVIDIA UNIX .*?Kernel Module\s+(?P<kernel>[0-9]+\.[0-9]+(?:\.[0-9]+)?)",
    )
    .expect("regex")
});
/// A `dpkg -l` row of a driver package: `ii  nvidia-smi  525.85.12-1  amd64 …`.
static DPKG_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^ii\s+(?P<pkg>(?:lib)?nvidia-[0-9A-Za-z_.+-]*?)(?::[0-9A-Za-z_]+)?\s+(?P<v>[0-9]+\.[0-9]+(?:\.[0-9]+)?)\S*\s")
        .expect("regex")
});
/// apt's history: `Upgrade: libnvidia-common-460:amd64 (460.56-0ubuntu0.20.04.1, 460.73.01-0ubuntu0.20.04.1)`.
static APT_UPGRADE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Upgrade: .*?(?P<pkg>(?:lib)?nvidia-[0-9A-Za-z_.+-]+?)(?::[0-9A-Za-z_]+)? \((?P<old>[0-9]+\.[0-9]+(?:\.[0-9]+)?)[^,)]*, (?P<new>[0-9]+\.[0-9]+(?:\.[0-9]+)?)")
        .expect("regex")
});
/// apt's history: the command that ran the upgrade.
static APT_COMMAND: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^Commandline: (?P<cmd>\S+)").expect("regex"));

static NVML_VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^NVML library version: (?P<v>[0-9.]+)").expect("regex"));

static META: RuleMeta = RuleMeta {
    id: "nvml-driver-library-mismatch",
    category: Category::DriverLibraryMismatch,
    severity: Severity::Critical,
    summary: "the NVIDIA user-space libraries and the loaded kernel module are of different versions",
    anchors: &[
        "version mismatch",
        "API mismatch",
        "NVML library version",
        "NVRM version:",
        "ii  nvidia-",
        "ii  libnvidia-",
        "Upgrade: ",
        "Commandline: ",
    ],
    doc: r#"
## What it means
`Failed to initialize NVML: Driver/library version mismatch`: the NVIDIA
libraries (NVML, libcuda) on disk are of another version than the kernel
module in memory. nvidia-smi fails, and every new CUDA process fails;
processes started before the upgrade keep running.

## Why it happens
The driver packages were upgraded (often by unattended upgrades) without a
reboot. The kernel says `NVRM: API mismatch: the client has the version X,
but this kernel module has the version Y`.

## How to confirm
`cat /proc/driver/nvidia/version` (the module) against `nvidia-smi` /
the package manager's log (the libraries).

## How to fix
In a maintenance window stop the GPU workloads and reboot (or unload and
reload the nvidia modules when nothing uses them). Pin the driver packages
so that they only change with a planned reboot.

## Safety
Advice only: a reboot or a module reload takes down every GPU workload of
the host.
"#,
};

impl Rule for NvmlDriverLibraryMismatch {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let failures: Vec<_> = matches(incident, &MISMATCH).map(|(m, _)| m).collect();
        // The kernel's report, whichever wording and however many lines it
        // took (kernel/nvrm.rs puts its versions together).
        let api = api_reports(incident);
        // The first line of a 575+ report alone (the rest cut off): the
        // mismatch, without its versions.
        let named: Vec<_> = matches(incident, &CLIENT_NAMED)
            .filter(|(m, _)| !api.iter().any(|(e, _, _)| e.span == m.span))
            .collect();
        if failures.is_empty() && api.is_empty() && named.is_empty() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(failures.iter().copied()) {
            f.evidence(m.span, format!("NVML refuses to initialise ({n}x)"));
        }
        cite_cuda(&mut f, incident);
        cite_kernel(&mut f, incident, &named, &api);
        let client = api.first().map(|(_, c, _)| (*c).to_owned());
        let kernel = kernel_version(&mut f, incident, &api);
        f.entities.units.extend(failed_units(incident, &api));
        // What the package manager installed since: the libraries on disk.
        let upgrade = cite_upgrade(&mut f, incident);
        let installed = matches(incident, &DPKG_ROW).next().map(|(m, c)| {
            f.evidence(
                m.span,
                format!("the installed {} package is version {}", &c["pkg"], &c["v"]),
            );
            c["v"].to_owned()
        });
        let library = client
            .or_else(|| {
                matches(incident, &NVML_VERSION).next().map(|(m, c)| {
                    f.evidence(m.span, format!("the libraries are version {}", &c["v"]));
                    c["v"].to_owned()
                })
            })
            .or(installed)
            .or_else(|| upgrade.as_ref().map(|(v, _)| v.clone()));
        f.condition("NVML or the kernel reported the mismatch", true);
        f.condition(
            "both versions are known",
            kernel.is_some() && library.is_some(),
        );
        let versions = match (&library, &kernel) {
            (Some(l), Some(k)) => format!(" (libraries {l}, kernel module {k})"),
            (Some(l), None) => format!(" (libraries now {l})"),
            (None, Some(k)) => format!(" (kernel module {k})"),
            _ => String::new(),
        };
        f.title = format!("driver libraries and kernel module differ{versions}");
        f.headline = format!(
            "The NVIDIA driver was upgraded without a reboot: user-space libraries and the loaded kernel module differ{versions}, so no new CUDA process can start."
        );
        f.chain
            .push("nvidia-smi and new CUDA processes fail to initialise NVML".to_owned());
        f.chain.push(format!("the driver libraries on disk and the loaded kernel module are of different versions{versions}"));
        f.explanation = match upgrade.as_ref().and_then(|(_, by)| by.as_deref()) {
            Some(by) => format!("{by} upgraded the driver packages without a reboot. Processes started before the upgrade keep working; everything started since fails until the module is reloaded."),
            None => "Processes started before the upgrade keep working; everything started since fails until the module is reloaded.".to_owned(),
        };
        f.actions.extend(actions());
        f.confidence = confidence(&f, 0.85, 0.98);
        out.push(f);
    }
}

/// The kernel's API mismatch reports: each line with the client's version
/// and, when the report gives it, the loaded module's.
fn api_reports(incident: &Incident) -> Vec<(&KernelEvent, &str, Option<&str>)> {
    incident
        .facts
        .kernel_events
        .iter()
        .filter_map(|e| match &e.kind {
            KernelEventKind::ApiMismatch {
                client_version,
                kernel_version,
            } => Some((e, client_version.as_str(), kernel_version.as_deref())),
            _ => None,
        })
        .collect()
}

/// Cites up to two distinct lines of CUDA's own word for the same mismatch
/// (error 803), in any wrapper.
fn cite_cuda(f: &mut Finding, incident: &Incident) {
    let cuda: Vec<_> = incident
        .known("cuda.system-driver-mismatch")
        .map(|(m, _)| m)
        .collect();
    for (m, n) in distinct(cuda.into_iter()).into_iter().take(2) {
        f.evidence(
            m.span,
            format!("CUDA refuses the driver too: error 803, unsupported display driver / cuda driver combination ({n}x)"),
        );
    }
}

/// Cites the kernel's side: up to two lone first lines of a 575+ report
/// (`named`, the client process without the versions), and up to two of
/// the `api` reports with the client (named on 575+) and the line with the
/// loaded module's version.
fn cite_kernel(
    f: &mut Finding,
    incident: &Incident,
    named: &[(&Message, Captures<'_>)],
    api: &[(&KernelEvent, &str, Option<&str>)],
) {
    for (m, c) in named.iter().take(2) {
        f.evidence(
            m.span,
            format!(
                "the kernel: the client {} (pid {}) is of another version than the module",
                &c["name"], &c["pid"]
            ),
        );
    }
    for (e, c, k) in api.iter().take(2) {
        // 575+ name the client process: `the client 'nvidia-smi' (pid 849)`.
        let who = matches(incident, &CLIENT_NAMED)
            .find(|(m, _)| m.span == e.span)
            .map(|(_, n)| format!(" ({}, pid {})", &n["name"], &n["pid"]))
            .unwrap_or_default();
        f.evidence(
            e.span,
            format!("the kernel: a client{who} of version {c} talked to it"),
        );
        if let (Some(k), Some(next)) = (k, e.related.first()) {
            f.evidence(*next, format!("the loaded kernel module is version {k}"));
        }
    }
}

/// The loaded kernel module's version: from the `api` reports, else from
/// `/proc/driver/nvidia/version` (cited).
fn kernel_version(
    f: &mut Finding,
    incident: &Incident,
    api: &[(&KernelEvent, &str, Option<&str>)],
) -> Option<String> {
    api.iter()
        .find_map(|(_, _, k)| k.map(str::to_owned))
        .or_else(|| {
            matches(incident, &PROC_VERSION).next().map(|(m, c)| {
                f.evidence(
                    m.span,
                    format!("the loaded kernel module is version {}", &c["kernel"]),
                );
                c["kernel"].to_owned()
            })
        })
}

/// The units that failed next to the kernel's report (`nvidia-docker.service:
/// Main process exited, code=exited, status=1/FAILURE` within 20 lines of an
/// `api` report): the services the mismatch took down.
fn failed_units(incident: &Incident, api: &[(&KernelEvent, &str, Option<&str>)]) -> Vec<String> {
    let near = |span: Span| {
        api.iter()
            .any(|(e, _, _)| e.span.source == span.source && e.span.line.abs_diff(span.line) <= 20)
    };
    let mut units = Vec::new();
    for (name, unit) in &incident.units {
        let failed = unit.events.iter().any(|e| {
            near(e.span)
                && match &e.kind {
                    UnitEventKind::MainProcessExited { status, .. } => !status.starts_with("0/"),
                    UnitEventKind::FailedToStart | UnitEventKind::FailedWithResult(_) => true,
                    _ => false,
                }
        });
        if failed {
            units.push(name.clone());
        }
    }
    units
}

/// Cites the package manager's upgrade of the driver libraries and the
/// command that ran it; returns the new version and the command's name.
fn cite_upgrade(f: &mut Finding, incident: &Incident) -> Option<(String, Option<String>)> {
    matches(incident, &APT_UPGRADE).next().map(|(m, c)| {
        let by = matches(incident, &APT_COMMAND)
            .filter(|(a, _)| a.span.source == m.span.source && a.span.line < m.span.line)
            .last()
            .map(|(a, c)| {
                let cmd = c["cmd"].rsplit('/').next().unwrap_or("").to_owned();
                f.evidence(a.span, format!("the package manager ran as {cmd}"));
                cmd
            });
        f.evidence(
            m.span,
            format!(
                "{} was upgraded from {} to {}{}",
                &c["pkg"],
                &c["old"],
                &c["new"],
                by.as_deref()
                    .map(|b| format!(" by {b}"))
                    .unwrap_or_default()
            ),
        );
        (c["new"].to_owned(), by)
    })
}

/// What to do: compare the versions, reboot in a maintenance window, pin
/// the packages.
fn actions() -> Vec<Action> {
    vec![
        Action::advice(
            "compare the loaded module with the installed libraries",
            Some("cat /proc/driver/nvidia/version; nvidia-smi --version"),
        ),
        Action::advice(
            "in a maintenance window, stop the GPU workloads and reboot the host (or reload the nvidia modules when nothing uses them)",
            None,
        ),
        Action::advice(
            "pin the driver packages so they only change together with a planned reboot",
            Some("apt-mark hold 'nvidia-*' 'libnvidia-*'"),
        ),
    ]
}
