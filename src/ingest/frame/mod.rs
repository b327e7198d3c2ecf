//! The frame peeler: the one place that strips what other programs put in
//! front of a line before the segmenter and the recognisers see it.
//!
//! A frame is what a transport, a viewer or a person adds around a line of
//! some format: the kernel ring buffer's `/dev/kmsg` record head
//! (`6,3964,206764307,-;`), `dmesg --decode`'s `kern  :warn  : `, a
//! syslog priority (`<6>`), a log forwarder's tag (Talos: `10.0.0.5: kern:
//! warning: [2024-…Z]: `), an editor's or viewer's line numbers (`  12 `),
//! a reply's quote marks (`> `), escape codes a paste spelled out
//! (`#033[0m`), and the indentation in front of any of these. Each is a row
//! of [`ROWS`] (`rows.rs`), with the real lines it was written from; a new
//! frame is a new row, not a new parser.
//!
//! [`Peeler::peel`] removes the frames outermost first, each at most once,
//! and keeps what they said as a [`Frame`]: the time, the uptime, the host,
//! the facility and level, the line number. The line's span stays the
//! original line (reports cite it whole); the segmenter and every reader
//! see the text under the frames, and the readers that time or attribute
//! a line read the frame (`ingest::stream` hands it over with the line).
//!
//! The per-line cost is a few byte tests: most lines have no frame, and
//! every row says what its first bytes must be before its grammar runs.

mod rows;

use std::borrow::Cow;

use crate::model::Timestamp;

pub use rows::{ROWS, Row, Sample};

/// What the frames around one line said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frame {
    /// A wall-clock time the frame printed.
    pub time: Option<Timestamp>,
    /// Microseconds since boot (`/dev/kmsg`'s third field).
    pub uptime_us: Option<u64>,
    /// The host a forwarder named.
    pub host: Option<String>,
    /// `kern`, `daemon`, … (`dmesg --decode`, a forwarder, a syslog priority).
    pub facility: Option<&'static str>,
    /// `err`, `warning`, … as the frame spelled it, normalised.
    pub level: Option<&'static str>,
    /// An editor's or viewer's line number.
    pub line_number: Option<u32>,
    /// The writer a frame named (`snap logs`' `app`) and its PID.
    pub ident: Option<String>,
    pub pid: Option<u32>,
    /// The frame is one only the kernel's log writes (a kmsg record,
    /// `dmesg --decode`, a forwarder's `kern` tag): the line under it is a
    /// kernel message, whatever its text.
    pub kernel: bool,
    /// The frame is a known logger's record head (a time and a level at
    /// least): the line is a record of that logger whatever its message,
    /// and is read as such when no recogniser knows the message.
    pub record: bool,
    /// The rows peeled (indices into [`ROWS`]), as a bit set.
    pub peeled: u64,
}

/// A line with no frame.
pub(crate) static NO_FRAME: Frame = Frame {
    time: None,
    uptime_us: None,
    host: None,
    facility: None,
    level: None,
    line_number: None,
    ident: None,
    pid: None,
    kernel: false,
    record: false,
    peeled: 0,
};

impl Frame {
    /// Whether any frame was peeled.
    pub fn is_empty(&self) -> bool {
        self.peeled == 0
    }

    /// What the first frame peeled is, in a few words, if any was.
    pub fn what(&self) -> Option<&'static str> {
        ROWS.iter()
            .enumerate()
            .find(|(i, _)| self.peeled & (1 << i) != 0)
            .map(|(_, r)| r.what)
    }

    /// The names of the rows peeled, in table order.
    pub fn rows(&self) -> impl Iterator<Item = &'static str> + '_ {
        ROWS.iter()
            .enumerate()
            .filter(|(i, _)| self.peeled & (1 << i) != 0)
            .map(|(_, r)| r.name)
    }
}

/// A line under its frames.
#[derive(Debug)]
pub struct Peeled<'a> {
    pub body: Cow<'a, str>,
    pub frame: Frame,
}

impl<'a> Peeled<'a> {
    /// `text` as it is, nothing peeled.
    pub fn bare(text: &'a str) -> Peeled<'a> {
        Peeled {
            body: Cow::Borrowed(text),
            frame: Frame::default(),
        }
    }
}

/// Peels the frames of one input's lines, in order. It remembers only what
/// spans lines: an editor's line-number gutter, once seen, is expected on
/// the next line with the next number.
#[derive(Debug, Default)]
pub struct Peeler {
    gutter: Option<Gutter>,
    /// LM Studio's record head on the line before (its time and level):
    /// the message on this line, after one space, is that record's.
    held: Option<(Option<Timestamp>, Option<&'static str>)>,
    /// A line with text was seen, and whether the last line was blank: a
    /// gutter starts at the top of a paste or of a block.
    seen_text: bool,
    last_blank: bool,
    /// A pasted log's markdown list in force: the marker (`-`, `*`) each
    /// of its lines carries.
    list: Option<u8>,
    /// A runner's `| ` gutter in force, and whether the last line was a
    /// runner's `Running: CMD` (its output may follow under the gutter).
    piped: bool,
    ran: bool,
}

/// A line-number gutter in force: the next number, and the column at which
/// text starts under it.
#[derive(Debug, Clone, Copy)]
struct Gutter {
    next: u32,
    width: usize,
}

/// Whether `text` is blank (`text.trim().is_empty()`): a line that starts
/// with a visible ASCII byte is not, with no trim (every line asks, most
/// start so).
pub(crate) fn blank(text: &str) -> bool {
    !text.as_bytes().first().is_some_and(u8::is_ascii_graphic) && text.trim().is_empty()
}

impl Peeler {
    pub fn new() -> Peeler {
        Peeler::default()
    }

