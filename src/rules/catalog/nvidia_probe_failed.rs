//! `nvidia-probe-failed`: the NVIDIA kernel module loaded but is bound to
//! no GPU: another driver (nouveau) owns them, the probe failed on the
//! device's PCI resources, or no NVIDIA GPU is on the bus at all.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: NvidiaProbeFailed = NvidiaProbeFailed;

pub struct NvidiaProbeFailed;

/// `NVRM: The NVIDIA probe routine was not called for 3 device(s).`: the
/// devices exist, another driver claimed them first.
static NOT_CALLED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"The NVIDIA probe routine was not called for (?P<n>[0-9]+) device\(s\)")
        .expect("regex")
});

/// `NVRM: The NVIDIA probe routine failed for 1 device(s).`: the module
/// tried and gave up (invalid BARs, unsupported GPU).
static PROBE_FAILED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"The NVIDIA probe routine failed for (?P<n>[0-9]+) device\(s\)").expect("regex")
});

/// The summary lines: `No NVIDIA graphics adapter probed!` (older),
/// `None of the NVIDIA devices were initialized.`, `None of the NVIDIA
/// graphics adapters were initialized!`.
static NONE_PROBED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"No NVIDIA graphics adapter probed|None of the NVIDIA (?:devices|graphics adapters) were initiali[sz]ed",
    )
    .expect("regex")
});

/// The driver's own word that it ignores a GPU only a legacy branch supports.
const LEGACY_GPU: &str = "kernel.nvrm-legacy-gpu";

/// The open kernel module refusing a GPU: no GSP (before Turing), or, in
/// R515 – R535, a GPU that is not a data-center one without the opt-in.
const OPEN_REFUSED: &str = "kernel.nvrm-open-module-unsupported-gpu";

/// The first line of the driver's report on a GPU it refuses:
/// `NVRM: The NVIDIA GPU 0000:09:00.0 (PCI ID: 10de:1d01)`.
static NAMED_GPU: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"The NVIDIA (?:v?GPU) (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]) \(PCI ID: (?P<id>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{4})\)")
        .expect("regex")
});

/// A PCI bus id as the kernel and the driver print it (`0000:07:00.0`).
static BUS_IN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]").expect("regex")
});

/// The kernel's and the driver's lines of the refused GPU: `nvidia
/// 0000:09:00.0: probe with driver nvidia failed with error -1`, `GPU
/// 0000:07:00.0: RmInitAdapter failed!` (with or without its status).
static REFUSED_AT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:probe with driver nvidia failed with error|nvidia: probe of \S+ failed with error|RmInitAdapter failed!)")
        .expect("regex")
});

/// `NVRM: No NVIDIA GPU found.`: the module sees no NVIDIA PCI device.
static NO_GPU: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"NVRM: No NVIDIA GPU found").expect("regex"));

/// Who holds the devices: the driver's own hint (`a driver such as:
/// nouveau, rivafb, …`), nouveau's own kernel lines, `lspci -k`.
static HOLDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"nouveau, rivafb|(?:^|\]\s|:\s)nouveau\s+(?:\[|[0-9a-f]{4}:)|Kernel driver in use: nouveau")
        .expect("regex")
});

/// `This PCI I/O region assigned to your NVIDIA device is invalid`.
static BAD_BAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"PCI I/O region assigned to your NVIDIA device is invalid").expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "nvidia-probe-failed",
    category: Category::DriverNotLoaded,
    severity: Severity::Critical,
    summary: "the NVIDIA kernel module is loaded but attached to no GPU (another driver such as nouveau owns them, or the probe failed)",
    anchors: &[
        "NVIDIA probe routine",
        "No NVIDIA graphics adapter probed",
        "None of the NVIDIA",
        "No NVIDIA GPU found",
        "nouveau",
        "PCI I/O region assigned to your NVIDIA device",
        "(PCI ID: ",
        "probe with driver nvidia failed",
        "RmInitAdapter failed!",
    ],
    doc: r#"
## What it means
`NVRM: The NVIDIA probe routine was not called for 3 device(s).` and
`NVRM: This can occur when a driver such as: nouveau, rivafb, nvidiafb or
rivatv was loaded and obtained ownership of the NVIDIA device(s).` (newer
drivers: `when another driver was loaded`), often with `NVRM: No NVIDIA
graphics adapter probed!`: the module loaded, but the kernel never handed
it the GPUs because another driver had bound them first. nvidia-smi finds
no devices; CUDA finds none.

