//! `nvidia-smi` tables read as they stream, one snapshot at a time.
//!
//! `nvidia-smi -l 1` (or `watch nvidia-smi` kept in a file) prints a table
//! a second: one segment that may be a day long. Its lines are parsed as
//! each snapshot ends (the next date line or header), not held to the end
//! of the segment, and snapshots that say the same thing are aggregated as
//! repeated lines are ([`super::aggregate`]): each snapshot's template is
//! the templates of its lines (every number and the blanks that align it
//! left out: a table is figures, and a GPU's utilisation or memory changes
//! every second), the first [`READ_FIRST`] snapshots of a template are
//! read, the later ones only
//! counted (their messages and kept lines let go), and the last of them is
//! read at the end of the segment, so the rules see the last state (an
//! ECC counter only grows until a reset: the last snapshot holds the most) and a
//! report cites real lines. What was counted is a [`Repeat`] (count, first
//! and last snapshot's header line). Memory then grows with the number of
//! different snapshots, not with how often each was printed.
//!
//! The limits are far above what any fixture repeats, so a fixture's
//! tables are read as the whole-segment parser reads them
//! (`tests/it/prefilter.rs`).

use std::collections::HashMap;

use super::Line;
use super::aggregate::Repeats;
use super::nvidia_smi_table::{Snapshot, TableStream, starts_snapshot};
use super::read::{Out, Read};
use super::recognize::{Except, LineReader, Tally};
use crate::model::{Facts, Message, Repeat};
use crate::source::{KeptLines, Span};

/// A snapshot longer than this is read as it is, whatever its template.
const MAX_SNAPSHOT_LINES: usize = 4096;
const MAX_SNAPSHOT_BYTES: usize = 1 << 20;

/// Snapshot templates followed at most; a snapshot of a new template past
/// this is read like any.
const MAX_TEMPLATES: usize = 1024;

/// Snapshots of one template read before the rest is counted, at most.
const READ_FIRST: u32 = 16;

/// The template of a table's line: its bytes other than digits and blanks,
/// hashed (FNV-1a). A cell's figures change from one snapshot to the next
/// (`   9MiB` then `  10MiB`: the digits and the padding that aligns them)
/// while the table says the same thing; its words, bars and names stay.
/// Eight bytes at a time: which of them count is told for all eight at
/// once ([`blanks`]), and only those are hashed (a border row is all
/// dashes; a data row mostly padding and figures).
fn template(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut chunks = text.as_bytes().chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        // The top bit of each byte that counts, first byte lowest.
        let mut counted = !blanks(x) & (0x80 * ONES);
        if counted == 0x80 * ONES {
            // All eight (a border's dashes): no bit to find.
            hash = chunk.iter().fold(hash, |hash, &b| fnv(hash, b));
            continue;
        }
        while counted != 0 {
            let at = counted.trailing_zeros() & !7;
            hash = fnv(hash, (x >> at) as u8);
            counted &= counted - 1;
        }
    }
    for &b in chunks.remainder() {
        if !(b.is_ascii_digit() || b == b' ' || b == b'\t') {
            hash = fnv(hash, b);
        }
    }
    hash
}

