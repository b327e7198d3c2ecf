//! `gpu-init-failed`: the NVIDIA driver is loaded but cannot initialise a
//! GPU (`RmInitAdapter failed!`), so nvidia-smi finds no device or misses
//! one.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{matches, round2};
use crate::rules::xid::{self, same_bus};
use crate::rules::{Action, ActionKind, Category, Finding, Rule, RuleMeta, Safety, Severity};

pub static RULE: GpuInitFailed = GpuInitFailed;

pub struct GpuInitFailed;

/// The open kernel module's refusal of the GPU (catalog row).
const OPEN_REFUSED: &str = "kernel.nvrm-open-module-unsupported-gpu";

/// A PCI bus id as the driver prints it (`0000:81:00.0`).
const BUS: &str = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]";

/// `NVRM: GPU 0000:81:00.0: RmInitAdapter failed! (0x25:0x40:1470)` (since
/// about R390), `NVRM: RmInitAdapter failed! (0x26:0xffff:1127)` (older).
static INIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?:GPU (?P<bus>{BUS}): )?RmInitAdapter failed! \((?P<code>0x[0-9A-Fa-f]+:0x[0-9A-Fa-f]+:[0-9]+)\)"
    ))
    .expect("regex")
});

/// `rm_init_adapter failed, device minor number 0` (with the bus id before
/// it) and the older `rm_init_adapter failed for device bearing minor
/// number 0`.
static MINOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?:GPU (?P<bus>{BUS}): )?rm_init_adapter failed(?:, device minor number| for device bearing minor number) (?P<minor>[0-9]+)"
    ))
    .expect("regex")
});

/// The reason the driver gives just before: `NVRM: RmInitAdapter: Cannot
/// initialize GSP firmware RM`.
static REASON: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"RmInitAdapter: (?P<why>[^!].{3,})$").expect("regex"));

/// nvidia-smi with the driver loaded and no GPU initialised.
static NO_DEVICES: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*No devices were found\s*$").expect("regex"));

