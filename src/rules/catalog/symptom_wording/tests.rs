//! `symptom-wording`'s tests: its guard on every sample, an exact row
//! winning a line, advice that does not fire, its rank below exact
//! findings, and what the symptom rows alone name on the real cases
//! (docs/accuracy.md, "Symptom catalog").

use crate::catalogs::catalogs;
use crate::testing::findings_of;

/// Every symptom row's samples are lines it reports: alone, each passes
/// the guard (error-looking, or a wording that stands alone; never
/// advice).
#[test]
fn every_symptom_sample_passes_the_guard() {
    let all = catalogs();
    let mut checked = 0;
    for c in all.list.iter().filter(|c| c.fallback) {
        for row in &c.rows {
            for s in &row.samples {
                let hits = all.symptoms_alone(&s.line);
                let hit = hits
                    .iter()
                    .find(|h| h.row.is_some_and(|r| r.id == row.id))
                    .unwrap_or_else(|| panic!("{}: not read: {}", row.id, s.line));
                assert!(
                    super::reads(hit, &s.line),
                    "{}: guarded: {}",
                    row.id,
                    s.line
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "{checked}");
}

/// A line in the class's words that no exact row reads (a variant:
/// Paddle's allocator's words of PaddleOCR#1505 as another stack would
/// put them, under its own exception) is this rule's finding, at a low
/// confidence, with the class's category and a confirmation command.
#[test]
fn a_wording_no_exact_row_knows_is_its_class() {
    let line = "ResourceExhaustedError: Out of memory on GPU 0: cannot allocate 25.00MB, available memory is only 15.19MB.\n";
    let f = findings_of(super::META.id, line);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].category, crate::rules::Category::CudaOom);
    assert!(f[0].confidence <= 0.45, "{}", f[0].confidence);
    assert!(f[0].headline.contains("wording class"), "{}", f[0].headline);
    assert!(
        f[0].actions.iter().any(|a| matches!(
            &a.kind,
            crate::rules::ActionKind::Advice {
                command: Some(_),
                ..
            }
        )),
        "{:?}",
        f[0].actions
    );
}

/// An exact row wins a line both read: PyTorch's OOM (verbatim from
/// the torch row's samples) is `known-message`/`torch-cuda-oom`'s, and
/// gives no symptom finding.
#[test]
fn an_exact_row_wins_and_no_symptom_finding_is_made() {
    let line = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity of 23.65 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this process has 23.60 GiB memory in use.\n";
    assert!(findings_of(super::META.id, line).is_empty());
    let a = crate::testing::analyze_paste(line);
    assert!(
        a.diagnosis
            .findings
            .iter()
            .all(|f| f.rule != super::META.id),
        "{:#?}",
        a.diagnosis.findings
    );
}

/// Advice, help text and settings in a class's words are no failure
/// (vLLM's flag help and a README's tip, paraphrased in their usual
/// shape; a config echo): no finding.
#[test]
fn advice_help_and_settings_do_not_fire() {
    for line in [
        "INFO: to avoid out of memory errors, lower --gpu-memory-utilization or --max-model-len",
        "  --gpu-memory-utilization GPU_MEMORY_UTILIZATION  The fraction of GPU memory to be used. If you run out of memory, reduce it.",
        "WARNING: if you get an error that the address is already in use, pass another --port",
        "# set PYTORCH_CUDA_ALLOC_CONF to avoid out of memory errors from fragmentation",
    ] {
        let f = findings_of(super::META.id, &format!("{line}\n"));
        assert!(f.is_empty(), "{line}: {f:#?}");
    }
}

/// An exact finding is the root above a symptom's of a lower causal
/// layer (a GPU hang in Vulkan-Hpp's words, the symptom catalog's sample,
/// beside CUDA's out-of-memory error; i915's own `GPU HANG` line is an
/// exact row of catalogs/i915.toml now).
#[test]
fn an_exact_finding_is_the_root_over_a_symptom() {
    let paste =
        "Error: vk::Queue::submit: ErrorDeviceLost\nRuntimeError: CUDA error: out of memory\n";
    let a = crate::testing::analyze_paste(paste);
    let root = a
        .diagnosis
        .findings
        .iter()
        .find(|f| Some(&f.id) == a.diagnosis.root_cause.as_ref())
        .expect("a root");
    assert_ne!(root.rule, super::META.id, "{:#?}", a.diagnosis.findings);
    assert!(
        a.diagnosis
            .findings
            .iter()
            .any(|f| f.rule == super::META.id),
        "{:#?}",
        a.diagnosis.findings
    );
}

/// What the symptom rows alone would name: each real case's lines (A–S,
/// batches T and U) read by the symptom catalog only (as if no exact row
/// existed), one class per line ([`super::first_read`]), a class's lines
/// given to the class that supersedes it, and the classes ranked as
/// `rules::rank` ranks findings (causal layer, then confidence, then the
/// first line). The named class is compared with expected.json's primary
/// (or an accepted `also`): per class, how often it is right when it names
/// one (precision) and how many of the class's cases it names (recall).
/// Printed with `--nocapture`; docs/accuracy.md keeps the figures. It must
/// name nothing in a negative case, and be right four times in five.
#[test]
fn the_symptom_rows_alone_name_the_primary_they_read() {
    use std::collections::BTreeMap;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let all = catalogs();
    // Per category: named, named right, its cases, its cases named as it.
    let mut table: BTreeMap<String, [usize; 4]> = BTreeMap::new();
    let (mut cases, mut negatives_named) = (0, Vec::new());
    for set in ["real", "real-incoming/batch-t", "real-incoming/batch-u"] {
        let Ok(dir) = std::fs::read_dir(root.join(set)) else {
            continue;
        };
        let mut dirs: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        dirs.sort();
        for case in dirs {
            let (Ok(expected), Ok(input)) = (
                std::fs::read_to_string(case.join("expected.json")),
                std::fs::read(case.join("input.log")),
            ) else {
                continue;
            };
            let expected: serde_json::Value = serde_json::from_str(&expected).expect("json");
            let primary = expected["primary"].as_str().unwrap_or("unknown");
            let also: Vec<&str> = expected["also"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            let accept_also = expected["accept_also"].as_bool().unwrap_or(false);
            cases += 1;
            table.entry(primary.to_owned()).or_default()[2] += 1;
            // Each class's row and its first line.
            let mut first: BTreeMap<&str, (&crate::catalogs::Row, usize)> = BTreeMap::new();
            let text = String::from_utf8_lossy(&input);
            for (n, line) in text.lines().enumerate() {
                let hits = all.symptoms_alone(line);
                if let Some(row) = super::first_read(hits.iter(), line).and_then(|h| h.row) {
                    first.entry(row.id.as_str()).or_insert((row, n));
                }
            }
            let present: Vec<&str> = first.keys().copied().collect();
            let named = first
                .values()
                .filter(|(row, _)| {
                    !row.superseded_by
                        .iter()
                        .any(|s| present.contains(&s.as_str()))
                })
                .filter_map(|(row, n)| Some((row.category?, row.confidence, *n)))
                .min_by_key(|(c, conf, n)| {
                    (
                        crate::rules::CausalLayer::of(*c),
                        std::cmp::Reverse((conf * 100.0).round() as i64),
                        *n,
                    )
                })
                .map(|(c, _, _)| c.name());
            let Some(named) = named else { continue };
            let right = match primary {
                "unknown" => also.contains(&named),
                _ => named == primary || (accept_also && also.contains(&named)),
            };
            if primary == "unknown" && !right {
                negatives_named.push(format!("{}: {named}", case.display()));
            }
            let entry = table.entry(named.to_owned()).or_default();
            entry[0] += 1;
            entry[1] += usize::from(right);
            if named == primary {
                table.entry(primary.to_owned()).or_default()[3] += 1;
            }
        }
    }
    let (named, right): (usize, usize) = table
        .values()
        .fold((0, 0), |(n, r), [a, b, _, _]| (n + a, r + b));
    eprintln!("symptom rows alone, {cases} cases: named {named}, right {right}");
    eprintln!("| class | named | right | precision | cases of the class | recall |");
    for (class, [n, r, e, found]) in &table {
        if *n == 0 {
            continue;
        }
        eprintln!(
            "| {class} | {n} | {r} | {:.0}% | {e} | {:.0}% |",
            100.0 * *r as f64 / *n as f64,
            if *e == 0 {
                0.0
            } else {
                100.0 * *found as f64 / *e as f64
            }
        );
    }
    assert!(cases > 800, "{cases} cases read");
    assert!(negatives_named.is_empty(), "{negatives_named:#?}");
    assert!(right * 5 >= named * 4, "{right} right of {named} named");
}
