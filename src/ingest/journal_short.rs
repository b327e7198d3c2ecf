//! The one-line-per-entry journalctl modes (docs/formats/journal.md):
//! `short`, `short-precise`, `short-iso`, `short-iso-precise`,
//! `short-full`, `short-unix`, `short-monotonic`, `short-delta` and
//! `with-unit`. Each line is `timestamp host ident[pid]: message`; the modes
//! differ only in the timestamp ([`journal_time`](super::journal_time)) and,
//! for `with-unit`, in printing the unit where the identifier would be.
//! Around the entries: markers, notices, `-x` catalog lines, and indented
//! continuation lines of multi-line messages.
//!
//! Short modes carry no `UNIT=` field, so the unit of systemd's own lines is
//! read from the message. Every other message goes through the server-log
//! parser, so SGLang output captured by journald becomes server events, and
//! every kernel message through the kernel parser (`journalctl -k`, kern.log).

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use super::KernelParser;
use super::Line;
use super::ServerLogParser;
use super::journal_fields::{UNIT_TYPES, outer_of, pid1_message_in, unit_of_pid1_message};
use super::journal_marks::{Aside, aside};
use super::journal_time::split_stamp;
use super::read::{Out, Read};
use super::server::{Outer, OuterRef, Skim};
use crate::model::{Facts, JournalEntry, Timestamp};
use crate::source::Span;

/// What the name before `[pid]:` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ident {
    /// `SYSLOG_IDENTIFIER` (every mode but `with-unit`).
    Identifier,
    /// `-o with-unit`: the entry's `_SYSTEMD_UNIT` where it has one (with
    /// `/<user unit>` appended for user services), else the identifier.
    /// PID 1 runs in `init.scope`.
    Unit,
}

/// `sglang.service`, `init.scope`, `user@1000.service/app.service`.
static PRINTED_UNIT: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(
        r"^(?P<unit>[A-Za-z0-9:_.@\\-]+\.(?:{UNIT_TYPES}))(?:/[A-Za-z0-9:_.@\\-]+\.(?:{UNIT_TYPES}))?$"
    );
    Regex::new(&pattern).expect("printed unit regex")
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
    /// An entry the prefilter skimmed, whose lines so far are in
    /// [`JournalReader::skimmed`]: read in full after all if a later line
    /// of it matters.
    Skimmed,
}

/// The lines of the entry being skimmed. Its buffers are reused from entry
/// to entry: skimming a line costs a copy, never an allocation, and what it
/// holds is bounded by [`MAX_SKIMMED_LINES`].
#[derive(Default)]
struct SkimmedLines {
    lines: Vec<(Span, String)>,
    len: usize,
}

impl SkimmedLines {
    /// Starts a new entry with its first line.
    fn start(&mut self, span: Span, text: &str) {
        self.len = 0;
        self.push(span, text);
    }

    fn push(&mut self, span: Span, text: &str) {
        if let Some((s, t)) = self.lines.get_mut(self.len) {
            *s = span;
            t.clear();
            t.push_str(text);
        } else {
            self.lines.push((span, text.to_owned()));
        }
        self.len += 1;
    }

    fn get(&self) -> &[(Span, String)] {
        &self.lines[..self.len]
    }
}

/// Parses one segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts, ident: Ident) -> u32 {
    let mut reader = JournalReader::new(ident);
    for line in lines {
        reader.full(line, facts);
    }
    reader.finish(facts)
}

/// Entries whose lines may go on this long before a skimmed one is read in
/// full anyway: the buffer of a skimmed entry stays small.
const MAX_SKIMMED_LINES: usize = 256;

/// Reads a segment line by line (see [`super::reader`]).
pub(super) struct JournalReader {
    ident: Ident,
    server: ServerLogParser,
    kernel: KernelParser,
    continues: Continues,
    unrecognized: u32,
    /// PIDs whose first entry with (1) and without (2) a unit was read in
    /// full: owners are decided by each PID's first entries.
    first: HashMap<u32, u8>,
    skimmed: SkimmedLines,
}

impl JournalReader {
    pub(super) fn new(ident: Ident) -> JournalReader {
        JournalReader {
            ident,
            server: ServerLogParser::default(),
            kernel: KernelParser::default(),
            continues: Continues::Nothing,
            unrecognized: 0,
            first: HashMap::new(),
            skimmed: SkimmedLines::default(),
        }
    }

