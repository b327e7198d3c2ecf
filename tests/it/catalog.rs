//! Invariants of the rule catalog, and the generated docs/rules/ pages.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use rootcause::rules::RULES;

const SECTIONS: [&str; 5] = [
    "## What it means",
    "## Why it happens",
    "## How to confirm",
    "## How to fix",
    "## Safety",
];

/// Files of src/rules/ that are not rules.
const NOT_RULES: [&str; 6] = ["mod.rs", "action.rs", "finding.rs", "rank.rs", "registry.rs", "unknown.rs"];

#[test]
fn ids_are_unique_kebab_case_and_every_doc_has_its_sections() {
    let mut seen = BTreeSet::new();
    for rule in RULES {
        let meta = rule.meta();
        assert!(seen.insert(meta.id), "duplicate rule id {}", meta.id);
        assert!(
            meta.id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{} is not kebab-case",
            meta.id
        );
        for section in SECTIONS {
            assert!(meta.doc.contains(section), "{} lacks `{section}`", meta.id);
        }
    }
}

#[test]
fn every_rule_file_is_registered() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/rules");
    let registered: BTreeSet<String> = RULES
        .iter()
        .map(|r| format!("{}.rs", r.meta().id.replace('-', "_")))
        .collect();
    for entry in fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if NOT_RULES.contains(&name.as_str()) {
            continue;
        }
        assert!(
            registered.contains(&name),
            "src/rules/{name} is not in registry.rs (or its id does not match its file name)"
        );
    }
}

/// docs/rules/<id>.md is generated from the rule's doc; a stale page is
/// rewritten and the test fails once (in CI it only fails).
#[test]
fn rule_docs_are_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/rules");
    let mut stale = Vec::new();
    for rule in RULES {
        let meta = rule.meta();
        let page = format!(
            "<!-- generated from src/rules/{}.rs by `cargo test`; do not edit -->\n# `{}`\n\nSeverity: {}. {}.\n{}",
            meta.id.replace('-', "_"),
            meta.id,
            meta.severity.name(),
            meta.summary,
            meta.doc
        );
        let path = dir.join(format!("{}.md", meta.id));
        if fs::read_to_string(&path).ok().as_deref() != Some(page.as_str()) {
            if std::env::var_os("CI").is_none() {
                fs::create_dir_all(&dir).unwrap();
                fs::write(&path, &page).unwrap();
            }
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "regenerated stale rule docs (commit them): {stale:?}"
    );
}
