//! The `rootcause-rules` crate (layer 5): the rule engine — the [`rules::Rule`]
//! trait, findings, actions, ranking, the helpers rules share and users'
//! own rules. The built-in rules are the crate above
//! (`rootcause-rule-catalog`), so a rule's edit does not rebuild this one
//! nor the reports.

pub use rootcause_catalogs::catalogs;
pub use rootcause_correlate::correlate;
pub use rootcause_ingest::{bundle, ingest};
pub use rootcause_model::{context, error, model, source};

pub mod rules;

/// The whole pipeline, for the tests that analyse a paste (a
/// dev-dependency on the app).
#[cfg(test)]
pub(crate) use rootcause::{Analysis, analyze};