    /// Reads one line; a line without an anchor may only be skimmed.
    pub(super) fn read(&mut self, line: &Line<'_>, hot: bool, out: &mut Out<'_>) -> Read {
        if let Continues::Skimmed = &self.continues {
            if is_continuation(line.text, self.ident) {
                if !hot && self.skim_continuation(line.text) {
                    self.skimmed.push(line.span, line.text);
                    return Read::Skimmed(None);
                }
                // A line of the entry matters after all: read it whole.
                self.continues = Continues::Nothing;
                let skimmed = std::mem::take(&mut self.skimmed);
                for (span, text) in skimmed.get() {
                    out.kept.push(span.line, text);
                    self.full(&Line::bare(*span, text), out.facts);
                }
                self.skimmed = skimmed;
                self.full(line, out.facts);
                return Read::Parsed;
            }
        }
        if !hot {
            if let Some(read) = self.skim(line) {
                return read;
            }
        }
        self.full(line, out.facts);
        Read::Parsed
    }

    /// The prefilter's cheap reading of a line with no anchor: what the full
    /// reading would record (the line's time, whether it is recognised),
    /// with no fact made. `None` when the full reading is needed: PID 1's
    /// lines, a PID's first lines, a message for a writer that is in the
    /// middle of something, continuation lines of an entry read in full.
    fn skim(&mut self, line: &Line<'_>) -> Option<Read> {
        let text = line.text;
        if text.trim().is_empty() {
            return Some(Read::Skimmed(None));
        }
        if let Some(parts) = parse_parts(text, self.ident) {
            let time = parts.time?;
            // A service manager's lines, PID 1's or a user manager's, are
            // read in full: they are the units' events.
            if parts.is_manager() {
                return None;
            }
            let kernel = parts.pid.is_none() && parts.identifier == "kernel";
            if kernel && self.kernel.busy() {
                return None;
            }
            if let Some(pid) = parts.pid {
                // The first entry with a unit names the PID's unit; the first
                // without one (not the kernel's) may infer it.
                let bit = match (parts.unit, parts.identifier) {
                    (Some(_), _) => 1,
                    (None, "kernel") => 0,
                    (None, _) => 2,
                };
                let seen = self.first.entry(pid).or_default();
                if bit & !*seen != 0 {
                    *seen |= bit;
                    return None;
                }
            }
            // PID 1 never gets here: every other message goes to the server parser.
            let outer = OuterRef {
                pid: parts.pid,
                unit: parts.unit,
                time: parts.time,
            };
            if let Skim::Full = self.server.skim(parts.message, outer) {
                return None;
            }
            self.skimmed.start(line.span, text);
            self.continues = Continues::Skimmed;
            return Some(Read::Skimmed(Some(time)));
        }
        match aside(text) {
            Some(Aside::Marker | Aside::Catalog) => {
                self.continues = Continues::Nothing;
                return Some(Read::Skimmed(None));
            }
            Some(Aside::Notice) => {
                self.continues = Continues::Notice;
                return Some(Read::Skimmed(None));
            }
            None => {}
        }
        if text.starts_with([' ', '\t']) {
            match &self.continues {
                Continues::Entry { .. } | Continues::Skimmed => return None,
                Continues::Notice => return Some(Read::Skimmed(None)),
                Continues::Nothing => {}
            }
        }
        self.continues = Continues::Nothing;
        if bare_pid1(text, line.span).is_some() {
            return None;
        }
        self.unrecognized += 1;
        Some(Read::Skimmed(None))
    }

    /// Whether a continuation line of a skimmed entry can stay skimmed: its
    /// writer is not in the middle of something, and the entry is not long.
    fn skim_continuation(&mut self, text: &str) -> bool {
        let Continues::Skimmed = &self.continues else {
            return false;
        };
        let lines = self.skimmed.get();
        let Some(head) = lines.first().and_then(|(_, t)| parse_parts(t, self.ident)) else {
            return false;
        };
        if lines.len() >= MAX_SKIMMED_LINES {
            return false;
        }
        let column = head_column(&lines[0].1, head.message);
        let indent = text.len() - text.trim_start_matches(' ').len();
        let rest = &text[indent.min(column)..];
        let kernel = head.pid.is_none() && head.identifier == "kernel";
        if kernel && self.kernel.busy() {
            return false;
        }
        let outer = OuterRef {
            pid: head.pid,
            unit: head.unit,
            time: head.time,
        };
        !matches!(self.server.skim(rest, outer), Skim::Full)
    }

