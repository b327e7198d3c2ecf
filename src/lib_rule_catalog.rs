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

    /// Fails, showing the finding, unless it cites line `line` (of the
    /// paste, 1-based) as evidence.
    #[track_caller]
    pub(crate) fn cites_line(f: &Finding, line: u32) {
        assert!(
            f.evidence.iter().any(|e| e.span.line == line),
            "the finding does not cite line {line}: {f:#?}"
        );
    }

    /// Fails, showing the finding, unless it cites line `line` with a note
    /// that says `words`.
    #[track_caller]
    pub(crate) fn cites_line_saying(f: &Finding, line: u32, words: &str) {
        assert!(
            f.evidence
                .iter()
                .any(|e| e.span.line == line && e.note.contains(words)),
            "the finding does not cite line {line} saying {words:?}: {f:#?}"
        );
    }

    /// Fails, showing the finding's actions, unless one of them mentions
    /// `text`: in what it does (`Action::describe`, an advice's text), why,
    /// or the command a person would type.
    #[track_caller]
    pub(crate) fn advises(f: &Finding, text: &str) {
        let mentions = |a: &crate::rules::Action| {
            a.describe().contains(text)
                || a.why.contains(text)
                || a.command().is_some_and(|c| c.contains(text))
        };
        assert!(
            f.actions.iter().any(mentions),
            "no action mentions {text:?}: {:#?}",
            f.actions
        );
    }
}
