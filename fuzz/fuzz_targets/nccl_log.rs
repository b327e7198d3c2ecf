#![no_main]
//! Fuzz target: the `nccl-log` parser.

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::parse_as(data, Some("nccl-log")));
