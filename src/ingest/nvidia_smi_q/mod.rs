//! `nvidia-smi -q` (docs/formats/nvidia.md, [`text`]) and `nvidia-smi -q -x`
//! (docs/formats/nvidia.md, [`xml`]): the same report in two syntaxes, read into the same
//! facts. Each syntax walks its tree and hands every leaf to a [`GpuBlock`]
//! under one key vocabulary (the XML element names; text keys are lower-cased
//! with `_` for spaces), so what a key means is decided once, here.
//!
//! Each GPU block yields a [`GpuRecord`] (as the table and CSV parsers do),
//! a [`GpuHealth`] (ECC, remapping, reset and recovery state, and the
//! placeholder values that say a GPU is sick), one [`GpuProcessRecord`] per
//! process, and each report one [`ProcessListing`].

mod text;
mod xml;

pub use text::parse as parse_text;
pub use xml::parse as parse_xml;

use super::values::{is_absent, normalize_bus_id, parse_mib};
use crate::model::{
    EccCounter, EccKind, EccScope, Facts, GpuHealth, GpuProcessRecord, GpuRecord, ProcessListing,
    ProcessListingKind, Reading, SickValue,
};
use crate::source::Span;

/// Placeholders that are themselves evidence of a sick GPU (docs/formats/nvidia.md).
const SICK_TOKENS: [&str; 6] = [
    "[GPU requires reset]",
    "[GPU is lost]",
    "ERR!",
    "Unknown Error",
    "[Unknown Error]",
    "GPU is lost",
];

/// One report (`==============NVSMI LOG==============` or `<nvidia_smi_log>`).
#[derive(Default)]
struct Report {
    driver_version: Option<String>,
    attached_gpus: Option<u32>,
    gpus: Vec<GpuBlock>,
    /// The first `Processes` key or element, and whether any said `None`.
    processes: Option<Span>,
}

impl Report {
    fn top_level(&mut self, key: &str, value: &str) {
        match key {
            "driver_version" if !is_absent(value) => self.driver_version = Some(value.to_owned()),
            "attached_gpus" => self.attached_gpus = value.trim().parse().ok(),
            _ => {}
        }
    }

    fn gpu(&mut self, bus: &str, span: Span) -> &mut GpuBlock {
        self.gpus.push(GpuBlock::new(bus, span));
        let last = self.gpus.len() - 1;
        &mut self.gpus[last]
    }

    /// A GPU block whose `GPU <bus id>` line was not pasted.
    fn anonymous_gpu(&mut self, span: Span) {
        let mut block = GpuBlock::new("", span);
        block.anonymous = true;
        self.gpus.push(block);
    }

    fn current(&mut self) -> Option<&mut GpuBlock> {
        self.gpus.last_mut()
    }

    fn current_ref(&self) -> Option<&GpuBlock> {
        self.gpus.last()
    }

    /// A `Processes` key or element: the listing exists.
    fn processes_seen(&mut self, span: Span) {
        self.processes.get_or_insert(span);
    }

    /// Pushes everything the report said.
    fn close(self, facts: &mut Facts) {
        // nvidia-smi prints GPUs in index order; when every attached GPU is
        // printed, the position is the index. A report cut to some GPUs
        // (`-i`) leaves them to be joined by UUID or bus id.
        let complete = self.attached_gpus == Some(self.gpus.len() as u32);
        let mut rows = 0;
        for (position, block) in self.gpus.into_iter().enumerate() {
            let index = complete.then_some(position as u32);
            rows += block.processes.len();
            block.close(index, self.driver_version.clone(), facts);
        }
        if let Some(span) = self.processes {
            let kind = if rows > 0 {
                ProcessListingKind::Rows
            } else {
                ProcessListingKind::NoneFound
            };
            facts
                .process_listings
                .push(ProcessListing { kind, rows, span });
        }
    }
}

