//! What a journal entry's fields and PID 1's messages say about it, shared by
//! every journalctl mode: the entry built from named fields (`-o json`,
//! `-o verbose`, and `-o export` once converted), the unit a systemd message
//! is about (docs/formats/journal.md), and the metadata a server line inside an
//! entry inherits.

use std::sync::LazyLock;

use regex::Regex;

use super::server::Outer;
use crate::model::{JournalEntry, Timestamp};
use crate::source::Span;

pub(super) const UNIT_TYPES: &str =
    "service|socket|device|mount|automount|swap|target|path|timer|slice|scope";

/// `.service`, `.scope`, … anywhere, in any case (the catalogs' `<unit>`
/// placeholder matches case-insensitively).
static UNIT_SUFFIX: LazyLock<aho_corasick::AhoCorasick> = LazyLock::new(|| {
    aho_corasick::AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(UNIT_TYPES.split('|').map(|t| format!(".{t}")))
        .expect("unit suffixes")
});

/// `sglang.service: Main process exited, …` and the other unit-prefixed
/// messages of docs/formats/journal.md.
static UNIT_PREFIXED: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(r"^(?P<unit>[A-Za-z0-9:_.@\\-]+\.(?:{UNIT_TYPES})): ");
    Regex::new(&pattern).expect("unit-prefixed regex")
});

/// Job messages in the 252+ combined form (`Started sglang.service - SGLang.`)
/// and for units without a description (`Started foo.service.`). The 247 form
/// names only the description, which is not a unit name: no match, on purpose.
static JOB: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(
        r"(?x)^
        (?:Starting|Started|Stopping|Stopped|Reloading|Reloaded|Failed\x20to\x20start
          |Failed\x20to\x20stop|Timed\x20out\x20starting|Timed\x20out\x20stopping
          |Dependency\x20failed\x20for|Assertion\x20failed\x20for)
        \x20(?P<unit>[A-Za-z0-9:_.@\\-]+\.(?:{UNIT_TYPES}))
        (?:\x20-\x20.*|\x20with\x20error\.|\.\.\.|\.)$"
    );
    Regex::new(&pattern).expect("job message regex")
});

/// The unit a message of systemd (PID 1) is about, when the text names it:
/// unit-prefixed messages, 252+ job messages, and the messages of the
/// systemd catalog that name their unit elsewhere (≤ v219 put it first
/// without a colon, `ollama.service holdoff time over, scheduling
/// restart.`, or last, `start request repeated too quickly for X`). 247
/// job messages name only the description and yield `None`.
pub(super) fn unit_of_pid1_message(message: &str) -> Option<String> {
    UNIT_PREFIXED
        .captures(message)
        .or_else(|| JOB.captures(message))
        .map(|c| c["unit"].to_owned())
        .or_else(|| {
            names_a_unit(message)
                .then(|| pid1_message_in(message).map(|(unit, _)| unit))
                .flatten()
        })
}

/// Whether a message holds a unit's name (`.service`, `.scope` …): the
/// cheap test before the catalog is asked, PID 1 printing many lines that
/// name none (`Reached target …`, `Startup finished in …`).
fn names_a_unit(message: &str) -> bool {
    UNIT_TYPES.split('|').any(|t| {
        message
            .match_indices('.')
            .any(|(i, _)| message[i + 1..].starts_with(t))
    })
}

/// A message of PID 1 that the systemd catalog knows, wherever it starts
/// in `text` (a line cut before the unit, a prefix no journal parser
/// reads): its unit and the message as the catalog row matched it. Not
/// systemctl's own lines (`Job for X failed.`), which name a unit too.
pub(super) fn pid1_message_in(text: &str) -> Option<(String, String)> {
    // Every such message names its unit, and a unit's name ends in its
    // type: a line without one is no PID 1 message, and the catalogs (every
    // row whose anchor the line holds) need not be asked.
    if !UNIT_SUFFIX.is_match(text.as_bytes()) {
        return None;
    }
    let hits = crate::catalogs::catalogs().hits(text);
    let systemd = |h: &&crate::catalogs::Hit<'_>| h.catalog.id == "systemd";
    if hits.iter().filter(systemd).any(|h| {
        h.row
            .is_some_and(|r| r.id.starts_with("systemd.systemctl-"))
    }) {
        return None;
    }
    hits.iter().filter(systemd).find_map(|h| {
        let unit = h.get("unit")?;
        Some((unit.to_owned(), h.matched.trim().to_owned()))
    })
}

/// A message of PID 1 about a unit, cut before the unit's name where a
/// paste removed the journal prefix with it (`: Main process exited,
/// code=exited, status=1/FAILURE`): the message as the catalog row matched
/// it. Only a row that words the message with its unit first
/// (`<unit>: …`) and knows its cut form, and only from the start of the
/// line: the unit is the correlator's to find (`correlate::units`: the
/// next line PID 1 wrote about a unit). The cheap test: the line opens
/// with the cut's `:`, or carries an exit report's `, code=` and
/// `, status=`.
pub(super) fn pid1_message_cut(text: &str) -> Option<String> {
    let trimmed = text.trim();
    let (cut, rest) = match trimmed.strip_prefix(':') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, trimmed),
    };
    if rest.is_empty() || !(cut || (rest.contains(", code=") && rest.contains(", status="))) {
        return None;
    }
    let hits = crate::catalogs::catalogs().hits(rest);
    hits.iter().find_map(|h| {
        let row = h.row?;
        let about_a_unit = row.wordings.iter().any(|w| {
            w.template
                .as_deref()
                .is_some_and(|t| t.starts_with("<unit>"))
        });
        (h.catalog.id == "systemd"
            && matches!(h.via, crate::catalogs::Via::Wording(_))
            && h.get("unit").is_none()
            && about_a_unit
            && !row.id.starts_with("systemd.systemctl-")
            && rest.starts_with(h.matched.trim()))
        .then(|| rest.to_owned())
    })
}

/// An entry from its named fields. `field` returns a field's text; the
/// caller has decoded `message` and the time (`__REALTIME_TIMESTAMP`, or the
/// `verbose` header). PID 1's unit is the one it writes about (`UNIT=`, else
/// the message); everyone else's is the unit it runs in (`_SYSTEMD_UNIT`).
pub(super) fn entry_from_fields(
    field: impl Fn(&str) -> Option<String>,
    message: String,
    time: Option<Timestamp>,
    span: Span,
) -> JournalEntry {
    let pid = field("_PID")
        .or_else(|| field("SYSLOG_PID"))
        .and_then(|p| p.trim().parse::<u32>().ok());
    let unit = if pid == Some(1) {
        field("UNIT").or_else(|| unit_of_pid1_message(&message))
    } else {
        field("_SYSTEMD_UNIT")
    };
    JournalEntry {
        time,
        host: field("_HOSTNAME"),
        identifier: field("SYSLOG_IDENTIFIER")
            .or_else(|| field("_COMM"))
            .unwrap_or_else(|| "unknown".to_owned()),
        pid,
        unit,
        cmdline: field("_CMDLINE"),
        message,
        span,
    }
}

/// What a server line inside `entry` inherits. `None` for PID 1, whose
/// messages are about units, never server output.
pub(super) fn outer_of(entry: &JournalEntry) -> Option<Outer> {
    (entry.pid != Some(1)).then(|| Outer {
        pid: entry.pid,
        unit: entry.unit.clone(),
        time: entry.time,
    })
}
