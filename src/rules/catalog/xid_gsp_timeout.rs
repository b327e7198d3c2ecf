//! `xid-gsp-timeout`: the GPU's System Processor firmware stopped answering
//! the driver (Xid 119) or failed (Xid 120); the GPU needs a reset.

use crate::correlate::Incident;
use crate::model::{KernelEvent, KernelEventKind, Xid};
use crate::rules::support::{add_owner_units, confidence, kernel_time};
use crate::rules::xid;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: XidGspTimeout = XidGspTimeout;

pub struct XidGspTimeout;

const CODES: [u32; 2] = [119, 120];

/// Processes that talk to every GPU all the time: the GSP call that timed
/// out was theirs, but they did not cause the hang.
const MONITORS: &[&str] = &[
    "nvidia-smi",
    "nv-hostengine",
    "dcgm",
    "dcgmi",
    "dcgm-exporter",
    "nvidia-persiste",
    "nvidia-persistenced",
    "nvsm",
    "node_exporter",
    "nvidia_gpu_expo",
];

static META: RuleMeta = RuleMeta {
    id: "xid-gsp-timeout",
    category: Category::XidOther,
    severity: Severity::Critical,
    summary: "the GPU System Processor (GSP) firmware timed out or failed (Xid 119/120); the GPU needs a reset",
    anchors: &[],
    doc: r#"
## What it means
`NVRM: Xid (PCI:…): 119, pid=…, name=…, Timeout after 6s of waiting for
RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) …`: the
firmware on the GPU's System Processor, which runs most of the driver on
recent GPUs, stopped answering. Xid 120 is an error inside that firmware.
Until the GPU is reset, calls into it hang or fail: servers freeze, NCCL
peers time out, nvidia-smi hangs.

## Why it happens
A firmware or driver bug (some driver branches are known for it), or a GPU
that is hanging. The `name=` of the line is the process whose call timed
out, very often a monitoring process (`nvidia-smi`, `nv-hostengine` of
DCGM, an exporter): it is a witness, not the culprit.

## How to confirm
`dmesg -T | grep -E 'Xid|GSP'`: repeated 119s on the same GPU;
`nvidia-smi -q` shows `GPU Recovery Action` other than `None`.

## How to fix
Drain the GPU, stop its workloads, reset it (`nvidia-smi -r -i N`) or
reboot; power-cycle if it persists. Update the driver to a release that
fixes GSP timeouts for this GPU; report it to NVIDIA with
`nvidia-bug-report.sh` if it repeats.

## Safety
Advice only: a GPU reset ends every process on the GPU.
"#,
};

impl Rule for XidGspTimeout {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let buses = xid::buses(incident, &CODES);
        // The driver's GSP report names its own GPU number, not a bus id:
        // it can only be tied to a GPU when one GPU had GSP Xids.
        let single = buses.len() == 1;
        for bus in buses {
            let xids: Vec<_> = xid::on_bus(incident, bus.as_deref(), &CODES).collect();
            let Some(&(first, x)) = xids.first() else {
                continue;
            };
            let gpu = xid::gpu_at(incident, bus.as_deref());
            let label = gpu.label();
            let short = gpu.short();
            let mut f = Finding::new(META.id, META.category, META.severity);
            f.occurrences = xids.len() as u32;
            xid::name_gpu(&mut f, &gpu, bus.as_deref());
            let witnesses = cite_xids(&mut f, &xids, &short);
            // The driver's own GSP lines around the Xid.
            if let Some(e) = incident
                .facts
                .kernel_events
                .iter()
                .find(|e| matches!(e.kind, KernelEventKind::GspTimeout { .. }))
                .filter(|_| single)
            {
                f.evidence(e.span, "the driver's GSP timeout report");
            }
            let recovery = xid::cite_recovery(&mut f, incident, bus.as_deref());
            let healths = gpu.health(incident);
            let sick = xid::cite_health(&mut f, &healths, &short);
            let unreachable = xid::cite_unreachable(&mut f, incident, &gpu);
            for p in gpu.index.into_iter().flat_map(|i| incident.processes_on(i)) {
                f.entities.pids.insert(p.pid);
            }
            add_owner_units(&mut f, incident);
            let when = kernel_time(incident, first).map(crate::rules::support::when);
            f.condition(format!("the kernel logged {}", xid::describe(x.code)), true);
            f.condition("it repeated", xids.len() > 1);
            f.condition("the GPU is identified by its index", gpu.index.is_some());
            f.condition(
                "nvidia-smi shows the GPU needs recovery",
                sick.any() || unreachable || !recovery.is_empty(),
            );
            f.title = format!(
                "GSP firmware of {short} stopped answering: Xid {}",
                code_list(&xids)
            );
            f.headline = format!(
                "The GSP firmware of {label} stopped answering the driver ({}{}): calls into the GPU hang or fail until it is reset.",
                xid::describe(x.code),
                when.map(|w| format!(" at {w}")).unwrap_or_default()
            );
            f.chain.push(format!(
                "the processes on {short} hang or fail, and their peers time out"
            ));
            f.chain.push(format!(
                "{short}'s GSP firmware did not answer the driver ({})",
                xid::describe(x.code)
            ));
            f.explanation = explanation(x.code, &witnesses);
            f.actions.extend(actions(&short, gpu.index));
            f.confidence = confidence(&f, 0.8, 0.97);
            out.push(f);
        }
    }
}

