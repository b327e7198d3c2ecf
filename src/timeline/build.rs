//! Building the timeline from an analysed incident: timed lines, the
//! untimed lines worth placing, de-duplication of the same event seen in two
//! captures, and the flags for evidence and key events.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{Entry, Placement, Timeline};
use crate::correlate::Incident;
use crate::model::{JournalEntry, ServerEventKind, Timestamp};
use crate::rules::Diagnosis;
use crate::source::{SourceId, SourceMap, Span};

/// An entry's index, and the inputs whose copy of its event it absorbed.
type Listed = (usize, Vec<SourceId>);

/// The entries of one (second, words) and, per input, where to resume the
/// search for one that can absorb its next copy.
type Copies = (Vec<Listed>, BTreeMap<SourceId, usize>);

pub fn build(incident: &Incident, diagnosis: &Diagnosis, sources: &SourceMap) -> Timeline {
    let mut cited: BTreeMap<Span, Vec<String>> = BTreeMap::new();
    for f in &diagnosis.findings {
        for e in &f.evidence {
            let ids = cited.entry(e.span).or_default();
            if !ids.contains(&f.id) {
                ids.push(f.id.clone());
            }
        }
    }
    let key = key_spans(incident);
    let journal: BTreeMap<Span, &JournalEntry> =
        incident.facts.journal.iter().map(|e| (e.span, e)).collect();
    let line = |span: Span| sources.line_text(span).trim().to_owned();
    let text = |span: Span| match journal.get(&span) {
        Some(e) => journal_text(e),
        None => line(span),
    };
    // What makes two lines the same event is their words, not the wrapper:
    // the journal's `python3[31544]: [2026-…] msg` is the server log's
    // `[2026-…] msg`.
    let words = |span: Span, text: &str| match journal.get(&span) {
        Some(e) => e.message.lines().next().unwrap_or("").trim().to_owned(),
        None => text.to_owned(),
    };

    // Timed lines, earliest first; a copy of an event already listed (the
    // same message at the same second in another capture) joins it.
    let mut stamped: Vec<(Span, Timestamp)> =
        incident.times.iter().map(|(s, t)| (*s, *t)).collect();
    // Unstable sorts, here and below: every key ends with a span, and no
    // two entries share one, so the order is the same, without the scratch
    // copy of half the entries a stable sort allocates (megabytes on a
    // large journal, at the run's peak of memory).
    stamped.sort_unstable_by_key(|(span, t)| (order(t), *span));
    // Untimed lines that matter: evidence, GPU process rows, unit states
    // (placed after the timed ones).
    let mut untimed: BTreeSet<Span> = cited.keys().copied().collect();
    untimed.extend(incident.gpu_processes.iter().flat_map(|p| p.spans.clone()));
    untimed.extend(
        incident
            .facts
            .unit_statuses
            .iter()
            .filter_map(|u| u.active_span),
    );
    untimed.retain(|span| !incident.times.contains_key(span));
    // Sized for every line at once (copies joined make it fewer): grown by
    // doubling instead, a large journal's timeline held up to twice its
    // entries' room at the run's peak of memory.
    let mut entries: Vec<Entry> = Vec::with_capacity(stamped.len() + untimed.len());
    // Per (second, words): the entries listed, and the inputs each one
    // already absorbed a copy from. Repeats within one input stay apart.
    // Per input, a cursor past the entries that can no longer absorb a copy
    // from it (its own, or ones that already did), so that a line repeated
    // thousands of times in one second is not rescanned from the start:
    // linear, not quadratic, in the repeats.
    // Only lookups: the order of this map never shows.
    let mut seen: HashMap<(i64, String), Copies> = HashMap::new();
    // With one input timed, no line is a copy from another: nothing to join.
    let one_input = stamped.windows(2).all(|w| w[0].0.source == w[1].0.source);
    for (span, time) in stamped {
        let text = text(span);
        let findings = cited.get(&span).cloned().unwrap_or_default();
        let is_key = key.contains(&span) || !findings.is_empty();
        if !one_input {
            let (same, cursors) = seen
                .entry((time.utc_seconds(), words(span, &text)))
                .or_default();
            let cursor = cursors.entry(span.source).or_default();
            while *cursor < same.len() {
                let (i, sources) = &same[*cursor];
                if entries[*i].span.source != span.source && !sources.contains(&span.source) {
                    break;
                }
                *cursor += 1;
            }
            if let Some((i, sources)) = same.get_mut(*cursor) {
                sources.push(span.source);
                let kept = &mut entries[*i];
                kept.also.push(span);
                for id in findings {
                    if !kept.findings.contains(&id) {
                        kept.findings.push(id);
                    }
                }
                kept.key |= is_key;
                continue;
            }
            same.push((entries.len(), Vec::new()));
        }
        entries.push(Entry {
            time: Some(time),
            placement: Placement::Stamped,
            span,
            text,
            findings,
            also: Vec::new(),
            key: is_key,
        });
    }

    for span in untimed {
        let (time, placement) = place(incident, span);
        let findings = cited.get(&span).cloned().unwrap_or_default();
        entries.push(Entry {
            time,
            placement,
            span,
            text: text(span),
            key: !findings.is_empty(),
            findings,
            also: Vec::new(),
        });
    }
    // At one instant: what sits before a line, the line, what follows it,
    // then what only the capture time places.
    let rank = |p: Placement| match p {
        Placement::BeforeLine(_) => 0,
        Placement::Stamped => 1,
        Placement::AfterLine(_) => 2,
        Placement::AtCapture | Placement::Unplaced => 3,
    };
    entries.sort_unstable_by_key(|e| {
        (
            e.time.is_none(),
            e.time.map(|t| order(&t)),
            rank(e.placement),
            e.span,
        )
    });
    Timeline {
        entries,
        frame: incident.frame,
    }
}

