//! Diagnose: the catalog of failure rules and the findings they produce.
//!
//! One rule is one file with its documentation; [`registry`] lists them.
//! Rules read an [`Incident`] and return [`Finding`]s with cited evidence,
//! an explained confidence and typed remediation [`Action`]s. They never
//! print and never write shell.

mod action;
mod finding;
mod registry;
mod sglang_unbalanced_memory;

pub use action::{Action, ActionKind, ExpectedCmdline, GpuRef, ProcessIdentity, Safety, with_flag};
pub use finding::{Category, Condition, Entities, Evidence, Finding, Severity};
pub use registry::RULES;

use crate::correlate::Incident;

/// What a rule is, for `rootcause rules`/`explain` and the generated docs.
#[derive(Debug)]
pub struct RuleMeta {
    /// Stable kebab-case id; never reused.
    pub id: &'static str,
    pub severity: Severity,
    /// One line: what failure the rule recognises.
    pub summary: &'static str,
    /// Markdown with the sections *What it means*, *Why it happens*, *How to
    /// confirm*, *How to fix* and *Safety*.
    pub doc: &'static str,
}

pub trait Rule: Sync {
    fn meta(&self) -> &'static RuleMeta;
    fn check(&self, incident: &Incident, out: &mut Vec<Finding>);
}

/// The diagnosis of one incident.
#[derive(Debug, Default)]
pub struct Diagnosis {
    /// Sorted most important first; ids are `F1`, `F2`, … in that order.
    pub findings: Vec<Finding>,
    /// Id of the finding that explains the others, if any.
    pub root_cause: Option<String>,
}

/// Runs every rule and ranks the findings. Deterministic: the same incident
/// gives the same findings, in the same order, with the same ids.
pub fn diagnose(incident: &Incident) -> Diagnosis {
    let mut findings = Vec::new();
    for rule in RULES {
        rule.check(incident, &mut findings);
    }
    findings.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then(b.confidence.total_cmp(&a.confidence))
            .then(a.rule.cmp(b.rule))
            .then(
                a.evidence
                    .first()
                    .map(|e| e.span)
                    .cmp(&b.evidence.first().map(|e| e.span)),
            )
    });
    for (i, f) in findings.iter_mut().enumerate() {
        f.id = format!("F{}", i + 1);
    }
    let root_cause = findings
        .iter()
        .find(|f| f.severity <= Severity::Error)
        .map(|f| f.id.clone());
    Diagnosis {
        findings,
        root_cause,
    }
}
