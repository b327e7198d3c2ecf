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
