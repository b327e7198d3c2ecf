//! The single integration-test binary: one `mod` line per test file.

mod actions;
mod capture;
mod catalog;
mod cli;
mod format_fixtures;
mod host_facts;
mod hostile;
mod incidents;
mod journal_files;
mod prefilter;
mod replay;
mod robustness;
mod rules;
mod sandbox;
mod scripts;
mod support;
mod timeline;
