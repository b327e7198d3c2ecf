//! `nvidia-smi pmon` (process monitoring): one row per process per GPU per
//! sample, columns named by a `# gpu pid type …` header whose set varies
//! with `-s` (`fb` memory with `-s m`) and `-o DT` (date and time first).
//! Columns are found by name, so every variant reads the same way.
//!
//! Each process becomes a [`GpuProcessRecord`] once, at its first sample;
//! its used memory is known only when the `fb` column was asked for. A GPU
//! without processes prints a row of `-`.

use super::Line;
use crate::model::{Facts, GpuMention, GpuProcessRecord, ProcessListing, ProcessListingKind};
use crate::source::Span;

/// Columns of the default `nvidia-smi pmon` when no header was captured.
const DEFAULT_COLUMNS: [&str; 8] = ["gpu", "pid", "type", "sm", "mem", "enc", "dec", "command"];

/// Parses one segment; returns the number of lines it did not recognise.
/// Parses one segment; returns the lines it did not recognise, which go
/// on to the line-level recognisers (what a CI job prints under it).
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut columns: Vec<String> = DEFAULT_COLUMNS.iter().map(|c| (*c).to_owned()).collect();
    let mut listing: Option<Span> = None;
    let mut rows = 0;
    let mut seen: Vec<(u32, u32)> = Vec::new();
    let mut missed = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        if let Some(header) = text.strip_prefix('#') {
            let names: Vec<String> = header
                .split_whitespace()
                .map(str::to_ascii_lowercase)
                .collect();
            if names.iter().any(|n| n == "gpu") && names.iter().any(|n| n == "pid") {
                columns = names;
                listing.get_or_insert(line.span);
            }
            // The units line under the header (`# Idx # C/G % …`).
            continue;
        }
        let Some(row) = read_row(text, &columns, line.span) else {
            missed.push(i);
            continue;
        };
        listing.get_or_insert(line.span);
        let process = match row {
            Row::Process(p) => p,
            Row::Idle(gpu) => {
                facts.gpu_mentions.push(GpuMention {
                    index: gpu,
                    by: "an idle nvidia-smi pmon row",
                    span: line.span,
                });
                continue;
            }
        };
        let key = (process.gpu_index.unwrap_or(u32::MAX), process.pid);
        if !seen.contains(&key) {
            seen.push(key);
            rows += 1;
            facts.gpu_processes.push(process);
        }
    }
    if let Some(span) = listing {
        let kind = if rows > 0 {
            ProcessListingKind::Rows
        } else {
            ProcessListingKind::NoneFound
        };
        facts
            .process_listings
            .push(ProcessListing { kind, rows, span });
    }
    missed
}

/// The number of lines [`read`] did not recognise.
#[cfg(test)]
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    read(lines, facts).len() as u32
}

/// A data row of the listing.
enum Row {
    Process(GpuProcessRecord),
    /// A GPU's "no process" row of dashes: the GPU is there, idle.
    Idle(u32),
}

