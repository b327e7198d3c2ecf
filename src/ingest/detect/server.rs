//! Detection of model-server logs: SGLang's `[YYYY-MM-DD HH:MM:SS TPn]` prefix.

use super::{Class, re};
use crate::ingest::Format;

re!(
    SGLANG,
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*\] "
);

pub(super) fn sniff(line: &str, _current: Option<Format>) -> Option<Class> {
    SGLANG.is_match(line).then_some(Class::Strong(
        Format::SglangLog,
        "[YYYY-MM-DD HH:MM:SS rank] prefix (SGLang)",
    ))
}
