//! The single integration-test binary: one `mod` line per test file.

mod catalog;
mod cli;
mod format_fixtures;
mod hardware_incidents;
mod host_facts;
mod incidents;
mod journal_files;
mod robustness;
mod rules;
mod scripts;
mod support;
