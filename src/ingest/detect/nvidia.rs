//! Detection of nvidia-smi output: the default table, the CSV queries,
//! `-q` as text and as XML, and `pmon`; and of the container toolkit's
//! `nvidia-ctk cdi list`.

use super::{Class, first_after_space, gated, re};
use crate::ingest::Format;

gated!(
    CTIME,
    |l| l.as_bytes().first().is_some_and(u8::is_ascii_uppercase)
        && l.as_bytes().get(3) == Some(&b' '),
    r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-3][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] [0-9]{4}\s*$"
);
gated!(TABLE_BORDER, |l| l.starts_with('+'), r"^\+[-=+]{20,}\+\s*$");
gated!(TABLE_ROW, |l| l.starts_with('|'), r"^\|.*\|\s*$");
// A `|…|` row outside a table only starts one when it says nvidia-smi
// things; a Markdown table is not an nvidia-smi table.
re!(
    TABLE_WORDS,
    r"MiB|NVIDIA|Processes:|Persistence-M|Memory-Usage|No running processes found|\bN/A\b|MIG devices"
);
// nvidia-smi's own failures replace the whole table (docs/formats/nvidia.md).
gated!(
    SMI_FAILURE,
    |l| {
        [
            "NVIDIA-SMI has failed because",
            "Failed to initialize NVML: ",
            "No devices were found",
            "Unable to determine the device handle for GPU",
            "Unable to detect the device handle for GPU",
        ]
        .iter()
        .any(|p| l.starts_with(p))
    },
    r"^(?:NVIDIA-SMI has failed because|Failed to initialize NVML: |No devices were found\s*$|Unable to (?:determine|detect) the device handle for GPU)"
);
// The header row without its bars (`NVIDIA-SMI 470.141.03   Driver
// Version: …`), and a process header without them (`GPU  PID  Process name
// GPU Memory`, as condensed listings print it).
gated!(
    BARE_HEADER,
    |l| l.trim_start().starts_with("NVIDIA-SMI "),
    r"^\s*NVIDIA-SMI [0-9]+\.[0-9]+.*\b(?:Driver|KMD) Version:"
);
gated!(
    BARE_PROCESS_HEADER,
    |l| l.trim_start().starts_with("GPU"),
    r"^\s*GPU\s+(?:GI\s+CI\s+)?PID\s+(?:Type\s+)?Process name(?:\s+GPU Memory)?(?:\s+Usage)?\s*$"
);
// A ≥ 450 process row whose left bar the paste cut off, its right bar
// kept (`0   N/A  N/A     60895      C   ray::IDLE      1177MiB |`): GPU,
// GI, CI, PID, type, name, memory.
gated!(
    CUT_PROCESS_ROW,
    |l| l
        .trim_start()
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_digit)
        && l.trim_end().ends_with('|'),
    r"^\s*[0-9]+\s+(?:N/A|[0-9]+)\s+(?:N/A|[0-9]+)\s+[0-9]+\s+[CGM](?:\+[CGM])*\s+\S.*\s[0-9]+MiB\s*\|\s*$"
);
gated!(
    QUERY_GPU_HEADER,
    |l| {
        // A field name (letters, digits, `_`, `.`) first, then ` [unit]`,
        // `, ` or the end: any log line that starts with a lowercase word
        // and a space or colon fails here, not in the regex.
        let b = l.as_bytes();
        let name = b
            .iter()
            .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
            .count();
        b.first().is_some_and(u8::is_ascii_lowercase)
            && (name == b.len() || matches!(b.get(name..name + 2), Some(b", " | b" [")))
    },
    r"^(?:index|uuid|name|pci\.bus_id|memory\.(?:used|total|free|reserved)|timestamp|driver_version|utilization\.(?:gpu|memory)|temperature\.gpu|power\.(?:draw|limit)|clocks\.[0-9A-Za-z_]+|persistence_mode|ecc\.[0-9A-Za-z_]+|compute_mode|serial|gpu_name|gpu_bus_id|count)(?: \[[^\]]+\])?(?:, |$)"
);
gated!(
    QUERY_GPU_ROW,
    |l| l.as_bytes().first().is_some_and(u8::is_ascii_digit),
    r"^[0-9]+, GPU-[0-9a-f]{8}-"
);
gated!(
    APPS_HEADER,
    |l| l.starts_with("gpu_") || l.starts_with("pid, "),
    r"^(?:gpu_uuid, |gpu_bus_id, |gpu_name, )?pid, process_name"
);
gated!(
    APPS_ROW,
    |l| l.starts_with("GPU-"),
    r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}, [0-9]+, "
);