    /// Reads one line in full.
    pub(super) fn full(&mut self, line: &Line<'_>, facts: &mut Facts) {
        let text = line.text;
        if text.trim().is_empty() {
            // An empty line inside a multi-line message is printed as bare
            // indentation, which pastes often trim: keep the entry open.
            return;
        }
        if let Some(entry) = parse_entry(text, line.span, self.ident) {
            let column = head_column(text, &entry.message);
            let outer = outer_of(&entry);
            if let Some(outer) = &outer {
                self.server.feed(&entry.message, line.span, outer, facts);
            }
            if entry.is_kernel() {
                self.kernel
                    .feed(&entry.message, line.span, entry.time, facts);
            }
            facts.journal.push(entry);
            self.continues = Continues::Entry {
                index: facts.journal.len() - 1,
                column,
                outer,
            };
            return;
        }
        match aside(text) {
            Some(Aside::Marker | Aside::Catalog) => {
                self.continues = Continues::Nothing;
                return;
            }
            Some(Aside::Notice) => {
                self.continues = Continues::Notice;
                return;
            }
            None => {}
        }
        if text.starts_with([' ', '\t']) {
            match &self.continues {
                Continues::Entry {
                    index,
                    column,
                    outer,
                } => {
                    let indent = text.len() - text.trim_start_matches(' ').len();
                    // Spaces are one byte each, so this cut is on a char boundary.
                    let rest = &text[indent.min(*column)..];
                    let mut kernel = None;
                    if let Some(entry) = facts.journal.get_mut(*index) {
                        entry.message.push('\n');
                        entry.message.push_str(rest);
                        kernel = entry.is_kernel().then_some(entry.time);
                    }
                    // The kernel's own multi-line reports (`NVRM: this kernel
                    // module has the version …` under `NVRM: API mismatch`).
                    if let Some(time) = kernel {
                        self.kernel.feed(rest.trim_start(), line.span, time, facts);
                    }
                    if let Some(outer) = outer {
                        self.server.feed(rest, line.span, outer, facts);
                    }
                    return;
                }
                Continues::Notice => return,
                // Only a skimmed entry's own lines get here, and they are
                // read in full with it (see `read`).
                Continues::Nothing | Continues::Skimmed => {}
            }
        }
        self.continues = Continues::Nothing;
        if let Some(entry) = bare_pid1(text, line.span) {
            facts.journal.push(entry);
            return;
        }
        // A journal line whose prefix did not parse (two spaces before the
        // host, a cut head) is still read when it is a catalog message.
        if crate::catalogs::catalogs().knows(text) {
            return;
        }
        self.unrecognized += 1;
    }

    /// Lines not recognised so far.
    pub(super) fn unrecognized(&self) -> u32 {
        self.unrecognized
    }

    /// Closes the segment; returns the number of lines it did not recognise.
    pub(super) fn finish(&mut self, facts: &mut Facts) -> u32 {
        self.kernel.finish(facts);
        self.unrecognized
    }
}

/// Whether `text` continues the entry above it: indented, and neither an
/// entry nor one of journalctl's own lines.
/// A message of systemd's unit grammar pasted without its journal prefix,
/// or quoted in a reply (`>nvidia-docker.service: Main process exited,
/// code=exited, status=1/FAILURE`): PID 1's, as recognize.rs reads it in
/// an unknown segment.
fn bare_pid1(text: &str, span: Span) -> Option<JournalEntry> {
    // A quote in front was peeled as a frame (`ingest::frame`).
    let message = text.trim_end();
    let (unit, message) = match unit_of_pid1_message(message) {
        Some(unit) => (unit, message.to_owned()),
        // Cut before the unit, or behind a prefix no parser reads: the
        // catalog finds the message where it starts.
        None => pid1_message_in(message)?,
    };
    Some(JournalEntry {
        time: None,
        host: None,
        identifier: "systemd".to_owned(),
        pid: Some(1),
        unit: Some(unit),
        cmdline: None,
        message,
        span,
    })
}

fn is_continuation(text: &str, ident: Ident) -> bool {
    !text.trim().is_empty()
        && text.starts_with([' ', '\t'])
        && parse_parts(text, ident).is_none()
        && aside(text).is_none()
}

