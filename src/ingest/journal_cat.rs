//! `journalctl -o cat` (docs/formats/journal.md): each entry's MESSAGE and nothing
//! else — no time, host, identifier or PID, no boot markers. Read only when
//! the user says so (`--format-hint journal-cat`): the lines are exactly what
//! the program wrote, so detection cannot tell them from the program's own
//! log or from any text, and a server's lines are already read by its own
//! parser without the hint.
//!
//! What the hint adds: every line counts as a journal entry, and the lines
//! in systemd's unit-lifecycle grammar (`sglang.service: Main process
//! exited, …`, `Started sglang.service - …`), which `journalctl -u UNIT`
//! includes, are taken as PID 1's, so the unit's lifecycle is known. Every
//! other line goes through the server-log parser.

use super::journal_fields::unit_of_pid1_message;
use super::server::Outer;
use super::{Line, ServerLogParser};
use crate::model::{Facts, JournalEntry};

/// Parses one segment; returns the number of lines it did not recognise
/// (none: in `cat` output every line is a message).
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut server = ServerLogParser::default();
    let outer = Outer::default();
    for line in lines {
        let text = line.text;
        if text.trim().is_empty() {
            // A blank message, or a blank line of a multi-line one: `cat`
            // keeps no boundary between the two.
            server.feed(text, line.span, &outer, facts);
            continue;
        }
        let unit = unit_of_pid1_message(text);
        let mut entry = JournalEntry {
            time: None,
            host: None,
            identifier: "unknown".to_owned(),
            pid: None,
            unit: None,
            cmdline: None,
            message: text.to_owned(),
            span: line.span,
        };
        if unit.is_some() {
            // Inferred from the grammar, as the doc comment says: only the
            // service manager words its messages like this.
            entry.identifier = "systemd".to_owned();
            entry.pid = Some(1);
            entry.unit = unit;
        } else {
            server.feed(text, line.span, &outer, facts);
        }
        facts.journal.push(entry);
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServerEventKind;

    #[test]
    fn messages_server_events_and_pid1_lifecycle() {
        // `journalctl -u sglang-k26 -o cat` (systemd 252).
        let text = "\
Started sglang-k26.service - SGLang Kimi K2 server.
[2026-11-27 09:38:52 TP1] Scheduler hit an exception: Traceback (most recent call last):
  File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process
RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875

[2026-11-27 09:38:52] Received sigquit from a child process. It usually means the child failed.
sglang-k26.service: Main process exited, code=killed, status=9/KILL
sglang-k26.service: Failed with result 'signal'.
\u{1b}[1;36mcolour\u{1b}[0m done";
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        assert_eq!(parse(&lines, &mut facts), 0);
        let entries: Vec<(u32, &str, Option<u32>, Option<&str>)> = facts
            .journal
            .iter()
            .map(|e| (e.span.line, e.identifier.as_str(), e.pid, e.unit.as_deref()))
            .collect();
        assert_eq!(
            entries,
            vec![
                (1, "systemd", Some(1), Some("sglang-k26.service")),
                (2, "unknown", None, None),
                (3, "unknown", None, None),
                (4, "unknown", None, None),
                (6, "unknown", None, None),
                (7, "systemd", Some(1), Some("sglang-k26.service")),
                (8, "systemd", Some(1), Some("sglang-k26.service")),
                (9, "unknown", None, None),
            ]
        );
        assert!(
            facts
                .journal
                .iter()
                .all(|e| e.time.is_none() && e.host.is_none())
        );
        let kinds: Vec<(u32, bool)> = facts
            .server_events
            .iter()
            .map(|e| {
                (
                    e.span.line,
                    matches!(e.kind, ServerEventKind::MemoryImbalance(_)),
                )
            })
            .collect();
        assert_eq!(kinds, vec![(2, false), (4, true), (6, false)]);
    }
}
