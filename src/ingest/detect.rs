//! Format detection: split one input into segments of one format each.
//!
//! Each line is classified on its own: a line that only one format can
//! produce ("strong") starts or continues a segment of that format; any other
//! line (blank lines, traceback bodies, `CGroup:` tree branches, CSV rows)
//! continues the current segment. A pasted jumble therefore falls apart into
//! its pieces, and a file of one format stays one segment.

use std::sync::LazyLock;

use regex::Regex;

use super::{Format, Segment};
use crate::source::{Source, SourceId};

enum Class {
    /// Only `Format` writes lines like this.
    Strong(Format, &'static str),
    /// Belongs to whatever segment is open.
    Continue,
}

macro_rules! re {
    ($name:ident, $pattern:expr) => {
        static $name: LazyLock<Regex> = LazyLock::new(|| Regex::new($pattern).expect($pattern));
    };
}

re!(
    JOURNAL_SHORT_ISO,
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d{4} \S+ [^:]*?\S: "
);
re!(
    JOURNAL_SHORT,
    r"^[A-Z][a-z]{2} [ 0-3]\d \d\d:\d\d:\d\d(?:\.\d{6})? \S+ [^:]*?\S: "
);
re!(
    JOURNAL_MARKER,
    r"^-- (?:Boot [0-9a-f]{32}|Reboot|No entries|(?:Logs begin|Journal begins) at .*) --$"
);
re!(
    SGLANG,
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*\] "
);
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
re!(
    UNIT_BULLET,
    r"^[●×○*x] \S+\.(?:service|scope|socket|mount|timer|target|slice|path|device|swap)(?: - .*)?$"
);
re!(
    UNIT_FIELD,
    r"^ {2,}(?:Loaded|Active|Main PID|CGroup|Tasks|Memory|CPU|Process|Drop-In|Duration|TriggeredBy|Docs|Invocation|Mem peak|Status|IP|IO): "
);
re!(UNIT_NOT_FOUND, r"^Unit \S+ could not be found\.$");
re!(
    PS_HEADER,
    r"^\s*(?:PID|USER|UID)\s.*\b(?:CMD|COMMAND|ARGS)\s*$"
);
re!(PS_ROW, r"^\s*(?:\S+\s+)?\d+\s+\d+\s");
// `user@host:dir# cmd`, `$ cmd`, or a bare `user@host:dir# ` with nothing typed.
re!(
    SHELL_PROMPT,
    r"^(?:(?:\S+@\S+:\S*\s?[#$]|\$|#) \S|\S+@\S+:\S*\s?[#$]\s*$)"
);

fn classify(line: &str, current: Option<Format>) -> Class {
    use Class::*;
    // Journal first: a journal line may carry any other format inside it.
    if line.starts_with('{')
        && (line.contains("\"__REALTIME_TIMESTAMP\"") || line.contains("\"MESSAGE\""))
    {
        return Strong(
            Format::JournalJson,
            "JSON object with journal fields (journalctl -o json)",
        );
    }
    if JOURNAL_SHORT_ISO.is_match(line) {
        return Strong(
            Format::JournalShortIso,
            "ISO timestamp, host, ident[pid]: (journalctl -o short-iso)",
        );
    }
    if JOURNAL_SHORT.is_match(line) {
        return Strong(
            Format::JournalShort,
            "syslog timestamp, host, ident[pid]: (journalctl -o short)",
        );
    }
    if JOURNAL_MARKER.is_match(line) {
        return match current {
            Some(Format::JournalShort | Format::JournalShortIso) => Continue,
            _ => Strong(Format::JournalShort, "journalctl marker line"),
        };
    }
    if SGLANG.is_match(line) {
        return Strong(
            Format::SglangLog,
            "[YYYY-MM-DD HH:MM:SS rank] prefix (SGLang)",
        );
    }
    if CTIME.is_match(line) || TABLE_BORDER.is_match(line) || line.starts_with("| NVIDIA-SMI ") {
        return Strong(
            Format::NvidiaSmiTable,
            "nvidia-smi table header and borders",
        );
    }
    if TABLE_ROW.is_match(line) {
        return match current {
            Some(Format::NvidiaSmiTable) => Continue,
            _ => Strong(Format::NvidiaSmiTable, "nvidia-smi table rows"),
        };
    }
    if APPS_HEADER.is_match(line) || APPS_ROW.is_match(line) {
        return Strong(
            Format::NvidiaSmiComputeApps,
            "nvidia-smi --query-compute-apps CSV",
        );
    }
    if QUERY_GPU_HEADER.is_match(line) || QUERY_GPU_ROW.is_match(line) {
        if current == Some(Format::NvidiaSmiComputeApps) && !QUERY_GPU_HEADER.is_match(line) {
            return Continue;
        }
        return Strong(Format::NvidiaSmiQueryGpu, "nvidia-smi --query-gpu CSV");
    }
    if UNIT_BULLET.is_match(line) || UNIT_NOT_FOUND.is_match(line) {
        return Strong(
            Format::SystemctlStatus,
            "unit bullet line (systemctl status)",
        );
    }
    if UNIT_FIELD.is_match(line) {
        return match current {
            Some(Format::SystemctlStatus) => Continue,
            _ => Strong(
                Format::SystemctlStatus,
                "aligned Loaded:/Active: fields (systemctl status)",
            ),
        };
    }
    if PS_HEADER.is_match(line) {
        return Strong(Format::Ps, "ps header row");
    }
    if current == Some(Format::Ps) && !PS_ROW.is_match(line) && !line.trim().is_empty() {
        // A ps listing ends at the first line that is not a process row.
        return Strong(
            Format::Unknown,
            "text after a ps listing that no format matched",
        );
    }
    if SHELL_PROMPT.is_match(line) {
        return Strong(Format::ShellPrompt, "shell prompt and command");
    }
    Continue
}

