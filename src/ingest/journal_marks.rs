//! Lines journalctl prints around entries that are not entries: boot
//! separators and headers (docs/formats/journal.md), its notices on stderr, and the
//! `-x` message-catalog explanations under an entry.

use std::sync::LazyLock;

use regex::Regex;

static MARKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^-- (?:Boot [0-9a-f]{32}|Reboot|No entries|(?:Logs begin|Journal begins) at .*) --$",
    )
    .expect("journal marker regex")
});

/// journalctl's own notices (stderr, often pasted along), and systemctl
/// status's, which follow the journal lines it prints. The first `Hint:` is
/// followed by indented lines of its own.
const NOTICES: [&str; 7] = [
    "No journal files were found.",
    "No journal files were opened due to insufficient permissions.",
    "Warning: some journal files were not opened due to insufficient permissions.",
    "Warning: Journal has been rotated since unit was started",
    "Notice: journal has been rotated since unit was started",
    "Hint: Some lines were ellipsized, use -l to show in full.",
    "Hint: You are currently not seeing messages from other users and the system.",
];

/// A line between entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Aside {
    /// `-- Boot <id> --`, `-- Reboot --`, `-- No entries --`, the header.
    Marker,
    /// A notice of journalctl or systemctl; indented lines may follow it.
    Notice,
    /// A line of a `-x` catalog explanation: `░░ Subject: …` (248+) or
    /// `-- Subject: …` (≤ 247), including the bare prefix of its blank lines.
    Catalog,
}

pub(super) fn aside(text: &str) -> Option<Aside> {
    if MARKER.is_match(text) {
        return Some(Aside::Marker);
    }
    if NOTICES.iter().any(|n| text.starts_with(n)) {
        return Some(Aside::Notice);
    }
    is_catalog(text).then_some(Aside::Catalog)
}

/// `░░ …` is only ever a catalog line. `-- …` (systemd ≤ 247) is one unless
/// it is a marker, which [`aside`] tries first.
fn is_catalog(text: &str) -> bool {
    let text = text.trim_end();
    text.starts_with("░░") || text == "--" || text.starts_with("-- ")
}

pub(super) fn is_marker(text: &str) -> bool {
    MARKER.is_match(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asides_of_every_version() {
        let cases = [
            (
                "-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --",
                Some(Aside::Marker),
            ),
            ("-- Reboot --", Some(Aside::Marker)),
            ("-- No entries --", Some(Aside::Marker)),
            (
                "-- Journal begins at Sat 2024-06-01 12:00:00 UTC, ends at Sat 2024-06-01 12:00:12 UTC. --",
                Some(Aside::Marker),
            ),
            (
                "-- Logs begin at Sat 2024-06-01 12:00:00 UTC, end at Sat 2024-06-01 12:00:12 UTC. --",
                Some(Aside::Marker),
            ),
            (
                "Hint: Some lines were ellipsized, use -l to show in full.",
                Some(Aside::Notice),
            ),
            (
                "░░ Subject: A start job for unit sglang.service has finished successfully",
                Some(Aside::Catalog),
            ),
            ("░░ ", Some(Aside::Catalog)),
            ("░░", Some(Aside::Catalog)),
            ("-- Subject: Unit process exited", Some(Aside::Catalog)),
            ("-- Defined-By: systemd", Some(Aside::Catalog)),
            ("-- ", Some(Aside::Catalog)),
            // Near misses: a boot id of the wrong length is catalog-shaped
            // text, not a boot separator; a bare dash line is nothing.
            ("-- Boot 0f1e2d --", Some(Aside::Catalog)),
            ("--verbose", None),
            ("- Subject", None),
            ("Hint: something else", None),
            ("Jun 01 12:00:00 h x: -- Reboot --", None),
        ];
        for (line, want) in cases {
            assert_eq!(aside(line), want, "{line}");
        }
    }
}
