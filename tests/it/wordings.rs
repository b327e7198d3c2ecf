//! Every wording of every message rootcause reads, across the versions people
//! still run: fixtures/wordings/<message>.toml lists each wording with where
//! upstream prints it and one real line, copied from a public thread, that
//! shows it printed. Pasted alone, that line must give the finding the file
//! names, or at least not be counted as unrecognised. docs/formats/wordings.md
//! is generated from the same files.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use rootcause::rules::RULES;
use rootcause::source::{Source, SourceMap};
use serde::Deserialize;

use crate::support;

/// One message: its title, the rule that reads it (`none` when only a parser
/// does), and its wordings.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message {
    title: String,
    rule: String,
    #[serde(default)]
    notes: Option<String>,
    wording: Vec<Wording>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wording {
    /// The wording as a pattern, placeholders like `<N>`.
    text: String,
    versions: String,
    /// Repository, file and function (or commit) that prints it.
    upstream: String,
    /// A public page showing the line printed for real.
    source: String,
    /// One real line as printed, from `source`.
    line: String,
    /// Real lines printed just before `line` in the same paste, for a
    /// message that is read with its neighbours (a section of a report, a
    /// rule that needs two processes' lines): pasted with it, in order.
    #[serde(default)]
    before: Vec<String>,
    /// Real lines printed just after `line` in the same paste.
    #[serde(default)]
    after: Vec<String>,
    /// The line was cut at its end (the note says where).
    #[serde(default)]
    shortened: bool,
    #[serde(default)]
    note: Option<String>,
    expect: Expect,
}

/// What rootcause must make of the line alone: a finding of `rule`, or (for
/// lines no rule can conclude from by themselves) `recognised = true`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    rule: Option<String>,
    recognised: Option<bool>,
}

fn dir() -> PathBuf {
    support::fixtures().join("wordings")
}

/// Every message file, by message id (the file stem), in name order.
fn messages() -> BTreeMap<String, Message> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(dir()).expect("fixtures/wordings exists") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let id = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(&path).expect("wording file reads");
        let message: Message =
            toml::from_str(&text).unwrap_or_else(|e| panic!("fixtures/wordings/{id}.toml: {e}"));
        out.insert(id, message);
    }
    out
}

fn rule_ids() -> BTreeSet<&'static str> {
    RULES.iter().map(|r| r.meta().id).collect()
}

