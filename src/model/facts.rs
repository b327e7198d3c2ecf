//! The bag of facts one analysis extracts from all of its inputs.

use super::EnvReport;
use super::{
    GpuProcessRecord, GpuRecord, JournalEntry, ProcessListing, PsRecord, ServerEvent, SmiHeader,
    UnitStatus,
};

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
    /// `python -m sglang.check_env` listings.
    pub env_reports: Vec<EnvReport>,
}
