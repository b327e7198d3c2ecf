//! `cuda-unavailable`: the server found no usable CUDA device, and why:
//! a driver too old for the CUDA build, GPUs hidden from the process, a
//! CPU-only PyTorch, exclusive-process mode.

mod node;

use std::sync::LazyLock;

use regex::Regex;

use crate::catalogs::Via;
use crate::correlate::{Gpu, Incident};
use crate::model::Message;
use crate::rules::support::{confidence, distinct, matches, warning_lines};
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
        // A program's own account of a context it could not create on any
        // GPU, without CUDA's reason: last, so that a reason wins.
        (
            "row:stacks-kaldi.no-unused-gpu|stacks-kaldi.gpu-retry|stacks-kaldi.gpu-wait",
            Category::GpuMemoryHeldByOtherProcess,
            "no GPU would take another CUDA context: in an exclusive compute mode each already holds another process's",
            "find the processes on the GPUs (nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv) and wait for them (Kaldi's --use-gpu=wait) or stop them, or run fewer jobs than GPUs",
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

/// CUDA's `cudaErrorDevicesUnavailable` (46): busy or unavailable.
const BUSY: &str = "cuda.devices-unavailable";

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
driver on your system is too old`, `no CUDA-capable device is detected`;
or a program found no GPU that would take its CUDA context (Kaldi's
`Will try again to get a GPU after 20 seconds`, `Failed to create CUDA
context, no more unused GPUs?`). CUDA's reason quoted by Triton's
pinned memory pool (`failed to allocate pinned system memory: CUDA driver
version is insufficient for CUDA runtime version`) is not read here: Triton
prints it whenever it runs without a GPU and goes on without the pool (a
warning from 21.04), and the start-up's other errors are the cause.

## Why it happens
A PyTorch/vLLM wheel built for a newer CUDA than the driver supports; GPUs
hidden from the process (`CUDA_VISIBLE_DEVICES` empty or wrong, a container
started without GPU access); a CPU-only PyTorch; exclusive-process mode with
the GPU taken: an `nvidia-smi` row in `E. Process` or `E. Thread` mode
with memory in use or utilisation is a GPU whose one context another
process holds (its PID where the table lists one). Inside a batch job
whose abort names the compute node (Cray MPICH's `MPICH ERROR [Rank 2047]
[job id 57638547.0] [DATE] [nid004069] - Abort(1) …`) and with no holder
shown, "busy or unavailable" is read as that node's GPU in trouble
(category `xid-other`, 0.55): the job owns the node's GPUs, so the node is
named to check, report and exclude (`--exclude=nid004069`). (A driver that is not loaded or mismatched, and error 802 on
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
        // A warning row's line that quotes CUDA's reason (Triton's pinned
        // memory pool, catalogs/stacks-trtllm.toml) is no failure here.
        let warned = warning_lines(incident);
        let Some((cause, hits)) = CAUSES.iter().find_map(|c| {
            // Each line with the driver's CUDA version when it says one.
            let hits: Vec<(&Message, Option<u32>)> = match &c.lines {
                Lines::Row(ids) => ids
                    .split('|')
                    .flat_map(|id| incident.known(id))
                    .map(|(m, _)| (m, None))
                    .collect(),
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
            let hits: Vec<(&Message, Option<u32>)> = hits
                .into_iter()
                .filter(|(m, _)| !warned.contains(&m.span))
                .collect();
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
            programs_account(incident, &mut f);
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
        if matches!(cause.lines, Lines::Row(BUSY)) {
            let lines: Vec<&Message> = hits.iter().map(|(m, _)| *m).collect();
            node::apply(incident, &mut f, &lines);
        }
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

/// A program's own lines about the contexts it could not create (Kaldi's
/// `no more unused GPUs?`, its retry and its per-device reasons), cited
/// beside CUDA's error: they say what the program did about it and name
/// the GPUs it tried.
fn programs_account(incident: &Incident, f: &mut Finding) {
    for (id, what) in [
        (
            "stacks-kaldi.contexts-refused",
            "Kaldi's reason for each GPU it tried",
        ),
        (
            "stacks-kaldi.gpu-retry",
            "Kaldi found no free GPU and tries once more",
        ),
        (
            "stacks-kaldi.gpu-wait",
            "Kaldi waits for a GPU to come free (--use-gpu=wait)",
        ),
        (
            "stacks-kaldi.no-unused-gpu",
            "Kaldi gave up: no GPU would take its context",
        ),
    ] {
        let lines: Vec<&Message> = incident.known(id).map(|(m, _)| m).collect();
        for m in distinct(lines.iter().copied())
            .into_iter()
            .map(|(m, _)| m)
            .take(2)
        {
            if !f.evidence.iter().any(|e| e.span == m.span) {
                f.evidence(m.span, what);
            }
        }
    }
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
        if exclusive_taken(incident, f, g, mib) {
            continue;
        }
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

/// More than an idle GPU of any generation shows (a K80's 66 MiB).
const EXCLUSIVE_USED_MIB: u64 = crate::rules::support::IDLE_GPU_MAX_MIB;

/// A GPU in an exclusive compute mode (`E. Process`, `E. Thread`) takes one
/// context: one that computes, holds memory or lists a process has it
/// taken, whoever's it is. Cites its row (the memory, the mode) and its
/// holders when the table lists them; whether it was such a GPU.
fn exclusive_taken(incident: &Incident, f: &mut Finding, g: &Gpu, mib: u64) -> bool {
    let Some(mode) = g.compute_mode.as_deref().filter(|m| m.starts_with("E. ")) else {
        return false;
    };
    let holders: Vec<_> = incident.processes_on(g.index).collect();
    let busy = g.utilization_pct.is_some_and(|u| u > 0);
    if mib < EXCLUSIVE_USED_MIB && !busy && holders.is_empty() {
        return false;
    }
    let util = g
        .utilization_pct
        .map(|u| format!(", {u}% busy"))
        .unwrap_or_default();
    let who = match holders.as_slice() {
        [] => "no process is listed: another process's, here or in another container".to_owned(),
        [p] => format!("PID {} ({})'s", p.pid, p.name),
        many => format!("held by {} processes", many.len()),
    };
    if let Some(span) = g.usage_span.or(g.spans.first().copied()) {
        f.evidence_marked(
            span,
            format!(
                "GPU {} is in exclusive compute mode ({mode}) with {mib} MiB in use{util}: its one context is taken ({who})",
                g.index
            ),
            mode.to_owned(),
        );
    }
    for p in &holders {
        f.entities.pids.insert(p.pid);
        if let Some(span) = p.spans.first() {
            f.evidence(*span, format!("PID {} holds GPU {}", p.pid, g.index));
        }
    }
    f.condition(
        format!(
            "GPU {} is in an exclusive compute mode ({mode}) and in use",
            g.index
        ),
        true,
    );
    true
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    /// https://github.com/kaldi-asr/kaldi/issues/2624: Kaldi's per-device
    /// reasons and its give-up line; both GPUs are the finding's.
    #[test]
    fn kaldis_account_names_every_gpu_it_tried() {
        let text = "\
LOG (nnet3-chain-train[5.4]:SelectGpuId():cu-device.cc:159) num-gpus=2. Device 0: all CUDA-capable devices are busy or unavailable.  Device 1: all CUDA-capable devices are busy or unavailable.  
ERROR (nnet3-chain-train[5.4]:SelectGpuId():cu-device.cc:160) Failed to create CUDA context, no more unused GPUs?
";
        let f = crate::testing::findings_of(super::META.id, text);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
        assert_eq!(
            f[0].entities.gpus.iter().copied().collect::<Vec<_>>(),
            [0, 1]
        );
        let cited: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
        assert_eq!(cited, [1, 2]);
    }

    /// https://github.com/kaldi-asr/kaldi/pull/386: Kaldi's retry with no
    /// CUDA error, then the table it prints: both K10s in `E. Thread` mode
    /// with memory in use are cited as taken.
    #[test]
    fn a_retry_beside_exclusive_gpus_in_use_is_gpus_held_by_others() {
        let text = "\
WARNING (cu-vector-test:SelectGpuId():cu-device.cc:130) Will try again to get a GPU after 20 seconds.
Mon Dec  7 23:16:30 2015
+------------------------------------------------------+
| NVIDIA-SMI 346.46     Driver Version: 346.46         |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla K10.G2.8GB    Off  | 0000:07:00.0     Off |                    0 |
| N/A   45C    P0    50W / 117W |    574MiB /  3583MiB |     16%    E. Thread |
+-------------------------------+----------------------+----------------------+
|   1  Tesla K10.G2.8GB    Off  | 0000:08:00.0     Off |                    0 |
| N/A   43C    P0    57W / 117W |    574MiB /  3583MiB |     24%    E. Thread |
+-------------------------------+----------------------+----------------------+
";
        let f = crate::testing::findings_of(super::META.id, text);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
        let cited: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
        assert_eq!(cited, [1, 10, 13]);
        assert!(f[0].evidence[1].note.contains("E. Thread"));
    }

    /// The same retry beside a GPU in the Default compute mode: its memory
    /// in use is no taken context (several processes may share it), so
    /// only the retry is cited.
    #[test]
    fn default_mode_gpus_in_use_are_not_cited_as_taken() {
        let text = "\
WARNING (cu-vector-test:SelectGpuId():cu-device.cc:130) Will try again to get a GPU after 20 seconds.
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla K10.G2.8GB    Off  | 0000:07:00.0     Off |                    0 |
| N/A   45C    P0    50W / 117W |    574MiB /  3583MiB |     16%      Default |
+-------------------------------+----------------------+----------------------+
";
        let f = crate::testing::findings_of(super::META.id, text);
        assert_eq!(f.len(), 1);
        let cited: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
        assert_eq!(cited, [1]);
    }
}
