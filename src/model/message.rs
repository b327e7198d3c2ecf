//! A line worth a rule's attention: it contains one of the catalog's anchors.

use crate::source::Span;

/// The cleaned text of an input line that the prefilter kept. Rules match
/// signatures against these; typed facts carry the parsed fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub span: Span,
    pub text: String,
    /// The writer a prefix of the line names (vLLM's and Ray's `(Worker_TP1
    /// pid=15193) `), when a server reader peeled one: a cited line's PID
    /// even where no event was made of it.
    pub pid: Option<u32>,
}

/// Lines of one template (numbers, ids and times masked) seen more often
/// than a report can cite: the first `read` were read like any line, the
/// last `kept_last` kept and read at the end, the rest only counted.
#[derive(Debug, Clone, PartialEq)]
pub struct Repeat {
    /// The template's first line.
    pub first: Span,
    /// Its last line.
    pub last: Span,
    /// Lines of the template, all told.
    pub count: u64,
    pub read: u32,
    pub kept_last: u32,
}
