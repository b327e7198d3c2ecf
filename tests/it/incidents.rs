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
        assert_snapshot!("html", support::html_content(&out.html));
        assert_snapshot!("script", out.script);
        let value = json(&out);
        assert_json_snapshot!("json", value, {".tool.version" => "[version]"});
    });
}

/// The facts `rootcause demo` must name (issue 2's "done when").
pub(crate) fn assert_seed_root_cause(out: &support::Outputs) {
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
    // The holder is signalled only on a strong identity: a bundle without
    // its `ps -o lstart` row leaves a survivor of the stop to a person.
    let has_ps = f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["input"].as_str().is_some_and(|i| i.starts_with("ps")));
    let second = if has_ps {
        "terminate-process"
    } else {
        "advice"
    };
    assert_eq!(
        &types[..5],
        [
            "stop-unit",
            second,
            "wait-gpu-memory-free",
            "restart-unit",
            "verify-unit-active"
        ]
    );
    assert_eq!(f["actions"][0]["unit"], "ddtree-qwen.service");
    assert_eq!(f["actions"][0]["pid"], 20629);
    if has_ps {
        assert_eq!(f["actions"][1]["pid"], 20629);
        assert_eq!(f["actions"][1]["expected_unit"], "ddtree-qwen.service");
        assert_eq!(
            f["actions"][1]["expected_start"],
            "Tue Nov 24 14:02:17 2026"
        );
    }
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

/// disable-unit is scripted only for a unit the report shows to be a
/// leftover: a model server of another unit sitting on the group's GPU. The
/// seed's ddtree-qwen.service is a workload of its own (it served traffic
/// until minutes before), so disabling it stays advice for a person.
#[test]
fn only_a_leftover_unit_is_disabled() {
    let types = |out: &support::Outputs| -> Vec<(String, String)> {
        root(&json(out))["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["type"].as_str().unwrap().to_owned(),
                    a["safety"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let seed = check(&incident("2026-11-27-ct200-ghost-ddtree"));
    assert!(!types(&seed).iter().any(|(t, _)| t == "disable-unit"));
    assert_eq!(
        types(&seed).last().unwrap(),
        &("advice".to_owned(), "advisory-only".to_owned())
    );

    // The same holder, but running an SGLang server: a leftover instance.
    let leftover = crate::sandbox::analyze_edited(
        &incident("2026-11-27-ct200-ghost-ddtree"),
        |_, text| {
            Some(text.replace(
                "/opt/ddtree/serve.py --model /models/Qwen2.5-32B-Instruct --draft-model /models/Qwen2.5-0.5B-Instruct --port 8100",
                "-m sglang.launch_server --model-path /models/Qwen2.5-32B-Instruct --port 8100",
            ))
        },
    );
    let f = root(&json(&leftover)).clone();
    assert_eq!(f["category"], "stale-serving-instance");
    let disable = f["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["type"] == "disable-unit")
        .expect("a disable-unit step");
    assert_eq!(disable["unit"], "ddtree-qwen.service");
    assert_eq!(disable["safety"], "needs-confirmation");
    assert!(
        disable["why"]
            .as_str()
            .unwrap()
            .contains("is a leftover serving instance"),
        "{disable}"
    );
    assert!(
        !f["actions"]
            .to_string()
            .contains("if ddtree-qwen.service is a leftover"),
        "the conditional advice gives way to the step"
    );
    // The target itself is never disabled.
    let stale = json(&check(&incident("2025-06-14-h100node3-stale-sglang")));
    assert!(!root(&stale)["actions"].to_string().contains("disable-unit"));
}
