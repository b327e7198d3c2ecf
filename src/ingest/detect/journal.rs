//! Detection of journalctl output: `-o json` and `json-pretty`, `verbose`,
//! the one-line modes (`short`, `short-precise`, `short-iso`, `short-full`,
//! `with-unit`, `short-unix`, `short-monotonic`, `short-delta`), and the
//! marker and `-x` catalog lines journalctl prints between entries.
//!
//! Not here: `-o cat` prints bare messages, which no sniffer can tell from
//! the program's own log, so it is read only under `--format-hint`; `-o
//! export` and binary journal files are turned into JSON lines by the bundle
//! reader before detection sees them.

use super::{Class, holds, literal, re};
use crate::ingest::Format;
use crate::ingest::journal_json::PRETTY_FIELD;
use crate::ingest::journal_marks::is_marker;
use crate::ingest::journal_verbose::header_time;

re!(
    JOURNAL_SHORT_ISO,
    r"^[0-9]{4}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]+)?[+-][0-9][0-9]:?[0-9][0-9] \S+ [^:]*?\S: "
);
// The month is `%b` in the reader's locale (`дек`, `4月`, `mar`): one not
// in the C locale counts only when journal_time knows it for a month.
re!(
    JOURNAL_SHORT,
    r"^(?:[A-Z][a-z]{2}|\p{L}{3,5}\.?|[ 1]?[0-9](?:月|월)) [ 0-3][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]{6})? \S+ [^:]*?\S: "
);

/// [`JOURNAL_SHORT`], with a month name outside the C locale checked.
fn short_matches(line: &str) -> bool {
    short_shape(line.as_bytes())
        && JOURNAL_SHORT.is_match(line)
        && (line.as_bytes().get(3) == Some(&b' ') && line.as_bytes()[0].is_ascii_uppercase()
            || crate::ingest::journal_time::split_stamp(line).is_some())
}
re!(
    JOURNAL_FULL,
    r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [0-9]{4}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]{6})? (?:[A-Z][A-Za-z]{1,5}|[+-][0-9][0-9](?::?[0-9][0-9])?) \S+ [^:]*?\S: "
);
// `with-unit` prints the unit, or `system unit/user unit`, where the
// identifier would be.
re!(
    WITH_UNIT,
    r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [0-9]{4}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]{6})? \S+ \S+ [A-Za-z0-9:_.@\\-]+\.(?:service|scope|slice|socket|mount|timer|target|path|device|swap|automount)(?:/[A-Za-z0-9:_.@\\-]+)?(?:\[[0-9]+\])?: "
);
re!(JOURNAL_UNIX, r"^[0-9]{9,11}\.[0-9]{6} \S+ [^:]*?\S: ");
// The monotonic modes look like `dmesg` (`[ 8712.345678] NVRM: …`,
// `[    2.1] usb 1-1: …`), so they count only with a host and then either
// `kernel:` or an `ident[pid]:`, which the kernel never prints there.
re!(
    JOURNAL_MONOTONIC,
    r"^\[ *[0-9]+\.[0-9]{6}\] \S+ (?:kernel|[^\s\[\]:][^\[\]:]*\[[0-9]+\]): "
);
re!(
    JOURNAL_DELTA,
    r"^\[ *[0-9]+\.[0-9]{6}(?: < *[0-9]+\.[0-9]{6}[ *]>| +)\] \S+ (?:kernel|[^\s\[\]:][^\[\]:]*\[[0-9]+\]): "
);
re!(VERBOSE_FIELD, r"^ {4}[A-Z0-9_]+=");

/// A `-o short-iso` line (see `continues_as` in the parent module).
pub(super) fn is_short_iso(line: &str) -> bool {
    short_iso_ascii(line).unwrap_or_else(|| JOURNAL_SHORT_ISO.is_match(line))
}

