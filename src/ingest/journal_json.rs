//! `journalctl -o json` and its siblings `json-seq` (0x1E before each record),
//! `json-sse` (`data: ` before each record) and `json-pretty` (one object over
//! several lines), formats.md §4.6.
//!
//! JSON modes carry what short modes lack: the writer's unit
//! (`_SYSTEMD_UNIT`), PID 1's `UNIT=` and `_CMDLINE`, in UTC. Messages of
//! processes other than PID 1 go through the server-log parser with that
//! metadata, one message line at a time.

use chrono::DateTime;
use serde_json::{Map, Value};

use super::Line;
use super::ServerLogParser;
use super::journal_short::unit_of_pid1_message;
use super::server::Outer;
use crate::model::{Facts, JournalEntry, Timestamp};
use crate::source::{Span, clean_line};

/// A `json-pretty` object still being read: its first line and text so far.
struct Pending {
    span: Span,
    text: String,
    lines: u32,
}

/// Parses one segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut server = ServerLogParser::default();
    let mut pending: Option<Pending> = None;
    let mut unrecognized = 0;
    for line in lines {
        let text = strip_record_prefix(line.text);
        if let Some(p) = &mut pending {
            p.text.push_str(text);
            p.text.push('\n');
            p.lines += 1;
            if text == "}" {
                if let Some(p) = pending.take() {
                    if !read_record(&p.text, p.span, &mut server, facts) {
                        unrecognized += p.lines;
                    }
                }
            }
            continue;
        }
        if text.is_empty() {
            continue;
        }
        if text == "{" {
            pending = Some(Pending {
                span: line.span,
                text: "{\n".to_owned(),
                lines: 1,
            });
            continue;
        }
        if !read_record(text, line.span, &mut server, facts) {
            unrecognized += 1;
        }
    }
    // An object cut off by the end of the paste.
    unrecognized + pending.map_or(0, |p| p.lines)
}

/// Strips the `json-seq` record separator and the `json-sse` field name.
fn strip_record_prefix(text: &str) -> &str {
    let text = text.trim_start_matches('\u{1e}').trim();
    text.strip_prefix("data: ").unwrap_or(text).trim()
}

/// Reads one JSON object; false when it is not a journal entry.
fn read_record(text: &str, span: Span, server: &mut ServerLogParser, facts: &mut Facts) -> bool {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let Some(entry) = entry(&fields, span) else {
        return false;
    };
    if entry.pid != Some(1) {
        let outer = Outer {
            pid: entry.pid,
            unit: entry.unit.clone(),
            time: entry.time,
        };
        for message_line in entry.message.split('\n') {
            server.feed(message_line, span, &outer, facts);
        }
    }
    facts.journal.push(entry);
    true
}

fn entry(fields: &Map<String, Value>, span: Span) -> Option<JournalEntry> {
    let field = |name: &str| fields.get(name).and_then(value_text);
    // `null` means journalctl left out a value over 4096 bytes (no `-a`):
    // the entry exists, its text was not captured.
    let message = match fields.get("MESSAGE")? {
        Value::Null => String::new(),
        value => clean_message(&value_text(value).unwrap_or_default()),
    };
    let pid = field("_PID")
        .or_else(|| field("SYSLOG_PID"))
        .and_then(|p| p.trim().parse::<u32>().ok());
    let unit = if pid == Some(1) {
        field("UNIT").or_else(|| unit_of_pid1_message(&message))
    } else {
        field("_SYSTEMD_UNIT")
    };
    Some(JournalEntry {
        time: field("__REALTIME_TIMESTAMP").and_then(|t| utc_from_micros(&t)),
        host: field("_HOSTNAME"),
        identifier: field("SYSLOG_IDENTIFIER")
            .or_else(|| field("_COMM"))
            .unwrap_or_else(|| "unknown".to_owned()),
        pid,
        unit,
        cmdline: field("_CMDLINE"),
        message,
        span,
    })
}

/// A field's text. journald writes every value as a string, except values
/// with control characters or invalid UTF-8 (an array of byte values) and
/// fields that occur several times in one entry (an array of those).
fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let bytes: Option<Vec<u8>> = items
                .iter()
                .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect();
            match bytes {
                Some(bytes) if !bytes.is_empty() => {
                    Some(String::from_utf8_lossy(&bytes).into_owned())
                }
                _ => items.first().and_then(value_text),
            }
        }
        Value::Number(n) => Some(n.to_string()),
        Value::Null | Value::Bool(_) | Value::Object(_) => None,
    }
}

