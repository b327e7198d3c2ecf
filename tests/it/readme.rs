//! The README's tour is true: every `$ command` in its `console` blocks is
//! run from the repository root, and its output must read as shown. A line
//! holding only `…` stands for lines left out.

use std::path::Path;
use std::process::{Command, Stdio};

struct Example {
    command: String,
    expected: Vec<String>,
}

fn examples(readme: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut fence: Option<String> = None;
    for line in readme.lines() {
        match &fence {
            None => {
                let ticks = line.len() - line.trim_start_matches('`').len();
                if ticks >= 3 && &line[ticks..] == "console" {
                    fence = Some(line[..ticks].to_owned());
                }
            }
            Some(f) if line == f => fence = None,
            Some(_) => match line.strip_prefix("$ ") {
                Some(command) => out.push(Example {
                    command: command.to_owned(),
                    expected: Vec::new(),
                }),
                None => out
                    .last_mut()
                    .expect("output before any command")
                    .expected
                    .push(line.to_owned()),
            },
        }
    }
    out
}

/// Whether `actual` reads as `expected`: the runs between `…` lines appear
/// in order, the first at the start and the last at the end unless an `…`
/// stands there.
fn reads_as(actual: &[&str], expected: &[String]) -> Result<(), String> {
    let runs: Vec<&[String]> = expected.split(|l| l == "…").collect();
    let mut at = 0;
    for (i, run) in runs.iter().enumerate() {
        if run.is_empty() {
            continue;
        }
        let found = (at..=actual.len().saturating_sub(run.len())).find(|&start| {
            run.iter()
                .zip(&actual[start..])
                .all(|(want, got)| want == got)
        });
        let Some(start) = found else {
            return Err(format!("not found in order:\n{}", run.join("\n")));
        };
        if i == 0 && start != 0 {
            return Err(format!(
                "the output does not start with:\n{}",
                run.join("\n")
            ));
        }
        at = start + run.len();
    }
    if expected.last().is_some_and(|l| l != "…") && at != actual.len() {
        return Err(format!(
            "the output goes on after what the README shows:\n{}",
            actual[at..].join("\n")
        ));
    }
    Ok(())
}

#[test]
fn the_readme_tour_prints_what_it_shows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let examples = examples(&readme);
    let commands: Vec<&str> = examples.iter().map(|e| e.command.as_str()).collect();
    for want in ["rootcause -q <", "-o markdown", "rootcause replay"] {
        assert!(
            commands.iter().any(|c| c.contains(want)),
            "the tour lacks `{want}`: {commands:?}"
        );
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_rootcause"))
        .parent()
        .expect("bin dir");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for e in &examples {
        let o = Command::new("sh")
            .args(["-c", &e.command])
            .current_dir(root)
            .env("PATH", &path)
            .env_remove("NO_COLOR")
            .env_remove("COLUMNS")
            .stdin(Stdio::null())
            .output()
            .expect("sh runs");
        let stdout = String::from_utf8_lossy(&o.stdout);
        let actual: Vec<&str> = stdout.lines().collect();
        if let Err(why) = reads_as(&actual, &e.expected) {
            panic!(
                "README: `$ {}`: {why}\n--- it printed:\n{stdout}",
                e.command
            );
        }
    }
}

#[test]
fn elisions_are_checked_both_ways() {
    let s = |v: &[&str]| v.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    let actual = ["a", "b", "c", "d"];
    assert!(reads_as(&actual, &s(&["a", "b", "c", "d"])).is_ok());
    assert!(reads_as(&actual, &s(&["a", "…", "d"])).is_ok());
    assert!(reads_as(&actual, &s(&["a", "…", "c", "…"])).is_ok());
    assert!(
        reads_as(&actual, &s(&["a", "b"])).is_err(),
        "output goes on"
    );
    assert!(
        reads_as(&actual, &s(&["b", "…"])).is_err(),
        "must start at the start"
    );
    assert!(reads_as(&actual, &s(&["a", "…", "x", "…"])).is_err());
    assert!(reads_as(&actual, &s(&["a", "…", "c", "b", "…"])).is_err());
}
