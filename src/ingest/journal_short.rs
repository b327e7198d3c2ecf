//! `journalctl -o short`, `short-precise`, `short-iso` and `short-iso-precise`
//! (formats.md §4.2, §4.3, §4.8): one entry per line as
//! `timestamp host ident[pid]: message`, the marker and notice lines
//! journalctl prints around entries, and indented continuation lines of
//! multi-line messages.
//!
//! Also owns the PID 1 unit attribution (§4.9) that the JSON parser shares:
//! short modes carry no `UNIT=` field, so the unit of systemd's own lines is
//! read from the message. Every other message goes through the server-log
//! parser, so SGLang output captured by journald becomes server events.

use std::sync::LazyLock;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use regex::Regex;

use super::Line;
use super::ServerLogParser;
use super::server::Outer;
use crate::model::{Facts, JournalEntry, Timestamp};
use crate::source::Span;

/// `Nov 27 09:38:40` / `Nov 27 09:38:40.123456`. journalctl pads the day
/// with `0`; syslog files pad it with a space, so accept both.
static SHORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^
        (?P<mon>[A-Z][a-z]{2})\x20(?P<day>[\x200-3]\d)\x20(?P<hms>\d\d:\d\d:\d\d)
        (?:\.(?P<frac>\d{1,9}))?
        \x20(?P<rest>.*)$",
    )
    .expect("short timestamp regex")
});

/// `2026-11-27T09:38:40+0000` / `2026-11-27T09:38:40.123456+0800`.
static ISO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^
        (?P<date>\d{4}-\d\d-\d\d)T(?P<hms>\d\d:\d\d:\d\d)
        (?:\.(?P<frac>\d{1,9}))?
        (?P<sign>[+-])(?P<oh>\d\d):?(?P<om>\d\d)
        \x20(?P<rest>.*)$",
    )
    .expect("iso timestamp regex")
});

static MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^-- (?:Boot [0-9a-f]{32}|Reboot|No entries|(?:Logs begin|Journal begins) at .*) --$",
    )
    .expect("journal marker regex")
});

/// journalctl's own notices (stderr, often pasted along), and systemctl
/// status's, which follow the journal lines it prints. The first `Hint:` is
/// followed by indented lines of its own.
const NOTICES: [&str; 7] = [
    "No journal files were found.",
    "No journal files were opened due to insufficient permissions.",
    "Warning: some journal files were not opened due to insufficient permissions.",
    "Warning: Journal has been rotated since unit was started",
    "Notice: journal has been rotated since unit was started",
    "Hint: Some lines were ellipsized, use -l to show in full.",
    "Hint: You are currently not seeing messages from other users and the system.",
];

const UNIT_TYPES: &str = "service|socket|device|mount|automount|swap|target|path|timer|slice|scope";

/// `sglang.service: Main process exited, …` and the other unit-prefixed
/// messages of §4.9.
static UNIT_PREFIXED: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(r"^(?P<unit>[A-Za-z0-9:_.@\\-]+\.(?:{UNIT_TYPES})): ");
    Regex::new(&pattern).expect("unit-prefixed regex")
});

/// Job messages in the 252+ combined form (`Started sglang.service - SGLang.`)
/// and for units without a description (`Started foo.service.`). The 247 form
/// names only the description, which is not a unit name: no match, on purpose.
static JOB: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(
        r"(?x)^
        (?:Starting|Started|Stopping|Stopped|Reloading|Reloaded|Failed\x20to\x20start
          |Failed\x20to\x20stop|Timed\x20out\x20starting|Timed\x20out\x20stopping
          |Dependency\x20failed\x20for|Assertion\x20failed\x20for)
        \x20(?P<unit>[A-Za-z0-9:_.@\\-]+\.(?:{UNIT_TYPES}))
        (?:\x20-\x20.*|\x20with\x20error\.|\.\.\.|\.)$"
    );
    Regex::new(&pattern).expect("job message regex")
});

/// What an indented line after the previous one belongs to.
enum Continues {
    Nothing,
    /// Entry `index` in `facts.journal`, whose message starts at column
    /// `column`; `outer` is set when its lines go to the server parser.
    Entry {
        index: usize,
        column: usize,
        outer: Option<Outer>,
    },
    /// The indented tail of journalctl's `Hint:` notice.
    Notice,
}

