//! The binary's entry point ([`main`]) and the glue between the flags and
//! the pipeline: decide inputs, colour and outputs, run the analysis, write
//! the results.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use clap::FromArgMatches;

use crate::bundle::{self, Input};
use crate::cli::{
    AnalyzeArgs, CaptureArgs, Cli, ColorArg, Command, OutputArg, RenderArgs, ReplayArgs, RulesArgs,
    TimelineArgs,
};
use crate::context::Context;
use crate::error::Error;
use crate::ingest::Format;
use crate::progress::Progress;
use crate::render::{self, OutputFormat, RenderOptions, Verbosity};
use crate::rules::{self, Rule, UserRule};
use crate::source::SourceMap;

/// Parses the command line, runs, and maps the outcome to an exit code:
/// 0 nothing found, 1 findings, 2 usage or I/O error.
pub fn main() -> ExitCode {
    let cli = match Cli::from_arg_matches(&crate::cli::command().get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rootcause: error: {e}");
            ExitCode::from(2)
        }
    }
}

pub fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Some(Command::Analyze(args)) => analyze(args),
        None => analyze(cli.analyze),
        // The demo shows what a report looks like; it succeeds whenever it
        // could print one, so `cargo run -- demo` does not end in an error.
        Some(Command::Demo(render)) => report(
            crate::demo::sources(),
            None,
            crate::demo::context(),
            &render,
            &[],
            Progress::start(0),
            &[],
        )
        .map(|_| ExitCode::SUCCESS),
        Some(Command::Inputs { paths, hint }) => inputs(&paths, hint.format_hint),
        Some(Command::Rules { rules, anchors }) => {
            let user = load_rules(&rules)?;
            if anchors {
                list_anchors(&user)
            } else {
                list_rules(&user)
            }
        }
        Some(Command::Explain { rule, rules }) => explain(&rule, &load_rules(&rules)?),
        Some(Command::Capture(args)) => capture(args),
        Some(Command::Replay(args)) => replay(args),
        Some(Command::Timeline(args)) => timeline(args),
        Some(Command::Completions { shell }) => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut crate::cli::command(), "rootcause", &mut out);
            write_stdout(io::stdout().lock().write_all(&out))?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Man) => {
            let mut out = Vec::new();
            clap_mangen::Man::new(crate::cli::command())
                .render(&mut out)
                .map_err(|source| Error::Output {
                    path: "stdout".to_owned(),
                    source,
                })?;
            write_stdout(io::stdout().lock().write_all(&out))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn analyze(args: AnalyzeArgs) -> Result<ExitCode, Error> {
    let user = load_rules(&args.rules)?;
    let progress = Progress::start(crate::progress::input_bytes(&args.paths));
    let (sources, context) = read_inputs(&args.paths)?;
    let dirs: Vec<String> = args
        .paths
        .iter()
        .filter(|p| p.is_dir())
        .map(|p| p.display().to_string())
        .collect();
    report(
        sources,
        args.hint.format_hint,
        context,
        &args.render,
        &user,
        progress,
        &dirs,
    )
}

/// A folder in which nothing is a format rootcause reads is a mistake (the
/// wrong folder, a capture that failed), not a healthy incident: say what
/// was expected instead of reporting that nothing was found.
fn recognisable(dirs: &[String], inputs: &[crate::ingest::InputSummary]) -> Result<(), Error> {
    if dirs.is_empty() || inputs.iter().any(|i| i.segment.format != Format::Unknown) {
        return Ok(());
    }
    let files: std::collections::BTreeSet<_> = inputs.iter().map(|i| i.segment.source).collect();
    Err(Error::NothingRecognised {
        path: dirs.join(", "),
        files: files.len(),
    })
}

fn capture(args: CaptureArgs) -> Result<ExitCode, Error> {
    let out = match (args.out, args.tar) {
        (_, Some(tar)) => crate::capture::Destination::Tar(tar),
        (Some(dir), None) => crate::capture::Destination::Dir(dir),
        (None, None) => crate::capture::Destination::Auto,
    };
    let options = crate::capture::Options {
        units: args.units,
        since: args.since,
        destination: out,
        redact: args.redact,
        redact_map: args.redact_map,
        timeout: std::time::Duration::from_secs(args.timeout.max(1)),
        journal_dir: args.journal_dir,
        proc_root: args.proc,
        description: args.description,
    };
    let summary = crate::capture::capture(&options)?;
    let mut err = io::stderr().lock();
    let _ = err.write_all(summary.as_bytes());
    Ok(ExitCode::SUCCESS)
}

fn replay(args: ReplayArgs) -> Result<ExitCode, Error> {
    let user = load_rules(&args.rules)?;
    let color = use_color(args.color);
    let cases = crate::replay::cases(&args.dirs);
    let outcome = crate::replay::run(&cases, &catalog(&user), args.bless);
    let mut stdout = io::stdout().lock();
    write_stdout(stdout.write_all(crate::replay::summary(&outcome, color).as_bytes()))?;
    if let Some(path) = &args.junit {
        std::fs::write(path, crate::replay::junit(&outcome)).map_err(|source| Error::Output {
            path: path.display().to_string(),
            source,
        })?;
    }
    Ok(if outcome.failed() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn timeline(args: TimelineArgs) -> Result<ExitCode, Error> {
    let user = load_rules(&args.rules)?;
    let (sources, context) = read_inputs(&args.paths)?;
    let analysis = crate::analyze_in(sources, context, &catalog(&user));
    // A read that stopped early is a gap in the report; only nothing read
    // at all is an error.
    if let Some((input, error)) = analysis.sources.unreadable() {
        return Err(Error::Io {
            path: input.to_owned(),
            source: io::Error::other(error),
        });
    }
    let all: Vec<&crate::timeline::Entry> = analysis.timeline.entries.iter().collect();
    let entries = match &args.around {
        None => all,
        Some(wanted) => {
            let findings = &analysis.diagnosis.findings;
            // A finding id, or the first finding of a rule.
            let id = findings
                .iter()
                .find(|f| f.id == *wanted || f.rule == wanted.as_str())
                .map(|f| f.id.clone());
            let zoomed = id.as_deref().and_then(|id| {
                analysis
                    .timeline
                    .around(id, i64::try_from(args.window).unwrap_or(i64::MAX))
            });
            match zoomed {
                Some(entries) => entries,
                None => {
                    let ids: Vec<&str> = findings
                        .iter()
                        .map(|f| f.id.as_str())
                        .chain(findings.iter().map(|f| f.rule))
                        .collect();
                    return Err(Error::UnknownFinding {
                        id: wanted.clone(),
                        hint: rules::did_you_mean(wanted, &ids),
                    });
                }
            }
        }
    };
    let text = render::timeline_text(
        &analysis.timeline,
        &entries,
        &analysis.sources,
        analysis.context.host.as_deref(),
        RenderOptions {
            color: use_color(args.color),
            ..RenderOptions::default()
        },
    );
    write_stdout(io::stdout().lock().write_all(text.as_bytes()))?;
    Ok(ExitCode::SUCCESS)
}

/// Reads every `*.toml` in the `--rules` directory, in name order.
fn load_rules(args: &RulesArgs) -> Result<Vec<UserRule>, Error> {
    let Some(dir) = &args.dir else {
        return Ok(Vec::new());
    };
    let io = |source| Error::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut taken: Vec<&str> = rules::RULES.iter().map(|r| r.meta().id).collect();
    let mut loaded: Vec<UserRule> = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        let rule = rules::parse_user_rule(&path.display().to_string(), &text, &taken)
            .map_err(|e| Error::RuleFile(e.to_string()))?;
        taken.push(rule.meta().id);
        loaded.push(rule);
    }
    Ok(loaded)
}

fn catalog(user: &[UserRule]) -> Vec<&dyn Rule> {
    rules::RULES
        .iter()
        .copied()
        .chain(user.iter().map(|r| r as &dyn Rule))
        .collect()
}

fn list_rules(user: &[UserRule]) -> Result<ExitCode, Error> {
    let mut text = String::new();
    for r in rules::RULES {
        let m = r.meta();
        text.push_str(&format!(
            "{:<34} {:<9} {:<34} {}\n",
            m.id,
            m.severity.name(),
            m.category.name(),
            m.summary
        ));
    }
    for r in user {
        let m = r.meta();
        text.push_str(&format!(
            "{:<34} {:<9} {:<34} {} (from {})\n",
            m.id,
            m.severity.name(),
            m.category.name(),
            m.summary,
            r.file
        ));
    }
    write_stdout(io::stdout().lock().write_all(text.as_bytes()))?;
    Ok(ExitCode::SUCCESS)
}

/// Every literal the prefilter searches for, once each: what
/// `rg -F -f` needs to scan for the same lines (bench/run.sh).
fn list_anchors(user: &[UserRule]) -> Result<ExitCode, Error> {
    let rules = rules::anchors(&catalog(user));
    let mut seen = std::collections::BTreeSet::new();
    let mut text = String::new();
    let literals = rules.literals().iter().map(String::as_str);
    for literal in literals.chain(crate::ingest::FACT_ANCHORS.iter().copied()) {
        if seen.insert(literal) {
            text.push_str(literal);
            text.push('\n');
        }
    }
    write_stdout(io::stdout().lock().write_all(text.as_bytes()))?;
    Ok(ExitCode::SUCCESS)
}

fn explain(id: &str, user: &[UserRule]) -> Result<ExitCode, Error> {
    let all = catalog(user);
    let Some(rule) = all.iter().find(|r| r.meta().id == id) else {
        let ids: Vec<&str> = all.iter().map(|r| r.meta().id).collect();
        return Err(Error::UnknownRule {
            id: id.to_owned(),
            hint: rules::did_you_mean(id, &ids),
        });
    };
    let m = rule.meta();
    let text = format!(
        "# {}\n\nSeverity: {}. Category: {}.\n{}.\n{}",
        m.id,
        m.severity.name(),
        m.category.name(),
        m.summary,
        m.doc
    );
    write_stdout(io::stdout().lock().write_all(text.as_bytes()))?;
    Ok(ExitCode::SUCCESS)
}

/// Reads the inputs and what their bundle's manifest says.
fn read_inputs(paths: &[std::path::PathBuf]) -> Result<(SourceMap, Context), Error> {
    let (sources, manifest) = bundle::open(&input_list(paths)?, Box::new(io::stdin()))?;
    let mut context = manifest
        .as_ref()
        .map(Context::from_manifest)
        .unwrap_or_default();
    // Only a name, never a path: outputs must not depend on where it lies.
    if let [only] = paths {
        context.bundle = only
            .file_name()
            .filter(|_| only.as_os_str() != "-")
            .map(|n| n.to_string_lossy().into_owned());
    }
    Ok((sources, context))
}

/// The inputs the paths name; none means stdin, which must not be a terminal.
fn input_list(paths: &[std::path::PathBuf]) -> Result<Vec<Input>, Error> {
    let inputs: Vec<Input> = if paths.is_empty() {
        if io::stdin().is_terminal() {
            return Err(Error::NoInput);
        }
        vec![Input::Stdin]
    } else {
        paths
            .iter()
            .map(|p| {
                if p.as_os_str() == "-" {
                    Input::Stdin
                } else {
                    Input::Path(p.clone())
                }
            })
            .collect()
    };
    Ok(inputs)
}

/// `--color auto` decides as clap does for its own help (anstream): never
/// with `NO_COLOR` set or `CLICOLOR=0`, always with `CLICOLOR_FORCE`, else
/// only on a terminal that is not `TERM=dumb` (or any terminal under `CI`).
fn use_color(arg: ColorArg) -> bool {
    match arg {
        ColorArg::Always => true,
        ColorArg::Never => false,
        ColorArg::Auto => {
            anstream::AutoStream::choice(&io::stdout()) != anstream::ColorChoice::Never
        }
    }
}

/// Columns of the terminal the report goes to: the terminal's own width,
/// else `COLUMNS`, else [`render::DEFAULT_WIDTH`].
fn width() -> usize {
    let from_env = || {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok())
    };
    terminal_size::terminal_size_of(io::stdout())
        .map(|(terminal_size::Width(columns), _)| usize::from(columns))
        .filter(|&columns| columns > 0)
        .or_else(from_env)
        .unwrap_or(render::DEFAULT_WIDTH)
        .clamp(40, 400)
}

fn report(
    sources: SourceMap,
    hint: Option<Format>,
    context: Context,
    args: &RenderArgs,
    user: &[UserRule],
    progress: Progress,
    dirs: &[String],
) -> Result<ExitCode, Error> {
    let rules = catalog(user);
    let bytes = |read, total| progress.bytes(read, total);
    let options = crate::Options {
        format_hint: hint,
        rules: &rules,
        context,
        prefilter: true,
        progress: Some(&bytes),
    };
    let analysis = crate::analyze_observed(sources, &options, &|stage| progress.stage(stage));
    progress.writing();
    if hint.is_none() {
        recognisable(dirs, &analysis.inputs)?;
    }
    // A read that stopped early is a gap in the report; only nothing read
    // at all is an error.
    if let Some((input, error)) = analysis.sources.unreadable() {
        return Err(Error::Io {
            path: input.to_owned(),
            source: io::Error::other(error),
        });
    }
    let report = analysis.report();
    let format = match args.output {
        OutputArg::Text => OutputFormat::Text,
        OutputArg::Markdown => OutputFormat::Markdown,
        OutputArg::Html => OutputFormat::Html,
        OutputArg::Json => OutputFormat::Json,
        OutputArg::Ndjson => OutputFormat::Ndjson,
        OutputArg::Prometheus => OutputFormat::Prometheus,
    };
    let options = RenderOptions {
        color: use_color(args.color),
        verbosity: if args.quiet {
            Verbosity::Quiet
        } else if args.verbose {
            Verbosity::Verbose
        } else {
            Verbosity::Normal
        },
        width: width(),
    };
    // Written as it is rendered, not collected first: a large input's
    // report (megabytes of repeated-line templates in JSON) would otherwise
    // sit in memory twice at the run's peak, beside the analysis.
    progress.finish();
    let mut stdout = io::BufWriter::new(io::stdout().lock());
    write_stdout(
        render::render(&report, format, options, &mut stdout).and_then(|()| stdout.flush()),
    )?;
    if let Some(path) = &args.script {
        std::fs::write(path, render::script(&report)).map_err(|source| Error::Output {
            path: path.display().to_string(),
            source,
        })?;
    }
    if let Some(dir) = &args.textfile {
        write_textfile(dir, &render::prometheus(&report))?;
    }
    Ok(if report.findings().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Writes `DIR/rootcause.prom` as the textfile collector needs it: whole or
/// not at all. The text goes to a hidden temporary file in the same folder
/// (same file system, and not `*.prom`, so the collector never reads it
/// half written), flushed to disk, then renamed over the old file.
fn write_textfile(dir: &std::path::Path, text: &str) -> Result<(), Error> {
    let path = dir.join(render::TEXTFILE_NAME);
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        render::TEXTFILE_NAME,
        std::process::id()
    ));
    let error = |source| Error::Output {
        path: path.display().to_string(),
        source,
    };
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(error(e));
    }
    Ok(())
}

