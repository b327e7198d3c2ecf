//! The single integration-test binary: one `mod` line per test file.

mod actions;
mod browser;
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
mod prefilter;
mod readme;
mod replay;
mod report;
mod robustness;
mod rules;
mod sandbox;
mod scripts;
mod serving_incidents;
mod support;
mod tidy;
mod timeline;
mod wordings;
