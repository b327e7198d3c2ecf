//! Repeated lines aggregated as they stream: a unit crash-looping for a
//! week prints the same few dozen lines a hundred thousand times, and a
//! report cites a handful of them. Each line gets a template (its numbers,
//! ids and times masked, [`key`]); the first [`Repeats::first`] lines of a
//! template are read like any other, the later ones only counted, and the
//! last [`Repeats::last`] of them kept aside and read at the end of the
//! input ([`Aggregator::drain`]), so that rules still see the last cycles
//! (the restart counter, the last PIDs) and reports cite real lines. Memory
//! then grows with the number of templates, not with how often each
//! occurred; and the lines read past each template's first, and those kept
//! to be read at the end, are within budgets over all templates
//! ([`READ_BUDGET`], [`RING_BUDGET`]): thousands of templates repeated a few
//! hundred times each (a request log whose status makes its template) read
//! about what a crash loop reads, not every line, and past the rings'
//! budget a template not seen lately keeps its last line for citing only.
//!
//! The limits are far above anything the repository's fixtures repeat, so
//! aggregation changes none of their reports (`tests/it/prefilter.rs`).

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use super::Format;
use crate::model::Repeat;
use crate::source::{SourceId, Span};

/// How many lines of one template are read before the rest is only counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeats {
    /// Lines of a template read in full, from its first on.
    pub first: u32,
    /// Lines of a template kept after those, the latest ones, read at the end.
    pub last: usize,
}

impl Repeats {
    /// What `analyze` and `replay` use: 256 cycles of a crash loop, then the
    /// last 16.
    pub const STANDARD: Repeats = Repeats {
        first: 256,
        last: 16,
    };

    /// Every line read (the `timeline` command, the library's default).
    pub const UNBOUNDED: Repeats = Repeats {
        first: u32::MAX,
        last: 0,
    };

    fn bounded(&self) -> bool {
        self.first != u32::MAX
    }
}

impl Default for Repeats {
    fn default() -> Self {
        Repeats::STANDARD
    }
}

/// Templates followed at most. Past this, a new line's template is its
/// first [`COARSE_PREFIX`] bytes ([`coarse`]): endless distinct lines (a
/// kernel name, a request id in words) still aggregate by what they start
/// with, and [`MAX_COARSE`] more of those are followed before a new line is
/// read like any line.
const MAX_TEMPLATES: usize = 1 << 14;

/// Lines read in full across all templates, past each template's first:
/// the templates' `first` lines are read only while the input has spent
/// less than this. A crash loop of a few dozen templates reads its 256
/// cycles; an input of thousands of templates each repeated a few hundred
/// times (a request log whose status or route makes its template) reads one
/// line of each past this, not every line, so what is kept stays bounded
/// by the number of templates, never by the input's length.
const READ_BUDGET: u64 = 1 << 13;

/// What a line read in full spends of [`READ_BUDGET`]: one line, or one
/// per [`READ_COST_BYTES`] of it. A line read in full is kept whole until
/// the report is written; a journal JSON record is ~1 KiB, six times a
/// server line, so the budget is one of bytes as much as of lines.
fn read_cost(text: &str) -> u64 {
    1 + (text.len() / READ_COST_BYTES) as u64
}

/// See [`read_cost`]: a server line (≤ 300 bytes) costs one.
const READ_COST_BYTES: usize = 320;

/// Lines kept to be read at the end, across all templates' rings. A ring
/// grows to [`Repeats::last`] lines while the budget lasts; past it, a
/// ring keeps one line, and a template that starts one takes the oldest
/// line of the ring of the template least recently seen (approximately:
/// [`Aggregator::evict`]), whose last line, when it was its only one, is
/// then kept for citing only (the report's repeated lines), not read. A
/// crash loop at the end of an input keeps its last cycle; thousands of
/// templates each repeated a few times (a request log whose status makes
/// its template) do not each add a line read in full at the end. 2,048
/// lines: the last 16 cycles of a loop of 128 templates (each line read
/// in full costs about 2 KiB until the report is written: the ollama
/// family's 5,400 templates peaked at 79 MiB with a line read for each).
const RING_BUDGET: usize = 1 << 11;

/// Coarse templates followed at most, past [`MAX_TEMPLATES`].
const MAX_COARSE: usize = 1 << 12;

/// How much of a line a coarse template keeps: a message's words, before
/// the names it goes on to print.
const COARSE_PREFIX: usize = 48;

/// The coarse template of a line: the template of its first
/// [`COARSE_PREFIX`] bytes, in a key space of its own.
fn coarse(prefix: &str, templater: &mut Templater) -> Option<u64> {
    templater.key(prefix).map(|k| !k.rotate_left(17))
}

/// What of `text` its coarse template is made of: its first
/// [`COARSE_PREFIX`] bytes, cut back to a character's start.
fn coarse_prefix(text: &str) -> &str {
    let mut cut = COARSE_PREFIX.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// Continuation lines kept with one repeated line at most.
const MAX_CONTINUATION: usize = 64;

/// The template of a line, hashed ([`hash`]), or `None` for a blank line or
/// a continuation line (indented: it follows the line it continues).
///
/// Masked: every run of digits, each one placeholder, except a line's only
/// short number standing alone (`Xid … 79,`, `GPU 3 `, `exit code 1`: a
/// different code is a different failure); every hex word with a digit in
/// it, whatever its length (ids, addresses, bus ids' `3b`, the `i=b4`
/// sequence number of a JSON record's `__CURSOR`, which would otherwise make
/// every record a template of its own). Times, PIDs, ports, sizes, counters and
/// addresses go; words stay. A line with two short numbers standing alone
/// or more is a line of figures (`Running: 59 reqs, Waiting: 0 reqs`,
/// `#running-req: 1, #queue-req: 0`): all of them are masked, so that a
/// chatty family of lines is one template.
#[cfg(test)]
pub(crate) fn key(text: &str) -> Option<u64> {
    Templater::default().key(text)
}

/// Where the templates of a stream of lines are made ([`Templater::key`]),
/// one line after another: a line's template is written into a buffer it
/// reuses, and the work of the last line of its kind is reused where the
/// two lines start alike.
///
/// The template of a line's first bytes depends only on their shape: which
/// bytes are digits, and every other byte as it is. No digit of the line is
/// copied into it but the only code's, put back at the end from the line
/// itself; each word is classed by its bytes and the bytes beside it. So
/// where the line starts as an earlier line did, digit for digit with any
/// digits, up to past the bytes [`masked`] read to mask a word (its
/// [`Mark`]), the template up to that word is the one the earlier line had:
/// kept, and the masking goes on from there. The earlier line is the last
/// one of the line's kind ([`kind`]: the shape of how it ends), not
/// the line before: a log interleaves its kinds of lines (a server's
/// request lines between its progress lines, a kernel's messages of a few
/// drivers), and the last line of a kind shares its framing with the line
/// (a journal's `2026-11-01T00:00:39+0000 node python3[40193]: `, a
/// kernel's `[11410.027379] `) and its message too, where its numbers are
/// as long: a chatty family's line masks few of its words or none.
#[derive(Default)]
pub(crate) struct Templater {
    /// The last line of each kind, and its work ([`KINDS`] of them, made on
    /// the first line with a digit; a kind not seen holds no line).
    slots: Vec<Slot>,
    /// Words with a digit whose masking was reused from an earlier line.
    #[cfg(test)]
    reused: usize,
}

/// How many kinds of lines a [`Templater`] keeps the last line of: a few
/// times as many as a chatty program prints kinds of lines, so that two of
/// them seldom share one ([`kind`] is a hash).
const KINDS: usize = 1024;

/// The kind of a line, one of [`KINDS`]: a hash of the shape of its last
/// 32 bytes (of all of it if shorter), its digits all alike, so that two
/// lines of one template, its numbers as long, are of one kind. Eight bytes
/// at a time, each digit made a `0`. A miss costs only the masking that the
/// last line of another kind leaves to do.
fn kind(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let shape = |x: u64| {
        // Each digit's byte made 0x30: its top bit, spread to the byte.
        let digits = (digit_bytes(x) >> 7) * 0xff;
        (x & !digits) | (digits & (ONES * 0x30))
    };
    let mut hash = bytes.len().min(32) as u64;
    let tail = &bytes[bytes.len().saturating_sub(32)..];
    let mut words = tail.chunks_exact(8);
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        hash = (hash ^ shape(u64::from_le_bytes(word))).wrapping_mul(K);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        hash = (hash ^ shape(u64::from_le_bytes(word))).wrapping_mul(K);
    }
    (hash >> (64 - KINDS.trailing_zeros())) as usize
}