/// Parses one segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut server = ServerLogParser::default();
    let mut continues = Continues::Nothing;
    let mut unrecognized = 0;
    for line in lines {
        let text = line.text;
        if text.trim().is_empty() {
            // An empty line inside a multi-line message is printed as bare
            // indentation, which pastes often trim: keep the entry open.
            continue;
        }
        if let Some(entry) = parse_entry(text, line.span) {
            let column = text[..text.len() - entry.message.len()].chars().count();
            let outer = (!entry.is_pid1()).then(|| Outer {
                pid: entry.pid,
                unit: entry.unit.clone(),
                time: entry.time,
            });
            if let Some(outer) = &outer {
                server.feed(&entry.message, line.span, outer, facts);
            }
            facts.journal.push(entry);
            continues = Continues::Entry {
                index: facts.journal.len() - 1,
                column,
                outer,
            };
            continue;
        }
        if MARKER.is_match(text) {
            continues = Continues::Nothing;
            continue;
        }
        if NOTICES.iter().any(|n| text.starts_with(n)) {
            continues = Continues::Notice;
            continue;
        }
        if text.starts_with([' ', '\t']) {
            match &continues {
                Continues::Entry {
                    index,
                    column,
                    outer,
                } => {
                    let indent = text.len() - text.trim_start_matches(' ').len();
                    // Spaces are one byte each, so this cut is on a char boundary.
                    let rest = &text[indent.min(*column)..];
                    if let Some(entry) = facts.journal.get_mut(*index) {
                        entry.message.push('\n');
                        entry.message.push_str(rest);
                    }
                    if let Some(outer) = outer {
                        server.feed(rest, line.span, outer, facts);
                    }
                    continue;
                }
                Continues::Notice => continue,
                Continues::Nothing => {}
            }
        }
        continues = Continues::Nothing;
        unrecognized += 1;
    }
    unrecognized
}

/// Reads one `timestamp host ident[pid]: message` line.
fn parse_entry(text: &str, span: Span) -> Option<JournalEntry> {
    let (time, rest) = parse_timestamp(text)?;
    let prefix = split_prefix(rest)?;
    let mut entry = JournalEntry {
        time: Some(time),
        host: prefix.host.map(str::to_owned),
        identifier: prefix.identifier.to_owned(),
        pid: prefix.pid,
        unit: None,
        cmdline: None,
        message: prefix.message.to_owned(),
        span,
    };
    if entry.is_pid1() {
        entry.unit = unit_of_pid1_message(&entry.message);
    }
    Some(entry)
}

/// The timestamp of a short-mode line and the text after it. A shape that
/// matches but names no real date is refused rather than guessed.
fn parse_timestamp(text: &str) -> Option<(Timestamp, &str)> {
    if let Some(c) = ISO.captures(text) {
        let date = NaiveDate::parse_from_str(&c["date"], "%Y-%m-%d").ok()?;
        let local = date.and_time(parse_time_of_day(&c["hms"], c.name("frac"))?);
        let hours: i32 = c["oh"].parse().ok()?;
        let minutes: i32 = c["om"].parse().ok()?;
        let sign = if &c["sign"] == "-" { -1 } else { 1 };
        let time = Timestamp {
            local,
            offset_secs: Some(sign * (hours * 3600 + minutes * 60)),
            year_known: true,
        };
        return Some((time, c.name("rest")?.as_str()));
    }
    let c = SHORT.captures(text)?;
    let month = month_number(&c["mon"])?;
    let day: u32 = c["day"].trim().parse().ok()?;
    // No year in the line: 2000 is a placeholder (a leap year, so Feb 29
    // survives) that the bundle manifest's date replaces later.
    let date = NaiveDate::from_ymd_opt(2000, month, day)?;
    let local: NaiveDateTime = date.and_time(parse_time_of_day(&c["hms"], c.name("frac"))?);
    let time = Timestamp {
        local,
        offset_secs: None,
        year_known: false,
    };
    Some((time, c.name("rest")?.as_str()))
}

