//! The Markdown report: a postmortem skeleton (summary, impact, timeline,
//! root cause with a Mermaid diagram of its chain, evidence, remediation)
//! that people complete where it says so, then the other findings.

use std::fmt::Write as _;

use super::gpus::{mib, thousands};
use super::{Report, clean, mermaid};
use crate::rules::Finding;

/// What people add to the skeleton: rootcause cannot know it.
const TO_FILL: &str = "_To fill in:";

pub fn render(report: &Report<'_>) -> String {
    let mut out = String::new();
    let root = report.root_cause();
    match root {
        Some(f) => {
            let _ = writeln!(out, "# Postmortem: {}\n", clean(&f.title));
        }
        None => out.push_str("# rootcause report\n\n"),
    }
    summary(&mut out, report);
    if let Some(f) = root {
        impact(&mut out, report, f);
    }
    super::timeline::markdown(&mut out, report);
    match root {
        Some(f) => {
            root_cause(&mut out, report, f);
            let others: Vec<&Finding> = report.findings().iter().filter(|g| g.id != f.id).collect();
            if !others.is_empty() {
                out.push_str("## Other findings\n\n");
                for g in others {
                    finding(&mut out, report, g);
                }
            }
        }
        None => {
            for f in report.findings() {
                finding(&mut out, report, f);
            }
        }
    }
    super::timeline::markdown_gaps(&mut out, report);
    inputs(&mut out, report);
    if root.is_some() {
        let _ = writeln!(
            out,
            "## Follow-up\n\n- {TO_FILL} what will keep this from happening again, with an owner and a date._\n"
        );
    }
    out
}

fn summary(out: &mut String, report: &Report<'_>) {
    out.push_str("## Summary\n\n");
    match report.root_cause() {
        Some(f) => {
            let _ = writeln!(out, "**Root cause:** {}\n", clean(&f.headline));
        }
        None if report.findings().is_empty() => {
            out.push_str("**Root cause:** no known failure found in the inputs.\n\n");
        }
        None => out.push_str("**Root cause:** none of the findings is an error.\n\n"),
    }
    capture_line(out, report);
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
}

/// What the logs say was hit; what users felt is for people to add.
fn impact(out: &mut String, report: &Report<'_>, f: &Finding) {
    out.push_str("## Impact\n\n");
    if !f.entities.units.is_empty() {
        let units: Vec<String> = f
            .entities
            .units
            .iter()
            .map(|u| format!("`{}`", u.replace('`', "'")))
            .collect();
        let _ = writeln!(out, "- Units involved: {}.", units.join(", "));
    }
    if !f.entities.gpus.is_empty() {
        let gpus: Vec<String> = f.entities.gpus.iter().map(|g| format!("GPU {g}")).collect();
        let _ = writeln!(out, "- GPUs involved: {}.", gpus.join(", "));
    }
    if let Some((first, last)) = evidence_times(report, f) {
        if first == last {
            let _ = writeln!(out, "- Evidence dated {first}.");
        } else {
            let _ = writeln!(out, "- Evidence dated from {first} to {last}.");
        }
    }
    if f.occurrences > 1 {
        let _ = writeln!(out, "- Seen {} times (ranks or restarts).", f.occurrences);
    }
    let _ = writeln!(
        out,
        "- {TO_FILL} who or what was affected (requests failed, users, duration)._\n"
    );
    gpu_table(out, report);
}

/// First and last time of the finding's evidence on the timeline.
fn evidence_times(report: &Report<'_>, f: &Finding) -> Option<(String, String)> {
    let timeline = report.timeline?;
    let times: Vec<String> = timeline
        .entries
        .iter()
        .filter(|e| e.findings.contains(&f.id))
        .filter_map(|e| {
            Some(crate::timeline::display_time(
                e.time.as_ref()?,
                &timeline.frame,
            ))
        })
        .collect();
    Some((times.first()?.clone(), times.last()?.clone()))
}

