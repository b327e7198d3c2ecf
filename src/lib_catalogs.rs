//! The `rootcause-catalogs` crate (layer 2): the upstream message catalogs
//! of `catalogs/*.toml`, compiled by its build script
//! (`crates/catalogs/build.rs`) and searched by the parsers and the rules.

pub use rootcause_model::{context, error, model, source};

pub mod catalogs;
