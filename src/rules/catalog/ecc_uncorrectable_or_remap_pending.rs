//! `ecc-uncorrectable-or-remap-pending`: nvidia-smi shows a GPU with
//! uncorrectable memory errors, a pending or failed row remap, or a reset it
//! needs, without a kernel Xid in the captures that says so already.

use crate::correlate::Incident;
use crate::model::{EccKind, EccScope, GpuHealth};
use crate::rules::support::confidence;
use crate::rules::xid::{self, GpuAt, Sickness, same_bus};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: EccUncorrectableOrRemapPending = EccUncorrectableOrRemapPending;

pub struct EccUncorrectableOrRemapPending;

/// Xids whose rules already cite the GPU's nvidia-smi health.
const XID_RULES: [u32; 9] = [48, 63, 64, 74, 79, 94, 95, 119, 120];

static META: RuleMeta = RuleMeta {
    id: "ecc-uncorrectable-or-remap-pending",
    category: Category::EccUncorrectable,
    severity: Severity::Error,
    summary: "nvidia-smi shows uncorrectable ECC errors, a pending or failed row remap, or a GPU that needs a reset",
    anchors: &[xid::TABLE_ROW_ANCHOR],
    doc: r#"
## What it means
`nvidia-smi -q` (or `-q -x`) reports a GPU whose memory is in trouble:
`DRAM Uncorrectable` or `SRAM Uncorrectable` above zero, `Remapped Rows /
Pending: Yes`, `Remapping Failure Occurred: Yes`, banks without spare rows,
`SRAM Threshold Exceeded: Yes`, pre-Ampere `Pending Page Blacklist: Yes`,
`Reset Required: Yes` or a `GPU Recovery Action` other than `None`; or the
table's `Volatile Uncorr. ECC` column is above zero. Correctable counts
alone are normal wear and are not reported. A reset asked for (`Reset
Required: Yes`, a recovery action) with no memory fault shown is reported
as `xid-other`: the GPU is in a bad state after a fault the captures do not
name. The same fields in an `nvidia-smi --query-gpu=…` list count
(`gpu_recovery_action`, `reset_status.reset_required`,
`retired_pages.pending`, `remapped_rows.pending`, `remapped_rows.failure`;
rows printed without a header are read by the query list typed above
them), and DCGM's last Xid of the GPU (`dcgmi dmon -e 230`, `GPU 1  120`)
is cited as the fault the reset follows.

## Why it happens
A memory cell failed. The repair (a row remap, a page retirement) is
recorded at once but applied only at the next GPU reset: until then the bad
row may be hit again, and applications on the GPU fail with `CUDA error:
uncorrectable ECC error encountered`. Volatile counts are since the last
reset, aggregate counts over the board's life.

## How to confirm
`nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT -i N`; the kernel log
for Xid 48/63/64/94/95 (their rule, `xid-ecc`, reports them).

## How to fix
Stop the workloads on the GPU and reset it (`nvidia-smi -r -i N`, when
nothing else uses it) or reboot, so pending remaps apply; check the
counters again. A remapping failure, banks without spare rows or the SRAM
threshold exceeded: open a hardware case (RMA).

## Safety
Advice only: a GPU reset ends every process on the GPU, and no reset may
run while processes of other owners use it.
"#,
};

/// The readings of one GPU across captures.
struct Group<'a> {
    bus: Option<String>,
    uuid: Option<String>,
    index: Option<u32>,
    healths: Vec<&'a GpuHealth>,
}

impl Rule for EccUncorrectableOrRemapPending {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut groups: Vec<Group> = Vec::new();
        for h in &incident.facts.gpu_health {
            // Rows of tables that name a GPU by its index only (a
            // `--query-gpu` list, `dcgmi dmon`) join by that index.
            let by_index_only =
                |bus: &Option<String>, uuid: &Option<String>| bus.is_none() && uuid.is_none();
            let same = |g: &&mut Group| {
                same_bus(g.bus.as_deref(), h.bus_id.as_deref())
                    || (h.uuid.is_some() && g.uuid == h.uuid)
                    || (by_index_only(&h.bus_id, &h.uuid)
                        && by_index_only(&g.bus, &g.uuid)
                        && h.index.is_some()
                        && g.index == h.index)
            };
            match groups.iter_mut().find(same) {
                Some(g) => g.healths.push(h),
                None => groups.push(Group {
                    bus: h.bus_id.clone(),
                    uuid: h.uuid.clone(),
                    index: h.index,
                    healths: vec![h],
                }),
            }
        }
        for row in xid::table_ecc(incident) {
            if !groups
                .iter()
                .any(|g| same_bus(g.bus.as_deref(), Some(&row.bus)))
            {
                groups.push(Group {
                    bus: Some(row.bus.clone()),
                    uuid: None,
                    index: Some(row.index),
                    healths: Vec::new(),
                });
            }
        }
        for g in groups {
            let covered = incident.xids().any(|(_, x)| {
                XID_RULES.contains(&x.code) && same_bus(x.bus_id.as_deref(), g.bus.as_deref())
            });
            if covered {
                continue;
            }
            let mut gpu = xid::gpu_at(incident, g.bus.as_deref());
            if gpu.gpu.is_none() {
                if let Some(found) = g
                    .uuid
                    .as_ref()
                    .and_then(|u| incident.gpus.iter().find(|x| x.uuid.as_ref() == Some(u)))
                {
                    gpu = GpuAt {
                        index: Some(found.index),
                        gpu: Some(found),
                        inferred: None,
                        ..gpu
                    };
                }
            }
            if gpu.index.is_none() {
                gpu.index = g.index;
            }
            check_gpu(incident, &gpu, &g.healths, out);
        }
    }
}