/// One GPU of a report, filled leaf by leaf.
struct GpuBlock {
    record: GpuRecord,
    health: GpuHealth,
    processes: Vec<GpuProcessRecord>,
    /// Read from a fragment without its `GPU <bus id>` line.
    anonymous: bool,
    /// `HW Slowdown : Not Active` was read: no hardware slowdown is
    /// engaged, whatever a sub-reason under it says (an H100's capture
    /// shows `HW Power Brake Slowdown : Active` under it).
    hw_slowdown_off: bool,
}

impl GpuBlock {
    fn new(bus: &str, span: Span) -> GpuBlock {
        let bus_id = normalize_bus_id(bus);
        GpuBlock {
            record: GpuRecord {
                bus_id: bus_id.clone(),
                span: Some(span),
                ..GpuRecord::default()
            },
            health: blank_health(bus_id, span),
            processes: Vec::new(),
            anonymous: false,
            hw_slowdown_off: false,
        }
    }

    /// Reads one leaf: `key` is its path below the GPU in the shared
    /// vocabulary, `field` the key as printed.
    fn set(&mut self, key: &str, field: &str, value: &str, span: Span) {
        let value = value.trim();
        if SICK_TOKENS.contains(&value) {
            self.health.sick_values.push(SickValue {
                field: field.to_owned(),
                token: value.to_owned(),
                span,
            });
        }
        // `None` is an absent token elsewhere, but here the answer "no
        // recovery needed".
        if key == "gpu_recovery_action" && value == "None" {
            self.health.recovery_action = Some(Reading {
                value: value.to_owned(),
                span,
            });
        }
        if is_absent(value) {
            return;
        }
        let text = || Some(value.to_owned());
        let reading = || {
            Some(Reading {
                value: value.to_owned(),
                span,
            })
        };
        let flag = || yes_no(value).map(|value| Reading { value, span });
        let count = || leading_number(value).map(|value| Reading { value, span });
        let h = &mut self.health;
        match key {
            "product_name" => self.record.name = text(),
            "uuid" | "gpu_uuid" => {
                self.record.uuid = text();
                h.uuid = text();
            }
            "pci/pci_bus_id" | "pci/bus_id" => {
                if let Some(bus) = normalize_bus_id(value) {
                    self.record.bus_id = Some(bus.clone());
                    h.bus_id = Some(bus);
                }
            }
            "fb_memory_usage/used" => self.record.memory_used_mib = parse_mib(value),
            "fb_memory_usage/total" => self.record.memory_total_mib = parse_mib(value),
            "persistence_mode" => h.persistence_mode = flag(),
            "ecc_mode/current_ecc" | "ecc_mode/current" => h.ecc_enabled = flag(),
            "gpu_reset_status/reset_required" => h.reset_required = flag(),
            "gpu_reset_status/drain_and_reset_recommended" => {
                h.drain_and_reset_recommended = flag()
            }
            "gpu_recovery_action" => {
                h.recovery_action = Some(Reading {
                    value: value.to_owned(),
                    span,
                })
            }
            "ecc_errors/aggregate/sram_threshold_exceeded" => h.sram_threshold_exceeded = flag(),
            "retired_pages/pending_blacklist"
            | "retired_pages/pending_retirement"
            | "retired_pages/pending_page_blacklist"
            | "retired_pages/pending_page_retirement" => {
                // Either key saying Yes means a retirement waits for a reset.
                if h.retired_pages_pending.as_ref().is_none_or(|r| !r.value) {
                    h.retired_pages_pending = flag();
                }
            }
            "retired_pages/single_bit_ecc"
            | "retired_pages/multiple_single_bit_retirement/retired_count" => {
                h.retired_pages_single_bit = count()
            }
            "retired_pages/double_bit_ecc"
            | "retired_pages/double_bit_retirement/retired_count" => {
                h.retired_pages_double_bit = count()
            }
            "remapped_rows/remapped_row_corr" | "remapped_rows/correctable_error" => {
                h.remapped_rows_correctable = count()
            }
            "remapped_rows/remapped_row_unc" | "remapped_rows/uncorrectable_error" => {
                h.remapped_rows_uncorrectable = count()
            }
            "remapped_rows/remapped_row_pending" | "remapped_rows/pending" => {
                h.remapped_rows_pending = flag()
            }
            "remapped_rows/remapped_row_failure" | "remapped_rows/remapping_failure_occurred" => {
                h.remapping_failed = flag()
            }
            "remapped_rows/row_remapper_histogram/row_remapper_histogram_none"
            | "remapped_rows/bank_remap_availability_histogram/none" => {
                h.banks_without_spare_rows = count()
            }
            "temperature/gpu_current_temp" | "temperature/gpu_temp" => h.temperature = reading(),
            "temperature/gpu_max_operating_temp" | "temperature/gpu_temp_max_gpu_threshold" => {
                h.max_operating_temperature = reading()
            }
            "temperature/gpu_slowdown_temp" | "temperature/gpu_temp_slow_threshold" => {
                h.slowdown_temperature = reading()
            }
            _ if sw_thermal_slowdown(key) => {
                if value == "Active" {
                    h.sw_thermal_slowdown = Some(span);
                }
            }
            "clocks/sm" | "clocks/sm_clock" => h.sm_clock = reading(),
            "max_clocks/sm" | "max_clocks/sm_clock" => h.max_sm_clock = reading(),
            _ if hw_slowdown(key).is_some() => match (hw_slowdown(key), value) {
                (Some(UMBRELLA), "Not Active") => self.hw_slowdown_off = true,
                (Some(name), "Active") if !self.hw_slowdown_off => {
                    h.hw_slowdowns.push(Reading { value: name, span })
                }
                _ => {}
            },
            _ => {
                if let Some(counter) = ecc_counter(key, value, span) {
                    h.ecc.push(counter);
                }
            }
        }
    }

