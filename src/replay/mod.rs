//! `rootcause replay`: every recorded bundle with an `expected/` folder (its
//! approved reports) is a regression case. Each is re-analysed in-process,
//! its reports are rendered again and compared with the approved ones;
//! `--bless` writes the new ones instead. Reports are a pure function of the
//! bundle, so a case never flaps.
//!
//! This module reads and writes the `expected/` files itself: they are the
//! case's verdict, not inputs of the analysis (`bundle.rs` skips them). A
//! contributed case is untrusted input: `expected/` and its files are read
//! and written only as regular files inside the bundle, never through a link
//! (a link to /proc/self/environ would print CI secrets in the diff, one to
//! a developer's file would be overwritten by `--bless`), and a report is
//! blessed by writing a new file and renaming it over the old, so a
//! concurrent compare never reads a half-written one. The diff is cleaned
//! like every report: approved text cannot drive the terminal.

mod diff;
mod junit;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::bundle::{self, Input};
use crate::context::Context;
use crate::render::{self, OutputFormat, RenderOptions, clean};
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
        // A link in a collection may point anywhere: it is not a case.
        let real_dir = fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        if !real_dir {
            if path.is_dir() {
                continue;
            }
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
    match fs::symlink_metadata(&expected) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Verdict::Error(
                "expected/ is a link or not a folder: only a folder inside the bundle holds approved reports".to_owned(),
            );
        }
        Err(_) if bless => {}
        Err(_) => {
            return Verdict::Skipped(
                "no expected/ folder (`rootcause replay --bless` writes one)".to_owned(),
            );
        }
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
        let approved = match read_approved(&expected.join(file)) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(e) => return Verdict::Error(format!("expected/{file}: {e}")),
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
    if let Err(e) = fs::create_dir(expected) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Verdict::Error(format!("cannot create {}: {e}", expected.display()));
        }
    }
    let mut written = Vec::new();
    for (i, (file, how)) in REPORTS.into_iter().enumerate() {
        let path = expected.join(file);
        let approved = match read_approved(&path) {
            Ok(text) => text,
            Err(e) => return Verdict::Error(format!("expected/{file}: {e}; not blessed")),
        };
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
        if let Err(e) = write_atomically(expected, file, &actual) {
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

/// The most an approved report may weigh: more is not a report.
const MAX_APPROVED: u64 = 64 << 20;

/// An approved report: `None` when there is none; an error when the path
/// is a link, a folder, a FIFO or a device, or too big. Opened without
/// following a link and without blocking on a FIFO, then checked to be a
/// regular file.
fn read_approved(path: &Path) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = match options.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) => {
            return Err(std::io::Error::new(
                e.kind(),
                "a link: only regular files inside the bundle are read",
            ));
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_APPROVED + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_APPROVED {
        return Err(std::io::Error::other("larger than 64 MiB"));
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// `expected/FILE` replaced at once: the text goes to a new temporary file
/// beside it (never through a link), which is then renamed over the old.
fn write_atomically(expected: &Path, file: &str, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let temp = expected.join(format!(".{file}.{}-{n}.tmp", std::process::id()));
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o644).custom_flags(libc::O_NOFOLLOW);
    }
    let result = options.open(&temp).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    let result = result.and_then(|()| fs::rename(&temp, expected.join(file)));
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// What `rootcause replay` prints: a line per case, the diff of each
/// failure, and last `N passed, M failed`. Case names, reasons and diffs
/// are cleaned: an approved report is a contributor's text.
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
        let name = &clean(&r.case.name);
        match &r.verdict {
            Verdict::Passed => out.push_str(&format!("{} {name}\n", paint("32", "ok     "))),
            Verdict::Blessed(files) => out.push_str(&format!(
                "{} {name}: wrote {}\n",
                paint("33", "blessed"),
                files.join(", ")
            )),
            Verdict::Skipped(why) => out.push_str(&format!(
                "{} {name}: {}\n",
                paint("2", "skipped"),
                clean(why)
            )),
            Verdict::Error(e) => out.push_str(&format!(
                "{} {name}: {}\n",
                paint("1;31", "ERROR  "),
                clean(e)
            )),
            Verdict::Failed(diffs) => {
                let files: Vec<&str> = diffs.iter().map(|d| d.file.as_str()).collect();
                out.push_str(&format!(
                    "{} {name}: {} differ{} from the approved report (`--bless` accepts the new one)\n",
                    paint("1;31", "FAILED "),
                    files.join(", "),
                    if files.len() == 1 { "s" } else { "" }
                ));
                for d in diffs {
                    let cleaned: String =
                        d.diff.lines().map(|l| format!("{}\n", clean(l))).collect();
                    out.push_str(&diff::paint(&cleaned, color));
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
