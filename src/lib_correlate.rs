//! The `rootcause-correlate` crate (layer 4): joining the facts' PIDs,
//! units, GPUs and clocks into one [`correlate::Incident`].

pub use rootcause_catalogs::catalogs;
pub use rootcause_model::{context, error, model, source};

pub mod correlate;