/// The per-GPU memory picture as a table.
fn gpu_table(out: &mut String, report: &Report<'_>) {
    if report.gpus.is_empty() {
        return;
    }
    out.push_str("GPU memory when the capture was taken:\n\n");
    out.push_str("| GPU | used / total | share | held by |\n|---|---|---|---|\n");
    for b in &report.gpus {
        let mark = if b.cited {
            " **(root cause)**"
        } else if b.odd {
            " **(differs)**"
        } else {
            ""
        };
        let share = match (b.used_mib, b.total_mib) {
            (Some(u), Some(t)) if t > 0 => format!("{:.0}%", u as f64 * 100.0 / t as f64),
            _ => String::new(),
        };
        let holders: Vec<String> = b
            .holders
            .iter()
            .map(|h| {
                let who = match &h.unit {
                    Some(u) => format!("PID {} `{}`", h.pid, cell(u).replace('`', "'")),
                    None => format!("PID {} `{}`", h.pid, cell(&h.name).replace('`', "'")),
                };
                match h.used_mib {
                    Some(m) => format!("{who} ({})", mib(m)),
                    None => who,
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "| {}{mark} | {} / {} MiB | {share} | {} |",
            b.index,
            b.used_mib.map_or("?".to_owned(), thousands),
            b.total_mib.map_or("?".to_owned(), thousands),
            if holders.is_empty() {
                "no process listed".to_owned()
            } else {
                holders.join(", ")
            }
        );
    }
    out.push('\n');
}

fn root_cause(out: &mut String, report: &Report<'_>, f: &Finding) {
    let _ = writeln!(out, "## Root cause\n\n{}\n", clean(&f.headline));
    let _ = writeln!(
        out,
        "*{}* · `{}` · rule `{}` · confidence {:.2} · finding {}\n",
        f.severity.name(),
        f.category.name(),
        f.rule,
        f.confidence,
        f.id
    );
    if !f.chain.is_empty() {
        out.push_str("### Causal chain\n\n");
        chain_list(out, f);
        out.push_str(&mermaid::causal_chain(report, f));
        out.push('\n');
    }
    if !f.explanation.is_empty() {
        let _ = writeln!(out, "{}\n", clean(&f.explanation));
    }
    extras(out, f);
    conditions(out, f, "### Why we believe it");
    out.push_str("## Evidence\n\n");
    evidence(out, report, f);
    out.push('\n');
    out.push_str("## Remediation\n\n");
    if f.actions.is_empty() {
        out.push_str("No step is known for this cause.\n\n");
    } else {
        actions(out, f);
        out.push_str(
            "`rootcause … --script fix.sh` writes these steps as a guarded bash script (a dry run unless run with `--apply`).\n\n",
        );
    }
    refused(out, f);
}

/// Another finding, complete but one level down.
fn finding(out: &mut String, report: &Report<'_>, f: &Finding) {
    let _ = writeln!(out, "### {}: {}\n", f.id, clean(&f.title));
    let _ = writeln!(
        out,
        "*{}* · `{}` · rule `{}` · confidence {:.2}\n",
        f.severity.name(),
        f.category.name(),
        f.rule,
        f.confidence
    );
    if !f.chain.is_empty() {
        chain_list(out, f);
    }
    if !f.explanation.is_empty() {
        let _ = writeln!(out, "{}\n", clean(&f.explanation));
    }
    extras(out, f);
    out.push_str("#### Evidence\n\n");
    evidence(out, report, f);
    out.push('\n');
    conditions(out, f, "#### Confidence");
    if !f.actions.is_empty() {
        out.push_str("#### Remediation\n\n");
        actions(out, f);
    }
    refused(out, f);
}

fn chain_list(out: &mut String, f: &Finding) {
    for (i, link) in f.chain.iter().enumerate() {
        let lead = if i == 0 { "" } else { "because " };
        let _ = writeln!(out, "{}. {lead}{}", i + 1, clean(link));
    }
    out.push('\n');
}

fn extras(out: &mut String, f: &Finding) {
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
}

fn conditions(out: &mut String, f: &Finding, heading: &str) {
    if f.conditions.is_empty() {
        return;
    }
    let _ = writeln!(out, "{heading}\n");
    for c in &f.conditions {
        let _ = writeln!(
            out,
            "- [{}] {}",
            if c.met { "x" } else { " " },
            clean(&c.text)
        );
    }
    out.push('\n');
}

/// Each cited line in a code block, its key value marked with `^` below.
fn evidence(out: &mut String, report: &Report<'_>, f: &Finding) {
    for e in &f.evidence {
        let m = report.marked(e);
        let _ = writeln!(
            out,
            "- {} (`{}:{}`)",
            clean(&e.note),
            clean(&m.input).replace('`', "'"),
            m.line
        );
        let fence = |t: &str| t.replace("```", "'''");
        let _ = writeln!(out, "  ```text\n  {}", fence(&m.text()));
        if !m.key.is_empty() {
            let _ = writeln!(
                out,
                "  {}{}",
                " ".repeat(m.before.chars().count()),
                "^".repeat(m.key.chars().count())
            );
        }
        out.push_str("  ```\n");
    }
}

fn actions(out: &mut String, f: &Finding) {
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

fn refused(out: &mut String, f: &Finding) {
    for r in &f.refused {
        let _ = writeln!(out, "> note: {}\n", clean(r));
    }
}

fn inputs(out: &mut String, report: &Report<'_>) {
    out.push_str(
        "## Inputs\n\n| input | lines | format | unrecognised lines |\n|---|---|---|---|\n",
    );
    for i in report.inputs {
        let _ = writeln!(
            out,
            "| `{}` | {}-{} | `{}` | {} |",
            cell(&report.sources.get(i.segment.source).name).replace('`', "'"),
            i.segment.first_line,
            i.segment.last_line,
            i.segment.format.name(),
            i.unrecognized
        );
    }
    out.push('\n');
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
    let host = c.host.as_deref().map(|h| clean(h).replace('`', "'"));
    match (host, at) {
        (Some(h), Some(at)) => {
            let _ = writeln!(out, "Host `{h}`, captured {at}{zone}.\n");
        }
        (Some(h), None) => {
            let _ = writeln!(out, "Host `{h}`.\n");
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
