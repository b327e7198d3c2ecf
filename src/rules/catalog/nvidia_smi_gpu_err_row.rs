//! `nvidia-smi-gpu-err-row`: nvidia-smi's table prints `ERR!` in a GPU's
//! name and in every sensor of its row while other GPUs of the same table
//! answer: NVML can no longer query that GPU. No kernel line in the inputs
//! says why, so it is read as the GPU lost (the commonest cause) at a lower
//! confidence, naming the Xid the kernel log would settle it with.

use crate::correlate::{Gpu, Incident};
use crate::model::Message;
use crate::rules::support::confidence;
use crate::rules::xid::same_bus;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: NvidiaSmiGpuErrRow = NvidiaSmiGpuErrRow;

pub struct NvidiaSmiGpuErrRow;

/// `ERR!` cells on the sensor line under the GPU's name (fan, temperature,
/// performance state, power, utilisation) at which the row reads nothing:
/// one `ERR!` cell is a transient misread of a healthy card (Azure's `ERR!
/// / 250W` power on a V100, azhpc-diagnostics#77; a fan's `ERR!`).
const SENSORS_UNREAD: usize = 3;

static META: RuleMeta = RuleMeta {
    id: "nvidia-smi-gpu-err-row",
    category: Category::XidGpuFellOffBus,
    severity: Severity::Error,
    summary: "nvidia-smi reads ERR! in a GPU's name and every sensor while the other GPUs answer: NVML can no longer query that GPU",
    anchors: &["ERR!"],
    doc: r#"
## What it means
nvidia-smi's table shows a GPU whose name cell and every sensor of its row
(fan, temperature, performance state, power, utilisation, ECC) read `ERR!`,
while the other GPUs of the same table print their names and figures:

```
|   4  ERR!                On   | 00000000:83:00.0 Off |                 ERR! |
|ERR!  ERR! ERR!    ERR! / ERR! |      0MiB / 46068MiB |    ERR!      Default |
```

nvidia-smi still enumerates the board, but every NVML query on it fails:
the GPU no longer answers the driver. This is what a GPU lost from the bus
(Xid 79), a GPU whose firmware stopped answering (Xid 119/120, `Timeout
waiting for RPC from GSP`) or one that needs a reset after a fatal error
(Xid 154) looks like from nvidia-smi. Without the kernel log it is named as
the GPU lost, at a lower confidence, with the command that says which.

One `ERR!` cell is not this: a healthy card can misread one sensor
(`ERR! / 250W` for power, a fan's `ERR!`) for a moment.

## Why it happens
PCIe link errors, a riser or slot, power delivery, a board overheating or
failing; the GPU's GSP firmware hanging; a fatal error after which the
driver stopped using the GPU until it is reset.

## How to confirm
`dmesg -T | grep -i xid` (or `journalctl -k -b`) for the GPU's bus id: Xid
79 (fallen off the bus), 119/120 (GSP), 154 (recovery action); `lspci -s
BUS` for whether the device still answers on the bus; `nvidia-smi -q -i N`
for its `GPU Recovery Action`.

## How to fix
Drain the node and stop the work on that GPU; `nvidia-smi -r -i N` once
nothing uses it may bring it back, else reboot the node. If it happens
again on the same board, reseat or replace it.

## Safety
Advice only: resetting a GPU or rebooting takes down the work on it.
"#,
};

impl Rule for NvidiaSmiGpuErrRow {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // The kernel's account of a lost GPU, when present, is the other
        // rules' story (Xid 79, fallen off the bus, NV_ERR_GPU_IS_LOST).
        if crate::rules::support::kernel_lost_a_gpu(incident) {
            return;
        }
        let answering: Vec<&Gpu> = incident.gpus.iter().filter(|g| g.name.is_some()).collect();
        if answering.is_empty() {
            return;
        }
        for gpu in incident.gpus.iter().filter(|g| g.name.is_none()) {
            let Some((row, sensors)) = unread_row(incident, gpu) else {
                continue;
            };
            // An Xid on that GPU is the kernel's account of it.
            if gpu.bus_id.as_deref().is_some_and(|b| {
                incident
                    .xids()
                    .any(|(_, x)| same_bus(x.bus_id.as_deref(), Some(b)))
            }) {
                continue;
            }
            out.push(finding(gpu, row, sensors, &answering));
        }
    }
}

/// The GPU's own row line when its name reads `ERR!`, and the sensor line
/// under it when that reads `ERR!` in at least [`SENSORS_UNREAD`] cells.
fn unread_row<'a>(incident: &'a Incident, gpu: &Gpu) -> Option<(&'a Message, &'a Message)> {
    let on = |m: &Message, below: u32| {
        gpu.spans
            .iter()
            .any(|s| s.source == m.span.source && s.line + below == m.span.line)
    };
    let row = incident
        .facts
        .messages
        .iter()
        .find(|m| on(m, 0) && name_cell_err(&m.text))?;
    let sensors = incident
        .facts
        .messages
        .iter()
        .find(|m| on(m, 1) && m.text.matches("ERR!").count() >= SENSORS_UNREAD)?;
    Some((row, sensors))
}

/// Whether the row's first cell (`|   4  ERR!                On   |`) holds
/// `ERR!` where the product name stands.
fn name_cell_err(text: &str) -> bool {
    let cell = text.trim_start().trim_start_matches('|');
    let cell = cell.split('|').next().unwrap_or_default();
    let mut words = cell.split_whitespace();
    words.next().is_some_and(|i| i.parse::<u32>().is_ok()) && words.next() == Some("ERR!")
}

