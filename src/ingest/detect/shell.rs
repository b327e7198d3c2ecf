//! Detection of what a terminal shows around command output: `ps` listings
//! and shell prompts.

use super::{Class, re};
use crate::ingest::Format;

re!(
    PS_HEADER,
    r"^\s*(?:PID|USER|UID)\s.*\b(?:CMD|COMMAND|ARGS)\s*$"
);
re!(PS_ROW, r"^\s*(?:\S+\s+)?\d+\s+\S");
// `user@host:dir# cmd`, `$ cmd`, or a bare `user@host:dir# ` with nothing typed.
re!(
    SHELL_PROMPT,
    r"^(?:(?:\S+@\S+:\S*\s?[#$]|\$|#) \S|\S+@\S+:\S*\s?[#$]\s*$)"
);

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    use Class::*;
    if PS_HEADER.is_match(line) {
        return Some(Strong(Format::Ps, "ps header row"));
    }
    if SHELL_PROMPT.is_match(line) {
        return Some(Strong(Format::ShellPrompt, "shell prompt and command"));
    }
    if current == Some(Format::Ps) && !PS_ROW.is_match(line) && !line.trim().is_empty() {
        // A ps listing ends at the first line that is not a process row.
        return Some(Strong(
            Format::Unknown,
            "text after a ps listing that no format matched",
        ));
    }
    None
}
