//! Format detection: split one input into segments of one format each.
//!
//! Each line is classified on its own: a line that only one format can
//! produce ("strong") starts or continues a segment of that format; any other
//! line (blank lines, traceback bodies, `CGroup:` tree branches, CSV rows)
//! continues the current segment. A pasted jumble therefore falls apart into
//! its pieces, and a file of one format stays one segment.

use super::{Format, Segment};
use crate::source::{Source, SourceId};

pub(super) enum Class {
    /// Only `Format` writes lines like this.
    Strong(Format, &'static str),
    /// Belongs to whatever segment is open.
    Continue,
}

mod journal;
mod kernel;
mod nvidia;
mod procfs;
mod server;
mod shell;
mod systemd;
#[cfg(test)]
mod tests_host;

/// Sniffers in priority order: the first that claims a line wins. Journal
/// first, because a journal line may carry any other format inside it.
type Sniffer = fn(&str, Option<Format>) -> Option<Class>;
const SNIFFERS: &[Sniffer] = &[
    journal::sniff,
    kernel::sniff,
    server::sniff,
    nvidia::sniff,
    systemd::sniff,
    procfs::sniff,
    shell::sniff,
];

/// Defines a lazily compiled regex; a bad pattern fails the first test that
/// touches it.
macro_rules! re {
    ($name:ident, $pattern:expr) => {
        static $name: std::sync::LazyLock<regex::Regex> =
            std::sync::LazyLock::new(|| regex::Regex::new($pattern).expect($pattern));
    };
}
pub(super) use re;

fn classify(line: &str, current: Option<Format>) -> Class {
    SNIFFERS
        .iter()
        .find_map(|sniff| sniff(line, current))
        .unwrap_or(Class::Continue)
}

/// [`segment`], unless the user named the format (`--format-hint`): then
/// the whole input is one segment of it.
pub fn segment_as(id: SourceId, source: &Source, hint: Option<Format>) -> Vec<Segment> {
    match hint {
        Some(format) if source.line_count() > 0 => vec![Segment {
            source: id,
            format,
            first_line: 1,
            last_line: source.line_count(),
            why: "named by --format-hint",
        }],
        Some(_) => Vec::new(),
        None => segment(id, source),
    }
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
    fn every_journalctl_mode_in_one_paste() {
        let paste = "\
root@gpu-node-7:~# journalctl -u sglang -o json-pretty -n 1
{
	\"_PID\" : \"4242\",
	\"MESSAGE\" : \"hello\"
}
root@gpu-node-7:~# journalctl -o verbose -n 1
Sat 2024-06-01 12:00:01.000000 UTC [s=3263;i=1;b=a1b2;m=7270e0;t=619d2d6fd1240;x=fbfc]
    _PID=1
    MESSAGE=Started sglang.service - SGLang inference server.
░░ Subject: A start job for unit sglang.service has finished successfully
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
Sat 2024-06-01 12:01:00.000000 UTC [s=3263;i=8;b=0f1e;m=200b20;t=619d2da815700;x=b911]
    MESSAGE=Accepted publickey for root
Sat 2024-06-01 12:00:03 UTC gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79
Sat 2024-06-01 12:00:04 UTC gpu-node-7 sglang.service[4242]: Traceback (most recent call last):
                                                               File \"x.py\", line 1, in <module>
Sat 2024-06-01 12:00:05 UTC gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79
[    9.000100] gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
[    9.500000 <    0.499900 >] gpu-node-7 python3[4242]: x
1717243204.000100 gpu-node-7 python3[4242]: x
";
        assert_eq!(
            formats(paste),
            vec![
                (Format::ShellPrompt, 1, 1),
                (Format::JournalJson, 2, 5),
                (Format::ShellPrompt, 6, 6),
                (Format::JournalVerbose, 7, 13),
                // A with-unit dump that starts with a kernel line reads
                // that line as short-full; both parse it the same way.
                (Format::JournalShortFull, 14, 14),
                (Format::JournalWithUnit, 15, 17),
                (Format::JournalShortMonotonic, 18, 19),
                (Format::JournalShortDelta, 20, 20),
                (Format::JournalShortUnix, 21, 21),
            ]
        );
    }

    #[test]
    fn bare_messages_and_dmesg_are_not_journal_output() {
        // `journalctl -o cat` of a server is the server's own log; dmesg
        // looks like short-monotonic without host and identifier.
        assert_eq!(
            formats(
                "[2026-11-27 09:38:52 TP1] Init torch distributed begin.\nsglang-k26.service: Main process exited, code=killed, status=9/KILL\n"
            ),
            vec![(Format::SglangLog, 1, 2)]
        );
        assert_eq!(
            formats(
                "[ 8712.345678] NVRM: Xid (PCI:0000:1a:00): 79, pid=4242\n[    2.345678] usb 1-1: new high-speed USB device\n"
            ),
            vec![(Format::Dmesg, 1, 2)]
        );
    }

    #[test]
    fn a_hint_reads_the_whole_input_as_one_format() {
        let source = Source::new("t", b"Started x.service.\n[2026-11-27 09:38:52 TP1] hi\n");
        let got: Vec<(Format, u32, u32)> =
            segment_as(SourceId(0), &source, Some(Format::JournalCat))
                .into_iter()
                .map(|s| (s.format, s.first_line, s.last_line))
                .collect();
        assert_eq!(got, vec![(Format::JournalCat, 1, 2)]);
        let empty = Source::new("e", b"");
        assert!(segment_as(SourceId(0), &empty, Some(Format::JournalCat)).is_empty());
    }

    #[test]
    fn unknown_text_is_one_unknown_segment() {
        assert_eq!(formats("hello\nworld\n"), vec![(Format::Unknown, 1, 2)]);
        assert_eq!(formats(""), vec![]);
    }
}
