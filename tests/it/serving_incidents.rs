//! The serving-software incidents whose root cause is not the loudest error:
//! each asserts the true cause is the root and that the loud symptoms are
//! listed in its `explains`.

use serde_json::Value;

use crate::support::{check, incident, json, root};

/// The finding of `rule` (the first, when several).
fn finding<'a>(report: &'a Value, rule: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == rule)
        .unwrap_or_else(|| panic!("no {rule} finding"))
}

/// Every finding of `rules` is explained by the root cause.
fn assert_explains(report: &Value, rules: &[&str]) {
    let r = root(report);
    let explains: Vec<&str> = r["explains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    for rule in rules {
        for f in report["findings"].as_array().unwrap() {
            if f["rule"] == *rule && f["id"] != r["id"] {
                let id = f["id"].as_str().unwrap();
                assert!(explains.contains(&id), "{rule} ({id}) not in {explains:?}");
            }
        }
    }
}

fn action_types(f: &Value) -> Vec<&str> {
    f["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["type"].as_str().unwrap())
        .collect()
}

#[test]
fn a_vllm_oom_is_blamed_on_the_eval_job_that_holds_the_gpu() {
    let report = json(&check(&incident("2026-04-14-infer2-vllm-oom-foreign-eval")));
    let r = root(&report);
    assert_eq!(r["rule"], "torch-cuda-oom");
    assert_eq!(r["category"], "gpu-memory-held-by-other-process");
    assert_eq!(r["entities"]["pids"], serde_json::json!([48211, 51877]));
    assert_eq!(r["entities"]["gpus"], serde_json::json!([1]));
    let headline = r["headline"].as_str().unwrap();
    for needle in ["PID 51877", "eval-mmlu.service", "30.02 GiB", "GPU 1"] {
        assert!(headline.contains(needle), "{needle}: {headline}");
    }
    // The restart's free-memory failure has the same holder; the unit's exit
    // and vLLM's notices follow.
    assert_eq!(
        finding(&report, "vllm-insufficient-free-memory")["category"],
        "gpu-memory-held-by-other-process"
    );
    assert_explains(
        &report,
        &[
            "vllm-insufficient-free-memory",
            "unit-exit-nonzero",
            "vllm-engine-core-failed",
        ],
    );
    let types = action_types(r);
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
    assert_eq!(r["actions"][0]["unit"], "eval-mmlu.service");
    assert_eq!(r["actions"][1]["pid"], 51877);
    assert_eq!(r["actions"][3]["unit"], "vllm-qwen3.service");
}

#[test]
fn a_graph_capture_oom_is_blamed_on_the_mem_fraction_flag() {
    let report = json(&check(&incident("2025-09-18-l40s-node5-graph-capture-oom")));
    let r = root(&report);
    assert_eq!(r["rule"], "sglang-cuda-graph-capture-failed");
    assert_eq!(r["category"], "cuda-graph-capture-failure");
    let headline = r["headline"].as_str().unwrap();
    assert!(
        headline.contains("--mem-fraction-static 0.94"),
        "{headline}"
    );
    assert!(headline.contains("0.90"), "{headline}");
    // The suggested change is an ExecStart diff, never applied.
    let flag = &r["actions"][0];
    assert_eq!(flag["type"], "set-server-flag");
    assert_eq!(flag["safety"], "advisory-only");
    let details = flag["details"].to_string();
    assert!(details.contains("--mem-fraction-static 0.94"), "{details}");
    assert!(details.contains("--mem-fraction-static 0.90"), "{details}");
    // No OOM finding competes: the capture rule reports the OOM under it.
    assert!(
        !report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["rule"] == "torch-cuda-oom")
    );
    assert_explains(
        &report,
        &[
            "systemd-crash-loop",
            "systemd-start-limit-hit",
            "sglang-child-failed",
        ],
    );
}

#[test]
fn nccl_timeouts_on_seven_ranks_are_explained_by_rank_5s_exception() {
    let report = json(&check(&incident("2026-03-09-a100-n14-nccl-timeout-rank5")));
    let r = root(&report);
    assert_eq!(r["rule"], "nccl-watchdog-timeout");
    assert_eq!(r["category"], "server-exception");
    assert!(
        r["entities"]["pids"]
            .as_array()
            .unwrap()
            .contains(&7125.into())
    );
    let headline = r["headline"].as_str().unwrap();
    for needle in ["Rank 5", "Too many open files", "0-4, 6, 7", "SeqNum=48213"] {
        assert!(headline.contains(needle), "{needle}: {headline}");
    }
    // The timeouts themselves are a finding of their own, explained.
    let timeouts = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["category"] == "nccl-timeout")
        .expect("the timeouts finding");
    assert_eq!(timeouts["severity"], "error");
    assert_explains(
        &report,
        &[
            "nccl-watchdog-timeout",
            "unit-exit-nonzero",
            "vllm-engine-core-failed",
        ],
    );
    assert!(r["actions"].to_string().contains("LimitNOFILE"));
}

#[test]
fn a_vllm_start_failure_is_blamed_on_its_own_orphaned_engine_core() {
    let report = json(&check(&incident(
        "2026-01-22-h200-gw3-vllm-stale-enginecore",
    )));
    let r = root(&report);
    assert_eq!(r["rule"], "vllm-insufficient-free-memory");
    assert_eq!(r["category"], "stale-serving-instance");
    assert!(
        r["entities"]["pids"]
            .as_array()
            .unwrap()
            .contains(&20488.into())
    );
    assert_eq!(r["entities"]["gpus"], serde_json::json!([0]));
    let headline = r["headline"].as_str().unwrap();
    for needle in ["PID 20488", "VLLM::EngineCore", "128,710 MiB", "13.62 GiB"] {
        assert!(headline.contains(needle), "{needle}: {headline}");
    }
    // total - free reconciles with the orphan's memory.
    let conditions = r["conditions"].to_string();
    assert!(conditions.contains("126.19 GiB"), "{conditions}");
    assert!(conditions.contains("125.69 GiB"), "{conditions}");
    assert_explains(
        &report,
        &[
            "stale-serving-process",
            "unit-exit-nonzero",
            "vllm-engine-core-failed",
        ],
    );
    let types = action_types(r);
    assert_eq!(
        &types[..6],
        [
            "stop-unit",
            "terminate-process",
            "kill-orphans",
            "wait-gpu-memory-free",
            "restart-unit",
            "verify-unit-active"
        ]
    );
    let t = &r["actions"][1];
    assert_eq!(t["pid"], 20488);
    assert_eq!(t["expected_unit"], "vllm-gw.service");
    assert_eq!(t["expected_cmdline"], "VLLM::EngineCore");
    assert!(t["expected_start"].as_str().unwrap().contains("Jan 20"));
}
