//! The report every renderer reads: the diagnosis plus the input lines it
//! cites, resolved once.

use crate::context::{Context, Gap};
use crate::ingest::InputSummary;
use crate::rules::{Diagnosis, Finding};
use crate::source::{SourceMap, Span};
use crate::timeline::Timeline;

/// Evidence lines are shown up to this many characters; the rest is elided.
pub(super) const MAX_LINE_CHARS: usize = 400;

/// A cited input line, resolved to its text.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceLine {
    pub input: String,
    pub line: u32,
    pub text: String,
}

pub struct Report<'a> {
    pub sources: &'a SourceMap,
    pub inputs: &'a [InputSummary],
    pub diagnosis: &'a Diagnosis,
    /// What the bundle's manifest says (host, capture time, gaps), if known.
    pub context: Option<&'a Context>,
    pub timeline: Option<&'a Timeline>,
}

impl<'a> Report<'a> {
    pub fn new(
        sources: &'a SourceMap,
        inputs: &'a [InputSummary],
        diagnosis: &'a Diagnosis,
    ) -> Self {
        Report {
            sources,
            inputs,
            diagnosis,
            context: None,
            timeline: None,
        }
    }

    /// With the capture's context and the incident's timeline.
    pub fn with_capture(mut self, context: &'a Context, timeline: &'a Timeline) -> Self {
        self.context = Some(context);
        self.timeline = Some(timeline);
        self
    }

    /// What the capture could not collect, and problems with its manifest.
    pub fn gaps(&self) -> &'a [Gap] {
        self.context.map_or(&[], |c| &c.gaps)
    }

    pub fn manifest_notes(&self) -> &'a [String] {
        self.context.map_or(&[], |c| &c.notes)
    }

    pub fn findings(&self) -> &'a [Finding] {
        &self.diagnosis.findings
    }

    pub fn root_cause(&self) -> Option<&'a Finding> {
        let id = self.diagnosis.root_cause.as_ref()?;
        self.diagnosis.findings.iter().find(|f| &f.id == id)
    }

    pub fn resolve(&self, span: Span) -> EvidenceLine {
        let text = self.sources.line_text(span);
        let text = text.trim_end();
        let text = match text.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_owned(),
        };
        EvidenceLine {
            input: self.sources.name(span).to_owned(),
            line: span.line,
            text,
        }
    }

    /// `input:line`, the citation used everywhere.
    pub fn cite(&self, span: Span) -> String {
        format!("{}:{}", self.sources.name(span), span.line)
    }

    /// Total unrecognised lines over all inputs.
    pub fn unrecognized(&self) -> u32 {
        self.inputs.iter().map(|i| i.unrecognized).sum()
    }
}
