//! Kernel messages (docs/formats/kernel.md): the line wrappers of `dmesg` (raw,
//! `-T`, `--time-format iso`, `-x`, `-r`, `-t`) and of `/dev/kmsg`'s
//! records, and the one parser every
//! wrapper hands its message to, [`KernelParser`], which turns NVIDIA driver
//! lines ([`nvrm`]) and OOM-killer reports ([`oom`]) into [`KernelEvent`]s.
//!
//! `journalctl -k` and syslog's kern.log are journal-shaped lines; the
//! journal parsers feed their `kernel` messages here, so they produce the
//! same events. A `[ 8712.345678]` uptime at the start of a message (rsyslog
//! keeps it) is read off here, whoever the wrapper was.

mod nvrm;
mod oom;

use std::sync::LazyLock;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
use regex::Regex;

use super::Line;
use super::read::{Out, Read};
use crate::model::{Facts, KernelEvent, KernelEventKind, KernelTime, Timestamp};
use crate::source::Span;

/// `[ 8712.345678] `, and the `[ 8712.345678 <    0.000123>] ` of `-d`.
static UPTIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[\x20*(?P<s>[0-9]+)\.(?P<frac>[0-9]{1,9})(?:\x20*<[\x200-9.]*>)?\]\x20?")
        .expect("uptime regex")
});

/// `[Sat Jun  1 12:00:03 2024] ` of `dmesg -T`.
static CTIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\[(?:[A-Z][a-z]{2}\x20)?(?P<mon>[A-Z][a-z]{2})\x20+(?P<day>[0-9]{1,2})
        \x20(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])\x20(?P<year>[0-9]{4})\]\x20?",
    )
    .expect("ctime regex")
});

/// `2024-06-01T12:00:03,345678+00:00 ` of `dmesg --time-format iso`.
static ISO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9])T(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?:[,.](?P<frac>[0-9]{1,9}))?
        (?:(?P<sign>[+-])(?P<oh>[0-9][0-9]):?(?P<om>[0-9][0-9])|Z)\x20",
    )
    .expect("iso regex")
});

/// `[  +0.000123] ` and `[Jun 1 12:00] ` of `--time-format reltime`: a
/// wrapper, but no usable time.
static RELTIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[(?:\x20*[+-][0-9]+\.[0-9]+|[A-Z][a-z]{2}\x20+[0-9]{1,2}\x20[0-9][0-9]:[0-9][0-9])\]\x20?")
        .expect("reltime regex")
});

/// The tail of an uptime whose `[` and first digits a paste cut off.
static CUT_UPTIME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[0-9]{1,10}\.[0-9]{6}\]\x20+").expect("cut uptime regex"));

/// `host kernel: ` of `journalctl -o short-monotonic`, and the bare
/// `kernel: ` left when a paste or `grep` cut the syslog time and host off.
static KERNEL_PREFIX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:\S+\x20)?kernel:\x20+").expect("kernel prefix regex"));

/// Reads kernel messages one at a time and keeps what a multi-line report
/// needs across them: the OOM report in progress, the last API mismatch.
#[derive(Default)]
pub(crate) struct KernelParser {
    oom: oom::OomReports,
    nvrm: nvrm::NvrmState,
}

impl KernelParser {
    /// Reads one kernel message; `wall` is the wrapper's timestamp, if any.
    /// Returns whether the message was one the kernel parser knows.
    pub fn feed(
        &mut self,
        message: &str,
        span: Span,
        wall: Option<Timestamp>,
        facts: &mut Facts,
    ) -> bool {
        self.feed_at(message, span, wall, None, facts)
    }

