//! `--output ndjson`: one JSON object per finding per line, each standing on
//! its own (host, bundle, rule, category, entities), for log pipelines
//! (Vector, Fluent Bit, Loki, Elasticsearch). See docs/fleet.md.

use serde::Serialize;

use super::Report;
use super::json::{GpuKey, SCHEMA_VERSION};
use crate::timeline::rfc3339;

#[derive(Serialize)]
struct Line<'a> {
    schema_version: u32,
    host: Option<&'a str>,
    bundle: Option<&'a str>,
    captured_at: Option<String>,
    id: &'a str,
    root_cause: bool,
    rule: &'a str,
    category: &'static str,
    severity: &'static str,
    confidence: f64,
    headline: &'a str,
    entities: Entities<'a>,
    /// `input:line` of each evidence line.
    evidence: Vec<String>,
    gaps: usize,
}

#[derive(Serialize)]
struct Entities<'a> {
    pids: Vec<u32>,
    gpus: Vec<GpuKey<'a>>,
    units: Vec<&'a str>,
    xid: Vec<u32>,
}

pub fn render(report: &Report<'_>) -> String {
    let context = report.context;
    let captured_at = report
        .timeline
        .and_then(|t| t.frame.captured_at)
        .and_then(|t| rfc3339(&t));
    let mut out = String::new();
    for f in report.findings() {
        let line = Line {
            schema_version: SCHEMA_VERSION,
            host: context.and_then(|c| c.host.as_deref()),
            bundle: context.and_then(|c| c.bundle.as_deref()),
            captured_at: captured_at.clone(),
            id: &f.id,
            root_cause: report.diagnosis.root_cause.as_deref() == Some(f.id.as_str()),
            rule: f.rule,
            category: f.category.name(),
            severity: f.severity.name(),
            confidence: f.confidence,
            headline: &f.headline,
            entities: Entities {
                pids: f.entities.pids.iter().copied().collect(),
                gpus: GpuKey::all(&f.entities),
                units: f.entities.units.iter().map(String::as_str).collect(),
                xid: f.entities.xid.iter().copied().collect(),
            },
            evidence: f.evidence.iter().map(|e| report.cite(e.span)).collect(),
            gaps: report.gaps().len(),
        };
        out.push_str(&serde_json::to_string(&line).expect("finding serialises"));
        out.push('\n');
    }
    out
}
