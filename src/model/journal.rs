//! One journal entry, whatever journalctl output mode it came from.

use super::Timestamp;
use crate::source::Span;

#[derive(Debug, Clone, PartialEq)]
pub struct JournalEntry {
    pub time: Option<Timestamp>,
    pub host: Option<String>,
    /// `SYSLOG_IDENTIFIER` (the `ident` of `ident[pid]:`).
    pub identifier: String,
    pub pid: Option<u32>,
    /// `_SYSTEMD_UNIT` of the writer, or `UNIT` for PID 1's messages about a
    /// unit; only known from JSON-like modes.
    pub unit: Option<String>,
    /// `_CMDLINE`, when the mode carries it.
    pub cmdline: Option<String>,
    pub message: String,
    pub span: Span,
}

impl JournalEntry {
    /// True for the service manager's own lines (`systemd[1]:`; the
    /// `systemd:` of a syslog file is read as PID 1 by the short parser).
    pub fn is_pid1(&self) -> bool {
        self.pid == Some(1) && self.identifier == "systemd"
    }

    /// True for a service manager's own lines: PID 1's, or a user manager's
    /// (`systemd[1762]:`, the `systemd --user` of user@1000.service), which
    /// tells of its units in the same words. systemd's forked child, which
    /// writes under its own PID before it runs a unit's command (`x.service:
    /// Failed to set up mount namespacing`, `Failed at step NAMESPACE
    /// spawning …`), is neither: only [`is_manager_message`]'s words say a
    /// manager's line.
    pub fn is_manager(&self) -> bool {
        self.is_pid1() || (self.identifier == "systemd" && is_manager_message(&self.message))
    }

    /// True for a writer that reports on other processes, never its own
    /// failure: a service manager, the system's or a user's (`systemd[1]:`,
    /// `systemd[1348]:` for user@1000.service), or an OOM daemon
    /// (`systemd-oomd[970]:`, `earlyoom[812]:`) naming whom it killed. Its
    /// PID is the speaker's, not the unit's or the victim's.
    pub fn speaks_for_others(&self) -> bool {
        matches!(
            self.identifier.as_str(),
            "systemd" | "systemd-oomd" | "earlyoom"
        )
    }

    /// True for the kernel's own messages (`kernel:` without a PID).
    pub fn is_kernel(&self) -> bool {
        self.pid.is_none() && self.identifier == "kernel"
    }
}

/// The unit types, as a unit's name ends (`ollama.service`).
const UNIT_TYPES: [&str; 11] = [
    ".service",
    ".scope",
    ".socket",
    ".target",
    ".timer",
    ".mount",
    ".slice",
    ".path",
    ".swap",
    ".automount",
    ".device",
];

/// What a service manager says of a unit after its name (`x.service: …`):
/// systemd's `src/core/service.c` (`Main process exited, code=%s,
/// status=%i/%s`, `Failed with result '%s'.`, `Scheduled restart job,
/// restart counter is at %u.`, `Start request repeated too quickly.`),
/// `unit.c` (`Deactivated successfully.`, `Consumed %s CPU time.`,
/// `Triggering OnFailure= dependencies.`) and `cgroup.c`/`unit.c`'s kills.
const UNIT_WORDS: [&str; 19] = [
    "Main process exited, ",
    "Control process exited, ",
    "Failed with result '",
    "Scheduled restart job",
    "Start request repeated too quickly",
    "Service hold-off time over",
    "Service RestartSec=",
    "Deactivated successfully",
    "Succeeded.",
    "Consumed ",
    "Killing process ",
    "State '",
    "Unit entered failed state",
    "Triggering OnFailure",
    "Start operation timed out",
    "Stopping timed out",
    "Found left-over process ",
    "Unit process ",
    "Job ",
];

/// A manager's job messages (`src/core/job.c`'s status formats, with and
/// without the unit's name): `Started Foo.`, `Starting foo.service - Foo...`,
/// `Failed to start Foo.`, `Dependency failed for Foo.`.
const JOB_WORDS: [&str; 11] = [
    "Started ",
    "Starting ",
    "Stopped ",
    "Stopping ",
    "Failed to start ",
    "Finished ",
    "Reloading",
    "Reloaded ",
    "Dependency failed for ",
    "Reached target ",
    "Stopped target ",
];

/// Whether a line of `systemd[N]:` says what only a service manager says:
/// a unit's state or a job's (a user manager's as much as PID 1's), not
/// what systemd's forked child writes before it runs a unit's command.
pub fn is_manager_message(message: &str) -> bool {
    let unit_rest = message.split_once(": ").filter(|(unit, _)| {
        !unit.contains(char::is_whitespace) && UNIT_TYPES.iter().any(|t| unit.ends_with(t))
    });
    match unit_rest {
        Some((_, rest)) => UNIT_WORDS.iter().any(|w| rest.starts_with(w)),
        None => JOB_WORDS.iter().any(|w| message.starts_with(w)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user manager's lines and its forked child's, from
    /// https://github.com/virtual-kubelet/systemk/issues/86 (real case 1325):
    /// the child (66422) fails to set up the unit's namespace, the manager
    /// (1762) records the unit's exit and failure.
    #[test]
    fn a_user_manager_is_told_from_its_forked_child_by_what_it_says() {
        let entry = |pid: u32, message: &str| JournalEntry {
            time: None,
            host: Some("draak".to_owned()),
            identifier: "systemd".to_owned(),
            pid: Some(pid),
            unit: None,
            cmdline: None,
            message: message.to_owned(),
            span: Span {
                source: crate::source::SourceId(0),
                line: 1,
            },
        };
        let manager = [
            "systemk.default.date.date.service: Main process exited, code=exited, status=226/NAMESPACE",
            "systemk.default.date.date.service: Failed with result 'exit-code'.",
            "Started Podman API Service.",
            "tracker-miner-fs-3.service: Scheduled restart job, restart counter is at 3.",
        ];
        for m in manager {
            assert!(entry(1762, m).is_manager(), "{m}");
        }
        let child = [
            "systemk.default.date.date.service: Failed to set up mount namespacing: Operation not supported",
            "systemk.default.date.date.service: Failed at step NAMESPACE spawning /usr/bin/bash: Operation not supported",
            "ollama.service: Failed to execute /usr/local/bin/ollama: Permission denied",
        ];
        for m in child {
            assert!(!entry(66422, m).is_manager(), "{m}");
        }
        // PID 1 is the manager whatever it says.
        assert!(entry(1, child[0]).is_manager());
    }
}
