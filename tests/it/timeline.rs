//! The timeline: one order across journal, SGLang and nvidia-smi in the
//! bundle's frame, `--around` zooming, and `--output ndjson` for fleets.

use rootcause::timeline::{Entry, Placement};

use crate::support::{bin, check, incident};

fn names<'a>(out: &'a crate::support::Outputs, e: &Entry) -> Vec<&'a str> {
    let sources = &out.analysis.sources;
    std::iter::once(e.span)
        .chain(e.also.iter().copied())
        .map(|s| sources.name(s))
        .collect()
}

#[test]
fn the_seed_timeline_reads_in_order_across_journal_sglang_and_nvidia_smi() {
    for bundle in [
        "2026-11-27-ct200-ghost-ddtree",
        "2026-11-27-ct200-ghost-ddtree-json",
    ] {
        let out = check(&incident(bundle));
        let entries = &out.analysis.timeline.entries;
        let instants: Vec<i64> = entries
            .iter()
            .map(|e| e.time.expect("every entry is placed").utc_seconds())
            .collect();
        assert!(instants.is_sorted(), "{bundle}: out of order");
        let at = |needle: &str| {
            entries
                .iter()
                .position(|e| e.text.contains(needle))
                .unwrap_or_else(|| panic!("{bundle}: no `{needle}` on the timeline"))
        };
        let started = at("Started sglang-k26.service");
        let args = at("server_args=");
        let raised = at("RuntimeError: The memory capacity is unbalanced");
        let killed = at("Main process exited, code=killed");
        let snapshot = at("Fri Nov 27 09:41:12 2026");
        let ghost_row = entries
            .iter()
            .position(|e| e.text.contains("20629") && e.placement == Placement::AfterLine(1))
            .expect("the process row, placed after the date line");
        assert!(
            started < args
                && args < raised
                && raised < killed
                && killed < snapshot
                && snapshot < ghost_row,
            "{bundle}: {started} {args} {raised} {killed} {snapshot} {ghost_row}"
        );
        // The SGLang line is on the timeline in its own name or as a copy
        // of the journal's line; the nvidia-smi snapshot in its own.
        assert!(
            names(&out, &entries[raised]).contains(&"sglang.log"),
            "{bundle}"
        );
        assert!(names(&out, &entries[snapshot]).contains(&"nvidia-smi.txt"));
        assert!(entries[raised].findings.contains(&"F1".to_owned()));
        let t = entries[raised].time.expect("time");
        assert_eq!(
            rootcause::timeline::rfc3339(&t).as_deref(),
            Some("2026-11-27T09:38:52Z")
        );
    }
}

#[test]
fn local_times_are_read_in_the_bundles_zone_not_the_machines() {
    // h100node3 logs in Europe/Berlin (summer, +02:00); SGLang prints local
    // time without a zone and must land at the journal's instant.
    let out = check(&incident("2025-06-14-h100node3-stale-sglang"));
    let tl = &out.analysis.timeline;
    let raised = tl
        .entries
        .iter()
        .find(|e| e.text.contains("RuntimeError") && e.findings.contains(&"F1".to_owned()))
        .expect("evidence on the timeline");
    let t = raised.time.expect("time");
    assert_eq!(
        rootcause::timeline::display_time(&t, &tl.frame),
        "2025-06-14 03:13:57 +02:00"
    );
    assert_eq!(
        rootcause::timeline::rfc3339(&t).as_deref(),
        Some("2025-06-14T01:13:57Z")
    );
}

#[test]
fn the_cli_prints_the_timeline_and_zooms_around_a_finding() {
    let dir = incident("2026-11-27-ct200-ghost-ddtree");
    let all = bin()
        .args(["timeline", dir.to_str().unwrap(), "--color", "never"])
        .output()
        .unwrap();
    assert_eq!(all.status.code(), Some(0));
    let all = String::from_utf8_lossy(&all.stdout);
    assert!(
        all.starts_with("Timeline of ct200. Times are in UTC"),
        "{all}"
    );
    assert!(all.contains("[no timestamp: placed after line 1]"), "{all}");

    let zoom = bin()
        .args([
            "timeline",
            dir.to_str().unwrap(),
            "--around",
            "sglang-unbalanced-memory",
            "--window",
            "2s",
        ])
        .output()
        .unwrap();
    let zoom = String::from_utf8_lossy(&zoom.stdout);
    assert!(zoom.lines().count() < all.lines().count());
    assert!(
        !zoom.lines().any(|l| l.starts_with("2026-11-24")),
        "outside the window: {zoom}"
    );
    // The root cause's lines are flagged (with the wrapper that cites them too).
    assert!(
        zoom.lines()
            .any(|l| l.contains("journal.txt:179") && l.contains(" F1")),
        "{zoom}"
    );

    let unknown = bin()
        .args(["timeline", dir.to_str().unwrap(), "--around", "F7"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn ndjson_is_one_self_contained_object_per_finding() {
    let dir = incident("2026-11-27-ct200-ghost-ddtree");
    let o = bin()
        .args([dir.to_str().unwrap(), "--output", "ndjson"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    // The root cause, then SGLang's self-kill wrapper (info) it explains.
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[1]["rule"], "sglang-child-failed");
    assert_eq!(lines[1]["root_cause"], false);
    let f = &lines[0];
    assert_eq!(f["host"], "ct200");
    assert_eq!(f["bundle"], "2026-11-27-ct200-ghost-ddtree");
    assert_eq!(f["captured_at"], "2026-11-27T09:41:12Z");
    assert_eq!(f["rule"], "sglang-unbalanced-memory");
    assert_eq!(f["category"], "gpu-memory-held-by-other-process");
    assert_eq!(f["root_cause"], true);
    assert_eq!(f["entities"]["pids"], serde_json::json!([20629]));

    let healthy = bin()
        .args([
            incident("2026-03-05-h200-healthy-start").to_str().unwrap(),
            "-o",
            "ndjson",
        ])
        .output()
        .unwrap();
    assert!(healthy.stdout.is_empty(), "no finding, no line");
}
