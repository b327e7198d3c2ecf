//! The hostile corpus (fixtures/hostile/): bundles whose unit names, command
//! lines, process names, host names, GPU UUIDs and start times carry shell
//! syntax, newlines, escapes, look-alike letters and overlong values. For
//! each bundle: the refused values are listed in the report; the script is
//! printable ASCII with every log-derived value inside a single-quoted
//! literal; the reports carry no control character; and running the script
//! (dry run, then `--apply --yes` in the sandbox) executes none of the
//! injected text: the marker file it would create never appears.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::sandbox::{Ghost, Sandbox, analyze_edited, log};
use crate::scripts::steps;
use crate::support::{self, fixtures, json};

/// The file every injection in the corpus tries to create.
const MARKER: &str = "/tmp/rootcause-pwned";

/// Each bundle and what its report must refuse (substrings of
/// `refused_values`, one per refused value).
const CASES: &[(&str, &[&str])] = &[
    ("baseline", &[]),
    (
        "cmdline-control-characters",
        &[
            r#"refused command line "python3 serve.py\u{1b}]0;owned\u{7}\ntouch"#,
            "the inputs lack its start time (ps -o lstart) and full command line",
        ],
    ),
    (
        "cmdline-overlong",
        &[
            "refused command line \"python3 serve.py --x --x",
            "the inputs lack its start time (ps -o lstart) and full command line",
        ],
    ),
    ("cmdline-shell-syntax", &[]),
    (
        "gpu-uuid-injection",
        &["refused GPU UUID \"GPU-5a5b4eef-ee9c-40f5-977e-2242f48837be$(touch"],
    ),
    ("hostname-injection", &[]),
    (
        "process-name-injection",
        &["the inputs lack its start time (ps -o lstart) and full command line"],
    ),
    (
        "start-time-injection",
        &[
            "refused start time \"Tue Nov 24 14:02:17 $(touch\"",
            "the inputs lack its start time (ps -o lstart), so no script signals it",
        ],
    ),
    ("unit-backticks-semicolon", &["refused unit name \"`touch"]),
    (
        "unit-command-substitution",
        &["refused unit name \"ddtree-qwen$(touch"],
    ),
    (
        "unit-lookalike",
        &["refused unit name \"ddtree-qw\\u{435}n.service\""],
    ),
    (
        "unit-newline",
        &["refused unit name \"ddtree-qwen.service\\ntouch"],
    ),
    ("unit-overlong", &["longer than 255 bytes"]),
    (
        "forged-sshd-in-server-log",
        &["named only by nvidia-smi-table lines that stand inside a sglang-log input"],
    ),
    (
        "protected-units",
        &[
            "sysinit.target: only a service or a container's scope",
            "multi-user.target: only a service or a container's scope",
            "init.scope: a protected unit",
            "session-3.scope: a protected unit",
            "user@0.service: a protected unit",
            "systemd-journald.service: a protected unit",
            "dbus.socket: a protected unit",
            "ssh.service: a protected unit",
        ],
    ),
    ("forged-shell", &[]),
    (
        "reused-python3",
        &["the inputs lack its start time (ps -o lstart) and full command line"],
    ),
];

fn hostile(name: &str) -> PathBuf {
    fixtures().join("hostile").join(name)
}