static META: RuleMeta = RuleMeta {
    id: "gpu-init-failed",
    category: Category::XidOther,
    severity: Severity::Critical,
    summary: "the NVIDIA driver cannot initialise a GPU (RmInitAdapter failed): the board, its slot or the firmware's PCI setup is at fault",
    anchors: &[
        "RmInitAdapter",
        "rm_init_adapter failed",
        "No devices were found",
    ],
    doc: r#"
## What it means
`NVRM: GPU 0000:81:00.0: RmInitAdapter failed! (0x25:0x40:1470)` followed by
`rm_init_adapter failed, device minor number 0` (older drivers: `NVRM:
RmInitAdapter failed! (0x26:0xffff:1127)` and `rm_init_adapter failed for
device bearing minor number 0`): the kernel module is loaded and found the
GPU on the PCI bus, but bringing it up failed. Every open of the device
retries and fails again, so the pair repeats. nvidia-smi prints `No
devices were found` (no GPU initialised) or lists the others without it.

The minor number is that of `/dev/nvidiaN`; it is not necessarily
nvidia-smi's index N. The code in brackets is the driver's internal
status and place of failure, for NVIDIA support.

## Why it happens
A failing board or a bad seat in its slot or riser (often with PCIe bus
errors in the BMC's event log around it), too little power, a board that
fell into a bad state and needs a cold power cycle, or firmware settings
that leave the GPU's memory windows (BARs) unassigned: Above 4G Decoding
or Resizable BAR disabled, too little MMIO space for large GPUs. Less
often a driver too old for the GPU. The open kernel module refusing the
GPU (R515 – R535's `Open nvidia.ko is only ready for use on Data Center
GPUs` before it) is told by `nvidia-probe-failed` instead, as
unsupported hardware, and this rule stays silent. It is not a driver/library version
mismatch: reinstalling the same driver does not help.

## How to confirm
`dmesg -T | grep -E 'NVRM|BAR|AER'` for the sequence and the PCI errors
before it; `lspci -vvs BUS` for the BAR assignment and link state;
`nvidia-smi -L` for the GPUs that did initialise; the BMC's event log
(`ipmitool sel list`) for PCIe errors.

## How to fix
Drain the node and power-cycle it (a warm reboot may not clear the board's
state). If it fails again, check the firmware's PCI settings (Above 4G
Decoding, Resizable BAR, MMIO size), then reseat the board and its power
cables or move it to another slot; a board that still fails to initialise
is a hardware case (RMA).

## Safety
Advice only: draining and power-cycling take down every workload of the
node.
"#,
};

/// The driver's messages about one GPU (or about GPUs it named by minor
/// number only).
struct Group<'a> {
    bus: Option<String>,
    inits: Vec<(&'a Message, String)>,
    minors: Vec<(&'a Message, u32)>,
}

impl Group<'_> {
    /// How the finding names the GPU: by its bus id, else by its
    /// `/dev/nvidiaN` minor number, else `a GPU`.
    fn who(&self) -> String {
        match (&self.bus, self.minors.first().map(|(_, n)| *n)) {
            (Some(b), _) => format!("the GPU at {b}"),
            (None, Some(n)) => format!("the GPU of /dev/nvidia{n} (minor number {n})"),
            (None, None) => "a GPU".to_owned(),
        }
    }
}

impl Rule for GpuInitFailed {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // The open module refusing the GPU (no GSP, or not a data-center
        // GPU in R515 – R535) is why RmInitAdapter failed: the
        // `nvidia-probe-failed` rule tells that, citing these lines.
        if incident.known(OPEN_REFUSED).next().is_some() {
            return;
        }
        let groups = groups(incident);
        if groups.is_empty() {
            return;
        }
        let no_devices: Vec<&Message> = matches(incident, &NO_DEVICES).map(|(m, _)| m).collect();
        let reason = matches(incident, &REASON)
            .next()
            .map(|(m, c)| (m, c["why"].trim().to_owned()));
        for g in &groups {
            let gpu = xid::gpu_at(incident, g.bus.as_deref());
            let mut f = Finding::new(META.id, META.category, META.severity);
            match (gpu.index, &g.bus) {
                (Some(i), _) => {
                    f.entities.gpus.insert(i);
                }
                (None, Some(b)) => {
                    f.entities.gpu_bus_ids.insert(b.clone());
                }
                _ => {}
            }
            let attempts = g.inits.len().max(g.minors.len());
            let codes: Vec<&str> = {
                let mut c: Vec<&str> = g.inits.iter().map(|(_, c)| c.as_str()).collect();
                c.dedup();
                c
            };
            let who = g.who();
            cite_driver_lines(&mut f, g, &who);
            if let Some((m, why)) = &reason {
                f.evidence_once(m.span, format!("the driver's reason: {why}"));
            }
            let single = groups.len() == 1;
            if single {
                if let Some(m) = no_devices.first() {
                    f.evidence_once(
                        m.span,
                        "nvidia-smi: no GPU initialised, although the driver is loaded and saw the GPU",
                    );
                }
            }
            f.condition("the driver says it could not initialise the GPU", true);
            let named = f.condition("the GPU is named by its PCI bus id", g.bus.is_some());
            let repeats = f.condition("the failure repeats at every attempt", attempts > 1);
            let seen = f.condition(
                "nvidia-smi shows the consequence (No devices were found)",
                single && !no_devices.is_empty(),
            );
            let times = if attempts > 1 {
                format!(", {attempts} attempts")
            } else {
                String::new()
            };
            f.title = format!(
                "{who} fails driver initialisation (RmInitAdapter failed{}{times})",
                codes.first().map(|c| format!(" {c}")).unwrap_or_default()
            );
            f.headline = format!(
                "The NVIDIA driver is loaded but cannot initialise {who}{times}: nothing can use that GPU. The board, its slot or the firmware's PCI setup is at fault, not the driver's version."
            );
            f.chain.push(if single && !no_devices.is_empty() {
                "nvidia-smi finds no devices; CUDA sees no GPU".to_owned()
            } else {
                format!("{who} is missing from nvidia-smi and CUDA")
            });
            f.chain.push(format!(
                "the driver's initialisation of {who} fails (RmInitAdapter)"
            ));
            f.explanation = "RmInitAdapter is the driver bringing a GPU up after the module found it on the PCI bus; it fails for a board in a bad state or badly seated, short of power, or whose memory windows (BARs) the firmware did not assign. Reinstalling or upgrading the same driver does not change that.".to_owned();
            if gpu.index.is_none() && g.bus.is_none() {
                f.explanation.push_str(" The driver named the GPU only by its minor number: nvidia-smi -L and lspci say which board it is.");
            }
            f.actions.extend(actions(g.bus.as_deref()));
            // The driver's status code says neither which part failed nor
            // why, so the line alone is a firm but unspecific diagnosis;
            // nvidia-smi's `No devices were found` ties it to what the user
            // sees and rules out a module that is not loaded.
            f.confidence = round2(
                0.7 + 0.04 * f64::from(u8::from(named))
                    + 0.04 * f64::from(u8::from(repeats))
                    + 0.22 * f64::from(u8::from(seen)),
            );
            out.push(f);
        }
    }
}

/// The driver's `RmInitAdapter failed` and minor-number lines, grouped by
/// the GPU's bus id.
fn groups(incident: &Incident) -> Vec<Group<'_>> {
    let mut groups: Vec<Group> = Vec::new();
    for (m, c) in matches(incident, &INIT) {
        let i = group_index(&mut groups, c.name("bus").map(|b| b.as_str()));
        groups[i].inits.push((m, c["code"].to_owned()));
    }
    for (m, c) in matches(incident, &MINOR) {
        let i = group_index(&mut groups, c.name("bus").map(|b| b.as_str()));
        if let Ok(n) = c["minor"].parse() {
            groups[i].minors.push((m, n));
        }
    }
    groups
}

/// Cites on `f` the driver's first and last `RmInitAdapter failed` lines of
/// group `g` and its first minor-number line, naming the GPU as `who`.
fn cite_driver_lines(f: &mut Finding, g: &Group, who: &str) {
    for (m, code) in g.inits.iter().take(1).chain(g.inits.iter().skip(1).last()) {
        f.evidence_once(
            m.span,
            format!("the driver failed to initialise {who} (status {code})"),
        );
    }
    if let Some((m, n)) = g.minors.first() {
        f.evidence_once(
            m.span,
            format!(
                "rm_init_adapter failed for minor number {n}: /dev/nvidia{n}, not necessarily nvidia-smi's GPU {n}"
            ),
        );
    }
}

/// What to do about a GPU that fails initialisation, the one at `bus` when
/// the driver named it: see the board, look for PCIe errors, drain, power
/// cycle, then the firmware and hardware checks.
fn actions(bus: Option<&str>) -> Vec<Action> {
    let bus_cmd = bus
        .and_then(xid::normal_bus)
        .map(|b| format!("lspci -vvs {b} | grep -iE 'LnkSta|Region|BAR|Kernel driver'"))
        .unwrap_or_else(|| "nvidia-smi -L; lspci -nn -d 10de:".to_owned());
    vec![
        Action::advice(
            "see which board it is, its link state and whether its memory windows (BARs) were assigned",
            Some(&bus_cmd),
        ),
        Action::advice(
            "look for PCIe errors around the failure in the kernel log and the BMC's event log",
            Some("dmesg -T | grep -iE 'NVRM|AER|BAR'; ipmitool sel list | tail -n 20"),
        ),
        Action::new(
            ActionKind::Drain { host: None },
            Safety::AdvisoryOnly,
            "drain the node: the GPU is unusable until it initialises",
        ),
        Action::new(
            ActionKind::Reboot { host: None },
            Safety::AdvisoryOnly,
            "power-cycle the node (a cold boot clears a board stuck in a bad state)",
        ),
        Action::advice(
            "if it fails again: check the firmware's Above 4G Decoding / Resizable BAR / MMIO settings, reseat the board and its power cables or try another slot; a board that still fails is a hardware case (RMA)",
            None,
        ),
    ]
}

/// The group of `bus`, created when it is the first line about it.
fn group_index<'a>(groups: &mut Vec<Group<'a>>, bus: Option<&str>) -> usize {
    let found = groups.iter().position(|g| match (&g.bus, bus) {
        (Some(a), Some(b)) => same_bus(Some(a), Some(b)),
        (None, None) => true,
        _ => false,
    });
    found.unwrap_or_else(|| {
        groups.push(Group {
            bus: bus.map(str::to_owned),
            inits: Vec::new(),
            minors: Vec::new(),
        });
        groups.len() - 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_wordings_of_the_init_failure() {
        let c = INIT
            .captures("NVRM: GPU 0000:81:00.0: RmInitAdapter failed! (0x25:0x40:1470)")
            .expect("current wording");
        assert_eq!((&c["bus"], &c["code"]), ("0000:81:00.0", "0x25:0x40:1470"));
        let c = INIT
            .captures("38.773115] NVRM: RmInitAdapter failed! (0x26:0xffff:1127)")
            .expect("old wording");
        assert!(c.name("bus").is_none());
        for (line, minor) in [
            (
                "NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5",
                "5",
            ),
            (
                "NVRM: rm_init_adapter failed for device bearing minor number 0",
                "0",
            ),
        ] {
            assert_eq!(&MINOR.captures(line).expect(line)["minor"], minor);
        }
        let why = REASON
            .captures("NVRM: RmInitAdapter: Cannot initialize GSP firmware RM")
            .expect("reason");
        assert_eq!(&why["why"], "Cannot initialize GSP firmware RM");
        assert!(
            REASON
                .captures("NVRM: RmInitAdapter failed! (0x1:0x2:3)")
                .is_none()
        );
    }
}