/// `rootcause inputs`: each segment with its format, line range, how sure
/// detection is (the share of its lines the format's parser read) and why;
/// under it, the lines that were prose, shell prompts, not understood, or
/// understood only by the rule of a finding that cites them, cut to the
/// terminal's width. The inputs are read and diagnosed as `analyze` reads
/// them, so both count the same lines the same way.
fn inputs(paths: &[std::path::PathBuf], hint: Option<Format>) -> Result<ExitCode, Error> {
    // Stdin read whole, not streamed: the line counts below read it again.
    let (sources, manifest) = bundle::load(&input_list(paths)?, &mut io::stdin())?;
    let context = manifest
        .as_ref()
        .map(Context::from_manifest)
        .unwrap_or_default();
    let rules = catalog(&[]);
    let options = crate::Options {
        format_hint: hint,
        rules: &rules,
        context,
        prefilter: true,
        progress: None,
    };
    let analysis = crate::analyze_with(sources, &options);
    let text = inputs_text(&analysis.sources, &analysis.inputs, width());
    write_stdout(io::stdout().lock().write_all(text.as_bytes()))?;
    Ok(ExitCode::SUCCESS)
}

fn inputs_text(
    sources: &SourceMap,
    inputs: &[crate::ingest::InputSummary],
    width: usize,
) -> String {
    let mut text = String::new();
    for input in inputs {
        let s = &input.segment;
        let source = sources.get(s.source);
        let nonblank = (s.first_line..=s.last_line)
            .filter(|&l| !source.raw_line(l).trim().is_empty())
            .count() as u32;
        let confidence = if nonblank == 0 {
            1.0
        } else {
            f64::from(nonblank.saturating_sub(input.unrecognized)) / f64::from(nonblank)
        };
        let cited = input.cited.len() as u32;
        let mut others = String::new();
        if cited > 0 {
            others.push_str(&format!(", {cited} cited by a finding"));
        }
        if input.prose > 0 {
            others.push_str(&format!(", {} prose", input.prose));
        }
        if input.prompts > 0 {
            others.push_str(&format!(
                ", {} shell prompt{}",
                input.prompts,
                if input.prompts == 1 { "" } else { "s" }
            ));
        }
        text.push_str(&format!(
            "{}:{}-{}: {} (confidence {:.2}, {} of {} lines unrecognised{others}; {})\n",
            render::clean(&source.name),
            s.first_line,
            s.last_line,
            s.format.name(),
            confidence,
            input.unrecognized,
            nonblank,
            s.why
        ));
        let kinds: Vec<String> = input
            .listed
            .iter()
            .map(|listed| match input.cited_by(listed.line) {
                Some(c) if listed.kind == crate::ingest::LineKind::Unrecognized => {
                    format!("cited ({} {})", c.finding, c.rule)
                }
                _ => match listed.family {
                    Some(family) => format!("{} ({family})", listed.kind.name()),
                    None => listed.kind.name().to_owned(),
                },
            })
            .collect();
        let column = kinds.iter().map(|k| k.chars().count()).fold(12, usize::max);
        for (listed, kind) in input.listed.iter().zip(&kinds) {
            let head = format!("  {:>6}  {kind:<column$}  ", listed.line);
            let room = width.saturating_sub(head.chars().count()).max(10);
            let line = render::clean(&listed.text);
            let mut cut: String = line.chars().take(room).collect();
            if line.chars().count() > room {
                cut.pop();
                cut.push('…');
            }
            text.push_str(&head);
            text.push_str(cut.trim_end());
            text.push('\n');
        }
        let shown = input.listed.len() as u32;
        let all = input.unrecognized + cited + input.prose + input.prompts;
        if all > shown && shown > 0 {
            text.push_str(&format!("  … and {} more\n", all - shown));
        }
    }
    text
}

/// A closed pipe (`rootcause … | head`) is not an error.
fn write_stdout(result: io::Result<()>) -> Result<(), Error> {
    match result {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Error::Output {
            path: "stdout".to_owned(),
            source: e,
        }),
        _ => Ok(()),
    }
}
