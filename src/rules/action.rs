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
/// before anything is done to it. The script signals a process only on a
/// strong identity ([`ProcessIdentity::is_strong`]); the unit and the GPU
/// are checked when recorded, and the script says which guards it could not
/// apply.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessIdentity {
    pub pid: Pid,
    /// The unit whose cgroup the process must still be in.
    pub unit: Option<UnitName>,
    /// The full command line (`ps -ww`, a `CGroup:` tree, `_CMDLINE`); never
    /// the executable nvidia-smi names, which any `python3 …` matches.
    pub cmdline: Option<ExpectedCmdline>,
    /// `ps -o lstart`: guards against PID reuse.
    pub start: Option<StartTime>,
    /// Where the process must hold GPU memory when the script runs.
    pub gpu: GpuHold,
}

impl ProcessIdentity {
    /// A GPU holder known only by its PID: the script would never signal it.
    pub fn new(pid: Pid) -> ProcessIdentity {
        ProcessIdentity {
            pid,
            unit: None,
            cmdline: None,
            start: None,
            gpu: GpuHold::AnyGpu,
        }
    }

    /// Start time and full command line together: a PID reused by another
    /// process, or a name any process may carry, never passes both.
    pub fn is_strong(&self) -> bool {
        self.start.is_some() && self.cmdline.is_some()
    }
}

/// The GPU a process must hold memory on, in `nvidia-smi
/// --query-compute-apps`, when the script runs: a process the live host does
/// not show on the GPU is not the one to end, whatever the logs said.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuHold {
    /// The GPU the bundle saw it on (by UUID when the bundle recorded one).
    On(GpuRef),
    /// Any GPU: the bundle shows it holds memory but not where.
    AnyGpu,
    /// Not a GPU holder (a port's listener): no GPU check.
    NotChecked,
}

/// Units no script stops, disables or restarts, whatever the logs say:
/// PID 1's own scope, login sessions and users' managers, systemd's and the
/// bus's services, remote access and consoles, and the runtimes that hold
/// every container. Globs: `*` stands for any characters.
pub const PROTECTED_UNITS: &[&str] = &[
    "init.scope",
    "session-*.scope",
    "user@*.service",
    "user-runtime-dir@*.service",
    "systemd-*",
    "dbus*",
    "ssh*",
    "getty@*.service",
    "serial-getty@*.service",
    "autovt@*.service",
    "console-getty.service",
    "polkit.service",
    "NetworkManager*.service",
    "networking.service",
    "containerd.service",
    "docker.service",
    "crio.service",
    "kubelet.service",
];

/// The only scopes a script may stop: a container's (a scope holds
/// processes started elsewhere; a login session is one too, and never).
pub const CONTAINER_SCOPES: &[&str] = &[
    "docker-*.scope",
    "libpod-*.scope",
    "cri-containerd-*.scope",
    "crio-*.scope",
];

