//! Command-line flags (clap derive). Doc comments are the `--help` text.
//! No logic here beyond handing the parsed flags to [`crate::run`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::ingest::Format;

#[derive(Debug, Parser)]
#[command(
    name = "rootcause",
    version,
    about = "Find the root cause of a failed GPU model-serving deployment from its logs",
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  rootcause demo\n  rootcause bundle-dir/ --output markdown\n  rootcause sglang.log nvidia-smi.txt journal.txt --script fix.sh\n  pbpaste | rootcause\n\nExit codes: 0 nothing found, 1 findings reported, 2 usage or I/O error."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub analyze: AnalyzeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Analyse files, bundle directories or a paste on stdin (the default).
    Analyze(AnalyzeArgs),
    /// Analyse the built-in example incident (a 55 GB ghost on GPU 0); exits 0.
    Demo(RenderArgs),
    /// Show how each input, or each segment of a paste, was classified.
    Inputs {
        /// Files or bundle directories; `-` or nothing reads stdin.
        paths: Vec<PathBuf>,
        #[command(flatten)]
        hint: HintArg,
    },
    /// List every rule: built-in and loaded with --rules.
    Rules(RulesArgs),
    /// Print a rule's documentation.
    Explain {
        /// The rule id, as `rootcause rules` lists it.
        rule: String,
        #[command(flatten)]
        rules: RulesArgs,
    },
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    /// Also load the TOML rules in DIR (one rule per *.toml file).
    #[arg(long = "rules", value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Files or bundle directories; `-` or nothing (with a pipe) reads stdin.
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub hint: HintArg,
    #[command(flatten)]
    pub render: RenderArgs,
    #[command(flatten)]
    pub rules: RulesArgs,
}

#[derive(Debug, Args)]
pub struct HintArg {
    /// Read every input as FORMAT instead of detecting it, e.g. `journal-cat`
    /// for `journalctl -o cat` output (names as `rootcause inputs` prints them).
    #[arg(long, value_name = "FORMAT", hide_possible_values = true, value_parser = format_names())]
    pub format_hint: Option<Format>,
}

/// `--format-hint` takes the stable format names; a wrong one lists them.
fn format_names() -> impl clap::builder::TypedValueParser<Value = Format> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Format::ALL.map(Format::name))
        .try_map(|name| name.parse::<Format>())
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Report format.
    #[arg(short, long, value_enum, default_value_t = OutputArg::Text)]
    pub output: OutputArg,
    /// Also write the remediation script for the root cause to FILE (dry run unless run with --apply).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// When to colour the text report.
    #[arg(long, value_enum, default_value_t = ColorArg::Auto)]
    pub color: ColorArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputArg {
    Text,
    Markdown,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    Auto,
    Always,
    Never,
}

/// Parses the command line, runs, and maps the outcome to an exit code:
/// 0 nothing found, 1 findings, 2 usage or I/O error.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match crate::run::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rootcause: error: {e}");
            ExitCode::from(2)
        }
    }
}
