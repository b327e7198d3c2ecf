//! Detection of `systemctl status` output.

use super::{Class, re};
use crate::ingest::Format;

re!(
    UNIT_BULLET,
    r"^[●×○*x] \S+\.(?:service|scope|socket|mount|timer|target|slice|path|device|swap)(?: - .*)?$"
);
re!(
    UNIT_FIELD,
    r"^ {2,}(?:Loaded|Active|Main PID|CGroup|Tasks|Memory|CPU|Process|Drop-In|Duration|TriggeredBy|Docs|Invocation|Mem peak|Status|IP|IO): "
);
re!(UNIT_NOT_FOUND, r"^Unit \S+ could not be found\.$");

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    use Class::*;
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
