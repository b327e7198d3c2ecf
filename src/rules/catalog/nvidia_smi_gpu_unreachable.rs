//! `nvidia-smi-gpu-unreachable`: nvidia-smi cannot open a GPU (`Unable to
//! determine the device handle for GPU …: GPU is lost`) and no kernel line
//! in the inputs tells the story: the best answer from nvidia-smi alone.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, matches};
use crate::rules::xid::{self, same_bus};
use crate::rules::{Action, ActionKind, Category, Finding, Rule, RuleMeta, Safety, Severity};

pub static RULE: NvidiaSmiGpuUnreachable = NvidiaSmiGpuUnreachable;

pub struct NvidiaSmiGpuUnreachable;

/// nvidia-smi's per-GPU failure, as every driver branch prints it (Windows
/// wraps the sentence after `Reboot`; `nvidia-smi -L` writes `gpu`), for
/// the failures that say the GPU itself is gone (`xid::NO_HANDLE_BUS`).
static NO_HANDLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"{}:\s*(?P<why>GPU is lost|GPU requires reset|Unknown Error)",
        xid::NO_HANDLE_BUS
    ))
    .expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "nvidia-smi-gpu-unreachable",
    category: Category::XidGpuFellOffBus,
    severity: Severity::Critical,
    summary: "nvidia-smi cannot open a GPU (GPU is lost, requires reset, Unknown Error) and no kernel log in the inputs says why",
    anchors: &[
        "Unable to determine the device handle",
        "Unable to detect the device handle",
    ],
    doc: r#"
