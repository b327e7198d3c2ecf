//! Render: one [`Report`] to text, Markdown, HTML, JSON, NDJSON,
//! Prometheus metrics or a remediation script.
//!
//! Renderers only format; every decision (what the root cause is, which
//! steps to take) was made by the rules. Colour and width come from
//! [`RenderOptions`], never sniffed here.

mod excerpt;
mod gpus;
mod html;
mod inventory;
mod json;
mod json_capture;
mod markdown;
mod mermaid;
mod ndjson;
mod prometheus;
mod report;
mod script;
mod script_prelude;
mod style;
mod text;
mod timeline;

use std::io::{self, Write};

pub use gpus::{GpuBar, GpuHolder};
pub use inventory::{
    Inventory, InventoryContainer, InventoryGpu, InventoryProcess, InventoryServer, InventoryUnit,
    InventoryXid,
};
pub use prometheus::{MAX_FINDING_SERIES, MAX_LABEL_CHARS, TEXTFILE_NAME, report_time};
pub use report::{EvidenceLine, MarkedLine, Report};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Markdown,
    /// One self-contained page (no external assets).
    Html,
    Json,
    /// One JSON object per finding per line, for log pipelines.
    Ndjson,
    /// Prometheus metrics (text exposition format), for node_exporter's
    /// textfile collector.
    Prometheus,
}

/// How much the terminal report says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub enum Verbosity {
    /// `-q`: the root cause in one line, nothing else.
    Quiet,
    #[default]
    Normal,
    /// `-v`: also the rule conditions, competing hypotheses, every finding
    /// in full and the inputs.
    Verbose,
}

/// What the caller (run.rs) decided about the terminal; renderers never
/// look at it themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    pub color: bool,
    pub verbosity: Verbosity,
    /// Columns the terminal report may use (evidence lines are cut to fit).
    pub width: usize,
}

/// The width of a report that goes to a file or a pipe.
pub const DEFAULT_WIDTH: usize = 100;

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            color: false,
            verbosity: Verbosity::Normal,
            width: DEFAULT_WIDTH,
        }
    }
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
        OutputFormat::Html => out.write_all(html::render(report).as_bytes()),
        OutputFormat::Json => json::write(report, out),
        OutputFormat::Ndjson => out.write_all(ndjson::render(report).as_bytes()),
        OutputFormat::Prometheus => out.write_all(prometheus::render(report).as_bytes()),
    }
}

/// Log-derived text made safe for a terminal or a Markdown page: a whole
/// escape sequence (CSI, an OSC title or hyperlink, a DCS string, in 7-bit or
/// C1 form: [`crate::source::escape_len`]) becomes one `?`, any other
/// control character (a newline that would forge a report line, BEL, a C1
/// control such as NEL) becomes `?`, and an invisible format character (a
/// bidi override, a zero-width space, a line separator) is spelled out as
/// `\u{…}`. Every path that prints text from the inputs (log lines, input
/// and member names, manifest fields, approved reports) goes through here.
/// The JSON report keeps values exact; serde escapes them.
pub fn clean(text: &str) -> std::borrow::Cow<'_, str> {
    let invisible = |c: char| matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{2028}' | '\u{2029}' | '\u{061c}');
    if !text.chars().any(|c| c.is_control() || invisible(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(n) = crate::source::escape_len(rest) {
            out.push('?');
            rest = &rest[n..];
            continue;
        }
        if c.is_control() {
            out.push('?');
        } else if invisible(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
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

/// The report as Prometheus metrics: what `--textfile DIR` writes.
pub fn prometheus(report: &Report<'_>) -> String {
    prometheus::render(report)
}

/// The remediation script for the report's root cause.
pub fn script(report: &Report<'_>) -> String {
    script::render(report)
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn clean_text_cannot_forge_lines_or_drive_a_terminal() {
        assert_eq!(clean("a.service\nRoot cause: x"), "a.service?Root cause: x");
        assert_eq!(clean("\x1b]0;title\x07"), "?");
        assert_eq!(clean("a\u{9b}2Jb\u{85}c\x07\x08\x0b"), "a?b?c???");
        assert_eq!(clean("x\u{2028}y"), "x\\u{2028}y");
        assert_eq!(clean("a\u{202e}b"), "a\\u{202e}b");
        assert_eq!(clean("ѕglang ✓"), "ѕglang ✓");
    }
}