`The NVIDIA probe routine failed for N device(s)` is the module trying
and giving up, typically after `This PCI I/O region assigned to your
NVIDIA device is invalid` (the firmware left a BAR unassigned).
`NVRM: No NVIDIA GPU found.` means no NVIDIA device is on the PCI bus at
all. After a GPU fell off the bus the next probe fails as well; then the
fell-off-the-bus rules tell the story and this one stays silent; so it does
when the driver says it ignores a GPU that only a legacy branch supports
(the catalog row `kernel.nvrm-legacy-gpu`).

When the open flavour of the module refused the GPU (the catalog row
`kernel.nvrm-open-module-unsupported-gpu`: `installed in this system is
not supported by open nvidia.ko because it does not include the required
GPU System Processor (GSP)`, or R515 – R535's `Open nvidia.ko is only ready
for use on Data Center GPUs` before `RmInitAdapter failed!`), the finding
says so instead, as unsupported hardware: it names the GPU by the bus id
and PCI ID of the report's first line and cites the probe's and
RmInitAdapter's lines of the same event.

## Why it happens
nouveau (the open-source driver) is not blacklisted, or is in the
initramfs and loads before the NVIDIA module; a framebuffer driver
grabbed the console GPU; after a kernel update the blacklist did not make
it into the new initramfs. For a failed probe: firmware PCI resources
(Above 4G Decoding, `pci=realloc`). For no GPU found: a GPU that is not
passed through to the VM, not seated, or not powered.

## How to confirm
`lsmod | grep -e nvidia -e nouveau`; `lspci -k -d 10de:` shows `Kernel
driver in use:` for each NVIDIA device.

## How to fix
Blacklist nouveau (`blacklist nouveau` and `options nouveau modeset=0` in
`/etc/modprobe.d/`), rebuild the initramfs (`update-initramfs -u` or
`dracut -f`) and reboot. For an invalid BAR, enable Above 4G Decoding or
boot with `pci=realloc`.

## Safety
Advice only: the fix changes the boot configuration and needs a reboot.
"#,
};

impl Rule for NvidiaProbeFailed {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let not_called: Vec<_> = matches(incident, &NOT_CALLED).collect();
        let failed: Vec<_> = matches(incident, &PROBE_FAILED).collect();
        let none: Vec<_> = matches(incident, &NONE_PROBED).map(|(m, _)| m).collect();
        let no_gpu: Vec<_> = matches(incident, &NO_GPU).map(|(m, _)| m).collect();
        if open_module_refused(incident, out) {
            return;
        }
        if not_called.is_empty() && failed.is_empty() && none.is_empty() && no_gpu.is_empty() {
            return;
        }
        // A GPU that fell off the bus fails the next probe too: that is
        // the fell-off-the-bus story, not a driver that never bound.
        let lost = crate::rules::support::kernel_lost_a_gpu(incident);
        // A GPU the driver skipped as a legacy board (`supported through
        // the NVIDIA 470.xx Legacy drivers`) explains `No NVIDIA GPU found`:
        // the catalog row `kernel.nvrm-legacy-gpu` names that cause.
        if lost || incident.known(LEGACY_GPU).next().is_some() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        let count = |hits: &[(&crate::model::Message, regex::Captures<'_>)]| {
            hits.iter()
                .filter_map(|(_, c)| c["n"].parse::<u32>().ok())
                .max()
        };
        let unbound = count(&not_called);
        let refused = count(&failed);
        for (m, c) in not_called.iter().take(1) {
            f.evidence(
                m.span,
                format!(
                    "the NVIDIA module was never handed {} device(s): another driver had bound them",
                    &c["n"]
                ),
            );
        }
        for (m, c) in failed.iter().take(1) {
            f.evidence(
                m.span,
                format!("the NVIDIA module gave up on {} device(s)", &c["n"]),
            );
        }
        for (m, n) in distinct(none.iter().copied()).into_iter().take(1) {
            f.evidence(m.span, format!("the module initialised no GPU ({n}x)"));
        }
        for m in no_gpu.iter().take(1) {
            f.evidence(m.span, "the module found no NVIDIA GPU on the PCI bus");
        }
        let holders: Vec<_> = matches(incident, &HOLDER).map(|(m, _)| m).collect();
        if let Some(m) = holders.first() {
            f.evidence(
                m.span,
                if m.text.contains("rivafb") {
                    "the driver names the usual holders: nouveau or a framebuffer driver"
                } else {
                    "nouveau is bound to the GPU"
                },
            );
        }
        let bad_bar = matches(incident, &BAD_BAR).next().map(|(m, _)| m);
        if let Some(m) = bad_bar {
            f.evidence(
                m.span,
                "the firmware left the GPU's PCI memory window (BAR) invalid",
            );
        }
        f.condition(
            "the NVIDIA module says why it has no GPU",
            unbound.is_some() || refused.is_some() || !no_gpu.is_empty(),
        );
        f.condition(
            "the inputs show who holds the GPUs or what the probe refused",
            !holders.is_empty() || bad_bar.is_some() || !no_gpu.is_empty(),
        );
        let nouveau = holders.iter().any(|m| !m.text.contains("rivafb"));
        f.title = title(
            unbound,
            refused,
            nouveau,
            bad_bar.is_some(),
            !no_gpu.is_empty(),
        );
        f.headline = format!(
            "{}: the kernel module is loaded, yet nvidia-smi and CUDA see no GPU.",
            crate::rules::support::capitalise(&f.title)
        );
        f.chain
            .push("nvidia-smi finds no devices; CUDA sees no GPU".to_owned());
        f.chain.push(f.title.clone());
        f.explanation = explanation(unbound.is_some(), refused.is_some());
        f.actions
            .extend(actions(refused.is_some() && unbound.is_none()));
        f.confidence = confidence(&f, 0.75, 0.96);
        out.push(f);
    }
}

