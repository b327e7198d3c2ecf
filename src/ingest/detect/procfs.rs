//! Detection of `/proc/PID/cgroup` contents, with the prompt or `head`
//! header that names the PID, or the `/proc/N/cgroup:` prefix of `grep`,
//! and of `ps -ef` / `ps aux` rows pasted without their header.

use super::{Class, re};
use crate::ingest::Format;

re!(
    CGROUP_LINE,
    r"^(?:/proc/(?:[0-9]+|self)/cgroup:|[0-9]+:)?[0-9]+:[a-z0-9_,=]*:/.*$"
);
re!(
    CGROUP_PROMPT,
    r"^(?:\S+@\S+:\S*\s?[#$]|\$|#)\s*(?:sudo\s+)?cat\s+/proc/(?:[0-9]+|self)/cgroup\s*$"
);
re!(HEAD_HEADER, r"^==> /proc/(?:[0-9]+|self)/cgroup <==$");

pub(super) fn sniff(line: &str, _current: Option<Format>) -> Option<Class> {
    // Checked first: a `ps` row starts with a user name or a digit.
    if line
        .trim_start()
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_alphanumeric)
        && crate::ingest::ps::is_headerless_row(line)
    {
        return Some(Class::Strong(
            Format::Ps,
            "ps -ef / ps aux / ps alx row without its header",
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
