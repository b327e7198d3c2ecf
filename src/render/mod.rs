//! Render: one [`Report`] to text, Markdown, JSON or a remediation script.
//!
//! Renderers only format; every decision (what the root cause is, which
//! steps to take) was made by the rules. Colour and width come from
//! [`RenderOptions`], never sniffed here.

mod json;
mod json_capture;
mod markdown;
mod ndjson;
mod report;
mod script;
mod text;
mod timeline;

use std::io::{self, Write};

pub use report::{EvidenceLine, Report};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Markdown,
    Json,
    /// One JSON object per finding per line, for log pipelines.
    Ndjson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RenderOptions {
    pub color: bool,
}

pub fn render(
    report: &Report<'_>,
    format: OutputFormat,
    options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        OutputFormat::Text => out.write_all(text::render(report, options).as_bytes()),
        OutputFormat::Markdown => out.write_all(markdown::render(report).as_bytes()),
        OutputFormat::Json => out.write_all(json::render(report).as_bytes()),
        OutputFormat::Ndjson => out.write_all(ndjson::render(report).as_bytes()),
    }
}

/// `rootcause timeline`: `entries` (all of the timeline, or a zoom) as lines.
pub fn timeline_text(
    timeline: &crate::timeline::Timeline,
    entries: &[&crate::timeline::Entry],
    sources: &crate::source::SourceMap,
    host: Option<&str>,
    options: RenderOptions,
) -> String {
    timeline::text(timeline, entries, sources, host, options.color)
}

/// The remediation script for the report's root cause.
pub fn script(report: &Report<'_>) -> String {
    script::render(report)
}
