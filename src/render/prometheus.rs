//! `--output prometheus` and `--textfile DIR`: the report as Prometheus
//! metrics in the text exposition format (version 0.0.4), the format
//! node_exporter's textfile collector reads, so a fleet's Prometheus alerts
//! on findings with the labels it groups by (docs/fleet.md).
//!
//! Bounded on purpose: labels carry only closed vocabularies (rule,
//! category, severity) and identities (host, unit, GPU), never a PID, a
//! headline or a log line; each label value is cut to [`MAX_LABEL_CHARS`]
//! and the finding series to [`MAX_FINDING_SERIES`], with the number left
//! out exported. No sample carries a timestamp (the textfile collector
//! refuses them); the report's own time is a gauge, from the inputs, never
//! the clock.

use std::fmt::Write as _;

use super::{Report, clean};
use crate::rules::{Finding, Severity};
use crate::timeline::Placement;

/// The file `--textfile DIR` writes (the collector reads `*.prom`).
pub const TEXTFILE_NAME: &str = "rootcause.prom";

/// A label value past this many characters is cut (and ends in `…`).
pub const MAX_LABEL_CHARS: usize = 128;

/// Series of `rootcause_finding` (and as many of
/// `rootcause_finding_confidence`) at most; the rest are counted in
/// `rootcause_finding_series_dropped`.
pub const MAX_FINDING_SERIES: usize = 256;

/// GPUs and units of one finding that get a series each, at most.
const MAX_GPUS_PER_FINDING: usize = 16;
const MAX_UNITS_PER_FINDING: usize = 8;

type Labels = Vec<(&'static str, String)>;

/// One metric family: `# HELP`, `# TYPE`, then its samples in order.
struct Family {
    name: &'static str,
    help: &'static str,
    samples: Vec<(Labels, String)>,
}

impl Family {
    fn new(name: &'static str, help: &'static str) -> Family {
        Family {
            name,
            help,
            samples: Vec::new(),
        }
    }

    fn push(&mut self, labels: Labels, value: impl ToString) {
        self.samples.push((labels, value.to_string()));
    }

    /// Every family here is a gauge: the state of the last report.
    fn write(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} gauge", self.name);
        for (labels, value) in &self.samples {
            out.push_str(self.name);
            let present: Vec<_> = labels.iter().filter(|(_, v)| !v.is_empty()).collect();
            if !present.is_empty() {
                out.push('{');
                for (i, (name, value)) in present.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{name}=\"{}\"", label_value(value));
                }
                out.push('}');
            }
            let _ = writeln!(out, " {value}");
        }
    }
}

