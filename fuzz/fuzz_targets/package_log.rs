#![no_main]
//! Fuzz target: the `package-log` parser.

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::parse_as(data, Some("package-log")));
