//! The `rootcause-rule-catalog` crate (layer 6): the built-in rules, one
//! file each under `src/rules/catalog/`, listed in [`RULES`], and the
//! catalog's version. Only this crate and the app rebuild when a rule file
//! changes.

pub use rootcause_catalogs::catalogs;
pub use rootcause_correlate::correlate;
pub use rootcause_model::{context, error, model, source};
pub use rootcause_rules::rules;

#[path = "rules/catalog/mod.rs"]
pub mod catalog;
#[path = "rules/version.rs"]
mod version;

pub use catalog::RULES;
pub use version::catalog_version;

/// The whole pipeline, for the tests that analyse a paste (a
/// dev-dependency on the app).
#[cfg(test)]
pub(crate) use rootcause::analyze;

/// What the rules' unit tests ask of a paste, written once.
#[cfg(test)]
pub(crate) mod testing {
    use crate::rules::Finding;
    use crate::source::{Source, SourceMap};

    /// The whole pipeline over one pasted text, as `rootcause < paste`.
    pub(crate) fn analyze_paste(text: &str) -> rootcause::Analysis {
        let mut sources = SourceMap::default();
        sources.add(Source::new("paste", text.as_bytes()));
        crate::analyze(sources)
    }

    /// The findings the rule `id` made of a pasted text.
    pub(crate) fn findings_of(id: &str, text: &str) -> Vec<Finding> {
        analyze_paste(text)
            .diagnosis
            .findings
            .into_iter()
            .filter(|f| f.rule == id)
            .collect()
    }
}
