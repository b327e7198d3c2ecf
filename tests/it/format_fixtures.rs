//! Every capture under fixtures/formats/<format>/ is detected as <format>
//! (shell prompts aside) and read without an unrecognised line: the folder
//! name is the format's stable name, so a new sample is a new file. The
//! captures under fixtures/formats/lines/ are layouts read line by line,
//! by the recognisers (`ingest::recognize`), whatever segment holds them:
//! each is read without an unrecognised line.

use std::fs;

use rootcause::ingest::{Anchors, Format, ingest};
use rootcause::source::{Source, SourceMap};

use crate::support::fixtures;

#[test]
fn every_format_fixture_is_detected_and_read_whole() {
    let root = fixtures().join("formats");
    let mut checked = 0;
    // SOURCES.md, at the top, says where each real sample comes from.
    let mut dirs: Vec<_> = fs::read_dir(&root)
        .expect("fixtures/formats")
        .flatten()
        .filter(|d| d.path().is_dir())
        .collect();
    dirs.sort_by_key(|d| d.file_name());
    for dir in dirs {
        let name = dir.file_name().to_string_lossy().into_owned();
        let format: Option<Format> = (name != "lines").then(|| {
            name.parse()
                .unwrap_or_else(|e| panic!("fixtures/formats/{name}: {e}"))
        });
        let mut files: Vec<_> = fs::read_dir(dir.path())
            .expect("format dir")
            .flatten()
            .collect();
        files.sort_by_key(|f| f.file_name());
        for file in files {
            let label = format!("{name}/{}", file.file_name().to_string_lossy());
            let bytes = fs::read(file.path()).expect("fixture file");
            let mut sources = SourceMap::new();
            sources.add(Source::new(label.clone(), &bytes));
            let ingested = ingest(&sources, &Anchors::none());
            for input in &ingested.inputs {
                assert_eq!(input.unrecognized, 0, "{label}: {input:#?}");
            }
            checked += 1;
            let Some(format) = format else {
                continue;
            };
            assert!(
                ingested.inputs.iter().any(|i| i.segment.format == format),
                "{label}: no {format} segment in {:#?}",
                ingested.inputs
            );
            for input in &ingested.inputs {
                assert!(
                    matches!(input.segment.format, f if f == format || f == Format::ShellPrompt),
                    "{label}: lines {}-{} detected as {}",
                    input.segment.first_line,
                    input.segment.last_line,
                    input.segment.format
                );
            }
        }
    }
    assert!(checked > 0, "no fixtures under {}", root.display());
}

/// Cut, spliced and corrupted copies of every fixture: parsing never panics.
#[test]
fn mangled_fixtures_never_panic() {
    let root = fixtures().join("formats");
    let mut texts: Vec<Vec<u8>> = Vec::new();
    for dir in fs::read_dir(&root).expect("fixtures/formats").flatten() {
        if !dir.path().is_dir() {
            continue;
        }
        for file in fs::read_dir(dir.path()).expect("format dir").flatten() {
            texts.push(fs::read(file.path()).expect("fixture file"));
        }
    }
    // A small deterministic generator: the same mangling on every run.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound.max(1) as u64) as usize
    };
    for round in 0..400 {
        let a = &texts[next(texts.len())];
        let b = &texts[next(texts.len())];
        let mut bytes: Vec<u8> = match round % 4 {
            // Cut anywhere, even inside a UTF-8 sequence.
            0 => a[..next(a.len() + 1)].to_vec(),
            // One capture's head on another's tail.
            1 => [&a[..next(a.len() + 1)], &b[next(b.len() + 1)..]].concat(),
            // Lines shuffled between the two.
            2 => {
                let mut lines: Vec<&[u8]> = a.split(|c| *c == b'\n').collect();
                lines.extend(b.split(|c| *c == b'\n'));
                let n = lines.len();
                for i in 0..n {
                    lines.swap(i, next(n));
                }
                lines.join(&b'\n')
            }
            _ => a.clone(),
        };
        for _ in 0..next(8) {
            if !bytes.is_empty() {
                let at = next(bytes.len());
                bytes[at] = [0u8, 0xff, b'<', b'[', b':', b'=', b' ', b'\n'][next(8)];
            }
        }
        let mut sources = SourceMap::new();
        sources.add(Source::new("mangled", &bytes));
        let _ = ingest(&sources, &Anchors::none());
    }
}
