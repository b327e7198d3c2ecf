//! rootcause: from the logs of a failed GPU model-serving deployment to a root
//! cause, the evidence for it, and a safe remediation script.
//!
//! The pipeline flows one way: [`bundle`] reads inputs into a
//! [`source::SourceMap`] → [`ingest`] extracts typed facts → [`correlate`]
//! joins PIDs, units and GPUs → [`rules`] diagnose → [`timeline`] orders the
//! incident's lines → [`render`] writes text, Markdown, JSON, NDJSON or a
//! remediation script. [`capture`] writes bundles on a live host and
//! [`replay`] checks recorded ones against their approved reports. See
//! ARCHITECTURE.md. This is the app's crate; the layers below are crates of
//! their own (`crates/`), re-exported here under their module names.

pub use rootcause_catalogs::catalogs;
pub use rootcause_correlate::correlate;
pub use rootcause_ingest::{bundle, ingest};
pub use rootcause_model::{context, error, model, source};
pub use rootcause_render::{render, timeline};

pub mod capture;
pub mod cli;
pub mod demo;
mod progress;
pub mod replay;
pub mod run;

/// The rule engine (`rootcause-rules`) and the built-in rules
/// (`rootcause-rule-catalog`) under one name, as the app and its tests
/// know them.
pub mod rules {
    pub use rootcause_rule_catalog::{RULES, catalog_version};
    pub use rootcause_rules::rules::*;
}

use crate::context::Context;
use crate::correlate::{Clock, Incident};
use crate::ingest::InputSummary;
use crate::render::Report;
use crate::rules::Diagnosis;
use crate::source::SourceMap;
use crate::timeline::Timeline;

/// One analysed incident: its inputs, what was found in them, and the
/// diagnosis. A pure function of the inputs.
pub struct Analysis {
    pub sources: SourceMap,
    pub inputs: Vec<InputSummary>,
    pub incident: Incident,
    pub diagnosis: Diagnosis,
    /// The bundle's manifest, typed; empty for loose files and pastes.
    pub context: Context,
    pub timeline: Timeline,
}

/// Analyses with the built-in rule catalog.
pub fn analyze(sources: SourceMap) -> Analysis {
    analyze_with(sources, &Options::default())
}

/// How to analyse: which rules, whether the user named the inputs' format,
/// and what the bundle's manifest says (zone, capture time, gaps).
#[derive(Clone)]
pub struct Options<'a> {
    /// Read every input as this format instead of detecting it (`--format-hint`).
    pub format_hint: Option<ingest::Format>,
    /// The rule catalog: built-in plus users' own (`--rules DIR`).
    pub rules: &'a [&'a dyn rules::Rule],
    /// The bundle's manifest, typed: its zone and capture time put every log
    /// time in one frame, its gaps go into the report.
    pub context: Context,
    /// Only skim the lines no anchor matches (`analyze`, `replay`): the
    /// report is the same, the journal entries and line times kept in the
    /// incident are only those it needs. Off, every line is read in full
    /// (the `timeline` command lists every line).
    pub prefilter: bool,
    /// Told the bytes read so far and the total while inputs are read.
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            format_hint: None,
            rules: rules::RULES,
            context: Context::default(),
            prefilter: false,
            progress: None,
        }
    }
}

/// Analyses a bundle with its manifest's [`Context`] and the given rules.
pub fn analyze_in(sources: SourceMap, context: Context, catalog: &[&dyn rules::Rule]) -> Analysis {
    analyze_with(
        sources,
        &Options {
            rules: catalog,
            context,
            ..Options::default()
        },
    )
}

/// Analyses with explicit [`Options`].
pub fn analyze_with(sources: SourceMap, options: &Options<'_>) -> Analysis {
    analyze_observed(sources, options, &|_| {})
}

/// The steps of an analysis, in order, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Parse,
    Correlate,
    Diagnose,
    Timeline,
}

/// Like [`analyze_with`], telling `observe` as each step starts.
pub fn analyze_observed(
    sources: SourceMap,
    options: &Options<'_>,
    observe: &dyn Fn(Stage),
) -> Analysis {
    let catalog = options.rules;
    let context = options.context.clone();
    observe(Stage::Parse);
    let anchors = rules::anchors(catalog);
    let settings = ingest::Settings {
        hint: options.format_hint,
        anchors: &anchors,
        prefilter: options.prefilter,
        progress: options.progress,
        threads: ingest::Threads::Auto,
        // Aggregating repeats changes no report below its limits; a
        // reading of every line keeps every line.
        repeats: if options.prefilter {
            ingest::Repeats::STANDARD
        } else {
            ingest::Repeats::UNBOUNDED
        },
    };
    let ingested = ingest::ingest_with(&sources, &settings);
    // What of the inputs could not be read is a gap like the capture's.
    let mut context = context;
    context.gaps.extend(crate::context::input_gaps(&sources));
    observe(Stage::Correlate);
    let incident = correlate::correlate_with(ingested.facts, &Clock::from_context(&context));
    observe(Stage::Diagnose);
    let diagnosis = rules::diagnose(&incident, catalog);
    let mut inputs = ingested.inputs;
    credit_cited(&mut inputs, &diagnosis);
    observe(Stage::Timeline);
    let timeline = timeline::build(&incident, &diagnosis, &sources);
    Analysis {
        sources,
        inputs,
        incident,
        diagnosis,
        context,
        timeline,
    }
}

/// A line no parser read but a finding cites was understood, by that
/// finding's rule: it moves from its segment's unrecognised lines to its
/// cited ones. An uncited line stays unrecognised.
fn credit_cited(inputs: &mut [ingest::InputSummary], diagnosis: &rules::Diagnosis) {
    if inputs.iter().all(|i| i.anchored.is_empty()) {
        return;
    }
    for finding in &diagnosis.findings {
        for evidence in &finding.evidence {
            let span = evidence.span;
            if let Some(input) = inputs.iter_mut().find(|i| {
                i.segment.source == span.source
                    && (i.segment.first_line..=i.segment.last_line).contains(&span.line)
            }) {
                input.cite(span, &finding.id, finding.rule);
            }
        }
    }
}

impl Analysis {
    pub fn report(&self) -> Report<'_> {
        Report::new(&self.sources, &self.inputs, &self.diagnosis)
            .with_capture(&self.context, &self.timeline)
            .with_incident(&self.incident)
    }
}
