//! `xid-ecc`: the driver reported a GPU memory error (Xid 48, 63, 64, 94,
//! 95); how bad it is and what recovery it needs depend on the code.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{KernelEvent, Xid};
use crate::rules::support::{add_owner_units, confidence, distinct, kernel_time, matches};
use crate::rules::xid;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: XidEcc = XidEcc;

pub struct XidEcc;

const CODES: [u32; 5] = [48, 63, 64, 94, 95];

/// The application's side of the same error.
static CUDA_ECC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"uncorrectable ECC error encountered|CUDA_ERROR_ECC_UNCORRECTABLE|cudaErrorECCUncorrectable")
        .expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "xid-ecc",
    category: Category::XidEcc,
    severity: Severity::Critical,
    summary: "the driver reported a GPU memory (ECC) error: Xid 48, 63, 64, 94 or 95",
    anchors: &[
        "uncorrectable ECC error encountered",
        "CUDA_ERROR_ECC_UNCORRECTABLE",
        "cudaErrorECCUncorrectable",
        xid::TABLE_ROW_ANCHOR,
    ],
    doc: r#"
## What it means
The GPU's memory returned data it could not correct, or the driver recorded
a repair:

| Xid | Meaning | Recovery (NVIDIA's catalog) |
|---|---|---|
| 48 | double-bit (uncorrectable) ECC error | reset the GPU |
| 63 | a row was marked for remapping (pre-Ampere: a page retired) | none now; the remap applies at the next GPU reset |
| 64 | the remap or retirement could not be recorded | reset the GPU, then contact support |
| 94 | contained ECC error: only the named application was hit | restart that application |
| 95 | uncontained ECC error: every process on the GPU is affected | reset the GPU |

The application sees `CUDA error: uncorrectable ECC error encountered`; a
Xid 45 for its processes is the driver's cleanup afterwards.

## Why it happens
A memory cell of the GPU failed. One event can be a transient; row remaps
repair it at the next reset. Repeated events, a failed remap (Xid 64,
`Remapping Failure Occurred: Yes`), banks without spare rows or `SRAM
Threshold Exceeded: Yes` mean the board is wearing out.

## How to confirm
`nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT`: `DRAM Uncorrectable`
> 0, `Pending: Yes` under `Remapped Rows`, `Remapping Failure Occurred`;
`nvidia-smi` table: `Volatile Uncorr. ECC` > 0.

## How to fix
Stop the workloads on the GPU, reset it (`nvidia-smi -r -i N`, when nothing
else uses it) or reboot, so that pending remaps are applied; check the
counters again. Xid 94 only needs the named application restarted (reset
when convenient); Xid 63 alone needs a reset at the next maintenance. Xid
64, a remapping failure, no spare rows or the SRAM threshold exceeded: open
a hardware case (RMA).

## Safety
Advice only: a GPU reset ends every process on the GPU, and no reset may
run while processes of other owners still use it.
"#,
};

/// How bad one code is, most severe first.
fn severity_of(code: u32) -> Severity {
    match code {
        48 | 64 | 95 => Severity::Critical,
        94 => Severity::Error,
        _ => Severity::Warning,
    }
}

impl Rule for XidEcc {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let cuda: Vec<_> = matches(incident, &CUDA_ECC).map(|(m, _)| m).collect();
        for bus in xid::buses(incident, &CODES) {
            let xids: Vec<_> = xid::on_bus(incident, bus.as_deref(), &CODES).collect();
            let Some(worst) = worst_of(&xids) else {
                continue;
            };
            let severity = severity_of(worst);
            let gpu = xid::gpu_at(incident, bus.as_deref());
            let label = gpu.label();
            let short = gpu.short();
            let mut f = Finding::new(META.id, META.category, severity);
            f.occurrences = xids.len() as u32;
            xid::name_gpu(&mut f, &gpu, bus.as_deref());
            let codes = cite_xids(&mut f, &xids, &short);
            xid::cite_recovery(&mut f, incident, bus.as_deref());
            let healths = gpu.health(incident);
            let sick = xid::cite_health(&mut f, &healths, &short);
            let table = xid::cite_table_ecc(&mut f, incident, &gpu);
            // The application's side: the CUDA error, when the Xid's
            // process or a process on this GPU wrote it, or when only this
            // GPU had an ECC event.
            let single_gpu = xid::buses(incident, &CODES).len() == 1;
            if single_gpu {
                for (m, n) in distinct(cuda.iter().copied()).into_iter().take(2) {
                    f.evidence(
                        m.span,
                        format!("the application hit the error: CUDA reports an uncorrectable ECC error ({n}x)"),
                    );
                }
            }
            for p in gpu.index.into_iter().flat_map(|i| incident.processes_on(i)) {
                f.entities.pids.insert(p.pid);
            }
            add_owner_units(&mut f, incident);
            let rma = sick.rma() || codes.contains(&64);
            let when = xids
                .first()
                .and_then(|(e, _)| kernel_time(incident, e))
                .map(crate::rules::support::when);
            f.condition(format!("the kernel logged {}", xid::describe(worst)), true);
            f.condition("the GPU is identified by its index", gpu.index.is_some());
            f.condition(
                "nvidia-smi shows the error state (uncorrectable counts, pending remap, reset required)",
                sick.any() || table,
            );
            f.condition(
                "the application reported the ECC error",
                single_gpu && !cuda.is_empty(),
            );
            let list = codes
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            f.title = format!("ECC error on {short}: Xid {list}");
            let (what, needs) = what_and_needs(worst);
            f.headline = format!(
                "{} had {what} ({}{}): {needs}.",
                crate::rules::support::capitalise(&label),
                xid::describe(worst),
                when.map(|w| format!(" at {w}")).unwrap_or_default()
            );
            if single_gpu && !cuda.is_empty() {
                f.chain.push(
                    "the engine failed with `CUDA error: uncorrectable ECC error encountered`"
                        .to_owned(),
                );
            }
            f.chain.push(damage(worst, &short));
            f.chain.push(format!(
                "{} (catalog action: {})",
                xid::describe(worst),
                xid::info(worst).map_or("", |i| i.bucket)
            ));
            f.explanation = format!(
                "Volatile ECC counters count since the last reset, aggregate ones over the board's life; a pending row remap only takes effect at the next GPU reset. {}",
                if rma {
                    "A failed remap, banks without spare rows or the SRAM threshold put the board on the replacement path."
                } else {
                    "A single event is repaired by the remap; repeated events on the same board mean it is wearing out."
                }
            );
            f.actions.extend(actions(worst, &short, gpu.index, rma));
            f.confidence = confidence(&f, 0.8, 0.98);
            out.push(f);
        }
    }
}

