//! The bag of facts one analysis extracts from all of its inputs.

use super::EnvReport;
use super::Timestamp;
use super::{GpuHealth, KernelEvent, ProcCgroup, UnitProperties};
use super::{
    GpuProcessRecord, GpuRecord, JournalEntry, Message, ProcessListing, PsRecord, ServerEvent,
    SmiHeader, UnitStatus,
};
use crate::source::Span;

/// Everything ingest found, in input order. Correlation joins these.
#[derive(Debug, Default)]
pub struct Facts {
    pub smi_headers: Vec<SmiHeader>,
    pub gpus: Vec<GpuRecord>,
    pub gpu_processes: Vec<GpuProcessRecord>,
    /// One per process table / compute-apps query, so "no rows" is itself a fact.
    pub process_listings: Vec<ProcessListing>,
    pub journal: Vec<JournalEntry>,
    pub unit_statuses: Vec<UnitStatus>,
    pub server_events: Vec<ServerEvent>,
    pub ps: Vec<PsRecord>,
    /// Lines that contain a rule anchor, in input order (see `ingest::Anchors`).
    pub messages: Vec<Message>,
    /// One per GPU block of `nvidia-smi -q` / `-q -x`.
    pub gpu_health: Vec<GpuHealth>,
    pub kernel_events: Vec<KernelEvent>,
    /// One per unit of `systemctl show`.
    pub unit_properties: Vec<UnitProperties>,
    /// One per process of `/proc/PID/cgroup`.
    pub proc_cgroups: Vec<ProcCgroup>,
    /// `python -m sglang.check_env` listings.
    pub env_reports: Vec<EnvReport>,
    /// The time of lines that make no other timed fact (every prefixed server
    /// log line, nvidia-smi's date line), for the timeline.
    pub line_times: Vec<(Span, Timestamp)>,
}