    /// Notes a line read without peeling (the fast path of a big format):
    /// no gutter numbers it, and it is the text of a block.
    pub fn skip(&mut self, text: &str) {
        self.gutter = None;
        self.list = None;
        self.piped = false;
        self.ran = false;
        self.held = None;
        let blank = blank(text);
        self.seen_text |= !blank;
        self.last_blank = blank;
    }

    /// `text` under its frames, and what they said. Never fails: a line
    /// with no frame comes back as it is, borrowed.
    pub fn peel<'a>(&mut self, text: &'a str) -> Peeled<'a> {
        let mut frame = Frame::default();
        let mut body: Cow<'a, str> = Cow::Borrowed(text);
        // An editor's gutter is outermost: it numbers whatever was pasted.
        let top = !self.seen_text || self.last_blank;
        if let Some(rest) = self.gutter(text, top, &mut frame) {
            body = Cow::Borrowed(rest);
        }
        if let Cow::Borrowed(b) = body
            && let Some(rest) = self.list(b, top, &mut frame)
        {
            body = Cow::Borrowed(rest);
        }
        if let Cow::Borrowed(b) = body
            && let Some(rest) = self.runner(b, top, &mut frame)
        {
            body = Cow::Borrowed(rest);
        }
        self.ran = body.starts_with("Running: ");
        let blank = blank(&body);
        self.seen_text |= !blank;
        self.last_blank = blank;
        // Escape codes spelled out are anywhere in the line: rewritten
        // away before the prefixes are read.
        if let Some(clean) = rows::spelled_escapes(&body) {
            frame.peeled |= 1 << rows::ESCAPES;
            body = Cow::Owned(clean);
        }
        let held = self.held.take().filter(|_| held_message(&body).is_some());
        let peeled = match body {
            Cow::Borrowed(b) => {
                let b = if held.is_some() { &b[1..] } else { b };
                let rest = peel_prefixes(b, &mut frame);
                Peeled {
                    body: Cow::Borrowed(rest),
                    frame,
                }
            }
            Cow::Owned(owned) => {
                let b = if held.is_some() {
                    &owned[1..]
                } else {
                    &owned[..]
                };
                let rest = peel_prefixes(b, &mut frame);
                Peeled {
                    body: Cow::Owned(rest.to_owned()),
                    frame,
                }
            }
        };
        self.carry(peeled, held)
    }

