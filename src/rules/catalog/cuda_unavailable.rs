//! `cuda-unavailable`: the server found no usable CUDA device, and why:
//! a driver too old for the CUDA build, GPUs hidden from the process, a
//! CPU-only PyTorch, exclusive-process mode.

use std::sync::LazyLock;

use regex::Regex;

use crate::catalogs::Via;
use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: CudaUnavailable = CudaUnavailable;

pub struct CudaUnavailable;

struct Cause {
    lines: Lines,
    category: Category,
    what: &'static str,
    fix: &'static str,
}

/// How a cause's lines are found: a catalog row (its wordings, in every
/// wrapper the catalog knows), or a pattern of this rule's own.
enum Lines {
    Row(&'static str),
    Pattern(Regex),
    /// Any code PyTorch's `Unexpected error from cudaGetDeviceCount() …
    /// Error N: …` names, but those with findings of their own.
    DeviceCount,
}

/// The CUDA catalog's wrapper for PyTorch's device-count error.
const DEVICE_COUNT: &str = "cuda.wrapper.torch-device-count";
/// Codes of that message that other findings explain better: 802 (the
/// Fabric Manager), 803 and 804 (the driver and its user-space library).
const DEVICE_COUNT_OWN: &[&str] = &[
    "cuda.system-not-ready",
    "cuda.system-driver-mismatch",
    "cuda.compat-not-supported-on-device",
];

/// Most specific first. CUDA's own codes (35, 46, 100) are catalog rows,
/// read in every wrapper the catalog knows; the other patterns are
/// PyTorch's own words. Error 802 (Fabric Manager), 803/804 (the catalog's
/// driver-library rows), a driver that is not loaded or mismatched, and
/// "no kernel image" have findings of their own.
static CAUSES: LazyLock<Vec<Cause>> = LazyLock::new(|| {
    [
        (
            r"The NVIDIA driver on your system is too old \(found version (?P<v>[0-9]+)\)",
            Category::DriverLibraryMismatch,
            "the NVIDIA driver is too old for the CUDA version PyTorch was built with",
            "install a PyTorch/vLLM/SGLang build for the driver's CUDA version (nvidia-smi's header shows it), or upgrade the driver",
        ),
        (
            "row:cuda.insufficient-driver",
            Category::DriverLibraryMismatch,
            "the NVIDIA driver is too old for the CUDA runtime the program was built with",
            "install a build of the program (PyTorch, vLLM, a container image) for the driver's CUDA version (nvidia-smi's header shows it), or upgrade the driver",
        ),
        (
            r"Torch not compiled with CUDA enabled",
            Category::Unknown,
            "the installed PyTorch is a CPU-only build",
            "install the CUDA build of PyTorch in the server's environment",
        ),
        (
            "row:cuda.devices-unavailable",
            Category::GpuMemoryHeldByOtherProcess,
            "the GPUs are in exclusive-process mode and another process holds them",
            "find the process on the GPU (nvidia-smi) or set the compute mode to Default (nvidia-smi -c 0)",
        ),
        (
            "row:cuda.no-device",
            Category::Unknown,
            "no GPU is visible to the process (CUDA_VISIBLE_DEVICES, container GPU access, or a GPU in error)",
            "check CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES in the unit or container, and that nvidia-smi sees the GPUs on the host",
        ),
        (
            r"No CUDA GPUs are available|CUDA driver initialization failed|Found no NVIDIA driver on your system|CUDA unknown error - this may be due to an incorrectly set up environment",
            Category::Unknown,
            "no GPU is visible to the process (CUDA_VISIBLE_DEVICES, container GPU access, or a GPU in error)",
            "check CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES in the unit or container, and that nvidia-smi sees the GPUs on the host",
        ),
        (
            "device-count",
            Category::Unknown,
            "no GPU is visible to the process (CUDA_VISIBLE_DEVICES, container GPU access, or a GPU in error)",
            "check CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES in the unit or container, and that nvidia-smi sees the GPUs on the host",
        ),
    ]
    .into_iter()
    .map(|(p, category, what, fix)| Cause {
        lines: match p.strip_prefix("row:") {
            Some(row) => Lines::Row(row),
            None if p == "device-count" => Lines::DeviceCount,
            None => Lines::Pattern(Regex::new(p).expect("cuda regex")),
        },
        category,
        what,
        fix,
    })
    .collect()
});

/// These have rules of their own that name the cause better.
static OWN_RULES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Error 802|system not yet initialized|Error 803|Driver/library version mismatch|couldn't communicate with the NVIDIA driver|No devices were found|no kernel image is available")
        .expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "cuda-unavailable",
    category: Category::Unknown,
    severity: Severity::Critical,
    summary: "the server found no usable CUDA device",
    anchors: &[
        "driver on your system is too old",
        "Torch not compiled with CUDA enabled",
        "No CUDA GPUs are available",
        "CUDA driver initialization failed",
        "Found no NVIDIA driver",
        "CUDA unknown error",
    ],
    doc: r#"
## What it means
PyTorch could not use any GPU: `No CUDA GPUs are available`, `The NVIDIA
driver on your system is too old`, `no CUDA-capable device is detected`.

## Why it happens
A PyTorch/vLLM wheel built for a newer CUDA than the driver supports; GPUs
hidden from the process (`CUDA_VISIBLE_DEVICES` empty or wrong, a container
started without GPU access); a CPU-only PyTorch; exclusive-process mode with
the GPU taken. (A driver that is not loaded or mismatched, and error 802 on
NVSwitch systems, have their own rules.)

## How to confirm
`nvidia-smi` on the host; the unit's or container's environment; `python -c
"import torch; print(torch.version.cuda, torch.cuda.is_available())"` in the
server's environment.

## How to fix
As the cause says: a matching wheel or a newer driver, the right visible
devices, the CUDA build of PyTorch, the Default compute mode.

## Safety
Advice only.
"#,
};

