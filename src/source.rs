//! Input text and the spans that point back into it.
//!
//! A [`SourceMap`] lists every input the user gave (a file, a bundle member,
//! or stdin). An input is either text already in memory ([`Source::new`]) or
//! a file on disk that ingest reads once, line by line, without ever holding
//! it whole ([`Source::file`]); for those, the lines some fact or message
//! needs are kept during that pass ([`kept`]) so that reports can still cite
//! them. Every fact and every finding carries a [`Span`] (source + 1-based
//! line) so the report can always cite `input:line: text`.

mod kept;
mod lines;
mod log_driver;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

pub use kept::KeptLines;
pub use lines::{MAX_LINE, ReadSummary};

/// Opens an input's bytes afresh, each time from the start: a compressed
/// file through its decoders, a member of a tar archive.
pub type Opener = Box<dyn Fn() -> std::io::Result<Box<dyn std::io::Read + Send>> + Send + Sync>;

/// Index of an input in its [`SourceMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceId(pub usize);

/// A line of one input. Lines are 1-based, like every editor and `grep -n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub source: SourceId,
    pub line: u32,
}

/// One input.
#[derive(Debug)]
pub struct Source {
    /// Display name: the path relative to the bundle, the file path, or `stdin`.
    pub name: String,
    body: Body,
    /// A streamed file decoded whole, on demand (tests, [`Source::raw_line`]).
    whole: OnceLock<Text>,
    /// What the last pass over a streamed file learned.
    read: Mutex<Option<ReadSummary>>,
    /// The lines of a streamed file that facts and messages need.
    kept: Mutex<KeptLines>,
    /// Lines looked up by reading the file again because no pass kept them.
    reread: AtomicUsize,
}

enum Body {
    Text(Text),
    /// A plain text file, read when ingest streams it.
    File(PathBuf),
    /// Text read through an opener, as often as needed, never held: a
    /// compressed file, a tar member. The size is a hint (for progress).
    Open(Opener, Option<u64>),
    /// A pipe (stdin): its first bytes, already read, and the rest; it can
    /// be read once only.
    Stream(Mutex<Option<Pipe>>),
}

/// The bytes of a pipe: those read to sniff them, then the rest.
struct Pipe {
    head: Vec<u8>,
    rest: Box<dyn std::io::Read + Send>,
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Text(t) => f.debug_tuple("Text").field(t).finish(),
            Body::File(p) => f.debug_tuple("File").field(p).finish(),
            Body::Open(_, size) => f.debug_tuple("Open").field(size).finish(),
            Body::Stream(p) => f.debug_tuple("Stream").field(p).finish(),
        }
    }
}

impl std::fmt::Debug for Pipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pipe")
    }
}

impl Pipe {
    fn reader(self) -> impl std::io::Read {
        std::io::Read::chain(std::io::Cursor::new(self.head), self.rest)
    }
}

/// Decoded text and where its lines start.
#[derive(Debug)]
struct Text {
    text: String,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
    /// Number of invalid UTF-8 sequences replaced while decoding.
    invalid_utf8: usize,
}

impl Text {
    fn new(bytes: &[u8]) -> Text {
        let (text, invalid_utf8) = match String::from_utf8_lossy(bytes) {
            Cow::Borrowed(s) => (s.to_owned(), 0),
            Cow::Owned(s) => {
                let n = s.matches('\u{FFFD}').count();
                (s, n)
            }
        };
        let mut line_starts = vec![0];
        line_starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        if line_starts.last() == Some(&text.len()) && !text.is_empty() {
            line_starts.pop();
        }
        if text.is_empty() {
            line_starts.clear();
        }
        Text {
            text,
            line_starts,
            invalid_utf8,
        }
    }

    fn line_count(&self) -> u32 {
        self.line_starts.len() as u32
    }

    fn raw_line(&self, line: u32) -> &str {
        let i = line as usize;
        if i == 0 || i > self.line_starts.len() {
            return "";
        }
        let start = self.line_starts[i - 1];
        let end = self.line_starts.get(i).copied().unwrap_or(self.text.len());
        let s = &self.text[start..end];
        let s = s.strip_suffix('\n').unwrap_or(s);
        s.strip_suffix('\r').unwrap_or(s)
    }
}

impl Source {
    /// Decodes `bytes` lossily (parsers must never fail on bad bytes) and
    /// indexes its lines.
    pub fn new(name: impl Into<String>, bytes: &[u8]) -> Source {
        Source::with_body(name.into(), Body::Text(Text::new(bytes)))
    }

