#![no_main]
//! Fuzz target: format detection and the whole pipeline.

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::parse_as(data, None));