/// Splits `source` into segments of one format each. Always covers every
/// line exactly once.
pub fn segment(id: SourceId, source: &Source) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    // Lines seen before the first strong line join the first segment.
    let mut pending_start: Option<u32> = None;
    for (n, line) in source.lines() {
        let current = segments.last().map(|s| s.format);
        match classify(&line, current) {
            Class::Strong(format, why)
                if Some(format) != current || format == Format::ShellPrompt =>
            {
                let first_line = pending_start.take().unwrap_or(n);
                segments.push(Segment {
                    source: id,
                    format,
                    first_line,
                    last_line: n,
                    why,
                });
            }
            _ => match segments.last_mut() {
                Some(s) => s.last_line = n,
                None => {
                    pending_start.get_or_insert(n);
                }
            },
        }
    }
    if let Some(first_line) = pending_start {
        segments.push(Segment {
            source: id,
            format: Format::Unknown,
            first_line,
            last_line: source.line_count(),
            why: "no line matched a known format",
        });
    }
    segments
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formats(text: &str) -> Vec<(Format, u32, u32)> {
        let source = Source::new("t", text.as_bytes());
        segment(SourceId(0), &source)
            .into_iter()
            .map(|s| (s.format, s.first_line, s.last_line))
            .collect()
    }

    #[test]
    fn a_single_format_file_is_one_segment() {
        let log = "[2026-11-27 09:38:52 TP1] Scheduler hit an exception: Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nRuntimeError: boom\n";
        assert_eq!(formats(log), vec![(Format::SglangLog, 1, 3)]);
    }

    #[test]
    fn a_paste_falls_apart_into_its_pieces() {
        let paste = "\
root@ct200:~# nvidia-smi
Fri Nov 27 09:41:12 2026       
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.172.08             Driver Version: 570.172.08     CUDA Version: 12.8     |
+-----------------------------------------------------------------------------------------+

root@ct200:~# journalctl -u sglang-k26
Nov 27 09:38:40 ct200 systemd[1]: Started sglang-k26.service - SGLang.
● ddtree-qwen.service - DDTree
     Loaded: loaded (/etc/systemd/system/ddtree-qwen.service; enabled; preset: enabled)
     CGroup: /system.slice/ddtree-qwen.service
             └─20629 /opt/ddtree/venv/bin/python3 serve.py
[2026-11-27 09:38:52 TP1] Scheduler hit an exception: Traceback (most recent call last):
RuntimeError: boom
";
        assert_eq!(
            formats(paste),
            vec![
                (Format::ShellPrompt, 1, 1),
                (Format::NvidiaSmiTable, 2, 6),
                (Format::ShellPrompt, 7, 7),
                (Format::JournalShort, 8, 8),
                (Format::SystemctlStatus, 9, 12),
                (Format::SglangLog, 13, 14),
            ]
        );
    }

    #[test]
    fn csv_queries_are_told_apart() {
        assert_eq!(
            formats(
                "index, uuid, memory.used [MiB], memory.total [MiB]\n0, GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 1026 MiB, 81559 MiB\n"
            ),
            vec![(Format::NvidiaSmiQueryGpu, 1, 2)]
        );
        assert_eq!(
            formats(
                "GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 4318, sglang::scheduler_TP0, 1018 MiB\n"
            ),
            vec![(Format::NvidiaSmiComputeApps, 1, 1)]
        );
    }

    #[test]
    fn unknown_text_is_one_unknown_segment() {
        assert_eq!(formats("hello\nworld\n"), vec![(Format::Unknown, 1, 2)]);
        assert_eq!(formats(""), vec![]);
    }
}
