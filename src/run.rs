//! Glue between the flags and the pipeline: decide inputs, colour and
//! outputs, run the analysis, write the results.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use crate::bundle::{self, Input};
use crate::cli::{AnalyzeArgs, Cli, ColorArg, Command, OutputArg, RenderArgs};
use crate::error::Error;
use crate::ingest::Format;
use crate::render::{self, OutputFormat, RenderOptions};
use crate::source::SourceMap;

pub fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Some(Command::Analyze(args)) => analyze(args),
        None => analyze(cli.analyze),
        // The demo shows what a report looks like; it succeeds whenever it
        // could print one, so `cargo run -- demo` does not end in an error.
        Some(Command::Demo(render)) => {
            report(crate::demo::sources(), None, &render).map(|_| ExitCode::SUCCESS)
        }
        Some(Command::Inputs { paths, hint }) => inputs(&paths, hint.format_hint),
    }
}

fn analyze(args: AnalyzeArgs) -> Result<ExitCode, Error> {
    let sources = read_inputs(&args.paths)?;
    report(sources, args.hint.format_hint, &args.render)
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

fn report(sources: SourceMap, hint: Option<Format>, args: &RenderArgs) -> Result<ExitCode, Error> {
    let analysis = crate::analyze_as(sources, hint);
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
