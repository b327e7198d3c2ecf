//! rootcause: from the logs of a failed GPU model-serving deployment to a root
//! cause, the evidence for it, and a safe remediation script.
//!
//! The pipeline flows one way: [`bundle`] reads inputs into a
//! [`source::SourceMap`] → [`ingest`] extracts typed facts → [`correlate`]
//! joins PIDs, units and GPUs → [`rules`] diagnose → [`render`] writes text,
//! Markdown, JSON or a remediation script. See ARCHITECTURE.md.

pub mod ingest;
pub mod model;
pub mod source;
