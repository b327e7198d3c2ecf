//! The reports people read, beyond the per-incident snapshots: the terminal
//! report in colour, verbose and quiet, cut to a width; the postmortem's
//! sections and Mermaid diagram; the HTML page's self-containment.

use insta::assert_snapshot;
use rootcause::render::{self, OutputFormat, RenderOptions, Verbosity};

use crate::support::{check, incident};

fn seed() -> crate::support::Outputs {
    check(&incident("2026-11-27-ct200-ghost-ddtree"))
}

fn text(out: &crate::support::Outputs, options: RenderOptions) -> String {
    let report = out.analysis.report();
    let mut bytes = Vec::new();
    render::render(&report, OutputFormat::Text, options, &mut bytes).expect("render");
    String::from_utf8(bytes).expect("utf-8")
}

#[test]
fn the_terminal_report_in_colour() {
    let out = seed();
    let coloured = text(
        &out,
        RenderOptions {
            color: true,
            ..RenderOptions::default()
        },
    );
    // Colour changes nothing but the escape sequences.
    let plain = regex::Regex::new("\x1b\\[[0-9;]*m")
        .unwrap()
        .replace_all(&coloured, "");
    assert_eq!(plain, out.text);
    assert_snapshot!("seed_text_color", coloured.replace('\x1b', "\\e"));
}

#[test]
fn verbose_adds_conditions_hypotheses_and_inputs() {
    let out = check(&incident("2025-09-02-a100mix-heterogeneous"));
    let verbose = text(
        &out,
        RenderOptions {
            verbosity: Verbosity::Verbose,
            ..RenderOptions::default()
        },
    );
    for section in ["Confidence 0.", "[x] ", "Why", "Inputs", "[F2]", "[F3]"] {
        assert!(verbose.contains(section), "-v lacks {section}:\n{verbose}");
    }
    // Without -v, the symptoms the root cause explains are a line each,
    // with the line each cites.
    assert!(
        out.text.contains("Symptoms explained by F1"),
        "{}",
        out.text
    );
    assert!(!out.text.contains("Confidence 0."), "{}", out.text);
    assert_snapshot!("heterogeneous_text_verbose", verbose);
}

#[test]
fn quiet_is_the_first_line_alone() {
    let out = seed();
    let quiet = text(
        &out,
        RenderOptions {
            verbosity: Verbosity::Quiet,
            ..RenderOptions::default()
        },
    );
    assert_eq!(quiet.lines().count(), 1, "{quiet}");
    assert_eq!(quiet.lines().next(), out.text.lines().next());
}

#[test]
fn evidence_lines_are_cut_to_the_width_around_the_key_value() {
    let out = seed();
    let excerpt = regex::Regex::new(r"^ +\d+ \| ").unwrap();
    for width in [60, 80, 120] {
        let narrow = text(
            &out,
            RenderOptions {
                width,
                ..RenderOptions::default()
            },
        );
        let lines: Vec<&str> = narrow.lines().filter(|l| excerpt.is_match(l)).collect();
        assert!(lines.len() > 5, "{narrow}");
        for l in &lines {
            assert!(l.chars().count() <= width, "wider than {width}: {l}");
        }
        // The key value of the TP ranks' error stays in view, underlined.
        let at = narrow
            .lines()
            .position(|l| l.contains("pre_model_load_memory=39.74761962890625"))
            .unwrap_or_else(|| panic!("key value cut away at width {width}:\n{narrow}"));
        let line = narrow.lines().nth(at).unwrap();
        let carets = narrow.lines().nth(at + 1).unwrap();
        let chars_to = |s: &str, byte: usize| s[..byte].chars().count();
        let col = chars_to(line, line.find("pre_model_load_memory").unwrap());
        let caret = chars_to(carets, carets.find('^').unwrap());
        assert_eq!(caret, col, "{line}\n{carets}");
    }
}

#[test]
fn the_gpu_picture_marks_the_gpu_at_fault() {
    let out = seed();
    let bar = regex::Regex::new(r"^  GPU \d+  ").unwrap();
    let picture: Vec<&str> = out.text.lines().filter(|l| bar.is_match(l)).collect();
    assert_eq!(picture.len(), 8, "{}", out.text);
    assert!(picture[0].contains("PID 20629 ddtree-qwen.service (55,286 MiB)"));
    assert!(picture[0].contains("◀ root cause"));
    assert!(
        picture[1..].iter().all(|l| !l.contains('◀')),
        "{picture:#?}"
    );
}

