//! `gpu-wedged-unkillable-process`: a process that cannot be reaped (state
//! `Z` or `D` in `ps`/`top`) beside a GPU whose nvidia-smi row reads `ERR!`
//! and whose memory is held with no process listed: the driver has not let
//! the process go, and the GPU is wedged until it is reset or the host
//! rebooted.

use crate::correlate::{Gpu, Incident};
use crate::model::{Message, PsRecord};
use crate::rules::support::holds_working_set;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: GpuWedgedUnkillableProcess = GpuWedgedUnkillableProcess;

pub struct GpuWedgedUnkillableProcess;

/// The share of the card that counts as held: the table alone, beside a
/// process that cannot die, asks for a quarter, as `gpu-memory-unaccounted`
/// does for a table alone.
const HELD_SHARE: f64 = 0.25;

static META: RuleMeta = RuleMeta {
    id: "gpu-wedged-unkillable-process",
    category: Category::XidOther,
    severity: Severity::Error,
    summary: "a process that cannot be reaped (Z or D) beside a GPU that reads ERR! and holds memory no listed process owns: the GPU is wedged",
    // nvidia-smi's table prints `ERR!` in a cell it could not read
    // (`|ERR!   44C    P2   ERR! / 275W |`).
    anchors: &["ERR! "],
    doc: r#"
## What it means
`ps` or `top` lists a process in state `Z` (a zombie: it exited, or was
killed, but is not reaped) or `D` (uninterruptible sleep in the kernel),
and nvidia-smi's table reads `ERR!` in a cell of a GPU (fan, power) whose
memory is in use while no process is listed for it. A process killed with
`kill -9` that stays `Z`, often still burning CPU because one of its
threads is stuck in the driver, or stays `D`, cannot release its GPU
memory: the driver has not let it go. nvidia-smi answering slowly or with
`ERR!` for that GPU says the same from the GPU's side. The GPU is wedged.

Not when either is alone: a healthy card can print `ERR!` in a cell its
board does not report, and a zombie with no GPU in trouble is only a
parent that did not reap its child.

## Why it happens
A GPU fault the paste does not show (an Xid in the kernel log), a driver
bug, or a GPU that stopped answering while the process was in a CUDA call.

## How to confirm
`dmesg -T | grep -iE 'NVRM|Xid'` for the fault; `cat /proc/PID/stack` for
where the process waits in the kernel; `nvidia-smi -q -i N` answering
slowly or with errors.

## How to fix
Reset the GPU when nothing else runs on it (`nvidia-smi -r -i N`), or
reboot the host; `kill -9` cannot remove a process the driver holds.

## Safety
Advice only: a reset or reboot stops everything on that GPU or host.
"#,
};

impl Rule for GpuWedgedUnkillableProcess {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let stuck: Vec<&PsRecord> = incident
            .facts
            .ps
            .iter()
            .filter(|r| r.stat.as_deref().is_some_and(|s| s.starts_with(['Z', 'D'])))
            .collect();
        if stuck.is_empty() {
            return;
        }
        for gpu in &incident.gpus {
            let Some(err) = err_cells(incident, gpu) else {
                continue;
            };
            let held = gpu
                .memory_used_mib
                .zip(gpu.memory_total_mib)
                .is_some_and(|(u, t)| holds_working_set(u, t, HELD_SHARE));
            if !held || incident.processes_on(gpu.index).next().is_some() {
                continue;
            }
            out.push(finding(gpu, err, &stuck));
        }
    }
}

/// The line of `gpu`'s table block that reads `ERR!`: the block's own
/// line or the one after it (the fan, temperature, power and memory line).
fn err_cells<'a>(incident: &'a Incident, gpu: &Gpu) -> Option<&'a Message> {
    incident.facts.messages.iter().find(|m| {
        m.text.contains("ERR!")
            && gpu.spans.iter().any(|s| {
                s.source == m.span.source && (s.line == m.span.line || s.line + 1 == m.span.line)
            })
    })
}

