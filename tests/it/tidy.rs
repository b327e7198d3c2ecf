//! Tidy checks in the style of rust-analyzer's: every source file says what
//! it owns, modules depend only leftwards along the pipeline, and no merge
//! left conflict markers behind.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_owned()
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.')
            || name == "target"
            || name == "snapshots"
            || name == "corpus"
            || name == "artifacts"
        {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn rust_files(dir: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    files(&root().join(dir), &mut out);
    out.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    out.sort();
    out
}

#[test]
fn every_source_file_starts_with_a_module_doc() {
    for file in rust_files("src") {
        let text = fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with("//!"),
            "{} does not start with a //! doc comment",
            file.display()
        );
    }
}

/// ARCHITECTURE.md: each layer uses only the layers to its left.
#[test]
fn modules_depend_only_leftwards() {
    let later = ["run", "cli", "capture", "replay"];
    let rules: [(&str, &[&str]); 6] = [
        (
            "src/catalogs",
            &[
                "ingest",
                "correlate",
                "rules",
                "render",
                "timeline",
                "bundle",
            ],
        ),
        (
            "src/model",
            &[
                "ingest",
                "correlate",
                "rules",
                "render",
                "timeline",
                "bundle",
            ],
        ),
        ("src/ingest", &["correlate", "rules", "render", "timeline"]),
        ("src/correlate", &["ingest", "rules", "render", "timeline"]),
        ("src/rules", &["render", "timeline"]),
        ("src/render", &["ingest::", "correlate::"]),
    ];
    let mut broken = Vec::new();
    for (dir, forbidden) in rules {
        for file in rust_files(dir) {
            let text = fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                let Some(used) = line.trim_start().strip_prefix("use crate::") else {
                    continue;
                };
                let bad = forbidden
                    .iter()
                    .chain(later.iter())
                    .any(|m| used.starts_with(m));
                // Rules name the prefilter's type to hand it their anchors;
                // the report lists the inputs with their detected format and
                // draws the GPUs from the incident (its product, read only).
                let allowed = used.starts_with("ingest::Anchors")
                    || (dir == "src/render"
                        && (used.starts_with("ingest::InputSummary")
                            || used.starts_with("ingest::Format")
                            || used.starts_with("correlate::Incident")));
                if bad && !allowed {
                    broken.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
}

#[test]
fn no_merge_conflict_markers() {
    let mut all = Vec::new();
    for dir in [
        "src", "tests", "docs", "fixtures", "scripts", "bench", "contrib", ".ci",
    ] {
        if root().join(dir).exists() {
            files(&root().join(dir), &mut all);
        }
    }
    all.extend(["README.md", "ARCHITECTURE.md", "Cargo.toml"].map(|f| root().join(f)));
    let mut found = Vec::new();
    for file in all {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("<<<<<<< ") || line.starts_with(">>>>>>> ") {
                found.push(format!("{}:{}", file.display(), n + 1));
            }
        }
    }
    assert!(found.is_empty(), "conflict markers: {found:?}");
}

/// Regex patterns spell their classes in ASCII (`[0-9]`, `[0-9A-Za-z_]`),
/// never `\d` or `\w`: a Unicode class costs 50 to 250 µs to compile each
/// time it is written (hundreds of patterns: most of a small run's time),
/// and every figure the parsers read is parsed as ASCII anyway.
#[test]
fn regex_classes_are_ascii() {
    let mut found = Vec::new();
    for file in rust_files("src") {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let b = line.as_bytes();
            for i in 1..b.len() {
                if !matches!(b[i], b'd' | b'w') {
                    continue;
                }
                // `\d` in a raw string, `\\d` in a plain one.
                let run = b[..i].iter().rev().take_while(|&&c| c == b'\\').count();
                if run == 1 || run == 2 {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Unicode classes in patterns:\n{}",
        found.join("\n")
    );
}

/// `unsafe` only where a system call has no safe wrapper: process groups in
/// `capture/`. The terminal's width, colours and progress bar go through
/// crates (terminal_size, anstream, indicatif).
#[test]
fn no_unsafe_outside_capture() {
    let word = regex::Regex::new(r"\bunsafe\b").unwrap();
    for file in rust_files("src") {
        if file.starts_with(root().join("src/capture")) {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !word.is_match(code),
                "{}:{}: unsafe outside src/capture/: {line}",
                file.display(),
                n + 1
            );
        }
    }
}
