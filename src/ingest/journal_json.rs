//! `journalctl -o json` and its siblings `json-seq` (0x1E before each record),
//! `json-sse` (`data: ` before each record) and `json-pretty` (one object over
//! several lines), docs/formats/journal.md.
//!
//! JSON modes carry what short modes lack: the writer's unit
//! (`_SYSTEMD_UNIT`), PID 1's `UNIT=` and `_CMDLINE`, in UTC. Messages of
//! processes other than PID 1 go through the server-log parser with that
//! metadata, one message line at a time. Binary journal files and
//! `-o export` dumps reach this parser too: the bundle reader turns them
//! into these JSON lines.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::KernelParser;
use super::Line;
use super::ServerLogParser;
use super::docker_inspect;
use super::journal_fields::{entry_from_fields, outer_of};
use super::journal_time::utc_from_micros;
use super::read::{Out, Read};
use super::server::{OuterRef, Skim};
use crate::model::{Facts, JournalEntry};
use crate::source::{Span, clean_line};

/// A field line of `json-pretty`: tab, quoted field name, ` : `. The spaced
/// colon is systemd's own; other pretty-printers write `"key": `.
pub(super) static PRETTY_FIELD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"^\t"[A-Z0-9_]+" : "#).expect("json-pretty field regex"));

/// A `json-pretty` object still being read: its first line and text so far.
struct Pending {
    span: Span,
    text: String,
    lines: u32,
}

/// Parses one segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut reader = JsonReader::new();
    for line in lines {
        reader.full(line, facts);
    }
    reader.finish(facts)
}

/// Reads a segment line by line (see [`super::reader`]).
pub(super) struct JsonReader {
    server: ServerLogParser,
    kernel: KernelParser,
    pending: Option<Pending>,
    unrecognized: u32,
    /// What each PID's entries read in full so far had: a unit (1), no unit
    /// (2), a command line (4). Owners and command lines come from a PID's
    /// first entries.
    first: HashMap<u32, u8>,
}

impl JsonReader {
    pub(super) fn new() -> JsonReader {
        JsonReader {
            server: ServerLogParser::default(),
            kernel: KernelParser::default(),
            pending: None,
            unrecognized: 0,
            first: HashMap::new(),
        }
    }

    pub(super) fn read(&mut self, line: &Line<'_>, hot: bool, out: &mut Out<'_>) -> Read {
        if !hot {
            if let Some(read) = self.skim(line) {
                return read;
            }
        }
        self.full(line, out.facts);
        Read::Parsed
    }

    /// The prefilter's reading of a record with no anchor, on its raw bytes:
    /// only the fields that decide whether it is an entry, whose it is and
    /// when, are decoded. `None` when it must be read in full: PID 1's
    /// records, a PID's first ones, json-pretty objects, anything unusual
    /// (escapes, non-string values, duplicate fields).
    fn skim(&mut self, line: &Line<'_>) -> Option<Read> {
        if self.pending.is_some() {
            return None;
        }
        let text = strip_record_prefix(line.text);
        if text.is_empty() {
            return Some(Read::Skimmed(None));
        }
        if text == "{" || PRETTY_FIELD.is_match(line.text) {
            return None;
        }
        // `\u` escapes may hide what an anchor would see, or be invalid
        // where the skim does not look.
        static ESCAPE: LazyLock<memchr::memmem::Finder<'static>> =
            LazyLock::new(|| memchr::memmem::Finder::new("\\u"));
        if ESCAPE.find(text.as_bytes()).is_some() {
            return None;
        }
        let fields: SkimFields<'_> = serde_json::from_str(text).ok()?;
        let message = string(fields.message?)?;
        let pid = match fields.pid.or(fields.syslog_pid) {
            Some(raw) => string(raw)?.trim().parse::<u32>().ok(),
            None => None,
        };
        if pid == Some(1) {
            return None;
        }
        let identifier = match fields.identifier.or(fields.comm) {
            Some(raw) => string(raw)?,
            None => Cow::Borrowed("unknown"),
        };
        // A user manager's records (`systemd` under its own PID) are read
        // in full as PID 1's are: its unit and job messages are unit events.
        if identifier == "systemd" && crate::model::is_manager_message(&message) {
            return None;
        }
        let unit = fields
            .unit
            .map(string)
            .map_or(Some(None), |u| u.map(Some))?;
        let cmdline = fields
            .cmdline
            .map(string)
            .map_or(Some(None), |c| c.map(Some))?;
        let transport = fields
            .transport
            .map(string)
            .map_or(Some(None), |t| t.map(Some))?;
        if let Some(pid) = pid {
            let mut bits = if cmdline.is_some() { 4 } else { 0 };
            // A record with a PID is the process's, whatever its identifier
            // says (`JournalEntry::is_kernel` wants no PID): its first one
            // is read in full so that a later owner can claim it.
            bits |= if unit.is_some() { 1 } else { 2 };
            let seen = self.first.entry(pid).or_default();
            if bits & !*seen != 0 {
                *seen |= bits;
                return None;
            }
        }
        let time = match fields.realtime {
            Some(raw) => string(raw)?.trim().parse().ok().and_then(utc_from_micros),
            None => None,
        };
        let kernel =
            (pid.is_none() && identifier == "kernel") || transport.as_deref() == Some("kernel");
        if kernel && self.kernel.busy() {
            return None;
        }
        let outer = OuterRef {
            pid,
            unit: unit.as_deref(),
            time,
        };
        for message_line in message.split('\n') {
            if let Skim::Full = self.server.skim(message_line, outer) {
                return None;
            }
        }
        Some(Read::Skimmed(time))
    }

