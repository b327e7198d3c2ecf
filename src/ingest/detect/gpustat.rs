//! Detection of `gpustat` output: its one-line-per-GPU records are strong;
//! the `host  ctime` line above them joins the segment they start.

use super::Class;
use crate::ingest::Format;

pub(super) fn sniff(line: &str, _current: Option<Format>) -> Option<Class> {
    // `gpustat --version` prints `gpustat 0.4.0.dev`: only gpustat does.
    if let Some(version) = line.trim_end().strip_prefix("gpustat ") {
        if version.starts_with(|c: char| c.is_ascii_digit())
            && version.contains('.')
            && !version.contains(' ')
        {
            return Some(Class::Strong(Format::Gpustat, "`gpustat --version` line"));
        }
    }
    // Cheap byte tests before the regex: every GPU line starts `[` and has
    // a `'C,` temperature (`°C,` from gpustat 1.0 on).
    if !line.starts_with('[') || !(line.contains("'C,") || line.contains("°C,")) {
        return None;
    }
    crate::ingest::gpustat::GPU_LINE
        .is_match(line.trim())
        .then_some(Class::Strong(
            Format::Gpustat,
            "[N] NAME | TEMP'C, UTIL % | USED / TOTAL MB | lines (gpustat)",
        ))
}
