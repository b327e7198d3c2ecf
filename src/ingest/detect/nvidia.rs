//! Detection of nvidia-smi output: the default table and the CSV queries.

use super::{Class, re};
use crate::ingest::Format;

re!(
    CTIME,
    r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-3]\d \d\d:\d\d:\d\d \d{4}\s*$"
);
re!(TABLE_BORDER, r"^\+[-=+]{20,}\+\s*$");
re!(TABLE_ROW, r"^\|.*\|\s*$");
re!(
    QUERY_GPU_HEADER,
    r"^(?:index|uuid|name|pci\.bus_id|memory\.(?:used|total|free))(?: \[[^\]]+\])?(?:, |$)"
);
re!(QUERY_GPU_ROW, r"^\d+, GPU-[0-9a-f]{8}-");
re!(
    APPS_HEADER,
    r"^(?:gpu_uuid, |gpu_bus_id, |gpu_name, )?pid, process_name"
);
re!(
    APPS_ROW,
    r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}, \d+, "
);

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    use Class::*;
    if CTIME.is_match(line) || TABLE_BORDER.is_match(line) || line.starts_with("| NVIDIA-SMI ") {
        return Some(Strong(
            Format::NvidiaSmiTable,
            "nvidia-smi table header and borders",
        ));
    }
    if TABLE_ROW.is_match(line) {
        return Some(match current {
            Some(Format::NvidiaSmiTable) => Continue,
            _ => Strong(Format::NvidiaSmiTable, "nvidia-smi table rows"),
        });
    }
    if APPS_HEADER.is_match(line) || APPS_ROW.is_match(line) {
        return Some(Strong(
            Format::NvidiaSmiComputeApps,
            "nvidia-smi --query-compute-apps CSV",
        ));
    }
    if QUERY_GPU_HEADER.is_match(line) || QUERY_GPU_ROW.is_match(line) {
        if current == Some(Format::NvidiaSmiComputeApps) && !QUERY_GPU_HEADER.is_match(line) {
            return Some(Continue);
        }
        return Some(Strong(
            Format::NvidiaSmiQueryGpu,
            "nvidia-smi --query-gpu CSV",
        ));
    }
    None
}
