//! The evidence matrix (`rootcause::rules::evidence::MATRIX`): every cell's
//! real sample, analysed, gives a finding of the cell's category from the
//! cell's reader; docs/evidence.md is generated from the same table.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use rootcause::catalogs::{Origin, catalogs};
use rootcause::rules::RULES;
use rootcause::rules::evidence::{Cell, MATRIX, Reader};
use rootcause::source::{Source, SourceMap};

use crate::support;

/// Whether a real input gave a finding of `cell`'s category from its reader.
fn read_by_rule(cell: &Cell, rule: &str, sample: &str) -> Result<(), String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(sample);
    let path = if path.join("input.log").is_file() {
        path.join("input.log")
    } else {
        path
    };
    if !path.exists() {
        return Err(format!("sample {sample} does not exist"));
    }
    let out = support::check(&path);
    let findings = &out.analysis.diagnosis.findings;
    if findings
        .iter()
        .any(|f| f.rule == rule && f.category == cell.category)
    {
        return Ok(());
    }
    let got: Vec<String> = findings
        .iter()
        .map(|f| format!("{} ({})", f.rule, f.category.name()))
        .collect();
    Err(format!(
        "{sample}: wanted {rule} naming {}, got {got:?}",
        cell.category.name()
    ))
}

fn read_by_row(cell: &Cell, id: &str) -> Result<(), String> {
    let row = catalogs()
        .row(id)
        .ok_or_else(|| format!("no catalog row `{id}`"))?;
    let pages: Vec<&str> = row
        .samples
        .iter()
        .filter(|s| matches!(s.origin, Origin::Page(_)))
        .map(|s| s.line.as_str())
        .collect();
    if pages.is_empty() {
        return Err(format!("row `{id}` has no sample from a public page"));
    }
    for line in pages {
        let mut sources = SourceMap::new();
        sources.add(Source::new("sample.log", format!("{line}\n").as_bytes()));
        let out = support::analyze(sources);
        if !out
            .analysis
            .diagnosis
            .findings
            .iter()
            .any(|f| f.category == cell.category)
        {
            return Err(format!(
                "row `{id}`'s sample gives no {}: {line}",
                cell.category.name()
            ));
        }
    }
    Ok(())
}

#[test]
fn every_cell_is_read_by_its_reader() {
    let rules: BTreeSet<&str> = RULES.iter().map(|r| r.meta().id).collect();
    let mut broken = Vec::new();
    for cell in MATRIX {
        let result = match (cell.reader, cell.sample) {
            (Reader::Rule(id), _) if !rules.contains(id) => Err(format!("no rule `{id}`")),
            (Reader::Rule(id), Some(sample)) => read_by_rule(cell, id, sample),
            (Reader::Rule(_), None) | (Reader::Gap(_), _) => Ok(()),
            (Reader::Row(id), _) => read_by_row(cell, id),
        };
        if let Err(e) = result {
            broken.push(format!("{} / {}: {e}", cell.category.name(), cell.evidence));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

fn page(matrix: &[Cell]) -> String {
    let read = |c: &&Cell| match c.reader {
        Reader::Rule(_) => c.sample.is_some(),
        Reader::Row(_) => true,
        Reader::Gap(_) => false,
    };
    let gaps = matrix.iter().filter(|c| !read(c)).count();
    let mut doc = format!(
        "<!-- generated from src/rules/evidence.rs by `cargo test`; do not edit -->\n\
         # Evidence matrix\n\n\
         Every category a user expects named can be reached through several kinds of evidence. \
         For each, this table says what reads it (a rule, or a catalog row that is a finding by \
         itself) and the real sample that shows it works; `tests/it/evidence.rs` \
         (`every_cell_is_read_by_its_reader`) analyses every sample and checks that its reader \
         names the category. {} cells: {} read with a real sample, {gaps} gaps (nothing reads \
         them yet, or no real sample shows it).\n",
        matrix.len(),
        matrix.len() - gaps
    );
    let mut categories: Vec<_> = matrix.iter().map(|c| c.category).collect();
    categories.dedup();
    let mut seen = BTreeSet::new();
    for category in categories {
        if !seen.insert(category) {
            continue;
        }
        write!(
            doc,
            "\n## {}\n\n| evidence | read by | real sample |\n|---|---|---|\n",
            category.name()
        )
        .unwrap();
        for c in matrix.iter().filter(|c| c.category == category) {
            let (reader, sample) = match (c.reader, c.sample) {
                (Reader::Rule(id), Some(s)) => (
                    format!("rule [`{id}`](rules/{id}.md)"),
                    format!("[`{s}`](../{s})"),
                ),
                (Reader::Rule(id), None) => (
                    format!("rule [`{id}`](rules/{id}.md)"),
                    match c.searched {
                        Some(searched) => format!("gap: no real sample yet; {searched}"),
                        None => "gap: no real sample yet".to_owned(),
                    },
                ),
                (Reader::Row(id), _) => {
                    let catalog = id.split('.').next().unwrap_or(id);
                    (
                        format!("catalog row `{id}` ([{catalog}](catalogs/{catalog}.md))"),
                        "the row's own samples".to_owned(),
                    )
                }
                (Reader::Gap(why), _) => ("**gap**".to_owned(), why.to_owned()),
            };
            writeln!(
                doc,
                "| {} | {reader} | {sample} |",
                c.evidence.replace('|', "\\|")
            )
            .unwrap();
        }
    }
    doc
}

/// docs/evidence.md is generated from the matrix; a stale page is
/// rewritten and the test fails once (in CI it only fails).
#[test]
fn evidence_doc_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/evidence.md");
    let doc = page(MATRIX);
    if fs::read_to_string(&path).ok().as_deref() != Some(doc.as_str()) {
        if std::env::var_os("CI").is_none() {
            fs::write(&path, &doc).unwrap();
        }
        panic!("regenerated stale docs/evidence.md (commit it)");
    }
}