/// [`JOURNAL_SHORT_ISO`] by hand, on the path every line of a big journal
/// takes: its time is ASCII digits by position; `None` where its Unicode
/// `\S` must decide (a host or identifier that is not ASCII).
fn short_iso_ascii(line: &str) -> Option<bool> {
    let b = line.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    if !iso_time_shape(b) {
        return Some(false);
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Some(false);
        }
    }
    if !matches!(b.get(i), Some(b'+' | b'-')) || !digits(i + 1..i + 3) {
        return Some(false);
    }
    i += 3;
    if b.get(i) == Some(&b':') {
        i += 1;
    }
    if !digits(i..i + 2) || b.get(i + 2) != Some(&b' ') {
        return Some(false);
    }
    // `\S+ `: the host runs to the first space, with no other whitespace
    // (nor anything past ASCII, which the regex must judge): the first byte
    // that is not visible ASCII is that space. Eight bytes at a time, as
    // the colon's search: every line of a big journal asks.
    let host = i + 3;
    let end = host + first_not_graphic(b.get(host..)?)?;
    if b[end] != b' ' || end == host {
        return None;
    }
    // `[^:]*?\S: `: the first colon after the host ends `\S: `, or starts `:: `.
    let start = end + 1;
    let colon = start + find_byte(&b[start..], b':')?;
    let before = colon.checked_sub(1).filter(|&p| p >= start).map(|p| b[p]);
    match before {
        Some(c) if !c.is_ascii() => None,
        Some(c) if !c.is_ascii_whitespace() && c != 0x0b && b.get(colon + 1) == Some(&b' ') => {
            Some(true)
        }
        _ => Some(b.get(colon + 1) == Some(&b':') && b.get(colon + 2) == Some(&b' ')),
    }
}

/// `dddd-dd-ddTdd:dd:dd` at the start of `b`: its first sixteen bytes
/// eight at a time (each byte a digit where the shape has one, the
/// separators where it has them), then `:dd`.
fn iso_time_shape(b: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    let Some(head) = b.get(..19) else {
        return false;
    };
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&head[at..at + 8]);
        u64::from_le_bytes(w)
    };
    // The top bit of each byte that is a digit: `b ^ 0x30` below 10.
    let digits = |x: u64| {
        let y = x ^ (ONES * 0x30);
        (ONES * (0x7f + 10)).wrapping_sub(y & !HIGH) & !y & HIGH
    };
    // Byte by byte, first lowest: the separators' places and bytes.
    let fits = |x: u64, shape: &[u8; 8]| {
        let (mut seps, mut want) = (0u64, 0u64);
        for (k, &c) in shape.iter().enumerate() {
            if c != b'0' {
                seps |= 0xff << (8 * k);
                want |= u64::from(c) << (8 * k);
            }
        }
        (digits(x) | (seps & HIGH)) == HIGH && (x & seps) == want
    };
    fits(word(0), b"0000-00-")
        && fits(word(8), b"00T00:00")
        && head[16] == b':'
        && head[17].is_ascii_digit()
        && head[18].is_ascii_digit()
}

/// What every line [`JOURNAL_SHORT`] matches has by position: after the
/// month (no space in it but a leading one, ` 4月`), ` dd hh:` with the day
/// `[ 0-3][0-9]`. Tested before the regex, which every line of a segment
/// without a fast path would otherwise pay for (any line that starts with
/// a capital: `RuntimeError: …`).
fn short_shape(b: &[u8]) -> bool {
    let Some(p) = b
        .get(1..)
        .and_then(|rest| memchr::memchr(b' ', rest))
        .map(|p| p + 1)
    else {
        return false;
    };
    matches!(b.get(p + 1), Some(b' ' | b'0'..=b'3'))
        && b.get(p + 2).is_some_and(u8::is_ascii_digit)
        && b.get(p + 3) == Some(&b' ')
        && b.get(p + 6) == Some(&b':')
}

