//! TODO(parser): nvidia_smi_csv.

use super::Line;
use crate::model::Facts;

pub fn parse_query_gpu(lines: &[Line<'_>], _facts: &mut Facts) -> u32 {
    lines.iter().filter(|l| !l.text.trim().is_empty()).count() as u32
}

pub fn parse_compute_apps(lines: &[Line<'_>], _facts: &mut Facts) -> u32 {
    lines.iter().filter(|l| !l.text.trim().is_empty()).count() as u32
}
