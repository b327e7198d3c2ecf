//! Detection of journalctl output: `-o json`, `short-iso`, `short` and the
//! marker lines journalctl prints between entries.

use super::{Class, re};
use crate::ingest::Format;

re!(
    JOURNAL_SHORT_ISO,
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d\d:?\d\d \S+ [^:]*?\S: "
);
re!(
    JOURNAL_SHORT,
    r"^[A-Z][a-z]{2} [ 0-3]\d \d\d:\d\d:\d\d(?:\.\d{6})? \S+ [^:]*?\S: "
);
re!(
    JOURNAL_MARKER,
    r"^-- (?:Boot [0-9a-f]{32}|Reboot|No entries|(?:Logs begin|Journal begins) at .*) --$"
);

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    use Class::*;
    if line.starts_with('{')
        && (line.contains("\"__REALTIME_TIMESTAMP\"") || line.contains("\"MESSAGE\""))
    {
        return Some(Strong(
            Format::JournalJson,
            "JSON object with journal fields (journalctl -o json)",
        ));
    }
    if JOURNAL_SHORT_ISO.is_match(line) {
        return Some(Strong(
            Format::JournalShortIso,
            "ISO timestamp, host, ident[pid]: (journalctl -o short-iso)",
        ));
    }
    if JOURNAL_SHORT.is_match(line) {
        return Some(Strong(
            Format::JournalShort,
            "syslog timestamp, host, ident[pid]: (journalctl -o short)",
        ));
    }
    if JOURNAL_MARKER.is_match(line) {
        return Some(match current {
            Some(Format::JournalShort | Format::JournalShortIso) => Continue,
            _ => Strong(Format::JournalShort, "journalctl marker line"),
        });
    }
    None
}