/// The most severe code of the lines (the later one in [`CODES`] of two
/// equally severe); `None` for no lines.
fn worst_of(xids: &[(&KernelEvent, &Xid)]) -> Option<u32> {
    xids.iter().map(|(_, x)| x.code).min_by_key(|c| {
        (
            severity_of(*c),
            std::cmp::Reverse(CODES.iter().position(|k| k == c)),
        )
    })
}

/// Cites each ECC Xid line of the GPU `short` (with the process hit, for 94
/// and 95) and adds its code and, for 94 and 95, its PID; returns the codes
/// in order of first appearance.
fn cite_xids(f: &mut Finding, xids: &[(&KernelEvent, &Xid)], short: &str) -> Vec<u32> {
    let mut codes: Vec<u32> = Vec::new();
    for (e, x) in xids {
        f.entities.xid.insert(x.code);
        if !codes.contains(&x.code) {
            codes.push(x.code);
        }
        let who = match x.code {
            94 | 95 => format!("; {} was hit", xid::owner_of(x)),
            _ => String::new(),
        };
        f.evidence_once(e.span, format!("{} on {short}{who}", xid::describe(x.code)));
        if let (Some(pid), 94 | 95) = (x.pid, x.code) {
            f.entities.pids.insert(pid);
        }
    }
    codes
}

/// What the `worst` code means and what the GPU needs after it, for the
/// headline.
fn what_and_needs(worst: u32) -> (&'static str, &'static str) {
    match worst {
        95 => (
            "an uncontained memory error: every process on the GPU is affected",
            "the GPU must be reset before anything runs on it again",
        ),
        48 => (
            "an uncorrectable (double-bit) memory error",
            "the GPU must be reset before it is used again",
        ),
        64 => (
            "a memory row could not be remapped",
            "the GPU must be reset, and the board is a replacement candidate",
        ),
        94 => (
            "a memory error contained to one application",
            "that application must restart; reset the GPU when convenient",
        ),
        _ => (
            "a memory row was marked for remapping",
            "the remap applies at the next GPU reset; plan one",
        ),
    }
}

/// The chain's line for what the `worst` code did to the memory of the GPU
/// `short`.
fn damage(worst: u32, short: &str) -> String {
    match worst {
        63 => format!("a memory row of {short} was marked for remapping"),
        64 => format!("{short}'s memory could not be repaired (no spare row)"),
        94 => format!(
            "{short}'s memory returned data it could not correct; the error was contained to one application"
        ),
        _ => format!("{short}'s memory returned data it could not correct"),
    }
}

/// What to do after the `worst` code on the GPU `short` (nvidia-smi index
/// `index`, `N` when unknown): restart the application, plan a reset, or
/// stop the GPU's work and reset it; check the counters; a hardware case
/// when `rma` or if it repeats.
fn actions(worst: u32, short: &str, index: Option<u32>, rma: bool) -> Vec<Action> {
    let mut actions = Vec::new();
    let gpu_arg = index.map_or_else(|| "N".to_owned(), |i| i.to_string());
    match worst {
        94 => actions.push(Action::advice(
            "restart the application that was hit; the others on the GPU are unaffected",
            None,
        )),
        63 => actions.push(Action::advice(
            format!("plan a reset of {short} at the next maintenance so that the remap takes effect"),
            None,
        )),
        _ => actions.push(Action::advice(
            format!("stop every workload on {short} and make sure no process of another owner still uses it"),
            Some(&format!("nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name --format=csv -i {gpu_arg}")),
        )),
    }
    if worst != 94 && worst != 63 {
        actions.push(Action::advice(
            format!("reset {short} (or reboot the node), so that pending row remaps are applied"),
            Some(&format!("nvidia-smi -r -i {gpu_arg}")),
        ));
    }
    actions.push(Action::advice(
        if matches!(worst, 63 | 94) {
            "check the ECC counters and remapped rows, and again after the next reset"
        } else {
            "after the reset, check the ECC counters and remapped rows again"
        },
        Some(&format!(
            "nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT -i {gpu_arg}"
        )),
    ));
    actions.push(Action::advice(
        if rma {
            "open a hardware case (RMA): the board's spare memory is exhausted or failing"
        } else {
            "if ECC Xids repeat on this board, open a hardware case (RMA)"
        },
        None,
    ));
    actions
}
