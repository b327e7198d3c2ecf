//! The health of a GPU as `nvidia-smi -q` reports it: ECC counters, pending
//! row remaps and page retirements, reset and recovery state, and the
//! placeholder values nvidia-smi prints for a GPU it can no longer read.

use crate::source::Span;

/// A value and the line it was read from, so a rule can cite that line.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading<T> {
    pub value: T,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EccScope {
    /// Since the last driver load or GPU reset.
    Volatile,
    /// Over the board's lifetime.
    Aggregate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EccKind {
    Correctable,
    Uncorrectable,
}

/// One ECC counter.
#[derive(Debug, Clone, PartialEq)]
pub struct EccCounter {
    pub scope: EccScope,
    pub kind: EccKind,
    /// `SRAM`, `SRAM parity`, `SRAM SEC-DED`, `DRAM`, or `Total` for the
    /// single-/double-bit counters of pre-Ampere drivers.
    pub location: &'static str,
    pub count: u64,
    pub span: Span,
}

/// A value nvidia-smi replaced with a token that is itself evidence of a sick
/// GPU (`[GPU requires reset]`, `[GPU is lost]`, `ERR!`, `Unknown Error`).
#[derive(Debug, Clone, PartialEq)]
pub struct SickValue {
    /// The key as printed (`Used`, `fb_memory_usage/used`).
    pub field: String,
    pub token: String,
    pub span: Span,
}

/// One GPU block of `nvidia-smi -q` or `-q -x`. `None` means the capture did
/// not show the value or showed an absent token (`N/A`).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuHealth {
    pub index: Option<u32>,
    pub uuid: Option<String>,
    /// Normalised `dddd:bb:dd.f`.
    pub bus_id: Option<String>,
    pub driver_version: Option<String>,
    pub persistence_mode: Option<Reading<bool>>,
    pub ecc_enabled: Option<Reading<bool>>,
    /// `GPU Reset Status / Reset Required`.
    pub reset_required: Option<Reading<bool>>,
    pub drain_and_reset_recommended: Option<Reading<bool>>,
    /// `GPU Recovery Action` (`None`, `Reset`, `Reboot`, `Drain P2P`, …).
    pub recovery_action: Option<Reading<String>>,
    pub ecc: Vec<EccCounter>,
    pub sram_threshold_exceeded: Option<Reading<bool>>,
    /// Pre-Ampere page retirement: `Pending Page Blacklist` / `pending_retirement`.
    pub retired_pages_pending: Option<Reading<bool>>,
    pub retired_pages_single_bit: Option<Reading<u64>>,
    pub retired_pages_double_bit: Option<Reading<u64>>,
    /// Ampere+ row remapping.
    pub remapped_rows_correctable: Option<Reading<u64>>,
    pub remapped_rows_uncorrectable: Option<Reading<u64>>,
    pub remapped_rows_pending: Option<Reading<bool>>,
    pub remapping_failed: Option<Reading<bool>>,
    /// Banks with no spare rows left (`Bank Remap Availability Histogram / None`).
    pub banks_without_spare_rows: Option<Reading<u64>>,
    /// The hardware slowdowns among the clock event reasons (`Clocks Event
    /// Reasons`, `Clocks Throttle Reasons` before driver 535) that read
    /// `Active`, by their printed name: `HW Slowdown`, `HW Thermal
    /// Slowdown`, `HW Power Brake Slowdown`.
    pub hw_slowdowns: Vec<Reading<&'static str>>,
    /// `SW Thermal Slowdown : Active` among the clock event reasons: the
    /// driver holds the clocks down to keep the GPU under its max
    /// operating temperature.
    pub sw_thermal_slowdown: Option<Span>,
    /// `Temperature / GPU Current Temp`, `GPU Max Operating Temp` and `GPU
    /// Slowdown Temp` as printed (`56 C`; XML `gpu_temp`,
    /// `gpu_temp_max_gpu_threshold`, `gpu_temp_slow_threshold`).
    pub temperature: Option<Reading<String>>,
    pub max_operating_temperature: Option<Reading<String>>,
    pub slowdown_temperature: Option<Reading<String>>,
    /// `Clocks / SM` and `Max Clocks / SM` as printed (`382 MHz`).
    pub sm_clock: Option<Reading<String>>,
    pub max_sm_clock: Option<Reading<String>>,
    pub sick_values: Vec<SickValue>,
    /// DCGM's last Xid of the GPU (`DCGM_FI_DEV_XID_ERRORS`, the `XIDER`
    /// column of `dcgmi dmon -e 230`), when above 0: the GPU's latest fault
    /// by DCGM's count, whether or not its kernel line is in the captures.
    pub last_xid: Option<Reading<u32>>,
    /// The `GPU 00000000:18:00.0` line (or `<gpu id=…>`, or the row of a
    /// `--query-gpu` or `dcgmi dmon` table).
    pub span: Span,
}

impl GpuHealth {
    /// A record that knows nothing yet but the line that names its GPU.
    pub fn at(span: Span) -> GpuHealth {
        GpuHealth {
            index: None,
            uuid: None,
            bus_id: None,
            driver_version: None,
            persistence_mode: None,
            ecc_enabled: None,
            reset_required: None,
            drain_and_reset_recommended: None,
            recovery_action: None,
            ecc: Vec::new(),
            sram_threshold_exceeded: None,
            retired_pages_pending: None,
            retired_pages_single_bit: None,
            retired_pages_double_bit: None,
            remapped_rows_correctable: None,
            remapped_rows_uncorrectable: None,
            remapped_rows_pending: None,
            remapping_failed: None,
            banks_without_spare_rows: None,
            hw_slowdowns: Vec::new(),
            sw_thermal_slowdown: None,
            temperature: None,
            max_operating_temperature: None,
            slowdown_temperature: None,
            sm_clock: None,
            max_sm_clock: None,
            sick_values: Vec::new(),
            last_xid: None,
            span,
        }
    }

    /// The uncorrectable counters above zero.
    pub fn uncorrectable_errors(&self) -> impl Iterator<Item = &EccCounter> {
        self.ecc
            .iter()
            .filter(|c| c.kind == EccKind::Uncorrectable && c.count > 0)
    }
}

/// A temperature as nvidia-smi prints it, in degrees Celsius: `56 C`.
pub fn celsius(text: &str) -> Option<i32> {
    text.trim().strip_suffix('C')?.trim().parse().ok()
}
