//! A line worth a rule's attention: it contains one of the catalog's anchors.

use crate::source::Span;

/// The cleaned text of an input line that the prefilter kept. Rules match
/// signatures against these; typed facts carry the parsed fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub span: Span,
    pub text: String,
}
