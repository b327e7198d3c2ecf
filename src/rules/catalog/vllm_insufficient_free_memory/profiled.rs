//! vLLM's memory-profiling error read from the lines: its two figures,
//! on one line or wrapped over two by a paste.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::source::Span;

pub(super) static PROFILING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Error in memory profiling\. Initial (?P<kind>free|used) memory (?P<init>[0-9.]+(?: GiB)?), (?:current|currently used) (?:free )?memory (?P<cur>[0-9.]+(?: GiB)?)\.",
    )
    .expect("profiling regex")
});

/// The profiling error's first half, where a paste wrapped the message
/// after its first figure.
static PROFILING_HEAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Error in memory profiling\. Initial (?P<kind>free|used) memory (?P<init>[0-9.]+(?: GiB)?),\s*$",
    )
    .expect("profiling head regex")
});
/// Its second half, at the start of the next line's message.
static PROFILING_TAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|\s)(?:current|currently used) (?:free )?memory (?P<cur>[0-9.]+(?: GiB)?)\.")
        .expect("profiling tail regex")
});

/// The figures of one profiling error: whether they are free or used
/// memory, the first and the current figure, as printed.
pub(super) struct Profiled {
    pub(super) kind: String,
    pub(super) init: String,
    pub(super) cur: String,
    /// The next line, where a paste wrapped the second figure onto it.
    pub(super) tail: Option<Span>,
}

/// Each line with vLLM's profiling error and its figures; a paste that
/// wrapped the message after `Initial free memory 82.94 GiB,` has the
/// rest on the next line, which the anchor `current free memory` keeps.
pub(super) fn hits(incident: &Incident) -> Vec<(&Message, Profiled)> {
    let messages = &incident.facts.messages;
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if !m.text.contains("Error in memory profiling") {
            continue;
        }
        let next = messages
            .get(i + 1)
            .filter(|n| n.span.source == m.span.source && n.span.line == m.span.line + 1);
        if let Some(c) = PROFILING.captures(&m.text) {
            out.push((
                m,
                Profiled {
                    kind: c["kind"].to_owned(),
                    init: c["init"].to_owned(),
                    cur: c["cur"].to_owned(),
                    tail: None,
                },
            ));
            continue;
        }
        // Wrapped: the first figure ends this line, the second opens the
        // next (under whatever frame the paste put there).
        let (Some(h), Some((n, t))) = (
            PROFILING_HEAD.captures(&m.text),
            next.and_then(|n| PROFILING_TAIL.captures(&n.text).map(|t| (n, t))),
        ) else {
            continue;
        };
        out.push((
            m,
            Profiled {
                kind: h["kind"].to_owned(),
                init: h["init"].to_owned(),
                cur: t["cur"].to_owned(),
                tail: Some(n.span),
            },
        ));
    }
    out
}