fn parse_time_of_day(hms: &str, frac: Option<regex::Match<'_>>) -> Option<NaiveTime> {
    let time = NaiveTime::parse_from_str(hms, "%H:%M:%S").ok()?;
    let Some(frac) = frac else {
        return Some(time);
    };
    // Right-pad to nanoseconds: `.000100` is 100 µs, `.5` is half a second.
    let digits = frac.as_str();
    let nanos: u32 = format!("{digits:0<9}").get(..9)?.parse().ok()?;
    time.with_nanosecond(nanos)
}

fn month_number(abbr: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    MONTHS.iter().position(|m| *m == abbr).map(|i| i as u32 + 1)
}

struct Prefix<'a> {
    host: Option<&'a str>,
    identifier: &'a str,
    pid: Option<u32>,
    message: &'a str,
}

/// Splits `host ident[pid]: message` (§4.8). The identifier may hold spaces,
/// dots and colons, so it ends at the first `: ` that follows either
/// `[pid]` or a space-free identifier. `--no-hostname` output has no host:
/// a host name never ends in `:`, so a first token that does is the ident.
fn split_prefix(rest: &str) -> Option<Prefix<'_>> {
    let (first, after_first) = rest.split_once(' ').unwrap_or((rest, ""));
    if first.ends_with(':') {
        if let Some(p) = split_identifier(rest) {
            return Some(Prefix { host: None, ..p });
        }
    }
    if first.is_empty() {
        return None;
    }
    let p = split_identifier(after_first)?;
    Some(Prefix {
        host: Some(first),
        ..p
    })
}

fn split_identifier(text: &str) -> Option<Prefix<'_>> {
    // An empty message leaves `ident[pid]:` at the end of the line once a
    // paste has trimmed the trailing space.
    let at_end = text.ends_with(':').then(|| text.len() - 1);
    let candidates = text.match_indices(": ").map(|(i, _)| i).chain(at_end);
    for end in candidates {
        let ident = &text[..end];
        let message = text.get(end + 2..).unwrap_or("");
        if let Some((identifier, pid)) = split_pid(ident) {
            return Some(Prefix {
                host: None,
                identifier,
                pid: Some(pid),
                message,
            });
        }
        if !ident.is_empty() && !ident.contains(char::is_whitespace) {
            return Some(Prefix {
                host: None,
                identifier: ident,
                pid: None,
                message,
            });
        }
    }
    None
}

/// `python3[20629]` → (`python3`, 20629).
fn split_pid(ident: &str) -> Option<(&str, u32)> {
    let inner = ident.strip_suffix(']')?;
    let open = inner.rfind('[')?;
    let (name, digits) = (&inner[..open], &inner[open + 1..]);
    if name.is_empty() || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, digits.parse().ok()?))
}

/// The unit a message of systemd (PID 1) is about, when the text names it:
/// unit-prefixed messages and 252+ job messages. 247 job messages name only
/// the description and yield `None`.
pub(super) fn unit_of_pid1_message(message: &str) -> Option<String> {
    UNIT_PREFIXED
        .captures(message)
        .or_else(|| JOB.captures(message))
        .map(|c| c["unit"].to_owned())
}