fn check_gpu(incident: &Incident, gpu: &GpuAt<'_>, healths: &[&GpuHealth], out: &mut Vec<Finding>) {
    let short = gpu.short();
    // Cite into a scratch finding first: nothing to report for a healthy
    // GPU or one with correctable errors only.
    let mut f = Finding::new(META.id, META.category, META.severity);
    let sick = xid::cite_health(&mut f, healths, &short);
    let table = xid::cite_table_ecc(&mut f, incident, gpu);
    let volatile = table
        || healths.iter().any(|h| {
            h.ecc.iter().any(|c| {
                c.kind == EccKind::Uncorrectable && c.scope == EccScope::Volatile && c.count > 0
            })
        });
    // Rows remapped for uncorrectable errors, their remap still pending: the
    // failed row stays in use until the reset, so the GPU needs one now.
    let uncorrectable_rows = if sick.remap_pending {
        healths.iter().find_map(|h| {
            h.remapped_rows_uncorrectable
                .as_ref()
                .filter(|r| r.value > 0)
        })
    } else {
        None
    };
    if let Some(r) = uncorrectable_rows {
        f.evidence(
            r.span,
            format!(
                "{short}: {} row(s) remapped after uncorrectable errors; the faulty rows stay in use until the remap applies",
                r.value
            ),
        );
    }
    let needs_reset = sick.reset_required || sick.recovery_action || uncorrectable_rows.is_some();
    let pending = sick.remap_pending || sick.retirement_pending;
    if !(sick.rma() || volatile || needs_reset || pending || sick.uncorrectable) {
        return;
    }
    // A reset asked for (`GPU Recovery Action: Reset`, `Reset Required:
    // Yes`) with no memory fault in sight: the GPU is in a bad state after a
    // fault whose Xid is not in the captures, not known to be its memory.
    let memory =
        sick.uncorrectable || volatile || sick.rma() || pending || uncorrectable_rows.is_some();
    if !memory {
        f.category = Category::XidOther;
    }
    f.severity = if sick.rma() {
        Severity::Critical
    } else if volatile || needs_reset {
        Severity::Error
    } else {
        Severity::Warning
    };
    if let Some(i) = gpu.index {
        f.entities.gpus.insert(i);
        for p in incident.processes_on(i) {
            f.entities.pids.insert(p.pid);
            if let Some(o) = incident.owner(p.pid) {
                f.entities.units.insert(o.unit.clone());
            }
        }
    }
    f.condition("nvidia-smi reports the GPU's memory state", true);
    f.condition(
        "uncorrectable errors since the last reset, or a failed repair",
        volatile || sick.rma(),
    );
    f.condition("the GPU is identified by its index", gpu.index.is_some());

    (f.title, f.headline) = title_and_headline(
        &short,
        &sick,
        volatile,
        uncorrectable_rows.is_some(),
        needs_reset,
    );
    if sick.uncorrectable || volatile || sick.rma() || pending {
        f.chain.push(format!(
            "{short}'s memory had uncorrectable errors or needs repair"
        ));
        f.chain.push(
            "the repair (row remap or page retirement) applies only at a GPU reset".to_owned(),
        );
    } else {
        f.chain.push(format!(
            "nvidia-smi says {short} must be reset before it is reliable again"
        ));
        f.chain.push(reset_cause(&sick, &short));
    }
    f.explanation = "Volatile ECC counts are since the last reset, aggregate counts over the board's life; a pending remap or retirement is applied only at the next GPU reset. A failed remap, banks without spare rows or the SRAM threshold mean the board's spare memory is exhausted.".to_owned();
    let warning = f.severity == Severity::Warning;
    f.actions.extend(actions(gpu, &short, warning, sick.rma()));
    f.confidence = confidence(&f, 0.75, 0.95);
    out.push(f);
}

