//! The timeline as people read it: `rootcause timeline` lines, the Markdown
//! report's key events, and the gaps of the capture. Formatting only; what
//! is on the timeline was decided by [`crate::timeline`].

use std::fmt::Write as _;

use super::{Report, clean};
use crate::source::SourceMap;
use crate::timeline::{Entry, Placement, Timeline, describe_frame, display_time};

/// Event text beyond this many characters is elided (a `server_args=` line
/// runs to thousands).
const MAX_TEXT_CHARS: usize = 160;

/// Cleaned ([`clean`]) and cut to [`MAX_TEXT_CHARS`].
fn shorten(text: &str) -> String {
    let text = clean(text);
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.into_owned(),
    }
}

fn time(e: &Entry, timeline: &Timeline) -> String {
    let mark = if e.placement == Placement::Stamped {
        ""
    } else {
        "~"
    };
    match &e.time {
        Some(t) => format!("{mark}{}", display_time(t, &timeline.frame)),
        None => "~(no time)".to_owned(),
    }
}

/// How times were read, and when the capture was taken.
fn frame_sentence(timeline: &Timeline) -> String {
    let mut s = describe_frame(&timeline.frame);
    if let Some(t) = &timeline.frame.captured_at {
        let _ = write!(s, " Captured at {}.", display_time(t, &timeline.frame));
    }
    s
}

/// `rootcause timeline`: one line per entry, `~` before a placed time, the
/// ids of the findings a line is evidence for, and the line's citation.
pub fn text(
    timeline: &Timeline,
    entries: &[&Entry],
    sources: &SourceMap,
    host: Option<&str>,
    color: bool,
) -> String {
    let paint = |style, s: &str| super::style::paint(color, style, s);
    let mut out = String::new();
    match host {
        Some(h) => {
            let _ = writeln!(
                out,
                "Timeline of {}. {}",
                clean(h),
                frame_sentence(timeline)
            );
        }
        None => {
            let _ = writeln!(out, "Timeline. {}", frame_sentence(timeline));
        }
    }
    let cite = |e: &Entry| format!("{}:{}", clean(sources.name(e.span)), e.span.line);
    let time_w = entries
        .iter()
        .map(|e| time(e, timeline).chars().count())
        .max()
        .unwrap_or(0);
    let ids_w = entries
        .iter()
        .map(|e| e.findings.join(",").len())
        .max()
        .unwrap_or(0);
    let cite_w = entries
        .iter()
        .map(|e| cite(e).chars().count())
        .max()
        .unwrap_or(0)
        .min(40);
    for e in entries {
        let ids = format!("{:<ids_w$}", e.findings.join(","));
        let line = format!(
            "{:<time_w$} {} {:<cite_w$}  {}",
            time(e, timeline),
            if e.findings.is_empty() {
                ids
            } else {
                paint(super::style::BOLD_YELLOW, &ids)
            },
            cite(e),
            if e.findings.is_empty() {
                shorten(&e.text)
            } else {
                paint(super::style::BOLD, &shorten(&e.text))
            }
        );
        out.push_str(line.trim_end());
        if let Some(note) = e.placement.note() {
            let _ = write!(out, "  {}", paint(super::style::DIM, &format!("[{note}]")));
        }
        out.push('\n');
    }
    if entries.is_empty() {
        out.push_str("(no timed lines in the inputs)\n");
    }
    out
}

/// The Markdown report's `## Timeline` of key events.
pub fn markdown(out: &mut String, report: &Report<'_>) {
    let Some(timeline) = report.timeline else {
        return;
    };
    let (events, omitted) = timeline.key_events();
    if events.is_empty() {
        return;
    }
    out.push_str("## Timeline\n\n");
    let _ = writeln!(
        out,
        "{} `~` marks a line without a timestamp of its own, placed by its position.\n",
        frame_sentence(timeline)
    );
    out.push_str("| time | input | event | finding |\n|---|---|---|---|\n");
    for e in events {
        let mut event = shorten(&e.text).replace('`', "'");
        if let Some(note) = e.placement.note() {
            event = format!("`{event}` ({note})");
        } else {
            event = format!("`{event}`");
        }
        let ids = if e.findings.is_empty() {
            String::new()
        } else {
            format!("**{}**", e.findings.join(", "))
        };
        let _ = writeln!(
            out,
            "| {} | `{}:{}` | {} | {} |",
            time(e, timeline),
            clean(report.sources.name(e.span))
                .replace('|', "\\|")
                .replace('`', "'"),
            e.span.line,
            event.replace('|', "\\|"),
            ids
        );
    }
    if omitted > 0 {
        let _ = writeln!(
            out,
            "\n{omitted} earlier events are not shown; `rootcause timeline` lists every event."
        );
    }
    out.push('\n');
}

/// The Markdown report's `## Gaps in the capture`, when there are any.
pub fn markdown_gaps(out: &mut String, report: &Report<'_>) {
    let (gaps, notes) = (report.gaps(), report.manifest_notes());
    if gaps.is_empty() && notes.is_empty() {
        return;
    }
    out.push_str("## Gaps in the capture\n\n");
    for g in gaps {
        let _ = writeln!(out, "- {}", clean(&g.describe()).replace('`', "'"));
    }
    for n in notes {
        let _ = writeln!(out, "- {}", clean(n).replace('`', "'"));
    }
    out.push('\n');
}

/// The text report's gaps, when there are any.
pub fn text_gaps(out: &mut String, report: &Report<'_>, title: &str) {
    let (gaps, notes) = (report.gaps(), report.manifest_notes());
    if gaps.is_empty() && notes.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}");
    for g in gaps {
        let _ = writeln!(out, "  - {}", clean(&g.describe()));
    }
    for n in notes {
        let _ = writeln!(out, "  - {}", clean(n));
    }
}
