//! `journalctl -o verbose` (docs/formats/journal.md): a header line with the full
//! timestamp and the cursor, then every field of the entry on its own line
//! as `    NAME=value`; continuation lines of a multi-line value are indented
//! to the column after `=`. Boot markers and `-x` catalog lines sit between
//! entries.
//!
//! Verbose output has the fields of `-o json` in readable form, so an entry
//! is built the same way ([`entry_from_fields`]); each line of its message
//! goes to the server-log parser with the span of the line it is on.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::journal_fields::{entry_from_fields, outer_of};
use super::journal_marks::{Aside, aside};
use super::journal_time::split_full;
use super::{Line, ServerLogParser};
use crate::model::{Facts, Timestamp};
use crate::source::Span;

/// The bracketed cursor after the header's timestamp.
static CURSOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[s=[0-9a-f]+;i=[0-9a-f]+;b=[0-9a-f]+;m=[0-9a-f]+;t=[0-9a-f]+;x=[0-9a-f]+\]$")
        .expect("cursor regex")
});

/// `    NAME=value`: exactly four spaces, then a journal field name.
static FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^ {4}(?P<name>[A-Z0-9_]+)=(?P<value>.*)$").expect("verbose field regex")
});

/// `Sat 2024-06-01 12:00:10.000000 UTC [s=…;i=…;b=…;m=…;t=…;x=…]`: the
/// entry's time, or `None` when the line is not a header.
pub(super) fn header_time(text: &str) -> Option<Timestamp> {
    let (time, rest) = split_full(text)?;
    CURSOR.is_match(rest).then_some(time)
}

/// One entry being read.
struct Open {
    header: Span,
    time: Timestamp,
    fields: BTreeMap<String, String>,
    /// The lines of `MESSAGE`, each with its own span.
    message: Vec<(Span, String)>,
    /// The field whose continuation lines may follow, and the column its
    /// value starts at.
    last: Option<(String, usize)>,
}

/// Parses one segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut server = ServerLogParser::default();
    let mut open: Option<Open> = None;
    let mut unrecognized = 0;
    for line in lines {
        let text = line.text;
        if let Some(time) = header_time(text) {
            finish(open.take(), &mut server, facts);
            open = Some(Open {
                header: line.span,
                time,
                fields: BTreeMap::new(),
                message: Vec::new(),
                last: None,
            });
            continue;
        }
        if let Some(o) = &mut open {
            if let Some(c) = FIELD.captures(text) {
                let (name, value) = (&c["name"], &c["value"]);
                // A field that occurs twice keeps its first value, as the
                // JSON reader does.
                if !o.fields.contains_key(name) {
                    o.fields.insert(name.to_owned(), value.to_owned());
                    if name == "MESSAGE" {
                        o.message.push((line.span, value.to_owned()));
                    }
                    o.last = Some((name.to_owned(), 4 + name.len() + 1));
                } else {
                    o.last = None;
                }
                continue;
            }
            if let Some((name, column)) = &o.last {
                let indent = text.len() - text.trim_start_matches(' ').len();
                if text.trim().is_empty() || indent >= *column {
                    // Spaces are one byte each, so this cut is on a char boundary.
                    let rest = text.get(*column..).unwrap_or("");
                    if let Some(value) = o.fields.get_mut(name) {
                        value.push('\n');
                        value.push_str(rest);
                    }
                    if name == "MESSAGE" {
                        o.message.push((line.span, rest.to_owned()));
                    }
                    continue;
                }
            }
        }
        match aside(text) {
            // The catalog block of `-x` follows the entry it explains.
            Some(Aside::Catalog) => {
                if let Some(o) = &mut open {
                    o.last = None;
                }
                continue;
            }
            Some(Aside::Marker | Aside::Notice) => {
                finish(open.take(), &mut server, facts);
                continue;
            }
            None if text.trim().is_empty() => continue,
            None => {}
        }
        if let Some(o) = &mut open {
            o.last = None;
        }
        unrecognized += 1;
    }
    finish(open, &mut server, facts);
    unrecognized
}

/// Turns a fully read entry into a fact and feeds its message, line by
/// line, to the server parser.
fn finish(open: Option<Open>, server: &mut ServerLogParser, facts: &mut Facts) {
    let Some(mut o) = open else { return };
    // Blank lines after the last value belong to the paste, not to it.
    while o.message.len() > 1 && o.message.last().is_some_and(|(_, l)| l.trim().is_empty()) {
        o.message.pop();
    }
    let message = o
        .message
        .iter()
        .map(|(_, l)| l.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let span = o.message.first().map_or(o.header, |(span, _)| *span);
    let fields = &o.fields;
    let entry = entry_from_fields(
        |name| fields.get(name).cloned(),
        message,
        Some(o.time),
        span,
    );
    if let Some(outer) = outer_of(&entry) {
        for (span, text) in &o.message {
            server.feed(text, *span, &outer, facts);
        }
    }
    facts.journal.push(entry);
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;
    use crate::model::ServerEventKind;

    fn run(text: &str) -> (Facts, u32) {
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        (facts, unrecognized)
    }

    type Row<'a> = (
        u32,
        Option<&'a str>,
        &'a str,
        Option<u32>,
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
                    e.host.as_deref(),
                    e.identifier.as_str(),
                    e.pid,
                    e.unit.as_deref(),
                    e.message.as_str(),
                )
            })
            .collect()
    }

    /// journalctl 252 `-o verbose --utc -x`, fields in the journal's order.
    const VERBOSE: &str = "\
Sat 2024-06-01 12:00:01.000000 UTC [s=32635a210636400eb68eea2dbfeff586;i=1;b=a1b2c3d4e5f60718293a4b5c6d7e8f90;m=7270e0;t=619d2d6fd1240;x=fbfc9567c1c7f8c1]
    _BOOT_ID=a1b2c3d4e5f60718293a4b5c6d7e8f90
    _HOSTNAME=gpu-node-7
    _PID=1
    SYSLOG_IDENTIFIER=systemd
    _SYSTEMD_UNIT=init.scope
    UNIT=sglang.service
    MESSAGE_ID=39f53479d3a045ac8e11786248231fbf
    MESSAGE=Started sglang.service - SGLang inference server.
