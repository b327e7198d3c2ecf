//! Detection of `/proc/PID/cgroup` contents, with the prompt or `head`
//! header that names the PID, or the `/proc/N/cgroup:` prefix of `grep`.

use super::{Class, re};
use crate::ingest::Format;

re!(
    CGROUP_LINE,
    r"^(?:/proc/(?:\d+|self)/cgroup:|\d+:)?\d+:[a-z0-9_,=]*:/.*$"
);
re!(
    CGROUP_PROMPT,
    r"^(?:\S+@\S+:\S*\s?[#$]|\$|#)\s*(?:sudo\s+)?cat\s+/proc/(?:\d+|self)/cgroup\s*$"
);
re!(HEAD_HEADER, r"^==> /proc/(?:\d+|self)/cgroup <==$");

pub(super) fn sniff(line: &str, _current: Option<Format>) -> Option<Class> {
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