    /// A plain text file on disk, read line by line when ingest reaches it:
    /// memory does not grow with its size.
    pub fn file(name: impl Into<String>, path: impl AsRef<Path>) -> Source {
        Source::with_body(name.into(), Body::File(path.as_ref().to_owned()))
    }

    /// Text that `open` gives afresh each time it is called, read line by
    /// line when ingest reaches it and never held: a compressed file through
    /// its decoders, a member of a tar archive.
    pub fn opened(name: impl Into<String>, size: Option<u64>, open: Opener) -> Source {
        Source::with_body(name.into(), Body::Open(open, size))
    }

    /// A pipe, read line by line when ingest reaches it, once: `head` holds
    /// its first bytes, which the bundle reader looked at.
    pub fn stream(
        name: impl Into<String>,
        head: Vec<u8>,
        rest: Box<dyn std::io::Read + Send>,
    ) -> Source {
        let pipe = Pipe { head, rest };
        Source::with_body(name.into(), Body::Stream(Mutex::new(Some(pipe))))
    }

    fn with_body(name: String, body: Body) -> Source {
        Source {
            name,
            body,
            whole: OnceLock::new(),
            read: Mutex::new(None),
            kept: Mutex::new(KeptLines::default()),
            reread: AtomicUsize::new(0),
        }
    }

    /// Whether the text is read as it is needed rather than held.
    pub fn is_streamed(&self) -> bool {
        !matches!(self.body, Body::Text(_))
    }

    /// The size in bytes, as far as it is known without reading (a pipe's
    /// is not: `None`).
    pub fn size(&self) -> Option<u64> {
        match &self.body {
            Body::Text(t) => Some(t.text.len() as u64),
            Body::File(path) => Some(std::fs::metadata(path).map_or(0, |m| m.len())),
            Body::Open(_, size) => *size,
            Body::Stream(_) => None,
        }
    }

    /// The size in bytes, as far as it is known without reading.
    pub fn size_hint(&self) -> u64 {
        self.size().unwrap_or(0)
    }

    /// The text, decoded whole: in memory already, or read for the occasion
    /// (a pipe only if no pass read it yet).
    fn whole(&self) -> &Text {
        match &self.body {
            Body::Text(t) => t,
            Body::File(path) => self
                .whole
                .get_or_init(|| Text::new(&std::fs::read(path).unwrap_or_default())),
            Body::Open(open, _) => self.whole.get_or_init(|| {
                let mut bytes = Vec::new();
                if let Ok(mut input) = open() {
                    let _ = std::io::Read::read_to_end(&mut input, &mut bytes);
                }
                Text::new(&bytes)
            }),
            Body::Stream(pipe) => self.whole.get_or_init(|| {
                let mut bytes = Vec::new();
                if let Some(pipe) = pipe.lock().ok().and_then(|mut p| p.take()) {
                    let _ = std::io::Read::read_to_end(&mut pipe.reader(), &mut bytes);
                }
                Text::new(&bytes)
            }),
        }
    }

    pub fn line_count(&self) -> u32 {
        match &self.body {
            Body::Text(t) => t.line_count(),
            _ => match self.last_read() {
                Some(r) => r.lines,
                None => self.whole().line_count(),
            },
        }
    }

    /// Number of invalid UTF-8 sequences replaced while decoding.
    pub fn invalid_utf8(&self) -> usize {
        match &self.body {
            Body::Text(t) => t.invalid_utf8,
            _ => match self.last_read() {
                Some(r) => r.invalid_utf8,
                None => self.whole().invalid_utf8,
            },
        }
    }

    fn last_read(&self) -> Option<ReadSummary> {
        self.read.lock().ok().and_then(|r| r.clone())
    }

    /// The raw text of a 1-based line without its line terminator. A
    /// streamed file is read whole for it: for tests and small inputs.
    pub fn raw_line(&self, line: u32) -> &str {
        self.whole().raw_line(line)
    }

    /// Every line, cleaned for matching: ANSI escapes removed, `\r` handled.
    pub fn lines(&self) -> impl Iterator<Item = (u32, Cow<'_, str>)> {
        (1..=self.line_count()).map(|n| (n, clean_line(self.raw_line(n))))
    }