/// The chain's cause of a reset asked for with no memory fault shown: the
/// fault DCGM last saw on the GPU, when a capture shows it.
fn reset_cause(sick: &Sickness, short: &str) -> String {
    let fault = sick.last_xid.map_or_else(
        || "its Xid may be outside the captures".to_owned(),
        |xid| format!("Xid {xid}, DCGM's last Xid of {short}"),
    );
    format!("a GPU fault ({fault}) left it in a state only a reset clears")
}

/// The finding's title and headline for `short`: memory failing for good
/// (RMA), uncorrectable errors since the reset (`volatile`), a remap after
/// uncorrectable errors (`uncorrectable_rows`), a reset asked for
/// (`needs_reset`), or a repair pending.
fn title_and_headline(
    short: &str,
    sick: &Sickness,
    volatile: bool,
    uncorrectable_rows: bool,
    needs_reset: bool,
) -> (String, String) {
    let rma_what: Vec<&str> = [
        (sick.remap_failed, "row remapping failed"),
        (sick.no_spare_rows, "banks without spare rows"),
        (sick.sram_threshold, "SRAM error threshold exceeded"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, w)| *w)
    .collect();
    let title = if sick.rma() {
        format!("{short}'s memory is failing: {}", rma_what.join(", "))
    } else if volatile {
        format!("{short} has uncorrectable ECC errors since its last reset")
    } else if uncorrectable_rows {
        format!("{short} has a row remap pending after uncorrectable errors: it needs a reset")
    } else if needs_reset {
        format!("{short} needs a reset (nvidia-smi)")
    } else if sick.remap_pending {
        format!("{short} has a row remap pending until its next reset")
    } else if sick.retirement_pending {
        format!("{short} has a page retirement pending until its next reset")
    } else {
        format!("{short} had uncorrectable ECC errors in the past")
    };
    let headline = if sick.rma() {
        format!(
            "{}'s memory can no longer be repaired ({}): the board is a replacement (RMA) candidate.",
            crate::rules::support::capitalise(short),
            rma_what.join(", ")
        )
    } else if volatile {
        format!(
            "{} had uncorrectable memory errors since its last reset: workloads on it fail with ECC errors until it is reset.",
            crate::rules::support::capitalise(short)
        )
    } else if uncorrectable_rows {
        format!(
            "{} remapped rows after uncorrectable memory errors and the remap is Pending: it applies only at a GPU reset, and until then the faulty rows can still be hit.",
            crate::rules::support::capitalise(short)
        )
    } else if needs_reset {
        format!("nvidia-smi says {short} needs a reset before it is reliable again.")
    } else {
        format!(
            "{} has a memory repair pending that only a GPU reset applies: plan one.",
            crate::rules::support::capitalise(short)
        )
    };
    (title, headline)
}

/// What to do for `gpu` (`short`): find it when the capture does not name
/// it; plan a reset (`warning`), or stop its workloads and reset it; check
/// again after; open a hardware case when its memory is failing (`rma`).
fn actions(gpu: &GpuAt<'_>, short: &str, warning: bool, rma: bool) -> Vec<Action> {
    let mut actions = Vec::new();
    let gpu_arg = gpu.index.map_or_else(|| "N".to_owned(), |i| i.to_string());
    if gpu.index.is_none() && gpu.bus.is_none() {
        // A fragment without its `GPU <bus id>` line: never guess the GPU.
        actions.push(Action::advice(
            "find which GPU this is: the capture does not name it",
            Some("nvidia-smi -q -d ROW_REMAPPER,ECC"),
        ));
    }
    if warning {
        actions.push(Action::advice(
            format!("plan a reset of {short} at the next maintenance so that the repair applies"),
            None,
        ));
    } else {
        actions.push(Action::advice(
            format!("stop the workloads on {short} and make sure no process of another owner still uses it"),
            Some(&format!("nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name --format=csv -i {gpu_arg}")),
        ));
        actions.push(Action::advice(
            format!("reset {short} (or reboot the node) so that pending repairs apply"),
            Some(&format!("nvidia-smi -r -i {gpu_arg}")),
        ));
    }
    actions.push(Action::advice(
        "check the counters and remapped rows again after the reset",
        Some(&format!(
            "nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT -i {gpu_arg}"
        )),
    ));
    if rma {
        actions.push(Action::advice(
            "open a hardware case (RMA) for the board",
            None,
        ));
    }
    actions
}
