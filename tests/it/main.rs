//! The single integration-test binary: one `mod` line per test file.