    /// Reads every line once, in order, without holding the input: `line`
    /// gets each line number and raw text (no terminator), `progress` the
    /// bytes read so far. A streamed file's line count, invalid UTF-8 and
    /// any read error are remembered.
    pub fn for_each_line(
        &self,
        progress: &mut dyn FnMut(u64),
        line: &mut dyn FnMut(u32, &str),
    ) -> ReadSummary {
        let summary = match &self.body {
            Body::Text(t) => {
                let mut summary = ReadSummary {
                    lines: t.line_count(),
                    invalid_utf8: t.invalid_utf8,
                    ..ReadSummary::default()
                };
                for n in 1..=t.line_count() {
                    line(n, cut_text(t.raw_line(n), &mut summary));
                }
                progress(t.text.len() as u64);
                summary
            }
            Body::File(path) => lines::read_file(path, progress, line),
            Body::Open(open, _) => match open() {
                Ok(mut input) => lines::read_stream(&mut input, progress, line),
                Err(e) => ReadSummary {
                    error: Some(e.to_string()),
                    ..ReadSummary::default()
                },
            },
            Body::Stream(pipe) => match pipe.lock().ok().and_then(|mut p| p.take()) {
                Some(pipe) => lines::read_stream(&mut pipe.reader(), progress, line),
                // Read already: what that pass learned stands.
                None => match self.whole.get() {
                    Some(t) => {
                        let mut summary = ReadSummary {
                            lines: t.line_count(),
                            invalid_utf8: t.invalid_utf8,
                            ..ReadSummary::default()
                        };
                        for n in 1..=t.line_count() {
                            line(n, cut_text(t.raw_line(n), &mut summary));
                        }
                        summary
                    }
                    None => self.last_read().unwrap_or_default(),
                },
            },
        };
        if self.is_streamed() {
            if let Ok(mut r) = self.read.lock() {
                *r = Some(summary.clone());
            }
        }
        summary
    }

    /// Adds lines that a pass over a streamed file kept.
    pub fn keep(&self, lines: KeptLines) {
        if let Ok(mut kept) = self.kept.lock() {
            kept.merge(lines);
        }
    }

    /// Why the last pass over a streamed file stopped early, if it did.
    pub fn read_error(&self) -> Option<String> {
        self.last_read().and_then(|r| r.error)
    }

    /// What the last pass learned: lines, invalid UTF-8, an error, lines cut
    /// at [`MAX_LINE`] (for text held in memory, what a pass would).
    pub fn read_summary(&self) -> Option<ReadSummary> {
        match &self.body {
            Body::Text(t) => {
                let mut summary = ReadSummary {
                    lines: t.line_count(),
                    invalid_utf8: t.invalid_utf8,
                    ..ReadSummary::default()
                };
                for n in 1..=t.line_count() {
                    cut_text(t.raw_line(n), &mut summary);
                }
                Some(summary)
            }
            _ => self.last_read(),
        }
    }

    /// How many cited lines had to be read from disk again because no pass
    /// kept them (a line the prefilter should have kept: zero in tests).
    pub fn rereads(&self) -> usize {
        self.reread.load(Ordering::Relaxed)
    }

    /// The cleaned text of line `line`.
    fn line_text(&self, line: u32) -> Cow<'_, str> {
        if let Body::Text(t) = &self.body {
            return clean_line(t.raw_line(line));
        }
        let kept = self
            .kept
            .lock()
            .ok()
            .and_then(|k| k.get(line).map(str::to_owned));
        if let Some(text) = kept {
            return Cow::Owned(text);
        }
        self.reread.fetch_add(1, Ordering::Relaxed);
        let raw = match &self.body {
            Body::File(path) => std::fs::File::open(path)
                .ok()
                .and_then(|mut f| lines::fetch_line(&mut f, line))
                .unwrap_or_default(),
            Body::Open(open, _) => open()
                .ok()
                .and_then(|mut input| lines::fetch_line(&mut input, line))
                .unwrap_or_default(),
            // A pipe cannot be read again: only what a pass kept is there.
            _ => self.whole().raw_line(line).to_owned(),
        };
        Cow::Owned(clean_line(&raw).into_owned())
    }
}

