//! The single integration-test binary: one `mod` line per test file.

mod capture;
mod catalog;
mod cli;
mod incidents;
mod replay;
mod scripts;
mod support;
mod timeline;
