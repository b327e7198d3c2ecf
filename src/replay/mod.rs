//! `rootcause replay`: every recorded bundle with an `expected/` folder (its
//! approved reports) is a regression case. Each is re-analysed in-process,
//! its reports are rendered again and compared with the approved ones;
//! `--bless` writes the new ones instead. Reports are a pure function of the
//! bundle, so a case never flaps.
//!
//! This module reads and writes the `expected/` files itself: they are the
//! case's verdict, not inputs of the analysis (`bundle.rs` skips them).

mod diff;
mod junit;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::bundle::{self, Input};
use crate::context::Context;
use crate::render::{self, OutputFormat, RenderOptions};
use crate::rules::Rule;

pub use junit::junit;

/// The approved reports a case may hold, and how each is rendered. `--bless`
/// always writes the first two and refreshes the others where present.
const REPORTS: [(&str, Rendering); 4] = [
    ("report.json", Rendering::Format(OutputFormat::Json)),
    ("report.md", Rendering::Format(OutputFormat::Markdown)),
    ("report.txt", Rendering::Format(OutputFormat::Text)),
    ("fix.sh", Rendering::Script),
];
const ALWAYS_BLESSED: usize = 2;

#[derive(Debug, Clone, Copy)]
enum Rendering {
    Format(OutputFormat),
    Script,
}

/// One bundle to replay, named as the user gave it (never made absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub name: String,
    pub dir: PathBuf,
}

/// One approved report that no longer matches.
#[derive(Debug, Clone, PartialEq)]
pub struct FileDiff {
    pub file: String,
    /// Unified diff, expected → actual.
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Passed,
    Failed(Vec<FileDiff>),
    /// `--bless` wrote these files (new or changed).
    Blessed(Vec<String>),
    /// Not a regression case, and why (no `expected/` folder, not a folder).
    Skipped(String),
    /// The bundle could not be read, or `expected/` written.
    Error(String),
}

#[derive(Debug, Clone)]
pub struct CaseResult {
    pub case: Case,
    pub verdict: Verdict,
    pub duration: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub results: Vec<CaseResult>,
    pub duration: Duration,
}

impl Outcome {
    pub fn passed(&self) -> usize {
        self.count(|v| matches!(v, Verdict::Passed | Verdict::Blessed(_)))
    }
    pub fn failed(&self) -> usize {
        self.count(|v| matches!(v, Verdict::Failed(_) | Verdict::Error(_)))
    }
    pub fn skipped(&self) -> usize {
        self.count(|v| matches!(v, Verdict::Skipped(_)))
    }
    fn count(&self, f: impl Fn(&Verdict) -> bool) -> usize {
        self.results.iter().filter(|r| f(&r.verdict)).count()
    }
}

/// The cases named by `dirs`. A folder that holds no files, only folders,
/// is a collection of bundles: its sub-folders are the cases.
pub fn cases(dirs: &[PathBuf]) -> Vec<Case> {
    let mut out = Vec::new();
    for dir in dirs {
        match collection(dir) {
            Some(mut subs) => {
                subs.sort();
                out.extend(subs.into_iter().map(|d| case(&d)));
            }
            None => out.push(case(dir)),
        }
    }
    out
}

fn case(dir: &Path) -> Case {
    Case {
        name: dir
            .to_string_lossy()
            .trim_end_matches(['/', '\\'])
            .replace('\\', "/"),
        dir: dir.to_owned(),
    }
}

fn collection(dir: &Path) -> Option<Vec<PathBuf>> {
    if dir.join("expected").is_dir() {
        return None;
    }
    let mut subs = Vec::new();
    for entry in fs::read_dir(dir).ok()? {
        let path = entry.ok()?.path();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        if !path.is_dir() {
            return None;
        }
        subs.push(path);
    }
    (!subs.is_empty()).then_some(subs)
}

/// Replays every case, several at a time, each in-process; results come back
/// in the order of `cases`.
pub fn run(cases: &[Case], catalog: &[&dyn Rule], bless: bool) -> Outcome {
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<CaseResult>>> = Mutex::new(vec![None; cases.len()]);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(cases.len())
        .max(1);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(i) else { break };
                    let started = Instant::now();
                    let verdict = replay_one(&case.dir, catalog, bless);
                    let result = CaseResult {
                        case: case.clone(),
                        verdict,
                        duration: started.elapsed(),
                    };
                    if let Ok(mut all) = results.lock() {
                        all[i] = Some(result);
                    }
                }
            });
        }
    });
    let results = results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect();
    Outcome {
        results,
        duration: start.elapsed(),
    }
}

