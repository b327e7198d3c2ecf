//! GPUs and the processes that hold their memory, as nvidia-smi reports them.

use super::Timestamp;
use crate::source::Span;

/// The `NVIDIA-SMI … Driver Version: …` header of one table.
#[derive(Debug, Clone, PartialEq)]
pub struct SmiHeader {
    pub driver_version: String,
    pub cuda_version: Option<String>,
    /// Total table width, which identifies the layout generation.
    pub width: usize,
    /// The `ctime(3)` date line above the table, when the paste kept it: the
    /// host's local time of the snapshot, without a zone.
    pub time: Option<Timestamp>,
    pub span: Span,
}

/// One GPU row of a table or a `--query-gpu` CSV line. Absent values
/// (`N/A`, `[Not Supported]`, …) are `None`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuRecord {
    pub index: Option<u32>,
    pub uuid: Option<String>,
    pub name: Option<String>,
    /// The table cuts long product names on the right with `...`.
    pub name_truncated: bool,
    /// Normalised `dddd:bb:dd.f`, lower case.
    pub bus_id: Option<String>,
    pub memory_used_mib: Option<u64>,
    pub memory_total_mib: Option<u64>,
    /// The table's `GPU-Util` cell (`59%`): whether the GPU computes now.
    pub utilization_pct: Option<u32>,
    /// The table's `Compute M.` cell as printed (`Default`, `E. Process`,
    /// `Prohibited`; older drivers also `E. Thread`).
    pub compute_mode: Option<String>,
    /// The row's second line (fan, memory, utilisation, compute mode).
    pub usage_span: Option<Span>,
    pub span: Option<Span>,
}

/// A GPU a line names by index without a record of it: it is there, and
/// nothing more is known of it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuMention {
    pub index: u32,
    /// What named it, for a person: `an idle nvidia-smi pmon row`.
    pub by: &'static str,
    pub span: Span,
}

/// One process row of a table or a `--query-compute-apps` CSV line.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuProcessRecord {
    pub gpu_index: Option<u32>,
    pub gpu_uuid: Option<String>,
    pub pid: u32,
    pub name: String,
    /// The table cuts long process names on the left with `...`.
    pub name_truncated: bool,
    pub used_mib: Option<u64>,
    /// 570+ tables cut values of 100000 MiB and more to `13583...`.
    pub used_truncated: bool,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessListingKind {
    /// The table's process block or a compute-apps query with rows.
    Rows,
    /// `No running processes found` (or a compute-apps query with only its header).
    NoneFound,
    /// The block exists but is empty: processes exist that NVML could not
    /// resolve, typically host PIDs seen from inside a container.
    EmptyBlock,
}

/// What one process listing said, so "nothing listed" can be told apart from
/// "nothing captured".
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessListing {
    pub kind: ProcessListingKind,
    pub rows: usize,
    pub span: Span,
}
