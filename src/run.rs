//! Glue between the flags and the pipeline: decide inputs, colour and
//! outputs, run the analysis, write the results.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use crate::bundle::{self, Input};
use crate::cli::{AnalyzeArgs, Cli, ColorArg, Command, OutputArg, RenderArgs, RulesArgs};
use crate::error::Error;
use crate::ingest::Format;
use crate::render::{self, OutputFormat, RenderOptions};
use crate::rules::{self, Rule, UserRule};
use crate::source::SourceMap;

pub fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Some(Command::Analyze(args)) => analyze(args),
        None => analyze(cli.analyze),
        // The demo shows what a report looks like; it succeeds whenever it
        // could print one, so `cargo run -- demo` does not end in an error.
        Some(Command::Demo(render)) => {
            report(crate::demo::sources(), None, &render, &[]).map(|_| ExitCode::SUCCESS)
        }
        Some(Command::Inputs { paths, hint }) => inputs(&paths, hint.format_hint),
        Some(Command::Rules(args)) => list_rules(&load_rules(&args)?),
        Some(Command::Explain { rule, rules }) => explain(&rule, &load_rules(&rules)?),
    }
}

fn analyze(args: AnalyzeArgs) -> Result<ExitCode, Error> {
    let user = load_rules(&args.rules)?;
    let sources = read_inputs(&args.paths)?;
    report(sources, args.hint.format_hint, &args.render, &user)
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
            .map_err(Error::RuleFile)?;
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

fn read_inputs(paths: &[std::path::PathBuf]) -> Result<SourceMap, Error> {
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
    let (sources, _manifest) = bundle::load(&inputs, &mut io::stdin().lock())?;
    Ok(sources)
}

fn report(
    sources: SourceMap,
    hint: Option<Format>,
    args: &RenderArgs,
    user: &[UserRule],
) -> Result<ExitCode, Error> {
    let rules = catalog(user);
    let options = crate::Options {
        format_hint: hint,
        rules: &rules,
    };
    let analysis = crate::analyze_with(sources, &options);
    let report = analysis.report();
    let format = match args.output {
        OutputArg::Text => OutputFormat::Text,
        OutputArg::Markdown => OutputFormat::Markdown,
        OutputArg::Json => OutputFormat::Json,
    };
    let color = match args.color {
        ColorArg::Always => true,
        ColorArg::Never => false,
        ColorArg::Auto => {
            io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    };
    let mut stdout = io::stdout().lock();
    write_stdout(render::render(
        &report,
        format,
        RenderOptions { color },
        &mut stdout,
    ))?;
    if let Some(path) = &args.script {
        std::fs::write(path, render::script(&report)).map_err(|source| Error::Output {
            path: path.display().to_string(),
            source,
        })?;
    }
    Ok(if report.findings().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn inputs(paths: &[std::path::PathBuf], hint: Option<Format>) -> Result<ExitCode, Error> {
    let sources = read_inputs(paths)?;
    let mut text = String::new();
    for (id, source) in sources.iter() {
        for s in crate::ingest::segment_as(id, source, hint) {
            text.push_str(&format!(
                "{}:{}-{}: {} ({})\n",
                source.name,
                s.first_line,
                s.last_line,
                s.format.name(),
                s.why
            ));
        }
    }
    write_stdout(io::stdout().lock().write_all(text.as_bytes()))?;
    Ok(ExitCode::SUCCESS)
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
