//! The line every reader is handed: its text under its frames, its span
//! and its frame. A leaf of ingest, so every parser can name it without
//! naming the module that dispatches to the parsers.

use super::frame::{self, Frame};
use crate::source::Span;

/// One line handed to a parser: its text under its frames, where it came
/// from, and what the frames said ([`frame`]).
#[derive(Debug, Clone)]
pub struct Line<'a> {
    pub span: Span,
    pub text: &'a str,
    pub frame: &'a Frame,
}

impl<'a> Line<'a> {
    /// A line with no frame around it (or whose frame does not matter to
    /// the reader it goes to).
    pub fn bare(span: Span, text: &'a str) -> Line<'a> {
        Line {
            span,
            text,
            frame: &frame::NO_FRAME,
        }
    }
}

#[cfg(test)]
impl<'a> Line<'a> {
    /// Each line of `text` as input 0's, numbered from 1, under its frames
    /// as the stream peels them: how parser tests feed a parser without
    /// the detector. (A test's frames are leaked: they live as long as it.)
    pub fn numbered(text: &'a str) -> Vec<Line<'a>> {
        let mut peeler = frame::Peeler::new();
        text.lines()
            .enumerate()
            .map(|(i, t)| {
                let peeled = peeler.peel(t);
                let text: &'a str = match peeled.body {
                    std::borrow::Cow::Borrowed(b) => b,
                    std::borrow::Cow::Owned(o) => Box::leak(o.into_boxed_str()),
                };
                Line {
                    span: Span {
                        source: crate::source::SourceId(0),
                        line: i as u32 + 1,
                    },
                    text,
                    frame: Box::leak(Box::new(peeled.frame)),
                }
            })
            .collect()
    }
}

/// Whether the second word of `text` (words apart by white space) starts
/// with a digit: every row of `ps -ef`, `ps aux`, `ps alx` and `lsmod`
/// does (a PID, a module's size), and the sniffers ask every line of a
/// segment without a fast path, so a log line (`slot update_slots: …`)
/// fails here, not in a row regex. A byte past ASCII before that word
/// answers yes: Unicode white space may stand there, as `\s` reads it.
pub(crate) fn second_word_starts_with_digit(text: &str) -> bool {
    let b = text.trim_start().as_bytes();
    let mut i = 0;
    while i < b.len() && !b[i].is_ascii_whitespace() {
        if !b[i].is_ascii() {
            return true;
        }
        i += 1;
    }
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    b.get(i)
        .is_some_and(|c| c.is_ascii_digit() || !c.is_ascii())
}
