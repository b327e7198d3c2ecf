#![no_main]
//! Fuzz target: the `coredumpctl info` parser.

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::parse_as(data, Some("coredumpctl")));