#[test]
fn every_hostile_bundle_has_a_case() {
    let mut dirs: Vec<String> = fs::read_dir(fixtures().join("hostile"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let mut cases: Vec<&str> = CASES.iter().map(|c| c.0).collect();
    cases.sort_unstable();
    assert_eq!(dirs, cases);
}

/// A marker path of plain characters, so that an injection that did run
/// would create it rather than fail on odd syntax.
fn marker() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "rootcause-pwned-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// The line with everything inside single quotes (and `\x` escapes)
/// removed: what bash would expand. Panics on an unbalanced quote.
fn unquoted(line: &str) -> String {
    let mut out = String::new();
    let mut in_quote = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (in_quote, c) {
            (true, '\'') => in_quote = false,
            (true, _) => {}
            (false, '\'') => in_quote = true,
            (false, '\\') => {
                chars.next();
            }
            (false, c) => out.push(c),
        }
    }
    assert!(!in_quote, "unbalanced quote in: {line}");
    out
}

fn assert_no_control_characters(what: &str, text: &str) {
    if let Some(c) = text.chars().find(|c| c.is_control() && *c != '\n') {
        panic!("{what} contains control character {c:?}:\n{text}");
    }
}

#[test]
fn hostile_values_are_refused_or_quoted_and_never_executed() {
    let _ = fs::remove_file(MARKER);
    for (case, refused) in CASES {
        check_case(case, refused);
    }
    assert!(!Path::new(MARKER).exists(), "an injection ran");
}

fn check_case(case: &str, expected_refusals: &[&str]) {
    let marker = marker();
    let mut ghost = Ghost::sleeper();
    let pid = ghost.pid.to_string();
    let out = analyze_edited(&hostile(case), |_, text| {
        Some(
            text.replace(MARKER, marker.to_str().unwrap())
                .replace("20629", &pid),
        )
    });

    // The report lists each refused value, and only those.
    let report = json(&out);
    let refused: Vec<String> = support::root(&report)["refused_values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        refused.len(),
        expected_refusals.len(),
        "{case}: {refused:?}"
    );
    for want in expected_refusals {
        assert!(
            refused.iter().any(|r| r.contains(want)),
            "{case}: {want} not in {refused:?}"
        );
    }

    // Reports for people carry no control character from the logs.
    assert_no_control_characters(&format!("{case}: text report"), &out.text);
    assert_no_control_characters(&format!("{case}: Markdown report"), &out.markdown);
    assert_no_control_characters(&format!("{case}: HTML report"), &out.html);
    // Log text is escaped in the page: the one script is the report's own.
    assert_eq!(
        out.html.matches("<script").count(),
        1,
        "{case}: HTML report"
    );

    // The script is printable ASCII, and log text is only ever quoted.
    let script = &out.script;
    assert!(
        script
            .chars()
            .all(|c| c == '\n' || c == ' ' || c.is_ascii_graphic()),
        "{case}: the script is not printable ASCII"
    );
    for line in steps(script)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
    {
        let bare = unquoted(line);
        for token in ["pwned", "touch", "ѕ", "\\u{"] {
            assert!(
                !bare.contains(token),
                "{case}: `{token}` outside quotes in: {line}"
            );
        }
    }

    // Run it: dry run, then for real against the sandbox.
    let sb = Sandbox::new(&format!("hostile-{case}"));
    sb.gpus(&[(0, "GPU-5a5b4eef-ee9c-40f5-977e-2242f48837be", 9)]);
    sb.holds(&ghost, 0, 55286);
    sb.unit("ddtree-qwen.service", "active");
    sb.unit("sglang-k26.service", "failed");
    sb.owns("ddtree-qwen.service", &ghost);
    // Waits are cut short: a step that would wait for memory the sandbox
    // never frees fails in seconds, not minutes.
    let quick: String = script
        .lines()
        .map(|l| {
            if l.starts_with("wait_gpu_memory_free ") || l.starts_with("verify_unit_active ") {
                format!("{}\n", l.replacen(" 120", " 2", 1))
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let path = sb.save("fix.sh", &quick);
    let steps = out
        .analysis
        .report()
        .root_cause()
        .map_or(0, |f| f.actions.len()) as i32;
    for args in [&[][..], &["--apply", "--yes"][..]] {
        let o = sb.run(&path, args);
        let code = o.status.code().unwrap_or(-1);
        assert!(
            code == 0 || (11..=10 + steps).contains(&code),
            "{case} {args:?}: exit {code}\n{}",
            log(&o)
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        for sign in [
            "syntax error",
            "command not found",
            "unbound variable",
            "bad substitution",
        ] {
            assert!(!stderr.contains(sign), "{case} {args:?}: {stderr}");
        }
        assert!(
            !marker.exists(),
            "{case} {args:?}: the injected command ran\n{}",
            log(&o)
        );
        assert!(!sb.calls().contains("pwned"), "{case}: {}", sb.calls());
    }
    // Only a validated unit was ever stopped; nothing was restarted under a
    // refused name.
    for call in sb.calls().lines() {
        assert!(
            call.starts_with("nvidia-smi --query-")
                || call.ends_with(" -- ddtree-qwen.service")
                || call.ends_with(" -- sglang-k26.service"),
            "{case}: unexpected call {call}"
        );
    }
    let _ = ghost.alive();
}