impl Rule for CudaUnavailable {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        if matches(incident, &OWN_RULES).next().is_some() {
            return;
        }
        let Some((cause, hits)) = CAUSES.iter().find_map(|c| {
            // Each line with the driver's CUDA version when it says one.
            let hits: Vec<(&Message, Option<u32>)> = match &c.lines {
                Lines::Row(id) => incident.known(id).map(|(m, _)| (m, None)).collect(),
                Lines::DeviceCount => incident
                    .known
                    .iter()
                    .filter(|k| matches!(k.hit.via, Via::Wrapper(w) if w.id == DEVICE_COUNT))
                    .filter(|k| {
                        !k.hit
                            .row
                            .is_some_and(|r| DEVICE_COUNT_OWN.contains(&r.id.as_str()))
                    })
                    .map(|k| (&incident.facts.messages[k.message], None))
                    .collect(),
                Lines::Pattern(re) => matches(incident, re)
                    .map(|(m, caps)| (m, caps.name("v").and_then(|v| v.as_str().parse().ok())))
                    .collect(),
            };
            (!hits.is_empty()).then_some((c, hits))
        }) else {
            return;
        };
        let mut f = Finding::new(META.id, cause.category, META.severity);
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(3) {
            f.evidence(m.span, format!("CUDA is unavailable ({n}x)"));
        }
        // "too old (found version 12080)": the driver's CUDA version x 1000.
        let found = hits.iter().find_map(|(_, v)| *v);
        let driver_cuda = found.map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
        f.condition("PyTorch reported that CUDA is unavailable", true);
        f.condition(
            "nvidia-smi sees GPUs on the host",
            !incident.gpus.is_empty(),
        );
        f.title = format!("CUDA is unavailable: {}", cause.what);
        f.headline = match &driver_cuda {
            Some(v) => format!(
                "CUDA is unavailable: {} (the driver supports CUDA {v}).",
                cause.what
            ),
            None => format!("CUDA is unavailable: {}.", cause.what),
        };
        if cause.category == Category::GpuMemoryHeldByOtherProcess {
            held_contexts(incident, &mut f);
        }
        let mut fix = cause.fix.to_owned();
        if cause.category == Category::DriverLibraryMismatch {
            if let Some(driver) = driver_seen(incident, &mut f) {
                f.headline = format!("{} The driver these inputs show is {driver}.", f.headline);
                fix = format!("{fix}: the driver here is {driver}");
            }
        }
        f.chain.push("the server could not use any GPU".to_owned());
        f.chain.push(cause.what.to_owned());
        f.actions.push(Action::advice(fix, None));
        f.actions.push(Action::advice(
            "check what the server's environment sees",
            Some("python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())'; nvidia-smi"),
        ));
        f.confidence = confidence(&f, 0.7, 0.9);
        out.push(f);
    }
}

/// The NVIDIA driver version the inputs show (nvidia-smi's header, the
/// first one), cited: which driver is too old, as printed.
fn driver_seen(incident: &Incident, f: &mut Finding) -> Option<String> {
    let h = incident
        .facts
        .smi_headers
        .iter()
        .find(|h| !h.driver_version.is_empty())?;
    let cuda = h
        .cuda_version
        .as_deref()
        .map(|c| format!(", CUDA {c} at most"))
        .unwrap_or_default();
    f.evidence_marked(
        h.span,
        format!("the host's NVIDIA driver: {}{cuda}", h.driver_version),
        h.driver_version.clone(),
    );
    Some(format!("{}{cuda}", h.driver_version))
}

/// Error 46 is about every device the process could see: each GPU of the
/// snapshot is the finding's, and one that holds memory well above the
/// idle GPUs' (a context of another process, listed or not: in
/// exclusive-process mode any context makes the device unusable) is cited
/// with its figure as nvidia-smi printed it.
fn held_contexts(incident: &Incident, f: &mut Finding) {
    let used: Vec<u64> = incident
        .gpus
        .iter()
        .filter_map(|g| g.memory_used_mib)
        .collect();
    let Some(&idle) = used.iter().min() else {
        return;
    };
    for g in &incident.gpus {
        f.entities.gpus.insert(g.index);
        let Some(mib) = g.memory_used_mib else {
            continue;
        };
        // A context takes a few hundred MiB; an idle GPU a few dozen.
        if mib < CONTEXT_MIB || mib < idle.saturating_mul(4) || (used.len() < 2 && mib < 1024) {
            continue;
        }
        let listed = incident.processes_on(g.index).count();
        let who = if listed == 0 {
            "no process is listed for it: another container's or PID namespace's".to_owned()
        } else {
            format!("{listed} process(es) listed on it")
        };
        if let Some(span) = g.spans.first() {
            f.evidence(
                *span,
                format!("GPU {} already has {mib} MiB in use ({who})", g.index),
            );
        }
        f.condition(
            format!(
                "GPU {} holds another process's context ({mib} MiB)",
                g.index
            ),
            true,
        );
    }
}

/// The least memory a CUDA context of another process takes (MiB).
const CONTEXT_MIB: u64 = 256;
