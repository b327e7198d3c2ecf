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
