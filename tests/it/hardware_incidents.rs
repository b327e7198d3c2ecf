//! The whole-incident bundles of GPU-hardware and host faults: the root
//! cause is the quiet kernel line, not the loudest error, and every loud
//! symptom (NCCL timeouts, crash loops, SIGKILL exits) is listed in its
//! `explains`.

use serde_json::Value;

use crate::support::{check, incident, json, root};

/// The findings of a report by rule id.
fn by_rule<'a>(report: &'a Value, rule: &str) -> Vec<&'a Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == rule)
        .collect()
}

/// Asserts that every finding of `rule` is explained by the root cause.
fn explained(report: &Value, rule: &str) {
    let root = root(report);
    let explains: Vec<&str> = root["explains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let found = by_rule(report, rule);
    assert!(!found.is_empty(), "no finding of {rule}");
    for f in found {
        let id = f["id"].as_str().unwrap();
        assert!(
            explains.contains(&id),
            "{rule} ({id}) is not explained by the root cause {}: {explains:?}",
            root["id"]
        );
    }
}

fn numbers(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect()
}

#[test]
fn xid_79_explains_the_nccl_timeouts_and_the_crash_loop() {
    let report = json(&check(&incident(
        "2025-11-26-h100sxm05-xid79-nccl-timeouts",
    )));
    let f = root(&report);
    assert_eq!(f["rule"], "xid-gpu-fell-off-bus");
    assert_eq!(f["category"], "xid-gpu-fell-off-bus");
    assert_eq!(f["severity"], "critical");
    assert_eq!(numbers(&f["entities"]["gpus"]), [5]);
    assert!(numbers(&f["entities"]["pids"]).contains(&4267));
    assert!(numbers(&f["entities"]["xid"]).contains(&79));
    assert_eq!(strings(&f["entities"]["units"]), ["sglang.service"]);
    let headline = f["headline"].as_str().unwrap();
    assert!(headline.contains("GPU 5"), "{headline}");
    assert!(headline.contains("Xid 79"), "{headline}");
    // The driver asks for a reboot, and no step resets the lost GPU.
    assert!(f["evidence"].to_string().contains("Node Reboot Required"));
    assert!(!f["actions"].to_string().contains("nvidia-smi -r"));
    for rule in [
        "systemd-crash-loop",
        "systemd-stop-timeout",
        "stale-serving-process",
        "cuda-unavailable",
    ] {
        explained(&report, rule);
    }
}

#[test]
fn an_uncontained_ecc_error_explains_the_engine_death_and_the_failed_restarts() {
    let report = json(&check(&incident("2025-07-23-a100infer02-ecc-uncontained")));
    let f = root(&report);
    assert_eq!(f["rule"], "xid-ecc");
    assert_eq!(f["category"], "xid-ecc");
    assert_eq!(f["severity"], "critical");
    assert_eq!(numbers(&f["entities"]["gpus"]), [2]);
    assert!(numbers(&f["entities"]["pids"]).contains(&733104));
    let xids = numbers(&f["entities"]["xid"]);
    assert!(xids.contains(&48) && xids.contains(&95), "{xids:?}");
    // The application's CUDA error is cited as the symptom.
    assert!(
        f["evidence"]
            .to_string()
            .contains("uncorrectable ECC error encountered")
    );
    // The recovery is a GPU reset, as advice only.
    assert!(f["actions"].to_string().contains("nvidia-smi -r -i 2"));
    for rule in ["systemd-crash-loop", "unit-exit-nonzero"] {
        explained(&report, rule);
    }
    // nvidia-smi's counters are cited by the Xid rule, not reported twice.
    assert!(by_rule(&report, "ecc-uncorrectable-or-remap-pending").is_empty());
}

#[test]
fn the_oom_killer_explains_the_sigkill_exits_that_sglang_dealt_itself() {
    let out = check(&incident("2025-12-09-h200node11-oom-weight-loading"));
    let report = json(&out);
    let f = root(&report);
    assert_eq!(f["rule"], "kernel-oom-killer");
    assert_eq!(f["category"], "host-oom-killer");
    assert_eq!(strings(&f["entities"]["units"]), ["sglang.service"]);
    let pids = numbers(&f["entities"]["pids"]);
    for pid in [14471, 15187, 15900] {
        assert!(pids.contains(&pid), "{pids:?}");
    }
    assert!(f["headline"].as_str().unwrap().contains("PID 14471"));
    // F4: each `status=9/KILL` is cited as the OOM kill's consequence.
    let exits: Vec<&Value> = f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["text"].as_str().unwrap().contains("status=9/KILL"))
        .collect();
    assert_eq!(exits.len(), 3, "{exits:#?}");
    explained(&report, "systemd-crash-loop");
    // The other ranks' gloo errors are the kill's consequence, not unknown.
    assert!(
        !out.text.contains("Errors no rule explains"),
        "{}",
        out.text
    );
}

#[test]
fn a_sigkill_without_kernel_evidence_is_not_an_oom_kill() {
    let dir = crate::support::fixtures().join("rules/kernel-oom-killer/pos-unrelated-victim");
    let report = json(&check(&dir));
    let oom = by_rule(&report, "kernel-oom-killer");
    assert_eq!(oom.len(), 1);
    // The user's process died eleven minutes before SGLang killed itself:
    // the OOM finding neither names sglang.service nor cites its exit.
    assert_eq!(oom[0]["severity"], "warning");
    assert!(strings(&oom[0]["entities"]["units"]).is_empty());
    assert!(!oom[0]["evidence"].to_string().contains("status=9/KILL"));
}
