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

pub fn analyze(sources: SourceMap) -> Analysis {
    analyze_as(sources, None)
}

/// [`analyze`], reading every input as `hint` when the user named its
/// format (`--format-hint`).
pub fn analyze_as(sources: SourceMap, hint: Option<ingest::Format>) -> Analysis {
    let ingested = ingest::ingest_as(&sources, hint);
    let incident = correlate::correlate(ingested.facts);
    let diagnosis = rules::diagnose(&incident);
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
