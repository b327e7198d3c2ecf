//! Command-line flags (clap derive). Doc comments are the `--help` text.
//! No logic here beyond handing the parsed flags to [`crate::run`].

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use crate::ingest::Format;

#[derive(Debug, Parser)]
#[command(
    name = "rootcause",
    version,
    about = "Find the root cause of a failed GPU model-serving deployment from its logs",
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  rootcause demo                                   the built-in example incident\n  rootcause bundle-dir/                            a folder of logs from one host\n  pbpaste | rootcause                              a paste from a chat or a ticket\n  rootcause sglang.log nvidia-smi.txt journal.txt --script fix.sh\n  rootcause bundle-dir/ -o markdown > postmortem.md\n  rootcause bundle-dir/ -o html > report.html\n  rootcause bundle-dir/ -q                         only the root cause, in one line\n  rootcause bundle.tar -q --textfile /var/lib/prometheus/node-exporter\n  sudo rootcause capture --unit sglang.service -o bundle-dir/\n  rootcause timeline bundle-dir/ --around F1\n  rootcause replay incidents/*\n\nExit codes: 0 nothing found, 1 findings reported, 2 usage or I/O error.\nColour: only on a terminal, never with NO_COLOR set; --color overrides."
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
    #[command(
        after_help = "Examples:\n  rootcause analyze bundle-dir/\n  rootcause analyze sglang.log nvidia-smi.txt journal.txt -v\n  xclip -o | rootcause analyze -q\n  rootcause analyze bundle-dir/ -o html > report.html"
    )]
    Analyze(AnalyzeArgs),
    /// Analyse the built-in example incident (a 55 GB ghost on GPU 0); exits 0.
    #[command(
        after_help = "Examples:\n  rootcause demo\n  rootcause demo -v --color always | less -R\n  rootcause demo -o markdown > postmortem.md\n  rootcause demo -o html > demo.html"
    )]
    Demo(RenderArgs),
    /// Show how each input, or each segment of a paste, was classified, and
    /// which of its lines were prose, prompts, cited by a finding or not
    /// understood (the same counts as the report's).
    #[command(
        after_help = "Examples:\n  rootcause inputs bundle-dir/\n  xclip -o | rootcause inputs\n  rootcause inputs cat.log --format-hint journal-cat"
    )]
    Inputs {
        /// Files or bundle directories; `-` or nothing reads stdin.
        paths: Vec<PathBuf>,
        #[command(flatten)]
        hint: HintArg,
    },
    /// List every rule: built-in and loaded with --rules.
    #[command(
        after_help = "Examples:\n  rootcause rules\n  rootcause rules --rules ./my-rules/\n  rootcause rules --anchors"
    )]
    Rules {
        #[command(flatten)]
        rules: RulesArgs,
        /// Print instead every literal the prefilter searches for, one per
        /// line: the rules' anchors, then the parsers' (docs/performance.md).
        #[arg(long)]
        anchors: bool,
    },
    /// Print a rule's documentation.
    #[command(
        after_help = "Examples:\n  rootcause explain sglang-unbalanced-memory\n  rootcause explain my-rule --rules ./my-rules/"
    )]
    Explain {
        /// The rule id, as `rootcause rules` lists it.
        rule: String,
        #[command(flatten)]
        rules: RulesArgs,
    },
    /// On a live host: run the read-only commands the analysis needs and
    /// write a bundle (a folder, or one tar file). Never changes anything.
    #[command(
        after_help = "Examples:\n  sudo rootcause capture --unit sglang.service -o bundle-dir/\n  sudo rootcause capture --tar incident.tar --redact --since -2h"
    )]
    Capture(CaptureArgs),
    /// Re-analyse recorded bundles and compare with their approved reports
    /// (`expected/`); exit 1 on any difference.
    #[command(
        after_help = "Examples:\n  rootcause replay fixtures/incidents/*\n  rootcause replay incidents/ --junit replay.xml\n  rootcause replay incidents/new-case --bless"
    )]
    Replay(ReplayArgs),
    /// Print one merged, time-ordered timeline across all inputs.
    #[command(
        after_help = "Examples:\n  rootcause timeline bundle-dir/\n  rootcause timeline bundle-dir/ --around F1 --window 90s"
    )]
    Timeline(TimelineArgs),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  rootcause completions bash > ~/.local/share/bash-completion/completions/rootcause\n  rootcause completions zsh > ~/.zfunc/_rootcause\n  rootcause completions fish > ~/.config/fish/completions/rootcause.fish"
    )]
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout.
    #[command(
        after_help = "Examples:\n  rootcause man > rootcause.1 && man ./rootcause.1\n  rootcause man | gzip > /usr/local/share/man/man1/rootcause.1.gz"
    )]
    Man,
}

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// A serving unit to collect the journal and status of (repeatable);
    /// units owning a GPU process are added on their own.
    #[arg(short, long = "unit", value_name = "UNIT")]
    pub units: Vec<String>,
    /// Journal since TIME, in journalctl's syntax (`-2h`, `2026-11-27 09:00`).
    #[arg(
        long,
        value_name = "TIME",
        default_value = "-24h",
        allow_hyphen_values = true
    )]
    pub since: String,
    /// Write the bundle into DIR (created; must be empty).
    #[arg(short = 'o', long = "out", value_name = "DIR", conflicts_with = "tar")]
    pub out: Option<PathBuf>,
    /// Write the bundle as one tar file instead of a folder.
    #[arg(long, value_name = "FILE")]
    pub tar: Option<PathBuf>,
    /// Mask hostnames, IPs, user names, home paths, tokens and API keys,
    /// the same value always with the same mask; the mapping is written
    /// beside the bundle (FILE.redactions.json), never into it.
    #[arg(long)]
    pub redact: bool,
    /// Where to write the redaction mapping instead.
    #[arg(long, value_name = "FILE", requires = "redact")]
    pub redact_map: Option<PathBuf>,
    /// Seconds each command may run before it is killed and recorded as a gap.
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    pub timeout: u64,
    /// Read journal files from DIR (journalctl --directory), e.g. the
    /// /var/log/journal of a failed host's disk.
    #[arg(long, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,
    /// Where the process table lives (`/host/proc` from a container).
    #[arg(long, value_name = "DIR", default_value = "/proc")]
    pub proc: PathBuf,
    /// A line for the manifest: what happened, for whoever reads it later.
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Bundle directories (a folder holding only bundle folders is
    /// searched one level down).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Write the new reports into each bundle's expected/ instead of
    /// comparing.
    #[arg(long, visible_alias = "accept")]
    pub bless: bool,
    /// Also write a JUnit XML report to FILE, for CI systems.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// When to colour the diffs.
    #[arg(long, value_enum, default_value_t = ColorArg::Auto)]
    pub color: ColorArg,
    #[command(flatten)]
    pub rules: RulesArgs,
}

#[derive(Debug, Args)]
pub struct TimelineArgs {
    /// Files or bundle directories; `-` or nothing (with a pipe) reads stdin.
    pub paths: Vec<PathBuf>,
    /// Only the events around a finding's evidence (`F1`, or a rule id).
    #[arg(long, value_name = "FINDING")]
    pub around: Option<String>,
    /// How far around the evidence `--around` reaches: `90s`, `5m`, `1h`.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub window: u64,
    /// When to colour the timeline.
    #[arg(long, value_enum, default_value_t = ColorArg::Auto)]
    pub color: ColorArg,
    #[command(flatten)]
    pub rules: RulesArgs,
}

/// `90`, `90s`, `5m`, `2h` → seconds.
fn parse_duration(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration such as 90s, 5m or 1h"))?;
    match unit {
        "s" => Ok(n),
        "m" => Ok(n * 60),
        "h" => Ok(n * 3600),
        _ => Err(format!("`{text}`: use s, m or h")),
    }
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
    /// Say more: every finding in full, the rule conditions behind each
    /// confidence, competing hypotheses and the inputs.
    #[arg(short, long, conflicts_with = "quiet")]
    pub verbose: bool,
    /// Print only the root cause, in one line (text output).
    #[arg(short, long)]
    pub quiet: bool,
    /// Also write the remediation script for the root cause to FILE (dry run unless run with --apply).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Also write the findings as Prometheus metrics to DIR/rootcause.prom,
    /// atomically, for node_exporter's textfile collector (docs/fleet.md).
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,
    /// When to colour the text report.
    #[arg(long, value_enum, default_value_t = ColorArg::Auto)]
    pub color: ColorArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputArg {
    /// For the terminal: root cause, GPU memory, evidence excerpts, steps.
    Text,
    /// A postmortem skeleton with a Mermaid diagram of the causal chain.
    Markdown,
    /// One self-contained page: GPU chart, timeline lanes, evidence in context.
    Html,
    /// The versioned report (docs/report-schema.md).
    Json,
    /// One JSON object per finding per line (for log pipelines).
    Ndjson,
    /// Prometheus metrics: one series per finding (docs/fleet.md).
    Prometheus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    Auto,
    Always,
    Never,
}

/// The whole command line, its version naming the rule catalog
/// (`rootcause 0.1.0 (rule catalog: 18 rules, 5f0c…)`): what completions
/// and the man page are generated from.
pub fn command() -> clap::Command {
    let version = format!(
        "{} (rule catalog: {})",
        env!("CARGO_PKG_VERSION"),
        crate::rules::catalog_version()
    );
    // clap keeps `&'static str`s; this runs once per process.
    Cli::command().version(&*Box::leak(version.into_boxed_str()))
}

#[cfg(test)]
mod tests {
    use clap::FromArgMatches;

    #[test]
    fn a_relative_since_is_a_value_not_a_flag() {
        // `--since -2h`, as the help and the capture unit write it.
        let matches = super::command()
            .try_get_matches_from([
                "rootcause",
                "capture",
                "--since",
                "-2h",
                "--unit",
                "a.service",
            ])
            .expect("parses");
        let cli = super::Cli::from_arg_matches(&matches).unwrap();
        match cli.command {
            Some(super::Command::Capture(args)) => {
                assert_eq!(args.since, "-2h");
                assert_eq!(args.units, ["a.service"]);
            }
            other => panic!("{other:?}"),
        }
    }
}