/// A label value as the exposition format wants it: control characters
/// (which could forge a line) become `?`, the length is capped, and `\`,
/// `"` are escaped.
fn label_value(text: &str) -> String {
    let text = clean(text);
    let mut cut: String = text.chars().take(MAX_LABEL_CHARS).collect();
    if text.chars().count() > MAX_LABEL_CHARS {
        cut.pop();
        cut.push('…');
    }
    let mut out = String::with_capacity(cut.len());
    for c in cut.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

/// The report's time, in seconds since the epoch, and where it comes from:
/// the bundle's capture time (manifest.json), else the latest line of the
/// inputs that carries a dated time of its own; `None` when the inputs
/// have neither (a paste without dates), and then the series is absent.
pub fn report_time(report: &Report<'_>) -> Option<(i64, &'static str)> {
    if let Some(t) = report.context.and_then(|c| c.captured_at) {
        return Some((t.timestamp(), "capture"));
    }
    report
        .timeline?
        .entries
        .iter()
        .filter(|e| e.placement == Placement::Stamped)
        .filter_map(|e| e.time.as_ref())
        .filter(|t| t.year_known)
        .map(|t| t.utc_seconds())
        .max()
        .map(|t| (t, "last-log-line"))
}

/// The GPUs a finding names, as label values: indices, then PCI bus ids of
/// GPUs never resolved to an index.
fn gpus(f: &Finding) -> Vec<String> {
    let indices = f.entities.gpus.iter().map(u32::to_string);
    let buses = f.entities.gpu_bus_ids.iter().cloned();
    indices.chain(buses).take(MAX_GPUS_PER_FINDING).collect()
}

pub fn render(report: &Report<'_>) -> String {
    let host = report
        .context
        .and_then(|c| c.host.clone())
        .unwrap_or_default();
    let with_host = |mut labels: Labels| {
        labels.insert(0, ("host", host.clone()));
        labels
    };

    let mut build = Family::new(
        "rootcause_build_info",
        "The rootcause version that wrote these metrics.",
    );
    build.push(vec![("version", env!("CARGO_PKG_VERSION").to_owned())], 1);

    let mut time = Family::new(
        "rootcause_report_timestamp_seconds",
        "The report's time: its bundle's capture time (source=\"capture\"), else its latest dated log line (source=\"last-log-line\"); absent when the inputs have neither. Not when the analysis ran: node_textfile_mtime_seconds has that.",
    );
    if let Some((seconds, source)) = report_time(report) {
        time.push(with_host(vec![("source", source.to_owned())]), seconds);
    }

    let mut gaps = Family::new(
        "rootcause_analysis_gaps",
        "Commands of the capture that produced nothing usable (a missing tool, a timeout, a refusal): the report is blind there.",
    );
    gaps.push(with_host(Vec::new()), report.gaps().len());

    let mut counts = Family::new(
        "rootcause_findings",
        "Findings of the report, by severity (0 when none).",
    );
    for severity in [
        Severity::Critical,
        Severity::Error,
        Severity::Warning,
        Severity::Info,
    ] {
        let n = report
            .findings()
            .iter()
            .filter(|f| f.severity == severity)
            .count();
        counts.push(with_host(vec![("severity", severity.name().to_owned())]), n);
    }

    let mut finding = Family::new(
        "rootcause_finding",
        "1 for each finding of the report, one series per GPU and unit it names; root_cause=\"true\" marks the root cause. Labels are closed vocabularies and identities only.",
    );
    let mut confidence = Family::new(
        "rootcause_finding_confidence",
        "How sure the rule is of each finding (0 to 1), with the labels of rootcause_finding.",
    );
    let root = report.diagnosis.root_cause.as_deref();
    let mut dropped = 0usize;
    for f in report.findings() {
        let all_gpus = f.entities.gpus.len() + f.entities.gpu_bus_ids.len();
        let all_series = all_gpus.max(1) * f.entities.units.len().max(1);
        let before = finding.samples.len();
        let gpus = gpus(f);
        let gpu_labels: Vec<&str> = if gpus.is_empty() {
            vec![""]
        } else {
            gpus.iter().map(String::as_str).collect()
        };
        let mut unit_labels: Vec<&str> = f
            .entities
            .units
            .iter()
            .take(MAX_UNITS_PER_FINDING)
            .map(String::as_str)
            .collect();
        if unit_labels.is_empty() {
            unit_labels.push("");
        }
        'series: for gpu in &gpu_labels {
            for unit in &unit_labels {
                if finding.samples.len() >= MAX_FINDING_SERIES {
                    break 'series;
                }
                let labels = with_host(vec![
                    ("finding", f.id.clone()),
                    ("rule", f.rule.to_owned()),
                    ("category", f.category.name().to_owned()),
                    ("severity", f.severity.name().to_owned()),
                    ("root_cause", (root == Some(f.id.as_str())).to_string()),
                    ("gpu", (*gpu).to_owned()),
                    ("unit", (*unit).to_owned()),
                ]);
                confidence.push(labels.clone(), f.confidence);
                finding.push(labels, 1);
            }
        }
        dropped += all_series - (finding.samples.len() - before);
    }

    let mut left_out = Family::new(
        "rootcause_finding_series_dropped",
        "Series of rootcause_finding left out by its caps (series in all, GPUs and units per finding; docs/fleet.md): the report itself has them all.",
    );
    left_out.push(with_host(Vec::new()), dropped);

    let mut out = String::new();
    for family in [
        &build,
        &time,
        &gaps,
        &counts,
        &finding,
        &confidence,
        &left_out,
    ] {
        family.write(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::label_value;

    #[test]
    fn label_values_are_escaped_cleaned_and_capped() {
        assert_eq!(label_value(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(label_value("a\nb"), "a?b");
        let long = "x".repeat(300);
        let cut = label_value(&long);
        assert_eq!(cut.chars().count(), super::MAX_LABEL_CHARS);
        assert!(cut.ends_with('…'));
    }
}
