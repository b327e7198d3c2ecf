//! Detection of `dmesg` output in each of its time formats, and of bare
//! kernel lines (`dmesg -t`, grep output). `journalctl -k` and kern.log are
//! journal-shaped and left to the journal sniffer.

use super::{Class, re};
use crate::ingest::Format;

// `[ 8712.345678] ` (or reltime's `[  +0.000012] `, `[Jun  1 12:00] `);
// printk prints six digits of fraction, some kernels and tools three. The
// `<4>` of `dmesg -r` and the `kern  :warn  : ` of `-x` are frames, peeled
// before detection (`ingest::frame`).
re!(
    UPTIME,
    r"^\[(?:\s*\+?[0-9]+\.(?:[0-9]{6}|[0-9]{3})(?:\s*<[\s0-9.]*>)?|[A-Z][a-z]{2} +[0-9]{1,2} [0-9][0-9]:[0-9][0-9])\] "
);
re!(
    CTIME,
    r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] [0-9]{4}\] "
);
// `dmesg --time-format iso`, also with `-x`'s `kern  :warn  : ` (what
// `dmesg --decode --time-format=iso` prints).
re!(
    ISO,
    r"^[0-9]{4}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9],[0-9]{6}[+-][0-9][0-9]:[0-9][0-9] "
);
// Also under a bare `kernel: ` (a syslog line whose time and host were cut
// off), with or without the uptime rsyslog keeps after it.
re!(
    BARE,
    r"^(?:kernel: +(?:\[\s*[0-9]+\.[0-9]+\] )?)?(?:NVRM: |.{1,15} invoked oom-killer: gfp_mask=|(?:Out of memory|Memory cgroup out of memory): Kill|oom-kill:constraint=|oom_reaper: reaped process )"
);

/// A `dmesg` line with its time in brackets (see `continues_as` in the
/// parent module).
pub(super) fn is_bracketed(line: &str) -> bool {
    UPTIME.is_match(line) || CTIME.is_match(line)
}

pub(super) fn sniff(line: &str, _current: Option<Format>) -> Option<Class> {
    if UPTIME.is_match(line) || CTIME.is_match(line) || ISO.is_match(line) {
        return Some(Class::Strong(
            Format::Dmesg,
            "[uptime] / [ctime] / ISO kernel timestamp (dmesg)",
        ));
    }
    BARE.is_match(line).then_some(Class::Strong(
        Format::Dmesg,
        "NVRM or OOM-killer line without a timestamp (dmesg -t)",
    ))
}