/// One byte into an FNV-1a hash.
fn fnv(hash: u64, b: u8) -> u64 {
    (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// The top bit of each of eight bytes (little-endian in `x`) that is a
/// digit, a space or a tab. Per byte, with no carry between bytes: `b ^
/// 0x30` is below 10 for a digit, `b ^ 0x20` zero for a space, `b ^ 0x09`
/// zero for a tab.
fn blanks(x: u64) -> u64 {
    const HIGH: u64 = ONES * 0x80;
    // Top bit set where the byte is below `n` (a byte below 0x80 only):
    // `0x7f + n - (y & 0x7f)` is 0x80 or more where `y & 0x7f < n`.
    let below = |y: u64, n: u64| (ONES * (0x7f + n)).wrapping_sub(y & !HIGH) & !y & HIGH;
    below(x ^ (ONES * 0x30), 10) | below(x ^ (ONES * 0x20), 1) | below(x ^ (ONES * 0x09), 1)
}

/// Lines of text: one arena, each line's span and end.
#[derive(Default)]
struct Lines {
    text: String,
    lines: Vec<(Span, usize, Option<u64>)>,
}

impl Lines {
    fn push(&mut self, span: Span, text: &str, key: Option<u64>) {
        self.text.push_str(text);
        self.lines.push((span, self.text.len(), key));
    }

    fn iter(&self) -> impl Iterator<Item = (Span, &str)> {
        self.lines.iter().enumerate().map(|(i, &(span, end, _))| {
            let start = if i == 0 { 0 } else { self.lines[i - 1].1 };
            (span, &self.text[start..end])
        })
    }

    fn clear(&mut self) {
        self.text.clear();
        self.lines.clear();
    }

    /// Moves the lines from `at` on into a new set.
    fn split_off(&mut self, at: usize) -> Lines {
        let mut rest = Lines::default();
        let start = if at == 0 { 0 } else { self.lines[at - 1].1 };
        for i in at..self.lines.len() {
            let (span, end, key) = self.lines[i];
            let from = if i == 0 { 0 } else { self.lines[i - 1].1 };
            rest.push(span, &self.text[from..end], key);
        }
        self.text.truncate(start);
        self.lines.truncate(at);
        rest
    }
}

/// One template of snapshots.
struct Template {
    seen: u64,
    first: Span,
    last: Span,
    /// The last snapshot only counted: its lines, the text kept of them
    /// and its messages, read at the end.
    counted: Option<Counted>,
}

#[derive(Default)]
struct Counted {
    body: Lines,
    kept_text: String,
    kept: Vec<(u32, usize)>,
    messages: Vec<Message>,
}

/// The reader of an `nvidia-smi` table segment.
pub(super) struct TableReader {
    limits: Repeats,
    parser: TableStream,
    /// The open snapshot; whether it has its header yet.
    open: Lines,
    header: Option<Span>,
    templates: HashMap<u64, Template>,
    /// Lines the table parser did not recognise: they meet the line-level
    /// recognisers at the end, in order.
    missed: Lines,
    counted: bool,
}

impl TableReader {
    pub(super) fn new() -> TableReader {
        TableReader {
            limits: Repeats::UNBOUNDED,
            parser: TableStream::default(),
            open: Lines::default(),
            header: None,
            templates: HashMap::new(),
            missed: Lines::default(),
            counted: false,
        }
    }

    /// Aggregates repeated snapshots within `limits`: at most
    /// [`READ_FIRST`] snapshots of a template are read before the rest is
    /// counted (a snapshot is some forty lines).
    pub(super) fn aggregate(&mut self, limits: Repeats) {
        self.limits = Repeats {
            first: match limits.first {
                u32::MAX => u32::MAX,
                n => n.min(READ_FIRST),
            },
            last: limits.last,
        };
    }

    pub(super) fn read(&mut self, line: &Line<'_>, out: &mut Out<'_>) -> Read {
        let kind = starts_snapshot(line.text);
        if self.header.is_some() && matches!(kind, Snapshot::Date | Snapshot::Header) {
            // A new table: the border right above its header is its own.
            let mut at = self.open.lines.len();
            if kind == Snapshot::Header
                && self
                    .open
                    .iter()
                    .last()
                    .is_some_and(|(_, t)| starts_snapshot(t) == Snapshot::Border)
            {
                at -= 1;
            }
            let rest = self.open.split_off(at);
            self.close_snapshot(false, out);
            self.open = rest;
        }
        let key = match self.limits.first {
            u32::MAX => None,
            _ => Some(template(line.text)),
        };
        self.open.push(line.span, line.text, key);
        if kind == Snapshot::Header && self.header.is_none() {
            self.header = Some(line.span);
        }
        if self.open.lines.len() >= MAX_SNAPSHOT_LINES || self.open.text.len() >= MAX_SNAPSHOT_BYTES
        {
            self.close_snapshot(true, out);
        }
        Read::Parsed
    }

    /// Ends the open snapshot: read, or only counted.
    fn close_snapshot(&mut self, read: bool, out: &mut Out<'_>) {
        let Some(&(first, _, _)) = self.open.lines.first() else {
            return;
        };
        let at = self.header.take().unwrap_or(first);
        if read || self.limits.first == u32::MAX {
            self.parse_open(out.facts);
            return;
        }
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for &(_, _, key) in &self.open.lines {
            hash = (hash ^ key.unwrap_or(0x9e37_79b9)).wrapping_mul(0x0100_0000_01b3);
        }
        if !self.templates.contains_key(&hash) && self.templates.len() >= MAX_TEMPLATES {
            self.parse_open(out.facts);
            return;
        }
        let template = self.templates.entry(hash).or_insert(Template {
            seen: 0,
            first: at,
            last: at,
            counted: None,
        });
        template.seen += 1;
        template.last = at;
        if template.seen <= u64::from(self.limits.first) {
            self.parse_open(out.facts);
            return;
        }
        // Only counted: what the stream kept of it goes, and waits here in
        // case it is the template's last.
        self.counted = true;
        let last = self.open.lines.last().map_or(first.line, |l| l.0.line);
        let counted = template.counted.get_or_insert_with(Counted::default);
        counted.kept_text.clear();
        counted.kept.clear();
        out.kept
            .forget_into(first.line, last, &mut counted.kept_text, &mut counted.kept);
        counted.messages.clear();
        let messages = &mut out.facts.messages;
        let mut end = messages.len();
        while end > 0 && messages[end - 1].span.line > last {
            end -= 1;
        }
        let mut start = end;
        while start > 0 && messages[start - 1].span.line >= first.line {
            start -= 1;
        }
        counted.messages.extend(messages.drain(start..end));
        std::mem::swap(&mut counted.body, &mut self.open);
        self.open.clear();
    }

    fn parse_open(&mut self, facts: &mut Facts) {
        for (span, text) in self.open.iter() {
            if !self.parser.feed(text, span, facts) {
                self.missed.push(span, text, None);
            }
        }
        self.open.clear();
    }

    /// Closes the segment: the last snapshot, the last of each template
    /// only counted, and the lines no parser knew.
    pub(super) fn finish(mut self, out: &mut Out<'_>) -> Tally {
        self.close_snapshot(false, out);
        let mut counted: Vec<(Span, Span, u64, Counted)> = self
            .templates
            .drain()
            .filter_map(|(_, t)| Some((t.first, t.last, t.seen, t.counted?)))
            .collect();
        counted.sort_by_key(|c| c.1);
        for (first, last, seen, c) in counted {
            for (span, text) in c.body.iter() {
                if !self.parser.feed(text, span, out.facts) {
                    self.missed.push(span, text, None);
                }
            }
            let mut start = 0;
            for &(n, end) in &c.kept {
                out.kept.push(n, &c.kept_text[start..end]);
                start = end;
            }
            out.facts.messages.extend(c.messages);
            out.facts.repeats.push(Repeat {
                first,
                last,
                count: seen,
                read: self.limits.first,
                kept_last: 1,
            });
        }
        self.parser.close(out.facts);
        if self.counted {
            // What was read last goes where its lines are.
            let facts = &mut *out.facts;
            facts.messages.sort_by_key(|m| m.span);
            facts.gpus.sort_by_key(|g| g.span);
            facts.gpu_processes.sort_by_key(|p| p.span);
            facts.smi_headers.sort_by_key(|h| h.span);
            facts.process_listings.sort_by_key(|l| l.span);
            facts.line_times.sort_by_key(|t| t.0);
            let mut missed: Vec<(Span, &str)> = self.missed.iter().collect();
            missed.sort_by_key(|m| m.0);
            return recognise(&missed, out.facts);
        }
        let missed: Vec<(Span, &str)> = self.missed.iter().collect();
        recognise(&missed, out.facts)
    }
}

/// The lines the table parser missed meet every recogniser, in order, as
/// lines of an unknown segment do. Each was read in full: its text is kept.
fn recognise(missed: &[(Span, &str)], facts: &mut Facts) -> Tally {
    let mut reader = LineReader::new(Except::Nothing);
    let mut kept = KeptLines::default();
    let mut out = Out {
        facts,
        kept: &mut kept,
    };
    for &(span, text) in missed {
        reader.read(&Line::bare(span, text), true, &mut out);
    }
    reader.finish(facts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceId;

    /// The template, eight bytes at a time, skips what the byte loop skips:
    /// every byte value at every place of a chunk, and
    /// every line of the nvidia-smi family's tables, give the byte loop's
    /// hash.
    #[test]
    fn the_template_is_the_byte_loop_hash() {
        let by_bytes = |text: &str| {
            text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, b| {
                if b.is_ascii_digit() || b == b' ' || b == b'\t' {
                    hash
                } else {
                    (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                }
            })
        };
        for fill in [b' ', b'\t', b'7'] {
            for at in 0..8 {
                for b in 0..=255u8 {
                    let mut chunk = [fill; 8];
                    chunk[at] = b;
                    let blank = b.is_ascii_digit() || b == b' ' || b == b'\t';
                    let want = if blank { 0x80 << (8 * at) } else { 0 };
                    let got = blanks(u64::from_le_bytes(chunk)) & (0xff << (8 * at));
                    assert_eq!(got, want, "{chunk:?}");
                }
            }
        }
        let tsv = std::fs::read_to_string(
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join("bench/families/nvidia-smi.tsv"),
        )
        .expect("family file");
        let mut lines = 0;
        for line in tsv.lines().filter_map(|row| row.splitn(4, '\t').nth(3)) {
            for cut in 0..line.len().min(9) {
                let text = line.get(cut..).unwrap_or("");
                assert_eq!(template(text), by_bytes(text), "{text:?}");
            }
            lines += 1;
        }
        assert!(lines > 100, "{lines} lines");
    }

    /// The first table of the nvidia-smi family (the seed incident's, real
    /// output: fixtures/real/000-seed-ct200-ghost-one-rank-tp0).
    fn table() -> Vec<String> {
        let tsv = std::fs::read_to_string(
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join("bench/families/nvidia-smi.tsv"),
        )
        .expect("family file");
        let mut lines = Vec::new();
        for row in tsv.lines() {
            let cols: Vec<&str> = row.splitn(4, '\t').collect();
            match cols.first() {
                Some(&"block") if lines.is_empty() => lines.push(cols[3].to_owned()),
                Some(&"+") if !lines.is_empty() => lines.push(cols[3].to_owned()),
                Some(_) if !lines.is_empty() => break,
                _ => {}
            }
        }
        lines
    }

    /// A loop of one table whose figures change: the first three snapshots
    /// and the last are read, the rest counted, the repeat cites headers.
    #[test]
    fn a_loop_of_one_table_is_counted_past_the_first_snapshots() {
        let table = table();
        assert!(table.len() > 20, "{}", table.len());
        let mut reader = TableReader::new();
        reader.aggregate(Repeats { first: 3, last: 2 });
        let (mut facts, mut kept) = (Facts::default(), KeptLines::default());
        let mut n = 0;
        for i in 0..40 {
            for line in &table {
                n += 1;
                // The memory figures change from one snapshot to the next.
                let text = line.replace("55295MiB", &format!("{}MiB", 55295 + i * 7));
                let span = Span {
                    source: SourceId(0),
                    line: n,
                };
                kept.push(n, &text);
                let mut out = Out {
                    facts: &mut facts,
                    kept: &mut kept,
                };
                reader.read(&Line::bare(span, &text), &mut out);
            }
        }
        let mut out = Out {
            facts: &mut facts,
            kept: &mut kept,
        };
        reader.finish(&mut out);
        assert_eq!(
            facts.smi_headers.len(),
            4,
            "three read first, the last at the end"
        );
        let size = table.len() as u32;
        let last = facts.smi_headers.last().expect("headers").span.line;
        assert!(last > 39 * size, "the last snapshot is read: {last}");
        assert_eq!(facts.repeats.len(), 1);
        let r = &facts.repeats[0];
        assert_eq!((r.count, r.read, r.kept_last), (40, 3, 1));
        assert_eq!(r.last.line, last);
        // What is cited is kept; a counted snapshot's lines are not.
        assert!(
            kept.get(r.first.line)
                .is_some_and(|t| t.contains("NVIDIA-SMI"))
        );
        assert!(kept.get(last).is_some());
        assert!(kept.get(10 * size + 3).is_none());
    }
}