    /// Reads one field of a process entry; a pid starts a new entry.
    fn process(&mut self, leaf: &str, value: &str, span: Span) {
        let value = value.trim();
        if leaf == "pid" {
            if let Ok(pid) = value.parse() {
                self.processes.push(GpuProcessRecord {
                    gpu_index: None,
                    gpu_uuid: None,
                    pid,
                    name: String::new(),
                    name_truncated: false,
                    used_mib: None,
                    used_truncated: false,
                    span,
                });
            }
            return;
        }
        let Some(p) = self.processes.last_mut() else {
            return;
        };
        match leaf {
            "name" if !is_absent(value) && value != "Insufficient Permissions" => {
                // `-q` cuts long names on the left with dots.
                p.name_truncated = value.starts_with("...");
                p.name = value.to_owned();
            }
            "used_memory" => p.used_mib = parse_mib(value),
            _ => {}
        }
    }

    fn close(mut self, index: Option<u32>, driver_version: Option<String>, facts: &mut Facts) {
        self.record.index = index;
        self.health.index = index;
        self.health.driver_version = driver_version;
        for mut p in self.processes {
            p.gpu_index = index;
            p.gpu_uuid = self.record.uuid.clone();
            facts.gpu_processes.push(p);
        }
        // A fragment that names no GPU (no index, UUID or bus id) is no GPU
        // of the inventory; its health still counts.
        let named = self.record.index.is_some()
            || self.record.uuid.is_some()
            || self.record.bus_id.is_some();
        if named || !self.anonymous {
            facts.gpus.push(self.record);
        }
        facts.gpu_health.push(self.health);
    }
}

/// A health record that knows only where its GPU is.
fn blank_health(bus_id: Option<String>, span: Span) -> GpuHealth {
    GpuHealth {
        bus_id,
        ..GpuHealth::at(span)
    }
}