/// The open kernel module refused the GPU (`OPEN_REFUSED`): one
/// unsupported-hardware finding naming the GPU and the module's reason,
/// citing the probe's and the adapter's failure lines of the same event.
/// Whether it made one.
fn open_module_refused(incident: &Incident, out: &mut Vec<Finding>) -> bool {
    let said: Vec<_> = incident.known(OPEN_REFUSED).collect();
    let Some((first, _)) = said.first() else {
        return false;
    };
    let source = first.span.source;
    let mut f = Finding::new(META.id, Category::UnsupportedHardware, META.severity);
    // The report's first line, just before the refusal, names the GPU.
    let named = matches(incident, &NAMED_GPU)
        .filter(|(m, _)| m.span.source == source && m.span <= first.span)
        .filter(|(m, _)| first.span.line.saturating_sub(m.span.line) <= 2)
        .last();
    let mut bus = named.as_ref().map(|(_, c)| c["bus"].to_owned());
    let id = named.as_ref().map(|(_, c)| c["id"].to_ascii_lowercase());
    if let Some((m, _)) = &named {
        f.evidence(m.span, "the driver names the GPU it refuses");
    }
    let gsp = said
        .iter()
        .any(|(m, _)| m.text.contains("not supported by open") || m.text.contains("required GPU"));
    for (m, _) in said.iter().take(3) {
        f.evidence_once(
            m.span,
            if gsp {
                "the open module refuses the GPU: it has no GSP (System Processor), which the open module requires"
            } else {
                "the open module (R515 – R535) takes only data-center GPUs unless NVreg_OpenRmEnableUnsupportedGpus=1 is set"
            },
        );
    }
    for (m, _) in matches(incident, &REFUSED_AT).filter(|(m, _)| m.span.source == source) {
        if bus.is_none() {
            bus = BUS_IN.find(&m.text).map(|b| b.as_str().to_owned());
        }
        f.evidence_once(m.span, "so the driver does not bring the GPU up");
    }
    for (m, _) in matches(incident, &PROBE_FAILED)
        .chain(matches(incident, &NONE_PROBED))
        .filter(|(m, _)| m.span.source == source)
        .take(2)
    {
        f.evidence_once(m.span, "the module initialised no GPU");
    }
    let gpu = crate::rules::xid::gpu_at(incident, bus.as_deref());
    match (gpu.index, &bus) {
        (Some(i), _) => {
            f.entities.gpus.insert(i);
        }
        (None, Some(b)) => {
            f.entities.gpu_bus_ids.insert(b.clone());
        }
        _ => {}
    }
    f.condition(
        "the open NVIDIA module says it does not support the GPU",
        true,
    );
    f.condition("the driver names the GPU (bus id and PCI ID)", id.is_some());
    let which = match (&bus, &id) {
        (Some(b), Some(i)) => format!("the GPU at {b} (PCI ID {i})"),
        (Some(b), None) => format!("the GPU at {b}"),
        _ => "the GPU".to_owned(),
    };
    f.title = if gsp {
        format!(
            "the open NVIDIA kernel module refuses {which}: it has no GSP, which the open module requires"
        )
    } else {
        format!(
            "the open NVIDIA kernel module refuses {which}: not a data-center GPU, and NVreg_OpenRmEnableUnsupportedGpus is not set"
        )
    };
    f.headline = format!(
        "{}: the driver loads but initialises no GPU, so nvidia-smi, CUDA and containers see none.",
        crate::rules::support::capitalise(&f.title)
    );
    f.chain
        .push("nvidia-smi finds no devices; CUDA sees no GPU".to_owned());
    f.chain.push(f.title.clone());
    f.explanation = open_explanation(gsp);
    f.actions.push(Action::advice(
        "see which flavour of the module is loaded ('Dual MIT/GPL' is the open one) and which GPU it refused",
        Some("modinfo -F license nvidia; lspci -nn -d 10de:"),
    ));
    f.actions.push(Action::advice(
        if gsp {
            "install the proprietary kernel module flavour of the driver for this GPU (NVIDIA's installer -m=kernel, the distribution's non-open kmod package, negativo17's 'kernel' in /etc/nvidia/kernel.conf), rebuild it and reboot"
        } else {
            "load the open module with 'options nvidia NVreg_OpenRmEnableUnsupportedGpus=1' (/etc/modprobe.d/, or the OS's kernel module arguments), or use the proprietary module or a driver from R545 on, then reload the module or reboot"
        },
        None,
    ));
    f.confidence = confidence(&f, 0.85, 0.95);
    out.push(f);
    true
}