    /// [`Self::feed`], with the uptime a frame gave (a `/dev/kmsg` record's).
    pub fn feed_at(
        &mut self,
        message: &str,
        span: Span,
        wall: Option<Timestamp>,
        uptime: Option<u64>,
        facts: &mut Facts,
    ) -> bool {
        let (mut uptime_us, mut message) = split_uptime(message);
        uptime_us = uptime_us.or(uptime);
        // `journalctl -o short-monotonic` looks like dmesg plus `host kernel: `;
        // a syslog line cut before its host leaves `kernel: [ uptime] …`.
        if let Some(end) = kernel_prefix_end(message) {
            let (inner_uptime, rest) = split_uptime(&message[end..]);
            uptime_us = uptime_us.or(inner_uptime);
            message = rest;
        }
        // A paste cut inside the uptime (`38.773115] NVRM: …`): the rest is
        // the message; the uptime is lost.
        if uptime_us.is_none() {
            if let Some(m) = CUT_UPTIME.find(message) {
                message = &message[m.end()..];
            }
        }
        let time = KernelTime { uptime_us, wall };
        let message = message.trim_end();
        // A later line of a report pasted without the line before it keeps
        // its indentation (`               NVRM: fallen off the bus …`).
        if let Some(rest) = message.trim_start().strip_prefix("NVRM: ") {
            self.nvrm.feed(rest, span, time, facts);
            return true;
        }
        // `cat /proc/driver/nvidia/version`: the loaded module, then the
        // compiler that built it (`GCC version:  gcc version 12.2.0 …`).
        if let Some(rest) = message.strip_prefix("NVRM version: ") {
            return nvrm::proc_version(rest, span, time, facts);
        }
        if message
            .strip_prefix("GCC version:")
            .is_some_and(|rest| rest.trim_start().starts_with("gcc version "))
        {
            return true;
        }
        self.oom.feed(message, span, time, facts)
    }

    /// Closes what the input ended in the middle of.
    pub fn finish(&mut self, facts: &mut Facts) {
        self.oom.finish(facts);
    }

    /// Whether a message with no anchor may matter: only inside an OOM
    /// report. Elsewhere every event needs an anchor (`NVRM: `,
    /// `invoked oom-killer`, `Killed process`, …), and such a message is
    /// not one the kernel parser knows.
    pub fn busy(&self) -> bool {
        self.oom.busy()
    }
}

/// Pushes an event; returns its index in `facts.kernel_events`.
fn push(facts: &mut Facts, kind: KernelEventKind, time: KernelTime, span: Span) -> usize {
    facts.kernel_events.push(KernelEvent {
        kind,
        time,
        span,
        related: Vec::new(),
    });
    facts.kernel_events.len() - 1
}

/// Parses one `dmesg` segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut reader = DmesgReader::default();
    for line in lines {
        reader.full(line, facts);
    }
    reader.finish(facts)
}

/// Reads a `dmesg` segment line by line (see [`super::reader`]).
#[derive(Default)]
pub(crate) struct DmesgReader {
    parser: KernelParser,
    /// The wall time of the last prefixed line, for continuation lines.
    last: Option<Option<Timestamp>>,
    unrecognized: u32,
}

impl DmesgReader {
    pub(crate) fn read(&mut self, line: &Line<'_>, hot: bool, out: &mut Out<'_>) -> Read {
        if hot || self.parser.busy() {
            self.full(line, out.facts);
            return Read::Parsed;
        }
        // What `full` does, minus the parser, which would find nothing.
        let text = line.text;
        if text.trim().is_empty() {
            return Read::Skimmed(None);
        }
        if let Some((wall, _)) = split_wrapper(text) {
            self.last = Some(wall.or(line.frame.time));
        } else if line.frame.kernel {
            self.last = Some(line.frame.time);
        } else if !(self.last.is_some() && text.starts_with([' ', '\t'])) {
            self.last = None;
            self.unrecognized += 1;
        }
        // A kernel line is timed only by the event it makes.
        Read::Skimmed(None)
    }

    fn full(&mut self, line: &Line<'_>, facts: &mut Facts) {
        let text = line.text;
        if text.trim().is_empty() {
            return;
        }
        let frame = line.frame;
        if let Some((wall, message)) = split_wrapper(text) {
            let wall = wall.or(frame.time);
            self.parser
                .feed_at(message, line.span, wall, frame.uptime_us, facts);
            self.last = Some(wall);
            return;
        }
        // A kernel record's frame is its wrapper (a kmsg record, talosctl
        // dmesg): the text under it is the message.
        if frame.kernel {
            self.parser
                .feed_at(text, line.span, frame.time, frame.uptime_us, facts);
            self.last = Some(frame.time);
            return;
        }
        // A record with several lines prints the later ones indented.
        if let (Some(wall), true) = (self.last, text.starts_with([' ', '\t'])) {
            self.parser.feed(text.trim_start(), line.span, wall, facts);
            return;
        }
        // `dmesg -t` and grep output: no wrapper, only known messages count.
        self.last = None;
        if !self.parser.feed(text, line.span, None, facts) {
            self.unrecognized += 1;
        }
    }

