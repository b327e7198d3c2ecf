//! `new-rule-template`: TODO one sentence: what the rule finds, and why it
//! is a cause.
//! (scaffold) The template `scripts/new-rule.sh` copies into a new rule,
//! (scaffold) named and wired; compiled and run by `cargo test`, so it cannot
//! (scaffold) fall behind the rule API. The scaffold drops these lines and
//! (scaffold) everything from `#[cfg(test)]` on.

use crate::correlate::Incident;
use crate::rules::{Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: NewRuleTemplate = NewRuleTemplate;

pub struct NewRuleTemplate;

/// The catalog row (`catalogs/*.toml`) whose lines this rule reasons about:
/// a rule asks for a message by its row, it never copies its pattern.
const ROW: &str = "template.row-id";

static META: RuleMeta = RuleMeta {
    id: "new-rule-template",
    category: Category::Unknown,
    severity: Severity::Error,
    summary: "TODO: one line, as `rootcause rules` lists it",
    // The catalog rows' anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
TODO: what a person reads first.

## Why it happens
TODO: the causes, most likely first.

## How to confirm
TODO: the command that settles it.

## How to fix
TODO: what to do.

## Safety
TODO: what the steps may touch.
"#,
};

impl Rule for NewRuleTemplate {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = incident.known(ROW).collect();
        let Some((first, _)) = hits.first() else {
            return;
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.evidence(first.span, "TODO: what this line shows");
        f.condition("TODO: the first thing the rule checked", true);
        f.title = "TODO: the finding's title".to_owned();
        f.headline = "TODO: one sentence a person reads first.".to_owned();
        f.confidence = 0.5;
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::Rule;

    /// The template runs: no row of its name, no finding (and no panic).
    #[test]
    fn the_template_compiles_and_runs() {
        let analysis = crate::testing::analyze_paste("nothing to see\n");
        let mut out = Vec::new();
        super::RULE.check(&analysis.incident, &mut out);
        assert!(out.is_empty());
        assert_eq!(super::RULE.meta().id, "new-rule-template");
    }
}
