//! The prefilter changes nothing anyone sees. Every fixture is analysed
//! three ways: from memory and read in full (what the snapshots approve),
//! streamed from disk and read in full, and streamed with the prefilter
//! (lines without an anchor only skimmed, as `rootcause analyze` does). The
//! reports must be byte-identical, the typed facts the same (the journal
//! entries and line times aside, which the prefilter keeps only as needed),
//! and no cited line may be missing from what the streamed pass kept.

use std::path::{Path, PathBuf};

use rootcause::bundle::{self, Input};
use rootcause::context::Context;
use rootcause::render::{self, OutputFormat, RenderOptions};
use rootcause::source::{Source, SourceMap};

use crate::support::{Scratch, fixtures};

/// Every rendering of one analysis.
fn reports(analysis: &rootcause::Analysis) -> Vec<(&'static str, String)> {
    let report = analysis.report();
    let mut out = Vec::new();
    for (name, format) in [
        ("text", OutputFormat::Text),
        ("markdown", OutputFormat::Markdown),
        ("json", OutputFormat::Json),
        ("ndjson", OutputFormat::Ndjson),
    ] {
        let mut bytes = Vec::new();
        render::render(&report, format, RenderOptions::default(), &mut bytes).expect("render");
        out.push((name, String::from_utf8(bytes).expect("utf-8 report")));
    }
    out.push(("script", render::script(&report)));
    out
}

fn analyse(sources: SourceMap, context: Context, prefilter: bool) -> rootcause::Analysis {
    let options = rootcause::Options {
        context,
        prefilter,
        ..rootcause::Options::default()
    };
    rootcause::analyze_with(sources, &options)
}

fn load(path: &Path) -> (SourceMap, Context) {
    let (sources, manifest) =
        bundle::load(&[Input::Path(path.to_owned())], &mut std::io::empty()).expect("loads");
    let context = manifest
        .as_ref()
        .map(Context::from_manifest)
        .unwrap_or_default();
    (sources, context)
}

/// The same inputs, decoded into memory.
fn in_memory(streamed: &SourceMap) -> SourceMap {
    let mut sources = SourceMap::new();
    for (_, s) in streamed.iter() {
        let text: String = (1..=s.line_count())
            .map(|n| format!("{}\n", s.raw_line(n)))
            .collect();
        sources.add(Source::new(s.name.clone(), text.as_bytes()));
    }
    sources
}

/// `Debug` of every typed fact but the journal's and the line times.
fn facts(a: &rootcause::Analysis) -> Vec<String> {
    let f = &a.incident.facts;
    vec![
        format!("{:?}", f.smi_headers),
        format!("{:?}", f.gpus),
        format!("{:?}", f.gpu_processes),
        format!("{:?}", f.process_listings),
        format!("{:?}", f.unit_statuses),
        format!("{:?}", f.server_events),
        format!("{:?}", f.ps),
        format!("{:?}", f.messages),
        format!("{:?}", f.gpu_health),
        format!("{:?}", f.kernel_events),
        format!("{:?}", f.unit_properties),
        format!("{:?}", f.proc_cgroups),
        format!("{:?}", f.env_reports),
        format!("{:?}", a.incident.units),
        format!("{:?}", a.incident.owners),
        format!("{:?}", a.incident.cmdlines),
        format!("{:?}", a.inputs),
        format!("{:?}", a.diagnosis.findings),
    ]
}

fn check(label: &str, path: &Path) {
    let (streamed, context) = load(path);
    let memory = analyse(in_memory(&streamed), context.clone(), false);
    let full = analyse(streamed, context.clone(), false);
    let (streamed, _) = load(path);
    let skimmed = analyse(streamed, context, true);

    let want = reports(&memory);
    for (got, how) in [
        (reports(&full), "streamed"),
        (reports(&skimmed), "prefiltered"),
    ] {
        for ((name, want), (_, got)) in want.iter().zip(&got) {
            assert!(
                want == got,
                "{label}: the {how} {name} report differs:\n{}",
                similar::TextDiff::from_lines(want, got).unified_diff()
            );
        }
    }
    assert_eq!(facts(&full), facts(&skimmed), "{label}: facts differ");
    // The prefilter keeps journal entries, never invents one.
    let all = &full.incident.facts.journal;
    let mut rest = all.iter();
    for e in &skimmed.incident.facts.journal {
        assert!(
            rest.any(|f| f == e),
            "{label}: journal entry {e:?} is not one of the full reading's, in order"
        );
    }
    for analysis in [&full, &skimmed] {
        for (_, s) in analysis.sources.iter() {
            assert_eq!(s.rereads(), 0, "{label}: {} had lines read again", s.name);
        }
    }
}

/// Every bundle and loose input of the fixtures.
fn inputs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for family in ["incidents", "rules", "formats", "journal", "hostile"] {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(fixtures().join(family))
            .expect("fixture folder")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_none_or(|x| x != "md"))
            .collect();
        entries.sort();
        out.extend(entries);
    }
    out
}

#[test]
fn every_fixture_reads_the_same_with_the_prefilter() {
    let inputs = inputs();
    assert!(inputs.len() > 40, "fixtures found: {}", inputs.len());
    for path in &inputs {
        let label = path
            .strip_prefix(fixtures())
            .unwrap_or(path)
            .display()
            .to_string();
        check(&label, path);
    }
}

/// All the fixtures' text in one input: every segment switch, skimmed
/// lines next to every format, writers in the middle of tracebacks.
#[test]
fn every_fixture_in_one_input_reads_the_same_with_the_prefilter() {
    let scratch = Scratch::new("prefilter");
    let mut all = Vec::new();
    for path in inputs() {
        let (sources, _) = load(&path);
        for (_, s) in sources.iter() {
            for n in 1..=s.line_count() {
                all.extend_from_slice(s.raw_line(n).as_bytes());
                all.push(b'\n');
            }
        }
    }
    let file = scratch.path.join("everything.txt");
    std::fs::write(&file, &all).expect("write");
    check("every fixture in one input", &file);
}
