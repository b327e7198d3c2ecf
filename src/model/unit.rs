//! What `systemctl status UNIT` says about one unit.

use crate::source::Span;

/// A PID in the unit's `CGroup:` tree: the strongest PID → unit evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupMember {
    pub pid: u32,
    pub cmdline: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UnitStatus {
    pub unit: String,
    pub description: Option<String>,
    /// `active`, `failed`, `activating`, `inactive`, …
    pub active_state: Option<String>,
    pub sub_state: Option<String>,
    /// `(Result: signal)`.
    pub result: Option<String>,
    pub main_pid: Option<u32>,
    /// `(python3)` after a running main PID.
    pub main_comm: Option<String>,
    /// `(code=killed, signal=KILL)` after a dead main PID.
    pub main_exit: Option<String>,
    pub cgroup: Vec<CgroupMember>,
    /// The `Process:` lines: the unit's processes that ran and exited
    /// (`ExecStart=`, `ExecStartPost=`, …), one per line.
    pub processes: Vec<UnitProcess>,
    /// The drop-in files under `Drop-In:` (`override.conf`), each with the
    /// line that names it: what changed the unit's own file.
    pub drop_ins: Vec<(String, Span)>,
    /// How long the unit stayed in its present state (`Active: … since …;
    /// 12s ago`), in seconds: the `ago` systemctl printed.
    pub in_state_secs: Option<f64>,
    /// When the unit entered its present state (`Active: inactive (dead)
    /// since Tue 2020-12-01 10:18:15 UTC; 5min ago`), as printed: the
    /// local wall clock, the zone word dropped. With PID 1's `Started` line
    /// of the same run it says how long a run without `Duration:` lasted.
    pub since: Option<chrono::NaiveDateTime>,
    /// How long its last run lasted (`Duration: 2.102s`, v250+ on a unit
    /// that is no longer running), in seconds, and its line.
    pub duration_secs: Option<f64>,
    pub duration_span: Option<Span>,
    /// `TriggeredBy:` a timer, a socket or a path: a job that runs on
    /// demand, for which ending is normal.
    pub triggered: bool,
    pub span: Span,
    pub active_span: Option<Span>,
    pub main_pid_span: Option<Span>,
    /// The last line of a `systemctl status` block (its last field, or the
    /// last line of its CGroup tree); none for a row of another listing.
    /// systemctl prints the unit's last journal lines right after it, so
    /// the writers of those lines are the unit's processes.
    pub end: Option<Span>,
}

impl UnitStatus {
    /// How the unit's main process ended, as this block prints it: `Main
    /// PID: N (code=…)`, else the `Process: N ExecStart=… (code=…)` line;
    /// with the line that says it and the PID.
    pub fn main_process_exit(&self) -> Option<(&str, Span, Option<u32>)> {
        let main = self
            .main_exit
            .as_deref()
            .zip(self.main_pid_span)
            .map(|(e, span)| (e, span, self.main_pid));
        main.or_else(|| {
            self.processes
                .iter()
                .filter(|p| p.setting.as_deref() == Some("ExecStart"))
                .find_map(|p| p.exit.as_deref().map(|e| (e, p.span, Some(p.pid))))
        })
    }

    /// The status of `unit` read at `span`, every other field still
    /// unknown: the readers fill in what their lines say.
    pub fn new(unit: &str, span: Span) -> UnitStatus {
        UnitStatus {
            unit: unit.to_owned(),
            description: None,
            active_state: None,
            sub_state: None,
            result: None,
            main_pid: None,
            main_comm: None,
            main_exit: None,
            cgroup: Vec::new(),
            processes: Vec::new(),
            drop_ins: Vec::new(),
            in_state_secs: None,
            since: None,
            duration_secs: None,
            duration_span: None,
            triggered: false,
            span,
            active_span: None,
            main_pid_span: None,
            end: None,
        }
    }
}

/// `Process: 82378 ExecStart=/usr/bin/nvidia-docker-plugin … (code=exited,
/// status=1/FAILURE)` of `systemctl status`.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitProcess {
    pub pid: u32,
    /// The setting that ran it: `ExecStart`, `ExecStartPre`, `ExecStop`, …
    pub setting: Option<String>,
    /// How it ended, as printed: `code=exited, status=1/FAILURE`.
    pub exit: Option<String>,
    pub span: Span,
}
