//! `xid-app-fault`: Xids that report a fault of one application's GPU work
//! (13, 31, 43, 68, 69), and Xid 45, the driver's cleanup after a process
//! was aborted, which is never a cause by itself.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{KernelEvent, Message, Xid};
use crate::rules::support::{confidence, distinct, kernel_time, matches, seconds_between};
use crate::rules::xid::{self, same_bus};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: XidAppFault = XidAppFault;

pub struct XidAppFault;

mod cleanup;

const FAULTS: [u32; 5] = [13, 31, 43, 68, 69];

/// The sticky CUDA errors a faulting kernel leaves in the application.
static CUDA_FAULT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"an illegal memory access was encountered|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS|CUDA error: unspecified launch failure|CUDA error: misaligned address|CUDA error: an illegal instruction was encountered",
    )
    .expect("regex")
});

/// `(Worker_TP1 pid=4243) ` of vLLM lines.
static LINE_PID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bpid=(?P<pid>[0-9]+)\)").expect("regex"));

/// Process names of model servers, for a PID whose unit is unknown.
const SERVER_NAMES: &[&str] = &["sglang::", "VLLM::", "python", "pt_main_thread", "ray::"];

/// Faults of a whole GPU: the processes of its peers abort after them.
const FATAL: [u32; 9] = [48, 62, 64, 74, 79, 95, 109, 119, 120];

/// How long after a peer GPU's fault its peers' cleanup may come: an NCCL
/// watchdog waits ten minutes by default, older PyTorch thirty.
const PEER_WINDOW_SECS: i64 = 1800;

/// How long after the Xid the application's CUDA error may come.
const PAIR_WINDOW_SECS: i64 = 120;