/// The column at which the message of entry line `text` starts.
fn head_column(text: &str, message: &str) -> usize {
    text[..text.len() - message.len()].chars().count()
}

/// The fields of one `timestamp host ident[pid]: message` line, borrowed.
struct Parts<'a> {
    time: Option<Timestamp>,
    host: Option<&'a str>,
    identifier: &'a str,
    pid: Option<u32>,
    /// The unit `-o with-unit` printed in place of the identifier.
    unit: Option<&'a str>,
    message: &'a str,
}

impl Parts<'_> {
    /// `systemd[1]:`, or syslog's `systemd:` (PID 1 without its pid).
    fn is_pid1(&self) -> bool {
        self.identifier == "systemd" && matches!(self.pid, Some(1) | None)
    }

    /// PID 1, or a user manager (`systemd[1762]:`) telling of a unit or a
    /// job (`JournalEntry::is_manager`).
    fn is_manager(&self) -> bool {
        self.is_pid1()
            || (self.identifier == "systemd" && crate::model::is_manager_message(self.message))
    }
}

fn parse_parts(text: &str, ident: Ident) -> Option<Parts<'_>> {
    let (time, rest) = split_stamp(text)?;
    let prefix = split_prefix(rest)?;
    let mut parts = Parts {
        time,
        host: prefix.host,
        identifier: prefix.identifier,
        pid: prefix.pid,
        unit: None,
        message: prefix.message,
    };
    if ident == Ident::Unit {
        if let Some(c) = PRINTED_UNIT.captures(prefix.identifier) {
            let unit = c.name("unit").map_or("", |m| m.as_str());
            // PID 1 prints as `init.scope[1]`: it is the service manager,
            // and its messages are about other units, as in every mode.
            if unit == "init.scope" && parts.pid == Some(1) {
                parts.identifier = "systemd";
            } else {
                parts.unit = Some(unit);
            }
        }
    }
    Some(parts)
}

/// Reads one `timestamp host ident[pid]: message` line.
fn parse_entry(text: &str, span: Span, ident: Ident) -> Option<JournalEntry> {
    let parts = parse_parts(text, ident)?;
    let mut entry = JournalEntry {
        time: parts.time,
        host: parts.host.map(str::to_owned),
        identifier: parts.identifier.to_owned(),
        // Syslog files (/var/log/messages) print PID 1 as `systemd:`.
        pid: parts.pid.or(parts.is_pid1().then_some(1)),
        unit: parts.unit.map(str::to_owned),
        cmdline: None,
        message: parts.message.to_owned(),
        span,
    };
    if entry.is_manager() {
        entry.unit = unit_of_pid1_message(&entry.message);
    }
    Some(entry)
}

struct Prefix<'a> {
    host: Option<&'a str>,
    identifier: &'a str,
    pid: Option<u32>,
    message: &'a str,
}

/// Splits `host ident[pid]: message` (docs/formats/journal.md). The identifier may hold spaces,
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