fn replay_one(dir: &Path, catalog: &[&dyn Rule], bless: bool) -> Verdict {
    if !dir.is_dir() {
        let why = if dir.exists() {
            "not a bundle folder"
        } else {
            "no such folder"
        };
        return Verdict::Skipped(why.to_owned());
    }
    let expected = dir.join("expected");
    if !bless && !expected.is_dir() {
        return Verdict::Skipped(
            "no expected/ folder (`rootcause replay --bless` writes one)".to_owned(),
        );
    }
    let (sources, manifest) =
        match bundle::load(&[Input::Path(dir.to_owned())], &mut std::io::empty()) {
            Ok(loaded) => loaded,
            Err(e) => return Verdict::Error(e.to_string()),
        };
    let context = manifest
        .as_ref()
        .map(Context::from_manifest)
        .unwrap_or_default();
    let options = crate::Options {
        rules: catalog,
        context,
        prefilter: true,
        ..crate::Options::default()
    };
    let analysis = crate::analyze_with(sources, &options);
    if let Some((input, error)) = analysis.sources.read_error() {
        return Verdict::Error(format!("cannot read {input}: {error}"));
    }
    let report = analysis.report();
    let render = |how: Rendering| match how {
        Rendering::Format(format) => {
            let mut out = Vec::new();
            let _ = render::render(&report, format, RenderOptions::default(), &mut out);
            String::from_utf8_lossy(&out).into_owned()
        }
        Rendering::Script => render::script(&report),
    };
    if bless {
        return bless_case(&expected, render);
    }
    let mut diffs = Vec::new();
    for (file, how) in REPORTS {
        let Ok(approved) = fs::read_to_string(expected.join(file)) else {
            continue;
        };
        if let Some(d) = diff::compare(file, &approved, &render(how)) {
            diffs.push(FileDiff {
                file: file.to_owned(),
                diff: d,
            });
        }
    }
    if diffs.is_empty() {
        Verdict::Passed
    } else {
        Verdict::Failed(diffs)
    }
}

fn bless_case(expected: &Path, render: impl Fn(Rendering) -> String) -> Verdict {
    if let Err(e) = fs::create_dir_all(expected) {
        return Verdict::Error(format!("cannot create {}: {e}", expected.display()));
    }
    let mut written = Vec::new();
    for (i, (file, how)) in REPORTS.into_iter().enumerate() {
        let path = expected.join(file);
        let approved = fs::read_to_string(&path).ok();
        if approved.is_none() && i >= ALWAYS_BLESSED {
            continue;
        }
        let actual = render(how);
        let same = approved
            .as_deref()
            .is_some_and(|a| diff::compare(file, a, &actual).is_none());
        if same {
            continue;
        }
        if let Err(e) = fs::write(&path, actual) {
            return Verdict::Error(format!("cannot write {}: {e}", path.display()));
        }
        written.push(format!("expected/{file}"));
    }
    if written.is_empty() {
        Verdict::Passed
    } else {
        Verdict::Blessed(written)
    }
}

/// What `rootcause replay` prints: a line per case, the diff of each
/// failure, and last `N passed, M failed`.
pub fn summary(outcome: &Outcome, color: bool) -> String {
    let paint = |code: &str, s: &str| {
        if color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    };
    let mut out = String::new();
    for r in &outcome.results {
        let name = &r.case.name;
        match &r.verdict {
            Verdict::Passed => out.push_str(&format!("{} {name}\n", paint("32", "ok     "))),
            Verdict::Blessed(files) => out.push_str(&format!(
                "{} {name}: wrote {}\n",
                paint("33", "blessed"),
                files.join(", ")
            )),
            Verdict::Skipped(why) => {
                out.push_str(&format!("{} {name}: {why}\n", paint("2", "skipped")))
            }
            Verdict::Error(e) => {
                out.push_str(&format!("{} {name}: {e}\n", paint("1;31", "ERROR  ")))
            }
            Verdict::Failed(diffs) => {
                let files: Vec<&str> = diffs.iter().map(|d| d.file.as_str()).collect();
                out.push_str(&format!(
                    "{} {name}: {} differ{} from the approved report (`--bless` accepts the new one)\n",
                    paint("1;31", "FAILED "),
                    files.join(", "),
                    if files.len() == 1 { "s" } else { "" }
                ));
                for d in diffs {
                    out.push_str(&diff::paint(&d.diff, color));
                }
            }
        }
    }
    out.push_str(&format!(
        "{} passed, {} failed\n",
        outcome.passed(),
        outcome.failed()
    ));
    out
}
