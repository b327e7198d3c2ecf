//! Parsers never panic, on any bytes: every format's parser (forced with a
//! format hint) and format detection run over arbitrary input, over lines
//! built from the formats' own punctuation, and over pathological cases
//! (10 MB lines, invalid UTF-8, CRLF, truncated tables, empty input).

use proptest::prelude::*;
use rootcause::ingest::{Anchors, Format, ingest_as};
use rootcause::source::{Source, SourceMap};

fn run_all(bytes: &[u8]) {
    let mut sources = SourceMap::new();
    sources.add(Source::new("fuzz", bytes));
    let anchors = rootcause::rules::anchors(rootcause::rules::RULES);
    // Detection, then every parser by force.
    let detected = ingest_as(&sources, None, &anchors);
    let total: u32 = detected.inputs.iter().map(|i| i.lines).sum();
    assert_eq!(
        total,
        sources.get(rootcause::source::SourceId(0)).line_count()
    );
    for format in Format::ALL {
        let _ = ingest_as(&sources, Some(format), &Anchors::none());
    }
    // And the whole pipeline, renderers included.
    let analysis = rootcause::analyze(sources);
    let report = analysis.report();
    let _ = rootcause::render::script(&report);
    // Again with the prefilter: its skimming readers never panic either.
    let mut sources = SourceMap::new();
    sources.add(Source::new("fuzz", bytes));
    let options = rootcause::Options {
        prefilter: true,
        ..rootcause::Options::default()
    };
    let analysis = rootcause::analyze_with(sources, &options);
    let _ = rootcause::render::script(&analysis.report());
}

/// Fragments real inputs are made of, so that random lines get deep into
/// the parsers rather than failing on their first character.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("| ".to_owned()),
        Just("|".to_owned()),
        Just("+----+".to_owned()),
        Just("MiB".to_owned()),
        Just(" / ".to_owned()),
        Just("[2026-11-27 09:38:52 TP1] ".to_owned()),
        Just("Nov 27 09:38:40 ct200 python3[20629]: ".to_owned()),
        Just("2026-11-27T09:38:40+0000 host systemd[1]: ".to_owned()),
        Just("{\"MESSAGE\":".to_owned()),
        Just("\"__REALTIME_TIMESTAMP\":\"".to_owned()),
        Just("● x.service - d".to_owned()),
        Just("     CGroup: ".to_owned()),
        Just("├─".to_owned()),
        Just("Traceback (most recent call last):".to_owned()),
        Just("RuntimeError: The memory capacity is unbalanced. pre_model_load_memory=".to_owned()),
        Just("NVRM: Xid (PCI:0000:3b:00): ".to_owned()),
        Just("GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, ".to_owned()),
        Just("index, uuid, memory.used [MiB]".to_owned()),
        Just("  PID  PPID USER CMD".to_owned()),
        Just("(VllmWorker rank=1 pid=4243) ".to_owned()),
        Just("ERROR 06-01 12:00:10 [core.py:396] ".to_owned()),
        Just("\x1b[1;36m".to_owned()),
        Just("\r".to_owned()),
        Just("\t".to_owned()),
        Just("é€😀".to_owned()),
        "[0-9]{1,12}".prop_map(|s| s),
        "[ -~]{0,20}".prop_map(|s| s),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        run_all(&bytes);
    }

    #[test]
    fn format_shaped_lines_never_panic(lines in proptest::collection::vec(proptest::collection::vec(fragment(), 0..8), 0..40)) {
        let text: String = lines.iter().map(|l| l.concat() + "\n").collect();
        run_all(text.as_bytes());
    }
}

#[test]
fn pathological_inputs_never_panic() {
    let mut huge = "[2026-11-27 09:38:52 TP1] ".to_owned();
    huge.push_str(&"x".repeat(10 * 1024 * 1024));
    huge.push('\n');
    for input in [
        Vec::new(),
        b"\n\n\n".to_vec(),
        b"\xff\xfe\x00\x01 NVRM: Xid\r\n\xc3\x28\n".to_vec(),
        huge.into_bytes(),
        b"+-----------------------------------------------------------------------------------------+\n| NVIDIA-SMI 570.172.08             Driver Version: 570.172.08     CUDA Version: 12.8     |\n|   0  NVIDIA RTX PRO".to_vec(),
        "│├└─●×○".repeat(1000).into_bytes(),
    ] {
        run_all(&input);
    }
}

/// Every parser has a cargo-fuzz target (fuzz/fuzz_targets/<format>.rs).
#[test]
fn every_format_has_a_fuzz_target() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
    let manifest = std::fs::read_to_string(dir.parent().unwrap().join("Cargo.toml")).unwrap();
    for format in Format::ALL {
        if matches!(format, Format::Unknown | Format::ShellPrompt) {
            continue;
        }
        let name = format.name().replace('-', "_");
        let file = dir.join(format!("{name}.rs"));
        assert!(
            file.exists(),
            "no fuzz target for {}: add {}",
            format.name(),
            file.display()
        );
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml lacks the {name} target"
        );
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.contains(&format!("Some(\"{}\")", format.name())),
            "{} fuzzes another format",
            file.display()
        );
    }
}
