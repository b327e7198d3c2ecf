//! Every capture under fixtures/formats/<format>/ is detected as <format>
//! (shell prompts aside) and read without an unrecognised line: the folder
//! name is the format's stable name, so a new sample is a new file.

use std::fs;

use rootcause::ingest::{Format, ingest};
use rootcause::source::{Source, SourceMap};

use crate::support::fixtures;

#[test]
fn every_format_fixture_is_detected_and_read_whole() {
    let root = fixtures().join("formats");
    let mut checked = 0;
    let mut dirs: Vec<_> = fs::read_dir(&root)
        .expect("fixtures/formats")
        .flatten()
        .collect();
    dirs.sort_by_key(|d| d.file_name());
    for dir in dirs {
        let name = dir.file_name().to_string_lossy().into_owned();
        let format: Format = name
            .parse()
            .unwrap_or_else(|e| panic!("fixtures/formats/{name}: {e}"));
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
            let ingested = ingest(&sources);
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
                assert_eq!(input.unrecognized, 0, "{label}: {input:#?}");
            }
            checked += 1;
        }
    }
    assert!(checked > 0, "no fixtures under {}", root.display());
}
