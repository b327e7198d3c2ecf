#![no_main]
//! Fuzz target: the `nvidia-ctk-cdi-list` parser.

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::parse_as(data, Some("nvidia-ctk-cdi-list")));