/// A journal or syslog line whose time and host a paste cut off: a
/// program's `ident[pid]: message` (`nvidia-persistenced[3690]: Shutdown
/// (3690)`, as `journalctl` and syslog print the tag after the host) or
/// the kernel's `kernel: message`. The identifier is a program's name (a
/// letter, then letters, digits, `-_.@/`), the PID a number above 0;
/// IPython's `Out[3]: ` is no tag.
pub(super) fn is_cut_record(text: &str) -> bool {
    if let Some(message) = text.strip_prefix("kernel: ") {
        return !message.trim().is_empty();
    }
    let Some((head, message)) = text.split_once(": ") else {
        return false;
    };
    let Some((name, pid)) = split_pid(head) else {
        return false;
    };
    pid > 0
        && name != "Out"
        && !message.trim().is_empty()
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@/".contains(&b))
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

#[cfg(test)]
mod tests {
    use chrono::{NaiveDate, NaiveDateTime};

    use super::*;
    use crate::model::{ServerEvent, ServerEventKind, Timestamp};

    fn run(text: &str) -> (Facts, u32) {
        run_as(text, Ident::Identifier)
    }

    fn run_as(text: &str, ident: Ident) -> (Facts, u32) {
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts, ident);
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

    /// batch P's 1031 (NixOS/nixpkgs#22304): journal lines pasted from
    /// their tag on, the time and host cut off.
    #[test]
    fn a_record_cut_to_its_tag_is_one() {
        for yes in [
            "kernel: [drm] [nvidia-drm] [GPU ID 0x00000100] Loading driver",
            "systemd-modules-load[509]: Inserted module 'nvidia_uvm'",
            "nvidia-settings[3713]: Error retrieving accessibility bus address: org.freedesktop.DBus.Error.ServiceUnknown: The name org.a11y.Bus was not provided by any .service files",
        ] {
            assert!(is_cut_record(yes), "{yes}");
        }
        for no in [
            "Out[3]: 42",
            "x[0]: 1",
            "kernel: ",
            "my program[12]: text",
            "[rank4]: AssertionError: 2 is not divisible by 4",
            "nvidia-smi[12]:",
            "score=-0.424665",
        ] {
            assert!(!is_cut_record(no), "{no}");
        }
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

    /// The same six entries in each mode, as journalctl 252 prints them
    /// (`--utc`): PID 1, a server line, the kernel, a multi-line message, a
    /// user service, and an entry of the next boot.
    const MONOTONIC: &str = "\
[    7.500000] gpu-node-7 systemd[1]: Started sglang.service - SGLang inference server.
[    8.500000] gpu-node-7 python3[4242]: [2024-06-01 12:00:02 TP1] Init torch distributed begin.
[    9.000100] gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79, pid=4242, GPU has fallen off the bus.
[    9.500000] gpu-node-7 python3[4242]: Traceback (most recent call last):
                                           File \"x.py\", line 1, in <module>
                                         RuntimeError: boom
[    9.800000] gpu-node-7 app[1800]: user unit line
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
[    2.100000] gpu-node-7 sshd[900]: Accepted publickey for root";

    const UNIX: &str = "\
1717243201.000000 gpu-node-7 systemd[1]: Started sglang.service - SGLang inference server.
1717243202.000000 gpu-node-7 python3[4242]: [2024-06-01 12:00:02 TP1] Init torch distributed begin.
1717243203.000000 gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79, pid=4242, GPU has fallen off the bus.
1717243204.000100 gpu-node-7 python3[4242]: Traceback (most recent call last):
                                              File \"x.py\", line 1, in <module>
                                            RuntimeError: boom
1717243206.000000 gpu-node-7 app[1800]: user unit line
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
1717243260.000000 gpu-node-7 sshd[900]: Accepted publickey for root";

    const FULL: &str = "\
Sat 2024-06-01 12:00:01 UTC gpu-node-7 systemd[1]: Started sglang.service - SGLang inference server.
Sat 2024-06-01 12:00:02 UTC gpu-node-7 python3[4242]: [2024-06-01 12:00:02 TP1] Init torch distributed begin.
Sat 2024-06-01 12:00:03 UTC gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79, pid=4242, GPU has fallen off the bus.
Sat 2024-06-01 12:00:04 UTC gpu-node-7 python3[4242]: Traceback (most recent call last):
                                                        File \"x.py\", line 1, in <module>
                                                      RuntimeError: boom
Sat 2024-06-01 12:00:06 UTC gpu-node-7 app[1800]: user unit line
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
Sat 2024-06-01 12:01:00 UTC gpu-node-7 sshd[900]: Accepted publickey for root";

    const DELTA: &str = "\
[    7.500000                ] gpu-node-7 systemd[1]: Started sglang.service - SGLang inference server.
[    8.500000 <    1.000000 >] gpu-node-7 python3[4242]: [2024-06-01 12:00:02 TP1] Init torch distributed begin.
[    9.000100 <    0.500100 >] gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79, pid=4242, GPU has fallen off the bus.
[    9.500000 <    0.499900 >] gpu-node-7 python3[4242]: Traceback (most recent call last):
                                                           File \"x.py\", line 1, in <module>
                                                         RuntimeError: boom
[    9.800000 <    0.300000 >] gpu-node-7 app[1800]: user unit line
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
[    2.100000 <   54.000000*>] gpu-node-7 sshd[900]: Accepted publickey for root";

    const WITH_UNIT: &str = "\
Sat 2024-06-01 12:00:01 UTC gpu-node-7 init.scope[1]: Started sglang.service - SGLang inference server.
Sat 2024-06-01 12:00:02 UTC gpu-node-7 sglang.service[4242]: [2024-06-01 12:00:02 TP1] Init torch distributed begin.
Sat 2024-06-01 12:00:03 UTC gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79, pid=4242, GPU has fallen off the bus.
Sat 2024-06-01 12:00:04 UTC gpu-node-7 sglang.service[4242]: Traceback (most recent call last):
                                                               File \"x.py\", line 1, in <module>
                                                             RuntimeError: boom
Sat 2024-06-01 12:00:06 UTC gpu-node-7 user@1000.service/app.service[1800]: user unit line
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
Sat 2024-06-01 12:01:00 UTC gpu-node-7 ssh.service[900]: Accepted publickey for root";

    type ModeRow<'a> = (u32, Option<&'a str>, Option<u32>, Option<&'a str>, &'a str);

    fn mode_rows(facts: &Facts) -> Vec<ModeRow<'_>> {
        facts
            .journal
            .iter()
            .map(|e| {
                (
                    e.span.line,
                    e.host.as_deref(),
                    e.pid,
                    e.unit.as_deref(),
                    e.message.lines().last().unwrap_or(""),
                )
            })
            .collect()
    }

    #[test]
    fn every_one_line_mode_reads_the_same_entries() {
        let host = Some("gpu-node-7");
        let sglang = Some("sglang.service");
        let want_identifiers = [
            (
                1,
                Some(1),
                sglang,
                "Started sglang.service - SGLang inference server.",
            ),
            (
                2,
                Some(4242),
                None,
                "[2024-06-01 12:00:02 TP1] Init torch distributed begin.",
            ),
            (
                3,
                None,
                None,
                "NVRM: Xid (PCI:0000:1a:00): 79, pid=4242, GPU has fallen off the bus.",
            ),
            (4, Some(4242), None, "RuntimeError: boom"),
            (7, Some(1800), None, "user unit line"),
            (9, Some(900), None, "Accepted publickey for root"),
        ];
        for (name, text, ident, units) in [
            ("monotonic", MONOTONIC, Ident::Identifier, [None; 6]),
            ("unix", UNIX, Ident::Identifier, [None; 6]),
            ("full", FULL, Ident::Identifier, [None; 6]),
            ("delta", DELTA, Ident::Identifier, [None; 6]),
            (
                "with-unit",
                WITH_UNIT,
                Ident::Unit,
                [
                    None,
                    sglang,
                    None,
                    sglang,
                    Some("user@1000.service"),
                    Some("ssh.service"),
                ],
            ),
        ] {
            let (facts, unrecognized) = run_as(text, ident);
            assert_eq!(unrecognized, 0, "{name}");
            let want: Vec<ModeRow<'_>> = want_identifiers
                .iter()
                .zip(units)
                .map(|(&(line, pid, pid1_unit, msg), unit)| {
                    (line, host, pid, pid1_unit.or(unit), msg)
                })
                .collect();
            assert_eq!(mode_rows(&facts), want, "{name}");
            // PID 1 is systemd in every mode, so its lines never reach the
            // server parser and its unit comes from the message.
            assert!(facts.journal[0].is_pid1(), "{name}");
            // The traceback inside the multi-line message is a server event
            // of PID 4242, on the line of its exception.
            let exceptions: Vec<(u32, Option<u32>, Option<&str>)> = facts
                .server_events
                .iter()
                .filter(|e| matches!(e.kind, ServerEventKind::Exception { .. }))
                .map(|e| (e.span.line, e.pid, e.unit.as_deref()))
                .collect();
            let unit = if ident == Ident::Unit { sglang } else { None };
            assert_eq!(exceptions, vec![(6, Some(4242), unit)], "{name}");
        }
    }

    #[test]
    fn with_unit_names_the_unit_instead_of_the_identifier() {
        let (facts, _) = run_as(WITH_UNIT, Ident::Unit);
        let idents: Vec<&str> = facts
            .journal
            .iter()
            .map(|e| e.identifier.as_str())
            .collect();
        assert_eq!(
            idents,
            vec![
                "systemd",
                "sglang.service",
                "kernel",
                "sglang.service",
                "user@1000.service/app.service",
                "ssh.service"
            ]
        );
        // Outside with-unit mode a unit-shaped identifier is just a name.
        let (facts, _) = run("Sat 2024-06-01 12:00:02 UTC h sglang.service[4242]: x");
        assert_eq!(facts.journal[0].unit, None);
    }

    #[test]
    fn times_per_mode() {
        let utc = |s, micros| Timestamp {
            local: at(2024, 6, 1, 12, 0, s, micros),
            offset_secs: Some(0),
            year_known: true,
        };
        let first_times = |text| {
            let (facts, _) = run(text);
            facts
                .journal
                .iter()
                .take(4)
                .map(|e| e.time)
                .collect::<Vec<_>>()
        };
        assert_eq!(first_times(MONOTONIC), vec![None; 4]);
        assert_eq!(first_times(DELTA), vec![None; 4]);
        assert_eq!(
            first_times(UNIX),
            vec![
                Some(utc(1, 0)),
                Some(utc(2, 0)),
                Some(utc(3, 0)),
                Some(utc(4, 100))
            ]
        );
        assert_eq!(
            first_times(FULL),
            vec![
                Some(utc(1, 0)),
                Some(utc(2, 0)),
                Some(utc(3, 0)),
                Some(utc(4, 0))
            ]
        );
    }

    #[test]
    fn catalog_explanations_are_recognised_but_are_not_entries() {
        // 252 (`░░`), then 247 (`-- `), under `journalctl -x`.
        let (facts, unrecognized) = run("\
2024-06-01T12:00:01+0000 gpu-node-7 systemd[1]: Started sglang.service - SGLang inference server.
░░ Subject: A start job for unit sglang.service has finished successfully
░░ Defined-By: systemd
░░ Support: https://www.debian.org/support
░░ 
░░ A start job for unit sglang.service has finished successfully.
░░ 
░░ The job identifier is 1234.
Jun 01 12:00:05 gpu-node-7 systemd[1]: sglang.service: Main process exited, code=killed, status=9/KILL
-- Subject: Unit process exited
-- Defined-By: systemd
-- Support: https://www.debian.org/support
-- 
-- An ExecStart= process belonging to unit sglang.service has exited.
--
-- The process' exit code is 'killed' and its exit status is 9.
   not a continuation after a catalog block");
        assert_eq!(unrecognized, 1);
        let got: Vec<(u32, &str)> = facts
            .journal
            .iter()
            .map(|e| (e.span.line, e.message.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, "Started sglang.service - SGLang inference server."),
                (
                    9,
                    "sglang.service: Main process exited, code=killed, status=9/KILL"
                ),
            ]
        );
    }

    /// Syslog files print PID 1 as `systemd:`, without its pid.
    #[test]
    fn syslog_systemd_without_pid_is_pid1() {
        let (facts, unrecognized) = run(
            "Dec 24 18:08:35 node01 systemd: kube-apiserver.service holdoff time over, scheduling restart.",
        );
        assert_eq!(unrecognized, 0);
        assert!(facts.journal[0].is_pid1());
        assert_eq!(
            facts.journal[0].unit.as_deref(),
            Some("kube-apiserver.service")
        );
    }

    #[test]
    fn a_kernel_reports_indented_lines_reach_the_kernel_parser() {
        // fixtures/real/081 (journalctl prints a message's later lines
        // under its first, indented to the message's column).
        let (facts, unrecognized) = run(
            "Aug 26 14:08:07 nyasara-linux kernel: NVRM: API mismatch: the client has the version 367.44, but\n                                      NVRM: this kernel module has the version 367.35.  Please\n                                      NVRM: make sure that this kernel module and all NVIDIA driver\n                                      NVRM: components have the same version.\n",
        );
        assert_eq!(unrecognized, 0);
        let kinds: Vec<_> = facts.kernel_events.iter().map(|e| &e.kind).collect();
        assert_eq!(
            kinds,
            [&crate::model::KernelEventKind::ApiMismatch {
                client_version: "367.44".to_owned(),
                kernel_version: Some("367.35".to_owned()),
            }]
        );
    }

    #[test]
    fn a_quoted_pid1_message_without_its_prefix_is_pid1s() {
        // fixtures/real/081: the unit's failure quoted above the journal.
        let (facts, unrecognized) = run(
            ">nvidia-docker.service: Main process exited, code=exited, status=1/FAILURE\nAug 26 14:08:07 nyasara-linux kernel: NVRM: API mismatch: the client has the version 367.44, but\n",
        );
        assert_eq!(unrecognized, 0);
        assert_eq!(facts.journal[0].pid, Some(1));
        assert_eq!(
            facts.journal[0].unit.as_deref(),
            Some("nvidia-docker.service")
        );
    }
}