░░ Subject: A start job for unit sglang.service has finished successfully
░░ Defined-By: systemd
░░ 
░░ The job identifier is 1234.
Sat 2024-06-01 12:00:04.000100 UTC [s=32635a210636400eb68eea2dbfeff586;i=4;b=a1b2c3d4e5f60718293a4b5c6d7e8f90;m=90f560;t=619d2d72ad964;x=7ba6ab49cc5fd456]
    _BOOT_ID=a1b2c3d4e5f60718293a4b5c6d7e8f90
    _HOSTNAME=gpu-node-7
    _TRANSPORT=journal
    _PID=4242
    SYSLOG_IDENTIFIER=python3
    MESSAGE=Traceback (most recent call last):
              File \"x.py\", line 1, in <module>
            RuntimeError: boom
    _COMM=python3
    _CMDLINE=/opt/sglang/venv/bin/python3 -m sglang.launch_server --tp 2
    _SYSTEMD_UNIT=sglang.service
    PRIORITY=3
Sat 2024-06-01 12:00:04.500000 UTC [s=32635a210636400eb68eea2dbfeff586;i=5;b=a1b2c3d4e5f60718293a4b5c6d7e8f90;m=927c00;t=619d2d7327a20;x=4a15feb0d94c3d39]
    _PID=4242
    SYSLOG_IDENTIFIER=python3
    _SYSTEMD_UNIT=sglang.service
    MESSAGE=[22B blob data]
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
Sat 2024-06-01 17:31:00.000000 IST [s=32635a210636400eb68eea2dbfeff586;i=8;b=0f1e2d3c4b5a69788796a5b4c3d2e1f0;m=200b20;t=619d2da815700;x=b911f401e576f24f]
    _HOSTNAME=gpu-node-7
    _PID=900
    _COMM=sshd
    _SYSTEMD_UNIT=ssh.service
    MESSAGE=first
            
            third";

    #[test]
    fn reference_entries_with_catalog_blob_and_multi_line_values() {
        let (facts, unrecognized) = run(VERBOSE);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&facts),
            vec![
                (
                    9,
                    Some("gpu-node-7"),
                    "systemd",
                    Some(1),
                    Some("sglang.service"),
                    "Started sglang.service - SGLang inference server."
                ),
                (
                    20,
                    Some("gpu-node-7"),
                    "python3",
                    Some(4242),
                    Some("sglang.service"),
                    "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nRuntimeError: boom"
                ),
                (
                    31,
                    None,
                    "python3",
                    Some(4242),
                    Some("sglang.service"),
                    "[22B blob data]"
                ),
                (
                    38,
                    Some("gpu-node-7"),
                    "sshd",
                    Some(900),
                    Some("ssh.service"),
                    "first\n\nthird"
                ),
            ]
        );
        assert_eq!(
            facts.journal[1].cmdline.as_deref(),
            Some("/opt/sglang/venv/bin/python3 -m sglang.launch_server --tp 2")
        );
        let t = facts.journal[1].time.expect("time");
        assert_eq!(
            t.local,
            NaiveDate::from_ymd_opt(2024, 6, 1)
                .and_then(|d| d.and_hms_micro_opt(12, 0, 4, 100))
                .expect("date")
        );
        assert_eq!((t.offset_secs, t.year_known), (Some(0), true));
        // IST names three zones: the year is known, the offset is not.
        let t = facts.journal[3].time.expect("time");
        assert_eq!((t.offset_secs, t.year_known), (None, true));
        // The exception is cited on its own line, with the PID and unit of
        // the entry even though `_SYSTEMD_UNIT` comes after `MESSAGE`.
        let exceptions: Vec<(u32, Option<u32>, Option<&str>)> = facts
            .server_events
            .iter()
            .filter(|e| matches!(e.kind, ServerEventKind::Exception { .. }))
            .map(|e| (e.span.line, e.pid, e.unit.as_deref()))
            .collect();
        assert_eq!(exceptions, vec![(22, Some(4242), Some("sglang.service"))]);
    }

    #[test]
    fn header_near_misses_and_garbage() {
        assert!(
            header_time("Sat 2024-06-01 12:00:01.000000 UTC [s=1;i=1;b=1;m=1;t=1;x=1]").is_some()
        );
        assert!(
            header_time("Sat 2024-06-01 12:00:01.000000 UTC gpu-node-7 systemd[1]: x").is_none()
        );
        assert!(header_time("Sat 2024-06-01 12:00:01.000000 UTC [s=1;i=1]").is_none());
        let (facts, unrecognized) = run("\
    MESSAGE=before any header
Sat 2024-06-01 12:00:01.000000 UTC [s=1;i=1;b=1;m=1;t=1;x=1]
    _PID=7
     FIVE=spaces is a continuation of nothing
garbage
  two spaces
    lower=case
\u{1b}\u{0}\u{ff}");
        assert_eq!(unrecognized, 6);
        // A header without MESSAGE is still an entry, cited at its header.
        assert_eq!(rows(&facts), vec![(2, None, "unknown", Some(7), None, "")]);
    }
}