/// The last line of a kind and what masking it left ([`masked`]).
#[derive(Default)]
struct Slot {
    /// The line's template, its only code masked.
    template: Vec<u8>,
    /// Where [`masked`] was, after each word it masked in the line.
    marks: Vec<Mark>,
    /// The line's first code, where it had one: where its mask is in the
    /// template, and its word in the line.
    code: (usize, usize, usize),
    /// The line.
    last: Vec<u8>,
    /// The template with the only code put back, to be hashed.
    keyed: Vec<u8>,
    /// How many short numbers stand alone in the line ([`masked`]).
    codes: u32,
    /// The hash of the template, where that is the key (no only code).
    key: u64,
}

impl Slot {
    /// The key of `bytes`, whose template is this slot's: the template's
    /// hash, or with its only code put back from `bytes`.
    fn key(&mut self, bytes: &[u8]) -> u64 {
        if self.codes != 1 {
            return self.key;
        }
        let (mask, start, end) = self.code;
        self.keyed.clear();
        self.keyed.extend_from_slice(&self.template[..mask]);
        self.keyed.extend_from_slice(&bytes[start..end]);
        self.keyed.extend_from_slice(&self.template[mask + 1..]);
        hash(&self.keyed)
    }
}

/// What [`masked`] had done after a word with a digit: the template up to
/// `len`, made of the line up to `at` (the word's end), having read no byte
/// at or past `reach`, with `codes` short numbers standing alone so far (at
/// most 2: two or more make a line of figures).
#[derive(Debug, Clone, Copy, Default)]
struct Mark {
    at: usize,
    len: usize,
    codes: u32,
    reach: usize,
}

impl Templater {
    /// [`key`] of `text`, from the work of the last line of its kind where
    /// the two start alike.
    pub(crate) fn key(&mut self, text: &str) -> Option<u64> {
        let bytes = text.as_bytes();
        match bytes.first() {
            None | Some(b' ' | b'\t') => return None,
            _ => {}
        }
        // A line without a digit is its own template: hashed where it is, not
        // copied first (an error line repeated with a name in words).
        let Some(first) = next_digit(bytes, 0) else {
            return Some(hash(bytes));
        };
        if self.slots.is_empty() {
            self.slots.resize_with(KINDS, Slot::default);
        }
        let slot = &mut self.slots[kind(bytes)];
        // The last mark the earlier line reached no further than where the
        // two lines part.
        let alike = alike(&slot.last, bytes);
        if alike == usize::MAX {
            // The shape of the last line of its kind, digit for digit: its
            // template, its code (if only one) in the same place. The line
            // kept stands for both: only its shape is compared.
            #[cfg(test)]
            {
                self.reused += slot.marks.len();
            }
            return Some(slot.key(bytes));
        }
        let kept = slot.marks.partition_point(|m| m.reach <= alike);
        let (from, next) = match kept.checked_sub(1) {
            Some(last) => {
                let mark = slot.marks[last];
                (mark, next_digit(bytes, mark.at))
            }
            None => (Mark::default(), Some(first)),
        };
        slot.marks.truncate(kept);
        #[cfg(test)]
        {
            self.reused += kept;
        }
        slot.codes = masked(bytes, from, next, slot);
        slot.last.clear();
        slot.last.extend_from_slice(bytes);
        if slot.codes != 1 {
            slot.key = hash(&slot.template);
        }
        // The only code is put back for the hash; the template kept, its
        // code masked, is the next line's of this kind to reuse.
        Some(slot.key(bytes))
    }
}

/// How long a prefix `a` and `b` share, a digit of one matching any digit
/// of the other; `usize::MAX` where the whole of both is alike (as long,
/// and alike to the end). Eight bytes at a time: where they differ, each
/// byte must be a digit in both.
fn alike(a: &[u8], b: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let word = |chunk: &[u8]| {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        u64::from_le_bytes(word)
    };
    let len = a.len().min(b.len());
    let mut at = 0;
    while at + 8 <= len {
        let (x, y) = (word(&a[at..at + 8]), word(&b[at..at + 8]));
        let differ = x ^ y;
        if differ != 0 {
            // Top bit of each byte: where the two differ, where both are digits.
            let low = ONES * 0x7f;
            let differ = (((differ & low) + low) | differ) & (ONES * 0x80);
            let wrong = differ & !(digit_bytes(x) & digit_bytes(y));
            if wrong != 0 {
                return at + (wrong.trailing_zeros() / 8) as usize;
            }
        }
        at += 8;
    }
    while at < len {
        let (x, y) = (a[at], b[at]);
        if x != y && !(x.is_ascii_digit() && y.is_ascii_digit()) {
            return at;
        }
        at += 1;
    }
    if a.len() == b.len() { usize::MAX } else { len }
}

/// The top bit of each byte of `x` (eight bytes, little-endian) set where
/// it is an ASCII digit: `0x2f < b < 0x3a` tested with no carry between
/// bytes (a byte with its top bit set is no digit).
pub(crate) fn digit_bytes(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let low = x & (ONES * 0x7f);
    // Per byte: top bit set where b < 0x3a, where b > 0x2f, where b < 0x80.
    let below = (ONES * (0x7f + 0x3a)).wrapping_sub(low);
    let above = low + ONES * (0x7f - 0x2f);
    below & above & !x & (ONES * 0x80)
}

/// Writes the template of `bytes` into the templater's buffer from `from`
/// on (the buffer holds the template up to it), in one pass, and returns
/// how many short numbers stand alone in the line (2 for two or more):
/// every number masked, the first short number standing alone remembered
/// (`Slot::code`), to be put back in place of its mask where it was
/// the only one (a second makes the line one of figures, every number
/// masked). The next digit is searched for ([`next_digit`]), the word
/// around it classed byte by byte from a table (what all its bytes are:
/// digits, hex digits); the words (runs of ASCII letters and digits)
/// without a digit are copied with what surrounds them, in one piece, when
/// the next word with a digit comes. `next` is where the first digit at or
/// after `from.at` is. After each word with a digit, where it is is marked
/// (`Slot::marks`).
fn masked(bytes: &[u8], from: Mark, next: Option<usize>, slot: &mut Slot) -> u32 {
    let Slot {
        template,
        marks,
        code,
        ..
    } = slot;
    template.truncate(from.len);
    let mut codes = from.codes;
    let mut reach = from.reach;
    // Bytes before `done` are in the template.
    let (mut done, mut at) = (from.at, from.at);
    // Only words with a digit are looked at: the next digit is found eight
    // bytes at a time, and its word starts after the last byte before it
    // that is in no word (`at` is in none, or is the line's start).
    let mut next = next;
    while let Some(digit) = next {
        // The classes every byte of the word has in common.
        let mut all = WORD | DIGIT | HEX;
        let mut start = digit;
        while start > at {
            let class = CLASS[usize::from(bytes[start - 1])];
            if class & WORD == 0 {
                break;
            }
            all &= class;
            start -= 1;
        }
        at = digit;
        while let Some(&b) = bytes.get(at) {
            let class = CLASS[usize::from(b)];
            if class & WORD == 0 {
                break;
            }
            all &= class;
            at += 1;
        }
        template.extend_from_slice(&bytes[done..start]);
        // The byte that ended the word was read.
        reach = reach.max(at + 1);
        'word: {
            if all & DIGIT != 0 {
                let before = start.checked_sub(1).map(|j| bytes[j]);
                let after = bytes.get(at).copied();
                // A year and its `-`, an hour and its `:`: maybe a date and time
                // whose six words are masked at once.
                if matches!((at - start, after), (4, Some(b'-')) | (2, Some(b':'))) {
                    // It reads at most twenty bytes from the word's start.
                    reach = reach.max(start + 20);
                    if let Some((shape, len)) = date_time(&bytes[start..]) {
                        template.extend_from_slice(shape);
                        at = start + len;
                        break 'word;
                    }
                }
                if at - start <= 3
                    && matches!(before, None | Some(b' ' | b'(' | b'=' | b'#'))
                    && matches!(after, None | Some(b' ' | b',' | b')' | b';'))
                {
                    if codes == 0 {
                        *code = (template.len(), start, at);
                    }
                    codes = (codes + 1).min(2);
                }
                template.push(b'0');
            } else if all & HEX != 0 {
                template.push(b'x');
            } else {
                // Digits inside a word (`TP3`, `python3`): masked, letters kept.
                template.extend(
                    bytes[start..at]
                        .iter()
                        .map(|&b| if b.is_ascii_digit() { b'0' } else { b }),
                );
            }
        }
        done = at;
        marks.push(Mark {
            at,
            len: template.len(),
            codes,
            reach,
        });
        next = next_digit(bytes, at);
    }
    template.extend_from_slice(&bytes[done..]);
    codes
}

