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
    // The same bundle as a tar file: its member names are cleaned too.
    shell(&scratch.path, "tar cf inj.tar inj");
    for args in [&["--color", "never"][..], &["timeline"], &["inputs"]] {
        let o = bin()
            .args(args)
            .arg(scratch.path.join("inj.tar"))
            .output()
            .unwrap();
        assert!(
            o.status.code().is_some_and(|c| c <= 1),
            "{args:?}: {}",
            out(&o)
        );
        let text = String::from_utf8(o.stdout).unwrap();
        assert!(
            text.contains("# Forged <img"),
            "{args:?}: the member is read:\n{text}"
        );
        assert_terminal_safe(&format!("tar {args:?}"), &text);
    }
    // The script is printable ASCII.
    let path = scratch.path.join("fix.sh");
    let o = bin()
        .arg(&case)
        .args(["-q", "--script"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let script = fs::read_to_string(&path).unwrap();
    assert!(script.contains("\nlog \"all steps done\""), "{script}");
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
            l.chars().count() <= 600,
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

// D7: bounded on any input. (The memory numbers are benchmarks,
// docs/performance.md; these check what bounds them.)

/// The gaps of a JSON report, as `command: detail` lines.
fn gaps(report: &serde_json::Value) -> Vec<String> {
    report["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            format!(
                "{}: {}",
                g["command"].as_str().unwrap(),
                g["detail"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(o)))
}

/// `cmd` run by sh in the folder `dir` (scratch paths hold parentheses).
fn shell(dir: &std::path::Path, cmd: &str) {
    let o = std::process::Command::new("sh")
        .args(["-c", cmd])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{cmd}: {}", out(&o));
}

#[test]
fn d7_a_compressed_bomb_is_read_as_a_stream_and_its_endless_line_cut() {
    crate::support::require_tool("gzip", "gzip");
    crate::support::require_tool("zstd", "zstd");
    let scratch = Scratch::new("probe-d7-bomb");
    shell(&scratch.path, "head -c 64M /dev/zero | gzip -c > z.gz");
    shell(&scratch.path, "head -c 64M /dev/zero | zstd -q -3 -o z.zst");
    for file in ["z.gz", "z.zst"] {
        let o = bin()
            .arg(scratch.path.join(file))
            .args(["-o", "json"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{file}: {}", out(&o));
        let gaps = gaps(&json_of(&o));
        let want = format!(
            "1 line longer than 1 MiB cut to it; {} bytes not read",
            (64 << 20) - (1 << 20)
        );
        assert!(gaps.iter().any(|g| g.ends_with(&want)), "{file}: {gaps:?}");
    }
}

#[test]
fn d7_an_endless_line_on_stdin_is_cut() {
    let o = std::process::Command::new("sh")
        .args([
            "-c",
            &format!(
                "head -c 40M /dev/zero | {} -o json",
                env!("CARGO_BIN_EXE_rootcause")
            ),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let gaps = gaps(&json_of(&o));
    assert!(
        gaps.iter()
            .any(|g| g.starts_with("read stdin: 1 line longer than 1 MiB cut")),
        "{gaps:?}"
    );
}

#[test]
fn d7_lines_in_no_known_format_are_not_held_for_the_first_strong_line() {
    let scratch = Scratch::new("probe-d7-pending");
    let path = scratch.path.join("x.log");
    let mut text = "some line of an unknown tool\n".repeat(20_000);
    text.push_str("[2026-11-27 09:38:52 TP1] Load weight begin.\n");
    fs::write(&path, text).unwrap();
    let o = bin().arg("inputs").arg(&path).output().unwrap();
    let listing = out(&o);
    // The unknown lines are a segment of their own, decided long before the
    // SGLang line: they were not held for it.
    assert!(listing.contains(":1-20000: unknown"), "{listing}");
    assert!(listing.contains(":20001-20001: sglang-log"), "{listing}");
}

// D8: distinct error lines are grouped in linear time: 50,000 of them took
// minutes when each was compared with every other.

#[test]
fn d8_fifty_thousand_distinct_error_lines_are_grouped() {
    let scratch = Scratch::new("probe-d8");
    let path = scratch.path.join("q.txt");
    let mut text = String::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..50_000 {
        let word: String = (0..12)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect();
        text.push_str(&format!(
            "RuntimeError: CUDA error: an illegal memory access was encountered in kernel {word}\n"
        ));
    }
    fs::write(&path, text).unwrap();
    let o = bin().arg(&path).args(["-o", "json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let report = json_of(&o);
    // Past the aggregator's template limit the lines group by how they
    // start: the finding counts the lines read, the repeated-lines record
    // the ones only counted; together, every line.
    let read = report["findings"][0]["occurrences"].as_u64().unwrap();
    let counted: u64 = report["repeated_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["count"].as_u64().unwrap()
                - r["read_first"].as_u64().unwrap()
                - r["kept_last"].as_u64().unwrap()
        })
        .sum();
    assert!(read < 50_000 && counted > 0, "{}", report["repeated_lines"]);
    assert_eq!(read + counted, 50_000, "{}", report["findings"][0]);
}

// D10: a FIFO, /dev/stdin and <(cmd) are read once and whole; a device is refused.

#[test]
fn d10_pipes_are_read_once_whole_and_devices_refused() {
    let seed_smi = incident(SEED).join("nvidia-smi.txt");
    let lines = fs::read_to_string(&seed_smi).unwrap().lines().count();
    // <(cat …) and a piped /dev/stdin: every line, not the first 32 bytes lost.
    for cmd in [
        format!(
            "{} inputs <(cat '{}')",
            env!("CARGO_BIN_EXE_rootcause"),
            seed_smi.display()
        ),
        format!(
            "cat '{}' | {} inputs /dev/stdin",
            seed_smi.display(),
            env!("CARGO_BIN_EXE_rootcause")
        ),
    ] {
        let o = std::process::Command::new("bash")
            .args(["-c", &cmd])
            .output()
            .unwrap();
        assert!(
            out(&o).contains(&format!(":1-{lines}: nvidia-smi-table")),
            "{cmd}: {}",
            out(&o)
        );
    }
    // A FIFO whose writer has finished by the time it is read: no hang.
    let scratch = Scratch::new("probe-d10");
    let fifo = scratch.path.join("f");
    shell(&scratch.path, "mkfifo f");
    let writer = {
        let (fifo, smi) = (fifo.clone(), seed_smi.clone());
        std::thread::spawn(move || fs::write(&fifo, fs::read(&smi).unwrap()).unwrap())
    };
    let o = std::process::Command::new("timeout")
        .arg("20")
        .arg(env!("CARGO_BIN_EXE_rootcause"))
        .arg("inputs")
        .arg(&fifo)
        .output()
        .unwrap();
    writer.join().unwrap();
    assert!(
        out(&o).contains(&format!(":1-{lines}: nvidia-smi-table")),
        "{}",
        out(&o)
    );
    // /dev/zero has no end: refused at once, with its name.
    let o = std::process::Command::new("timeout")
        .args(["20", env!("CARGO_BIN_EXE_rootcause"), "/dev/zero"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains("cannot read /dev/zero: a device"),
        "{}",
        out(&o)
    );
}

// D11: bundles in any packing read as the folder.

#[test]
fn d11_tar_gz_and_tar_zst_bundles_read_like_the_folder() {
    crate::support::require_tool("zstd", "zstd");
    let scratch = Scratch::new("probe-d11");
    let case = "2025-06-14-h100node3-stale-sglang";
    copy_dir(&incident(case), &scratch.path.join("b2"));
    shell(
        &scratch.path,
        "tar czf b2.tar.gz b2 && tar cf - b2 | zstd -q -o b2.tar.zst",
    );
    let folder = json_of(
        &bin()
            .arg(scratch.path.join("b2"))
            .args(["-o", "json"])
            .output()
            .unwrap(),
    );
    assert!(!folder["capture"].is_null());
    for packed in ["b2.tar.gz", "b2.tar.zst"] {
        let o = bin()
            .arg(scratch.path.join(packed))
            .args(["-o", "json"])
            .output()
            .unwrap();
        assert_eq!(json_of(&o), folder, "{packed}");
    }
    // A compressed member of a tar is decoded.
    shell(&scratch.path, "gzip b2/journal.txt && tar cf b3.tar b2");
    let o = bin()
        .arg(scratch.path.join("b3.tar"))
        .args(["-o", "json"])
        .output()
        .unwrap();
    let report = json_of(&o);
    assert_eq!(report["root_cause"], folder["root_cause"]);
    assert!(
        report["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "journal.txt.gz"
                && i["format"].as_str().unwrap().starts_with("journal")),
        "{}",
        report["inputs"]
    );
}

// D12: one bad member is a gap; the rest is analysed; no link leads out.

#[test]
fn d12_bad_members_are_gaps_and_links_out_of_the_bundle_are_not_followed() {
    use std::os::unix::fs::symlink;
    crate::support::require_tool("gzip", "gzip");
    let scratch = Scratch::new("probe-d12");
    let case = seed_copy(&scratch, "b", false);
    symlink("/etc", case.join("etc")).unwrap();
    symlink("/etc/passwd", case.join("passwd.log")).unwrap();
    symlink("missing.log", case.join("dangling.log")).unwrap();
    symlink(".", case.join("self")).unwrap();
    shell(&case, "mkfifo fifo.log");
    // A truncated .gz: what came before the cut is still read.
    shell(
        &case,
        "seq 1 100000 | sed 's/^/line /' | gzip -c > full.gz && head -c 20000 full.gz > cut.log.gz && rm full.gz",
    );
    let o = bin().arg(&case).args(["-o", "json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let report = json_of(&o);
    let plain = json_of(
        &bin()
            .arg(incident(SEED))
            .args(["-o", "json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        report["findings"][0]["headline"],
        plain["findings"][0]["headline"]
    );
    let gaps = gaps(&report);
    for (member, why) in [
        ("etc", "a link out of the bundle"),
        ("passwd.log", "a link out of the bundle"),
        ("dangling.log", "a link that leads nowhere readable"),
        ("self", "a link to a folder already read"),
        ("fifo.log", "not a regular file"),
        ("cut.log.gz", "stopped after line"),
    ] {
        assert!(
            gaps.iter()
                .any(|g| g.starts_with(&format!("read {member}: {why}"))),
            "{member}: {gaps:?}"
        );
    }
    let listing = out(&bin().arg("inputs").arg(&case).output().unwrap());
    assert!(!listing.contains("root:x:0:0"), "{listing}");
    assert!(listing.contains("cut.log.gz:1-"), "{listing}");
}

// D5 and D18: the target is the unit that failed, never the holder's.

#[test]
fn d5_the_baseline_restarts_the_failed_unit_not_the_holder() {
    let o = bin()
        .arg(crate::support::fixtures().join("hostile/baseline"))
        .args(["-o", "json"])
        .output()
        .unwrap();
    let report = json_of(&o);
    let f = &report["findings"][0];
    assert!(
        f["headline"]
            .as_str()
            .unwrap()
            .contains("so sglang-k26.service failed"),
        "{}",
        f["headline"]
    );
    let restarts: Vec<&str> = f["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == "restart-unit")
        .map(|a| a["unit"].as_str().unwrap())
        .collect();
    assert_eq!(restarts, ["sglang-k26.service"]);
}

#[test]
fn d18_garbage_prefixes_do_not_make_the_holder_the_target() {
    let scratch = Scratch::new("probe-d18");
    let case = seed_copy(&scratch, "garbled", false);
    for entry in fs::read_dir(&case).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() == "manifest.json" {
            continue;
        }
        let bytes = fs::read(&path).unwrap();
        let mut garbled = Vec::new();
        for (i, line) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
            if i % 2 == 1 {
                garbled.extend_from_slice(b"\xff\xfe\xc3(");
            }
            garbled.extend_from_slice(line);
        }
        fs::write(&path, garbled).unwrap();
    }
    let o = bin().arg(&case).args(["-o", "json"]).output().unwrap();
    let report = json_of(&o);
    for f in report["findings"].as_array().unwrap() {
        for a in f["actions"].as_array().unwrap() {
            if matches!(
                a["type"].as_str(),
                Some("restart-unit" | "verify-unit-active")
            ) {
                assert_ne!(a["unit"], "ddtree-qwen.service", "{}", f["headline"]);
            }
        }
    }
}

/// D18's other half: a server line logged by the failed unit's PID after
/// the unit exited is not the holder's.
#[test]
fn d18_a_line_after_the_units_exit_is_not_blamed_on_the_holder() {
    let scratch = Scratch::new("probe-d18-late");
    let case = seed_copy(&scratch, "late", false);
    let mut journal = fs::read_to_string(case.join("journal.txt")).unwrap();
    journal.push_str("2026-11-27T09:39:30+0000 ct200 python3[31544]: ERROR: CUDA error: an illegal memory access was encountered\n");
    fs::write(case.join("journal.txt"), journal).unwrap();
    let report = json_of(&bin().arg(&case).args(["-o", "json"]).output().unwrap());
    let fault = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "cuda-illegal-memory-access")
        .expect("the fault is reported");
    let headline = fault["headline"].as_str().unwrap();
    assert!(!headline.contains("ddtree-qwen.service"), "{headline}");
    for a in fault["actions"].as_array().unwrap() {
        assert_ne!(a["unit"], "ddtree-qwen.service", "{a}");
    }
}

// D1's other side: a genuine paste of nvidia-smi, ps and systemctl status in
// one stdin stands in its own input and keeps the seed's full remediation;
// the same blocks below a server log are only advice.

fn paste_of(files: &[&str]) -> String {
    files
        .iter()
        .map(|f| fs::read_to_string(incident(SEED).join(f)).unwrap())
        .collect()
}

fn analyse_stdin(text: &str) -> serde_json::Value {
    use std::io::Write;
    let mut child = bin()
        .args(["-", "-o", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    json_of(&child.wait_with_output().unwrap())
}

fn action_types(report: &serde_json::Value) -> Vec<String> {
    report["findings"][0]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["type"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn d1_a_genuine_paste_of_host_outputs_keeps_the_full_remediation() {
    let paste = paste_of(&[
        "nvidia-smi.txt",
        "ps.txt",
        "systemctl-status-ddtree-qwen.txt",
        "systemctl-status-sglang-k26.txt",
    ]);
    let report = analyse_stdin(&paste);
    assert_eq!(
        action_types(&report)[..5],
        [
            "stop-unit",
            "terminate-process",
            "wait-gpu-memory-free",
            "restart-unit",
            "verify-unit-active"
        ]
    );
    let actions = &report["findings"][0]["actions"];
    assert_eq!(actions[0]["unit"], "ddtree-qwen.service");
    assert_eq!(actions[1]["expected_start"], "Tue Nov 24 14:02:17 2026");
    assert_eq!(actions[3]["unit"], "sglang-k26.service");

    // The same blocks pasted below the server's log, with no prompt: they
    // stand inside that log, and nothing is scripted on their word.
    let mut below_log = fs::read_to_string(incident(SEED).join("sglang.log")).unwrap();
    below_log.push_str(&paste);
    let report = analyse_stdin(&below_log);
    let types = action_types(&report);
    assert!(
        types.iter().all(|t| t == "advice"),
        "{types:?}: {}",
        report["findings"][0]["refused_values"]
    );
}

// D17's other half: the order the files are given in changes nothing.

#[test]
fn d17_the_order_of_the_inputs_changes_no_report() {
    let mut files: Vec<PathBuf> = fs::read_dir(incident(SEED))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|x| x == "txt" || x == "log" || x == "csv")
        })
        .collect();
    files.sort();
    let scratch = Scratch::new("probe-d17-order");
    let script = scratch.path.join("fix.sh");
    let run = |files: &[PathBuf]| {
        let o = bin()
            .args(files)
            .args(["-o", "json", "--script"])
            .arg(&script)
            .output()
            .unwrap();
        format!("{}{}", out(&o), fs::read_to_string(&script).unwrap())
    };
    let forward = run(&files);
    files.reverse();
    assert_eq!(run(&files), forward);
}
