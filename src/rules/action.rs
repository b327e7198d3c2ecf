//! Typed remediation actions. Rules build these; only the script renderer
//! turns them into shell, and every value in them is already validated
//! ([`Pid`], [`UnitName`]) or free text that is never executed.

use crate::model::{Pid, UnitName};
use crate::source::Span;

/// How much care a step needs before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Safety {
    /// Read-only or restores the intended state (restart the target, wait).
    Safe,
    /// Changes something the report did not prove to be the user's to change
    /// (stopping another unit, signalling a process): the script asks first.
    NeedsConfirmation,
    /// Printed for a person, never executed.
    AdvisoryOnly,
}

impl Safety {
    pub fn name(self) -> &'static str {
        match self {
            Safety::Safe => "safe",
            Safety::NeedsConfirmation => "needs-confirmation",
            Safety::AdvisoryOnly => "advisory-only",
        }
    }
}

/// A command line the script may compare against `/proc/PID/cmdline`: the
/// text as logged, restricted to printable characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedCmdline(String);

impl ExpectedCmdline {
    /// Refuses control characters and over-long values: they cannot be
    /// compared reliably and have no business in a script.
    pub fn new(text: &str) -> Option<ExpectedCmdline> {
        let ok = !text.is_empty()
            && text.len() <= 1024
            && text.chars().all(|c| c == ' ' || (c.is_ascii_graphic()));
        ok.then(|| ExpectedCmdline(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ActionKind {
    /// `systemctl stop UNIT`; a unit already inactive is fine.
    StopUnit {
        unit: UnitName,
    },
    /// SIGTERM, a grace period, then SIGKILL, after re-checking that the PID
    /// still is the process the report names. A PID already gone is fine.
    TerminateProcess {
        pid: Pid,
        expected_unit: Option<UnitName>,
        expected_cmdline: Option<ExpectedCmdline>,
        grace_secs: u32,
    },
    /// Poll nvidia-smi until each GPU's used memory is at most the threshold.
    WaitGpuMemoryFree {
        gpus: Vec<u32>,
        max_used_mib: u64,
        timeout_secs: u32,
    },
    RestartUnit {
        unit: UnitName,
    },
    /// Poll `systemctl is-active` until the unit is active.
    VerifyUnitActive {
        unit: UnitName,
        timeout_secs: u32,
    },
    /// A step for a person: text and, when there is one, a command to look
    /// at. Never executed.
    Advice {
        text: String,
        command: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub kind: ActionKind,
    pub safety: Safety,
    /// Why this step is needed, in one line.
    pub why: String,
    /// The lines this step depends on.
    pub evidence: Vec<Span>,
}

impl Action {
    pub fn new(kind: ActionKind, safety: Safety, why: impl Into<String>) -> Action {
        Action {
            kind,
            safety,
            why: why.into(),
            evidence: Vec::new(),
        }
    }

    pub fn advice(text: impl Into<String>, command: Option<&str>) -> Action {
        Action::new(
            ActionKind::Advice {
                text: text.into(),
                command: command.map(str::to_owned),
            },
            Safety::AdvisoryOnly,
            "",
        )
    }

    pub fn with_evidence(mut self, spans: impl IntoIterator<Item = Span>) -> Action {
        self.evidence.extend(spans);
        self
    }

    /// One line for a person: what the step does.
    pub fn describe(&self) -> String {
        match &self.kind {
            ActionKind::StopUnit { unit } => format!("stop {unit}"),
            ActionKind::TerminateProcess {
                pid, grace_secs, ..
            } => format!(
                "if PID {pid} is still running and still the same process, send SIGTERM, then SIGKILL after {grace_secs}s"
            ),
            ActionKind::WaitGpuMemoryFree {
                gpus,
                max_used_mib,
                timeout_secs,
            } => format!(
                "wait until GPU {} uses at most {max_used_mib} MiB (timeout {timeout_secs}s)",
                gpus.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ActionKind::RestartUnit { unit } => format!("restart {unit}"),
            ActionKind::VerifyUnitActive { unit, timeout_secs } => {
                format!("verify {unit} becomes active (timeout {timeout_secs}s)")
            }
            ActionKind::Advice { text, .. } => text.clone(),
        }
    }

    /// The command a person would type for this step, where there is one.
    pub fn command(&self) -> Option<String> {
        Some(match &self.kind {
            ActionKind::StopUnit { unit } => format!("systemctl stop {unit}"),
            ActionKind::TerminateProcess { pid, .. } => format!("kill -TERM {pid}"),
            ActionKind::WaitGpuMemoryFree { .. } => {
                "nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits".to_owned()
            }
            ActionKind::RestartUnit { unit } => format!("systemctl restart {unit}"),
            ActionKind::VerifyUnitActive { unit, .. } => format!("systemctl is-active {unit}"),
            ActionKind::Advice { command, .. } => return command.clone(),
        })
    }
}