#[test]
fn the_postmortem_has_its_sections_in_order_and_a_mermaid_chain() {
    let md = seed().markdown;
    let mut at = 0;
    for heading in [
        "# Postmortem: ",
        "## Summary",
        "## Impact",
        "## Timeline",
        "## Root cause",
        "```mermaid\nflowchart TD\n",
        "## Evidence",
        "## Remediation",
        "## Inputs",
        "## Follow-up",
    ] {
        let found = md[at..]
            .find(heading)
            .unwrap_or_else(|| panic!("{heading} missing or out of order:\n{md}"));
        at += found + heading.len();
    }
    let diagram = &md[md.find("```mermaid").unwrap()..];
    let diagram = &diagram[..diagram[3..].find("```").unwrap() + 6];
    // Cause at the top, one node per link of the chain, joined in order.
    for edge in ["c0 --> c1", "c1 --> c2", "c2 --> c3", "class c0 cause"] {
        assert!(diagram.contains(edge), "{edge}:\n{diagram}");
    }
    assert!(diagram.contains("c0[\"PID 20629"), "{diagram}");
    // The key value is marked under its line.
    assert!(md.contains("                                                                                                   ^^^^^^^^^^^^^\n"), "{md}");
}

#[test]
fn the_html_page_is_self_contained() {
    for name in [
        "2026-11-27-ct200-ghost-ddtree",
        "2026-03-05-h200-healthy-start",
        "2025-06-14-h100node3-stale-sglang",
    ] {
        let html = check(&incident(name)).html;
        assert!(html.starts_with("<!doctype html>"), "{name}");
        for external in ["src=", "<link", "@import", "url(http", "https://", "//cdn"] {
            assert!(!html.contains(external), "{name}: {external}");
        }
        // Only the SVG namespace names a URL, and nothing is fetched from it.
        assert_eq!(
            html.matches("http://").count(),
            html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
            "{name}"
        );
        for section in ["id=\"summary\"", "id=\"inputs\"", "<footer>"] {
            assert!(html.contains(section), "{name}: {section}");
        }
    }
    let seed = seed().html;
    for section in [
        "id=\"gpus\"",
        "id=\"chain\"",
        "id=\"timeline\"",
        "<svg class=\"lanes\"",
        "id=\"evidence\"",
        "<mark>55286MiB</mark>",
        "id=\"remediation\"",
        "class=\"gpu cited\"",
    ] {
        assert!(seed.contains(section), "seed page lacks {section}");
    }
    // Every evidence dot of the timeline links to an excerpt on the page.
    let links = regex::Regex::new(r##"href="#(line-[0-9]+-[0-9]+)""##).unwrap();
    let mut linked = 0;
    for l in links.captures_iter(&seed) {
        assert!(
            seed.contains(&format!("id=\"{}\"", &l[1])),
            "dangling link #{}",
            &l[1]
        );
        linked += 1;
    }
    assert!(linked >= 10, "{linked} timeline links");
}

/// A symptom the root cause explains is listed with the line it cites, so
/// what that line says stays in the report without -v: the runner's last
/// words under the GGML_ASSERT finding that explains its death
/// (fixtures/real/708, ollama/ollama); the line is cut
/// only past the unrecognised errors' length, never to the width.
#[test]
fn an_explained_symptom_keeps_the_line_it_cites() {
    let mut sources = rootcause::source::SourceMap::default();
    let input = crate::support::fixtures()
        .join("real/708-ollama-jetson-runner-sigabrt-cublas-execution-failed/input.log");
    sources.add(rootcause::source::Source::new(
        "paste",
        &std::fs::read(&input).expect("fixture"),
    ));
    let out = crate::support::analyze(sources);
    let symptoms = out
        .text
        .split("Symptoms explained by")
        .nth(1)
        .unwrap_or_else(|| panic!("no symptom listed:\n{}", out.text));
    assert!(
        symptoms.contains(
            "Error: llama runner process has terminated: signal: aborted (core dumped) CUDA error: CUBLAS_STATUS_EXECUTION_FAILED"
        ),
        "{}",
        out.text
    );
}
