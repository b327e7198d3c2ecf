//! `rootcause replay`: the repo's own incidents replay clean against their
//! approved reports; a changed rule or expectation fails with a readable
//! diff, and `--bless` makes it pass again.

use std::fs;
use std::path::PathBuf;
use std::process::Output;

use crate::support::{Scratch, bin, copy_dir, fixtures, incident};

fn replay(args: &[&str]) -> Output {
    bin()
        .arg("replay")
        .args(args)
        .output()
        .expect("binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn last_line(o: &Output) -> String {
    stdout(o).lines().last().unwrap_or_default().to_owned()
}

/// What the shell makes of `fixtures/incidents/*`: every entry, the README
/// included (replay skips what is not a bundle).
fn incidents_glob() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = fs::read_dir(fixtures().join("incidents"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    all.sort();
    all
}

#[test]
fn the_repos_incidents_replay_clean() {
    let paths = incidents_glob();
    let bundles = paths.iter().filter(|p| p.is_dir()).count();
    assert!(bundles >= 8, "{paths:?}");
    for dir in paths.iter().filter(|p| p.is_dir()) {
        for file in ["report.json", "report.md"] {
            assert!(
                dir.join("expected").join(file).is_file(),
                "{} has no approved {file}: run `rootcause replay --bless` on it and read the result",
                dir.display()
            );
        }
    }
    let args: Vec<&str> = paths.iter().map(|p| p.to_str().unwrap()).collect();
    let o = replay(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(last_line(&o), format!("{bundles} passed, 0 failed"));
    assert!(stdout(&o).contains("skipped"), "the README is not a bundle");
}

/// The seed bundle in a scratch folder, under its own name.
fn seed_copy(scratch: &Scratch) -> PathBuf {
    let dir = scratch.path.join("2026-11-27-ct200-ghost-ddtree");
    copy_dir(&incident("2026-11-27-ct200-ghost-ddtree"), &dir);
    dir
}

#[test]
fn a_changed_expectation_fails_with_a_diff_and_bless_fixes_it() {
    let scratch = Scratch::new("replay-edit");
    let dir = seed_copy(&scratch);
    let json = dir.join("expected/report.json");
    let approved = fs::read_to_string(&json).unwrap();
    fs::write(
        &json,
        approved.replace("\"confidence\": 0.99", "\"confidence\": 0.42"),
    )
    .unwrap();
    let junit = scratch.path.join("junit.xml");

    let o = replay(&[
        dir.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--color",
        "never",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains("FAILED "), "{out}");
    assert!(out.contains("report.json differs"), "{out}");
    assert!(
        out.contains("--- expected/report.json\n+++ report.json (this rootcause)\n"),
        "{out}"
    );
    assert!(
        out.contains("-      \"confidence\": 0.42,\n+      \"confidence\": 0.99,\n"),
        "{out}"
    );
    assert!(
        !out.contains("report.md differ"),
        "only the edited file differs: {out}"
    );
    assert_eq!(last_line(&o), "0 passed, 1 failed");
    let xml = fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(xml.contains("<failure type=\"report-diff\""), "{xml}");
    assert!(xml.contains("+      &quot;confidence&quot;: 0.99"), "{xml}");

    let blessed = replay(&["--bless", dir.to_str().unwrap()]);
    assert_eq!(blessed.status.code(), Some(0), "{}", stdout(&blessed));
    assert!(stdout(&blessed).contains("wrote expected/report.json"));
    assert_eq!(fs::read_to_string(&json).unwrap(), approved);
    let again = replay(&[dir.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
    assert_eq!(last_line(&again), "1 passed, 0 failed");
}

#[test]
fn a_new_rule_changes_the_reports_until_blessed() {
    let scratch = Scratch::new("replay-rule");
    let dir = seed_copy(&scratch);
    let rules = scratch.path.join("rules");
    fs::create_dir_all(&rules).unwrap();
    fs::write(
        rules.join("allreduce.toml"),
        r#"id = "custom-allreduce-off"
category = "unknown"
severity = "info"
summary = "custom allreduce is disabled on PCIe-only GPUs"
anchors = ["Custom allreduce is disabled"]
patterns = ['Custom allreduce is disabled']
title = "custom allreduce is off"
explanation = "More than two PCIe-only GPUs: NCCL does the allreduce."

[doc]
what_it_means = "SGLang falls back to NCCL for allreduce."
why_it_happens = "No NVLink between more than two GPUs."
how_to_confirm = "`nvidia-smi topo -m`."
how_to_fix = "Nothing to fix."
safety = "Informational."
"#,
    )
    .unwrap();
    let with_rule = ["--rules", rules.to_str().unwrap(), dir.to_str().unwrap()];
    let o = replay(&with_rule);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains("report.json, report.md differ"), "{out}");
    // After the root cause (F1) and SGLang's self-kill wrapper (F2).
    assert!(
        out.contains("+| F3 | info | `unknown` | `custom-allreduce-off`"),
        "{out}"
    );

    let mut bless = vec!["--accept"];
    bless.extend(with_rule);
    assert_eq!(replay(&bless).status.code(), Some(0));
    assert_eq!(replay(&with_rule).status.code(), Some(0));
    // Without the rule the new expectation is what fails now.
    assert_eq!(replay(&[dir.to_str().unwrap()]).status.code(), Some(1));
}

#[test]
fn a_folder_of_bundles_is_replayed_one_level_down() {
    let scratch = Scratch::new("replay-tree");
    let _dir = seed_copy(&scratch);
    copy_dir(
        &incident("2026-03-05-h200-healthy-start"),
        &scratch.path.join("2026-03-05-h200-healthy-start"),
    );
    let o = replay(&[scratch.path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(last_line(&o), "2 passed, 0 failed");
}
