//! rootcause: from the logs of a failed GPU model-serving deployment to a root
//! cause, the evidence for it, and a safe remediation script.
//!
//! The pipeline flows one way: [`bundle`] reads inputs into a
//! [`source::SourceMap`] → [`ingest`] extracts typed facts → [`correlate`]
//! joins PIDs, units and GPUs → [`rules`] diagnose → [`render`] writes text,
//! Markdown, JSON or a remediation script. See ARCHITECTURE.md.

pub mod bundle;
pub mod cli;
pub mod correlate;
pub mod demo;
pub mod error;
pub mod ingest;
pub mod model;
pub mod render;
pub mod rules;
mod run;
pub mod source;

use crate::correlate::Incident;
use crate::ingest::InputSummary;
use crate::render::Report;
use crate::rules::Diagnosis;
use crate::source::SourceMap;

/// One analysed incident: its inputs, what was found in them, and the
/// diagnosis. A pure function of the inputs.
pub struct Analysis {
    pub sources: SourceMap,
    pub inputs: Vec<InputSummary>,
    pub incident: Incident,
    pub diagnosis: Diagnosis,
}

/// Analyses with the built-in rule catalog.
pub fn analyze(sources: SourceMap) -> Analysis {
    analyze_with(sources, &Options::default())
}

/// How to analyse: which rules, and whether the user named the inputs' format.
#[derive(Clone, Copy)]
pub struct Options<'a> {
    /// Read every input as this format instead of detecting it (`--format-hint`).
    pub format_hint: Option<ingest::Format>,
    /// The rule catalog: built-in plus users' own (`--rules DIR`).
    pub rules: &'a [&'a dyn rules::Rule],
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            format_hint: None,
            rules: rules::RULES,
        }
    }
}

/// Analyses with explicit [`Options`].
pub fn analyze_with(sources: SourceMap, options: &Options<'_>) -> Analysis {
    let catalog = options.rules;
    let ingested = ingest::ingest_as(&sources, options.format_hint, &rules::anchors(catalog));
    let incident = correlate::correlate(ingested.facts);
    let diagnosis = rules::diagnose(&incident, catalog);
    Analysis {
        sources,
        inputs: ingested.inputs,
        incident,
        diagnosis,
    }
}

impl Analysis {
    pub fn report(&self) -> Report<'_> {
        Report::new(&self.sources, &self.inputs, &self.diagnosis)
    }
}