/// Cites the first and the last GSP Xid of the GPU `short` with the process
/// whose call it was, adds every line's code and its PID (a monitoring
/// process's only when it is not one); returns the names of the
/// monitoring processes the lines name, the witnesses.
fn cite_xids(f: &mut Finding, xids: &[(&KernelEvent, &Xid)], short: &str) -> Vec<String> {
    let mut witnesses: Vec<String> = Vec::new();
    for (e, y) in xids.iter().take(1).chain(xids.iter().skip(1).last()) {
        let monitor = y.name.as_deref().is_some_and(is_monitor);
        let role = if y.code == 119 {
            "the call that timed out was made by"
        } else {
            "during a call of"
        };
        f.evidence(
            e.span,
            format!(
                "{} on {short}; {role} {}{}",
                xid::describe(y.code),
                xid::owner_of(y),
                if monitor {
                    " (a monitoring process: a witness, not the cause)"
                } else {
                    ""
                }
            ),
        );
    }
    for (_, y) in xids {
        f.entities.xid.insert(y.code);
        let monitor = y.name.as_deref().is_some_and(is_monitor);
        if let (Some(name), true) = (&y.name, monitor) {
            if !witnesses.contains(name) {
                witnesses.push(name.clone());
            }
        } else if let Some(pid) = y.pid {
            f.entities.pids.insert(pid);
        }
    }
    witnesses
}

/// `119, 120`: the codes of the lines, sorted, without repeats.
fn code_list(xids: &[(&KernelEvent, &Xid)]) -> String {
    let codes: Vec<String> = {
        let mut c: Vec<u32> = xids.iter().map(|(_, y)| y.code).collect();
        c.sort_unstable();
        c.dedup();
        c.iter().map(u32::to_string).collect()
    };
    codes.join(", ")
}

/// What Xid `code` leaves behind, and that the monitoring processes the
/// lines name (`witnesses`) are not the culprit.
fn explanation(code: u32, witnesses: &[String]) -> String {
    format!(
        "Xid 119/120 leave the GPU unusable until a reset (catalog action: {}).{}",
        xid::info(code).map_or("", |i| i.bucket),
        if witnesses.is_empty() {
            String::new()
        } else {
            format!(
                " The process named in the line ({}) is a monitoring process that happened to call the GPU: a witness, not the culprit; do not blame or kill it.",
                witnesses.join(", ")
            )
        }
    )
}

/// What to do for the GPU `short` (nvidia-smi index `index`, `N` when
/// unknown): drain it, collect the driver's state and reset it, update the
/// driver if it repeats.
fn actions(short: &str, index: Option<u32>) -> Vec<Action> {
    let gpu_arg = index.map_or_else(|| "N".to_owned(), |i| i.to_string());
    vec![
        Action::advice(
            format!(
                "drain {short}: stop the workloads on it and make sure no process of another owner still uses it"
            ),
            Some(&format!(
                "nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name --format=csv -i {gpu_arg}"
            )),
        ),
        Action::advice(
            format!(
                "collect the driver's state, then reset {short} (or reboot the node; power-cycle if it persists)"
            ),
            Some(&format!("nvidia-bug-report.sh; nvidia-smi -r -i {gpu_arg}")),
        ),
        Action::advice(
            "if Xid 119 repeats, update the driver to a release that fixes GSP timeouts for this GPU and report it to NVIDIA",
            None,
        ),
    ]
}

fn is_monitor(name: &str) -> bool {
    MONITORS
        .iter()
        .any(|m| name == *m || (m.len() >= 4 && name.starts_with(m)))
}