/// Why the open module refused the GPU: it has no GSP (`gsp`), or it is
/// not a data-center GPU and the R515 – R535 module was not told to take it.
fn open_explanation(gsp: bool) -> String {
    if gsp {
        "The open flavour of the NVIDIA kernel module runs the resource manager on the GPU's System Processor (GSP), which only Turing and later GPUs have; an older GPU (Maxwell, Pascal, Volta) is refused at the probe. Driver packages that made the open flavour their default (NVIDIA's from R560) do this after an upgrade: the GPU is fine, the proprietary flavour of the same driver drives it.".to_owned()
    } else {
        "From R515 to R535 the open flavour of the NVIDIA kernel module initialised only data-center GPUs unless the NVreg_OpenRmEnableUnsupportedGpus=1 module option was given; a GeForce or workstation GPU fails RmInitAdapter with this message. The GPU is fine: the option, the proprietary module, or a driver from R545 on drives it.".to_owned()
    }
}

/// The finding's title: nouveau or another driver owns the `unbound`
/// devices, or the probe refused `refused` devices (for an invalid BAR when
/// `bad_bar`), or the module found no GPU (`no_gpu`) or initialised none.
fn title(
    unbound: Option<u32>,
    refused: Option<u32>,
    nouveau: bool,
    bad_bar: bool,
    no_gpu: bool,
) -> String {
    if let Some(n) = unbound {
        format!(
            "the NVIDIA driver is bound to no GPU: {}owns {n} device(s)",
            if nouveau {
                "nouveau "
            } else {
                "another driver (nouveau or a framebuffer driver) "
            }
        )
    } else if let Some(n) = refused {
        format!(
            "the NVIDIA driver's probe failed for {n} device(s){}",
            if bad_bar { ": invalid PCI BAR" } else { "" }
        )
    } else if no_gpu {
        "the NVIDIA driver loaded but finds no NVIDIA GPU on the PCI bus".to_owned()
    } else {
        "the NVIDIA driver initialised no GPU".to_owned()
    }
}

/// Why the module has no GPU: another driver bound them first (`unbound`),
/// the probe refused them (`refused`), or none is visible.
fn explanation(unbound: bool, refused: bool) -> String {
    if unbound {
        "The kernel gives a PCI device to the first driver that claims it. When nouveau (or a framebuffer driver) loads first, usually from the initramfs, the NVIDIA module finds the devices taken and is never probed for them. Reinstalling the NVIDIA driver changes nothing until nouveau is kept from loading.".to_owned()
    } else if refused {
        "The NVIDIA module was offered the device and refused it: an unassigned or too small PCI memory window (BAR) from the firmware, or a GPU this driver release does not support.".to_owned()
    } else {
        "The module loaded without a GPU to drive: none is visible on the PCI bus (not passed through, not seated or not powered), or another driver holds them.".to_owned()
    }
}

/// What to do: see which driver holds each device, then check the BARs when
/// the probe only refused devices (`refused_only`), else keep nouveau from
/// loading and rebuild the initramfs.
fn actions(refused_only: bool) -> Vec<Action> {
    let mut actions = vec![Action::advice(
        "see which driver holds each NVIDIA device",
        Some("lsmod | grep -e nvidia -e nouveau; lspci -k -d 10de:"),
    )];
    if refused_only {
        actions.push(Action::advice(
            "check the BAR assignment; enable Above 4G Decoding in the firmware or boot with pci=realloc",
            Some("dmesg | grep -iE 'BAR|NVRM'"),
        ));
    } else {
        actions.push(Action::advice(
            "keep nouveau from loading: add 'blacklist nouveau' and 'options nouveau modeset=0' to /etc/modprobe.d/blacklist-nouveau.conf",
            Some("grep -rs nouveau /etc/modprobe.d/ /usr/lib/modprobe.d/"),
        ));
        actions.push(Action::advice(
            "rebuild the initramfs so the blacklist applies at boot (update-initramfs -u, or dracut -f), then reboot",
            None,
        ));
    }
    actions
}
