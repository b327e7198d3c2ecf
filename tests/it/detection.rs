//! Detection accuracy over a labelled table: fixtures/detection/samples.txt
//! (inline samples of every format and variant, and near misses) and
//! fixtures/detection/files.tsv (fixture files and their formats). At least
//! 99% must be detected right; on failure the confusion is printed.

use std::collections::BTreeMap;
use std::fs;

use rootcause::ingest::{Format, segment};
use rootcause::source::{Source, SourceId};

use crate::support::fixtures;

/// The format covering most non-blank lines of `text` (prompts aside).
fn dominant(name: &str, bytes: &[u8]) -> Format {
    let source = Source::new(name, bytes);
    let mut lines: BTreeMap<Format, usize> = BTreeMap::new();
    for s in segment(SourceId(0), &source) {
        if s.format == Format::ShellPrompt {
            continue;
        }
        let n = (s.first_line..=s.last_line)
            .filter(|&l| !source.raw_line(l).trim().is_empty())
            .count();
        *lines.entry(s.format).or_default() += n;
    }
    lines
        .into_iter()
        .max_by_key(|(f, n)| (*n, std::cmp::Reverse(*f)))
        .map(|(f, _)| f)
        .unwrap_or(Format::ShellPrompt)
}

/// (label, expected formats, text) for every labelled segment.
fn table() -> Vec<(String, Vec<Format>, Vec<u8>)> {
    let dir = fixtures().join("detection");
    let mut out = Vec::new();
    let samples = fs::read_to_string(dir.join("samples.txt")).unwrap();
    let mut current: Option<(String, Format, String)> = None;
    for line in samples.lines() {
        if let Some(head) = line.strip_prefix("=== ") {
            out.extend(current.take().map(|(l, f, t)| (l, f, t.into_bytes())));
            let (format, what) = head.split_once(' ').unwrap_or((head, ""));
            let format: Format = format
                .parse()
                .unwrap_or_else(|e| panic!("samples.txt: {e}"));
            current = Some((
                format!("samples.txt: {format} {what}"),
                format,
                String::new(),
            ));
        } else if let Some((_, _, text)) = current.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    out.extend(current.map(|(l, f, t)| (l, f, t.into_bytes())));
    out.into_iter()
        .map(|(l, f, t)| (l, vec![f], t))
        .chain(files())
        .collect()
}

/// Fixture files and the formats of their segments, in order.
fn files() -> Vec<(String, Vec<Format>, Vec<u8>)> {
    let text = fs::read_to_string(fixtures().join("detection/files.tsv")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|row| {
            let (path, formats) = row.split_once('\t').expect("path<TAB>format");
            let formats: Vec<Format> = formats
                .split('+')
                .map(|f| f.parse().unwrap_or_else(|e| panic!("files.tsv: {e}")))
                .collect();
            let bytes = fs::read(fixtures().parent().unwrap().join(path))
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            (path.to_owned(), formats, bytes)
        })
        .collect()
}

/// What detection made of a labelled segment: its one dominant format, or
/// the formats of its segments in order when the label lists several.
fn detected(label: &str, expected: &[Format], bytes: &[u8]) -> Vec<Format> {
    if expected.len() == 1 {
        return vec![dominant(label, bytes)];
    }
    let source = Source::new(label, bytes);
    segment(SourceId(0), &source)
        .into_iter()
        .map(|s| s.format)
        .filter(|f| *f != Format::ShellPrompt)
        .collect()
}

#[test]
fn detection_is_at_least_99_percent_right_over_150_labelled_segments() {
    let table = table();
    assert!(table.len() >= 150, "only {} labelled segments", table.len());
    let mut confusion: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut right = 0;
    let names = |fs: &[Format]| fs.iter().map(|f| f.name()).collect::<Vec<_>>().join("+");
    for (label, expected, bytes) in &table {
        let got = detected(label, expected, bytes);
        if got == *expected {
            right += 1;
        } else {
            confusion
                .entry((names(expected), names(&got)))
                .or_default()
                .push(label.clone());
        }
    }
    let accuracy = right as f64 / table.len() as f64;
    let report: Vec<String> = confusion
        .iter()
        .map(|((want, got), labels)| {
            format!("expected {want}, detected {got}: {}", labels.join("; "))
        })
        .collect();
    println!(
        "detection: {right}/{} right ({:.1}%)",
        table.len(),
        accuracy * 100.0
    );
    assert!(
        accuracy >= 0.99,
        "detection {:.1}% right ({right}/{}); confusion:\n{}",
        accuracy * 100.0,
        table.len(),
        report.join("\n")
    );
}

/// docs/formats.md lists every format rootcause reads.
#[test]
fn every_format_is_documented() {
    let doc = fs::read_to_string(fixtures().parent().unwrap().join("docs/formats.md")).unwrap();
    for format in Format::ALL {
        assert!(
            doc.contains(&format!("| `{}` |", format.name())),
            "docs/formats.md does not list {}",
            format.name()
        );
    }
}
