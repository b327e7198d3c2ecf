//! The `rootcause-model` crate (layers 0 and 1 of ARCHITECTURE.md): the
//! inputs and their spans ([`source`]), the typed facts every parser
//! produces ([`model`]), a bundle's typed manifest ([`context`]) and the
//! errors of reading inputs ([`error`]). The crates above re-export these
//! modules under the same names, so `crate::model::…` reads the same in
//! every crate.

pub mod context;
pub mod error;
pub mod model;
pub mod source;