/// Sort key: the instant, to the nanosecond.
fn order(t: &Timestamp) -> (i64, u32) {
    use chrono::Timelike;
    (t.utc_seconds(), t.local.nanosecond())
}

/// A journal entry's own words, without the time and host the timeline
/// already shows.
fn journal_text(e: &JournalEntry) -> String {
    let message = e.message.lines().next().unwrap_or("");
    match e.pid {
        Some(pid) => format!("{}[{pid}]: {message}", e.identifier),
        None => format!("{}: {message}", e.identifier),
    }
}

/// Where an untimed line goes: after the nearest timed line above it in the
/// same input, else at the capture time, else before the nearest timed line
/// below it.
fn place(incident: &Incident, span: Span) -> (Option<Timestamp>, Placement) {
    let start = Span {
        source: span.source,
        line: 0,
    };
    let end = Span {
        source: span.source,
        line: u32::MAX,
    };
    if let Some((above, t)) = incident.times.range(start..span).next_back() {
        return (Some(*t), Placement::AfterLine(above.line));
    }
    if let Some(t) = incident.frame.captured_at {
        return (Some(t), Placement::AtCapture);
    }
    if let Some((below, t)) = incident.times.range(span..end).next() {
        return (Some(*t), Placement::BeforeLine(below.line));
    }
    (None, Placement::Unplaced)
}

/// Lines a report's timeline shows even when no finding cites them: each
/// unit's lifecycle, a server's landmarks, each nvidia-smi snapshot.
fn key_spans(incident: &Incident) -> BTreeSet<Span> {
    let mut key: BTreeSet<Span> = incident
        .units
        .values()
        .flat_map(|u| u.events.iter().map(|e| e.span))
        .collect();
    key.extend(
        incident
            .facts
            .server_events
            .iter()
            // Start-up milestones and HTTP lines are routine; a key event is
            // a version, readiness or a failure.
            .filter(|e| {
                !matches!(
                    e.kind,
                    ServerEventKind::Args(_)
                        | ServerEventKind::Landmark(_)
                        | ServerEventKind::Uvicorn(_)
                        | ServerEventKind::Nccl(_)
                )
            })
            .map(|e| e.span),
    );
    // A snapshot's time is on the date line above its header.
    for h in &incident.facts.smi_headers {
        let Some(time) = h.time else { continue };
        let date = incident
            .facts
            .line_times
            .iter()
            .filter(|(s, t)| s.source == h.span.source && s.line < h.span.line && *t == time)
            .map(|(s, _)| *s)
            .max();
        key.extend(date);
    }
    key
}
