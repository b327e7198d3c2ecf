//! The report every renderer reads: the diagnosis plus the input lines it
//! cites, resolved once.

use super::clean;
use super::excerpt;
use super::gpus::{self, GpuBar};
use super::inventory::Inventory;
use crate::context::{Context, Gap};
use crate::correlate::Incident;
use crate::ingest::InputSummary;
use crate::rules::{Diagnosis, Evidence, Finding};
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

/// A cited line split around its key value, each part made printable
/// ([`clean`]); a long line is cut to [`MAX_LINE_CHARS`] around the key.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkedLine {
    pub input: String,
    pub line: u32,
    pub before: String,
    pub key: String,
    pub after: String,
    /// With no key value: where, in characters into `before`, the part of
    /// the line a catalog row recognised starts (0 when none did). A narrow
    /// view starts near it rather than at the line's timestamp and host.
    pub focus: usize,
}

impl MarkedLine {
    pub fn text(&self) -> String {
        format!("{}{}{}", self.before, self.key, self.after)
    }
}

pub struct Report<'a> {
    pub sources: &'a SourceMap,
    pub inputs: &'a [InputSummary],
    pub diagnosis: &'a Diagnosis,
    /// What the bundle's manifest says (host, capture time, gaps), if known.
    pub context: Option<&'a Context>,
    pub timeline: Option<&'a Timeline>,
    /// The GPUs and who holds their memory; empty without an nvidia-smi capture.
    pub gpus: Vec<GpuBar>,
    /// GPUs, GPU processes, units and Xids, whatever was found.
    pub inventory: Inventory,
    /// Lines seen more often than read (`ingest::Repeats`), most frequent first.
    pub repeats: Vec<crate::model::Repeat>,
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
            gpus: Vec::new(),
            inventory: Inventory::default(),
            repeats: Vec::new(),
        }
    }

    /// With the per-GPU memory picture of the incident.
    pub fn with_incident(mut self, incident: &Incident) -> Self {
        self.gpus = gpus::view(incident, self.root_cause());
        self.inventory = Inventory::of(incident);
        self.repeats = incident.facts.repeats.clone();
        self.repeats
            .sort_by(|a, b| b.count.cmp(&a.count).then(a.first.cmp(&b.first)));
        self
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

    /// The finding's evidence with lines of the same text (one message
    /// seen by seven ranks) gathered, each group in citation order.
    pub fn evidence_groups<'f>(&self, f: &'f Finding) -> Vec<Vec<&'f Evidence>> {
        let mut groups: Vec<(String, Vec<&Evidence>)> = Vec::new();
        for e in &f.evidence {
            let text = self.resolve(e.span).text;
            match groups.iter_mut().find(|(t, _)| *t == text) {
                Some((_, members)) => members.push(e),
                None => groups.push((text, vec![e])),
            }
        }
        groups.into_iter().map(|(_, members)| members).collect()
    }

    /// A cited line split around the key value of its evidence.
    pub fn marked(&self, e: &Evidence) -> MarkedLine {
        let raw = self.sources.line_text(e.span);
        let raw = raw.trim_end();
        let (before, key, after) = match excerpt::key_range(raw, e) {
            Some(r) => (&raw[..r.start], &raw[r.clone()], &raw[r.end..]),
            None => (raw, "", ""),
        };
        // A byte offset into `raw`, turned into columns once printable.
        let focus_at = if key.is_empty() {
            excerpt::recognised_at(raw)
        } else {
            0
        };
        // Keep the key in view when the line is long: a little before it,
        // the rest of the budget after it.
        let budget = MAX_LINE_CHARS;
        let key_len = key.chars().count();
        let room_before = (budget / 4).max(budget.saturating_sub(key_len + after.chars().count()));
        let nb = before.chars().count();
        let before = if nb > room_before {
            let cut: String = before.chars().skip(nb - room_before).collect();
            format!("…{cut}")
        } else {
            before.to_owned()
        };
        let room_after = budget.saturating_sub(before.chars().count() + key_len);
        let after = match after.char_indices().nth(room_after) {
            Some((cut, _)) => format!("{}…", &after[..cut]),
            None => after.to_owned(),
        };
        let printable = |t: &str| clean(&t.replace('\t', "    ")).into_owned();
        // A line cut on its left (over MAX_LINE_CHARS) is shown from the cut.
        let focus = if nb > room_before {
            0
        } else {
            printable(&raw[..focus_at]).chars().count()
        };
        MarkedLine {
            input: self.sources.name(e.span).to_owned(),
            line: e.span.line,
            before: printable(&before),
            key: printable(key),
            after: printable(&after),
            focus,
        }
    }

    /// The lines around a cited one, for context: `(line, text)`, cut at
    /// [`MAX_LINE_CHARS`] and made printable.
    pub fn context(&self, span: Span, around: u32) -> Vec<(u32, String)> {
        let source = self.sources.get(span.source);
        let last = source.line_count();
        let first = span.line.saturating_sub(around).max(1);
        let end = (span.line + around).min(last);
        (first..=end)
            .map(|n| {
                let s = Span {
                    source: span.source,
                    line: n,
                };
                let text = self.resolve(s).text;
                (n, clean(&text.replace('\t', "    ")).into_owned())
            })
            .collect()
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
