//! End-to-end: the binary on files, bundle directories and stdin; exit codes
//! and error messages.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::support::incident;

fn rootcause(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rootcause"))
        .args(args)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or_default()).unwrap();
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn root_cause_line(o: &Output) -> String {
    stdout(o).lines().next().unwrap_or_default().to_owned()
}

#[test]
fn a_bundle_directory_reports_findings_with_exit_code_1() {
    let dir = incident("2026-11-27-ct200-ghost-ddtree");
    let o = rootcause(&[dir.to_str().unwrap()], None);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(root_cause_line(&o).contains("PID 20629"));
    assert!(
        !stdout(&o).contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
}

#[test]
fn files_directory_and_stdin_give_the_same_root_cause() {
    let dir = incident("2026-11-27-ct200-ghost-ddtree");
    let files: Vec<String> = [
        "sglang.log",
        "nvidia-smi.txt",
        "journal.txt",
        "systemctl-status-ddtree-qwen.txt",
    ]
    .iter()
    .map(|f| dir.join(f).to_string_lossy().into_owned())
    .collect();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let from_files = rootcause(&args, None);

    let paste =
        std::fs::read(incident("2026-11-27-ct200-ghost-ddtree-paste").join("paste.txt")).unwrap();
    let from_stdin = rootcause(&[], Some(&paste));
    let from_dash = rootcause(&["-"], Some(&paste));

    let expected = root_cause_line(&rootcause(&[dir.to_str().unwrap()], None));
    assert_eq!(root_cause_line(&from_files), expected);
    assert_eq!(root_cause_line(&from_stdin), expected);
    assert_eq!(root_cause_line(&from_dash), expected);
    assert_eq!(from_stdin.status.code(), Some(1));
}

#[test]
fn a_healthy_start_reports_nothing_with_exit_code_0() {
    let o = rootcause(
        &[incident("2026-03-05-h200-healthy-start").to_str().unwrap()],
        None,
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(root_cause_line(&o).contains("no known failure"));
}

#[test]
fn a_missing_path_is_a_usage_error_naming_it() {
    let o = rootcause(&["/nonexistent/bundle/sglang.log"], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent/bundle/sglang.log"), "{err}");
    assert!(err.starts_with("rootcause: error: cannot read"), "{err}");
}

#[test]
fn bad_flags_exit_2() {
    let o = rootcause(&["--output", "yaml"], None);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn json_output_and_colour_flags() {
    let dir = incident("2026-11-27-ct200-ghost-ddtree");
    let o = rootcause(&[dir.to_str().unwrap(), "--output", "json"], None);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON on stdout");
    assert_eq!(v["schema_version"], 1);
    let coloured = rootcause(&[dir.to_str().unwrap(), "--color", "always"], None);
    assert!(stdout(&coloured).contains("\x1b[1m"));
}

#[test]
fn demo_names_the_ghost_and_writes_a_script() {
    let script = std::env::temp_dir().join(format!("rootcause-demo-{}.sh", std::process::id()));
    let o = rootcause(&["demo", "--script", script.to_str().unwrap()], None);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the demo succeeds: it is the README's first command"
    );
    let text = stdout(&o);
    for needle in [
        "GPU 0",
        "PID 20629",
        "ddtree-qwen.service",
        "55,286 MiB",
        "sglang-k26.service",
        "53.98 GiB",
    ] {
        assert!(text.contains(needle), "demo output lacks {needle}");
    }
    let body = std::fs::read_to_string(&script).unwrap();
    assert!(body.starts_with("#!/usr/bin/env bash\n"));
    std::fs::remove_file(script).ok();
}

#[test]
fn inputs_lists_the_segments_of_a_paste() {
    let paste =
        std::fs::read(incident("2026-11-27-ct200-ghost-ddtree-paste").join("paste.txt")).unwrap();
    let o = rootcause(&["inputs"], Some(&paste));
    let text = stdout(&o);
    for format in [
        "nvidia-smi-table",
        "journal-short",
        "systemctl-status",
        "sglang-log",
    ] {
        assert!(text.contains(format), "{format} missing from:\n{text}");
    }
}

#[test]
fn user_toml_rules_load_fire_and_validate() {
    let dir = crate::support::fixtures().join("user-rules");
    let log = dir.join("disk-full.log");
    let good = dir.join("good");
    let o = rootcause(
        &[
            log.to_str().unwrap(),
            "--rules",
            good.to_str().unwrap(),
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "disk-full")
        .expect("the user rule fired");
    assert_eq!(v["root_cause"], f["id"]);
    assert_eq!(f["category"], "model-load-failure");
    assert_eq!(f["evidence"].as_array().unwrap().len(), 2);
    assert_eq!(f["actions"][0]["type"], "advice");

    // Without the rule the same lines are not lost: they are unrecognised errors.
    let o = rootcause(&[log.to_str().unwrap(), "-o", "json"], None);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let unknown = v["unrecognized_errors"].as_array().unwrap();
    assert!(
        unknown.iter().any(|g| g["template"]
            .as_str()
            .unwrap()
            .contains("No space left on device")
            && g["count"] == 2),
        "{unknown:?}"
    );

    let listed = stdout(&rootcause(
        &["rules", "--rules", good.to_str().unwrap()],
        None,
    ));
    assert!(
        listed.contains("disk-full") && listed.contains("sglang-unbalanced-memory"),
        "{listed}"
    );
    let doc = rootcause(
        &["explain", "disk-full", "--rules", good.to_str().unwrap()],
        None,
    );
    assert!(stdout(&doc).contains("## How to fix"));

    let bad = rootcause(
        &[
            log.to_str().unwrap(),
            "--rules",
            dir.join("bad").to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("broken.toml:6: invalid regex"), "{err}");
}

#[test]
fn explain_suggests_the_nearest_rule_id() {
    let o = rootcause(&["explain", "sglang-unbalanced-memry"], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("did you mean `sglang-unbalanced-memory`?"),
        "{err}"
    );
}

#[test]
fn inputs_explains_a_six_source_paste() {
    let paste = std::fs::read(crate::support::fixtures().join("pastes/six-sources.txt")).unwrap();
    let o = rootcause(&["inputs"], Some(&paste));
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    // Segment lines; the indented ones under them list prompts and prose.
    let formats: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| {
            l.split(": ")
                .nth(1)
                .unwrap_or("")
                .split(' ')
                .next()
                .unwrap_or("")
        })
        .filter(|f| *f != "shell-prompt")
        .collect();
    assert_eq!(
        formats,
        [
            "nvidia-smi-query-gpu-csv",
            "nvidia-smi-compute-apps-csv",
            "ps",
            "systemctl-status",
            "dmesg",
            "journal-short-iso"
        ],
        "{text}"
    );
    assert!(!text.contains("unknown"), "{text}");
    for line in text
        .lines()
        .filter(|l| !l.contains("shell-prompt") && !l.starts_with(' '))
    {
        assert!(line.contains("confidence 1.00"), "{line}");
    }
}

#[test]
fn version_names_the_rule_catalog() {
    let o = rootcause(&["--version"], None);
    assert_eq!(o.status.code(), Some(0));
    let v = stdout(&o);
    let want = format!(
        "rootcause {} (rule catalog: {} rules, ",
        env!("CARGO_PKG_VERSION"),
        rootcause::rules::RULES.len()
    );
    assert!(v.starts_with(&want), "{v}");
}

#[test]
fn every_subcommand_has_examples_in_its_help() {
    for sub in [
        "analyze",
        "demo",
        "inputs",
        "rules",
        "explain",
        "capture",
        "replay",
        "timeline",
        "completions",
        "man",
    ] {
        let o = rootcause(&[sub, "--help"], None);
        assert_eq!(o.status.code(), Some(0), "{sub}");
        let help = stdout(&o);
        let examples = help
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("`{sub} --help` has no examples:\n{help}"));
        assert!(
            examples.lines().any(|l| l.contains("rootcause ")),
            "{sub}: {examples}"
        );
    }
    let top = stdout(&rootcause(&["--help"], None));
    assert!(top.contains("-o html"), "{top}");
}

#[test]
fn completions_and_the_man_page_are_generated() {
    for (shell, marker) in [
        ("bash", "complete -F _rootcause"),
        ("zsh", "#compdef rootcause"),
        ("fish", "complete -c rootcause"),
    ] {
        let o = rootcause(&["completions", shell], None);
        assert_eq!(o.status.code(), Some(0), "{shell}");
        let script = stdout(&o);
        assert!(script.contains(marker), "{shell}:\n{script}");
        for word in ["replay", "timeline", "markdown", "html"] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
    }
    let bad = rootcause(&["completions", "tcsh"], None);
    assert_eq!(bad.status.code(), Some(2));

    let man = stdout(&rootcause(&["man"], None));
    assert!(man.contains(".TH rootcause 1"), "{man}");
    for section in [
        ".SH SYNOPSIS",
        ".SH SUBCOMMANDS",
        "Examples:",
        "rule catalog",
    ] {
        assert!(man.contains(section), "man page lacks {section}");
    }
}

#[test]
fn mistyped_format_names_suggest_the_nearest() {
    for (args, want) in [
        (&["demo", "-o", "mardown"][..], "'markdown'"),
        (&["demo", "--output", "htm"][..], "'html'"),
        (
            &["inputs", "--format-hint", "jornal-short", "x"][..],
            "'journal-short'",
        ),
    ] {
        let o = rootcause(args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("a similar value exists"), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_folder_without_recognisable_inputs_says_what_was_expected() {
    let dir = crate::support::Scratch::new("unrecognised");
    std::fs::write(
        dir.path.join("notes.txt"),
        "we restarted it twice\nstill broken\n",
    )
    .unwrap();
    std::fs::write(dir.path.join("todo.txt"), "call the vendor\n").unwrap();
    let o = rootcause(&[dir.path.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    for needle in [
        "none of its 2 file(s) is a log rootcause reads",
        "expected SGLang or vLLM server logs",
        "nvidia-smi",
        "journalctl",
        "rootcause inputs",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    // A hint says what the files are: then they are read as that.
    let hinted = rootcause(
        &[dir.path.to_str().unwrap(), "--format-hint", "journal-cat"],
        None,
    );
    assert_eq!(hinted.status.code(), Some(0));
}

#[test]
fn quiet_prints_one_line_and_verbose_more() {
    let dir = incident("2026-11-27-ct200-ghost-ddtree");
    let quiet = rootcause(&[dir.to_str().unwrap(), "-q"], None);
    assert_eq!(quiet.status.code(), Some(1), "findings still exit 1");
    assert_eq!(stdout(&quiet).lines().count(), 1);
    assert!(stdout(&quiet).starts_with("Root cause: GPU 0 is held by PID 20629"));
    let normal = stdout(&rootcause(&[dir.to_str().unwrap()], None));
    let verbose = stdout(&rootcause(&[dir.to_str().unwrap(), "-v"], None));
    assert!(verbose.len() > normal.len());
    assert!(verbose.contains("Confidence 0.99"), "{verbose}");
    assert!(!normal.contains("Confidence 0.99"), "{normal}");
    let both = rootcause(&[dir.to_str().unwrap(), "-q", "-v"], None);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn html_output_is_one_page() {
    let o = rootcause(&["demo", "-o", "html"], None);
    assert_eq!(o.status.code(), Some(0));
    let page = stdout(&o);
    assert!(page.starts_with("<!doctype html>"));
    assert!(page.trim_end().ends_with("</html>"));
}

/// Runs the binary on a pseudo-terminal (util-linux `script`), as a person
/// would, with `env` added.
fn on_a_terminal(args: &str, env: &[(&str, &str)]) -> String {
    crate::support::require_tool("script", "bsdutils");
    let command = format!(
        "stty cols 100 2>/dev/null; {} {args}",
        env!("CARGO_BIN_EXE_rootcause")
    );
    let mut c = Command::new("script");
    c.args(["-qec", &command, "/dev/null"])
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("COLUMNS")
        // anstream reads any `CI` as a log viewer that shows colour, even
        // on a dumb terminal: each test sets it when it means it.
        .env_remove("CI")
        .env("TERM", "xterm-256color")
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("script runs");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let tty = on_a_terminal("demo", &[]);
    assert!(tty.contains("\x1b[1mRoot cause:"), "{tty}");
    // The terminal's width cuts the evidence lines.
    let excerpt = regex::Regex::new(r"^ +\d+ .*\| ").unwrap();
    let plain = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
    for line in tty
        .lines()
        .filter(|l| excerpt.is_match(&plain.replace_all(l, "")))
    {
        let visible = plain.replace_all(line.trim_end_matches('\r'), "");
        assert!(visible.chars().count() <= 100, "{visible}");
    }
    let no_color = on_a_terminal("demo", &[("NO_COLOR", "1")]);
    assert!(!no_color.contains('\x1b'), "{no_color}");
    assert!(no_color.contains("Root cause:"), "{no_color}");
    let forced = on_a_terminal("demo --color always", &[("NO_COLOR", "1")]);
    assert!(forced.contains('\x1b'), "--color always wins over NO_COLOR");
    let piped = stdout(&rootcause(&["demo"], None));
    assert!(!piped.contains('\x1b'), "no colour into a pipe");
    // The conventions clap's own help follows (anstream).
    let dumb = on_a_terminal("demo", &[("TERM", "dumb")]);
    assert!(!dumb.contains('\x1b'), "no colour on a dumb terminal");
    let off = on_a_terminal("demo", &[("CLICOLOR", "0")]);
    assert!(!off.contains('\x1b'), "no colour with CLICOLOR=0");
    let ci = on_a_terminal("demo", &[("TERM", "dumb"), ("CI", "true")]);
    assert!(ci.contains('\x1b'), "a CI log shows colour, as clap's help");
    let ci_off = on_a_terminal("demo", &[("CI", "true"), ("NO_COLOR", "1")]);
    assert!(!ci_off.contains('\x1b'), "NO_COLOR wins in CI too");
}
