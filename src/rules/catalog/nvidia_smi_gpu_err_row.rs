//! `nvidia-smi-gpu-err-row`: nvidia-smi's table prints `ERR!` in a GPU's
//! name and in every sensor of its row while other GPUs of the same table
//! answer, or while it is the only GPU listed: NVML can no longer query
//! that GPU. No kernel line in the inputs
//! says why, so it is read as the GPU lost (the commonest cause) at a lower
//! confidence, naming the Xid the kernel log would settle it with.

use crate::correlate::{Gpu, Incident};
use crate::model::Message;
use crate::rules::support::confidence;
use crate::rules::xid::same_bus;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod fan;
mod unknown;

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
    summary: "nvidia-smi reads ERR! in a GPU's sensors (and its name, while the other GPUs answer) or nvidia-smi -q reads Unknown Error for its attributes: NVML can no longer query that GPU",
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

The same row on a host whose table lists that GPU alone (a CI runner's
only A10G, `|   0  ERR!                Off  | 00000000:00:1E.0 Off |`,
while nvidia-smi still exits 0) is that GPU unreachable too, at a lower
confidence: no other GPU shows the driver answering. A table of several
GPUs that all read so is not this rule's: a driver that answers for none
is another story.

A GPU whose name still reads (the driver's record of the board) but
whose sensor line reads `ERR!` in three cells or more is the same GPU,
whether or not other GPUs are shown. So is a GPU block of `nvidia-smi -q`
whose own attributes read `Unknown Error` (`Product Brand : Unknown
Error`), except a field that reads so on every GPU of the report or that
drivers cannot read on healthy GPUs (`Addressing Mode`). The NVIDIA
container hook's `nvidia-container-cli: detection error: nvml error:
unknown error` is cited beside either as its echo: no GPU container starts.

One `ERR!` cell is not this: a healthy card can misread one sensor
(`ERR! / 250W` for power, a fan's `ERR!`) for a moment.

One `ERR!` cell is a finding of its own (`xid-other`, at a lower
confidence) when it is the fan cell of one GPU while the other GPUs of the
same model in the same table read their fans (`|ERR! 46C P2 124W / 450W |`
for GPU 3 of six RTX 4090s reading `30%`): the board reads its temperature
and power but not its fan, which its twins report: the fan or its
tachometer has failed (leptonai/gpud's `FindSummaryErr` flags a fan's
`ERR!` as an error too). The finding names the GPU and its bus id. A fan
`ERR!` on a lone GPU, or a power cell's, stays a possible misread.

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
        let echo: Vec<&Message> = incident.known(HOOK_NVML_UNKNOWN).map(|(m, _)| m).collect();
        let before = out.len();
        for gpu in &incident.gpus {
            // A GPU whose name reads ERR! is unreachable beside GPUs that
            // answer, or alone in its table (a table of several that reads
            // none is another story); one whose name still reads (the
            // driver's cached board name) is, by its sensors alone.
            let named = gpu.name.is_some();
            if !named && answering.is_empty() && incident.gpus.len() > 1 {
                continue;
            }
            let Some((row, sensors)) = unread_row(incident, gpu, named) else {
                continue;
            };
            // An Xid on that GPU is the kernel's account of it.
            if xid_on_its_bus(incident, gpu) {
                continue;
            }
            let others: Vec<&Gpu> = answering
                .iter()
                .copied()
                .filter(|g| g.index != gpu.index)
                .collect();
            let mut f = finding(gpu, row, sensors, &others);
            cite_echo(&mut f, &echo);
            out.push(f);
        }
        if out.len() == before {
            out.extend(unknown::findings(incident, &echo));
        }
        if out.len() == before {
            out.extend(fan::findings(incident));
        }
    }
}

/// The NVIDIA container hook's NVML query failing with NVML's unknown
/// error (catalogs/stacks-containers.toml): the same GPU seen from the
/// container runtime.
const HOOK_NVML_UNKNOWN: &str = "stacks-containers.nvml-unknown-error";

/// Cites the container hook's `nvml error: unknown error`, the echo of a
/// GPU NVML cannot query, when the inputs hold it.
/// Whether the kernel logged an Xid for `gpu`'s bus: its account of the GPU
/// comes first.
fn xid_on_its_bus(incident: &Incident, gpu: &Gpu) -> bool {
    gpu.bus_id.as_deref().is_some_and(|b| {
        incident
            .xids()
            .any(|(_, x)| same_bus(x.bus_id.as_deref(), Some(b)))
    })
}

fn cite_echo(f: &mut Finding, echo: &[&Message]) {
    let Some(m) = echo.first() else {
        return;
    };
    f.evidence_marked(
        m.span,
        "the NVIDIA container hook's NVML query fails too: the driver cannot enumerate the GPUs, so no GPU container starts",
        "nvml error: unknown error",
    );
    f.condition(
        "the container hook's NVML query fails with NVML's unknown error",
        true,
    );
    f.confidence = crate::rules::support::round2((f.confidence + 0.05).min(0.55));
}

/// The GPU's own row line (whose name must read `ERR!` unless the GPU is
/// `named`) and the sensor line under it, when that reads `ERR!` in at
/// least [`SENSORS_UNREAD`] cells.
fn unread_row<'a>(incident: &'a Incident, gpu: &Gpu, named: bool) -> Option<(Span, &'a Message)> {
    let messages = &incident.facts.messages;
    let at = |s: Span| {
        messages
            .binary_search_by_key(&s, |m| m.span)
            .ok()
            .map(|i| &messages[i])
    };
    gpu.spans.iter().find_map(|&row| {
        if !named && !at(row).is_some_and(|m| name_cell_err(&m.text)) {
            return None;
        }
        let below = Span {
            line: row.line + 1,
            ..row
        };
        let sensors = at(below).filter(|m| m.text.matches("ERR!").count() >= SENSORS_UNREAD)?;
        Some((row, sensors))
    })
}

/// Whether the row's first cell (`|   4  ERR!                On   |`) holds
/// `ERR!` where the product name stands.
fn name_cell_err(text: &str) -> bool {
    let cell = text.trim_start().trim_start_matches('|');
    let cell = cell.split('|').next().unwrap_or_default();
    let mut words = cell.split_whitespace();
    words.next().is_some_and(|i| i.parse::<u32>().is_ok()) && words.next() == Some("ERR!")
}

fn finding(gpu: &Gpu, row: Span, sensors: &Message, answering: &[&Gpu]) -> Finding {
    let n = gpu.index;
    let bus = gpu.bus_id.as_deref().unwrap_or("its bus");
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.gpus.insert(n);
    let named = gpu.name.as_deref();
    f.evidence(
        row,
        match named {
            Some(name) => format!(
                "nvidia-smi still lists GPU {n} ({name}) at {bus}, from the driver's record of the board"
            ),
            None => format!("nvidia-smi cannot read GPU {n}'s name (ERR!) at {bus}"),
        },
    );
    f.evidence(
        sensors.span,
        format!(
            "{} its sensors: {} ERR! cells (fan, temperature, {}power, utilisation)",
            if named.is_some() {
                "but none of"
            } else {
                "nor"
            },
            sensors.text.matches("ERR!").count(),
            if named.is_some() {
                "performance state, "
            } else {
                ""
            }
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
        "nvidia-smi reads ERR! in the GPU's sensors (and its name, when it reads none)",
        true,
    );
    f.condition("other GPUs of the same table answer", !answering.is_empty());
    f.condition(
        "the kernel log names the GPU's Xid (missing: dmesg -T | grep -i xid)",
        false,
    );
    let what = if named.is_some() {
        "every sensor"
    } else {
        "every cell"
    };
    f.title = format!("GPU {n} ({bus}) no longer answers nvidia-smi: {what} reads ERR!");
    let beside = match others.len() {
        0 => String::new(),
        1 => format!(" while {} answers", others[0]),
        _ => format!(" while {} answer", others.join(", ")),
    };
    f.headline = format!(
        "nvidia-smi reads ERR! for GPU {n}'s {} (bus {bus}){beside}: the driver can no longer query that GPU, most often a GPU lost from the bus (Xid 79) or whose firmware stopped answering (Xid 119); the kernel log says which.",
        if named.is_some() {
            "sensors"
        } else {
            "name and every sensor"
        },
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

    /// NVIDIA/dcgm-exporter#46: GPU 7 of an A100 node, its name still read
    /// but every sensor cell ERR!, and the container hook's NVML query
    /// failing with NVML's unknown error.
    const A100_GPU7: &str = "\
+-------------------------------+----------------------+----------------------+
|   7  NVIDIA A100 80G...  On   | 00000000:D6:00.0 Off |                 ERR! |
|ERR!  ERR! ERR!      1W /  N/A |      0MiB / 80994MiB |    ERR!      Default |
|                               |                      |                 ERR! |
+-------------------------------+----------------------+----------------------+
$ docker run --gpus 6 --rm -p 9400:9400 nvidia/dcgm-exporter bash
docker: Error response from daemon: failed to create shim: OCI runtime create failed: container_linux.go:380: starting container process caused: process_linux.go:545: container init caused: Running hook #0:: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: detection error: nvml error: unknown error: unknown.
";

    #[test]
    fn sensor_cells_err_under_a_readable_name_are_that_gpu_unreachable() {
        let f = findings_of(super::META.id, A100_GPU7);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.gpus.contains(&7));
        assert!(f[0].title.contains("0000:d6:00.0"), "{}", f[0].title);
        crate::testing::cites_line_saying(&f[0], 7, "container hook");
        crate::testing::advises(&f[0], "grep -i xid");
        // Without the hook's line it still stands, a little lower.
        let table: String = A100_GPU7
            .lines()
            .take(5)
            .map(|l| format!("{l}\n"))
            .collect();
        let g = findings_of(super::META.id, &table);
        assert_eq!(g.len(), 1, "{g:#?}");
        assert!(g[0].confidence < f[0].confidence);
    }

    /// NVIDIA/dcgm-exporter#319: `nvidia-smi -q` cannot read the A10G at
    /// 00:16.0's brand, beside dockerd's hook error with NVML's unknown
    /// error.
    const A10G_Q: &str = "\
Apr 30 21:13:04 ip-10-1-5-148 dockerd[10261]: time=\"2024-04-30T21:13:04.829815111Z\" level=error msg=\"restartmanger wait error: failed to create task for container: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\\nnvidia-container-cli: detection error: nvml error: unknown error: unknown\"

==============NVSMI LOG==============

Timestamp                                 : Tue Apr 30 21:16:21 2024
Driver Version                            : 535.161.08
CUDA Version                              : 12.2

Attached GPUs                             : 8
GPU 00000000:00:16.0
    Product Name                          : NVIDIA A10G
    Product Brand                         : Unknown Error
    Product Architecture                  : Ampere
";

    #[test]
    fn unknown_error_in_a_gpus_own_attribute_is_that_gpu_unreachable() {
        let f = findings_of(super::META.id, A10G_Q);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].entities.gpu_bus_ids.contains("0000:00:16.0"),
            "{:?}",
            f[0].entities
        );
        crate::testing::cites_line_saying(&f[0], 12, "Product Brand");
        crate::testing::cites_line_saying(&f[0], 1, "container hook");
        crate::testing::advises(&f[0], "journalctl -k | grep -i xid");
        // A field the driver cannot read on any GPU (gpud's
        // TestParseWithAddressingModeError: `Addressing Mode : Unknown
        // Error` on every GPU of a healthy host) is no GPU's fault
        // (assembled, not copied: the block above with that field).
        let addressing = A10G_Q.replace("Unknown Error", "NVIDIA").replace(
            "Ampere\n",
            "Ampere\n    Addressing Mode                       : Unknown Error\n",
        );
        assert!(findings_of(super::META.id, &addressing).is_empty());
    }

    /// leptonai/gpud's nvidia-smi.525.125.06.out.0: one ERR! fan cell
    /// under a readable name is a misread sensor, not a lost GPU.
    #[test]
    fn one_err_fan_cell_under_a_name_is_not_a_lost_gpu() {
        let text = "\
|   0  NVIDIA GeForce ...  Off  | 00000000:01:00.0  On |                  Off |
|ERR!   38C    P5    49W / 450W |   2021MiB / 23028MiB |      0%   E. Process |
";
        assert!(findings_of(super::META.id, text).is_empty());
    }

    /// https://www.cnblogs.com/asandstar/p/19391726: GPU 3's fan reads
    /// ERR! while GPU 2, the same RTX 4090, reads 30% (two of the six
    /// blocks, the page's collapsed whitespace kept): a failed fan, named
    /// with its bus id; GPU 3's block alone is a possible misread.
    #[test]
    fn one_err_fan_cell_beside_twins_reading_theirs_is_a_failed_fan() {
        let twins = "\
+-----------------------------------------+------------------------+----------------------+
| 2 NVIDIA GeForce RTX 4090 Off | 00000000:1D:00.0 Off | Off |
| 30% 48C P0 106W / 450W | 20584MiB / 24564MiB | 100% Default |
| | | N/A |
+-----------------------------------------+------------------------+----------------------+
| 3 NVIDIA GeForce RTX 4090 Off | 00000000:1E:00.0 Off | Off |
|ERR! 46C P2 124W / 450W | 21833MiB / 24564MiB | 0% Default |
| | | N/A |
+-----------------------------------------+------------------------+----------------------+
";
        let f = findings_of(super::META.id, twins);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].category, crate::rules::Category::XidOther);
        assert!(f[0].entities.gpus.contains(&3) && !f[0].entities.gpus.contains(&2));
        assert!(f[0].title.contains("0000:1e:00.0"), "{}", f[0].title);
        assert!(f[0].confidence <= 0.5);
        crate::testing::advises(&f[0], "nvidia-smi -q -i 3");
        let alone: String = twins.lines().skip(5).map(|l| format!("{l}\n")).collect();
        assert!(findings_of(super::META.id, &alone).is_empty());
    }

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

    /// pytorch/test-infra#3967: a CI runner's only GPU, an A10G, reads
    /// ERR! in its name and every sensor (its memory still reads) while
    /// nvidia-smi exits 0: that GPU unreachable, named by its bus id.
    #[test]
    fn a_lone_gpu_reading_err_everywhere_is_that_gpu_unreachable() {
        let text = "\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 525.89.02    Driver Version: 525.89.02    CUDA Version: 12.0     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  ERR!                Off  | 00000000:00:1E.0 Off |                 ERR! |
|ERR!  ERR! ERR!    ERR! / ERR! |   4184MiB / 23028MiB |    ERR!      Default |
|                               |                      |                 ERR! |
+-------------------------------+----------------------+----------------------+
";
        let f = findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.gpus.contains(&0));
        assert!(f[0].title.contains("0000:00:1e.0"), "{}", f[0].title);
        assert!(f[0].confidence <= 0.5);
    }

    /// Several GPUs of one table all unreadable (none answers) is not this
    /// rule's: a driver that answers for none is another story.
    #[test]
    fn a_table_of_several_gpus_none_answering_is_no_finding() {
        let both_err = A40
            .replace("NVIDIA A40         ", "ERR!               ")
            .replace(
                "|  0%   26C    P8    12W / 300W |",
                "|ERR!  ERR! ERR!    ERR! / ERR! |",
            );
        assert!(findings_of(super::META.id, &both_err).is_empty());
    }
}
