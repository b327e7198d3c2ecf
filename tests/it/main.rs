//! The single integration-test binary: one `mod` line per test file.

mod actions;
mod capture;
mod catalog;
mod cli;
mod detection;
mod format_fixtures;
mod hardware_incidents;
mod host_facts;
mod hostile;
mod incidents;
mod journal_files;
mod replay;
mod robustness;
mod rules;
mod sandbox;
mod scripts;
mod support;
mod tidy;
mod timeline;