/// Whether a line starts with a weekday's name, as [`WITH_UNIT`] and
/// [`JOURNAL_FULL`] must.
fn weekday_first(b: &[u8]) -> bool {
    matches!(
        b.get(..3),
        Some(b"Mon" | b"Tue" | b"Wed" | b"Thu" | b"Fri" | b"Sat" | b"Sun")
    )
}

/// A `-o short` line (see `continues_as` in the parent module).
pub(super) fn is_short(line: &str) -> bool {
    short_matches(line)
}

/// Whether this sniffer claims a line that starts with `[` (see
/// `continues_as` in the parent module): only the monotonic modes can.
pub(super) fn claims_bracketed(line: &str) -> bool {
    may_claim_bracketed(line.as_bytes())
        && (JOURNAL_MONOTONIC.is_match(line) || JOURNAL_DELTA.is_match(line))
}

/// What [`JOURNAL_MONOTONIC`] and [`JOURNAL_DELTA`] both need past their
/// bracket (the line's first `]`: none comes before it in either), read by
/// position, so that a dmesg line runs no regex and no search's call: `] `, a host up to the next space, then `kernel: ` or
/// `ident[pid]: `, an identifier holding no `:`; either way the first `:`
/// past the host is followed by a space and comes after `kernel` or a `]`.
/// Never false where either regex matches (tested below).
fn may_claim_bracketed(bytes: &[u8]) -> bool {
    // The bracket, the host and the identifier up to its `:` are a few
    // bytes each: eight bytes tested at a time, no search's call (about a
    // hundred instructions on a short line).
    let Some(close) = find_byte(bytes, b']') else {
        return false;
    };
    let Some(rest) = bytes[close + 1..].strip_prefix(b" ") else {
        return false;
    };
    // The host is at least one byte, and holds no space.
    let Some(ident) = find_byte(rest, b' ')
        .filter(|&space| space > 0)
        .map(|space| &rest[space + 1..])
    else {
        return false;
    };
    let Some(colon) = find_byte(ident, b':') else {
        return false;
    };
    // `ident[pid]` is four bytes at least.
    (&ident[..colon] == b"kernel" || colon >= 4 && ident[colon - 1] == b']')
        && ident.get(colon + 1) == Some(&b' ')
}

