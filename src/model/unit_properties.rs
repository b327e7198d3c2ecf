//! What `systemctl show UNIT` says about one unit: its `Key=value` properties.

use std::collections::BTreeMap;

use crate::source::Span;

#[derive(Debug, Clone, PartialEq)]
pub struct UnitProperties {
    /// `Id=`, or the unit named on the `systemctl show` command line.
    pub unit: Option<String>,
    pub description: Option<String>,
    pub load_state: Option<String>,
    pub active_state: Option<String>,
    pub sub_state: Option<String>,
    /// `success`, `exit-code`, `signal`, `oom-kill`, `start-limit-hit`, …
    pub result: Option<String>,
    /// `MainPID=`; `MainPID=0` (no main process) is `None`.
    pub main_pid: Option<u32>,
    /// The last main process systemd started, alive or not.
    pub exec_main_pid: Option<u32>,
    /// `ExecMainCode=`: 1 exited, 2 killed, 3 dumped core (`CLD_*`).
    pub exec_main_code: Option<u32>,
    /// `ExecMainStatus=`: the exit status, or the signal number when killed.
    pub exec_main_status: Option<i32>,
    /// The `argv[]=` of `ExecStart=` (`path=` when argv is missing).
    pub exec_start: Option<String>,
    pub kill_mode: Option<String>,
    pub restart: Option<String>,
    pub n_restarts: Option<u32>,
    /// `ControlGroup=/system.slice/sglang.service`.
    pub control_group: Option<String>,
    /// Every property as printed, with its line.
    pub properties: BTreeMap<String, (String, Span)>,
    /// The block's first line.
    pub span: Span,
}

impl UnitProperties {
    /// The line that printed `key`, for evidence.
    pub fn span_of(&self, key: &str) -> Option<Span> {
        self.properties.get(key).map(|(_, span)| *span)
    }
}
