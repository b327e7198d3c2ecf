//! The reliability probe of 2026-12-03 (shared/reliability/probe-2026-12-03.md,
//! issue 18): each defect's reproduction, run through the binary or the
//! library, and the safe outcome it must now give. The sandbox runs of the
//! scripts (forged holders that the live host does not show on the GPU) are
//! in `forged.rs`.

use std::fs;
use std::path::PathBuf;
use std::process::Output;

use crate::support::{Scratch, bin, copy_dir, incident};

const SEED: &str = "2026-11-27-ct200-ghost-ddtree";

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The seed bundle copied to `scratch/name`, without its approved reports
/// unless `expected`.
fn seed_copy(scratch: &Scratch, name: &str, expected: bool) -> PathBuf {
    let dir = scratch.path.join(name);
    copy_dir(&incident(SEED), &dir);
    if !expected {
        fs::remove_dir_all(dir.join("expected")).unwrap();
    }
    dir
}

/// No byte a terminal interprets: no C0 or C1 control but the newline, no
/// escape, no bidi override.
fn assert_terminal_safe(what: &str, text: &str) {
    if let Some(c) = text.chars().find(|c| {
        (c.is_control() && *c != '\n')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }) {
        panic!("{what} carries {c:?}:\n{text}");
    }
}

// D4: replay follows no link in `expected/`, and --bless writes through none.

#[test]
fn d4_replay_prints_no_file_a_link_in_expected_points_at() {
    let scratch = Scratch::new("probe-d4-leak");
    let case = seed_copy(&scratch, "leak", true);
    fs::remove_file(case.join("expected/report.md")).unwrap();
    std::os::unix::fs::symlink("/proc/self/environ", case.join("expected/report.txt")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", case.join("expected/report.md")).unwrap();
    let o = bin()
        .arg("replay")
        .arg(&case)
        .env("SECRET_CI_TOKEN", "ghp_probe_secret")
        .output()
        .unwrap();
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(!text.contains("ghp_probe_secret"), "{text}");
    assert!(!text.contains("root:x:0:0"), "{text}");
    assert!(
        text.contains("a link: only regular files inside the bundle are read"),
        "{text}"
    );
}

#[test]
fn d4_bless_never_writes_through_a_link() {
    let scratch = Scratch::new("probe-d4-bless");
    let victim = scratch.path.join("victim");
    fs::write(&victim, "KEEP\n").unwrap();
    let case = seed_copy(&scratch, "bl", true);
    fs::remove_file(case.join("expected/report.json")).unwrap();
    std::os::unix::fs::symlink(&victim, case.join("expected/report.json")).unwrap();
    let o = bin()
        .args(["replay", "--bless"])
        .arg(&case)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "KEEP\n");

    // `expected` itself a link to a folder elsewhere: refused, nothing written there.
    let elsewhere = scratch.path.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let case = seed_copy(&scratch, "bl2", false);
    std::os::unix::fs::symlink(&elsewhere, case.join("expected")).unwrap();
    let o = bin()
        .args(["replay", "--bless"])
        .arg(&case)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(fs::read_dir(&elsewhere).unwrap().next().is_none());

    // A case in a collection that is a link is not replayed at all.
    let collection = scratch.path.join("collection");
    fs::create_dir(&collection).unwrap();
    copy_dir(&incident(SEED), &collection.join("real"));
    std::os::unix::fs::symlink(&elsewhere, collection.join("linked")).unwrap();
    let o = bin().arg("replay").arg(&collection).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(!out(&o).contains("linked"), "{}", out(&o));
}

// D16: --bless replaces a report at once; a concurrent compare never reads
// half of one.

#[test]
fn d16_a_compare_during_bless_never_sees_a_partial_report() {
    let scratch = Scratch::new("probe-d16");
    let case = seed_copy(&scratch, "race", true);
    let approved = fs::read_to_string(case.join("expected/report.json")).unwrap();
    // Blessing writes a temporary file beside the report and renames it.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (stop, path) = (stop.clone(), case.join("expected/report.json"));
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let text = fs::read_to_string(&path).unwrap();
                assert!(
                    text.ends_with("}\n"),
                    "a partial report: {} bytes",
                    text.len()
                );
                reads += 1;
            }
            reads
        })
    };
    for _ in 0..3 {
        // A changed approved report makes --bless rewrite it.
        fs::write(case.join("expected/report.md"), "stale\n").unwrap();
        let o = bin()
            .args(["replay", "--bless"])
            .arg(&case)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(
        fs::read_to_string(case.join("expected/report.json")).unwrap(),
        approved
    );
    let leftovers: Vec<_> = fs::read_dir(case.join("expected"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

// D6 (replay): approved text cannot drive the terminal through the diff.

#[test]
fn d6_the_replay_diff_is_cleaned() {
    let scratch = Scratch::new("probe-d6-replay");
    let case = seed_copy(&scratch, "esc", true);
    fs::write(
        case.join("expected/report.md"),
        "# x\x1b]0;TITLE\x07\n\u{9b}2J\u{202e}evil\x1b[2J\n",
    )
    .unwrap();
    let o = bin().arg("replay").arg(&case).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("TITLE"), "{}", out(&o));
    assert_terminal_safe("the replay diff", &out(&o));
}