#[cfg(test)]
mod tests {
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

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, micros: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, mo, d)
            .and_then(|d| d.and_hms_micro_opt(h, mi, s, micros))
            .expect("valid test date")
    }

    type Row<'a> = (u32, Option<&'a str>, &'a str, Option<u32>, &'a str);

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
                    e.message.as_str(),
                )
            })
            .collect()
    }

    #[test]
    fn short_mode_prefixes() {
        let (facts, unrecognized) = run("\
-- Journal begins at Sat 2024-06-01 12:00:00 UTC, ends at Sat 2024-06-01 12:00:12 UTC. --
Nov 27 09:38:40 ct200 python3[20629]: [2026-11-27 09:38:40] Init torch distributed begin.
Jun 01 12:00:03 gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.
Jun  1 12:00:04 gpu-node-7 (sd-pam)[1800]: pam_unix(systemd-user:session): session opened
Jun 01 12:00:05 gpu-node-7 my wrapper[77]: a: b
Jun 01 12:00:06 gpu-node-7 python3.11[4242]:
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
-- Reboot --
Jun 01 12:00:07 gpu-node-7 audit: type=1400 audit(1717243207.000:5): apparmor=\"DENIED\"
-- No entries --");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&facts),
            vec![
                (
                    2,
                    Some("ct200"),
                    "python3",
                    Some(20629),
                    "[2026-11-27 09:38:40] Init torch distributed begin."
                ),
                (
                    3,
                    Some("gpu-node-7"),
                    "kernel",
                    None,
                    "NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus."
                ),
                (
                    4,
                    Some("gpu-node-7"),
                    "(sd-pam)",
                    Some(1800),
                    "pam_unix(systemd-user:session): session opened"
                ),
                (5, Some("gpu-node-7"), "my wrapper", Some(77), "a: b"),
                (6, Some("gpu-node-7"), "python3.11", Some(4242), ""),
                (
                    9,
                    Some("gpu-node-7"),
                    "audit",
                    None,
                    "type=1400 audit(1717243207.000:5): apparmor=\"DENIED\""
                ),
            ]
        );
        let t = facts.journal[0].time.expect("time");
        assert_eq!(t.local, at(2000, 11, 27, 9, 38, 40, 0));
        assert_eq!((t.offset_secs, t.year_known), (None, false));
        let t = facts.journal[2].time.expect("time");
        assert_eq!(t.local, at(2000, 6, 1, 12, 0, 4, 0));
    }

    #[test]
    fn timestamp_variants() {
        let (facts, unrecognized) = run("\
Jun 01 12:00:04.000100 gpu-node-7 systemd[1]: Reloading.
2024-06-01T12:00:04+0000 gpu-node-7 systemd[1]: Reloading.
2026-11-27T09:38:40.250000+0800 ct200 python3[20629]: hi
2026-11-27T09:38:40-0130 ct200 python3[20629]: hi
Feb 29 00:00:00 h x: leap placeholder year");
        assert_eq!(unrecognized, 0);
        let times: Vec<Timestamp> = facts.journal.iter().filter_map(|e| e.time).collect();
        assert_eq!(
            times,
            vec![
                Timestamp {
                    local: at(2000, 6, 1, 12, 0, 4, 100),
                    offset_secs: None,
                    year_known: false,
                },
                Timestamp {
                    local: at(2024, 6, 1, 12, 0, 4, 0),
                    offset_secs: Some(0),
                    year_known: true,
                },
                Timestamp {
                    local: at(2026, 11, 27, 9, 38, 40, 250_000),
                    offset_secs: Some(8 * 3600),
                    year_known: true,
                },
                Timestamp {
                    local: at(2026, 11, 27, 9, 38, 40, 0),
                    offset_secs: Some(-5400),
                    year_known: true,
                },
                Timestamp {
                    local: at(2000, 2, 29, 0, 0, 0, 0),
                    offset_secs: None,
                    year_known: false,
                },
            ]
        );
    }

    #[test]
    fn pid1_units_from_unit_prefixed_and_combined_job_messages() {
        let (facts, unrecognized) = run("\
Jun 01 12:00:00 gpu-node-7 systemd[1]: Started sglang.service - SGLang inference server.
Jun 01 12:01:37 gpu-node-7 systemd[1]: sglang.service: Main process exited, code=killed, status=9/KILL
Jun 01 12:01:37 gpu-node-7 systemd[1]: sglang.service: Failed with result 'signal'.
Jun 01 12:01:47 gpu-node-7 systemd[1]: Stopped sglang.service - SGLang inference server with error.
Jun 01 12:01:47 gpu-node-7 systemd[1]: Failed to start sglang.service - SGLang inference server.
Jun 01 12:01:48 gpu-node-7 systemd[1]: Starting getty@tty1.service - Getty on tty1...
Jun 01 12:01:49 gpu-node-7 systemd[1]: Started run-u42.service.
Jun 01 12:05:00 gpu-node-7 systemd[1]: Stopping SGLang inference server...
Jun 01 12:11:00 gpu-node-7 systemd[1]: Stopped SGLang inference server.
Jun 01 12:11:01 gpu-node-7 systemd[1]: Reloading.
Jun 01 12:11:02 gpu-node-7 sshd[900]: sglang.service: not pid 1");
        assert_eq!(unrecognized, 0);
        let units: Vec<(u32, Option<&str>)> = facts
            .journal
            .iter()
            .map(|e| (e.span.line, e.unit.as_deref()))
            .collect();
        assert_eq!(
            units,
            vec![
                (1, Some("sglang.service")),
                (2, Some("sglang.service")),
                (3, Some("sglang.service")),
                (4, Some("sglang.service")),
                (5, Some("sglang.service")),
                (6, Some("getty@tty1.service")),
                (7, Some("run-u42.service")),
                // 247 names the description only.
                (8, None),
                (9, None),
                (10, None),
                (11, None),
            ]
        );
    }

    #[test]
    fn sglang_traceback_inside_journal_lines_becomes_server_events() {
        let (facts, unrecognized) = run("\
Nov 27 09:38:52 ct200 python3[20629]: [2026-11-27 09:38:52 TP3] Scheduler hit an exception: Traceback (most recent call last):
Nov 27 09:38:52 ct200 python3[20629]:   File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process
Nov 27 09:38:52 ct200 python3[20629]:     raise RuntimeError(
Nov 27 09:38:52 ct200 python3[20629]: RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875
Nov 27 09:38:53 ct200 systemd[1]: sglang-k26.service: Main process exited, code=killed, status=9/KILL");
        assert_eq!(unrecognized, 0);
        let imbalance: Vec<&ServerEvent> = facts
            .server_events
            .iter()
            .filter(|e| matches!(e.kind, ServerEventKind::MemoryImbalance(_)))
            .collect();
        assert_eq!(imbalance.len(), 1);
        let e = imbalance[0];
        assert_eq!(e.span.line, 4);
        assert_eq!(e.rank.and_then(|r| r.tp), Some(3));
        assert_eq!(e.pid, Some(20629));
        assert_eq!(e.unit, None);
        let ServerEventKind::MemoryImbalance(m) = &e.kind else {
            unreachable!()
        };
        assert_eq!(m.exception.as_deref(), Some("RuntimeError"));
        assert_eq!(m.min_gib, Some(39.74761962890625));
        // systemd's own lines never reach the server parser.
        assert!(facts.server_events.iter().all(|e| e.pid == Some(20629)));
    }

    #[test]
    fn indented_continuation_lines_extend_the_entry_and_feed_the_server_parser() {
        let (facts, unrecognized) = run("\
Jun 01 12:00:10 gpu-node-7 python3[4242]: Traceback (most recent call last):
                                            File \"x.py\", line 1, in <module>
                                          RuntimeError: boom
Hint: You are currently not seeing messages from other users and the system.
      Users in groups 'adm', 'systemd-journal' can see all messages.
      Pass -q to turn off this notice.
Hint: Some lines were ellipsized, use -l to show in full.");
        assert_eq!(unrecognized, 0);
        assert_eq!(facts.journal.len(), 1);
        assert_eq!(
            facts.journal[0].message,
            "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nRuntimeError: boom"
        );
        let exceptions: Vec<(u32, Option<u32>)> = facts
            .server_events
            .iter()
            .filter(|e| matches!(e.kind, ServerEventKind::Exception { .. }))
            .map(|e| (e.span.line, e.pid))
            .collect();
        assert_eq!(exceptions, vec![(3, Some(4242))]);
    }

    #[test]
    fn garbage_is_counted_and_never_panics() {
        let (facts, unrecognized) = run("\
Foo 27 09:38:40 ct200 python3[1]: bad month
Feb 30 09:38:40 ct200 python3[1]: bad day
Nov 27 09:38:40 ct200 no colon here
Nov 27 09:38:40 ct200 two words: no pid
   indented with nothing before it
Nov 27 09:38:40 ct200 ünïcødé[12]: ok ✓
Nov 27 09:38:40 ct200 x[99999999999]: pid overflow
\u{1b}\u{0}\u{ff}");
        assert_eq!(unrecognized, 6);
        assert_eq!(
            rows(&facts),
            vec![
                (6, Some("ct200"), "ünïcødé", Some(12), "ok ✓"),
                (7, Some("ct200"), "x[99999999999]", None, "pid overflow"),
            ]
        );
    }

    #[test]
    fn no_hostname_mode() {
        let (facts, unrecognized) = run("Jun 01 12:00:03 python3[4242]: hello: world");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&facts),
            vec![(1, None, "python3", Some(4242), "hello: world")]
        );
    }
}
