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

    /// True for the kernel's own messages (`kernel:` without a PID).
    pub fn is_kernel(&self) -> bool {
        self.pid.is_none() && self.identifier == "kernel"
    }
}
