//! A core dump systemd-coredump recorded, as `coredumpctl info` shows it:
//! which process died (PID, name, command), by which signal, when, and in
//! which unit.

use super::Timestamp;
use crate::source::Span;

#[derive(Debug, Clone, PartialEq)]
pub struct CoreDump {
    pub pid: u32,
    /// The kernel's name of the process (`ollama_llama_se`: 15 bytes at most).
    pub comm: Option<String>,
    /// `Signal: 6 (ABRT)`: the number and its name.
    pub signal: Option<u32>,
    pub signal_name: Option<String>,
    pub time: Option<Timestamp>,
    /// `Unit:` (a system unit, or `user@1000.service` for a user's).
    pub unit: Option<String>,
    pub executable: Option<String>,
    pub command_line: Option<String>,
    /// The block's `PID:` line.
    pub span: Span,
    /// Its `Signal:` and `Unit:` lines.
    pub signal_span: Option<Span>,
    pub unit_span: Option<Span>,
}
