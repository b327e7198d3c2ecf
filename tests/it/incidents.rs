//! Every incident bundle under fixtures/incidents/ is analysed and each of its
//! outputs snapshotted; the seed incident's facts are also asserted outright.

use insta::{assert_json_snapshot, assert_snapshot, glob};

use crate::support::{self, check, incident, json, root};

#[test]
fn snapshots() {
    glob!("../../fixtures/incidents", "*/manifest.json", |manifest| {
        let out = check(manifest.parent().unwrap());
        assert_snapshot!("text", out.text);
        assert_snapshot!("markdown", out.markdown);
        assert_snapshot!("script", out.script);
        let value = json(&out);
        assert_json_snapshot!("json", value, {".tool.version" => "[version]"});
    });
}

/// The facts `rootcause demo` must name (issue 2's "done when").
fn assert_seed_root_cause(out: &support::Outputs) {
    let json = json(out);
    let f = root(&json);
    assert_eq!(f["rule"], "sglang-unbalanced-memory");
    assert_eq!(f["category"], "gpu-memory-held-by-other-process");
    assert_eq!(f["entities"]["gpus"], serde_json::json!([0]));
    assert_eq!(f["entities"]["pids"], serde_json::json!([20629]));
    let units: Vec<&str> = f["entities"]["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert!(units.contains(&"ddtree-qwen.service"), "{units:?}");
    assert!(units.contains(&"sglang-k26.service"), "{units:?}");
    let headline = f["headline"].as_str().unwrap();
    for needle in [
        "GPU 0",
        "PID 20629",
        "ddtree-qwen.service",
        "55,286 MiB",
        "sglang-k26.service",
    ] {
        assert!(
            headline.contains(needle),
            "headline lacks {needle}: {headline}"
        );
    }
    // The quantitative reconciliation: deficit 53.98 GiB against 55,286 MiB = 53.99 GiB.
    let chain = f["chain"].to_string();
    assert!(chain.contains("53.98 GiB"), "{chain}");
    assert!(chain.contains("53.99 GiB"), "{chain}");
    let types: Vec<&str> = f["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        &types[..5],
        [
            "stop-unit",
            "terminate-process",
            "wait-gpu-memory-free",
            "restart-unit",
            "verify-unit-active"
        ]
    );
    assert_eq!(f["actions"][0]["unit"], "ddtree-qwen.service");
    assert_eq!(f["actions"][1]["pid"], 20629);
    assert_eq!(f["actions"][1]["expected_unit"], "ddtree-qwen.service");
    assert_eq!(f["actions"][2]["gpus"], serde_json::json!([0]));
    assert_eq!(f["actions"][3]["unit"], "sglang-k26.service");
    // Every evidence line is cited as input:line with the line's text.
    for e in f["evidence"].as_array().unwrap() {
        assert!(e["line"].as_u64().unwrap() > 0);
        assert!(!e["text"].as_str().unwrap().is_empty());
    }
}

#[test]
fn the_seed_incident_is_diagnosed_from_every_rendering() {
    for name in [
        "2026-11-27-ct200-ghost-ddtree",
        "2026-11-27-ct200-ghost-ddtree-json",
        "2026-11-27-ct200-ghost-ddtree-short-only",
        "2026-11-27-ct200-ghost-ddtree-paste",
    ] {
        let out = check(&incident(name));
        assert_seed_root_cause(&out);
    }
}

#[test]
fn the_demo_is_the_seed_incident() {
    let out = support::analyze_in(rootcause::demo::sources(), rootcause::demo::context());
    assert_seed_root_cause(&out);
    let seed = check(&incident("2026-11-27-ct200-ghost-ddtree"));
    assert_eq!(out.text, seed.text);
    assert_eq!(out.markdown, seed.markdown);
}

#[test]
fn an_unit_inferred_from_journal_order_lowers_confidence() {
    let strong = json(&check(&incident("2026-11-27-ct200-ghost-ddtree")));
    let inferred = json(&check(&incident(
        "2026-11-27-ct200-ghost-ddtree-short-only",
    )));
    let c = |j: &serde_json::Value| root(j)["confidence"].as_f64().unwrap();
    assert!(
        c(&inferred) < c(&strong),
        "{} vs {}",
        c(&inferred),
        c(&strong)
    );
    let notes = root(&inferred)["evidence"].to_string();
    assert!(notes.contains("inferred"), "{notes}");
}

#[test]
fn reports_are_deterministic() {
    let dir = incident("2026-11-27-ct200-ghost-ddtree");
    let a = check(&dir);
    let b = check(&dir);
    assert_eq!(a.text, b.text);
    assert_eq!(a.json, b.json);
    assert_eq!(a.script, b.script);
}