gated!(Q_BANNER, |l| l.starts_with('='), r"^=+NVSMI LOG=+\s*$");
gated!(
    Q_KEY,
    |l| {
        matches!(l.as_bytes().first(), Some(b'T' | b'D' | b'C' | b'A' | b'G'))
            || matches!(l.as_bytes().get(..5), Some(b"    P" | b"    G"))
    },
    r"^(?:(?:Timestamp|Driver Version|CUDA Version|Attached GPUs)\s+: |GPU [0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$|    (?:Product Name|GPU UUID)\s+: )"
);
// A `-q` section pasted without its report (`    Remapped Rows`), and the
// leaves only `-q` prints (`        Pending Page Blacklist    : No`).
gated!(
    Q_SECTION,
    |l| {
        matches!(
            first_after_space(l),
            Some(b'R' | b'E' | b'G' | b'F' | b'B' | b'C')
        ) && matches!(l.trim_end().as_bytes().last(), Some(b's' | b'e'))
    },
    r"^\s*(?:Remapped Rows|ECC Errors|Ecc Mode|ECC Mode|Retired Pages|GPU Reset Status|FB Memory Usage|BAR1 Memory Usage|Clocks Throttle Reasons|Clocks Event Reasons)\s*$"
);
gated!(
    Q_LEAF,
    |l| {
        l.starts_with(char::is_whitespace)
            && matches!(
                first_after_space(l),
                Some(b'R' | b'P' | b'D' | b'G' | b'B' | b'S')
            )
    },
    r"^\s+(?:Remapping Failure Occurred|Pending Page Blacklist|Pending Page Retirement|Drain and Reset Recommended|Reset Required|GPU Recovery Action|Bank Remap Availability Histogram|DRAM (?:Unc|C)orrectable|SRAM (?:Unc|C)orrectable|(?:Single|Double) Bit ECC)\s+: "
);
gated!(
    XML_START,
    |l| first_after_space(l) == Some(b'<'),
    r"^\s*(?:<\?xml\s|<!DOCTYPE nvidia_smi_log\b|<nvidia_smi_log>)"
);
// A fragment of it pasted without the document (docs/formats/nvidia.md):
// a `<gpu id="…">` element, or a GPU section whose name only nvidia-smi's
// DTD uses (`<clocks_event_reasons>`, `<fb_memory_usage>`), alone on its
// line as nvidia-smi indents them.
gated!(
    XML_FRAGMENT,
    |l| first_after_space(l) == Some(b'<'),
    r#"^\s*<(?:gpu id="[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"|(?:clocks_(?:event|throttle)_reasons(?:_counters)?|(?:fb|bar1|cc_protected)_memory_usage|ecc_errors|ecc_mode|retired_pages|remapped_rows|gpu_reset_status|(?:gpu_|module_)?power_readings|supported_gpu_target_temp|(?:default_)?applications_clocks|max_(?:customer_boost_)?clocks|accounted_processes|encoder_stats|fbc_stats))>\s*$"#
);
gated!(
    PMON_HEADER,
    |l| l.starts_with('#'),
    r"^#\s*(?:Date\s+Time\s+)?gpu\s+pid\s+type\b"
);
gated!(
    PMON_UNITS,
    |l| l.starts_with('#'),
    r"^#\s*(?:YYYYMMDD\s+HH:MM:SS\s+)?Idx\s"
);

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
    if crate::ingest::nvidia_ctk_cdi_list::is_cdi_line(line) {
        return Some(match current {
            Some(Format::NvidiaCtkCdiList) => Continue,
            _ => Strong(
                Format::NvidiaCtkCdiList,
                "CDI device names nvidia.com/gpu=N (nvidia-ctk cdi list)",
            ),
        });
    }
    if XML_START.is_match(line) {
        return Some(Strong(
            Format::NvidiaSmiQXml,
            "<nvidia_smi_log> XML (nvidia-smi -q -x)",
        ));
    }
    if XML_FRAGMENT.is_match(line) {
        return Some(match current {
            Some(Format::NvidiaSmiQXml) => Continue,
            _ => Strong(
                Format::NvidiaSmiQXml,
                "a GPU's elements of nvidia-smi -q -x XML without the document",
            ),
        });
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
        || CUT_PROCESS_ROW.is_match(line)
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

/// Each gated regex, for the test that its gate lets through every line
/// it matches.
#[cfg(test)]
pub(super) fn gated() -> Vec<(&'static str, &'static super::Gated)> {
    vec![
        ("CTIME", &CTIME),
        ("TABLE_BORDER", &TABLE_BORDER),
        ("TABLE_ROW", &TABLE_ROW),
        ("SMI_FAILURE", &SMI_FAILURE),
        ("BARE_HEADER", &BARE_HEADER),
        ("BARE_PROCESS_HEADER", &BARE_PROCESS_HEADER),
        ("CUT_PROCESS_ROW", &CUT_PROCESS_ROW),
        ("QUERY_GPU_HEADER", &QUERY_GPU_HEADER),
        ("QUERY_GPU_ROW", &QUERY_GPU_ROW),
        ("APPS_HEADER", &APPS_HEADER),
        ("APPS_ROW", &APPS_ROW),
        ("Q_BANNER", &Q_BANNER),
        ("Q_KEY", &Q_KEY),
        ("Q_SECTION", &Q_SECTION),
        ("Q_LEAF", &Q_LEAF),
        ("XML_START", &XML_START),
        ("XML_FRAGMENT", &XML_FRAGMENT),
        ("PMON_HEADER", &PMON_HEADER),
        ("PMON_UNITS", &PMON_UNITS),
    ]
}
