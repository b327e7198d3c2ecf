//! Detection of `coredumpctl info`: its `PID: N (comm)` head, `Signal: N
//! (NAME)`, the core's storage path and systemd-coredump's `Process N
//! (comm) of user U dumped core.` message; the block's other fields
//! continue the segment.

use super::Class;
use crate::ingest::Format;

pub(super) fn sniff(line: &str, _current: Option<Format>) -> Option<Class> {
    crate::ingest::coredump::is_strong(line).then_some(Class::Strong(
        Format::Coredumpctl,
        "`PID:`/`Signal:` fields of coredumpctl info",
    ))
}