/// Every line of every file under the repository's `fixtures/`, cleaned
/// as a source cleans it ([`clean_line`]): the lines the tests that hold a
/// fast test to the regex it stands for run over (ingest's sniffers and
/// exception lines, the rules' error templates). For tests only: it reads
/// the checkout's files.
#[doc(hidden)]
pub fn fixture_lines() -> Vec<String> {
    let mut lines = Vec::new();
    let mut dirs =
        vec![std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("fixtures")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("fixtures").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let text = String::from_utf8_lossy(&bytes);
                lines.extend(text.lines().map(|l| clean_line(l).into_owned()));
            }
        }
    }
    lines
}

/// Removes terminal escape sequences (CSI, whole OSC/DCS/APC strings, in
/// their 7-bit and C1 forms: [`escape_len`]) and handles `\r`, so parsers
/// see what a person sees; a container log driver's record is first read
/// as the line it holds ([`log_driver`]). A line without escapes is
/// borrowed, not copied.
pub fn clean_line(raw: &str) -> Cow<'_, str> {
    match log_driver::docker_json_file(raw) {
        Some(line) => Cow::Owned(clean_escapes(&line).into_owned()),
        None => clean_escapes(raw),
    }
}

/// [`clean_line`] of a line as it is.
fn clean_escapes(raw: &str) -> Cow<'_, str> {
    let raw = raw.strip_suffix('\r').unwrap_or(raw);
    // ESC, `\r`, and the lead byte of U+0080..U+00BF (C1 controls among them).
    if memchr::memchr3(b'\x1b', b'\r', 0xc2, raw.as_bytes()).is_none() {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    // Only a character that starts with one of those three bytes can start
    // an escape sequence or be `\r`: the text up to the next is copied
    // whole (each is ASCII or a lead byte, so it is at a character's start).
    while let Some(at) = memchr::memchr3(b'\x1b', b'\r', 0xc2, rest.as_bytes()) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(n) = escape_len(rest) {
            rest = &rest[n..];
            continue;
        }
        let Some(c) = rest.chars().next() else { break };
        match c {
            // A progress bar redraws with \r; what a person last saw follows it.
            '\r' => out.clear(),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The length in bytes of the terminal escape sequence `text` starts with,
/// if it starts with one: a CSI (`ESC [` or U+009B, up to its final byte in
/// `@`..`~`), a string (OSC `ESC ]` or U+009D; DCS, SOS, PM, APC: `ESC P`,
/// `ESC X`, `ESC ^`, `ESC _` or U+0090, U+0098, U+009E, U+009F) through its
/// terminator (`ESC \`, U+009C, or BEL for OSC), or another `ESC` sequence
/// (`ESC ( B`: intermediates and a final byte). A string with no terminator
/// is only its introducer: the rest of the line is kept, not swallowed. The
/// one definition of an escape sequence: input lines drop them
/// ([`clean_line`]), reports show each as one `?` (`render::clean`).
pub fn escape_len(text: &str) -> Option<usize> {
    let mut chars = text.char_indices();
    let (_, first) = chars.next()?;
    let (osc, intro) = match first {
        '\x1b' => match chars.next() {
            Some((_, '[')) => return Some(csi_len(text, 2)),
            Some((_, ']')) => (true, 2),
            Some((_, 'P' | 'X' | '^' | '_')) => (false, 2),
            // Intermediates (`(`, `#`, …), then one final byte.
            Some((i, c)) if ('\x20'..='\x2f').contains(&c) => {
                let mut end = i + 1;
                for (j, c) in text[end..].char_indices() {
                    if !('\x20'..='\x2f').contains(&c) {
                        if ('\x30'..='\x7e').contains(&c) {
                            end += j + 1;
                        } else {
                            end += j;
                        }
                        return Some(end);
                    }
                }
                return Some(text.len());
            }
            Some((i, c)) if ('\x30'..='\x7e').contains(&c) => return Some(i + 1),
            _ => return Some(1),
        },
        '\u{9b}' => return Some(csi_len(text, 2)),
        '\u{9d}' => (true, 2),
        '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => (false, 2),
        _ => return None,
    };
    let body = &text[intro..];
    let mut iter = body.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        match c {
            '\x07' if osc => return Some(intro + i + 1),
            '\u{9c}' => return Some(intro + i + 2),
            '\x1b' if iter.peek().is_some_and(|(_, n)| *n == '\\') => {
                return Some(intro + i + 2);
            }
            _ => {}
        }
    }
    Some(intro)
}

/// A CSI's length: its introducer (`intro` bytes), then everything up to and
/// including a final byte in `@`..`~`.
fn csi_len(text: &str, intro: usize) -> usize {
    text[intro..]
        .char_indices()
        .find(|(_, c)| ('@'..='~').contains(c))
        .map_or(text.len(), |(i, c)| intro + i + c.len_utf8())
}

/// A line of text held in memory, cut at [`MAX_LINE`] as a streamed one is,
/// the cut counted in `summary`.
fn cut_text<'a>(line: &'a str, summary: &mut ReadSummary) -> &'a str {
    let (kept, cut_off) = lines::cut(line.as_bytes());
    if cut_off == 0 {
        return line;
    }
    summary.cut_lines += 1;
    summary.cut_bytes += cut_off as u64;
    let mut end = kept.len();
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// All inputs of one analysis, in the order they were given, and the files
/// that could not be made inputs (a dangling link, a link out of the bundle,
/// an unreadable file, a device), each with why: the rest is still read.
#[derive(Debug, Default)]
pub struct SourceMap {
    sources: Vec<Source>,
    skipped: Vec<(String, String)>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    pub fn add(&mut self, source: Source) -> SourceId {
        self.sources.push(source);
        SourceId(self.sources.len() - 1)
    }

