//! Detection of `lsmod` output: its `Module Size Used by` header and its
//! `name size count [users]` rows.

use super::Class;
use crate::ingest::Format;

pub(super) fn sniff(line: &str, _current: Option<Format>) -> Option<Class> {
    crate::ingest::lsmod::is_lsmod_line(line).then_some(Class::Strong(
        Format::Lsmod,
        "`Module Size Used by` rows of lsmod",
    ))
}
