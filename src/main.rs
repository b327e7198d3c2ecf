//! The `rootcause` binary: everything lives in the library; see `run::main`.

fn main() -> std::process::ExitCode {
    rootcause::run::main()
}