    pub(crate) fn finish(&mut self, facts: &mut Facts) -> u32 {
        self.parser.finish(facts);
        self.unrecognized
    }

    /// Lines not recognised so far: whether the last one was.
    pub(crate) fn unrecognized(&self) -> u32 {
        self.unrecognized
    }
}

/// Strips the dmesg wrapper of a line: the wall time it printed (if any) and
/// the message, which may still start with a `[ uptime]`. `None` when the
/// line has no wrapper. The frames around a wrapper (`dmesg -r`'s `<4>`,
/// `-x`'s `kern  :warn  : `, a quote's `> `) were peeled before
/// (`ingest::frame`).
fn split_wrapper(text: &str) -> Option<(Option<Timestamp>, &str)> {
    // What each pattern needs first, tested before it: most lines of a big
    // log are `[ uptime] …`, and these tests cost next to nothing.
    let first = |s: &str| s.as_bytes().first().copied();
    let mut rest = text;
    let mut wrapped = false;
    // A syslog line cut before its host: `kernel: [ 8712.345678] …`.
    if first(rest) == Some(b'k') {
        if let Some(after) = rest.strip_prefix("kernel:") {
            if after.starts_with(' ') {
                rest = after.trim_start_matches(' ');
                wrapped = true;
            }
        }
    }
    let bracket = first(rest) == Some(b'[');
    if bracket && rest.as_bytes().get(1).is_some_and(u8::is_ascii_uppercase) {
        if let Some(c) = CTIME.captures(rest) {
            let wall = ctime(&c);
            let end = c.get(0).map_or(0, |m| m.end());
            return wall.map(|w| (Some(w), &rest[end..]));
        }
    }
    if first(rest).is_some_and(|b| b.is_ascii_digit()) {
        if let Some(c) = ISO.captures(rest) {
            let wall = iso(&c);
            let end = c.get(0).map_or(0, |m| m.end());
            return wall.map(|w| (Some(w), &rest[end..]));
        }
    }
    if bracket && UPTIME.is_match(rest) {
        return Some((None, rest));
    }
    if bracket {
        if let Some(m) = RELTIME.find(rest) {
            return Some((None, &rest[m.end()..]));
        }
    }
    wrapped.then_some((None, rest))
}

/// `[ 8712.345678] message` → (8712345678 µs, `message`). The common form
/// is read by position ([`plain_uptime`]); `dmesg -d`'s `<delta>` and other
/// spacings by [`UPTIME`], the position reader's oracle in the tests.
fn split_uptime(message: &str) -> (Option<u64>, &str) {
    if let Some((uptime, end)) = plain_uptime(message) {
        return (uptime, &message[end..]);
    }
    let Some(c) = UPTIME.captures(message) else {
        return (None, message);
    };
    let end = c.get(0).map_or(0, |m| m.end());
    (micros(&c["s"], &c["frac"]), &message[end..])
}