    /// LM Studio's two-line record: a head alone on its line is held for
    /// the next line; the line after a held head, when it is the message
    /// (one space, then text), takes the head's time and level and is
    /// that record.
    fn carry<'a>(
        &mut self,
        mut peeled: Peeled<'a>,
        held: Option<(Option<Timestamp>, Option<&'static str>)>,
    ) -> Peeled<'a> {
        let head = 1 << rows::LM_STUDIO;
        let frame = &mut peeled.frame;
        if frame.peeled & head != 0 && peeled.body.is_empty() {
            self.held = Some((frame.time, frame.level));
        } else if let Some((time, level)) = held {
            frame.peeled |= head;
            frame.time = frame.time.take().or(time);
            frame.level = frame.level.or(level);
            frame.record = true;
        }
        peeled
    }

    /// The text of a markdown list item when the paste is a log made into
    /// a list (an issue editor continues `- ` on every line): the run
    /// starts at the top of a paste or a block, on an item whose text
    /// opens a log record, and goes on while each line carries the same
    /// marker (an empty item too). A list of words is left alone, as is a
    /// marker in the middle of a log (a YAML list, a diff).
    fn list<'a>(&mut self, text: &'a str, top: bool, frame: &mut Frame) -> Option<&'a str> {
        let item = rows::list_item(text);
        let run = match (self.list, item) {
            (Some(m), Some((marker, rest))) if m == marker => Some((marker, rest)),
            (None, Some((marker, rest))) if top && rows::opens_record(rest) => Some((marker, rest)),
            _ => None,
        };
        self.list = run.map(|(m, _)| m);
        let (_, rest) = run?;
        frame.peeled |= 1 << rows::LIST;
        Some(rest)
    }

    /// The text under a runner's gutter (ClusterFuzz's butler prints `| `
    /// before each line of a command's output, after its `Running: CMD`
    /// line): the run starts at the top of a paste or a block, or right
    /// after a `Running: ` line, on a line whose text opens a log record,
    /// and goes on while each line carries the gutter. A table's rows
    /// (`| a | b |`) are left alone.
    fn runner<'a>(&mut self, text: &'a str, top: bool, frame: &mut Frame) -> Option<&'a str> {
        let rest = rows::piped(text);
        let run = match rest {
            Some(r) if self.piped || ((top || self.ran) && rows::opens_record(r)) => Some(r),
            _ => None,
        };
        self.piped = run.is_some();
        let rest = run?;
        frame.peeled |= 1 << rows::RUNNER;
        Some(rest)
    }

    /// The text after an editor's line number: `cat -n`'s `     3\t`, a
    /// viewer's `  3 | ` or `  3 │ `, vim's `  3 `. A gutter starts at
    /// number 1 at the top of a paste or after a blank line, and goes on
    /// while each line carries the next number (a numbered blank line
    /// too); elsewhere a number is no gutter (`    1 ?  00:00:03 systemd`
    /// is a `ps -e` row, `    0    3182341     C` a pmon one).
    fn gutter<'a>(&mut self, text: &'a str, top: bool, frame: &mut Frame) -> Option<&'a str> {
        // A gutter starts only at the top of a paste or a block.
        if self.gutter.is_none() && !top {
            return None;
        }
        let bytes = text.as_bytes();
        // Byte test first: a gutter is spaces and digits.
        if !bytes
            .iter()
            .find(|b| **b != b' ')
            .is_some_and(u8::is_ascii_digit)
        {
            if self.gutter.is_some() && !text.trim().is_empty() {
                self.gutter = None;
            }
            return None;
        }
        let (number, rest, width, loose) = rows::line_number(text)?;
        let expected = match self.gutter {
            // Right-aligned numbers keep their column; left-aligned ones
            // (`9 | `, `10 | `) grow by a digit.
            Some(g) => number == g.next && (width == g.width || width == g.width + 1),
            // vim's `  1 ` followed by more spaces is more likely a table.
            None => number == 1 && top && (!loose || width >= 2 && !rest.starts_with(' ')),
        };
        if !expected {
            self.gutter = None;
            return None;
        }
        self.gutter = Some(Gutter {
            next: number + 1,
            width,
        });
        frame.line_number = Some(number);
        frame.peeled |= 1 << rows::GUTTER;
        Some(rest)
    }
}

/// Peels the prefix rows off `text`, outermost first, each at most once.
fn peel_prefixes<'a>(mut text: &'a str, frame: &mut Frame) -> &'a str {
    'outer: loop {
        let bytes = text.as_bytes();
        let Some(&first) = bytes.first() else {
            return text;
        };
        // Only the rows that can start with this byte, not yet peeled.
        let mut rows = BY_FIRST_BYTE[usize::from(first)] & !frame.peeled;
        while rows != 0 {
            let i = rows.trailing_zeros() as usize;
            rows &= rows - 1;
            let row = &ROWS[i];
            if !(row.may)(bytes) {
                continue;
            }
            if let Some(len) = (row.peel)(text, frame) {
                frame.peeled |= 1 << i;
                text = &text[len..];
                continue 'outer;
            }
        }
        return text;
    }
}

/// For each byte, the rows (a bit set of [`ROWS`]' indices) whose frame can
/// start with it.
static BY_FIRST_BYTE: std::sync::LazyLock<[u64; 256]> = std::sync::LazyLock::new(|| {
    let mut table = [0u64; 256];
    for (byte, rows) in table.iter_mut().enumerate() {
        for (i, row) in ROWS.iter().enumerate() {
            if (row.first)(byte as u8) {
                *rows |= 1 << i;
            }
        }
    }
    table
});

/// `text` without colour codes spelled out or orphaned in a paste (the
/// `spelled-escapes` rewrite), for text a reader took out of a line whose
/// frames were not peeled (a journal entry's message on the fast path).
pub(crate) fn strip_escapes(text: &str) -> Cow<'_, str> {
    match rows::spelled_escapes(text) {
        Some(clean) => Cow::Owned(clean),
        None => Cow::Borrowed(text),
    }
}

/// Peels one line with a fresh [`Peeler`] (tests, lines read alone).
/// The message line of LM Studio's two-line record: one space, then
/// text; the text.
fn held_message(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    (b.first() == Some(&b' ') && b.get(1).is_some_and(|c| !c.is_ascii_whitespace()))
        .then(|| &text[1..])
}

pub fn peel_line(text: &str) -> Peeled<'_> {
    Peeler::new().peel(text)
}

#[cfg(test)]
mod tests;