/// Where the first `byte` of `bytes` is: eight bytes at a time (a byte of
/// `x ^ byte…` is zero where it is `byte`: the lowest such is found exactly,
/// a borrow only reaches bytes above it), for the first bytes of a line.
fn find_byte(bytes: &[u8], byte: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut at = 0;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word) ^ (ONES * u64::from(byte));
        let zero = x.wrapping_sub(ONES) & !x & (ONES * 0x80);
        if zero != 0 {
            return Some(at + (zero.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes[at..].iter().position(|&b| b == byte).map(|p| at + p)
}

/// Where the first byte of `bytes` that is not visible ASCII (`0x21..=0x7e`)
/// is: eight bytes at a time, as [`find_byte`].
fn first_not_graphic(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut at = 0;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let low = x & (ONES * 0x7f);
        // Per byte, no carry between bytes: top bit set where b < 0x7f,
        // where b > 0x20, where b < 0x80.
        let below = (ONES * (0x7f + 0x7f)).wrapping_sub(low);
        let above = low + ONES * (0x7f - 0x20);
        let other = !(below & above & !x) & (ONES * 0x80);
        if other != 0 {
            return Some(at + (other.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes[at..]
        .iter()
        .position(|b| !b.is_ascii_graphic())
        .map(|p| at + p)
}

/// The modes whose markers and catalog lines continue a segment.
fn is_journal_text(format: Option<Format>) -> bool {
    matches!(
        format,
        Some(
            Format::JournalShort
                | Format::JournalShortIso
                | Format::JournalShortFull
                | Format::JournalShortUnix
                | Format::JournalShortMonotonic
                | Format::JournalShortDelta
                | Format::JournalWithUnit
                | Format::JournalVerbose
        )
    )
}

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    use Class::*;
    // json-seq puts 0x1E and json-sse `data: ` before each object.
    let record = line.trim_start_matches('\u{1e}');
    let record = record.strip_prefix("data: ").unwrap_or(record);
    if record.starts_with('{')
        && (record.contains("\"__REALTIME_TIMESTAMP\"") || record.contains("\"MESSAGE\""))
    {
        return Some(Strong(
            Format::JournalJson,
            "JSON object with journal fields (journalctl -o json)",
        ));
    }
    if line.trim_end() == "{" {
        // A bare `{` opens a json-pretty record only where nothing else is
        // being read: at the start of an input or under a shell prompt.
        return match current {
            Some(Format::JournalJson) => Some(Continue),
            None | Some(Format::ShellPrompt) => Some(Strong(
                Format::JournalJson,
                "bare { opening a JSON object (journalctl -o json-pretty)",
            )),
            Some(_) => None,
        };
    }
    // Each test below is gated by a byte its pattern must start with (or
    // hold): a line of another format pays a few byte tests, not a regex
    // each (issue 23: the sniffers ran every regex on every line of a
    // segment without a fast path).
    let first = line.as_bytes().first().copied().unwrap_or(0);
    if first == b'\t' && PRETTY_FIELD.is_match(line) {
        return Some(match current {
            Some(Format::JournalJson) => Continue,
            _ => Strong(
                Format::JournalJson,
                "tab-indented \"FIELD\" : value (journalctl -o json-pretty)",
            ),
        });
    }
    // `… [s=…;i=…;…]` ends a verbose header.
    literal!(CURSOR, "[s=");
    if holds(line, &CURSOR) && header_time(line).is_some() {
        return Some(Strong(
            Format::JournalVerbose,
            "timestamp and [s=…;i=…] cursor header (journalctl -o verbose)",
        ));
    }
    if first == b' ' && VERBOSE_FIELD.is_match(line) && current == Some(Format::JournalVerbose) {
        return Some(Continue);
    }
    if first.is_ascii_digit() && JOURNAL_SHORT_ISO.is_match(line) {
        return Some(Strong(
            Format::JournalShortIso,
            "ISO timestamp, host, ident[pid]: (journalctl -o short-iso)",
        ));
    }
    let weekday = weekday_first(line.as_bytes());
    if weekday && WITH_UNIT.is_match(line) {
        return Some(Strong(
            Format::JournalWithUnit,
            "weekday timestamp, host, unit[pid]: (journalctl -o with-unit)",
        ));
    }
    if weekday && JOURNAL_FULL.is_match(line) {
        // A with-unit dump prints the identifier for entries without a
        // unit (the kernel's): such lines stay in its segment.
        return Some(match current {
            Some(Format::JournalWithUnit) => Continue,
            _ => Strong(
                Format::JournalShortFull,
                "weekday timestamp with zone, host, ident[pid]: (journalctl -o short-full)",
            ),
        });
    }
    if first.is_ascii_digit() && JOURNAL_UNIX.is_match(line) {
        return Some(Strong(
            Format::JournalShortUnix,
            "epoch seconds, host, ident[pid]: (journalctl -o short-unix)",
        ));
    }
    if short_matches(line) {
        return Some(Strong(
            Format::JournalShort,
            "syslog timestamp, host, ident[pid]: (journalctl -o short)",
        ));
    }
    if first == b'[' && JOURNAL_MONOTONIC.is_match(line) {
        return Some(Strong(
            Format::JournalShortMonotonic,
            "[seconds since boot], host, ident[pid]: (journalctl -o short-monotonic)",
        ));
    }
    if first == b'[' && JOURNAL_DELTA.is_match(line) {
        return Some(Strong(
            Format::JournalShortDelta,
            "[seconds since boot <delta>], host, ident[pid]: (journalctl -o short-delta)",
        ));
    }
    if first == b'-' && is_marker(line) {
        return Some(if is_journal_text(current) {
            Continue
        } else {
            Strong(Format::JournalShort, "journalctl marker line")
        });
    }
    // `-x` catalog lines: `░░ …` (248+) or `-- …` (≤ 247) under an entry.
    if line.starts_with("░░") || (line.starts_with("--") && is_journal_text(current)) {
        return Some(Continue);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(line: &str, current: Option<Format>) -> Option<Format> {
        match sniff(line, current) {
            Some(Class::Strong(format, _)) => Some(format),
            Some(Class::Continue) => current,
            None => None,
        }
    }

    /// The byte tests before the regexes let through every line the
    /// regexes match, in every locale's month.
    #[test]
    fn the_byte_gates_are_necessary() {
        for line in [
            "Jun 01 12:00:04 h x: m",
            "Jun  1 12:00:04.000100 h x: m",
            "дек 30 02:17:31 mj ollama[1322]: x",
            "4月 26 19:39:33 host systemd[1]: x",
            " 4月 26 19:39:33 host systemd[1]: x",
            "12月 01 19:39:33 host systemd[1]: x",
            "12월 01 19:39:33 host systemd[1]: x",
            "mar 07 10:00:00 host kernel: x",
            "déc. 07 10:00:00 host kernel: x",
        ] {
            assert!(JOURNAL_SHORT.is_match(line), "{line}");
            assert!(short_shape(line.as_bytes()), "{line}");
        }
        for line in [
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "Jun 1 12:00:04 h x: m",
            "Jun 01 12-00:04 h x: m",
            "",
            " ",
        ] {
            assert!(!short_shape(line.as_bytes()), "{line}");
            assert!(!JOURNAL_SHORT.is_match(line), "{line}");
        }
        for line in [
            "Mon 2026-06-01 12:00:00 UTC node python3[1]: x",
            "Sun 2026-06-01 12:00:00.000100 +02:00 node vllm.service[4]: x",
        ] {
            assert!(
                JOURNAL_FULL.is_match(line) || WITH_UNIT.is_match(line),
                "{line}"
            );
            assert!(weekday_first(line.as_bytes()), "{line}");
        }
        assert!(!weekday_first(b"Runtime"));
    }

    /// The eight-at-a-time search finds the first byte a byte loop finds,
    /// for every byte value at every place of a line.
    #[test]
    fn the_byte_search_is_a_loop() {
        for byte in [b']', b' ', 0, 0x80, 0xff] {
            for b in 0..=255u8 {
                for at in 0..19 {
                    let mut line = [b'a'; 19];
                    line[at] = b;
                    line[(at * 7) % 19] = b.wrapping_add(1);
                    for len in 0..=line.len() {
                        let line = &line[..len];
                        let naive = line.iter().position(|&c| c == byte);
                        assert_eq!(find_byte(line, byte), naive, "{line:?} {byte}");
                    }
                }
            }
        }
        for b in 0..=255u8 {
            for at in 0..19 {
                let mut line = [b'a'; 19];
                line[at] = b;
                for len in 0..=line.len() {
                    let line = &line[..len];
                    let naive = line.iter().position(|c| !c.is_ascii_graphic());
                    assert_eq!(first_not_graphic(line), naive, "{line:?}");
                }
            }
        }
    }

    /// The test by position before the monotonic modes' regexes lets
    /// through every line they match: the modes' own lines, every line of
    /// the real incidents that starts with `[`, and each of those with one
    /// byte changed where the test looks (the bracket's end, the spaces,
    /// the identifier's `[`, `]` and `:`).
    #[test]
    fn the_bracket_gate_is_necessary() {
        let mut lines: Vec<String> = [
            "[    9.000100] gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79",
            "[    8.500000] gpu-node-7 python3[4242]: [2024-06-01 12:00:02 TP1] Init",
            "[12345.000100] gpu-node-7 my wrapper[77]: a: b",
            "[    9.000100 <    0.000100>] gpu-node-7 kernel: x",
            "[    9.000100 <    0.000100*>] gpu-node-7 sshd[1]: x",
            "[    9.000100      ] gpu-node-7 sshd[1]: x",
            "[    9.000100] h\u{a0}x kernel: x",
            "[    9.000100] h x[1]: y",
            "[ 8712.345678] NVRM: Xid (PCI:0000:1a:00): 79, pid=4242",
            "[    3.100000] pci 0000:00:01.0: [8086:1901] type 01 class 0x060400",
        ]
        .map(str::to_owned)
        .to_vec();
        let real = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("fixtures/real");
        for case in std::fs::read_dir(real).into_iter().flatten().flatten() {
            if let Ok(text) = std::fs::read_to_string(case.path().join("input.log")) {
                lines.extend(
                    text.lines()
                        .filter(|l| l.starts_with('['))
                        .map(str::to_owned),
                );
            }
        }
        assert!(lines.len() > 300, "{}", lines.len());
        let mut variants = Vec::new();
        for line in &lines {
            for (i, b) in line.bytes().enumerate().take(120) {
                if matches!(b, b']' | b' ' | b'[' | b':' | b'<' | b'>') {
                    for by in [" ", "]", "[", ":", "x", "7", ""] {
                        let mut v = line.clone();
                        if v.is_char_boundary(i + 1) {
                            v.replace_range(i..=i, by);
                            variants.push(v);
                        }
                    }
                }
            }
        }
        let mut claimed = 0;
        for line in lines.iter().chain(&variants) {
            let regex = JOURNAL_MONOTONIC.is_match(line) || JOURNAL_DELTA.is_match(line);
            assert_eq!(claims_bracketed(line), regex, "{line:?}");
            assert!(!regex || may_claim_bracketed(line.as_bytes()), "{line:?}");
            claimed += usize::from(regex);
        }
        assert!(claimed > 100, "{claimed} lines of the monotonic modes");
    }

    #[test]
    fn every_mode_and_its_near_misses() {
        use Format::*;
        let cases: &[(&str, Option<Format>)] = &[
            (
                "[    9.000100] gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79",
                Some(JournalShortMonotonic),
            ),
            (
                "[    8.500000] gpu-node-7 python3[4242]: [2024-06-01 12:00:02 TP1] Init",
                Some(JournalShortMonotonic),
            ),
            (
                "[12345.000100] gpu-node-7 my wrapper[77]: a: b",
                Some(JournalShortMonotonic),
            ),
            // dmesg, not the journal: no host, or no ident[pid].
            (
                "[ 8712.345678] NVRM: Xid (PCI:0000:1a:00): 79, pid=4242",
                None,
            ),
            (
                "[    2.345678] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
                None,
            ),
            (
                "[    3.100000] pci 0000:00:01.0: [8086:1901] type 01 class 0x060400",
                None,
            ),
            (
                "[    1.234567] systemd[1]: Detected architecture x86-64.",
                None,
            ),
            ("[    9.0001] gpu-node-7 kernel: short fraction", None),
            (
                "[    8.500000 <    1.000000 >] gpu-node-7 python3[4242]: x",
                Some(JournalShortDelta),
            ),
            (
                "[    7.500000                ] gpu-node-7 systemd[1]: Started x.service.",
                Some(JournalShortDelta),
            ),
            (
                "[    2.100000 <   54.000000*>] gpu-node-7 sshd[900]: Accepted",
                Some(JournalShortDelta),
            ),
            ("[    2.100000 <   54.000000*>] NVRM: no host", None),
            (
                "1717243204.000100 gpu-node-7 python3[4242]: Traceback (most recent call last):",
                Some(JournalShortUnix),
            ),
            (
                "1717243204.000100 gpu-node-7 kernel: NVRM: x",
                Some(JournalShortUnix),
            ),
            ("1717243204 gpu-node-7 python3[4242]: no fraction", None),
            (
                "17172.000100 gpu-node-7 python3[4242]: too few digits",
                None,
            ),
            ("1717243204.000100,4242,python3", None),
            (
                "Sat 2024-06-01 12:00:04 UTC gpu-node-7 python3[4242]: x",
                Some(JournalShortFull),
            ),
            (
                "Sat 2024-06-01 12:00:04 +08 gpu-node-7 kernel: x",
                Some(JournalShortFull),
            ),
            (
                "Sat 2024-06-01 17:30:04 IST gpu-node-7 sshd[900]: x",
                Some(JournalShortFull),
            ),
            (
                "Sat 2024-06-01 12:00:04 gpu-node-7 python3[4242]: no zone",
                None,
            ),
            (
                "     Active: failed (Result: signal) since Sat 2024-06-01 12:00:04 UTC; 2min ago",
                None,
            ),
            (
                "Sat 2024-06-01 12:00:01 UTC gpu-node-7 init.scope[1]: Started sglang.service - SGLang.",
                Some(JournalWithUnit),
            ),
            (
                "Sat 2024-06-01 12:00:02 UTC gpu-node-7 sglang.service[4242]: x",
                Some(JournalWithUnit),
            ),
            (
                "Sat 2024-06-01 12:00:06 UTC gpu-node-7 user@1000.service/app.service[1800]: x",
                Some(JournalWithUnit),
            ),
            (
                "Sat 2024-06-01 12:00:10.000000 UTC [s=56be;i=1;b=a1b2;m=1312d00;t=619d2d7866680;x=62b1]",
                Some(JournalVerbose),
            ),
            ("Sat 2024-06-01 12:00:10.000000 UTC [s=56be;i=1]", None),
            ("    MESSAGE=outside a verbose segment", None),
            ("\t\"_PID\" : \"4242\",", Some(JournalJson)),
            ("\u{1e}{\"MESSAGE\":\"x\"}", Some(JournalJson)),
            ("data: {\"MESSAGE\":\"x\"}", Some(JournalJson)),
            ("data: {\"other\":\"x\"}", None),
            ("{", Some(JournalJson)),
            // jq and Python pretty-printers write `"key": ` and spaces.
            ("  \"_PID\": \"4242\",", None),
            ("\t\"_PID\": \"4242\",", None),
            ("\t\"lower\" : \"x\",", None),
            ("░░ Subject: Unit process exited", None),
            ("-- Subject: Unit process exited", None),
        ];
        for (line, want) in cases {
            assert_eq!(class(line, None), *want, "{line}");
        }
    }

    /// The hand-written short-iso test says what the regex says, where it
    /// says anything.
    #[test]
    fn the_hand_written_short_iso_test_agrees_with_the_regex() {
        let cases = [
            "2026-11-27T09:38:40+0000 ct200 python3[1]: x",
            "2026-11-27T09:38:40.123+00:00 ct200 kernel: x",
            "2026-11-27T09:38:40+0000 ct200 my wrapper[77]: a: b",
            "2026-11-27T09:38:40+0000 ct200 x:: y",
            "2026-11-27T09:38:40+0000 ct200 :: y",
            "2026-11-27T09:38:40+0000 ct200 : y",
            "2026-11-27T09:38:40+0000 ct200 a :b",
            "2026-11-27T09:38:40+0000 ct200 a\t: b",
            "2026-11-27T09:38:40+0000 ct200 a\x0b: b",
            "2026-11-27T09:38:40+0000 ct200 a\x1c: b",
            "2026-11-27T09:38:40+0000 ct200 é: b",
            "2026-11-27T09:38:40+0000 ct200 a\u{a0}: b",
            "2026-11-27T09:38:40+0000  ct200 x: y",
            "2026-11-27T09:38:40+0000 ct\t200 x: y",
            "2026-11-27T09:38:40+0000 ct200 x:y",
            "2026-11-27T09:38:40+0000 ct200 x:",
            "2026-11-27T09:38:40+0000 ct200",
            "2026-11-27T09:38:40. ct200 x: y",
            "2026-11-27T09:38:40Z ct200 x: y",
            "2026-11-27 09:38:40+0000 ct200 x: y",
        ];
        for line in cases {
            if let Some(verdict) = short_iso_ascii(line) {
                assert_eq!(verdict, JOURNAL_SHORT_ISO.is_match(line), "{line:?}");
            }
        }
        // Hosts and identifiers of every length up to past two words of
        // the eight-byte searches, each byte of them changed to one the
        // host's and the colon's searches tell apart.
        for host in 1..20 {
            for ident in 0..20 {
                let line = format!(
                    "2026-11-27T09:38:40+0000 {} {}: x",
                    "h".repeat(host),
                    "i".repeat(ident)
                );
                assert_eq!(short_iso_ascii(&line), Some(ident > 0), "{line:?}");
                for at in 25..line.len() {
                    for with in [" ", ":", "\t", "\x0b", "\x1c", "\u{7f}", "!", "~", "é"] {
                        let mut changed = line.clone();
                        changed.replace_range(at..at + 1, with);
                        if let Some(verdict) = short_iso_ascii(&changed) {
                            let regex = JOURNAL_SHORT_ISO.is_match(&changed);
                            assert_eq!(verdict, regex, "{changed:?}");
                        }
                    }
                }
            }
        }
        // Each byte of the time and the host replaced by bytes the shape
        // tells apart (a digit's neighbours, the separators, a blank).
        for line in &cases[..2] {
            for at in 0..line.len().min(40) {
                for with in "/09:;-TtZ+. \t\u{7f}".chars() {
                    let mut changed = line.to_string();
                    changed.replace_range(at..at + 1, with.encode_utf8(&mut [0; 4]));
                    if let Some(verdict) = short_iso_ascii(&changed) {
                        let regex = JOURNAL_SHORT_ISO.is_match(&changed);
                        assert_eq!(verdict, regex, "{changed:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn context_decides_markers_catalog_fields_and_braces() {
        use Format::*;
        let cases: &[(&str, Option<Format>, Option<Format>)] = &[
            ("{", Some(ShellPrompt), Some(JournalJson)),
            ("{", Some(JournalJson), Some(JournalJson)),
            // A dict printed by a server is not a journal record.
            ("{", Some(SglangLog), None),
            ("    MESSAGE=x", Some(JournalVerbose), Some(JournalVerbose)),
            ("    _PID=1", Some(JournalShort), None),
            (
                "░░ Subject: x",
                Some(JournalShortMonotonic),
                Some(JournalShortMonotonic),
            ),
            (
                "-- Subject: x",
                Some(JournalShortFull),
                Some(JournalShortFull),
            ),
            (
                "-- Defined-By: systemd",
                Some(JournalVerbose),
                Some(JournalVerbose),
            ),
            ("-- Subject: x", Some(SglangLog), None),
            (
                "-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --",
                Some(JournalShortUnix),
                Some(JournalShortUnix),
            ),
            (
                "-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --",
                Some(JournalVerbose),
                Some(JournalVerbose),
            ),
            (
                "-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --",
                Some(SglangLog),
                Some(JournalShort),
            ),
            // A with-unit dump keeps its kernel lines.
            (
                "Sat 2024-06-01 12:00:03 UTC gpu-node-7 kernel: NVRM: x",
                Some(JournalWithUnit),
                Some(JournalWithUnit),
            ),
            (
                "Sat 2024-06-01 12:00:03 UTC gpu-node-7 kernel: NVRM: x",
                Some(JournalShort),
                Some(JournalShortFull),
            ),
        ];
        for (line, current, want) in cases {
            assert_eq!(class(line, *current), *want, "{line} after {current:?}");
        }
    }
}