fn finding(gpu: &Gpu, row: &Message, sensors: &Message, answering: &[&Gpu]) -> Finding {
    let n = gpu.index;
    let bus = gpu.bus_id.as_deref().unwrap_or("its bus");
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.gpus.insert(n);
    f.evidence(
        row.span,
        format!("nvidia-smi cannot read GPU {n}'s name (ERR!) at {bus}"),
    );
    f.evidence(
        sensors.span,
        format!(
            "nor its sensors: {} ERR! cells (fan, temperature, power, utilisation)",
            sensors.text.matches("ERR!").count()
        ),
    );
    let others: Vec<String> = answering
        .iter()
        .map(|g| format!("GPU {}", g.index))
        .collect();
    if let Some(span) = answering.first().and_then(|g| g.spans.first()) {
        f.evidence(
            *span,
            format!(
                "the same table reads {} normally: the driver answers for them",
                others.join(", ")
            ),
        );
    }
    f.condition(
        "nvidia-smi reads ERR! in the GPU's name and its sensors",
        true,
    );
    f.condition("other GPUs of the same table answer", true);
    f.condition(
        "the kernel log names the GPU's Xid (missing: dmesg -T | grep -i xid)",
        false,
    );
    f.title = format!("GPU {n} ({bus}) no longer answers nvidia-smi: every cell reads ERR!");
    f.headline = format!(
        "nvidia-smi reads ERR! for GPU {n}'s name and every sensor (bus {bus}) while {} {}: the driver can no longer query that GPU, most often a GPU lost from the bus (Xid 79) or whose firmware stopped answering (Xid 119); the kernel log says which.",
        others.join(", "),
        if others.len() == 1 {
            "answers"
        } else {
            "answer"
        }
    );
    f.chain.push(format!(
        "work on GPU {n} hangs or fails; nvidia-smi is slow or reads ERR!"
    ));
    f.chain.push(format!(
        "GPU {n} no longer answers NVML (lost from the bus, firmware hung, or waiting for a reset)"
    ));
    f.explanation = "nvidia-smi prints ERR! in a cell whose NVML query failed. Every query of one GPU failing, while the other GPUs answer, is a GPU the driver can no longer talk to; the kernel log holds the Xid that says why.".to_owned();
    f.actions.push(Action::advice(
        "find the GPU's Xid in the kernel log (79: fallen off the bus; 119/120: GSP firmware timeout; 154: recovery action)",
        Some("dmesg -T | grep -i xid"),
    ));
    if let Some(b) = gpu.bus_id.as_deref() {
        f.actions.push(Action::advice(
            "check whether the device still answers on the PCI bus (absent or `rev ff`: lost)",
            Some(&format!("lspci -s {b}")),
        ));
    }
    f.actions.push(Action::advice(
        format!(
            "drain the node's work from GPU {n}, then reset it once nothing uses it (`nvidia-smi -r -i {n}`) or reboot the node; reseat or replace the board if it happens again"
        ),
        None,
    ));
    f.confidence = confidence(&f, 0.3, 0.65).min(0.5);
    f
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// NVIDIA/gpu-operator#559: GPU 0 of an A40 node reads ERR! in every
    /// cell while GPU 1 answers.
    const A40: &str = "\
Fri Jul 28 08:01:28 2023      
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 525.125.06   Driver Version: 525.125.06   CUDA Version: 12.0     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  ERR!                On   | 00000000:19:00.0 Off |                 ERR! |
|ERR!  ERR! ERR!    ERR! / ERR! |      0MiB / 46068MiB |    ERR!      Default |
|                               |                      |                 ERR! |
+-------------------------------+----------------------+----------------------+
|   1  NVIDIA A40          On   | 00000000:1A:00.0 Off |                    0 |
|  0%   26C    P8    12W / 300W |      0MiB / 46068MiB |      0%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+
";

    #[test]
    fn a_row_of_err_cells_beside_an_answering_gpu_is_that_gpu_unreachable() {
        let f = findings_of(super::META.id, A40);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.gpus.contains(&0));
        assert!(f[0].title.contains("0000:19:00.0"), "{}", f[0].title);
        assert!(f[0].confidence <= 0.5);
        crate::testing::advises(&f[0], "grep -i xid");
    }

    /// Azure/azhpc-diagnostics#77: one transient ERR! power cell on a
    /// healthy V100 is no lost GPU.
    #[test]
    fn one_err_cell_is_not_a_lost_gpu() {
        let text = "\
+-------------------------------+----------------------+----------------------+
|   1  Tesla V100-PCIE...  On   | 00008ED0:00:00.0 Off |                    0 |
| N/A   29C    P0   ERR! / 250W |    593MiB / 16160MiB |      0%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+
";
        assert!(findings_of(super::META.id, text).is_empty());
    }

    /// The whole table unreadable (no GPU answers) is not this rule's: a
    /// driver that answers for none is another story.
    #[test]
    fn no_answering_gpu_no_finding() {
        let only_err: String = A40
            .lines()
            .filter(|l| !l.contains("NVIDIA A40") && !l.contains("26C"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(findings_of(super::META.id, &only_err).is_empty());
    }
}
