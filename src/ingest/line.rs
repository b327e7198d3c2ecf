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
