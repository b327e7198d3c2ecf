//! The Markdown report: a postmortem-ready page with the root cause, the
//! causal chain, cited evidence and the remediation steps.

use std::fmt::Write as _;

use super::{Report, clean};
use crate::rules::Finding;

pub fn render(report: &Report<'_>) -> String {
    let mut out = String::from("# rootcause report\n\n");
    match report.root_cause() {
        Some(f) => {
            let _ = writeln!(out, "**Root cause:** {}\n", clean(&f.headline));
        }
        None => out.push_str("**Root cause:** no known failure found in the inputs.\n\n"),
    }
    capture_line(&mut out, report);
    if !report.findings().is_empty() {
        out.push_str("| id | severity | category | rule | confidence | title |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for f in report.findings() {
            let _ = writeln!(
                out,
                "| {} | {} | `{}` | `{}` | {:.2} | {} |",
                f.id,
                f.severity.name(),
                f.category.name(),
                f.rule,
                f.confidence,
                cell(&f.title)
            );
        }
        out.push('\n');
    }
    for f in report.findings() {
        finding(&mut out, report, f);
    }
    super::timeline::markdown(&mut out, report);
    super::timeline::markdown_gaps(&mut out, report);
    out.push_str(
        "## Inputs\n\n| input | lines | format | unrecognised lines |\n|---|---|---|---|\n",
    );
    for i in report.inputs {
        let _ = writeln!(
            out,
            "| `{}` | {}-{} | `{}` | {} |",
            cell(&report.sources.get(i.segment.source).name),
            i.segment.first_line,
            i.segment.last_line,
            i.segment.format.name(),
            i.unrecognized
        );
    }
    out
}

fn finding(out: &mut String, report: &Report<'_>, f: &Finding) {
    let _ = writeln!(out, "## {}: {}\n", f.id, clean(&f.title));
    let _ = writeln!(
        out,
        "*{}* · `{}` · rule `{}` · confidence {:.2}\n",
        f.severity.name(),
        f.category.name(),
        f.rule,
        f.confidence
    );
    if !f.chain.is_empty() {
        out.push_str("### Causal chain\n\n");
        for (i, link) in f.chain.iter().enumerate() {
            let lead = if i == 0 { "" } else { "because " };
            let _ = writeln!(out, "{}. {lead}{}", i + 1, clean(link));
        }
        out.push('\n');
    }
    if !f.explanation.is_empty() {
        let _ = writeln!(out, "{}\n", clean(&f.explanation));
    }
    if !f.explains.is_empty() {
        let _ = writeln!(out, "Explains: {}.\n", f.explains.join(", "));
    }
    if !f.competing.is_empty() {
        let list: Vec<String> = f
            .competing
            .iter()
            .map(|(id, c)| format!("{id} ({c:.2})"))
            .collect();
        let _ = writeln!(out, "Competing hypotheses: {}.\n", list.join(", "));
    }
    if f.occurrences > 1 {
        let _ = writeln!(out, "Seen {} times.\n", f.occurrences);
    }
    out.push_str("### Evidence\n\n");
    for e in &f.evidence {
        let line = report.resolve(e.span);
        let _ = writeln!(
            out,
            "- {} (`{}:{}`)",
            clean(&e.note),
            clean(&line.input),
            line.line
        );
        let _ = writeln!(
            out,
            "  ```text\n  {}\n  ```",
            clean(&line.text).replace("```", "'''")
        );
    }
    out.push_str("\n### Confidence\n\n");
    for c in &f.conditions {
        let _ = writeln!(
            out,
            "- [{}] {}",
            if c.met { "x" } else { " " },
            clean(&c.text)
        );
    }
    out.push('\n');
    if !f.actions.is_empty() {
        out.push_str("### Remediation\n\n");
        for (i, a) in f.actions.iter().enumerate() {
            let why = if a.why.is_empty() {
                String::new()
            } else {
                format!(": {}", clean(&a.why))
            };
            let _ = writeln!(
                out,
                "{}. **{}** ({}){why}",
                i + 1,
                clean(&a.describe()),
                a.safety.name()
            );
            if let Some(cmd) = a.command() {
                let _ = writeln!(out, "   `{}`", clean(&cmd).replace('`', "'"));
            }
            let details = a.details();
            if !details.is_empty() {
                let _ = writeln!(
                    out,
                    "   ```diff\n   {}\n   ```",
                    details
                        .iter()
                        .map(|d| clean(d).replace("```", "'''"))
                        .collect::<Vec<_>>()
                        .join("\n   ")
                );
            }
        }
        out.push('\n');
    }
    for r in &f.refused {
        let _ = writeln!(out, "> note: {}\n", clean(r));
    }
}

/// `Host `ct200`, captured 2026-11-27 09:41:12 +00:00 (UTC).`
fn capture_line(out: &mut String, report: &Report<'_>) {
    let Some(c) = report.context else { return };
    let at = report.timeline.and_then(|t| {
        Some(crate::timeline::display_time(
            &t.frame.captured_at?,
            &t.frame,
        ))
    });
    let zone = c
        .zone
        .map(|z| format!(" ({})", z.name()))
        .unwrap_or_default();
    match (&c.host, at) {
        (Some(h), Some(at)) => {
            let _ = writeln!(
                out,
                "Host `{}`, captured {at}{zone}.\n",
                h.replace('`', "'")
            );
        }
        (Some(h), None) => {
            let _ = writeln!(out, "Host `{}`.\n", h.replace('`', "'"));
        }
        (None, Some(at)) => {
            let _ = writeln!(out, "Captured {at}{zone}.\n");
        }
        (None, None) => {}
    }
}

/// Table cells cannot hold `|` or line breaks.
fn cell(text: &str) -> String {
    clean(text).replace('|', "\\|")
}