/// Byte-array messages keep the ANSI colours and `\r` the short modes hide;
/// clean each line the way sources are cleaned.
fn clean_message(message: &str) -> String {
    message
        .split('\n')
        .map(|l| clean_line(l).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `__REALTIME_TIMESTAMP`: microseconds since the epoch, in UTC.
fn utc_from_micros(micros: &str) -> Option<Timestamp> {
    let micros: i64 = micros.trim().parse().ok()?;
    let utc = DateTime::from_timestamp_micros(micros)?;
    Some(Timestamp {
        local: utc.naive_utc(),
        offset_secs: Some(0),
        year_known: true,
    })
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;
    use crate::model::{ServerEvent, ServerEventKind};
    use crate::source::SourceId;

    fn run(text: &str) -> (Facts, u32) {
        let lines: Vec<Line<'_>> = text
            .lines()
            .enumerate()
            .map(|(i, t)| Line {
                span: Span {
                    source: SourceId(0),
                    line: i as u32 + 1,
                },
                text: t,
            })
            .collect();
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        (facts, unrecognized)
    }

    type Row<'a> = (
        u32,
        &'a str,
        Option<u32>,
        Option<&'a str>,
        Option<&'a str>,
        &'a str,
    );

    fn rows(facts: &Facts) -> Vec<Row<'_>> {
        facts
            .journal
            .iter()
            .map(|e| {
                (
                    e.span.line,
                    e.identifier.as_str(),
                    e.pid,
                    e.unit.as_deref(),
                    e.host.as_deref(),
                    e.message.as_str(),
                )
            })
            .collect()
    }

    #[test]
    fn reference_records_including_a_byte_array_message() {
        let (facts, unrecognized) = run(
            r#"{"__CURSOR":"s=56be;i=2","__REALTIME_TIMESTAMP":"1717243211000000","__MONOTONIC_TIMESTAMP":"21000000","PRIORITY":"6","SYSLOG_IDENTIFIER":"python3","_PID":"4242","_COMM":"python3","_CMDLINE":"/opt/sglang/venv/bin/python3 -m sglang.launch_server --model-path /models/llama --tp 2","_SYSTEMD_UNIT":"sglang.service","_TRANSPORT":"stdout","_HOSTNAME":"gpu-node-7","MESSAGE":"[2024-06-01 12:00:11 TP1] Init torch distributed begin."}
{"_COMM":"python3","_PID":"5151","_SYSTEMD_UNIT":"vllm.service","SYSLOG_IDENTIFIER":"vllm","PRIORITY":"6","__REALTIME_TIMESTAMP":"1717243212000000","_HOSTNAME":"gpu-node-7","MESSAGE":[27,91,49,59,51,54,109,40,86,108,108,109,87,111,114,107,101,114,32,114,97,110,107,61,49,32,112,105,100,61,53,49,53,51,41,27,91,48,59,48,109,32,73,78,70,79]}"#,
        );
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&facts),
            vec![
                (
                    1,
                    "python3",
                    Some(4242),
                    Some("sglang.service"),
                    Some("gpu-node-7"),
                    "[2024-06-01 12:00:11 TP1] Init torch distributed begin."
                ),
                (
                    2,
                    "vllm",
                    Some(5151),
                    Some("vllm.service"),
                    Some("gpu-node-7"),
                    "(VllmWorker rank=1 pid=5153) INFO"
                ),
            ]
        );
        let e = &facts.journal[0];
        assert_eq!(
            e.cmdline.as_deref(),
            Some(
                "/opt/sglang/venv/bin/python3 -m sglang.launch_server --model-path /models/llama --tp 2"
            )
        );
        assert_eq!(
            e.time,
            Some(Timestamp {
                local: NaiveDate::from_ymd_opt(2024, 6, 1)
                    .and_then(|d| d.and_hms_opt(12, 0, 11))
                    .expect("date"),
                offset_secs: Some(0),
                year_known: true,
            })
        );
    }

    #[test]
    fn pid1_unit_field_arrays_nulls_and_fallbacks() {
        let (facts, unrecognized) = run(
            r#"{"_PID":"1","SYSLOG_IDENTIFIER":"systemd","UNIT":"sglang.service","_SYSTEMD_UNIT":"init.scope","MESSAGE":"sglang.service: Failed with result 'signal'."}
{"_PID":"1","SYSLOG_IDENTIFIER":"systemd","_SYSTEMD_UNIT":"init.scope","MESSAGE":"Started sglang.service - SGLang inference server."}
{"_PID":"1","SYSLOG_IDENTIFIER":"systemd","_SYSTEMD_UNIT":"init.scope","MESSAGE":"Reloading."}
{"_COMM":"sglang::schedul","SYSLOG_PID":"4318","_SYSTEMD_UNIT":["a.service","b.service"],"MESSAGE":["first","second"]}
{"_PID":null,"MESSAGE":null,"_HOSTNAME":[[104,111,115,116]]}
{"MESSAGE":"a\r\nb\u001b[0m\r"}"#,
        );
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&facts),
            vec![
                (
                    1,
                    "systemd",
                    Some(1),
                    Some("sglang.service"),
                    None,
                    "sglang.service: Failed with result 'signal'."
                ),
                (
                    2,
                    "systemd",
                    Some(1),
                    Some("sglang.service"),
                    None,
                    "Started sglang.service - SGLang inference server."
                ),
                (3, "systemd", Some(1), None, None, "Reloading."),
                (
                    4,
                    "sglang::schedul",
                    Some(4318),
                    Some("a.service"),
                    None,
                    "first"
                ),
                (5, "unknown", None, None, Some("host"), ""),
                (6, "unknown", None, None, None, "a\nb"),
            ]
        );
        assert_eq!(facts.journal[0].time, None);
    }

    #[test]
    fn seq_sse_and_pretty_framings() {
        let (facts, unrecognized) = run("\u{1e}{\"_PID\":\"7\",\"MESSAGE\":\"seq\"}
data: {\"_PID\":\"8\",\"MESSAGE\":\"sse\"}

{
\t\"_PID\" : \"9\",
\t\"MESSAGE\" : \"pretty\"
}
{
\t\"_PID\" : \"10\"");
        // The cut-off pretty object at the end is two unrecognised lines.
        assert_eq!(unrecognized, 2);
        let got: Vec<(u32, Option<u32>, &str)> = facts
            .journal
            .iter()
            .map(|e| (e.span.line, e.pid, e.message.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, Some(7), "seq"),
                (2, Some(8), "sse"),
                (4, Some(9), "pretty")
            ]
        );
    }

    #[test]
    fn sglang_traceback_inside_json_messages_gets_pid_and_unit() {
        let record = |ts: &str, msg: &str| {
            format!(
                r#"{{"__REALTIME_TIMESTAMP":"{ts}","_PID":"20629","SYSLOG_IDENTIFIER":"python3","_SYSTEMD_UNIT":"sglang-k26.service","MESSAGE":{msg}}}"#
            )
        };
        let text = [
            record(
                "1795772332000000",
                r#""[2026-11-27 09:38:52 TP1] Scheduler hit an exception: Traceback (most recent call last):""#,
            ),
            record(
                "1795772332000001",
                r#""  File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process\n    raise RuntimeError(""#,
            ),
            record(
                "1795772332000002",
                r#""RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875""#,
            ),
            r#"{"_PID":"1","UNIT":"sglang-k26.service","MESSAGE":"RuntimeError: not a server line"}"#.to_owned(),
        ]
        .join("\n");
        let (facts, unrecognized) = run(&text);
        assert_eq!(unrecognized, 0);
        let imbalance: Vec<&ServerEvent> = facts
            .server_events
            .iter()
            .filter(|e| matches!(e.kind, ServerEventKind::MemoryImbalance(_)))
            .collect();
        assert_eq!(imbalance.len(), 1);
        let e = imbalance[0];
        assert_eq!(e.span.line, 3);
        assert_eq!(e.rank.and_then(|r| r.tp), Some(1));
        assert_eq!(e.pid, Some(20629));
        assert_eq!(e.unit.as_deref(), Some("sglang-k26.service"));
        assert_eq!(facts.server_events.len(), 2);
    }

    #[test]
    fn garbage_is_counted_and_never_panics() {
        let (facts, unrecognized) = run("{\"_PID\":\"1\"}
not json at all
{\"MESSAGE\":
[1,2,3]
\"MESSAGE\"
{\"MESSAGE\":[300,-1,\"x\"],\"_PID\":\"-5\",\"__REALTIME_TIMESTAMP\":\"99999999999999999999\"}
\u{1e}\u{0}\u{ff}");
        assert_eq!(unrecognized, 6);
        assert_eq!(rows(&facts), vec![(6, "unknown", None, None, None, "300")]);
    }
}