static META: RuleMeta = RuleMeta {
    id: "xid-app-fault",
    category: Category::XidOther,
    severity: Severity::Error,
    summary: "a GPU kernel of one application faulted (Xid 13, 31, 43, 68, 69); Xid 45 is the driver's cleanup after it",
    anchors: &[
        "illegal memory access",
        "cudaErrorIllegalAddress",
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "unspecified launch failure",
        "misaligned address",
        "illegal instruction",
        "blocked for more than",
    ],
    doc: r#"
## What it means
The driver reported a fault in the GPU work of one process, named by
`pid=` and `name=`:

| Xid | Meaning | Recovery (NVIDIA's catalog) |
|---|---|---|
| 13 | graphics engine exception (out-of-range address, illegal instruction) | restart the application |
| 31 | GPU memory page fault (`MMU Fault: … faulted @ 0x…`) | restart the application |
| 43 | the process's channel was torn down after a software fault | restart the application |
| 68 | video decoder (NVDEC) exception | restart the application |
| 69 | graphics engine class error | restart the application |
| 45 | preemptive cleanup: the driver removed the work of a process that was aborted | none: look at what aborted it |

The application's CUDA context is lost: it reports `CUDA error: an illegal
memory access was encountered` (or `unspecified launch failure`, …) and
exits. The GPU itself stays healthy; NVIDIA's device plugin does not mark it
unhealthy.

## Why it happens
Almost always a bug in a GPU kernel (attention backend, custom all-reduce,
a quantised GEMM, a model-specific op), triggered by a request or a
configuration. Rarely the driver or the hardware: suspect them when faults
repeat on one GPU across unrelated programs. Xid 45 follows a kill (Ctrl-C,
SIGKILL, the OOM killer) or another Xid, and only says the driver cleaned up.

An Xid 45 followed by the kernel's hung-task report (`INFO: task
cache_mgr_event:620917 blocked for more than 120 seconds.`) is no longer
routine cleanup: a task is stuck in uninterruptible sleep (D state), most
often inside the driver, which is wedged. `kill -9` cannot end such a
task and nvidia-smi may hang too; only a GPU reset or a reboot clears it.

## How to confirm
The Xid's `pid=` is the server's process (a scheduler or worker); the
server's log has the CUDA error at the same time. Reproduce with the same
request; run `compute-sanitizer` for the exact kernel.

## How to fix
Restart the service once. If the fault repeats with the same request or
configuration, treat it as a software bug: switch the attention backend,
disable CUDA graphs or custom all-reduce to bisect, upgrade the framework,
report it. If it repeats on one GPU only, run DCGM diagnostics on that GPU.

## Safety
Advice only.
"#,
};

impl Rule for XidAppFault {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let cuda: Vec<&Message> = matches(incident, &CUDA_FAULT).map(|(m, _)| m).collect();
        // One finding per process and GPU.
        let mut groups: Vec<Vec<(&KernelEvent, &Xid)>> = Vec::new();
        for (e, x) in incident.xids().filter(|(_, x)| FAULTS.contains(&x.code)) {
            match groups.iter_mut().find(|g| {
                let (_, y) = g[0];
                y.pid == x.pid && y.name == x.name && same_or_none(&y.bus_id, &x.bus_id)
            }) {
                Some(g) => g.push((e, x)),
                None => groups.push(vec![(e, x)]),
            }
        }
        let single = groups.len() == 1;
        for group in &groups {
            fault(incident, group, &cuda, single, out);
        }
        // A 45 of a process that faulted is folded into its fault finding.
        let rest: Vec<_> = incident
            .xids()
            .filter(|(_, x)| x.code == 45)
            // A 45 the NVLink errors explain is xid-nvlink's victim.
            .filter(|(e, x)| {
                !xid::declared_cause(x).is_some_and(xid::is_nvlink)
                    && !incident.xids().any(|(l, y)| {
                        xid::is_nvlink(y.code)
                            && l.span < e.span
                            && same_bus(y.bus_id.as_deref(), x.bus_id.as_deref())
                    })
            })
            .filter(|(_, x)| {
                !groups
                    .iter()
                    .any(|g| g[0].1.pid.is_some() && g[0].1.pid == x.pid)
            })
            .collect();
        cleanup::cleanups(incident, &rest, out);
    }
}

fn same_or_none(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (None, None) => true,
        _ => same_bus(a.as_deref(), b.as_deref()),
    }
}

/// The finding for the faults of one process on one GPU.
fn fault(
    incident: &Incident,
    group: &[(&KernelEvent, &Xid)],
    cuda: &[&Message],
    single: bool,
    out: &mut Vec<Finding>,
) {
    let (first, x) = group[0];
    let gpu = xid::gpu_at(incident, x.bus_id.as_deref());
    let short = gpu.short();
    let mig = x
        .gpu_instance
        .map(|i| format!(" (MIG instance {i})"))
        .unwrap_or_default();
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.occurrences = group.len() as u32;
    xid::name_gpu(&mut f, &gpu, x.bus_id.as_deref());
    if let Some(pid) = x.pid {
        f.entities.pids.insert(pid);
        if let Some(o) = incident.owner(pid) {
            f.entities.units.insert(o.unit.clone());
        }
    }
    let codes = cite_faults(&mut f, group, &short, &mig);
    cite_cleanup(&mut f, incident, x);
    let paired = cite_cuda(&mut f, incident, cuda, first, x, single);
    let suspect_gpu = several_programs(incident, x);
    f.condition(
        "the driver named the faulting process",
        x.pid.is_some() || x.name.is_some(),
    );
    f.condition("the application's log shows the CUDA error", paired);
    f.condition("the GPU is identified by its index", gpu.index.is_some());
    let list = codes
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let who = xid::owner_of(x);
    f.title = format!("GPU fault in {who} on {short}: Xid {list}");
    f.headline = format!(
        "A GPU kernel of {who} faulted on {short}{mig} ({}): an application-level fault, not a hardware failure; the process's CUDA context is lost and it must restart.",
        xid::describe(x.code)
    );
    if paired {
        f.chain.push(
            "the server failed with a sticky CUDA error (illegal memory access or similar)"
                .to_owned(),
        );
    }
    f.chain.push(format!(
        "a kernel of {who} faulted ({}: {})",
        xid::describe(x.code),
        shorten(&x.message)
    ));
    f.explanation = format!(
        "Xids 13, 31, 43, 68 and 69 report a fault in one application's GPU work; the GPU stays healthy (catalog action: {}). The usual cause is a bug in a kernel triggered by a request or a configuration.{}",
        xid::info(x.code).map_or("", |i| i.bucket),
        if suspect_gpu {
            " Other programs faulted on the same GPU too: that points at the GPU rather than one program."
        } else {
            ""
        }
    );
    f.actions.extend(fault_actions(&short, suspect_gpu));
    f.confidence = confidence(&f, 0.6, 0.9);
    out.push(f);
}

/// Cites each fault line of the group on the GPU `short` (`mig`: its MIG
/// instance, if any) once, and adds its code; returns the codes in order
/// of first appearance.
fn cite_faults(
    f: &mut Finding,
    group: &[(&KernelEvent, &Xid)],
    short: &str,
    mig: &str,
) -> Vec<u32> {
    let mut codes: Vec<u32> = Vec::new();
    for (e, y) in group {
        f.entities.xid.insert(y.code);
        if !codes.contains(&y.code) {
            codes.push(y.code);
        }
        f.evidence_once(
            e.span,
            format!(
                "{} on {short}{mig} in {}: {}",
                xid::describe(y.code),
                xid::owner_of(y),
                shorten(&y.message)
            ),
        );
    }
    codes
}

/// Cites the driver's cleanup (Xid 45) of the faulting process `x`
/// afterwards, a consequence, and adds Xid 45.
fn cite_cleanup(f: &mut Finding, incident: &Incident, x: &Xid) {
    let cleanups: Vec<_> = incident
        .xids()
        .filter(|(_, y)| y.code == 45 && y.pid.is_some() && y.pid == x.pid)
        .collect();
    if let Some((e, _)) = cleanups.first() {
        f.evidence(
            e.span,
            "Xid 45: the driver then removed the process's GPU work (a consequence)",
        );
        f.entities.xid.insert(45);
    }
}

/// Cites up to three distinct CUDA errors of the application's side: from
/// the faulting process `x`, or within the window after its `first` Xid
/// (any, when the times are unknown and it is the `single` group); returns
/// whether there was one.
fn cite_cuda(
    f: &mut Finding,
    incident: &Incident,
    cuda: &[&Message],
    first: &KernelEvent,
    x: &Xid,
    single: bool,
) -> bool {
    let xid_time = kernel_time(incident, first);
    let paired: Vec<&Message> = cuda
        .iter()
        .copied()
        .filter(|m| {
            let same_pid = x.pid.is_some() && pid_of(incident, m) == x.pid;
            let in_window = match (xid_time, incident.time_of(m.span)) {
                (Some(a), Some(b)) => (-5..=PAIR_WINDOW_SECS).contains(&seconds_between(a, b)),
                _ => single,
            };
            same_pid || in_window
        })
        .collect();
    for (m, n) in distinct(paired.iter().copied()).into_iter().take(3) {
        f.evidence(
            m.span,
            format!("the application's side: its CUDA context is lost ({n}x)"),
        );
    }
    !paired.is_empty()
}

/// Whether another named program faulted on the same GPU as `x`: faults of
/// several programs on one GPU point at the GPU instead.
fn several_programs(incident: &Incident, x: &Xid) -> bool {
    incident.xids().any(|(_, y)| {
        FAULTS.contains(&y.code)
            && same_or_none(&y.bus_id, &x.bus_id)
            && y.name.is_some()
            && y.name != x.name
    })
}

/// What to do after an application fault on the GPU `short`: restart once,
/// bisect, and DCGM diagnostics when several programs faulted on it
/// (`suspect_gpu`).
fn fault_actions(short: &str, suspect_gpu: bool) -> Vec<Action> {
    let mut actions = vec![
        Action::advice(
            "restart the service once; if the fault repeats with the same request or configuration, treat it as a software bug",
            None,
        ),
        Action::advice(
            "bisect: switch the attention backend, disable CUDA graphs or custom all-reduce; run the failing request under compute-sanitizer",
            Some("compute-sanitizer --tool memcheck <command>"),
        ),
    ];
    if suspect_gpu {
        actions.push(Action::advice(
            format!("several programs faulted on {short}: run DCGM diagnostics on it"),
            Some("dcgmi diag -r 3"),
        ));
    }
    actions
}

/// The PID that wrote a line: the journal's, or vLLM's `pid=` prefix.
fn pid_of(incident: &Incident, m: &Message) -> Option<u32> {
    incident.journal_writer(m.span).or_else(|| {
        LINE_PID
            .captures(&m.text)
            .and_then(|c| c["pid"].parse().ok())
    })
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(100) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}
