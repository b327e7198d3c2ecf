//! TODO(parser): nvidia_smi_table.

use super::Line;
use crate::model::Facts;

/// Parses one segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], _facts: &mut Facts) -> u32 {
    lines.iter().filter(|l| !l.text.trim().is_empty()).count() as u32
}
