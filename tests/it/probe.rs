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
    assert!(out(&o).contains("-# x?\n"), "{}", out(&o));
    assert_terminal_safe("the replay diff", &out(&o));
}

// D6: every string from the inputs is cleaned on every output path.

/// The seed with hostile manifest fields, a hostile file name and a log
/// line full of controls (the probe's rows 36, 62-64).
fn hostile_seed(scratch: &Scratch) -> PathBuf {
    let case = seed_copy(scratch, "inj", false);
    let manifest = case.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&manifest).unwrap()).unwrap();
    m["host"] = "ct200\x1b]0;TITLE\x07\nRoot cause: forged host line\n# Forged".into();
    m["commands"] = serde_json::json!([{
        "file": null,
        "command": "journalctl\x1b]0;GAP\x07\n## Forged gap",
        "status": "failed",
        "exit_code": 1,
        "duration_ms": 1,
        "bytes": 0,
        "detail": "x\x1b[2J\u{9b}2J\nRoot cause: forged detail"
    }]);
    m["timezone"] = "UTC\x1b[2J".into();
    fs::write(&manifest, serde_json::to_string(&m).unwrap()).unwrap();
    let mut journal = fs::read_to_string(case.join("journal.txt")).unwrap();
    journal.push_str("2026-11-27T09:38:53+0000 ct200 python3[31544]: ERROR: CUDA error: an illegal memory access was encountered \x07\x08\u{9b}2J\u{85}\x0b\x0c\u{202e}\u{2028}\n");
    fs::write(case.join("journal.txt"), journal).unwrap();
    fs::rename(
        case.join("nvidia-smi.txt"),
        case.join("nvidia-smi\x1b]0;NAME\x07\n# Forged <img src=x onerror=alert(1)>.txt"),
    )
    .unwrap();
    case
}

#[test]
fn d6_every_output_path_is_cleaned() {
    let scratch = Scratch::new("probe-d6");
    let case = hostile_seed(&scratch);
    let run = |args: &[&str]| {
        let o = bin().args(args).arg(&case).output().unwrap();
        assert!(
            o.status.code().is_some_and(|c| c <= 1),
            "{args:?}: {}",
            out(&o)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    for args in [
        &["--color", "never"][..],
        &["--color", "never", "-v"],
        &["-o", "markdown"],
        &["timeline"],
        &["inputs"],
    ] {
        let text = run(args);
        assert_terminal_safe(&format!("{args:?}"), &text);
        for forged in ["\nRoot cause: forged", "\n# Forged", "\n## Forged"] {
            assert!(!text.contains(forged), "{args:?} forged a line:\n{text}");
        }
        if args.get(1) == Some(&"markdown") {
            // Markup from a name is shown only inside a code span, where
            // Markdown renders it as text.
            for line in text.lines() {
                if let Some(at) = line.find("<img") {
                    let ticks = line[..at].matches('`').count();
                    assert!(ticks % 2 == 1, "raw markup in Markdown: {line}");
                }
            }
        }
    }
    // The script is printable ASCII.
    let o = bin()
        .arg(&case)
        .args(["-q", "--script", "-"])
        .output()
        .unwrap();
    let script = String::from_utf8(o.stdout).unwrap();
    assert!(
        script
            .chars()
            .all(|c| c == '\n' || c == ' ' || c.is_ascii_graphic()),
        "{script}"
    );
}

// D14: the text report never prints an unrecognised line whole.

#[test]
fn d14_a_huge_unrecognised_error_line_is_cut_to_the_width() {
    let scratch = Scratch::new("probe-d14");
    let path = scratch.path.join("one.log");
    let mut line = String::from("RuntimeError: CUDA out of memory. ");
    line.push_str(&"x".repeat(4 << 20));
    line.push('\n');
    fs::write(&path, line).unwrap();
    let o = bin()
        .arg(&path)
        .args(["--color", "never"])
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", out(&o));
    assert!(
        o.stdout.len() < 64 << 10,
        "{} bytes of report",
        o.stdout.len()
    );
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        assert!(
            l.chars().count() <= 200,
            "{} characters: {}…",
            l.len(),
            &l[..80]
        );
    }
}

// D17: an OSC title at column 0 is removed whole; the bundle still reads.

#[test]
fn d17_osc_sequences_at_column_zero_do_not_hide_the_logs() {
    let scratch = Scratch::new("probe-d17");
    let case = seed_copy(&scratch, "osc", false);
    for entry in fs::read_dir(&case).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() == "manifest.json" {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let titled: String = text
            .lines()
            .enumerate()
            .map(|(i, l)| match i % 3 {
                0 => format!("\x1b]0;title {i}\x07{l}\n"),
                1 => format!("\x1b]8;;file:///x\x1b\\{l}\x1b]8;;\x1b\\\n"),
                _ => format!("\u{9d}2;t\u{9c}{l}\n"),
            })
            .collect();
        fs::write(&path, titled).unwrap();
    }
    let plain = bin().arg(incident(SEED)).arg("-q").output().unwrap();
    let titled = bin().arg(&case).arg("-q").output().unwrap();
    assert_eq!(titled.status.code(), Some(1), "{}", out(&titled));
    assert_eq!(out(&titled), out(&plain));
}
