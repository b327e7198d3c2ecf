//! `nvidia-smi -q` text (docs/formats/nvidia.md): `Key : value` leaves and `Key`
//! sections, nested by indentation, one `GPU <bus id>` block per GPU. The
//! colon's column moves between drivers and sections, so keys are split on
//! the first colon, never at a column.

use std::sync::LazyLock;

use regex::Regex;

use super::{Report, blank_health, text_key};
use crate::ingest::Line;
use crate::ingest::values::{is_smi_failure_line, normalize_bus_id};
use crate::model::{Facts, SickValue};
use crate::source::Span;

const BANNER: &str = "==============NVSMI LOG==============";

static GPU_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$")
        .expect("gpu header regex")
});

static LEAF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<key>[^:]*?)\s*:(?:\s+(?P<value>.*))?$").expect("leaf regex")
});

/// nvidia-smi's message for a GPU it cannot open, printed instead of its block
/// (newer drivers put the GPU's index before the bus id: `for GPU1: 0000:…`).
static NO_HANDLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^Unable to (?:determine|detect) the device handle for (?:GPU|gpu)\s?(?:[0-9]{1,3}:\s?)?(?P<bus>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): (?P<error>.+?)\.?$",
    )
    .expect("no-handle regex")
});

/// Parses one segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut report = Report::default();
    // The open keys above the current line: (indentation, key).
    let mut stack: Vec<(usize, &str)> = Vec::new();
    let mut in_gpu = false;
    let mut unrecognized = 0;
    for line in lines {
        let content = line.text.trim();
        if content.is_empty() {
            continue;
        }
        if content == BANNER {
            std::mem::take(&mut report).close(facts);
            stack.clear();
            in_gpu = false;
            continue;
        }
        let indent = indentation(line.text);
        // A fragment pasted without its `GPU <bus id>` line (`Remapped Rows`
        // and its leaves): one GPU block whose GPU the fragment does not name.
        let anonymous = report.current_ref().is_some_and(|g| g.anonymous);
        if !in_gpu
            && (report.gpus.is_empty() || anonymous)
            && (indent > 0 || is_gpu_section(content))
        {
            if !anonymous {
                report.anonymous_gpu(line.span);
            }
            in_gpu = true;
        }
        let fragment_section =
            in_gpu && is_gpu_section(content) && report.current_ref().is_some_and(|g| g.anonymous);
        if indent == 0 && !fragment_section {
            stack.clear();
            if let Some(c) = GPU_HEADER.captures(content) {
                report.gpu(&c["bus"], line.span);
                in_gpu = true;
                continue;
            }
            if let Some(c) = NO_HANDLE.captures(content) {
                unreachable_gpu(&c["bus"], &c["error"], line.span, facts);
                continue;
            }
            if is_smi_failure_line(content) {
                continue;
            }
            in_gpu = false;
        }
        let (key, value) = match LEAF.captures(content) {
            Some(c) => (
                c.name("key").map_or("", |k| k.as_str()),
                Some(c.name("value").map_or("", |v| v.as_str())),
            ),
            // A section: children follow, indented deeper.
            None if indent > 0 || fragment_section => (content, None),
            None => {
                unrecognized += 1;
                continue;
            }
        };
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        stack.push((indent, key));
        let path: Vec<&str> = stack.iter().map(|(_, k)| *k).collect();
        let shared = text_key(&path);
        if !in_gpu {
            if let Some(value) = value {
                report.top_level(&shared, value);
            }
            continue;
        }
        if shared == "processes" || shared.starts_with("processes/") {
            report.processes_seen(line.span);
            let leaf = match shared.rsplit('/').next() {
                Some("process_id") => "pid",
                Some("used_gpu_memory") => "used_memory",
                Some(other) => other,
                None => continue,
            };
            if let (Some(value), Some(gpu)) = (value, report.current()) {
                gpu.process(leaf, value, line.span);
            }
            continue;
        }
        if let (Some(value), Some(gpu)) = (value, report.current()) {
            gpu.set(&shared, key, value, line.span);
        }
    }
    report.close(facts);
    unrecognized
}

/// Sections of a GPU block, pasted alone often enough to be read without
/// their `GPU <bus id>` line.
pub(crate) const GPU_SECTIONS: &[&str] = &[
    "Remapped Rows",
    "ECC Errors",
    "Ecc Mode",
    "ECC Mode",
    "Retired Pages",
    "GPU Reset Status",
    "FB Memory Usage",
    "BAR1 Memory Usage",
    "Clocks Throttle Reasons",
    "Clocks Event Reasons",
    "Clocks",
    "Max Clocks",
];

fn is_gpu_section(content: &str) -> bool {
    GPU_SECTIONS.contains(&content)
}

/// Leading whitespace in columns; a tab counts as one indentation level.
fn indentation(text: &str) -> usize {
    text.chars()
        .take_while(|c| c.is_whitespace())
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

/// `Unable to determine the device handle for GPU0000:3B:00.0: Unknown
/// Error`: the GPU exists but cannot be read, itself a sign of a sick GPU.
fn unreachable_gpu(bus: &str, error: &str, span: Span, facts: &mut Facts) {
    let mut health = blank_health(normalize_bus_id(bus), span);
    health.sick_values.push(SickValue {
        field: "device handle".to_owned(),
        token: error.to_owned(),
        span,
    });
    facts.gpu_health.push(health);
}
