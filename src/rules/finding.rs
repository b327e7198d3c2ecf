//! What a rule concludes: a finding with its evidence, confidence and steps.

use std::collections::BTreeSet;

use super::Action;
pub use crate::model::{Category, Severity};
use crate::source::Span;

/// A line that supports a finding, and what it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    pub span: Span,
    pub note: String,
    /// The text on the line that the note is about (`55286MiB`, `20629`),
    /// underlined in the reports. `None`: the renderer underlines the first
    /// value named in the note that the line holds, if any.
    pub highlight: Option<String>,
}

impl Evidence {
    pub fn new(span: Span, note: impl Into<String>) -> Evidence {
        Evidence {
            span,
            note: note.into(),
            highlight: None,
        }
    }

    /// Evidence whose key value is `needle`, a literal part of the line.
    pub fn marked(span: Span, note: impl Into<String>, needle: impl Into<String>) -> Evidence {
        Evidence {
            highlight: Some(needle.into()).filter(|n: &String| !n.is_empty()),
            ..Evidence::new(span, note)
        }
    }
}

/// The things a finding is about, for filtering and fleet aggregation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Entities {
    pub pids: BTreeSet<u32>,
    pub gpus: BTreeSet<u32>,
    /// GPUs the inputs name only by PCI bus id (`0000:dc:00`, a kernel Xid
    /// line), never resolved to an index: listed after the indices.
    pub gpu_bus_ids: BTreeSet<String>,
    pub units: BTreeSet<String>,
    pub xid: BTreeSet<u32>,
}

/// One condition of a rule and whether the incident met it: the explanation
/// of a confidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub text: String,
    pub met: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// `F1`, `F2`, … assigned after ranking.
    pub id: String,
    pub rule: &'static str,
    pub category: Category,
    pub severity: Severity,
    /// 0..=1, derived from `conditions`.
    pub confidence: f64,
    pub title: String,
    /// One sentence naming the cause, for the top of the report.
    pub headline: String,
    pub explanation: String,
    /// From the symptom the user saw down to the cause, one line each.
    pub chain: Vec<String>,
    pub entities: Entities,
    pub evidence: Vec<Evidence>,
    pub actions: Vec<Action>,
    pub conditions: Vec<Condition>,
    /// Ids of findings this one explains.
    pub explains: Vec<String>,
    /// Other findings that could also be the root cause, with their confidence.
    pub competing: Vec<(String, f64)>,
    /// How many times the failure was seen (ranks, restarts) before merging.
    pub occurrences: u32,
    /// Values from the logs that were refused (and so produced no action).
    pub refused: Vec<String>,
    /// A death's last words: the lines that say why it died. Where a
    /// stronger finding cites one of them, that finding explains the death,
    /// and the death goes into it (`rules::fold_deaths`).
    pub last_words: Vec<Span>,
}

impl Finding {
    pub fn new(rule: &'static str, category: Category, severity: Severity) -> Finding {
        Finding {
            id: String::new(),
            rule,
            category,
            severity,
            confidence: 0.0,
            title: String::new(),
            headline: String::new(),
            explanation: String::new(),
            chain: Vec::new(),
            entities: Entities::default(),
            evidence: Vec::new(),
            actions: Vec::new(),
            conditions: Vec::new(),
            explains: Vec::new(),
            competing: Vec::new(),
            occurrences: 1,
            refused: Vec::new(),
            last_words: Vec::new(),
        }
    }

    pub fn evidence(&mut self, span: Span, note: impl Into<String>) {
        self.push_evidence(Evidence::new(span, note));
    }

    /// Like [`Finding::evidence`], with the value on the line that the note
    /// is about (a literal substring of the line) to underline.
    pub fn evidence_marked(
        &mut self,
        span: Span,
        note: impl Into<String>,
        needle: impl Into<String>,
    ) {
        self.push_evidence(Evidence::marked(span, note, needle));
    }

    /// Adds `e` unless its line is already cited.
    pub fn push_evidence(&mut self, e: Evidence) {
        if !self.evidence.iter().any(|x| x.span == e.span) {
            self.evidence.push(e);
        }
    }

    /// Like [`Finding::evidence`], but a second line saying the same thing
    /// (the same message in two captures) is not repeated.
    pub fn evidence_once(&mut self, span: Span, note: impl Into<String>) {
        let note = note.into();
        if !self.evidence.iter().any(|e| e.note == note) {
            self.evidence(span, note);
        }
    }

    /// [`Finding::evidence_once`] with a key value to underline.
    pub fn evidence_once_marked(
        &mut self,
        span: Span,
        note: impl Into<String>,
        needle: impl Into<String>,
    ) {
        let note = note.into();
        if !self.evidence.iter().any(|e| e.note == note) {
            self.evidence_marked(span, note, needle);
        }
    }

    pub fn condition(&mut self, text: impl Into<String>, met: bool) -> bool {
        self.conditions.push(Condition {
            text: text.into(),
            met,
        });
        met
    }
}
