//! Typed remediation actions. Rules build these; renderers only format them,
//! and only the script renderer turns them into shell. Every value in them
//! is already validated ([`Pid`], [`UnitName`], [`GpuUuid`], …) or free text
//! that is never executed.

use crate::model::{
    GpuUuid, Hostname, InvalidValue, Pid, Port, ProcessName, ServerFlag, StartTime, UnitName,
};
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
/// text as logged, restricted to printable ASCII.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedCmdline(String);

impl ExpectedCmdline {
    /// Refuses control characters, non-ASCII (look-alike letters) and
    /// over-long values: they cannot be compared reliably and have no
    /// business in a script.
    pub fn new(text: &str) -> Result<ExpectedCmdline, InvalidValue> {
        let ok = !text.is_empty()
            && text.len() <= 1024
            && text.chars().all(|c| c == ' ' || c.is_ascii_graphic());
        if ok {
            Ok(ExpectedCmdline(text.to_owned()))
        } else {
            Err(InvalidValue {
                kind: "command line",
                value: text.chars().take(80).collect(),
                reason: "empty, longer than 1024 bytes, or not printable ASCII",
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What the bundle recorded about a process, checked again at run time
/// before anything is done to it. Each part is optional; the script says
/// which guards it could not apply.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessIdentity {
    pub pid: Pid,
    /// The unit whose cgroup the process must still be in.
    pub unit: Option<UnitName>,
    pub cmdline: Option<ExpectedCmdline>,
    /// `ps -o lstart`: guards against PID reuse.
    pub start: Option<StartTime>,
}

impl ProcessIdentity {
    pub fn new(pid: Pid) -> ProcessIdentity {
        ProcessIdentity {
            pid,
            unit: None,
            cmdline: None,
            start: None,
        }
    }
}

/// A GPU by nvidia-smi index, and the UUID it had in the bundle: indices can
/// change between boots, a UUID never does.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuRef {
    pub index: u32,
    pub uuid: Option<GpuUuid>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ActionKind {
    /// `systemctl stop UNIT`; a unit already inactive is fine.
    StopUnit {
        unit: UnitName,
    },
    /// `systemctl disable UNIT`, so a leftover does not come back at boot.
    /// Only for a unit the report established as a leftover.
    DisableUnit {
        unit: UnitName,
    },
    /// SIGTERM, a grace period, then SIGKILL, after re-checking that the PID
    /// still is the process the report names. A PID already gone is fine.
    TerminateProcess {
        process: ProcessIdentity,
        grace_secs: u32,
    },
    /// Wait, without signalling, until the process has exited (a PID reused
    /// by another process counts as exited).
    WaitProcessExit {
        process: ProcessIdentity,
        timeout_secs: u32,
    },
    /// Poll nvidia-smi until each GPU's used memory is at most the threshold.
    WaitGpuMemoryFree {
        gpus: Vec<GpuRef>,
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
    /// End the processes whose command line starts with `name` that are left
    /// in the cgroup of `unit` after it stopped (`KillMode=process`
    /// leftovers). Refused while the unit is active.
    KillOrphans {
        unit: UnitName,
        name: ProcessName,
        grace_secs: u32,
    },
    /// Identify what listens on the port; end it only when it is the process
    /// the report names, otherwise stop and say who it is.
    FreePort {
        port: Port,
        listener: Option<ProcessIdentity>,
        grace_secs: u32,
    },
    /// A suggested change of the server's command line, shown as a diff of
    /// the unit's ExecStart. Never applied by the script.
    SetServerFlag {
        unit: UnitName,
        flag: ServerFlag,
        /// The command line the unit runs now, when the bundle shows it.
        current: Option<ExpectedCmdline>,
    },
    /// `nvidia-smi --gpu-reset`, only when no process uses the GPU.
    ResetGpu {
        gpu: u32,
        uuid: GpuUuid,
    },
    /// Move the workload off the host. For a person, never scripted.
    Drain {
        host: Option<Hostname>,
    },
    /// Reboot the host. For a person, never scripted.
    Reboot {
        host: Option<Hostname>,
    },
    /// A step for a person: text and, when there is one, a command to look
    /// at. Never executed.
    Advice {
        text: String,
        command: Option<String>,
    },
}

impl ActionKind {
    /// The `type` in the JSON report and the docs.
    pub fn name(&self) -> &'static str {
        match self {
            ActionKind::StopUnit { .. } => "stop-unit",
            ActionKind::DisableUnit { .. } => "disable-unit",
            ActionKind::TerminateProcess { .. } => "terminate-process",
            ActionKind::WaitProcessExit { .. } => "wait-process-exit",
            ActionKind::WaitGpuMemoryFree { .. } => "wait-gpu-memory-free",
            ActionKind::RestartUnit { .. } => "restart-unit",
            ActionKind::VerifyUnitActive { .. } => "verify-unit-active",
            ActionKind::KillOrphans { .. } => "kill-orphans",
            ActionKind::FreePort { .. } => "free-port",
            ActionKind::SetServerFlag { .. } => "set-server-flag",
            ActionKind::ResetGpu { .. } => "reset-gpu",
            ActionKind::Drain { .. } => "drain",
            ActionKind::Reboot { .. } => "reboot",
            ActionKind::Advice { .. } => "advice",
        }
    }

    /// The least care this kind of step ever gets, whatever a rule asks for:
    /// signals, resets and disabling always ask; drain, reboot and edits of
    /// a unit's command line are never scripted.
    pub fn min_safety(&self) -> Safety {
        match self {
            ActionKind::StopUnit { .. }
            | ActionKind::WaitProcessExit { .. }
            | ActionKind::WaitGpuMemoryFree { .. }
            | ActionKind::RestartUnit { .. }
            | ActionKind::VerifyUnitActive { .. } => Safety::Safe,
            ActionKind::DisableUnit { .. }
            | ActionKind::TerminateProcess { .. }
            | ActionKind::KillOrphans { .. }
            | ActionKind::FreePort { .. }
            | ActionKind::ResetGpu { .. } => Safety::NeedsConfirmation,
            ActionKind::SetServerFlag { .. }
            | ActionKind::Drain { .. }
            | ActionKind::Reboot { .. }
            | ActionKind::Advice { .. } => Safety::AdvisoryOnly,
        }
    }
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
    /// A step; `safety` is raised to the kind's minimum
    /// ([`ActionKind::min_safety`]), never lowered.
    /// SIGTERM, then SIGKILL after 30 s, to a process whose identity the
    /// script re-checks first; always asks before it runs.
    pub fn terminate(process: ProcessIdentity, why: impl Into<String>) -> Action {
        Action::new(
            ActionKind::TerminateProcess {
                process,
                grace_secs: 30,
            },
            Safety::NeedsConfirmation,
            why,
        )
    }

    pub fn new(kind: ActionKind, safety: Safety, why: impl Into<String>) -> Action {
        let safety = safety.max(kind.min_safety());
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
        for span in spans {
            if !self.evidence.contains(&span) {
                self.evidence.push(span);
            }
        }
        self
    }

    /// Whether the script runs this step (possibly after asking) rather than
    /// only printing it.
    pub fn is_scripted(&self) -> bool {
        // Both, in case a caller built the struct without `Action::new`.
        self.safety != Safety::AdvisoryOnly && self.kind.min_safety() != Safety::AdvisoryOnly
    }

    /// One line for a person: what the step does.
    pub fn describe(&self) -> String {
        match &self.kind {
            ActionKind::StopUnit { unit } => format!("stop {unit}"),
            ActionKind::DisableUnit { unit } => {
                format!("disable {unit} so it does not start again at boot")
            }
            ActionKind::TerminateProcess {
                process,
                grace_secs,
            } => format!(
                "if PID {} is still running and still the same process, send SIGTERM, then SIGKILL after {grace_secs}s",
                process.pid
            ),
            ActionKind::WaitProcessExit {
                process,
                timeout_secs,
            } => format!(
                "wait until PID {} has exited (timeout {timeout_secs}s)",
                process.pid
            ),
            ActionKind::WaitGpuMemoryFree {
                gpus,
                max_used_mib,
                timeout_secs,
            } => {
                let list = gpus
                    .iter()
                    .map(|g| g.index.to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                let (gpu, uses) = if gpus.len() == 1 {
                    ("GPU", "uses")
                } else {
                    ("GPUs", "use")
                };
                format!(
                    "wait until {gpu} {list} {uses} at most {max_used_mib} MiB (timeout {timeout_secs}s)"
                )
            }
            ActionKind::RestartUnit { unit } => format!("restart {unit}"),
            ActionKind::VerifyUnitActive { unit, timeout_secs } => {
                format!("verify {unit} becomes active (timeout {timeout_secs}s)")
            }
            ActionKind::KillOrphans {
                unit,
                name,
                grace_secs,
            } => format!(
                "end the {name}* processes left in {unit}'s cgroup after it stopped (SIGTERM, SIGKILL after {grace_secs}s)"
            ),
            ActionKind::FreePort { port, listener, .. } => match listener {
                Some(l) => format!(
                    "free port {port}: identify its listener and end it only if it is PID {}",
                    l.pid
                ),
                None => format!(
                    "check that port {port} is free; if something listens, name it and stop"
                ),
            },
            ActionKind::SetServerFlag { unit, flag, .. } => {
                format!("change {unit}'s command line to use {flag} (edit its ExecStart)")
            }
            ActionKind::ResetGpu { gpu, .. } => {
                format!("reset GPU {gpu} once no process uses it")
            }
            ActionKind::Drain { host } => format!(
                "drain {}: move its workloads elsewhere before further repairs",
                host.as_ref().map_or("this host", |h| h.as_str())
            ),
            ActionKind::Reboot { host } => format!(
                "reboot {} once its workloads are drained",
                host.as_ref().map_or("this host", |h| h.as_str())
            ),
            ActionKind::Advice { text, .. } => text.clone(),
        }
    }

    /// The command a person would type for this step, where there is one.
    pub fn command(&self) -> Option<String> {
        Some(match &self.kind {
            ActionKind::StopUnit { unit } => format!("systemctl stop {unit}"),
            ActionKind::DisableUnit { unit } => format!("systemctl disable {unit}"),
            ActionKind::TerminateProcess { process, .. } => {
                format!("kill -TERM {}", process.pid)
            }
            ActionKind::WaitProcessExit { process, .. } => {
                format!("ps -o pid,lstart,cmd -p {}", process.pid)
            }
            ActionKind::WaitGpuMemoryFree { .. } => {
                "nvidia-smi --query-gpu=index,uuid,memory.used --format=csv,noheader,nounits"
                    .to_owned()
            }
            ActionKind::RestartUnit { unit } => format!("systemctl restart {unit}"),
            ActionKind::VerifyUnitActive { unit, .. } => format!("systemctl is-active {unit}"),
            ActionKind::KillOrphans { unit, .. } => format!("systemd-cgls --unit {unit}"),
            ActionKind::FreePort { port, .. } => format!("ss -ltnp 'sport = :{port}'"),
            ActionKind::SetServerFlag { unit, .. } => format!("systemctl edit --full {unit}"),
            ActionKind::ResetGpu { gpu, .. } => format!("nvidia-smi --gpu-reset -i {gpu}"),
            ActionKind::Drain { .. } => return None,
            ActionKind::Reboot { .. } => "systemctl reboot".to_owned(),
            ActionKind::Advice { command, .. } => return command.clone(),
        })
    }

    /// Lines that belong with the step: the ExecStart diff of a suggested
    /// flag change.
    pub fn details(&self) -> Vec<String> {
        match &self.kind {
            ActionKind::SetServerFlag { flag, current, .. } => match current {
                Some(cmd) => vec![
                    format!("-ExecStart={}", cmd.as_str()),
                    format!("+ExecStart={}", with_flag(cmd.as_str(), flag)),
                ],
                None => vec![format!("+ExecStart=... {flag}")],
            },
            _ => Vec::new(),
        }
    }
}

/// The command line with `flag` set to its value: an existing `--flag V` or
/// `--flag=V` is replaced in place, otherwise the flag is appended.
pub fn with_flag(cmdline: &str, flag: &ServerFlag) -> String {
    let mut tokens: Vec<String> = cmdline.split(' ').map(str::to_owned).collect();
    let eq = format!("{}=", flag.flag());
    if let Some(i) = tokens.iter().position(|t| t == flag.flag()) {
        let takes_value = tokens.get(i + 1).is_some_and(|v| !v.starts_with("--"));
        if takes_value {
            tokens[i + 1] = flag.value().to_owned();
        } else {
            tokens.insert(i + 1, flag.value().to_owned());
        }
    } else if let Some(t) = tokens.iter_mut().find(|t| t.starts_with(&eq)) {
        *t = format!("{eq}{}", flag.value());
    } else {
        tokens.push(flag.flag().to_owned());
        tokens.push(flag.value().to_owned());
    }
    tokens.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_cannot_make_a_signal_safe_or_a_reboot_scripted() {
        let pid = Pid::new(4242).unwrap();
        let t = Action::new(
            ActionKind::TerminateProcess {
                process: ProcessIdentity::new(pid),
                grace_secs: 30,
            },
            Safety::Safe,
            "",
        );
        assert_eq!(t.safety, Safety::NeedsConfirmation);
        let r = Action::new(ActionKind::Reboot { host: None }, Safety::Safe, "");
        assert_eq!(r.safety, Safety::AdvisoryOnly);
        assert!(!r.is_scripted());
        let s = Action::new(
            ActionKind::StopUnit {
                unit: UnitName::new("a.service").unwrap(),
            },
            Safety::AdvisoryOnly,
            "",
        );
        assert_eq!(s.safety, Safety::AdvisoryOnly, "safety is only ever raised");
    }

    #[test]
    fn flags_are_replaced_in_place_or_appended() {
        let f = ServerFlag::new("--mem-fraction-static", "0.80").unwrap();
        for (before, after) in [
            (
                "python3 -m sglang.launch_server --tp 8 --mem-fraction-static 0.88 --port 30000",
                "python3 -m sglang.launch_server --tp 8 --mem-fraction-static 0.80 --port 30000",
            ),
            (
                "python3 -m sglang.launch_server --mem-fraction-static=0.9",
                "python3 -m sglang.launch_server --mem-fraction-static=0.80",
            ),
            (
                "python3 -m sglang.launch_server --tp 8",
                "python3 -m sglang.launch_server --tp 8 --mem-fraction-static 0.80",
            ),
            (
                "python3 -m sglang.launch_server --mem-fraction-static --tp 8",
                "python3 -m sglang.launch_server --mem-fraction-static 0.80 --tp 8",
            ),
        ] {
            assert_eq!(with_flag(before, &f), after);
        }
    }

    #[test]
    fn expected_command_lines_are_printable_ascii() {
        assert!(ExpectedCmdline::new("python3 serve.py --port 8100").is_ok());
        assert!(ExpectedCmdline::new("python3 'a b' \"c\" $(d)").is_ok());
        for bad in ["", "a\nb", "a\x1b[31mb", "pythоn3", &"x".repeat(1025)] {
            assert!(ExpectedCmdline::new(bad).is_err(), "{bad:?}");
        }
    }
}
