//! What a line reader says about each line ([`Read`]) and where it writes
//! ([`Out`]): the vocabulary the segment dispatcher ([`super::reader`]) and
//! every streaming reader (journals, kernel, server, the recognisers)
//! share. A leaf, so the readers do not depend on their dispatcher.

use crate::model::{Facts, Timestamp};
use crate::source::KeptLines;

/// How a line was read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Read {
    /// In full: facts may cite it, so its text is kept.
    Parsed,
    /// Skimmed: no fact cites it. The time the full reading would have
    /// given the line, if any, places the lines kept below it.
    Skimmed(Option<Timestamp>),
}

/// Where a reader writes: the facts, and the text of lines read in full
/// other than the current one (a skimmed entry read after all).
pub(super) struct Out<'a> {
    pub facts: &'a mut Facts,
    pub kept: &'a mut KeptLines,
}