    pub fn get(&self, id: SourceId) -> &Source {
        &self.sources[id.0]
    }

    /// Records a file that is not read, and why.
    pub fn skip(&mut self, name: impl Into<String>, why: impl Into<String>) {
        self.skipped.push((name.into(), why.into()));
    }

    /// The files that were not read, with why, in the order met.
    pub fn skipped(&self) -> &[(String, String)] {
        &self.skipped
    }

    pub fn iter(&self) -> impl Iterator<Item = (SourceId, &Source)> {
        self.sources
            .iter()
            .enumerate()
            .map(|(i, s)| (SourceId(i), s))
    }

    pub fn len(&self) -> usize {
        self.sources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    pub fn name(&self, span: Span) -> &str {
        &self.get(span.source).name
    }

    /// The cleaned text of the line a span points at, for evidence excerpts.
    pub fn line_text(&self, span: Span) -> Cow<'_, str> {
        self.get(span.source).line_text(span.line)
    }

    /// The first input's error when every input stopped on one before its
    /// first line: nothing was read at all.
    pub fn unreadable(&self) -> Option<(&str, String)> {
        let all = !self.sources.is_empty()
            && self.sources.iter().all(|s| {
                s.last_read()
                    .is_some_and(|r| r.error.is_some() && r.lines == 0)
            });
        if all { self.read_error() } else { None }
    }

