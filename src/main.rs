//! The `rootcause` binary: everything lives in the library; see `cli::main`.

fn main() -> std::process::ExitCode {
    rootcause::cli::main()
}
