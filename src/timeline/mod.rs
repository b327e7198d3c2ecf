//! The incident's timeline: every timed line of every input merged into one
//! order, in the frame the bundle's manifest sets (see
//! [`crate::correlate::Clock`]). Lines without a time of their own (a
//! nvidia-smi process row, a CSV, `systemctl status`) are placed by their
//! position and marked, and the evidence of each finding is flagged.
//!
//! Built after the diagnosis; renderers only format it.

mod build;
mod format;

pub use build::build;
pub use format::{describe_frame, display_time, rfc3339};

use crate::correlate::TimeFrame;
use crate::model::Timestamp;
use crate::source::Span;

/// At most this many key events go into a report; the rest are counted.
pub const MAX_KEY_EVENTS: usize = 40;

/// Where an entry's time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The line carries its own time.
    Stamped,
    /// No time of its own: placed at the time of an earlier line of the same
    /// input (the line number given).
    AfterLine(u32),
    /// No time of its own and nothing timed above it: placed at the time of
    /// a later line of the same input.
    BeforeLine(u32),
    /// No time in its input at all: placed at the capture time.
    AtCapture,
    /// Nothing to place it by: listed last.
    Unplaced,
}

impl Placement {
    /// The stable name used in the JSON report.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Stamped => "stamped",
            Placement::AfterLine(_) => "after-line",
            Placement::BeforeLine(_) => "before-line",
            Placement::AtCapture => "capture-time",
            Placement::Unplaced => "unplaced",
        }
    }

    /// Why an unstamped line sits where it does, for people.
    pub fn note(self) -> Option<String> {
        match self {
            Placement::Stamped => None,
            Placement::AfterLine(n) => Some(format!("no timestamp: placed after line {n}")),
            Placement::BeforeLine(n) => Some(format!("no timestamp: placed before line {n}")),
            Placement::AtCapture => Some("no timestamp: placed at the capture time".to_owned()),
            Placement::Unplaced => Some("no timestamp: not placed".to_owned()),
        }
    }
}

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// In the incident's frame; `None` only when [`Placement::Unplaced`].
    pub time: Option<Timestamp>,
    pub placement: Placement,
    pub span: Span,
    /// What happened: `ident[pid]: message` for a journal entry, the cleaned
    /// line otherwise.
    pub text: String,
    /// Ids of the findings that cite this line (or a copy of it).
    pub findings: Vec<String>,
    /// The same event in other inputs (a server log line the journal also
    /// recorded), joined into this entry.
    pub also: Vec<Span>,
    /// Evidence, a unit's lifecycle, a server landmark or a snapshot.
    pub key: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Time-ordered; unplaced entries last.
    pub entries: Vec<Entry>,
    pub frame: TimeFrame,
}

impl Timeline {
    /// The key events a report shows, and how many were left out to keep it
    /// short (never evidence: the earliest of the others go first).
    pub fn key_events(&self) -> (Vec<&Entry>, usize) {
        let key: Vec<&Entry> = self.entries.iter().filter(|e| e.key).collect();
        let evidence = key.iter().filter(|e| !e.findings.is_empty()).count();
        let others = key.len() - evidence;
        let room = MAX_KEY_EVENTS.saturating_sub(evidence);
        let drop = others.saturating_sub(room);
        let mut dropped = 0;
        let kept = key
            .into_iter()
            .filter(|e| {
                if e.findings.is_empty() && dropped < drop {
                    dropped += 1;
                    return false;
                }
                true
            })
            .collect();
        (kept, drop)
    }

    /// The entries within `window_secs` of the evidence of finding `id`,
    /// plus that evidence wherever it sits. `None` when no entry cites `id`.
    pub fn around(&self, id: &str, window_secs: i64) -> Option<Vec<&Entry>> {
        let cites = |e: &Entry| e.findings.iter().any(|f| f == id);
        let times: Vec<i64> = self
            .entries
            .iter()
            .filter(|e| cites(e))
            .filter_map(|e| e.time.map(|t| t.utc_seconds()))
            .collect();
        if !self.entries.iter().any(cites) {
            return None;
        }
        let (lo, hi) = match (times.iter().min(), times.iter().max()) {
            (Some(lo), Some(hi)) => (lo - window_secs, hi + window_secs),
            _ => (i64::MAX, i64::MIN),
        };
        Some(
            self.entries
                .iter()
                .filter(|e| {
                    cites(e) || e.time.is_some_and(|t| (lo..=hi).contains(&t.utc_seconds()))
                })
                .collect(),
        )
    }
}
