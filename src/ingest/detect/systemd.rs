//! Detection of `systemctl status` and `systemctl show` output.

use super::{Class, first_after_space, gated, holds, literal, re};
use crate::ingest::Format;

gated!(
    UNIT_BULLET,
    |l| ["● ", "× ", "○ ", "* ", "x "]
        .iter()
        .any(|p| l.starts_with(p)),
    r"^[●×○*x] \S+\.(?:service|scope|socket|mount|timer|target|slice|path|device|swap)(?: - .*)?$"
);
gated!(
    UNIT_FIELD,
    |l| {
        l.starts_with("  ")
            && matches!(
                first_after_space(l),
                Some(b'L' | b'A' | b'M' | b'C' | b'T' | b'P' | b'D' | b'I' | b'S')
            )
    },
    r"^ {2,}(?:Loaded|Active|Main PID|CGroup|Tasks|Memory|CPU|Process|Drop-In|Duration|TriggeredBy|Docs|Invocation|Mem peak|Status|IP|IO): "
);
gated!(
    UNIT_NOT_FOUND,
    |l| l.starts_with("Unit "),
    r"^Unit \S+ could not be found\.$"
);

// Properties only `systemctl show` prints (unit files have none of them),
// and `Type=`, its first line by default.
gated!(
    SHOW_PROPERTY,
    |l| {
        l.as_bytes().first().is_some_and(u8::is_ascii_uppercase)
            && memchr::memchr(b'=', l.as_bytes()).is_some()
    },
    r"^(?:(?:Id|Names|MainPID|ExecMainPID|ExecMainCode|ExecMainStatus|ActiveState|SubState|LoadState|UnitFileState|NRestarts|ControlGroup|FragmentPath|InvocationID|Result)=|Type=(?:simple|exec|forking|oneshot|dbus|notify|notify-reload|idle)$)"
);
literal!(SYSTEMCTL, "systemctl");
gated!(
    SHOW_PROMPT,
    |l| holds(l, &SYSTEMCTL),
    r"^(?:\S+@\S+:\S*\s?[#$]|\$|#)\s*(?:sudo\s+)?systemctl\s+show\b"
);
re!(ANY_PROPERTY, r"^[A-Z][A-Za-z0-9]*=");

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    use Class::*;
    // A unit file's `[Section]` or `systemctl cat`'s `# /etc/systemd/…`
    // header; its `Key=Value` lines are its own, not `systemctl show`'s.
    if crate::ingest::systemd_unit_file::is_unit_file_line(line) {
        return Some(match current {
            Some(Format::SystemdUnitFile) => Continue,
            _ => Strong(
                Format::SystemdUnitFile,
                "[Section] or `# /etc/systemd/system/…` header (a unit file, systemctl cat)",
            ),
        });
    }
    if current == Some(Format::SystemdUnitFile)
        && line.as_bytes().first().is_some_and(u8::is_ascii_uppercase)
        && line.contains('=')
    {
        return Some(Continue);
    }
    if SHOW_PROPERTY.is_match(line) || SHOW_PROMPT.is_match(line) {
        return Some(Strong(
            Format::SystemctlShow,
            "Key=value unit properties (systemctl show)",
        ));
    }
    if current == Some(Format::SystemctlShow) && ANY_PROPERTY.is_match(line) {
        return Some(Continue);
    }
    if UNIT_BULLET.is_match(line) || UNIT_NOT_FOUND.is_match(line) {
        return Some(Strong(
            Format::SystemctlStatus,
            "unit bullet line (systemctl status)",
        ));
    }
    if UNIT_FIELD.is_match(line) {
        return Some(match current {
            Some(Format::SystemctlStatus) => Continue,
            _ => Strong(
                Format::SystemctlStatus,
                "aligned Loaded:/Active: fields (systemctl status)",
            ),
        });
    }
    None
}

/// Each gated regex, for the test that its gate lets through every line
/// it matches.
#[cfg(test)]
pub(super) fn gated() -> Vec<(&'static str, &'static super::Gated)> {
    vec![
        ("UNIT_BULLET", &UNIT_BULLET),
        ("UNIT_FIELD", &UNIT_FIELD),
        ("UNIT_NOT_FOUND", &UNIT_NOT_FOUND),
        ("SHOW_PROPERTY", &SHOW_PROPERTY),
        ("SHOW_PROMPT", &SHOW_PROMPT),
    ]
}
