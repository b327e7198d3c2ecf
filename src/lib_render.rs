//! The `rootcause-render` crate (layers 7 and 8): the incident's
//! [`timeline`] and every report format ([`render`]): text, Markdown, JSON,
//! NDJSON, HTML, Prometheus and the remediation script.

pub use rootcause_catalogs::catalogs;
pub use rootcause_correlate::correlate;
pub use rootcause_ingest::{bundle, ingest};
pub use rootcause_model::{context, error, model, source};
pub use rootcause_rules::rules;

pub mod render;
pub mod timeline;

/// The whole pipeline for the tests that analyse a paste and read its
/// report (a dev-dependency on the app): the app's analysis, its timeline
/// and report built again by this crate, whose types a test's own calls
/// take (the app's copy of this crate is another crate to the compiler).
#[cfg(test)]
pub(crate) struct Analysis {
    app: rootcause::Analysis,
    timeline: timeline::Timeline,
}

#[cfg(test)]
pub(crate) fn analyze(sources: source::SourceMap) -> Analysis {
    let app = rootcause::analyze(sources);
    let timeline = timeline::build(&app.incident, &app.diagnosis, &app.sources);
    Analysis { app, timeline }
}

#[cfg(test)]
impl Analysis {
    /// As `rootcause::Analysis::report`.
    pub(crate) fn report(&self) -> render::Report<'_> {
        let a = &self.app;
        render::Report::new(&a.sources, &a.inputs, &a.diagnosis)
            .with_capture(&a.context, &self.timeline)
            .with_incident(&a.incident)
    }
}