/// One data row, or `None` when the line is not one.
fn read_row(text: &str, columns: &[String], span: Span) -> Option<Row> {
    let cells: Vec<&str> = text.split_whitespace().collect();
    let at = |name: &str| columns.iter().position(|c| c == name);
    let command_at = at("command").unwrap_or(columns.len().saturating_sub(1));
    if cells.len() < columns.len() || command_at >= cells.len() {
        return None;
    }
    let cell = |name: &str| at(name).and_then(|i| cells.get(i).copied());
    let gpu: u32 = cell("gpu")?.parse().ok()?;
    let pid = cell("pid")?;
    let kind = cell("type")?;
    if pid == "-" {
        return (kind == "-").then_some(Row::Idle(gpu));
    }
    let pid: u32 = pid.parse().ok()?;
    let is_type = kind.split('+').all(|k| matches!(k, "C" | "G" | "M" | "-"));
    if !is_type {
        return None;
    }
    Some(Row::Process(GpuProcessRecord {
        gpu_index: Some(gpu),
        gpu_uuid: None,
        pid,
        name: cells[command_at..].join(" "),
        name_truncated: false,
        used_mib: cell("fb").and_then(|v| v.parse().ok()),
        used_truncated: false,
        span,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceId;

    fn run(text: &str) -> (Facts, u32) {
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        (facts, unrecognized)
    }

    type Row<'a> = (u32, Option<u32>, u32, &'a str, Option<u64>);

    fn rows(facts: &Facts) -> Vec<Row<'_>> {
        facts
            .gpu_processes
            .iter()
            .map(|p| (p.span.line, p.gpu_index, p.pid, p.name.as_str(), p.used_mib))
            .collect()
    }

    #[test]
    fn every_header_variant_reads_by_column_name() {
        let cases: [(&str, Vec<Row<'_>>); 4] = [
            (
                // 550+: jpg and ofa columns.
                "\
# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command
# Idx           #    C/G      %      %      %      %      %      %    name
    0       4318     C     45     30      -      -      -      -    sglang::schedul
    1          -     -      -      -      -      -      -      -    -
    0       4318     C     47     31      -      -      -      -    sglang::schedul
    1      20629     C      0      0      -      -      -      -    python3",
                vec![
                    (3, Some(0), 4318, "sglang::schedul", None),
                    (6, Some(1), 20629, "python3", None),
                ],
            ),
            (
                // ≤ 470, no jpg/ofa.
                "\
# gpu        pid  type    sm   mem   enc   dec   command
# Idx          #   C/G     %     %     %     %   name
    0      77101     C    98    60     0     0   python",
                vec![(3, Some(0), 77101, "python", None)],
            ),
            (
                // `-s um`: the fb column gives used memory in MiB.
                "\
# gpu         pid   type     fb   ccpm     sm    mem    enc    dec    jpg    ofa    command
# Idx           #    C/G     MB     MB      %      %      %      %      %      %    name
    2      48213     C  61378      0     12      8      -      -      -      -    sglang::schedul",
                vec![(3, Some(2), 48213, "sglang::schedul", Some(61378))],
            ),
            (
                // `-o DT`: date and time first.
                "\
#Date       Time        gpu         pid   type     sm    mem    enc    dec    command
#YYYYMMDD   HH:MM:SS    Idx           #    C/G      %      %      %      %    name
 20240601   12:00:03      3       4321   C+G      5      1      -      -    Xorg",
                vec![(3, Some(3), 4321, "Xorg", None)],
            ),
        ];
        for (text, expected) in cases {
            let (facts, unrecognized) = run(text);
            assert_eq!(unrecognized, 0, "{text}");
            assert_eq!(rows(&facts), expected, "{text}");
            assert_eq!(facts.process_listings.len(), 1);
            assert_eq!(facts.process_listings[0].kind, ProcessListingKind::Rows);
            assert_eq!(facts.process_listings[0].span.line, 1);
        }
    }

    #[test]
    fn only_dashes_is_a_listing_with_no_processes() {
        let (facts, unrecognized) = run("\
# gpu         pid   type     sm    mem    enc    dec    command
# Idx           #    C/G      %      %      %      %    name
    0          -     -      -      -      -      -    -
    1          -     -      -      -      -      -    -");
        assert_eq!(unrecognized, 0);
        assert!(facts.gpu_processes.is_empty());
        // Each idle GPU is still named: the inventory lists it.
        let idle: Vec<(u32, u32)> = facts
            .gpu_mentions
            .iter()
            .map(|m| (m.index, m.span.line))
            .collect();
        assert_eq!(idle, [(0, 3), (1, 4)]);
        assert_eq!(
            facts.process_listings,
            vec![ProcessListing {
                kind: ProcessListingKind::NoneFound,
                rows: 0,
                span: Span {
                    source: SourceId(0),
                    line: 1
                }
            }]
        );
    }

    #[test]
    fn rows_without_a_header_use_the_default_columns() {
        let (facts, unrecognized) =
            run("    0       4318     C     45     30      -      -    python3");
        assert_eq!(unrecognized, 0);
        assert_eq!(rows(&facts), vec![(1, Some(0), 4318, "python3", None)]);
    }

    #[test]
    fn garbage_is_counted_and_never_panics() {
        let (facts, unrecognized) = run("\
# gpu         pid   type     sm    mem    enc    dec    command
    x       4318     C     45     30      -      -    python3
    0       4318     Q     45     30      -      -    python3
    0   99999999999999     C     45     30      -      -    python3
    0       4318
\u{1b}\u{0}\u{ff}");
        assert_eq!(unrecognized, 5);
        assert!(facts.gpu_processes.is_empty());
    }
}
