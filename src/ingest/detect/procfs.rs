//! Detection of `/proc/PID/cgroup` contents, with the prompt or `head`
//! header that names the PID, or the `/proc/N/cgroup:` prefix of `grep`,
//! and of `ps -ef` / `ps aux` rows pasted without their header.

use super::{Class, gated, holds, literal};
use crate::ingest::Format;

gated!(
    CGROUP_LINE,
    |l| matches!(l.as_bytes().first(), Some(b'/' | b'0'..=b'9')),
    r"^(?:/proc/(?:[0-9]+|self)/cgroup:|[0-9]+:)?[0-9]+:[a-z0-9_,=]*:/.*$"
);
literal!(CGROUP, "/cgroup");
gated!(
    CGROUP_PROMPT,
    |l| holds(l, &CGROUP),
    r"^(?:\S+@\S+:\S*\s?[#$]|\$|#)\s*(?:sudo\s+)?cat\s+/proc/(?:[0-9]+|self)/cgroup\s*$"
);
gated!(
    HEAD_HEADER,
    |l| l.starts_with("==> /proc/"),
    r"^==> /proc/(?:[0-9]+|self)/cgroup <==$"
);

pub(super) fn sniff(line: &str, _current: Option<Format>) -> Option<Class> {
    // Checked first: a `ps` row starts with a user name or a digit.
    if line
        .trim_start()
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_alphanumeric)
        && may_be_ps_row(line)
        && crate::ingest::ps::is_headerless_row(line)
    {
        return Some(Class::Strong(
            Format::Ps,
            "ps -ef / ps aux / ps alx row without its header",
        ));
    }
    // A row of a script's `…,lstart,args` layout: numbers, then the start
    // time (`Mon May 19 14:17:44 2025`), then the command.
    if line
        .trim_start()
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_digit)
        && memchr::memchr(b':', line.as_bytes()).is_some()
        && crate::ingest::ps::is_lstart_row(line)
    {
        return Some(Class::Strong(
            Format::Ps,
            "a ps row with its start time (lstart) without its header",
        ));
    }
    // A row `PID PPID TITLE` whose title is a serving process's
    // (`34472  1  VLLM::Worker_DP1_EP1`).
    if line
        .trim_start()
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_digit)
        && memchr::memmem::find(line.as_bytes(), b"::").is_some()
        && crate::ingest::ps::is_title_row(line)
    {
        return Some(Class::Strong(
            Format::Ps,
            "a ps row `PID PPID TITLE` of a serving process without its header",
        ));
    }
    if CGROUP_PROMPT.is_match(line) || HEAD_HEADER.is_match(line) {
        return Some(Class::Strong(
            Format::ProcCgroup,
            "cat /proc/PID/cgroup prompt",
        ));
    }
    CGROUP_LINE.is_match(line).then_some(Class::Strong(
        Format::ProcCgroup,
        "hierarchy:controllers:/path line (/proc/PID/cgroup)",
    ))
}

/// What every `ps -ef`, `ps aux` and `ps alx` row holds (`ingest::ps`'s
/// row regexes): a number second, a `:` in its time column and a TTY column (`?`, `pts/N`,
/// `ttyN` or `console`). The three regexes are a line's most costly tests
/// here, and a traceback's frames start with a letter as rows do.
pub(super) fn may_be_ps_row(line: &str) -> bool {
    literal!(PTS, "pts/");
    literal!(TTY, "tty");
    literal!(CONSOLE, "console");
    let bytes = line.as_bytes();
    crate::ingest::line::second_word_starts_with_digit(line)
        && memchr::memchr(b':', bytes).is_some()
        && (memchr::memchr(b'?', bytes).is_some()
            || holds(line, &PTS)
            || holds(line, &TTY)
            || holds(line, &CONSOLE))
}

/// Each gated regex, for the test that its gate lets through every line
/// it matches.
#[cfg(test)]
pub(super) fn gated() -> Vec<(&'static str, &'static super::Gated)> {
    vec![
        ("CGROUP_LINE", &CGROUP_LINE),
        ("CGROUP_PROMPT", &CGROUP_PROMPT),
        ("HEAD_HEADER", &HEAD_HEADER),
    ]
}
