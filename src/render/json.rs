//! The JSON report: versioned, serialize-only wire types (see
//! docs/report-schema.md). The only place serde touches the output.

use serde::Serialize;

use super::Report;
use super::json_capture::{self, JsonCapture, JsonEvent, JsonGap};
use crate::rules::{Action, ActionKind, Finding};

/// Bump on any change that can break a consumer; document it in
/// docs/report-schema.md.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct JsonReport<'a> {
    schema_version: u32,
    tool: Tool,
    root_cause: Option<&'a str>,
    findings: Vec<JsonFinding<'a>>,
    unrecognized_errors: Vec<JsonUnknown>,
    inputs: Vec<JsonInput>,
    capture: Option<JsonCapture<'a>>,
    gaps: Vec<JsonGap<'a>>,
    timeline: Vec<JsonEvent<'a>>,
}

#[derive(Serialize)]
struct Tool {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
struct JsonInput {
    name: String,
    format: &'static str,
    first_line: u32,
    last_line: u32,
    lines: u32,
    unrecognized_lines: u32,
    detected_because: &'static str,
}

#[derive(Serialize)]
struct JsonUnknown {
    fingerprint: String,
    template: String,
    count: usize,
    first: JsonEvidenceLine,
}

#[derive(Serialize)]
struct JsonEvidenceLine {
    input: String,
    line: u32,
    text: String,
}

#[derive(Serialize)]
struct JsonCompeting<'a> {
    id: &'a str,
    confidence: f64,
}

#[derive(Serialize)]
struct JsonFinding<'a> {
    id: &'a str,
    rule: &'a str,
    category: &'static str,
    severity: &'static str,
    confidence: f64,
    title: &'a str,
    headline: &'a str,
    explanation: &'a str,
    chain: &'a [String],
    entities: JsonEntities<'a>,
    evidence: Vec<JsonEvidence>,
    conditions: Vec<JsonCondition<'a>>,
    actions: Vec<JsonAction<'a>>,
    explains: &'a [String],
    competing: Vec<JsonCompeting<'a>>,
    occurrences: u32,
    refused_values: &'a [String],
}

#[derive(Serialize)]
struct JsonEntities<'a> {
    pids: Vec<u32>,
    gpus: Vec<u32>,
    units: Vec<&'a str>,
    xid: Vec<u32>,
}

#[derive(Serialize)]
struct JsonEvidence {
    input: String,
    line: u32,
    text: String,
    note: String,
}

#[derive(Serialize)]
struct JsonCondition<'a> {
    text: &'a str,
    met: bool,
}

#[derive(Serialize)]
struct JsonAction<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    safety: &'static str,
    description: String,
    why: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(flatten)]
    params: JsonActionParams<'a>,
    evidence: Vec<String>,
}

#[derive(Serialize, Default)]
struct JsonActionParams<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    unit: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_unit: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_cmdline: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    grace_secs: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpus: Option<&'a [u32]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_used_mib: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_secs: Option<u32>,
}

pub fn render(report: &Report<'_>) -> String {
    let wire = JsonReport {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "rootcause",
            version: env!("CARGO_PKG_VERSION"),
        },
        root_cause: report.diagnosis.root_cause.as_deref(),
        findings: report
            .findings()
            .iter()
            .map(|f| finding(report, f))
            .collect(),
        unrecognized_errors: report
            .diagnosis
            .unknown_errors
            .iter()
            .map(|g| {
                let first = report.resolve(g.first);
                JsonUnknown {
                    fingerprint: g.fingerprint.clone(),
                    template: g.template.clone(),
                    count: g.count,
                    first: JsonEvidenceLine {
                        input: first.input,
                        line: first.line,
                        text: first.text,
                    },
                }
            })
            .collect(),
        inputs: report
            .inputs
            .iter()
            .map(|i| JsonInput {
                name: report.sources.get(i.segment.source).name.clone(),
                format: i.segment.format.name(),
                first_line: i.segment.first_line,
                last_line: i.segment.last_line,
                lines: i.lines,
                unrecognized_lines: i.unrecognized,
                detected_because: i.segment.why,
            })
            .collect(),
        capture: json_capture::capture(report),
        gaps: json_capture::gaps(report),
        timeline: json_capture::timeline(report),
    };
    let mut text = serde_json::to_string_pretty(&wire).expect("report serialises");
    text.push('\n');
    text
}

fn finding<'a>(report: &Report<'_>, f: &'a Finding) -> JsonFinding<'a> {
    JsonFinding {
        id: &f.id,
        rule: f.rule,
        category: f.category.name(),
        severity: f.severity.name(),
        confidence: f.confidence,
        title: &f.title,
        headline: &f.headline,
        explanation: &f.explanation,
        chain: &f.chain,
        entities: JsonEntities {
            pids: f.entities.pids.iter().copied().collect(),
            gpus: f.entities.gpus.iter().copied().collect(),
            units: f.entities.units.iter().map(String::as_str).collect(),
            xid: f.entities.xid.iter().copied().collect(),
        },
        evidence: f
            .evidence
            .iter()
            .map(|e| {
                let line = report.resolve(e.span);
                JsonEvidence {
                    input: line.input,
                    line: line.line,
                    text: line.text,
                    note: e.note.clone(),
                }
            })
            .collect(),
        conditions: f
            .conditions
            .iter()
            .map(|c| JsonCondition {
                text: &c.text,
                met: c.met,
            })
            .collect(),
        actions: f.actions.iter().map(|a| action(report, a)).collect(),
        explains: &f.explains,
        competing: f
            .competing
            .iter()
            .map(|(id, confidence)| JsonCompeting {
                id,
                confidence: *confidence,
            })
            .collect(),
        occurrences: f.occurrences,
        refused_values: &f.refused,
    }
}

fn action<'a>(report: &Report<'_>, a: &'a Action) -> JsonAction<'a> {
    let mut p = JsonActionParams::default();
    let kind = match &a.kind {
        ActionKind::StopUnit { unit } => {
            p.unit = Some(unit.as_str());
            "stop-unit"
        }
        ActionKind::TerminateProcess {
            pid,
            expected_unit,
            expected_cmdline,
            grace_secs,
        } => {
            p.pid = Some(pid.get());
            p.expected_unit = expected_unit.as_ref().map(|u| u.as_str());
            p.expected_cmdline = expected_cmdline.as_ref().map(|c| c.as_str());
            p.grace_secs = Some(*grace_secs);
            "terminate-process"
        }
        ActionKind::WaitGpuMemoryFree {
            gpus,
            max_used_mib,
            timeout_secs,
        } => {
            p.gpus = Some(gpus);
            p.max_used_mib = Some(*max_used_mib);
            p.timeout_secs = Some(*timeout_secs);
            "wait-gpu-memory-free"
        }
        ActionKind::RestartUnit { unit } => {
            p.unit = Some(unit.as_str());
            "restart-unit"
        }
        ActionKind::VerifyUnitActive { unit, timeout_secs } => {
            p.unit = Some(unit.as_str());
            p.timeout_secs = Some(*timeout_secs);
            "verify-unit-active"
        }
        ActionKind::Advice { .. } => "advice",
    };
    JsonAction {
        kind,
        safety: a.safety.name(),
        description: a.describe(),
        why: &a.why,
        command: a.command(),
        params: p,
        evidence: a.evidence.iter().map(|s| report.cite(*s)).collect(),
    }
}