    pub(super) fn full(&mut self, line: &Line<'_>, facts: &mut Facts) {
        let (server, kernel) = (&mut self.server, &mut self.kernel);
        let text = strip_record_prefix(line.text);
        if let Some(p) = &mut self.pending {
            p.text.push_str(text);
            p.text.push('\n');
            p.lines += 1;
            if text == "}" {
                if let Some(p) = self.pending.take() {
                    if !read_record(&p.text, p.span, server, kernel, facts) {
                        self.unrecognized += read_other(&p, facts);
                    }
                }
            }
            return;
        }
        if text.is_empty() {
            return;
        }
        if text == "{" {
            self.pending = Some(Pending {
                span: line.span,
                text: "{\n".to_owned(),
                lines: 1,
            });
            return;
        }
        // A `json-pretty` object whose `{` line fell outside this segment
        // (a paste cut just below it): read it from its first field.
        if PRETTY_FIELD.is_match(line.text) {
            self.pending = Some(Pending {
                span: line.span,
                text: format!("{{\n{text}\n"),
                lines: 1,
            });
            return;
        }
        if !read_record(text, line.span, server, kernel, facts) {
            self.unrecognized += 1;
        }
    }

    /// Lines not recognised so far (an object still open is not counted).
    pub(super) fn unrecognized(&self) -> u32 {
        self.unrecognized
    }

    /// Closes the segment; returns the number of lines it did not recognise.
    pub(super) fn finish(&mut self, facts: &mut Facts) -> u32 {
        self.kernel.finish(facts);
        // An object cut off by the end of the paste.
        let cut = self.pending.take().map_or(0, |p| read_other(&p, facts));
        self.unrecognized + cut
    }
}

/// A pretty object that is no journal entry: `docker inspect`'s (its
/// State through `jq`, `{{json .State}}`), read by its grammar
/// ([`docker_inspect`]); returns how many of its lines were not read: all of
/// them when it is not Docker's.
fn read_other(p: &Pending, facts: &mut Facts) -> u32 {
    let before = facts.containers.len();
    let mut doc = docker_inspect::Doc::default();
    // A pending object begun at its first field has a `{` put before it.
    let text_lines = p.text.lines().count() as u32;
    let skip = text_lines.saturating_sub(p.lines);
    let mut missed = 0;
    for (i, text) in (0..).zip(p.text.lines()) {
        if i < skip {
            doc.line(text.trim(), p.span, facts);
            continue;
        }
        let span = Span {
            line: p.span.line + i - skip,
            ..p.span
        };
        if !doc.line(text.trim(), span, facts) {
            missed += 1;
        }
    }
    if facts.containers.len() == before {
        p.lines
    } else {
        missed
    }
}

