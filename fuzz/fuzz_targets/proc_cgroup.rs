#![no_main]
//! Fuzz target: the `proc-cgroup` parser.

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::parse_as(data, Some("proc-cgroup")));