    /// The first input whose reading stopped on an error, and why.
    pub fn read_error(&self) -> Option<(&str, String)> {
        self.sources
            .iter()
            .find_map(|s| Some((s.name.as_str(), s.read_error()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first [`clean_line`], character by character: the oracle of the
    /// one that copies the text between escape sequences whole.
    fn clean_by_chars(raw: &str) -> String {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let mut out = String::new();
        let mut rest = raw;
        while let Some(c) = rest.chars().next() {
            if let Some(n) = escape_len(rest) {
                rest = &rest[n..];
                continue;
            }
            match c {
                '\r' => out.clear(),
                c => out.push(c),
            }
            rest = &rest[c.len_utf8()..];
        }
        out
    }

    #[test]
    fn a_line_is_cleaned_as_character_by_character() {
        let pieces = [
            "a", "é", "\u{9b}", "\u{9c}", "\u{9d}", "\u{90}", "\u{a9}", "\x1b", "[", "]", "\\",
            "\x07", "\r", "1;36m", "(", "m", " ", "P", "中",
        ];
        // Every string of up to four pieces.
        let mut lines = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = lines
                .iter()
                .flat_map(|l| pieces.iter().map(move |p| format!("{l}{p}")))
                .collect();
            lines.extend(longer);
            lines.dedup();
        }
        lines.push("\x1b[1;36m(VllmWorker rank=1 pid=4243)\x1b[0;0m INFO".into());
        lines.push(
            "\x1b[2m2024-11-05T10:00:00Z\x1b[0m \x1b[32m INFO\x1b[0m text_generation_router".into(),
        );
        for line in &lines {
            assert_eq!(clean_line(line), clean_by_chars(line), "{line:?}");
        }
        assert!(lines.len() > 100_000, "{}", lines.len());
    }

    #[test]
    fn a_docker_json_file_record_is_cleaned_as_the_line_it_holds() {
        let record = r#"{"log":"\u001b[32mINFO\u001b[0m:     Started server process [\u001b[36m428\u001b[0m]\r\n","stream":"stdout","time":"2024-05-01T10:00:00.5Z"}"#;
        assert_eq!(
            clean_line(record),
            "2024-05-01T10:00:00.5Z INFO:     Started server process [428]"
        );
    }

    #[test]
    fn lines_handle_crlf_missing_final_newline_and_empty_input() {
        let s = Source::new("a", b"one\r\ntwo\nthree");
        let lines: Vec<_> = s.lines().map(|(n, l)| (n, l.into_owned())).collect();
        assert_eq!(
            lines,
            vec![(1, "one".into()), (2, "two".into()), (3, "three".into())]
        );
        assert_eq!(Source::new("e", b"").line_count(), 0);
        assert_eq!(Source::new("n", b"x\n").line_count(), 1);
        assert_eq!(Source::new("n", b"\n\n").line_count(), 2);
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily_and_counted() {
        let s = Source::new("b", b"ok \xff\xfe end\n");
        assert_eq!(s.invalid_utf8(), 2);
        assert!(s.raw_line(1).starts_with("ok "));
    }

    /// OSC titles and hyperlinks, DCS strings and C1 forms go whole, not
    /// leaving `]0;title` behind (probe D17); an unterminated string keeps
    /// the rest of the line.
    #[test]
    fn whole_escape_strings_and_c1_forms_are_removed() {
        for (raw, want) in [
            (
                "\x1b]0;rootcause\x07Nov 27 09:38:53 ct200 systemd[1]: x",
                "Nov 27 09:38:53 ct200 systemd[1]: x",
            ),
            (
                "Loaded: loaded (\x1b]8;;file://h/etc/x.service\x1b\\/etc/x.service\x1b]8;;\x1b\\; enabled)",
                "Loaded: loaded (/etc/x.service; enabled)",
            ),
            ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),
            ("a\u{9b}31mred\u{9b}0m", "ared"),
            ("a\u{9d}0;t\u{9c}b", "ab"),
            ("\x1b(B\x1b[mplain", "plain"),
            ("\x1b]0;no terminator here", "0;no terminator here"),
            ("caf\u{e9} 30\u{b0}C", "caf\u{e9} 30\u{b0}C"),
        ] {
            assert_eq!(clean_line(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn ansi_escapes_and_progress_redraws_are_cleaned() {
        assert_eq!(
            clean_line("\x1b[1;36m(VllmWorker rank=1 pid=4243)\x1b[0;0m INFO"),
            "(VllmWorker rank=1 pid=4243) INFO"
        );
        assert_eq!(clean_line("10%\r50%\r100% done"), "100% done");
        assert_eq!(clean_line("plain\r"), "plain");
    }

    /// A streamed file and the same bytes in memory read the same: lines,
    /// their text, invalid UTF-8 (a literal U+FFFD counts only once the
    /// input has an invalid byte, as lossy decoding of the whole does).
    #[test]
    fn a_streamed_file_reads_like_the_same_text_in_memory() {
        let cases: [&[u8]; 8] = [
            b"",
            b"x",
            b"x\n",
            b"\n\n",
            b"one\r\ntwo\r\r\nthree",
            b"ok \xff\xfe end\nnext \xe2\x82\nlast",
            "valid \u{FFFD} only\n".as_bytes(),
            b"\xef\xbf\xbd literal then \xc3\n",
        ];
        let dir = std::env::temp_dir().join(format!("rootcause-src-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for (i, bytes) in cases.iter().enumerate() {
            let path = dir.join(format!("case{i}"));
            std::fs::write(&path, bytes).expect("write");
            let memory = Source::new("m", bytes);
            let file = Source::file("f", &path);
            let mut seen = Vec::new();
            let summary = file.for_each_line(&mut |_| {}, &mut |n, l| seen.push((n, l.to_owned())));
            let want: Vec<(u32, String)> = (1..=memory.line_count())
                .map(|n| (n, memory.raw_line(n).to_owned()))
                .collect();
            assert_eq!(seen, want, "case {i}");
            assert_eq!(summary.lines, memory.line_count(), "case {i}");
            assert_eq!(summary.invalid_utf8, memory.invalid_utf8(), "case {i}");
            assert_eq!(file.line_count(), memory.line_count(), "case {i}");
            for n in 1..=memory.line_count() {
                assert_eq!(file.line_text(n), memory.line_text(n), "case {i} line {n}");
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