## What it means
`Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.
Reboot the system to recover this GPU`: NVML asked the driver for the GPU
and the driver has marked it lost: it can no longer reach the board over
PCIe. This is what nvidia-smi prints after the kernel's Xid 79 (`GPU has
fallen off the bus`). `GPU requires reset` is a GPU the driver stopped
using after a fatal error. `Unknown Error` is a GPU that does not answer
NVML at all: on a host whose other GPUs answer, most often one that fell
off the bus (the threads that had the kernel log found Xid 79 there,
NVIDIA/open-gpu-kernel-modules#387), so it is named so at a lower
confidence than `GPU is lost`. The other GPUs are still listed.

This rule speaks only when the inputs hold no kernel line for that GPU
(no Xid, no `fallen off the bus`): then nvidia-smi's line is the only
evidence, and the finding says what the kernel log would settle.

## Why it happens
As for Xid 79: PCIe link errors, a riser or slot, power delivery, a board
overheating or failing. After a fatal Xid (48, 62, 95, 119 …) the driver
may also require a reset.

## How to confirm
`dmesg -T | grep -i -e 'fallen off' -e 'Xid'` (or `journalctl -k -b`) for
the kernel's account and the PCIe errors before it; `lspci -s BUS` shows
whether the device still answers on the bus.

## How to fix
Drain the node, stop its GPU services and reboot it (a lost GPU comes back
only with a reboot or a power cycle; `GPU requires reset` may clear with
`nvidia-smi -r` once nothing uses the GPU). If it happens again on the
same board, reseat or replace it and its riser.

## Safety
Advice only: draining and rebooting take down every workload of the node.
"#,
};

/// CUDA's `cudaErrorUnknown` (999), in any program's words.
const CUDA_UNKNOWN: &str = "cuda.unknown";

impl Rule for NvidiaSmiGpuUnreachable {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // The kernel's account, when present, is the other rules' story
        // (Xid 79, fallen off the bus, NV_ERR_GPU_IS_LOST); they cite this
        // line as nvidia-smi's view of it.
        if crate::rules::support::kernel_lost_a_gpu(incident) {
            return;
        }
        let mut seen: Vec<(String, &Message, String, usize)> = Vec::new();
        for (m, c) in matches(incident, &NO_HANDLE) {
            let Some(bus) = xid::normal_bus(&c["bus"]) else {
                continue;
            };
            match seen
                .iter_mut()
                .find(|(b, ..)| same_bus(Some(b), Some(&bus)))
            {
                Some(entry) => entry.3 += 1,
                None => seen.push((c["bus"].to_owned(), m, c["why"].to_owned(), 1)),
            }
        }
        for (printed, m, why, n) in seen {
            // An Xid on that GPU is the kernel's account of it.
            if incident
                .xids()
                .any(|(_, x)| same_bus(x.bus_id.as_deref(), Some(&printed)))
            {
                continue;
            }
            let lost = why == "GPU is lost";
            let reset = why == "GPU requires reset";
            // `Unknown Error`: a GPU that no longer answers, most often one
            // lost from the bus; said so, at a lower confidence.
            let (category, severity) = if lost {
                (Category::XidGpuFellOffBus, Severity::Critical)
            } else if reset {
                (Category::XidOther, Severity::Error)
            } else {
                (Category::XidGpuFellOffBus, Severity::Error)
            };
            let gpu = xid::gpu_at(incident, Some(&printed));
            let mut f = Finding::new(META.id, category, severity);
            match gpu.index {
                Some(i) => {
                    f.entities.gpus.insert(i);
                }
                None => {
                    f.entities.gpu_bus_ids.insert(printed.clone());
                }
            }
            let label = gpu.label();
            f.evidence(
                m.span,
                format!(
                    "nvidia-smi cannot open {label}: {why}{}",
                    if n > 1 {
                        format!(" ({n}x)")
                    } else {
                        String::new()
                    }
                ),
            );
            cite_cuda_unknown(incident, &mut f, &gpu.short());
            let healths = gpu.health(incident);
            let sick = xid::cite_health(&mut f, &healths, &gpu.short());
            f.condition("nvidia-smi names the GPU by its bus id", true);
            f.condition(
                "the kernel's log of the failure (Xid, fallen off the bus) is in the inputs",
                false,
            );
            f.condition("nvidia-smi -q shows the GPU's state", sick.any());
            (f.title, f.headline) = title_and_headline(&label, lost, reset);
            f.chain
                .push(format!("processes on {} fail or hang", gpu.short()));
            f.chain.push(if lost {
                format!(
                    "{} is lost from the PCIe bus (nvidia-smi: GPU is lost)",
                    gpu.short()
                )
            } else if !reset {
                format!(
                    "{} no longer answers the driver, most likely lost from the PCIe bus (nvidia-smi: {why})",
                    gpu.short()
                )
            } else {
                format!(
                    "{} is unusable until reset (nvidia-smi: {why})",
                    gpu.short()
                )
            });
            f.explanation = "nvidia-smi prints this for one GPU and lists the others; the driver has given the GPU up. The kernel's Xid line (79 for a GPU lost from the bus) says what happened and when, and the PCIe errors before it say why.".to_owned();
            f.actions.extend(actions(reset));
            f.confidence = confidence(&f, if lost { 0.6 } else { 0.45 }, 0.85);
            out.push(f);
        }
    }
}

/// The finding's title and headline for `label`, by what nvidia-smi said:
/// the GPU is lost, requires a reset (`reset`), or `Unknown Error`.
fn title_and_headline(label: &str, lost: bool, reset: bool) -> (String, String) {
    let title = if lost {
        format!(
            "{label} is lost: nvidia-smi cannot reach it (the GPU fell off the bus; no kernel log in the inputs)"
        )
    } else if reset {
        format!("{label} requires a reset: nvidia-smi cannot use it (no kernel log in the inputs)")
    } else {
        format!("nvidia-smi cannot open {label}: Unknown Error (no kernel log in the inputs)")
    };
    let headline = if lost {
        format!(
            "nvidia-smi says {label} is lost: the driver can no longer reach it over PCIe, as after an Xid 79 (fallen off the bus). Everything using it fails until the node is rebooted; the kernel log, not in the inputs, would confirm it and show why."
        )
    } else if reset {
        format!(
            "nvidia-smi says {label} requires a reset: the driver stopped using it after a fatal error. The kernel log, not in the inputs, would name the Xid."
        )
    } else {
        format!(
            "nvidia-smi cannot open {label} (Unknown Error): the GPU does not answer NVML, most likely because it fell off the bus. The kernel log, not in the inputs, would confirm it (Xid 79, `fallen off the bus`) or name another fatal Xid."
        )
    };
    (title, headline)
}

/// What to do: confirm with the kernel log, drain, reboot (or reset the GPU
/// when it only requires a `reset`), and the hardware checks if it repeats.
fn actions(reset: bool) -> Vec<Action> {
    vec![
        Action::advice(
            "confirm with the kernel's account: the Xid and the PCIe errors before it",
            Some("dmesg -T | grep -i -e 'fallen off' -e 'Xid' -e 'AER'"),
        ),
        Action::new(
            ActionKind::Drain { host: None },
            Safety::AdvisoryOnly,
            "drain the node and stop the services that use its GPUs",
        ),
        Action::new(
            ActionKind::Reboot { host: None },
            Safety::AdvisoryOnly,
            if reset {
                "reboot the node (or reset the GPU with nvidia-smi -r once nothing uses it)"
            } else {
                "reboot the node: a lost GPU comes back only with a reboot or power cycle"
            },
        ),
        Action::advice(
            "if it happens again on the same board or slot, reseat or replace the GPU and its riser (hardware case)",
            None,
        ),
    ]
}

/// CUDA's `unknown error` at initialisation (ggml's `failed to initialize
/// CUDA: unknown error`, error 999) on a host whose GPU no longer answers
/// is that GPU's consequence: CUDA enumerates every visible GPU and gives
/// up on the lost one (`gpu`: its short name).
fn cite_cuda_unknown(incident: &Incident, f: &mut Finding, gpu: &str) {
    for (u, _) in incident.known(CUDA_UNKNOWN) {
        f.evidence(
            u.span,
            format!("CUDA cannot initialise beside the unreachable {gpu}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_gpus_and_not_a_callers_permission_problem() {
        let cases = [
            (
                "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU",
                Some("GPU is lost"),
            ),
            (
                "Unable to determine the device handle for GPU0000:07:00.0: Unknown Error",
                Some("Unknown Error"),
            ),
            (
                "Unable to determine the device handle for GPU 00000000:3B:00.0: GPU requires reset",
                Some("GPU requires reset"),
            ),
            // `nvidia-smi -L` (NordicHPC/sonar#72).
            (
                "Unable to determine the device handle for gpu 0000:18:00.0: Unknown Error",
                Some("Unknown Error"),
            ),
            (
                "Unable to determine the device handle for GPU 0000:3b:00.0: Insufficient Permissions",
                None,
            ),
            // A bus id retyped with a three-digit domain (NVIDIA/dcgm-exporter#604).
            (
                "Unable to determine the device handle for GPU 000:BA:80.0: Unknown Error",
                Some("Unknown Error"),
            ),
            // Windows' nvidia-smi.exe (jamesstringer90/Easy-GPU-PV#276).
            (
                "Unable to detect the device handle for GPU0000:B1:00.0: Unknown Error",
                Some("Unknown Error"),
            ),
            // 610-series drivers put the GPU's index first (a public hardware
            // log of an A40 lost to a thermal shutdown, 2026-03-10).
            (
                "Unable to determine the device handle for GPU1: 0000:82:00.0: Unknown Error",
                Some("Unknown Error"),
            ),
        ];
        for (line, why) in cases {
            let got = NO_HANDLE.captures(line).map(|c| c["why"].to_owned());
            assert_eq!(got.as_deref(), why, "{line}");
        }
    }

    /// A reduction of batch AB's case 2103, cited as such: nvidia-smi
    /// (driver 610) cannot open GPU1, and llama-server started with the
    /// other GPUs then fails CUDA's initialisation with `unknown error`.
    /// The lost GPU is the root; CUDA's error is its consequence, cited.
    #[test]
    fn cuda_unknown_error_beside_an_unreachable_gpu_is_its_consequence() {
        let text = "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n\
0.00.002.225 E ggml_cuda_init: failed to initialize CUDA: unknown error\n";
        let d = crate::testing::analyze_paste(text).diagnosis;
        let root = d.findings.first().expect("a finding");
        assert_eq!(d.root_cause.as_deref(), Some(root.id.as_str()));
        assert_eq!(root.category, Category::XidGpuFellOffBus, "{}", root.title);
        crate::testing::cites_line(root, 2);
    }
}
