//! The `rootcause-ingest` crate (layer 3): reading a bundle's files
//! ([`bundle`]) and parsing every input format into typed facts
//! ([`ingest`]).

pub use rootcause_catalogs::catalogs;
pub use rootcause_model::{context, error, model, source};

pub mod bundle;
pub mod ingest;

/// The built-in rules, for the test that compares the prefilter's cover
/// with every rule's anchors (a dev-dependency on the app).
#[cfg(test)]
pub(crate) use rootcause::rules;