#[test]
fn wording_files_are_well_formed() {
    let rules = rule_ids();
    let messages = messages();
    assert!(!messages.is_empty(), "no fixtures/wordings/*.toml");
    let mut lines = BTreeMap::new();
    let mut problems = Vec::new();
    for (id, m) in &messages {
        let mut problem = |what: String| problems.push(format!("{id}.toml: {what}"));
        if !id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            problem("the message id (file name) is not kebab-case".into());
        }
        if m.title.trim().is_empty() {
            problem("empty title".into());
        }
        if m.rule != "none" && !rules.contains(m.rule.as_str()) {
            problem(format!(
                "rule `{}` is not in the catalog (nor `none`)",
                m.rule
            ));
        }
        if m.wording.is_empty() {
            problem("no [[wording]]".into());
        }
        for (n, w) in m.wording.iter().enumerate() {
            let at = n + 1;
            for (field, value) in [
                ("text", &w.text),
                ("versions", &w.versions),
                ("upstream", &w.upstream),
                ("source", &w.source),
                ("line", &w.line),
            ] {
                if value.trim().is_empty() {
                    problem(format!("wording {at}: empty `{field}`"));
                }
            }
            if !w.source.starts_with("https://") {
                problem(format!("wording {at}: `source` is not an https URL"));
            }
            if w.line.contains(['\n', '\r']) {
                problem(format!("wording {at}: `line` holds more than one line"));
            }
            for (field, lines) in [("before", &w.before), ("after", &w.after)] {
                if lines
                    .iter()
                    .any(|l| l.trim().is_empty() || l.contains(['\n', '\r']))
                {
                    problem(format!(
                        "wording {at}: each `{field}` entry must be one non-empty line"
                    ));
                }
            }
            if w.shortened && w.note.is_none() {
                problem(format!(
                    "wording {at}: a shortened line needs a note saying where it was cut"
                ));
            }
            match (&w.expect.rule, w.expect.recognised) {
                (Some(rule), None) if !rules.contains(rule.as_str()) => problem(format!(
                    "wording {at}: expected rule `{rule}` is not in the catalog"
                )),
                (Some(_), None) | (None, Some(true)) => {}
                _ => problem(format!(
                    "wording {at}: `expect` needs exactly one of `rule = \"<id>\"` or `recognised = true`"
                )),
            }
            if let Some(other) = lines.insert(w.line.clone(), format!("{id}.toml wording {at}")) {
                problem(format!("wording {at}: the same line is already in {other}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A Markdown table cell: code when asked, pipes escaped, never a newline.
fn cell(text: &str, code: bool) -> String {
    let text = text.replace('|', "\\|");
    if !code {
        return text;
    }
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

/// docs/formats/wordings.md, from the wording files.
fn wordings_doc(messages: &BTreeMap<String, Message>) -> String {
    let count: usize = messages.values().map(|m| m.wording.len()).sum();
    let mut doc = format!(
        "<!-- generated from fixtures/wordings/*.toml by `cargo test`; do not edit -->\n\
         # Message wordings across versions\n\n\
         {count} wordings of {} messages that rootcause's rules and parsers read, each with where \
         upstream prints it and one real line, copied from a public thread, that shows it printed. \
         `tests/it/wordings.rs` pastes every line alone (with the few real lines printed around it \
         where a message is read with its neighbours) and checks that it gives the rule named \
         (or is at least recognised). Lines marked *(cut)* were shortened at the end only. \
         Version ranges come from the upstream history where the repository could be read \
         (NCCL, open-gpu-kernel-modules: `git log -S`) and otherwise from the releases the threads \
         report; an `x` (v23x) marks a boundary not pinned down.\n",
        messages.len()
    );
    for (id, m) in messages {
        doc.push_str(&format!("\n## `{id}`: {}\n\n", cell(&m.title, false)));
        if m.rule == "none" {
            doc.push_str("Read by the parsers only (no rule).");
        } else {
            doc.push_str(&format!("Read by rule [`{0}`](../rules/{0}.md).", m.rule));
        }
        if let Some(notes) = &m.notes {
            doc.push(' ');
            doc.push_str(notes);
        }
        doc.push_str("\n\n| wording | versions | upstream | fixture line | expected | source |\n|---|---|---|---|---|---|\n");
        for w in &m.wording {
            let mut line = cell(&w.line, true);
            if w.shortened {
                line.push_str(" *(cut)*");
            }
            if !w.before.is_empty() || !w.after.is_empty() {
                line.push_str(&format!(
                    " *(read with {} line(s) before, {} after)*",
                    w.before.len(),
                    w.after.len()
                ));
            }
            if let Some(note) = &w.note {
                line.push_str(&format!(" ({})", cell(note, false)));
            }
            let expected = match &w.expect.rule {
                Some(rule) => format!("`{rule}`"),
                None => "recognised".to_string(),
            };
            doc.push_str(&format!(
                "| {} | {} | {} | {} | {} | <{}> |\n",
                cell(&w.text, true),
                cell(&w.versions, false),
                cell(&w.upstream, false),
                line,
                expected,
                w.source
            ));
        }
    }
    doc
}

/// docs/formats/wordings.md is generated from the wording files; a stale page
/// is rewritten and the test fails once (in CI it only fails), like
/// docs/rules/ in catalog.rs.
#[test]
fn wordings_doc_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/formats/wordings.md");
    let doc = wordings_doc(&messages());
    if fs::read_to_string(&path).ok().as_deref() != Some(doc.as_str()) {
        if std::env::var_os("CI").is_none() {
            fs::write(&path, &doc).unwrap();
        }
        panic!(
            "regenerated stale {} (commit it)",
            path.strip_prefix(env!("CARGO_MANIFEST_DIR"))
                .unwrap()
                .display()
        );
    }
}

/// The wordings rootcause does not read yet, each with why
/// (`fixtures/wordings/GAPS.tsv`: message id, wording number, reason). A
/// gap is a known miss, listed so that it stays visible: a line that misses
/// and is not listed fails the test, and so does a listed gap that has
/// been closed (take it off the list).
fn gaps() -> BTreeMap<(String, usize), String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/wordings/GAPS.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.splitn(3, '\t');
            let id = cols.next().unwrap_or_default().to_owned();
            let n = cols
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("GAPS.tsv: bad line {l:?}"));
            let why = cols.next().unwrap_or_default().trim().to_owned();
            assert!(!why.is_empty(), "GAPS.tsv: {id} {n} says no reason");
            ((id, n), why)
        })
        .collect()
}

/// Each real line, pasted alone (or with the real lines its file gives
/// around it), gives what its file says: the named rule has a finding, or
/// no pasted line is counted as unrecognised. Every miss is listed with what
/// the analysis made of the paste instead.
#[test]
fn each_real_line_alone_gives_its_expected_result() {
    let gaps = gaps();
    let mut misses = Vec::new();
    let mut closed = Vec::new();
    let mut checked = 0;
    for (id, m) in &messages() {
        for (n, w) in m.wording.iter().enumerate() {
            checked += 1;
            let mut sources = SourceMap::new();
            let mut paste = String::new();
            for l in w.before.iter().chain([&w.line]).chain(&w.after) {
                paste.push_str(l);
                paste.push('\n');
            }
            sources.add(Source::new("paste.log", paste.as_bytes()));
            let out = support::analyze(sources);
            let found: BTreeSet<&str> = out
                .analysis
                .diagnosis
                .findings
                .iter()
                .map(|f| f.rule)
                .collect();
            let unrecognized: u32 = out.analysis.inputs.iter().map(|i| i.unrecognized).sum();
            let formats: Vec<&str> = out
                .analysis
                .inputs
                .iter()
                .map(|i| i.segment.format.name())
                .collect();
            let (ok, wanted) = match &w.expect.rule {
                Some(rule) => (
                    found.contains(rule.as_str()),
                    format!("a finding of `{rule}`"),
                ),
                None => (unrecognized == 0, "the line recognised".to_string()),
            };
            let gap = gaps.contains_key(&(id.clone(), n + 1));
            if ok && gap {
                closed.push(format!("{id}\t{}", n + 1));
            }
            if !ok && !gap {
                misses.push(format!(
                    "{id}.toml wording {} ({}): wanted {wanted}; got findings {found:?}, {unrecognized} unrecognised line(s), read as {formats:?}\n    {}",
                    n + 1,
                    w.versions,
                    w.line
                ));
            }
        }
    }
    assert!(
        misses.is_empty(),
        "{} of {checked} real lines do not give what they should (and are not listed in fixtures/wordings/GAPS.tsv):\n{}",
        misses.len(),
        misses.join("\n")
    );
    assert!(
        closed.is_empty(),
        "gaps that are closed now: take them off fixtures/wordings/GAPS.tsv:\n{}",
        closed.join("\n")
    );
}

/// Rules that read no message of their own, so no wording file can name
/// them, each with why. Kept small: a rule that reads a message belongs in a
/// wording file, not here.
const NO_MESSAGE_RULES: &[(&str, &str)] = &[
    (
        "idle-worker-holds-gpu-memory",
        "it reads no message: GPU process rows (nvidia-smi's process table, a compute-apps query) titled `ray::IDLE` with their memory, tested over real rows (fixtures/rules/idle-worker-holds-gpu-memory)",
    ),
    (
        "container-restart-loop",
        "it reads no message: `docker ps` / `docker compose ps` rows with their status and ages, tested over real rows (fixtures/rules/container-restart-loop)",
    ),
    (
        "orphans-beside-restarted-daemon",
        "it reads no message: `ps` rows with their parents and start times (src/ingest/ps.rs), tested over real rows (fixtures/rules/orphans-beside-restarted-daemon)",
    ),
    (
        "process-outlived-its-job",
        "it reads no message: the commands typed at prompts with what they printed (src/ingest/stream.rs, a scheduler's empty answer) against `ps` rows, both tested over real rows (fixtures/rules/process-outlived-its-job)",
    ),
    (
        "serving-process-untracked",
        "it reads no message: a control plane's instance table (src/ingest/instances.rs) against `ps` rows, both tested over real rows (fixtures/rules/serving-process-untracked)",
    ),
];

/// Every rule of the catalog is named by at least one wording file (as the
/// file's `rule` or as a wording's expected rule) or upstream catalog row
/// (as its `rule` or a sample's), so that every message a
/// rule reads has its real wordings documented; the only exceptions are the
/// rules listed, with a reason, in `NO_MESSAGE_RULES`. A listed rule that
/// has a wording file now, or is no longer in the catalog, fails too.
#[test]
fn every_rule_has_a_wording_file() {
    let rules = rule_ids();
    let mut named: BTreeSet<String> = BTreeSet::new();
    for m in messages().values() {
        named.insert(m.rule.clone());
        named.extend(m.wording.iter().filter_map(|w| w.expect.rule.clone()));
    }
    // A rule that reads a catalog row's message is documented by the row's
    // wordings and samples (docs/catalogs/).
    for row in rootcause::catalogs::catalogs().rows() {
        named.extend(row.rule.clone());
        named.extend(row.samples.iter().filter_map(|s| s.rule.clone()));
    }
    let exempt: BTreeMap<&str, &str> = NO_MESSAGE_RULES.iter().copied().collect();
    let mut problems = Vec::new();
    for (id, why) in &exempt {
        assert!(
            !why.trim().is_empty(),
            "NO_MESSAGE_RULES: {id} says no reason"
        );
        if !rules.contains(id) {
            problems.push(format!(
                "NO_MESSAGE_RULES lists `{id}`, which is not in the catalog"
            ));
        } else if named.contains(*id) {
            problems.push(format!(
                "NO_MESSAGE_RULES lists `{id}`, but a wording file names it now: take it off the list"
            ));
        }
    }
    for id in &rules {
        if !named.contains(*id) && !exempt.contains_key(id) {
            problems.push(format!(
                "rule `{id}` reads messages but no fixtures/wordings/*.toml nor catalog row names it: document its wordings (real lines with their source)"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
