//! `systemd-stop-timeout`: a unit did not stop in time and some of its
//! processes survived SIGKILL, stuck in the kernel.

use crate::correlate::{Incident, UnitEventKind};
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: SystemdStopTimeout = SystemdStopTimeout;

pub struct SystemdStopTimeout;

static META: RuleMeta = RuleMeta {
    id: "systemd-stop-timeout",
    category: Category::StaleServingInstance,
    severity: Severity::Critical,
    summary: "a unit did not stop in time; processes survived SIGKILL and still hold their GPUs",
    // The catalog rows `systemd.stop-timed-out`, `systemd.still-around-after-sigkill`.
    anchors: &[],
    doc: r#"
## What it means
The unit did not stop within `TimeoutStopSec`: `State 'stop-sigterm' timed
out. Killing.`. A stop that ends in SIGKILL (`Killing process N … with
signal SIGKILL`, `Failed with result 'timeout'`) cut the server short: its
port, GPU memory or half-written files may outlive the stop, and a start
right after it can fail on them. When processes survive even SIGKILL (`Processes still
around after SIGKILL`), they are in uninterruptible sleep (`D` state): for a
GPU server almost always blocked inside the NVIDIA driver after a GPU fault.

## Why it happens
A GPU fault (Xid 79, 109, 119) leaves driver calls that never return; the
process cannot die until the GPU is reset. Its GPU memory stays allocated,
so the next start of the server fails for lack of memory.

## How to confirm
`ps -eo pid,stat,cmd` shows the PIDs in state `D`; the kernel log has an
Xid shortly before; nvidia-smi hangs or reports errors.

## How to fix
Do not loop restarts. Follow the GPU fault's recovery action: reset the GPU
(`nvidia-smi -r -i N`) when nothing else uses it, otherwise reboot.

## Safety
Advice only: signals cannot end a process in `D` state, and a GPU reset or
reboot takes down everything on the GPU or host.
"#,
};

impl Rule for SystemdStopTimeout {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for (unit, facts) in &incident.units {
            let timed_out: Vec<_> = facts
                .events
                .iter()
                .filter(|e| matches!(e.kind, UnitEventKind::StopTimedOut { .. }))
                .collect();
            if timed_out.is_empty() {
                continue;
            }
            let stuck: Vec<_> = facts
                .events
                .iter()
                .filter(|e| matches!(e.kind, UnitEventKind::StillAroundAfterSigkill))
                .collect();
            let killed: Vec<u32> = facts
                .events
                .iter()
                .filter_map(|e| match e.kind {
                    UnitEventKind::KillingProcess { pid } => Some(pid),
                    _ => None,
                })
                .collect();
            let failed = facts
                .events
                .iter()
                .any(|e| matches!(&e.kind, UnitEventKind::FailedWithResult(r) if r == "timeout"));
            // A stop that ended in SIGKILL, or left the unit failed, cut the
            // server short: whatever it held (its port, its GPU memory, a
            // file half written) may outlive the stop. A timeout that still
            // ended cleanly is only slow.
            let severity = if !stuck.is_empty() {
                META.severity
            } else if !killed.is_empty() || failed {
                Severity::Error
            } else {
                Severity::Warning
            };
            let mut f = Finding::new(META.id, META.category, severity);
            f.entities.units.insert(unit.clone());
            for e in timed_out.iter().take(2) {
                if let UnitEventKind::StopTimedOut { state } = &e.kind {
                    f.evidence(
                        e.span,
                        format!("{unit} did not stop in time (state '{state}')"),
                    );
                }
            }
            for e in &facts.events {
                if let UnitEventKind::KillingProcess { pid } = e.kind {
                    f.evidence(e.span, format!("systemd sent SIGKILL to PID {pid}"));
                    f.entities.pids.insert(pid);
                }
            }
            for e in &facts.events {
                if matches!(&e.kind, UnitEventKind::FailedWithResult(r) if r == "timeout") {
                    f.evidence(e.span, format!("{unit} failed with result 'timeout'"));
                }
            }
            for e in &stuck {
                f.evidence(
                    e.span,
                    "processes survived SIGKILL: uninterruptible sleep inside the kernel",
                );
            }
            // The processes that would not die, as ps saw them.
            let in_d: Vec<_> = incident
                .facts
                .ps
                .iter()
                .filter(|p| {
                    killed.contains(&p.pid) && p.stat.as_deref().is_some_and(|s| s.starts_with('D'))
                })
                .collect();
            for p in &in_d {
                f.evidence(p.span, format!("PID {} is in D state", p.pid));
            }
            f.condition("systemd's stop timed out", true);
            f.condition("processes survived SIGKILL", !stuck.is_empty());
            f.condition("ps shows the killed PIDs in D state", !in_d.is_empty());
            f.title = if stuck.is_empty() {
                format!("{unit} did not stop within its timeout")
            } else {
                format!("processes of {unit} survived SIGKILL (stuck in the driver)")
            };
            f.headline = if stuck.is_empty() {
                let pids: Vec<String> = killed.iter().map(u32::to_string).collect();
                match pids.as_slice() {
                    [] => format!("{unit} took longer than TimeoutStopSec to stop and was killed."),
                    _ => format!(
                        "{unit} took longer than TimeoutStopSec to stop: systemd killed PID {} with SIGKILL.",
                        pids.join(", ")
                    ),
                }
            } else {
                format!(
                    "Processes of {unit} are stuck in the kernel and survived SIGKILL: their GPU memory stays held until the GPU is reset."
                )
            };
            f.chain
                .push(format!("{unit} did not stop within TimeoutStopSec"));
            if !stuck.is_empty() {
                f.chain.push("some of its processes cannot die: they sleep uninterruptibly inside the driver".to_owned());
            }
            f.explanation = "A process that survives SIGKILL is blocked in a driver call; for GPU servers that follows a GPU fault, and only a GPU reset or a reboot ends it.".to_owned();
            if !stuck.is_empty() {
                f.actions.push(Action::advice(
                    "check which GPU fault left the processes stuck, and follow its recovery action (GPU reset when nothing else uses the GPU, otherwise reboot)",
                    Some("dmesg -T | grep -E 'NVRM: Xid|fallen off the bus'"),
                ));
                f.actions.push(Action::advice(
                    "list the processes in D state",
                    Some("ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /^D/'"),
                ));
            }
            f.confidence = confidence(&f, 0.6, 0.95);
            out.push(f);
        }
    }
}