/// `[`, spaces, the seconds, `.`, 1–9 digits of fraction, `]` and an
/// optional space: the uptime in µs (`None` when it overflows) and where
/// the message starts. `None` for any other shape, which [`UPTIME`] reads.
fn plain_uptime(message: &str) -> Option<(Option<u64>, usize)> {
    let bytes = message.as_bytes();
    let digits = |from: usize| {
        bytes
            .get(from..)
            .unwrap_or_default()
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    if bytes.first() != Some(&b'[') {
        return None;
    }
    let start = 1 + bytes[1..].iter().take_while(|&&b| b == b' ').count();
    let whole = digits(start);
    if whole == 0 || bytes.get(start + whole) != Some(&b'.') {
        return None;
    }
    let from = start + whole + 1;
    let fraction = digits(from);
    let close = from + fraction;
    if !(1..=9).contains(&fraction) || bytes.get(close) != Some(&b']') {
        return None;
    }
    let end = close + 1 + usize::from(bytes.get(close + 1) == Some(&b' '));
    let uptime = micros(&message[start..start + whole], &message[from..close]);
    Some((uptime, end))
}

/// Seconds and a fraction's digits as printed → µs (the fraction
/// right-padded or cut to six digits); `None` when it overflows.
fn micros(secs: &str, fraction: &str) -> Option<u64> {
    let secs: u64 = secs.parse().ok()?;
    let mut us: u64 = 0;
    for i in 0..6 {
        let digit = fraction
            .as_bytes()
            .get(i)
            .map_or(0, |b| u64::from(b - b'0'));
        us = us * 10 + digit;
    }
    secs.checked_mul(1_000_000)?.checked_add(us)
}

/// Where the message starts after `kernel: ` or `host kernel: ` (one
/// word, one space), as [`KERNEL_PREFIX`] reads it: asked of every kernel
/// message, so a line without `kernel:` where it could stand is refused
/// before the regex runs.
fn kernel_prefix_end(message: &str) -> Option<usize> {
    let after_word = message
        .find(char::is_whitespace)
        .filter(|&at| at > 0 && message[at..].starts_with(' '))
        .map(|at| at + 1);
    let candidate = message.starts_with("kernel:")
        || after_word.is_some_and(|at| message[at..].starts_with("kernel:"));
    candidate
        .then(|| KERNEL_PREFIX.find(message).map(|m| m.end()))
        .flatten()
}

fn ctime(c: &regex::Captures<'_>) -> Option<Timestamp> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == &c["mon"])? as u32 + 1;
    let date = NaiveDate::from_ymd_opt(c["year"].parse().ok()?, month, c["day"].parse().ok()?)?;
    let time = NaiveTime::parse_from_str(&c["hms"], "%H:%M:%S").ok()?;
    Some(Timestamp {
        local: NaiveDateTime::new(date, time),
        offset_secs: None,
        year_known: true,
    })
}

fn iso(c: &regex::Captures<'_>) -> Option<Timestamp> {
    let date = NaiveDate::parse_from_str(&c["date"], "%Y-%m-%d").ok()?;
    let mut time = NaiveTime::parse_from_str(&c["hms"], "%H:%M:%S").ok()?;
    if let Some(frac) = c.name("frac") {
        let nanos: u32 = format!("{:0<9}", frac.as_str()).get(..9)?.parse().ok()?;
        time = chrono::Timelike::with_nanosecond(&time, nanos)?;
    }
    let offset = match c.name("sign") {
        Some(sign) => {
            let hours: i32 = c["oh"].parse().ok()?;
            let minutes: i32 = c["om"].parse().ok()?;
            let secs = hours * 3600 + minutes * 60;
            if sign.as_str() == "-" { -secs } else { secs }
        }
        None => 0,
    };
    Some(Timestamp {
        local: NaiveDateTime::new(date, time),
        offset_secs: Some(offset),
        year_known: true,
    })
}

/// `0000:3b:00`, `0000:3b:00.0` or `3b:00.0` (domain 0) → `0000:3b:00.0`.
fn bus_id(value: &str) -> Option<String> {
    let with_function = match value.matches(':').count() {
        2 if !value.contains('.') => format!("{value}.0"),
        1 if value.contains('.') => format!("0000:{value}"),
        _ => value.to_owned(),
    };
    super::values::normalize_bus_id(&with_function)
}

/// A bus id as its line prints it, in lower case: an Xid line's
/// `PCI:0000:3B:00` stays `0000:3b:00`, without the function the line never
/// printed; one printed with its function (`0000:3b:00.0`) keeps it. Every
/// comparison goes through `BusId`, which reads both spellings.
fn printed_bus_id(value: &str) -> Option<String> {
    let id = crate::model::BusId::parse(value)?;
    Some(if value.contains('.') {
        id.to_string()
    } else {
        id.kernel()
    })
}

#[cfg(test)]
mod tests;
