//! `gpu-init-failed`: the driver could not initialise a GPU
//! (`RmInitAdapter failed!`); the GPU is unusable until the cause is fixed.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::xid;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: GpuInitFailed = GpuInitFailed;

pub struct GpuInitFailed;

/// `NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)` and
/// `NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5`.
static INIT_FAILED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"NVRM: GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): (?:RmInitAdapter failed! \((?P<code>0x[0-9A-Fa-f]+:0x[0-9A-Fa-f]+:\d+)\)|rm_init_adapter failed, device minor number (?P<minor>\d+))",
    )
    .expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "gpu-init-failed",
    category: Category::XidOther,
    severity: Severity::Error,
    summary: "the driver could not initialise a GPU (RmInitAdapter failed): the GPU is unusable",
    anchors: &["RmInitAdapter failed", "rm_init_adapter failed"],
    doc: r#"
## What it means
`NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)`, usually
with `rm_init_adapter failed, device minor number 5`: the kernel module is
loaded, but it could not bring this GPU up. The GPU does not appear in
`nvidia-smi` (or every call on it fails); anything that opens it
(`/dev/nvidia5`) fails, and a device plugin or validator that probes it
keeps crashing. The line repeats each time something tries to open the
GPU.

## Why it happens
The code in parentheses is the driver's internal status. A GPU that fails
to initialise while its neighbours work points at the board (firmware,
memory, power, a failing GPU often also logging ECC Xids); every GPU of a
host failing the same way points at the setup: a driver that does not
support the GPU, a virtual machine's passthrough (GSP firmware, BAR
sizes), or a driver/firmware update half applied.

## How to confirm
`journalctl -k -b | grep -E 'NVRM|Xid'` for the first error of the boot;
`nvidia-smi -q` on the GPU; `lspci -vvv -s BUS` (link state, BAR sizes).
Which GPUs fail: one, or all of them.

## How to fix
One GPU: drain the node, reboot; if it fails again, run the field
diagnostics and open a hardware case (RMA). All GPUs: install a driver that
supports the GPU model (and, in a VM, the passthrough settings the GPU
needs), then reboot.

## Safety
Advice only: a reboot takes down every workload of the node.
"#,
};

impl Rule for GpuInitFailed {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // One finding per GPU, in order of first failure.
        let mut buses: Vec<String> = Vec::new();
        for (_, c) in matches(incident, &INIT_FAILED) {
            let Some(bus) = xid::normal_bus(&c["bus"]) else {
                continue;
            };
            if !buses.contains(&bus) {
                buses.push(bus);
            }
        }
        let all = buses.len();
        for bus in &buses {
            let hits: Vec<_> = matches(incident, &INIT_FAILED)
                .filter(|(_, c)| xid::normal_bus(&c["bus"]).as_deref() == Some(bus.as_str()))
                .collect();
            let code = hits
                .iter()
                .find_map(|(_, c)| c.name("code").map(|m| m.as_str().to_owned()));
            let minor = hits
                .iter()
                .find_map(|(_, c)| c.name("minor").map(|m| m.as_str().to_owned()));
            let gpu = xid::gpu_at(incident, Some(bus));
            let mut f = Finding::new(META.id, META.category, META.severity);
            f.occurrences = hits.len() as u32;
            match gpu.index {
                Some(i) => {
                    f.entities.gpus.insert(i);
                }
                // The driver's line prints the function: `0000:0a:00.0`.
                None => {
                    f.entities.gpu_bus_ids.insert(bus.clone());
                }
            }
            let label = match (&gpu.index, &minor) {
                (Some(_), _) => gpu.short(),
                (None, Some(m)) => format!("GPU {bus} (/dev/nvidia{m})"),
                (None, None) => format!("GPU {bus}"),
            };
            for (m, n) in distinct(hits.iter().map(|(m, _)| *m)) {
                let note = if m.text.contains("RmInitAdapter") {
                    format!("RmInitAdapter failed on {label}: the driver could not initialise it")
                } else {
                    format!("{label} is unusable")
                };
                f.evidence(
                    m.span,
                    if n > 1 {
                        format!("{note} ({n} times)")
                    } else {
                        note
                    },
                );
            }
            let others = incident
                .xids()
                .filter(|(_, x)| !xid::same_bus(x.bus_id.as_deref(), Some(bus)))
                .count();
            f.condition("the driver logged RmInitAdapter failed for the GPU", true);
            f.condition("the failure repeats (not a one-off probe)", hits.len() > 2);
            f.condition(
                "only some GPUs fail (the board, not the setup)",
                all == 1 || others > 0,
            );
            let status = code.map(|c| format!(" ({c})")).unwrap_or_default();
            f.title =
                format!("the driver could not initialise {label}: RmInitAdapter failed{status}");
            f.headline = format!(
                "{} fails to initialise (RmInitAdapter failed{status}, {} times): the GPU is unusable until it is reset, repaired or the driver supports it.",
                crate::rules::support::capitalise(&label),
                hits.len()
            );
            f.chain.push(format!("nothing can open {label}"));
            f.chain.push(format!(
                "the driver could not initialise {label} (RmInitAdapter failed{status})"
            ));
            f.explanation = if all > 1 {
                format!(
                    "{all} GPUs fail to initialise: a driver that does not support them, or a virtual machine's passthrough, is more likely than {all} broken boards."
                )
            } else {
                "One GPU fails to initialise while the others work: the board (firmware, memory, power) is the likely cause.".to_owned()
            };
            f.actions.push(Action::advice(
                "find the first NVRM error of the boot and whether other GPUs fail too",
                Some("journalctl -k -b --no-pager | grep -E 'NVRM|Xid'"),
            ));
            f.actions.push(Action::advice(
                "drain the node and reboot; if the GPU fails again, run the field diagnostics and open a hardware case (RMA)",
                None,
            ));
            f.confidence = confidence(&f, 0.6, 0.9);
            out.push(f);
        }
    }
}