fn finding(gpu: &Gpu, err: &Message, stuck: &[&PsRecord]) -> Finding {
    let n = gpu.index;
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.gpus.insert(n);
    let used = gpu.memory_used_mib.unwrap_or_default();
    let total = gpu.memory_total_mib.unwrap_or_default();
    let who: Vec<String> = stuck
        .iter()
        .map(|r| {
            let state = r.stat.as_deref().unwrap_or("?");
            let name = r.cmd.split_whitespace().next().unwrap_or("?");
            format!("PID {} ({name}, state {state})", r.pid)
        })
        .collect();
    for (r, w) in stuck.iter().zip(&who) {
        f.entities.pids.insert(r.pid);
        let what = if r.stat.as_deref().is_some_and(|s| s.starts_with('Z')) {
            "a zombie: exited or killed, but not reaped"
        } else {
            "in uninterruptible sleep inside the kernel"
        };
        f.evidence(r.span, format!("{w} is {what}: kill cannot remove it"));
    }
    f.evidence(
        err.span,
        format!(
            "nvidia-smi cannot read GPU {n}'s cells (ERR!) while {used}MiB of {total}MiB are in use"
        ),
    );
    if let Some(s) = gpu.spans.first() {
        if *s != err.span {
            f.evidence(*s, format!("GPU {n}: no process is listed for its memory"));
        }
    }
    f.condition("a process is in state Z or D (cannot be reaped)", true);
    f.condition(format!("GPU {n}'s row reads ERR!"), true);
    f.condition(format!("GPU {n} holds memory with no process listed"), true);
    f.title = format!("GPU {n} is wedged: a process cannot be reaped and its memory is not freed");
    f.headline = format!(
        "GPU {n} is wedged: {} cannot be reaped, GPU {n} still holds {used}MiB with no process listed, and nvidia-smi reads ERR! for it. The driver has not let the process go; reset the GPU or reboot (kill -9 cannot free it).",
        who.join(", ")
    );
    f.chain.push(format!("GPU {n}'s memory is not freed"));
    f.chain.push(format!("{} cannot be reaped", who.join(", ")));
    f.chain
        .push(format!("GPU {n} no longer answers the driver (ERR!)"));
    f.explanation = "A process the kernel cannot finish (zombie or uninterruptible) while its GPU reads ERR! is stuck in the driver: its GPU memory stays held until the GPU is reset or the host rebooted.".to_owned();
    f.actions.push(Action::advice(
        "look for the GPU fault in the kernel log, and where the process waits",
        Some("dmesg -T | grep -iE 'NVRM|Xid'"),
    ));
    f.actions.push(Action::advice(
        format!("reset GPU {n} when nothing else runs on it, or reboot the host"),
        Some(&format!("nvidia-smi -r -i {n}")),
    ));
    f.confidence = 0.55;
    f
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// facebookresearch/fairseq#2832 (batch H's 792): `top`'s row of the
    /// killed fairseq-train, a zombie at 99.7% CPU, and GPU 1's row with
    /// `ERR!` cells and 10123MiB held, no process listed.
    const TOP: &str = "PID USER      PR  NI    VIRT    RES    SHR S  %CPU %MEM     TIME+ COMMAND\n\
32503 ana       20   0       0      0      0 Z  99.7  0.0  17:46.89 fairseq-train\n\n";
    const TABLE: &str = "+-----------------------------------------------------------------------------+\n\
| NVIDIA-SMI 440.95.01    Driver Version: 440.95.01    CUDA Version: 10.2     |\n\
|-------------------------------+----------------------+----------------------+\n\
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n\
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n\
|===============================+======================+======================|\n\
|   0  GeForce GTX 108...  Off  | 00000000:01:00.0 Off |                  N/A |\n\
|  0%   43C    P8    15W / 275W |    161MiB / 11178MiB |      0%      Default |\n\
+-------------------------------+----------------------+----------------------+\n\
|   1  GeForce GTX 108...  Off  | 00000000:02:00.0 Off |                  N/A |\n\
|ERR!   44C    P2   ERR! / 275W |  10123MiB / 11178MiB |     97%      Default |\n";

    #[test]
    fn a_zombie_beside_a_gpu_reading_err_is_a_wedged_gpu() {
        let f = findings(&format!("{TOP}{TABLE}"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::XidOther);
        assert!(f[0].entities.pids.contains(&32503));
        assert_eq!(f[0].entities.gpus.iter().copied().collect::<Vec<_>>(), [1]);
    }

    /// Either alone is nothing: the table without the zombie, the zombie
    /// without the table.
    #[test]
    fn err_cells_or_a_zombie_alone_are_not_a_wedged_gpu() {
        assert!(findings(TABLE).is_empty());
        assert!(findings(TOP).is_empty());
    }

    /// The next paste: `ps aux`'s STAT `Ds` and `Zsl` (andyljones/coolgpus#8,
    /// Xorg processes that could not be killed), beside 792's table: both
    /// verbatim, the combination is ours.
    #[test]
    fn processes_in_d_or_z_from_ps_aux_count_too() {
        let ps = "# ps aux | grep Xorg\n\
root        1422  0.1  0.0      0     0 ?        Ds   Jul22  32:01 [Xorg]\n\
root        1423  0.1  0.0      0     0 ?        Zsl  Jul22  35:03 [Xorg] <defunct>\n\n";
        let f = findings(&format!("{ps}{TABLE}"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
            [1422, 1423]
        );
    }
}