/// Why a script may not stop, disable or restart `unit`, if it may not: only
/// a `.service` or a container's `.scope` holds a workload, and never one of
/// [`PROTECTED_UNITS`]. A target, a socket or a slice is refused: stopping
/// `sysinit.target` stops nearly every service.
pub fn unit_refusal(unit: &UnitName) -> Option<String> {
    let name = unit.as_str();
    if let Some(glob) = PROTECTED_UNITS.iter().find(|g| glob_match(g, name)) {
        return Some(format!(
            "{name}: a protected unit ({glob}): no script stops, disables or restarts it"
        ));
    }
    let workload =
        name.ends_with(".service") || CONTAINER_SCOPES.iter().any(|g| glob_match(g, name));
    (!workload).then(|| {
        format!(
            "{name}: only a service or a container's scope is ever stopped or restarted by a script"
        )
    })
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob_match(glob: &str, text: &str) -> bool {
    match glob.split_once('*') {
        None => glob == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|&i| tail.is_char_boundary(i))
                .any(|i| glob_match(rest, &tail[i..]))
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
    /// `systemctl stop UNIT`; a unit already inactive is fine. Only while
    /// the unit still owns the holder's PID and that PID still holds GPU
    /// memory where the bundle saw it: without a holder the step is only
    /// advice.
    StopUnit {
        unit: UnitName,
        holder: Option<(Pid, GpuHold)>,
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
    /// a unit's command line are never scripted; neither is a signal to a
    /// process without a strong identity, nor anything done to a unit that
    /// is not a workload's ([`unit_refusal`]).
    pub fn min_safety(&self) -> Safety {
        let unit = match self {
            ActionKind::StopUnit { unit, .. }
            | ActionKind::DisableUnit { unit }
            | ActionKind::RestartUnit { unit }
            | ActionKind::KillOrphans { unit, .. } => Some(unit),
            _ => None,
        };
        if unit.is_some_and(|u| unit_refusal(u).is_some()) {
            return Safety::AdvisoryOnly;
        }
        let weak = match self {
            // A stop names the PID it must still own at run time.
            ActionKind::StopUnit { holder, .. } => holder.is_none(),
            ActionKind::TerminateProcess { process, .. } => !process.is_strong(),
            ActionKind::FreePort {
                listener: Some(l), ..
            } => !l.is_strong(),
            _ => false,
        };
        if weak {
            return Safety::AdvisoryOnly;
        }
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
            ActionKind::StopUnit { unit, .. } => format!("stop {unit}"),
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
            ActionKind::StopUnit { unit, .. } => format!("systemctl stop {unit}"),
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
        let mut process = ProcessIdentity::new(pid);
        process.cmdline = ExpectedCmdline::new("python3 serve.py").ok();
        process.start = StartTime::new("Tue Nov 24 14:02:17 2026").ok();
        let t = Action::new(
            ActionKind::TerminateProcess {
                process,
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
                holder: Some((pid, GpuHold::AnyGpu)),
            },
            Safety::AdvisoryOnly,
            "",
        );
        assert_eq!(s.safety, Safety::AdvisoryOnly, "safety is only ever raised");
    }

    #[test]
    fn only_workload_units_may_be_touched() {
        let refused = |n: &str| unit_refusal(&UnitName::new(n).unwrap()).is_some();
        for n in [
            "init.scope",
            "session-3.scope",
            "user@1000.service",
            "user-runtime-dir@0.service",
            "systemd-journald.service",
            "systemd-logind.service",
            "dbus.service",
            "dbus-broker.service",
            "ssh.service",
            "sshd.service",
            "getty@tty1.service",
            "serial-getty@ttyS0.service",
            "sysinit.target",
            "multi-user.target",
            "dbus.socket",
            "var-lib.mount",
            "run-r1234.scope",
        ] {
            assert!(refused(n), "{n}");
        }
        for n in [
            "ddtree-qwen.service",
            "sglang@k2.service",
            "docker-0123abcd.scope",
            "cri-containerd-0a1b.scope",
        ] {
            assert!(!refused(n), "{n}");
        }
        assert!(glob_match("a*b*c", "axxbyyc") && !glob_match("a*b", "ab-c"));
        assert!(glob_match("*", "") && glob_match("ssh*", "ssh") && !glob_match("ssh*", "xssh"));
    }

    #[test]
    fn a_signal_needs_a_strong_identity() {
        let mut p = ProcessIdentity::new(Pid::new(4242).unwrap());
        p.cmdline = ExpectedCmdline::new("python3").ok();
        let t = |p: &ProcessIdentity| Action::terminate(p.clone(), "").safety;
        assert_eq!(t(&p), Safety::AdvisoryOnly, "an interpreter name alone");
        p.start = StartTime::new("Tue Nov 24 14:02:17 2026").ok();
        assert_eq!(t(&p), Safety::NeedsConfirmation);
        p.cmdline = None;
        assert_eq!(t(&p), Safety::AdvisoryOnly, "a start time alone");
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