/// The fields the prefilter reads, undecoded. A field that occurs twice
/// fails the whole record, which is then read in full.
#[derive(Deserialize)]
struct SkimFields<'a> {
    #[serde(rename = "MESSAGE", borrow, default, deserialize_with = "raw")]
    message: Option<&'a RawValue>,
    #[serde(
        rename = "__REALTIME_TIMESTAMP",
        borrow,
        default,
        deserialize_with = "raw"
    )]
    realtime: Option<&'a RawValue>,
    #[serde(rename = "_PID", borrow, default, deserialize_with = "raw")]
    pid: Option<&'a RawValue>,
    #[serde(rename = "SYSLOG_PID", borrow, default, deserialize_with = "raw")]
    syslog_pid: Option<&'a RawValue>,
    #[serde(
        rename = "SYSLOG_IDENTIFIER",
        borrow,
        default,
        deserialize_with = "raw"
    )]
    identifier: Option<&'a RawValue>,
    #[serde(rename = "_COMM", borrow, default, deserialize_with = "raw")]
    comm: Option<&'a RawValue>,
    #[serde(rename = "_SYSTEMD_UNIT", borrow, default, deserialize_with = "raw")]
    unit: Option<&'a RawValue>,
    #[serde(rename = "_CMDLINE", borrow, default, deserialize_with = "raw")]
    cmdline: Option<&'a RawValue>,
    #[serde(rename = "_TRANSPORT", borrow, default, deserialize_with = "raw")]
    transport: Option<&'a RawValue>,
}

/// A present field, even `null`, as its raw JSON.
fn raw<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue as Deserialize>::deserialize(d).map(Some)
}

/// A raw JSON string's text; `None` for any other value.
fn string(raw: &RawValue) -> Option<Cow<'_, str>> {
    let json = raw.get();
    let inner = json.strip_prefix('"')?.strip_suffix('"')?;
    if memchr::memchr(b'\\', inner.as_bytes()).is_none() {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(json).ok().map(Cow::Owned)
}

/// Strips the `json-seq` record separator and the `json-sse` field name.
fn strip_record_prefix(text: &str) -> &str {
    let text = text.trim_start_matches('\u{1e}').trim();
    text.strip_prefix("data: ").unwrap_or(text).trim()
}

/// Reads one JSON object; false when it is not a journal entry.
fn read_record(
    text: &str,
    span: Span,
    server: &mut ServerLogParser,
    kernel: &mut KernelParser,
    facts: &mut Facts,
) -> bool {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let Some(entry) = entry(&fields, span) else {
        return false;
    };
    // The stream kept the record's line as a message when an anchor was in
    // its bytes: the rules match the entry's message as a person reads it,
    // not the record with its other fields and JSON's escapes. A new string,
    // not `clone_from`: that would keep the record's whole allocation (a
    // journal record is ~1 KiB, its message a tenth of that) for every
    // message until the report is written.
    if let Some(m) = facts.messages.last_mut().filter(|m| m.span == span) {
        m.text = entry.message.clone();
    }
    if let Some(outer) = outer_of(&entry) {
        for message_line in entry.message.split('\n') {
            server.feed(message_line, span, &outer, facts);
        }
    }
    let transport = fields.get("_TRANSPORT").and_then(Value::as_str);
    if entry.is_kernel() || transport == Some("kernel") {
        for message_line in entry.message.split('\n') {
            kernel.feed(message_line, span, entry.time, facts);
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
    let time = field("__REALTIME_TIMESTAMP")
        .and_then(|t| t.trim().parse().ok())
        .and_then(utc_from_micros);
    Some(entry_from_fields(field, message, time, span))
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

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;
    use crate::model::{ServerEvent, ServerEventKind, Timestamp};

    fn run(text: &str) -> (Facts, u32) {
        let lines = Line::numbered(text);
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
    fn json_pretty_as_journalctl_252_prints_it_and_a_paste_cut_below_its_brace() {
        let (facts, unrecognized) = run("{
\t\"_PID\" : \"4242\",
\t\"__REALTIME_TIMESTAMP\" : \"1717243204000100\",
\t\"_SYSTEMD_UNIT\" : \"sglang.service\",
\t\"MESSAGE\" : \"Traceback (most recent call last):\\n  File \\\"x.py\\\", line 1, in <module>\\nRuntimeError: boom\",
\t\"SYSLOG_IDENTIFIER\" : \"python3\",
\t\"_HOSTNAME\" : \"gpu-node-7\"
}
\t\"_SYSTEMD_UNIT\" : \"ssh.service\",
\t\"_PID\" : \"900\",
\t\"MESSAGE\" : \"Accepted publickey for root\"
}");
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
                    "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nRuntimeError: boom"
                ),
                (
                    9,
                    "unknown",
                    Some(900),
                    Some("ssh.service"),
                    None,
                    "Accepted publickey for root"
                ),
            ]
        );
        let exceptions = facts
            .server_events
            .iter()
            .filter(|e| matches!(e.kind, ServerEventKind::Exception { .. }))
            .count();
        assert_eq!(exceptions, 1);
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
