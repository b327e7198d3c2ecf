//! A finding's causal chain as a Mermaid flowchart (GitHub renders it in
//! Markdown): the cause at the top, each consequence below it, down to the
//! symptom people saw, and the findings it explains beside the symptom.

use std::fmt::Write as _;

use super::{Report, clean};
use crate::rules::Finding;

/// Node labels are wrapped at about this many characters.
const WRAP: usize = 44;

pub fn causal_chain(report: &Report<'_>, f: &Finding) -> String {
    let mut out = String::from("```mermaid\nflowchart TD\n");
    // The chain reads symptom → cause; the diagram reads cause → symptom.
    let links: Vec<&String> = f.chain.iter().rev().collect();
    for (i, link) in links.iter().enumerate() {
        let _ = writeln!(out, "  c{i}[\"{}\"]", label(link));
    }
    for i in 1..links.len() {
        let _ = writeln!(out, "  c{} --> c{i}", i - 1);
    }
    let symptom = links.len().saturating_sub(1);
    for id in &f.explains {
        let Some(g) = report.findings().iter().find(|g| &g.id == id) else {
            continue;
        };
        let node = id.replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        let _ = writeln!(out, "  {node}[\"{}: {}\"]", label(id), label(&g.title));
        let _ = writeln!(out, "  c{symptom} -. explains .-> {node}");
    }
    if !links.is_empty() {
        out.push_str("  classDef cause fill:#fde2e1,stroke:#c62828,color:#000\n");
        out.push_str("  class c0 cause\n");
    }
    out.push_str("```\n");
    out
}

/// Text Mermaid shows as is: quotes, angle brackets and `#` as entities,
/// long text broken into lines.
fn label(text: &str) -> String {
    let escaped = |w: &str| {
        w.replace('#', "#35;")
            .replace('"', "#quot;")
            .replace('<', "#lt;")
            .replace('>', "#gt;")
            .replace('`', "'")
    };
    let text = clean(text);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > WRAP {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
        .iter()
        .map(|l| escaped(l))
        .collect::<Vec<_>>()
        .join("<br/>")
}

#[cfg(test)]
mod tests {
    use super::label;

    #[test]
    fn labels_cannot_break_the_diagram() {
        assert_eq!(label("a \"b\" <c> #1"), "a #quot;b#quot; #lt;c#gt; #35;1");
        let long = label(&"word ".repeat(20));
        assert_eq!(long.matches("<br/>").count(), 2, "{long}");
        assert_eq!(label("x\ny"), "x?y");
    }
}
