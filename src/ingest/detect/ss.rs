//! Detection of `ss -ltnp` output: its header and its `LISTEN` rows.

use super::Class;
use crate::ingest::Format;

pub(super) fn sniff(line: &str, _current: Option<Format>) -> Option<Class> {
    crate::ingest::ss::is_ss_line(line).then_some(Class::Strong(
        Format::Ss,
        "LISTEN rows and header of ss -ltnp",
    ))
}
