//! Per-rule fixtures: every rule has a folder fixtures/rules/<id>/ with at
//! least two positive cases (`pos-*`, a file or a bundle folder, different
//! versions or variants of the message) and one near miss (`neg-*`). A
//! positive must fire the rule; a negative must raise no finding above
//! `info`, from any rule. The findings of each case are snapshotted.

use std::fs;
use std::path::{Path, PathBuf};

use insta::assert_snapshot;
use rootcause::rules::{RULES, Severity};

use crate::support::{check, fixtures};

fn cases(rule: &str) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let dir = fixtures().join("rules").join(rule);
    let mut entries: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|_| panic!("rule {rule} has no fixture folder {}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let named = |prefix: &str| -> Vec<PathBuf> {
        entries
            .iter()
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
            .cloned()
            .collect()
    };
    (named("pos-"), named("neg-"))
}

/// A compact, reviewable summary of what an analysis found.
fn summary(path: &Path) -> String {
    let out = check(path);
    let report = out.analysis.report();
    let mut text = String::new();
    for f in report.findings() {
        text.push_str(&format!(
            "{} {} {} {} {:.2} x{}: {}\n",
            f.id,
            f.severity.name(),
            f.category.name(),
            f.rule,
            f.confidence,
            f.occurrences,
            f.title
        ));
        for link in &f.chain {
            text.push_str(&format!("  chain: {link}\n"));
        }
        for e in &f.evidence {
            text.push_str(&format!("  {}: {}\n", report.cite(e.span), e.note));
        }
        for a in &f.actions {
            text.push_str(&format!(
                "  action [{}]: {}\n",
                a.safety.name(),
                a.describe()
            ));
        }
        if !f.explains.is_empty() {
            text.push_str(&format!("  explains: {}\n", f.explains.join(", ")));
        }
    }
    for u in &report.diagnosis.unknown_errors {
        text.push_str(&format!("unknown x{}: {}\n", u.count, u.template));
    }
    text
}

#[test]
fn every_rule_fires_on_its_positives_and_nothing_fires_on_its_negatives() {
    let mut failures = Vec::new();
    for rule in RULES {
        let id = rule.meta().id;
        let (positives, negatives) = cases(id);
        if positives.len() < 2 || negatives.is_empty() {
            failures.push(format!("{id}: needs at least 2 pos-* and 1 neg-* fixtures"));
        }
        for p in &positives {
            let out = check(p);
            if !out.analysis.diagnosis.findings.iter().any(|f| f.rule == id) {
                failures.push(format!("{id}: {} does not fire the rule", p.display()));
            }
        }
        for n in &negatives {
            let out = check(n);
            for f in &out.analysis.diagnosis.findings {
                if f.severity < Severity::Info {
                    failures.push(format!(
                        "{id}: near miss {} raised {} ({}) at {}",
                        n.display(),
                        f.rule,
                        f.title,
                        f.severity.name()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn findings_of_every_rule_fixture() {
    let root = fixtures().join("rules");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let mut cases: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        cases.sort();
        for case in cases {
            let name = format!(
                "{}__{}",
                dir.file_name().unwrap().to_string_lossy(),
                case.file_name().unwrap().to_string_lossy()
            );
            assert_snapshot!(name, summary(&case));
        }
    }
}
