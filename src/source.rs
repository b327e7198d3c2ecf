//! Input text and the spans that point back into it.
//!
//! A [`SourceMap`] owns every input the user gave (a file, a bundle member, or
//! stdin), already decoded. Every fact and every finding carries a [`Span`]
//! (source + 1-based line) so the report can always cite `input:line: text`.

use std::borrow::Cow;

/// Index of an input in its [`SourceMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceId(pub usize);

/// A line of one input. Lines are 1-based, like every editor and `grep -n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub source: SourceId,
    pub line: u32,
}

/// One decoded input.
#[derive(Debug)]
pub struct Source {
    /// Display name: the path relative to the bundle, the file path, or `stdin`.
    pub name: String,
    text: String,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
    /// Number of invalid UTF-8 sequences replaced while decoding.
    pub invalid_utf8: usize,
}

impl Source {
    /// Decodes `bytes` lossily (parsers must never fail on bad bytes) and
    /// indexes its lines.
    pub fn new(name: impl Into<String>, bytes: &[u8]) -> Source {
        let (text, invalid_utf8) = match String::from_utf8_lossy(bytes) {
            Cow::Borrowed(s) => (s.to_owned(), 0),
            Cow::Owned(s) => {
                let n = s.matches('\u{FFFD}').count();
                (s, n)
            }
        };
        let mut line_starts = vec![0];
        line_starts.extend(memchr_newlines(&text).map(|i| i + 1));
        if line_starts.last() == Some(&text.len()) && !text.is_empty() {
            line_starts.pop();
        }
        if text.is_empty() {
            line_starts.clear();
        }
        Source {
            name: name.into(),
            text,
            line_starts,
            invalid_utf8,
        }
    }

    pub fn line_count(&self) -> u32 {
        self.line_starts.len() as u32
    }

    /// The raw text of a 1-based line without its line terminator.
    pub fn raw_line(&self, line: u32) -> &str {
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

    /// Every line, cleaned for matching: ANSI escapes removed, `\r` handled.
    pub fn lines(&self) -> impl Iterator<Item = (u32, Cow<'_, str>)> {
        (1..=self.line_count()).map(|n| (n, clean_line(self.raw_line(n))))
    }
}

fn memchr_newlines(text: &str) -> impl Iterator<Item = usize> + '_ {
    text.bytes()
        .enumerate()
        .filter_map(|(i, b)| (b == b'\n').then_some(i))
}

/// Removes ANSI CSI escapes and a trailing carriage return, so parsers see
/// what a person sees. A line without escapes is borrowed, not copied.
pub fn clean_line(raw: &str) -> Cow<'_, str> {
    let raw = raw.strip_suffix('\r').unwrap_or(raw);
    if !raw.contains('\x1b') && !raw.contains('\r') {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' if chars.peek() == Some(&'[') => {
                chars.next();
                // Parameter and intermediate bytes, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            '\x1b' => {}
            // A progress bar redraws with \r; what a person last saw follows it.
            '\r' => out.clear(),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// All inputs of one analysis, in the order they were given.
#[derive(Debug, Default)]
pub struct SourceMap {
    sources: Vec<Source>,
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
        clean_line(self.get(span.source).raw_line(span.line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(s.invalid_utf8, 2);
        assert!(s.raw_line(1).starts_with("ok "));
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
}
