//! The `rootcause` binary: parse flags, run, map the outcome to an exit code.

fn main() {}