/// `ecc_errors/volatile/dram_uncorrectable` and the pre-Ampere
/// `ecc_errors/aggregate/double_bit/total`.
fn ecc_counter(key: &str, value: &str, span: Span) -> Option<EccCounter> {
    let rest = key.strip_prefix("ecc_errors/")?;
    let (scope, name) = rest.split_once('/')?;
    let scope = match scope {
        "volatile" => EccScope::Volatile,
        "aggregate" => EccScope::Aggregate,
        _ => return None,
    };
    use EccKind::{Correctable, Uncorrectable};
    let (kind, location) = match name {
        "sram_correctable" => (Correctable, "SRAM"),
        "sram_uncorrectable" => (Uncorrectable, "SRAM"),
        "sram_uncorrectable_parity" => (Uncorrectable, "SRAM parity"),
        "sram_uncorrectable_secded" => (Uncorrectable, "SRAM SEC-DED"),
        "dram_correctable" => (Correctable, "DRAM"),
        "dram_uncorrectable" => (Uncorrectable, "DRAM"),
        "single_bit/total" => (Correctable, "Total"),
        "double_bit/total" => (Uncorrectable, "Total"),
        _ => return None,
    };
    Some(EccCounter {
        scope,
        kind,
        location,
        count: value.parse().ok()?,
        span,
    })
}

fn yes_no(value: &str) -> Option<bool> {
    match value {
        "Yes" | "Enabled" | "Enable" => Some(true),
        "No" | "Disabled" | "Disable" => Some(false),
        _ => None,
    }
}

/// `640 bank(s)` → 640, `3` → 3.
fn leading_number(value: &str) -> Option<u64> {
    value.split_whitespace().next()?.parse().ok()
}

/// The shared key of a text key path: `ECC Errors/Volatile/SRAM
/// Uncorrectable SEC-DED` → `ecc_errors/volatile/sram_uncorrectable_secded`.
/// The hardware slowdown a clock event reason's key names, by its printed
/// name: text `clocks_event_reasons/hw_slowdown/hw_power_brake_slowdown`
/// (the sub-reasons are printed under `HW Slowdown`), XML
/// `clocks_event_reasons/clocks_event_reason_hw_power_brake_slowdown`, and
/// `clocks_throttle_reason…` before driver 535.
const UMBRELLA: &str = "HW Slowdown";

fn hw_slowdown(key: &str) -> Option<&'static str> {
    let section = key.split('/').next()?;
    if section != "clocks_event_reasons" && section != "clocks_throttle_reasons" {
        return None;
    }
    let leaf = key.rsplit('/').next()?;
    let leaf = leaf
        .strip_prefix("clocks_event_reason_")
        .or_else(|| leaf.strip_prefix("clocks_throttle_reason_"))
        .unwrap_or(leaf);
    match leaf {
        "hw_slowdown" => Some(UMBRELLA),
        "hw_thermal_slowdown" => Some("HW Thermal Slowdown"),
        "hw_power_brake_slowdown" => Some("HW Power Brake Slowdown"),
        _ => None,
    }
}

/// Whether a clock event reason's key is the software thermal slowdown
/// (text `clocks_event_reasons/sw_thermal_slowdown`, XML
/// `…/clocks_event_reason_sw_thermal_slowdown`, `clocks_throttle_…`
/// before driver 535).
fn sw_thermal_slowdown(key: &str) -> bool {
    let Some((section, leaf)) = key.split_once('/') else {
        return false;
    };
    matches!(section, "clocks_event_reasons" | "clocks_throttle_reasons")
        && matches!(
            leaf,
            "sw_thermal_slowdown"
                | "clocks_event_reason_sw_thermal_slowdown"
                | "clocks_throttle_reason_sw_thermal_slowdown"
        )
}

fn text_key(path: &[&str]) -> String {
    path.iter()
        .map(|k| {
            k.trim()
                .to_ascii_lowercase()
                .replace('-', "")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join("_")
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests;