/// The template of the date and time `bytes` start with, and its length:
/// `2026-11-01T00:44:20` (ISO 8601, a journal's `short-iso`, ollama's
/// `time=`), `2025-03-27 21:33:30` (SGLang's, Python's), or a time alone,
/// `21:33:30` (vLLM's, syslog's, `[GIN]`'s), its last word ending where it
/// does. Each of its words is what [`masked`] makes of it one by one: the
/// numbers masked, none of them a code (each has a `-` or `:` beside it, or
/// is four digits long), `01T00` a word with letters; one test of its
/// bytes, not a pass per word: a journal's chatty line holds two.
fn date_time(bytes: &[u8]) -> Option<(&'static [u8], usize)> {
    let d = |b: u8| b.is_ascii_digit();
    let ends = |len: usize| !bytes.get(len).is_some_and(u8::is_ascii_alphanumeric);
    if let Some(&[h, h2, b':', m, m2, b':', s, s2]) = bytes.get(..8) {
        return (d(h) && d(h2) && d(m) && d(m2) && d(s) && d(s2) && ends(8))
            .then_some((b"0:0:0", 8));
    }
    let Some(
        &[
            y,
            y2,
            y3,
            y4,
            b'-',
            mo,
            mo2,
            b'-',
            da,
            da2,
            sep,
            h,
            h2,
            b':',
            m,
            m2,
            b':',
            s,
            s2,
        ],
    ) = bytes.get(..19)
    else {
        return None;
    };
    let shape = [y, y2, y3, y4, mo, mo2, da, da2, h, h2, m, m2, s, s2]
        .into_iter()
        .all(d)
        && ends(19);
    match sep {
        b'T' if shape => Some((b"0-0-00T00:0:0", 19)),
        b' ' if shape => Some((b"0-0-0 0:0:0", 19)),
        _ => None,
    }
}

