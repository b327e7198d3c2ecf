//! The terminal report: the root cause in one sentence first, then each
//! finding's causal chain, evidence, confidence and remediation.

use std::fmt::Write as _;

use super::{RenderOptions, Report, clean};
use crate::rules::{Finding, Safety, Severity};

struct Style {
    color: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
    fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
    fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
    fn severity(&self, s: Severity) -> String {
        let code = match s {
            Severity::Critical => "1;31",
            Severity::Error => "31",
            Severity::Warning => "33",
            Severity::Info => "36",
        };
        self.paint(code, s.name())
    }
}

pub fn render(report: &Report<'_>, options: RenderOptions) -> String {
    let st = Style {
        color: options.color,
    };
    let mut out = String::new();
    match report.root_cause() {
        Some(f) => {
            let _ = writeln!(out, "{} {}", st.bold("Root cause:"), clean(&f.headline));
        }
        None if report.findings().is_empty() => {
            let _ = writeln!(
                out,
                "{} no known failure found in the inputs.",
                st.bold("Root cause:")
            );
        }
        None => {
            let _ = writeln!(
                out,
                "{} none of the findings is an error.",
                st.bold("Root cause:")
            );
        }
    }
    for f in report.findings() {
        out.push('\n');
        finding(&mut out, report, f, &st);
    }
    unknown_errors(&mut out, report, &st);
    super::timeline::text_gaps(&mut out, report, &st.bold("Gaps in the capture"));
    out.push('\n');
    inputs(&mut out, report, &st);
    out
}

fn unknown_errors(out: &mut String, report: &Report<'_>, st: &Style) {
    let groups = &report.diagnosis.unknown_errors;
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{}",
        st.bold("Unrecognised errors (no rule explains these lines)")
    );
    for g in groups {
        let first = report.resolve(g.first);
        let _ = writeln!(out, "  {}x [{}] {}", g.count, g.fingerprint, g.template);
        let _ = writeln!(
            out,
            "      {}",
            st.dim(&format!(
                "first at {}:{}: {}",
                first.input, first.line, first.text
            ))
        );
    }
}

fn finding(out: &mut String, report: &Report<'_>, f: &Finding, st: &Style) {
    let _ = writeln!(
        out,
        "{} {} · {} · {} · confidence {:.2}",
        st.bold(&format!("[{}]", f.id)),
        st.severity(f.severity),
        f.category.name(),
        f.rule,
        f.confidence
    );
    let _ = writeln!(out, "  {}", st.bold(&clean(&f.title)));

    if !f.chain.is_empty() {
        let _ = writeln!(out, "\n  {}", st.bold("Causal chain (symptom → cause)"));
        for (depth, link) in f.chain.iter().enumerate() {
            if depth == 0 {
                let _ = writeln!(out, "    {}", clean(link));
            } else {
                let _ = writeln!(
                    out,
                    "    {}└─ because {}",
                    "   ".repeat(depth - 1),
                    clean(link)
                );
            }
        }
    }
    if !f.explanation.is_empty() {
        let _ = writeln!(out, "\n  {}", st.bold("Why"));
        let _ = writeln!(out, "    {}", clean(&f.explanation));
    }
    if !f.explains.is_empty() {
        let _ = writeln!(
            out,
            "\n  Explains: {} (symptoms of this cause)",
            f.explains.join(", ")
        );
    }
    if !f.competing.is_empty() {
        let list: Vec<String> = f
            .competing
            .iter()
            .map(|(id, c)| format!("{id} ({c:.2})"))
            .collect();
        let _ = writeln!(out, "  Competing hypotheses: {}", list.join(", "));
    }
    if f.occurrences > 1 {
        let _ = writeln!(out, "  Seen {} times.", f.occurrences);
    }

    let _ = writeln!(out, "\n  {}", st.bold("Evidence"));
    for e in &f.evidence {
        let line = report.resolve(e.span);
        let _ = writeln!(
            out,
            "    {}: {}",
            st.bold(&format!("{}:{}", line.input, line.line)),
            clean(&line.text)
        );
        let _ = writeln!(out, "      {}", st.dim(&format!("↳ {}", clean(&e.note))));
    }

    let _ = writeln!(
        out,
        "\n  {}",
        st.bold(&format!("Confidence {:.2}", f.confidence))
    );
    for c in &f.conditions {
        let _ = writeln!(
            out,
            "    [{}] {}",
            if c.met { "x" } else { " " },
            clean(&c.text)
        );
    }

    if !f.actions.is_empty() {
        let _ = writeln!(out, "\n  {}", st.bold("Remediation"));
        for (i, a) in f.actions.iter().enumerate() {
            let tag = match a.safety {
                Safety::Safe => String::new(),
                s => format!("[{}] ", s.name()),
            };
            let why = if a.why.is_empty() {
                String::new()
            } else {
                format!(" — {}", clean(&a.why))
            };
            let _ = writeln!(out, "    {}. {tag}{}{why}", i + 1, clean(&a.describe()));
            if let Some(cmd) = a.command() {
                let _ = writeln!(out, "       {}", st.dim(&format!("$ {}", clean(&cmd))));
            }
            for line in a.details() {
                let _ = writeln!(out, "       {}", clean(&line));
            }
        }
        let _ = writeln!(
            out,
            "    {}",
            st.dim("`--script FILE` writes these steps as a guarded bash script (dry run unless --apply).")
        );
    }
    for r in &f.refused {
        let _ = writeln!(out, "  note: {}", clean(r));
    }
}

fn inputs(out: &mut String, report: &Report<'_>, st: &Style) {
    let _ = writeln!(out, "{}", st.bold("Inputs"));
    let width = report
        .inputs
        .iter()
        .map(|i| report.sources.get(i.segment.source).name.chars().count())
        .max()
        .unwrap_or(0);
    for i in report.inputs {
        let name = &report.sources.get(i.segment.source).name;
        let _ = writeln!(
            out,
            "  {name:<width$}  lines {:>5}-{:<5}  {:<28} {} unrecognised",
            i.segment.first_line,
            i.segment.last_line,
            i.segment.format.name(),
            i.unrecognized,
        );
    }
}
