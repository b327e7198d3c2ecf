//! The JSON report's additive capture fields (docs/report-schema.md):
//! `capture` (the manifest), `gaps` (what the capture could not collect)
//! and `timeline` (the incident's key events).

use serde::Serialize;

use super::Report;
use super::report::MAX_LINE_CHARS;
use crate::timeline::rfc3339;

#[derive(Serialize)]
pub(super) struct JsonCapture<'a> {
    host: Option<&'a str>,
    captured_at: Option<String>,
    timezone: Option<&'static str>,
    /// Problems with the manifest itself.
    notes: &'a [String],
}

#[derive(Serialize)]
pub(super) struct JsonGap<'a> {
    file: Option<&'a str>,
    command: &'a str,
    status: &'static str,
    exit_code: Option<i32>,
    detail: Option<&'a str>,
    /// The output was cut at the capture's size limit.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
}

#[derive(Serialize)]
pub(super) struct JsonEvent<'a> {
    /// RFC 3339 UTC; `null` when the line could not be placed or dated.
    time: Option<String>,
    placement: &'static str,
    input: &'a str,
    line: u32,
    text: String,
    findings: &'a [String],
    /// `input:line` of the same event in other inputs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    also: Vec<String>,
}

/// `null` for loose files and pastes (no manifest).
pub(super) fn capture<'a>(report: &Report<'a>) -> Option<JsonCapture<'a>> {
    let c = report.context?;
    let empty = c.host.is_none()
        && c.captured_at.is_none()
        && c.zone.is_none()
        && c.notes.is_empty()
        && c.gaps.is_empty();
    (!empty).then(|| JsonCapture {
        host: c.host.as_deref(),
        captured_at: c.captured_at.map(|t| t.to_rfc3339()),
        timezone: c.zone.map(|z| z.name()),
        notes: &c.notes,
    })
}

pub(super) fn gaps<'a>(report: &Report<'a>) -> Vec<JsonGap<'a>> {
    report
        .gaps()
        .iter()
        .map(|g| JsonGap {
            file: g.file.as_deref(),
            command: &g.command,
            status: g.status.name(),
            exit_code: g.exit_code,
            detail: g.detail.as_deref(),
            truncated: g.truncated,
        })
        .collect()
}

pub(super) fn timeline<'a>(report: &Report<'a>) -> Vec<JsonEvent<'a>> {
    let Some(timeline) = report.timeline else {
        return Vec::new();
    };
    timeline
        .key_events()
        .0
        .into_iter()
        .map(|e| JsonEvent {
            time: e.time.as_ref().and_then(rfc3339),
            placement: e.placement.name(),
            input: report.sources.name(e.span),
            line: e.span.line,
            text: match e.text.char_indices().nth(MAX_LINE_CHARS) {
                Some((cut, _)) => format!("{}…", &e.text[..cut]),
                None => e.text.clone(),
            },
            findings: &e.findings,
            also: e.also.iter().map(|s| report.cite(*s)).collect(),
        })
        .collect()
}