/// Where the first ASCII digit at or after `from` is: eight bytes at a
/// time, each byte tested for `0x2f < b < 0x3a` with no carry between
/// bytes (a byte with its top bit set is no digit), so a line without
/// digits costs a few instructions per eight bytes, not a table look-up
/// per byte.
fn next_digit(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let low = x & (ONES * 0x7f);
        // Per byte: top bit set where b < 0x3a, where b > 0x2f, where b < 0x80.
        let below = (ONES * (0x7f + 0x3a)).wrapping_sub(low);
        let above = low + ONES * (0x7f - 0x2f);
        let digits = below & above & !x & (ONES * 0x80);
        if digits != 0 {
            return Some(at + (digits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes
        .get(at..)?
        .iter()
        .position(u8::is_ascii_digit)
        .map(|p| at + p)
}

/// Byte classes for [`masked`]: in a word (an ASCII letter or digit), a
/// digit, a hex digit.
const WORD: u8 = 1;
const DIGIT: u8 = 2;
const HEX: u8 = 4;
static CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() {
            table[b] |= WORD;
        }
        if c.is_ascii_digit() {
            table[b] |= DIGIT;
        }
        if c.is_ascii_hexdigit() {
            table[b] |= HEX;
        }
        b += 1;
    }
    table
};

/// What a line holds if it may be a service manager's journal entry, PID
/// 1's (`systemd[1]: `, a JSON record's `"_PID":"1"`) or a user manager's
/// (`systemd[1762]: `, a JSON record's `"SYSLOG_IDENTIFIER":"systemd"`
/// under another PID): the journal reads those in full even without an
/// anchor, so they are aggregated too. A cheap test, searched once over a
/// batch of lines (`stream.rs`' `Needles`); a false positive (systemd's
/// forked child, `systemd[66422]: `) only costs a template.
pub(crate) const PID1: [&str; 4] = [
    "[1]: ",
    "\"_PID\":\"1\"",
    "systemd[",
    "\"SYSLOG_IDENTIFIER\":\"systemd\"",
];

/// Whether a line holds one of [`PID1`], line by line: the oracle of the
/// batch's search.
#[cfg(test)]
pub(crate) fn may_be_pid1(text: &str) -> bool {
    PID1.iter().any(|needle| text.contains(needle))
}

/// A fast hash of a byte sequence, sixteen bytes mixed at a time in two
/// lanes (each mix waits for the last one of its lane only, so the two
/// overlap), joined at the end. Not for tables an attacker fills: a
/// collision only merges two templates' counts.
fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |hash: u64, word: u64| (hash ^ word).wrapping_mul(K).rotate_left(31);
    let word = |chunk: &[u8]| {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        u64::from_le_bytes(word)
    };
    let mut pairs = bytes.chunks_exact(16);
    let (mut a, mut b) = (0, K);
    for pair in &mut pairs {
        a = mix(a, word(&pair[..8]));
        b = mix(b, word(&pair[8..]));
    }
    let mut chunks = pairs.remainder().chunks_exact(8);
    for chunk in &mut chunks {
        a = mix(a, word(chunk));
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(0u64, |word, &b| (word << 8) | u64::from(b));
    let hash = mix(mix(a, tail ^ ((bytes.len() as u64) << 56)), b);
    hash ^ (hash >> 29)
}

/// The keys are hashes already.
#[derive(Default)]
struct Identity(u64);

impl std::hash::Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// One repeated line kept for the end: its lines (the line, then the
/// continuation lines that followed it) and whether it is a message.
pub(super) struct Kept {
    pub format: Format,
    pub message: bool,
    pub lines: Vec<(u32, String)>,
}

#[derive(Default)]
struct Tally {
    count: u64,
    /// Lines of the template read in full (at most [`Repeats::first`]).
    read: u32,
    first: u32,
    last: u32,
    ring: VecDeque<Kept>,
    /// The template's last line when its ring gave it up
    /// ([`Aggregator::evict`]): kept for citing, not read.
    cited: Option<Kept>,
    /// The line the template was last seen at when it went to the back of
    /// [`Aggregator::holders`].
    queued: u32,
    /// Whether a line of the template read in full was not understood
    /// ([`Aggregator::read_unrecognized`]): its repeats count as not
    /// understood too.
    unrecognized: bool,
}

/// Which keys [`Aggregator::templates`] may hold: one bit per key, at
/// [`Followed::bit`]. Past [`MAX_TEMPLATES`] every new line's key is looked
/// up and missed; the table's slots are cold (a million bytes), this set's
/// 32 KiB stay in cache, and a clear bit says "not there" for certain.
struct Followed(Box<[u64]>);

impl Followed {
    /// 2^18 bits: with the 20,480 templates followed at most, a key not
    /// followed finds its bit set less than one time in ten.
    const BITS: u32 = 18;

    fn new() -> Followed {
        Followed(vec![0; 1 << (Followed::BITS - 6)].into_boxed_slice())
    }

    /// The key's word and bit: its top bits, which the table's own slot
    /// (its low bits) does not use.
    fn bit(key: u64) -> (usize, u64) {
        let at = key >> (64 - Followed::BITS);
        ((at >> 6) as usize, 1 << (at & 63))
    }

    fn insert(&mut self, key: u64) {
        let (word, bit) = Followed::bit(key);
        self.0[word] |= bit;
    }

    /// False only for a key never inserted.
    fn may_hold(&self, key: u64) -> bool {
        let (word, bit) = Followed::bit(key);
        self.0[word] & bit != 0
    }
}

/// What [`Aggregator::drain`] gives: the lines to read at the end, the
/// lines to keep for citing only, what was counted.
pub(super) struct Drained {
    pub kept: Vec<Kept>,
    pub cited: Vec<(u32, String)>,
    pub repeats: Vec<Repeat>,
}

/// The templates of one input.
pub(super) struct Aggregator {
    limits: Repeats,
    templates: HashMap<u64, Tally, BuildHasherDefault<Identity>>,
    /// The keys of `templates`, as a set that answers a miss in cache.
    followed: Followed,
    /// The template of the last line counted only, while its continuation
    /// lines follow it.
    current: Option<u64>,
    /// The template of the last line read in full.
    last_read: Option<u64>,
    /// Where a coarse template is written: past [`MAX_TEMPLATES`], every
    /// new line's, so one buffer for all.
    coarse: Templater,
    /// The bytes of the last coarse template worked out, and its key: the
    /// lines of one message in a row start alike, and then share it.
    last_coarse: (Vec<u8>, Option<u64>),
    /// Lines read in full past each template's first ([`READ_BUDGET`]).
    spent: u64,
    /// Lines kept in the rings ([`RING_BUDGET`]).
    ringed: usize,
    /// The templates whose ring holds a line, the least recently queued
    /// first ([`Aggregator::evict`]).
    holders: VecDeque<u64>,
}

impl Aggregator {
    pub(super) fn new(limits: Repeats) -> Option<Aggregator> {
        limits.bounded().then(|| Aggregator {
            limits,
            templates: HashMap::default(),
            followed: Followed::new(),
            current: None,
            last_read: None,
            coarse: Templater::default(),
            last_coarse: (Vec::with_capacity(COARSE_PREFIX), None),
            spent: 0,
            ringed: 0,
            holders: VecDeque::new(),
        })
    }

    /// Says that the line just read in full (the last [`Self::repeated`]
    /// answered false for, with a template) was not understood: the lines
    /// of its template only counted are then counted as not understood
    /// ([`Self::counted_unrecognized`]), so an input's unread share does not
    /// shrink because its unread lines repeat.
    pub(super) fn read_unrecognized(&mut self) {
        if let Some(tally) = self.last_read.and_then(|k| self.templates.get_mut(&k)) {
            tally.unrecognized = true;
        }
    }

    /// Whether the line [`Self::repeated`] just counted (not a continuation
    /// line) is of a template whose reading was not understood.
    pub(super) fn counted_unrecognized(&self, key: Option<u64>) -> bool {
        key.is_some()
            && self
                .current
                .and_then(|k| self.templates.get(&k))
                .is_some_and(|t| t.unrecognized)
    }

    /// Counts line `n`; true when it is only counted (a template seen more
    /// than `first` times, or a continuation of such a line): the caller
    /// reads it no further.
    /// `key` is [`key`] of `text`.
    pub(super) fn repeated(
        &mut self,
        n: u32,
        text: &str,
        key: Option<u64>,
        format: Format,
        message: bool,
    ) -> bool {
        self.last_read = None;
        let Some(key) = key else {
            let Some(current) = self.current else {
                return false;
            };
            if let Some(kept) = self
                .templates
                .get_mut(&current)
                .and_then(|t| t.ring.back_mut())
            {
                if kept.lines.len() < MAX_CONTINUATION {
                    kept.lines.push((n, text.to_owned()));
                }
                kept.message |= message;
            }
            return true;
        };
        self.current = None;
        let key = if self.templates.len() < MAX_TEMPLATES || self.holds(key) {
            key
        } else {
            let prefix = coarse_prefix(text);
            if self.last_coarse.0 != prefix.as_bytes() {
                let key = coarse(prefix, &mut self.coarse);
                self.last_coarse.0.clear();
                self.last_coarse.0.extend_from_slice(prefix.as_bytes());
                self.last_coarse.1 = key;
            }
            match self.last_coarse.1 {
                Some(c) if self.holds(c) => c,
                Some(c) if self.templates.len() < MAX_TEMPLATES + MAX_COARSE => c,
                _ => return false,
            }
        };
        let tally = self.templates.entry(key).or_insert_with(|| {
            self.followed.insert(key);
            Tally::default()
        });
        tally.count += 1;
        tally.last = n;
        if tally.count == 1 {
            tally.first = n;
        }
        // A template's first line is always read; its next ones while the
        // input's budget lasts and nothing of it was only counted yet.
        let reads = tally.read < self.limits.first
            && u64::from(tally.read) + 1 == tally.count
            && (tally.count == 1 || self.spent < READ_BUDGET);
        if reads {
            tally.read += 1;
            self.spent += u64::from(tally.count > 1) * read_cost(text);
            self.last_read = Some(key);
            return false;
        }
        self.current = Some(key);
        if self.limits.last == 0 {
            return true;
        }
        // A ring grows to `last` while the rings' budget lasts: past that,
        // its oldest line's buffer takes the new. An empty ring takes a line
        // within the budget, else from the template least recently seen.
        let mut kept = if tally.ring.is_empty() {
            let cited = tally.cited.take();
            tally.queued = n;
            let taken = if self.ringed < RING_BUDGET {
                self.ringed += 1;
                None
            } else {
                self.evict()
            };
            self.holders.push_back(key);
            taken.or(cited).unwrap_or_else(|| Kept {
                format,
                message,
                lines: Vec::new(),
            })
        } else if tally.ring.len() < self.limits.last && self.ringed < RING_BUDGET {
            self.ringed += 1;
            Kept {
                format,
                message,
                lines: Vec::new(),
            }
        } else {
            tally.ring.pop_front().unwrap_or_else(|| Kept {
                format,
                message,
                lines: Vec::new(),
            })
        };
        let Some(tally) = self.templates.get_mut(&key) else {
            return true;
        };
        kept.format = format;
        kept.message = message;
        // The oldest kept line's buffer takes the new one: no allocation
        // per counted line.
        kept.lines.truncate(1);
        match kept.lines.first_mut() {
            Some((m, buffer)) => {
                *m = n;
                buffer.clear();
                buffer.push_str(text);
            }
            None => kept.lines.push((n, text.to_owned())),
        }
        tally.ring.push_back(kept);
        true
    }

    /// A line of a ring for a template whose ring is empty (and so is not
    /// among the holders), past the rings' budget: the oldest line of the ring of the template least recently
    /// seen, as a clock finds it. The holders are in the order they were
    /// queued; one seen since it was queued goes to the back, its second
    /// chance, and the first not seen since gives its ring's oldest line.
    /// Where that was its only line, the line stays with it for citing (its
    /// last line, in the report's repeated lines) and its ring's place is
    /// new (`None`: the caller makes one); else the line's buffer is
    /// returned, for the taker to fill. Each template is queued once while
    /// its ring holds a line, and goes back only when seen since: the
    /// clock's turns are paid for by the lines counted.
    fn evict(&mut self) -> Option<Kept> {
        while let Some(key) = self.holders.pop_front() {
            let Some(tally) = self.templates.get_mut(&key) else {
                continue;
            };
            if tally.last > tally.queued {
                tally.queued = tally.last;
                self.holders.push_back(key);
                continue;
            }
            let oldest = tally.ring.pop_front()?;
            if tally.ring.is_empty() {
                tally.cited = Some(oldest);
                return None;
            }
            self.holders.push_front(key);
            return Some(oldest);
        }
        None
    }

    /// Whether `key` is a template followed: the bit set first, the table
    /// only where its bit is set.
    fn holds(&self, key: u64) -> bool {
        self.followed.may_hold(key) && self.templates.contains_key(&key)
    }

    /// The lines kept to be read at the end, in input order; the last
    /// lines of templates whose ring gave them up, kept for citing only
    /// ([`Aggregator::evict`]); and what was counted of each template seen
    /// more often than read, ordered by first line.
    pub(super) fn drain(self, source: SourceId) -> Drained {
        let span = |line| Span { source, line };
        let mut kept = Vec::new();
        let mut cited = Vec::new();
        let mut repeats = Vec::new();
        for tally in self.templates.into_values() {
            if tally.count == u64::from(tally.read) {
                continue;
            }
            repeats.push(Repeat {
                first: span(tally.first),
                last: span(tally.last),
                count: tally.count,
                read: tally.read,
                kept_last: tally.ring.len() as u32,
            });
            kept.extend(tally.ring);
            cited.extend(tally.cited.and_then(|c| c.lines.into_iter().next()));
        }
        kept.sort_by_key(|k| k.lines.first().map_or(0, |l| l.0));
        cited.sort_by_key(|c| c.0);
        repeats.sort_by_key(|r| r.first);
        Drained {
            kept,
            cited,
            repeats,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::real_lines::real_lines;

    /// The one-pass template of `5af2cef`, a line at a time with nothing
    /// kept from the line before: the oracle of [`Templater::key`], which
    /// goes on from the line before's work (and itself checked against the
    /// word-by-word passes below).
    fn masked_at_once(bytes: &[u8], first: usize, template: &mut Vec<u8>) {
        template.clear();
        // The first code: where its mask is in the template, and its word.
        let mut code = None;
        let mut codes = 0;
        // Bytes before `done` are in the template.
        let (mut done, mut at) = (0, 0);
        // Only words with a digit are looked at: the next digit is found eight
        // bytes at a time, and its word starts after the last byte before it
        // that is in no word (`at` is in none, or is the line's start).
        let mut next = Some(first);
        while let Some(digit) = next {
            // The classes every byte of the word has in common.
            let mut all = WORD | DIGIT | HEX;
            let mut start = digit;
            while start > at {
                let class = CLASS[usize::from(bytes[start - 1])];
                if class & WORD == 0 {
                    break;
                }
                all &= class;
                start -= 1;
            }
            at = digit;
            while let Some(&b) = bytes.get(at) {
                let class = CLASS[usize::from(b)];
                if class & WORD == 0 {
                    break;
                }
                all &= class;
                at += 1;
            }
            template.extend_from_slice(&bytes[done..start]);
            if all & DIGIT != 0 {
                let before = start.checked_sub(1).map(|j| bytes[j]);
                let after = bytes.get(at).copied();
                // A year and its `-`, an hour and its `:`: maybe a date and time
                // whose six words are masked at once.
                if matches!((at - start, after), (4, Some(b'-')) | (2, Some(b':'))) {
                    if let Some((shape, len)) = date_time(&bytes[start..]) {
                        template.extend_from_slice(shape);
                        at = start + len;
                        done = at;
                        next = next_digit(bytes, at);
                        continue;
                    }
                }
                if at - start <= 3
                    && matches!(before, None | Some(b' ' | b'(' | b'=' | b'#'))
                    && matches!(after, None | Some(b' ' | b',' | b')' | b';'))
                {
                    codes += 1;
                    if codes == 1 {
                        code = Some((template.len(), start..at));
                    }
                }
                template.push(b'0');
            } else if all & HEX != 0 {
                template.push(b'x');
            } else {
                // Digits inside a word (`TP3`, `python3`): masked, letters kept.
                template.extend(
                    bytes[start..at]
                        .iter()
                        .map(|&b| if b.is_ascii_digit() { b'0' } else { b }),
                );
            }
            done = at;
            next = next_digit(bytes, at);
        }
        template.extend_from_slice(&bytes[done..]);
        if let (1, Some((mask, word))) = (codes, code) {
            template.splice(mask..=mask, bytes[word].iter().copied());
        }
    }

    /// The first implementation of [`masked`], word by word from each digit:
    /// the oracle the one-pass version must agree with.
    /// Writes the template of `bytes` into `template`; with `one_code`, keeps
    /// the first short number standing alone and gives up (`false`) at the
    /// second.
    fn masked_by_words(bytes: &[u8], template: &mut Vec<u8>, one_code: bool) -> bool {
        template.clear();
        let mut codes = 0;
        // Bytes before `done` are in the template.
        let mut done = 0;
        while let Some(digit) = next_digit(bytes, done) {
            // The word (a run of ASCII letters and digits) the digit is in.
            let mut start = digit;
            while start > done && bytes[start - 1].is_ascii_alphanumeric() {
                start -= 1;
            }
            let (mut end, mut digits, mut hex) = (start, 0, true);
            while let Some(&b) = bytes.get(end).filter(|b| b.is_ascii_alphanumeric()) {
                digits += usize::from(b.is_ascii_digit());
                hex &= b.is_ascii_hexdigit();
                end += 1;
            }
            template.extend_from_slice(&bytes[done..start]);
            let word = &bytes[start..end];
            if digits == word.len() {
                let before = start.checked_sub(1).map(|j| bytes[j]);
                let after = bytes.get(end).copied();
                let alone = matches!(before, None | Some(b' ' | b'(' | b'=' | b'#'))
                    && matches!(after, None | Some(b' ' | b',' | b')' | b';'));
                if one_code && word.len() <= 3 && alone {
                    codes += 1;
                    if codes > 1 {
                        return false;
                    }
                    template.extend_from_slice(word);
                } else {
                    template.push(b'0');
                }
            } else if hex {
                template.push(b'x');
            } else {
                // Digits inside a word (`TP3`, `python3`): masked, letters kept.
                template.extend(
                    word.iter()
                        .map(|&b| if b.is_ascii_digit() { b'0' } else { b }),
                );
            }
            done = end;
        }
        template.extend_from_slice(&bytes[done..]);
        true
    }

    /// The first ASCII digit at or after `from`: eight bytes tested at a time
    /// (a byte of `w ^ 0x30…` below 10 is a digit; the test of a word for a
    /// byte below 10 is exact, only not where).
    fn next_digit(bytes: &[u8], mut from: usize) -> Option<usize> {
        const ONES: u64 = 0x0101_0101_0101_0101;
        while let Some(chunk) = bytes.get(from..from + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let t = u64::from_le_bytes(word) ^ (0x30 * ONES);
            if t.wrapping_sub(10 * ONES) & !t & (0x80 * ONES) != 0 {
                break;
            }
            from += 8;
        }
        bytes[from..]
            .iter()
            .position(u8::is_ascii_digit)
            .map(|d| from + d)
    }

    /// The eight-at-a-time search finds what a byte-by-byte one finds,
    /// from every start, next to every byte value.
    #[test]
    fn the_digit_search_is_a_byte_search() {
        let naive = |b: &[u8], from: usize| {
            b.get(from..)
                .and_then(|r| r.iter().position(u8::is_ascii_digit))
                .map(|p| from + p)
        };
        let mut lines: Vec<Vec<u8>> = vec![
            b"RuntimeError: CUDA error: an illegal memory access was encountered".to_vec(),
            b"abcdefgh9".to_vec(),
            b"/:09@".to_vec(),
            "\u{e9}\u{663}9x".as_bytes().to_vec(),
            Vec::new(),
        ];
        for b in 0..=255u8 {
            for at in 0..10 {
                let mut line = vec![b'a'; 17];
                line[at] = b;
                lines.push(line);
            }
        }
        for line in &lines {
            for from in 0..=line.len() + 1 {
                assert_eq!(
                    super::next_digit(line, from),
                    naive(line, from),
                    "{line:?} {from}"
                );
            }
        }
    }

    #[test]
    fn a_short_hex_word_is_an_id() {
        let record = |i: &str| {
            format!(
                r#"{{"__CURSOR":"s=6f1a2b;i={i};b=0f1e;m=2a6237317","MESSAGE":"apparmor denied_mask=\"r\""}}"#
            )
        };
        assert_eq!(key(&record("b4")), key(&record("1c3")));
        assert_eq!(
            key("PCI:0000:3b:00.0 fell off"),
            key("PCI:0000:1d:00.0 fell off")
        );
        // A word with a letter past `f` keeps its letters.
        assert_ne!(key("TP3 up"), key("DP3 up"));
    }

    #[test]
    fn the_one_pass_template_is_the_word_by_word_one() {
        let mut lines: Vec<String> = vec![
            "2026-11-01T00:00:38+0000 gpu-node-7 python3[31702]: [2026-11-01 00:00:38 TP1] Decode batch. #running-req: 51, #token: 46021".into(),
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=20629, name=python3".into(),
            "deadbeef01 cafe1234 0x7f3a9c00 abc 12 (3) =4 #5; 6,".into(),
            "".into(),
            "7".into(),
            "x1 1x 1 22 333 4444 a-1 é9 ٣ 9é".into(),
        ];
        // Dates and times, whole and nearly, beside what may end or extend
        // their words ([`date_time`]).
        let pieces = [
            "2026-11-01T00:44:20",
            "2025-03-27 21:33:30",
            "1999-01-01T00:00:00.123+08:00",
            "2026-11-01t00:44:20",
            "2026-11-01 00:00:0a",
            "2026-11-0",
            "12:00:04",
            "1:00:00",
            "12:00:0",
            "12:00:001",
            "12:0a:00",
            "2026-11-01",
            "T",
            "Z",
            "-",
            ":",
            " ",
            "(",
            "=",
            ",",
            "7",
            "a",
            "é",
        ];
        for a in pieces {
            for b in pieces {
                for c in ["", " ", "1", "x", ")", "2026-11-01T00:44:20"] {
                    lines.push(format!("{a}{b}{c}"));
                    lines.push(format!("{c}{a}{b}"));
                }
            }
        }
        // Every line of the repository's real incidents too.
        let real = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("fixtures/real");
        for case in std::fs::read_dir(real).into_iter().flatten().flatten() {
            for file in std::fs::read_dir(case.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if let Ok(text) = std::fs::read_to_string(file.path()) {
                    lines.extend(text.lines().map(str::to_owned));
                }
            }
        }
        assert!(lines.len() > 1000);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut plain = 0;
        for line in &lines {
            let Some(first) = super::next_digit(line.as_bytes(), 0) else {
                // No digit: the line is its own template, hashed as it is.
                assert!(masked_by_words(line.as_bytes(), &mut b, true));
                assert_eq!(b, line.as_bytes(), "{line:?}");
                let keyed = !line.is_empty() && !line.starts_with([' ', '\t']);
                assert_eq!(key(line), keyed.then(|| hash(&b)), "{line:?}");
                plain += 1;
                continue;
            };
            // One pass makes what the word-by-word passes make: the
            // template with its only code kept, or of figures.
            masked_at_once(line.as_bytes(), first, &mut a);
            if !masked_by_words(line.as_bytes(), &mut b, true) {
                masked_by_words(line.as_bytes(), &mut b, false);
            }
            assert_eq!(a, b, "{line:?}");
            // The key is the hash of the template the word-by-word pass
            // makes (of figures if a second code gave up on the first).
            if !line.starts_with([' ', '\t']) {
                if !masked_by_words(line.as_bytes(), &mut b, true) {
                    masked_by_words(line.as_bytes(), &mut b, false);
                }
                assert_eq!(key(line), Some(hash(&b)), "{line:?}");
            }
        }
        assert!(plain > 10, "{plain} lines without a digit");
    }

    /// The key of `line` as `5af2cef` made it, a line at a time.
    fn key_at_once(line: &str) -> Option<u64> {
        let bytes = line.as_bytes();
        if bytes.is_empty() || line.starts_with([' ', '\t']) {
            return None;
        }
        let Some(first) = next_digit(bytes, 0) else {
            return Some(hash(bytes));
        };
        let mut template = Vec::new();
        masked_at_once(bytes, first, &mut template);
        Some(hash(&template))
    }

    /// The digits of `line` each changed to another (its shape kept).
    fn other_digits(line: &str) -> String {
        line.chars()
            .map(|c| match c.to_digit(10) {
                Some(d) => char::from_digit((d + 7) % 10, 10).unwrap_or(c),
                None => c,
            })
            .collect()
    }

    /// A templater kept from line to line, going on from the work of the
    /// line before where the two start alike, gives every line the key the
    /// line alone has: on every line of the real incidents in their order,
    /// each followed by itself with other digits (alike to the end); and on
    /// lines that part from the one before at every byte, by a digit for
    /// another, a digit for a letter and back, a byte dropped or added,
    /// around dates and times, codes and words of digits and letters.
    #[test]
    fn a_line_masked_from_where_it_parts_from_the_line_before_is_masked_whole() {
        let mut templater = Templater::default();
        let real = real_lines();
        assert!(real.len() > 4_000, "{}", real.len());
        let mut keyed = 0;
        for line in &real {
            let again = other_digits(line);
            for line in [line, &again] {
                assert_eq!(templater.key(line), key_at_once(line), "{line:?}");
                keyed += usize::from(next_digit(line.as_bytes(), 0).is_some());
            }
        }
        // The work of the line before is reused, and much of it.
        assert!(templater.reused > keyed, "{} of {keyed}", templater.reused);
        let mut lines: Vec<String> = vec![
            "2026-11-01T00:00:39+0000 gpu-node-7 python3[40193]: [2025-05-31 18:31:21 DP6 TP6] Decode batch. #running-req: 8, #token: 67818, token usage: 0.12, #queue-req: 0".into(),
            "[11410.027379] NVRM: Xid (PCI:0000:3b:00): 79, pid=20629, name=python3".into(),
            "time=2025-02-24T15:36:32.318-08:00 level=INFO source=memory.go:356 msg=\"offload\" layers.model=28".into(),
            "a 12 b 2026-11-01 00:00:0 c (3) =4 #5; x1 deadbeef01 6,".into(),
            "exit code 1 after 3600 s, 12:00:01".into(),
        ];
        // Lines of the real incidents with a code or a date.
        lines.extend(
            real.iter()
                .filter(|l| l.len() < 200 && (l.contains(" 1") || l.contains("-0")))
                .step_by(25)
                .take(80)
                .cloned(),
        );
        let mut pairs = 0;
        for line in &lines {
            let bytes = line.as_bytes();
            for at in 0..=bytes.len() {
                let mut changed: Vec<Vec<u8>> = Vec::new();
                let mut with = |b: u8| {
                    let mut c = bytes.to_vec();
                    c.insert(at, b);
                    changed.push(c);
                };
                for b in [b'5', b'a', b'-', b':', b' '] {
                    with(b);
                }
                if at < bytes.len() {
                    for b in [b'0', b'9', b'z', b'f', b',', b'T'] {
                        let mut c = bytes.to_vec();
                        c[at] = b;
                        changed.push(c);
                    }
                    let mut c = bytes.to_vec();
                    c.remove(at);
                    changed.push(c);
                }
                for c in changed {
                    let Ok(c) = String::from_utf8(c) else {
                        continue;
                    };
                    assert_eq!(templater.key(line), key_at_once(line), "{line:?}");
                    assert_eq!(templater.key(&c), key_at_once(&c), "{line:?} then {c:?}");
                    pairs += 1;
                }
            }
        }
        assert!(pairs > 20_000, "{pairs}");
    }

    /// Lines of many kinds interleaved, as a log interleaves its programs'
    /// and its messages, are each keyed as the line alone is, and a line
    /// goes on from the last line of its kind, not from the line before:
    /// the lines of the real incidents cut into eleven runs, the runs'
    /// lines taken in turn, eleven of them then the same eleven with
    /// other digits. A line with other digits is of its line's kind
    /// ([`kind`]), so it reuses about as much as it does right after it.
    #[test]
    fn a_line_masked_from_the_last_line_of_its_kind_is_masked_whole() {
        let real = real_lines();
        let runs: Vec<&[String]> = real.chunks(real.len() / 11 + 1).collect();
        let (mut interleaved, mut each_after) = (Templater::default(), Templater::default());
        for i in 0..runs[0].len() {
            let turn: Vec<&String> = runs.iter().filter_map(|run| run.get(i)).collect();
            let again: Vec<String> = turn.iter().map(|line| other_digits(line)).collect();
            for line in turn.iter().copied().chain(&again) {
                assert_eq!(interleaved.key(line), key_at_once(line), "{line:?}");
            }
            for (line, again) in turn.iter().zip(&again) {
                each_after.key(line);
                each_after.key(again);
            }
            for line in &again {
                assert_eq!(kind(line.as_bytes()), kind(other_digits(line).as_bytes()));
            }
        }
        // Lines of 11 kinds apart from the line of their kind: nearly all
        // the work reused that right after it is.
        assert!(
            interleaved.reused * 10 >= each_after.reused * 9,
            "{} against {}",
            interleaved.reused,
            each_after.reused
        );
    }

    /// [`alike`] is the byte-by-byte comparison, a digit alike any digit.
    #[test]
    fn how_far_two_lines_are_alike_is_a_byte_comparison() {
        let naive = |a: &[u8], b: &[u8]| {
            let same = |(x, y): (&u8, &u8)| x == y || x.is_ascii_digit() && y.is_ascii_digit();
            match a.iter().zip(b).position(|p| !same(p)) {
                Some(at) => at,
                None if a.len() == b.len() => usize::MAX,
                None => a.len().min(b.len()),
            }
        };
        let base: Vec<u8> = b"2026-11-01T00:00:39+0000 node a[1]: x=12 y".to_vec();
        let mut cases = vec![(base.clone(), base.clone())];
        for at in 0..base.len() {
            for b in [0u8, b'0', b'9', b'/', b':', b'a', 0x80, 0xb9, 0xff] {
                let mut c = base.clone();
                c[at] = b;
                cases.push((base.clone(), c.clone()));
                cases.push((c.clone(), base.clone()));
                c.truncate(at);
                cases.push((base.clone(), c));
            }
        }
        for x in 0..=255u8 {
            for y in 0..=255u8 {
                cases.push((
                    vec![b'a', b'b', b'c', x, 1, 2, 3, 4, 5],
                    vec![b'a', b'b', b'c', y, 1, 2, 3, 4, 5],
                ));
                cases.push((vec![x], vec![y]));
            }
        }
        for (a, b) in &cases {
            assert_eq!(alike(a, b), naive(a, b), "{a:?} {b:?}");
        }
    }

    #[test]
    fn templates_mask_times_ids_and_counters_not_codes() {
        let same = [
            (
                "2026-11-01T00:03:14+0000 node systemd[1]: a.service: Scheduled restart job, restart counter is at 1.",
                "2026-11-02T13:55:01+0000 node systemd[1]: a.service: Scheduled restart job, restart counter is at 4711.",
            ),
            (
                "May 12 09:41:33 ct200 python3[48377]: [2026-05-12 09:41:33 TP0] Init torch distributed begin.",
                "May 12 09:42:35 ct200 python3[51002]: [2026-05-12 09:42:35 TP3] Init torch distributed begin.",
            ),
            (
                "time=\"x\" container=0f1e2d3c4b5a6978 port 51234",
                "time=\"x\" container=aa1e2d3c4b5a69ff port 2222",
            ),
            // Lines of figures: every short number masked.
            (
                "INFO 11-14 03:12:09 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%",
                "INFO 11-14 03:14:19 [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 97.0 tokens/s, Running: 59 reqs, Waiting: 12 reqs, GPU KV cache usage: 87.5%, Prefix cache hit rate: 41.3%",
            ),
            (
                "[2025-06-01 12:00:10 TP0] Decode batch. #running-req: 1, #token: 1234, token usage: 0.01, gen throughput (token/s): 12.34, #queue-req: 0",
                "[2025-06-01 12:00:50 TP0] Decode batch. #running-req: 37, #token: 98304, token usage: 0.61, gen throughput (token/s): 1402.7, #queue-req: 5",
            ),
        ];
        for (a, b) in same {
            assert_eq!(key(a), key(b), "{a}");
        }
        let differ = [
            (
                "kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1102, GPU has fallen off the bus.",
                "kernel: NVRM: Xid (PCI:0000:3b:00): 48, pid=1102, GPU has fallen off the bus.",
            ),
            ("GPU 3 is lost", "GPU 4 is lost"),
            // One code among long numbers still tells lines apart.
            (
                "12:00:01 worker 51234 exited with code 1 after 3600 s",
                "12:00:01 worker 51234 exited with code 2 after 3600 s",
            ),
            (
                "a.service: Main process exited, code=exited, status=1/FAILURE",
                "a.service: Main process exited, code=killed, status=9/KILL",
            ),
        ];
        for (a, b) in differ {
            assert_ne!(key(a), key(b), "{a}");
        }
        // A templater kept from line to line gives each line its own template.
        let mut templater = Templater::default();
        for (a, b) in same.iter().chain(&differ) {
            assert_eq!(templater.key(a), key(a), "{a}");
            assert_eq!(templater.key(b), key(b), "{b}");
        }
        assert_eq!(key(""), None);
        assert_eq!(key("  File \"x.py\", line 3"), None);
    }

    #[test]
    fn the_next_digit_is_found_in_any_byte_of_a_word() {
        let text: Vec<u8> = (0u8..=255).filter(|b| !b.is_ascii_digit()).collect();
        assert_eq!(next_digit(&text, 0), None);
        for at in 0..24 {
            for digit in b'0'..=b'9' {
                let mut line = vec![b'/'; 24];
                line[at] = digit;
                line[23 - at / 2] = b'9';
                let first = at.min(23 - at / 2);
                assert_eq!(next_digit(&line, 0), Some(first), "{at} {digit}");
                assert_eq!(
                    next_digit(&line, at + 1),
                    (at < 23 - at / 2).then_some(23 - at / 2)
                );
            }
        }
    }

    #[test]
    fn the_first_are_read_the_last_kept_the_rest_counted() {
        let limits = Repeats { first: 2, last: 2 };
        let mut agg = Aggregator::new(limits).expect("bounded");
        let mut counted = Vec::new();
        for n in 1..=10u32 {
            let line = format!("12:00:{n:02} error {n}000 happened");
            if agg.repeated(2 * n - 1, &line, key(&line), Format::Unknown, true) {
                counted.push(2 * n - 1);
            }
            // A continuation line follows its line's fate.
            if agg.repeated(2 * n, "  detail", None, Format::Unknown, false) {
                counted.push(2 * n);
            }
        }
        assert_eq!(counted, (5..=20).collect::<Vec<_>>());
        let Drained { kept, repeats, .. } = agg.drain(SourceId(0));
        let lines: Vec<Vec<u32>> = kept
            .iter()
            .map(|k| k.lines.iter().map(|l| l.0).collect())
            .collect();
        assert_eq!(lines, vec![vec![17, 18], vec![19, 20]]);
        assert!(kept.iter().all(|k| k.message));
        assert_eq!(repeats.len(), 1);
        let r = &repeats[0];
        assert_eq!((r.first.line, r.last.line, r.count), (1, 19, 10));
        assert_eq!((r.read, r.kept_last), (2, 2));
        assert!(Aggregator::new(Repeats::UNBOUNDED).is_none());
    }

    #[test]
    fn a_family_of_figures_is_one_template_cited_by_its_first_and_last() {
        let limits = Repeats { first: 3, last: 2 };
        let mut agg = Aggregator::new(limits).expect("bounded");
        let mut read = Vec::new();
        for n in 1..=40u32 {
            let line = format!(
                "INFO 11-14 03:{:02}:09 [loggers.py:123] Engine 000: Avg prompt throughput: {}.0 tokens/s, Running: {} reqs, Waiting: {} reqs",
                n % 60,
                n * 7,
                n % 9,
                n % 4
            );
            if !agg.repeated(n, &line, key(&line), Format::Unknown, false) {
                read.push(n);
            }
        }
        assert_eq!(read, vec![1, 2, 3]);
        let Drained { kept, repeats, .. } = agg.drain(SourceId(0));
        let lines: Vec<u32> = kept
            .iter()
            .flat_map(|k| k.lines.iter().map(|l| l.0))
            .collect();
        assert_eq!(lines, vec![39, 40]);
        assert!(kept.iter().all(|k| !k.message));
        assert_eq!(repeats.len(), 1);
        let r = &repeats[0];
        assert_eq!((r.first.line, r.last.line, r.count), (1, 40, 40));
        assert_eq!((r.read, r.kept_last), (3, 2));
    }

    #[test]
    fn past_the_template_limit_lines_aggregate_by_how_they_start() {
        let limits = Repeats { first: 2, last: 1 };
        let mut agg = Aggregator::new(limits).expect("bounded");
        // Distinct words, no digits: every line is a template of its own.
        let name = |n: usize| {
            (0..6)
                .map(|i| char::from(b'a' + ((n >> (4 * i)) & 15) as u8))
                .collect::<String>()
        };
        let line = |n: usize| {
            format!(
                "RuntimeError: CUDA error: an illegal memory access was encountered in kernel {}",
                name(n)
            )
        };
        let mut read = 0;
        let total = MAX_TEMPLATES + 100;
        for n in 0..total {
            let text = line(n);
            if !agg.repeated(n as u32 + 1, &text, key(&text), Format::Unknown, true) {
                read += 1;
            }
        }
        // The first MAX_TEMPLATES lines each start a template; the rest share
        // one coarse template: two read, the last kept, the others counted.
        assert_eq!(read, MAX_TEMPLATES + 2);
        let Drained { kept, repeats, .. } = agg.drain(SourceId(0));
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].lines[0].0, total as u32);
        assert_eq!(repeats.len(), 1);
        assert_eq!(repeats[0].count, 100);
        // Another message past the limit starts a coarse template of its own.
        let mut agg = Aggregator::new(limits).expect("bounded");
        for n in 0..MAX_TEMPLATES {
            let text = line(n);
            agg.repeated(n as u32 + 1, &text, key(&text), Format::Unknown, true);
        }
        let other = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate in block xyz";
        assert!(!agg.repeated(1 << 20, other, key(other), Format::Unknown, true));
    }

    /// Past each template's first line, what is read in full is a budget of
    /// bytes as much as of lines: many templates of ~1 KiB lines (journal
    /// JSON records) read about a quarter of what templates of short lines
    /// read, so what is kept until the report stays near the same size.
    #[test]
    fn the_read_budget_is_spent_by_the_bytes_of_long_lines() {
        let limits = Repeats::STANDARD;
        let route = |r: usize| -> String {
            (0..4)
                .map(|i| char::from(b'a' + ((r >> (4 * i)) & 15) as u8))
                .collect()
        };
        let padding = "x".repeat(1000);
        let read_past_first = |long: bool| {
            let mut agg = Aggregator::new(limits).expect("bounded");
            let mut read = 0u64;
            let mut n = 0u32;
            // 1,000 templates, 40 lines each: 39,000 lines past their first.
            for _ in 0..40 {
                for r in 0..1000 {
                    n += 1;
                    let text = match long {
                        true => format!("[GIN] POST \"/api/{}\" {padding}", route(r)),
                        false => format!("[GIN] POST \"/api/{}\"", route(r)),
                    };
                    read += u64::from(!agg.repeated(n, &text, key(&text), Format::Unknown, true));
                }
            }
            read - 1000
        };
        let (short, long) = (read_past_first(false), read_past_first(true));
        assert_eq!(short, READ_BUDGET);
        assert!(long * 3 <= short && long * 5 >= short, "{long} of {short}");
    }

    /// Thousands of templates each counted past their first line (a request
    /// log whose status makes its template), then a crash loop: the lines
    /// kept to be read at the end stay within the rings' budget, the
    /// templates not seen lately keep their last line for citing only, and
    /// the loop at the end keeps its last cycle to be read.
    #[test]
    fn past_the_rings_budget_the_templates_least_recently_seen_give_up_their_line() {
        let limits = Repeats { first: 1, last: 4 };
        let mut agg = Aggregator::new(limits).expect("bounded");
        // Letters only: a template per route.
        let route = |r: usize| -> String {
            (0..4)
                .map(|i| char::from(b'a' + ((r >> (4 * i)) & 15) as u8))
                .collect()
        };
        let routes = RING_BUDGET + 1000;
        let mut n = 0u32;
        for _ in 0..3 {
            for r in 0..routes {
                n += 1;
                let text = format!("[GIN] POST \"/api/{}\"", route(r));
                agg.repeated(n, &text, key(&text), Format::Unknown, true);
            }
        }
        let loop_lines = [
            "Started ollama.service - Ollama Service.",
            "ollama.service: Main process exited, code=exited, status=1/FAILURE",
        ];
        for _ in 0..50 {
            for text in loop_lines {
                n += 1;
                agg.repeated(n, text, key(text), Format::Unknown, true);
            }
        }
        let Drained {
            kept,
            cited,
            repeats,
        } = agg.drain(SourceId(0));
        assert!(kept.len() <= RING_BUDGET, "{} kept", kept.len());
        assert_eq!(repeats.len(), routes + 2, "every template counted");
        // Each template counted keeps its last line, read or cited.
        for r in &repeats {
            let last = r.last.line;
            let in_ring = kept.iter().any(|k| k.lines[0].0 == last);
            let in_cited = cited.iter().any(|c| c.0 == last);
            assert!(
                in_ring != in_cited,
                "line {last}: kept {in_ring}, cited {in_cited}"
            );
            assert_eq!(in_ring, r.kept_last > 0);
        }
        assert!(cited.len() >= routes + 2 - RING_BUDGET);
        // The loop's last cycle is read at the end.
        let tail: Vec<u32> = kept.iter().rev().take(2).map(|k| k.lines[0].0).collect();
        assert_eq!(tail, vec![n, n - 1]);
    }

    /// The bit set in front of the table is exact where it answers: every
    /// template followed finds its bit (a clear bit is a sure miss), and
    /// `holds` says what the table says, for keys in it and not. It also
    /// answers most misses itself, or it would be no faster.
    #[test]
    fn the_followed_set_never_misses_a_template() {
        let mut agg = Aggregator::new(Repeats::STANDARD).expect("bounded");
        // Letters only (a digit would be masked): a template per line.
        let line = |n: usize| {
            let name: String = (0..5)
                .map(|i| char::from(b'g' + ((n >> (4 * i)) & 15) as u8))
                .collect();
            format!("RuntimeError: CUDA error: an illegal memory access in kernel {name}")
        };
        for n in 0..MAX_TEMPLATES + MAX_COARSE + 500 {
            let text = line(n);
            agg.repeated(n as u32 + 1, &text, key(&text), Format::Unknown, true);
        }
        assert!(agg.templates.len() > MAX_TEMPLATES);
        for &k in agg.templates.keys() {
            assert!(agg.followed.may_hold(k), "{k:x}");
            assert!(agg.holds(k));
        }
        let mut answered = 0;
        let others = 100_000u64;
        for i in 0..others {
            let k = hash(&i.to_le_bytes());
            assert_eq!(agg.holds(k), agg.templates.contains_key(&k));
            answered += u64::from(!agg.followed.may_hold(k));
        }
        assert!(answered * 10 > others * 9, "{answered} of {others}");
    }
}
