//! Detection of nvidia-smi output: the default table, the CSV queries,
//! `-q` as text and as XML, and `pmon`.

use super::{Class, re};
use crate::ingest::Format;

re!(
    CTIME,
    r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-3][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] [0-9]{4}\s*$"
);
re!(TABLE_BORDER, r"^\+[-=+]{20,}\+\s*$");
re!(TABLE_ROW, r"^\|.*\|\s*$");
// A `|…|` row outside a table only starts one when it says nvidia-smi
// things; a Markdown table is not an nvidia-smi table.
re!(
    TABLE_WORDS,
    r"MiB|NVIDIA|Processes:|Persistence-M|Memory-Usage|No running processes found|\bN/A\b|MIG devices"
);
// nvidia-smi's own failures replace the whole table (docs/formats/nvidia.md).
re!(
    SMI_FAILURE,
    r"^(?:NVIDIA-SMI has failed because|Failed to initialize NVML: |No devices were found\s*$|Unable to determine the device handle for GPU)"
);
// The header row without its bars (`NVIDIA-SMI 470.141.03   Driver
// Version: …`), and a process header without them (`GPU  PID  Process name
// GPU Memory`, as condensed listings print it).
re!(
    BARE_HEADER,
    r"^\s*NVIDIA-SMI [0-9]+\.[0-9]+.*\b(?:Driver|KMD) Version:"
);
re!(
    BARE_PROCESS_HEADER,
    r"^\s*GPU\s+(?:GI\s+CI\s+)?PID\s+(?:Type\s+)?Process name(?:\s+GPU Memory)?(?:\s+Usage)?\s*$"
);
re!(
    QUERY_GPU_HEADER,
    r"^(?:index|uuid|name|pci\.bus_id|memory\.(?:used|total|free|reserved)|timestamp|driver_version|utilization\.(?:gpu|memory)|temperature\.gpu|power\.(?:draw|limit)|clocks\.[0-9A-Za-z_]+|persistence_mode|ecc\.[0-9A-Za-z_]+|compute_mode|serial|gpu_name|gpu_bus_id|count)(?: \[[^\]]+\])?(?:, |$)"
);
re!(QUERY_GPU_ROW, r"^[0-9]+, GPU-[0-9a-f]{8}-");
re!(
    APPS_HEADER,
    r"^(?:gpu_uuid, |gpu_bus_id, |gpu_name, )?pid, process_name"
);
re!(
    APPS_ROW,
    r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}, [0-9]+, "
);

re!(Q_BANNER, r"^=+NVSMI LOG=+\s*$");
re!(
    Q_KEY,
    r"^(?:(?:Timestamp|Driver Version|CUDA Version|Attached GPUs)\s+: |GPU [0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$|    (?:Product Name|GPU UUID)\s+: )"
);
// A `-q` section pasted without its report (`    Remapped Rows`), and the
// leaves only `-q` prints (`        Pending Page Blacklist    : No`).
re!(
    Q_SECTION,
    r"^\s*(?:Remapped Rows|ECC Errors|Ecc Mode|ECC Mode|Retired Pages|GPU Reset Status|FB Memory Usage|BAR1 Memory Usage|Clocks Throttle Reasons|Clocks Event Reasons)\s*$"
);
re!(
    Q_LEAF,
    r"^\s+(?:Remapping Failure Occurred|Pending Page Blacklist|Pending Page Retirement|Drain and Reset Recommended|Reset Required|GPU Recovery Action|Bank Remap Availability Histogram|DRAM (?:Unc|C)orrectable|SRAM (?:Unc|C)orrectable|(?:Single|Double) Bit ECC)\s+: "
);
re!(
    XML_START,
    r"^\s*(?:<\?xml\s|<!DOCTYPE nvidia_smi_log\b|<nvidia_smi_log>)"
);
re!(PMON_HEADER, r"^#\s*(?:Date\s+Time\s+)?gpu\s+pid\s+type\b");
re!(PMON_UNITS, r"^#\s*(?:YYYYMMDD\s+HH:MM:SS\s+)?Idx\s");

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    use Class::*;
    if Q_BANNER.is_match(line) || Q_KEY.is_match(line) {
        return Some(Strong(
            Format::NvidiaSmiQ,
            "NVSMI LOG banner and keys (nvidia-smi -q)",
        ));
    }
    if current != Some(Format::NvidiaSmiQ) && (Q_SECTION.is_match(line) || Q_LEAF.is_match(line)) {
        return Some(Strong(
            Format::NvidiaSmiQ,
            "NVSMI LOG banner and keys (nvidia-smi -q)",
        ));
    }
    if crate::ingest::nvidia_smi_list::is_gpu_line(line) {
        return Some(match current {
            Some(Format::NvidiaSmiList) => Continue,
            _ => Strong(
                Format::NvidiaSmiList,
                "GPU N: NAME (UUID: GPU-…) lines (nvidia-smi -L, nvidia-smi nvlink -s)",
            ),
        });
    }
    if XML_START.is_match(line) {
        return Some(Strong(
            Format::NvidiaSmiQXml,
            "<nvidia_smi_log> XML (nvidia-smi -q -x)",
        ));
    }
    if PMON_HEADER.is_match(line) {
        return Some(Strong(
            Format::NvidiaSmiPmon,
            "# gpu pid type header (nvidia-smi pmon)",
        ));
    }
    if PMON_UNITS.is_match(line) {
        return Some(match current {
            Some(Format::NvidiaSmiPmon) => Continue,
            _ => Strong(
                Format::NvidiaSmiPmon,
                "# Idx units header (nvidia-smi pmon)",
            ),
        });
    }
    if CTIME.is_match(line)
        || TABLE_BORDER.is_match(line)
        || line.starts_with("| NVIDIA-SMI ")
        || SMI_FAILURE.is_match(line)
        || BARE_HEADER.is_match(line)
        || BARE_PROCESS_HEADER.is_match(line)
    {
        return Some(Strong(
            Format::NvidiaSmiTable,
            "nvidia-smi table header and borders",
        ));
    }
    if TABLE_ROW.is_match(line) {
        return match current {
            Some(Format::NvidiaSmiTable) => Some(Continue),
            _ if TABLE_WORDS.is_match(line) => {
                Some(Strong(Format::NvidiaSmiTable, "nvidia-smi table rows"))
            }
            _ => None,
        };
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
