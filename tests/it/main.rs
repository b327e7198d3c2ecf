//! The single integration-test binary: one `mod` line per test file.

mod actions;
mod catalog;
mod cli;
mod hostile;
mod incidents;
mod sandbox;
mod scripts;
mod support;
