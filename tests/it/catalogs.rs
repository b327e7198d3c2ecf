//! The upstream message catalogs (`catalogs/*.toml`, `src/catalogs/`): every
//! row's real sample, pasted alone and among its real neighbours, gives the
//! row's finding (or, for a row that proves nothing by itself, is read), and
//! docs/catalogs/ is generated from the same rows.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use rootcause::catalogs::{Catalog, Origin, Row, Sample, catalogs};
use rootcause::rules::RULES;
use rootcause::source::{Source, SourceMap};

use crate::support;

#[test]
fn the_catalog_files_have_no_problem() {
    let all = catalogs();
    assert!(all.problems.is_empty(), "{}", all.problems.join("\n"));
    let rules: BTreeSet<&str> = RULES.iter().map(|r| r.meta().id).collect();
    let unknown: Vec<String> = all
        .rows()
        .flat_map(|r| {
            let sampled = r.samples.iter().filter_map(|s| s.rule.as_deref());
            r.rule
                .as_deref()
                .into_iter()
                .chain(sampled)
                .filter(|rule| !rules.contains(rule))
                .map(|rule| format!("{}: rule `{rule}` is not in the catalog", r.id))
        })
        .collect();
    assert!(unknown.is_empty(), "{}", unknown.join("\n"));
}

/// What an analysis of `lines` made of them: the findings' categories and
/// rules, and the unrecognised lines.
fn analyse(lines: &[&str]) -> (BTreeSet<String>, BTreeSet<&'static str>, u32) {
    let mut paste = String::new();
    for l in lines {
        paste.push_str(l);
        paste.push('\n');
    }
    let mut sources = SourceMap::new();
    sources.add(Source::new("paste.log", paste.as_bytes()));
    let out = support::analyze(sources);
    let findings = &out.analysis.diagnosis.findings;
    let categories = findings
        .iter()
        .map(|f| f.category.name().to_owned())
        .collect();
    let rules = findings.iter().map(|f| f.rule).collect();
    let unrecognised = out.analysis.inputs.iter().map(|i| i.unrecognized).sum();
    (categories, rules, unrecognised)
}

/// The sample, alone, then with its neighbours when it has any.
fn pastes(s: &Sample) -> Vec<Vec<&str>> {
    let mut out = vec![vec![s.line.as_str()]];
    if !s.before.is_empty() || !s.after.is_empty() {
        out.push(
            s.before
                .iter()
                .map(String::as_str)
                .chain([s.line.as_str()])
                .chain(s.after.iter().map(String::as_str))
                .collect(),
        );
    }
    out
}

/// Each row's sample gives the row's category (through `known-message`),
/// or a finding of the rule the row names (which may refine the category),
/// and is not an unrecognised line; a sample that
/// names a rule gives that rule's finding too (with its neighbours, when it
/// has them).
#[test]
fn every_sample_gives_its_rows_finding() {
    let mut misses = Vec::new();
    let mut checked = 0;
    for row in catalogs().rows() {
        for sample in &row.samples {
            let pastes = pastes(sample);
            let last = pastes.len() - 1;
            for (i, paste) in pastes.into_iter().enumerate() {
                checked += 1;
                // A rule that reads the line with its neighbours is held to
                // the paste that has them.
                let rule = sample.rule.as_deref().filter(|_| i == last);
                let (categories, rules, unrecognised) = analyse(&paste);
                // The rule the row names stands in for the row's own finding
                // when it reasons further (its numbers may say another
                // category: held by another process, a misconfigured fraction).
                let stood_in = row.rule.as_deref().is_some_and(|r| rules.contains(r));
                let ok = match row.category {
                    Some(c) => categories.contains(c.name()) || stood_in,
                    None => unrecognised == 0,
                } && rule.is_none_or(|r| rules.contains(r));
                if !ok || unrecognised > 0 {
                    let wanted = match (row.category, rule) {
                        (_, Some(r)) => format!("a finding of `{r}`"),
                        (Some(c), None) => c.name().to_owned(),
                        (None, None) => "the line read".to_owned(),
                    };
                    misses.push(format!(
                        "{} ({} line(s)): wanted {wanted}; got {categories:?} from {rules:?}, {unrecognised} unrecognised\n    {}",
                        row.id,
                        paste.len(),
                        sample.line
                    ));
                }
            }
        }
    }
    assert!(
        misses.is_empty(),
        "{} of {checked} catalog samples do not give their row:\n{}",
        misses.len(),
        misses.join("\n")
    );
}

/// Every wrapper's sample is read through the wrapper and gives the
/// category of the row its code names.
#[test]
fn every_wrapper_sample_gives_its_codes_finding() {
    let mut misses = Vec::new();
    for catalog in &catalogs().list {
        for wrapper in &catalog.wrappers {
            for sample in &wrapper.samples {
                let hit = catalogs().hits(&sample.line).into_iter().find(
                    |h| matches!(h.via, rootcause::catalogs::Via::Wrapper(w) if w.id == wrapper.id),
                );
                let Some(hit) = hit else {
                    misses.push(format!(
                        "{}: not read through it: {}",
                        wrapper.id, sample.line
                    ));
                    continue;
                };
                let Some(category) = hit.row.and_then(|r| r.category) else {
                    continue;
                };
                let (categories, _, _) = analyse(&[sample.line.as_str()]);
                if !categories.contains(category.name()) {
                    misses.push(format!(
                        "{}: wanted {}, got {categories:?}: {}",
                        wrapper.id,
                        category.name(),
                        sample.line
                    ));
                }
            }
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

/// A Markdown table cell: pipes escaped, code when asked, one line.
fn cell(text: &str, code: bool) -> String {
    let text = text.replace('|', "\\|").replace('\n', " ");
    match (code, text.contains('`')) {
        (false, _) => text,
        (true, false) => format!("`{text}`"),
        (true, true) => format!("`` {text} ``"),
    }
}

/// Sampled from a public page, from upstream only, or a gap.
fn coverage(rows: &[Row]) -> (usize, usize, usize) {
    let page = |r: &&Row| {
        r.samples
            .iter()
            .any(|s| matches!(s.origin, Origin::Page(_)))
    };
    let real = rows.iter().filter(page).count();
    let upstream = rows
        .iter()
        .filter(|r| !page(r) && !r.samples.is_empty())
        .count();
    (real, upstream, rows.len() - real - upstream)
}

fn catalog_page(c: &Catalog) -> String {
    let (real, upstream, gaps) = coverage(&c.rows);
    let mut doc = format!(
        "<!-- generated from catalogs/{0}.toml by `cargo test`; do not edit -->\n\
         # {1}\n\n{2}\n\n- Upstream: {3}\n- Versions: {4}\n- Rows: {5} ({real} with a sample from a public page, \
         {upstream} with the upstream line only, {gaps} gaps); wrappers: {6}\n",
        c.id,
        c.title,
        c.about,
        c.upstream,
        c.versions,
        c.rows.len(),
        c.wrappers.len()
    );
    if c.fallback {
        doc.push_str(
            "- Fallback: a row reads a line only where no row or wrapper of another catalog reads it; \
             its finding (`symptom-wording`) names the class by its words and ranks below every exact \
             finding. A wording marked *alone* reads any line; the others only an error-looking one \
             (CONTRIBUTING.md, \"Add a symptom row\").\n",
        );
    }
    if !c.rows.is_empty() {
        doc.push_str(
            "\n## Rows\n\n| id | code | category | severity | confidence | wordings | sample |\n|---|---|---|---|---|---|---|\n",
        );
    }
    for r in &c.rows {
        let code = match (&r.name, r.code, &r.driver_name, r.driver_code) {
            (Some(n), Some(k), Some(dn), Some(dk)) => format!("`{n}` {k} / `{dn}` {dk}"),
            (Some(n), Some(k), _, _) => format!("`{n}` {k}"),
            (Some(n), None, _, _) => format!("`{n}`"),
            (None, Some(k), _, _) => k.to_string(),
            _ => String::new(),
        };
        let code = match &r.resolution {
            Some(res) => format!("{code} ({res})"),
            None => code,
        };
        let mut wordings: Vec<String> = r
            .wordings
            .iter()
            .map(|w| {
                format!(
                    "{} ({}){}",
                    cell(w.template.as_deref().unwrap_or(&w.pattern), true),
                    cell(&w.versions, false),
                    if w.alone { " *alone*" } else { "" }
                )
            })
            .collect();
        wordings.extend(
            r.strings
                .iter()
                .map(|s| format!("{} ({})", cell(&s.text, true), cell(&s.versions, false))),
        );
        let sample = match r.samples.first() {
            Some(s) => match &s.origin {
                Origin::Page(url) => format!("{} <{url}>", cell(&s.line, true)),
                Origin::Upstream(at) => {
                    format!("{} (upstream: {})", cell(&s.line, true), cell(at, false))
                }
            },
            None => format!("gap: {}", cell(r.gap.as_deref().unwrap_or(""), false)),
        };
        let category = r.category.map_or("none", |c| c.name());
        let category = if r.superseded_by.is_empty() {
            category.to_owned()
        } else {
            let by: Vec<String> = r.superseded_by.iter().map(|id| format!("`{id}`")).collect();
            format!(
                "{category} (superseded by {} in the same input)",
                by.join(", ")
            )
        };
        writeln!(
            doc,
            "| `{}` | {code} | {category} | {} | {} | {} | {sample} |",
            r.id,
            r.severity.name(),
            r.confidence,
            wordings.join("<br>"),
        )
        .unwrap();
    }
    if !c.wrappers.is_empty() {
        doc.push_str("\n## Wrappers\n\n| id | prints | numbering | versions | sample |\n|---|---|---|---|---|\n");
    }
    for w in &c.wrappers {
        let sample = w
            .samples
            .first()
            .map_or(String::new(), |s| match &s.origin {
                Origin::Page(url) => format!("{} <{url}>", cell(&s.line, true)),
                Origin::Upstream(at) => {
                    format!("{} (upstream: {})", cell(&s.line, true), cell(at, false))
                }
            });
        writeln!(
            doc,
            "| `{}` | {} | {:?} | {} | {sample} |",
            w.id,
            cell(
                w.wording.template.as_deref().unwrap_or(&w.wording.pattern),
                true
            ),
            w.numbering,
            cell(&w.wording.versions, false),
        )
        .unwrap();
    }
    doc
}

fn index_page(list: &[Catalog]) -> String {
    let mut doc = String::from(
        "<!-- generated from catalogs/*.toml by `cargo test`; do not edit -->\n\
         # Upstream message catalogs\n\n\
         What a GPU host prints comes from a few closed catalogs, each listed upstream. rootcause \
         keeps each as data (`catalogs/*.toml`, compiled in): one row per message or code, with its \
         wordings across versions, where upstream prints it, its meaning, category, severity, fix \
         and real sample lines. `tests/it/catalogs.rs` pastes every sample alone and among its real \
         neighbours and checks that it gives its row's finding. A row whose sample is the upstream \
         line that prints it (no public page shows it printed) is marked so; a row without any \
         sample is a gap. A row *superseded by* other rows of the same event (Ray's advice under \
         its kill line, PID 1's account of a systemd-oomd kill under oomd's own line) makes no \
         finding of its own where a line of one of them is in the same input: that row's finding \
         cites its line instead.\n\n\
         | catalog | rows | sampled from a public page | upstream line only | gaps | wrappers |\n\
         |---|---|---|---|---|---|\n",
    );
    for c in list {
        let (real, upstream, gaps) = coverage(&c.rows);
        writeln!(
            doc,
            "| [{}]({}.md) | {} | {real} | {upstream} | {gaps} | {} |",
            c.title,
            c.id,
            c.rows.len(),
            c.wrappers.len()
        )
        .unwrap();
    }
    doc
}

/// docs/catalogs/ is generated from the rows; a stale page is rewritten
/// and the test fails once (in CI it only fails).
#[test]
fn catalog_docs_are_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/catalogs");
    let list = &catalogs().list;
    let mut pages = vec![("README.md".to_owned(), index_page(list))];
    pages.extend(
        list.iter()
            .map(|c| (format!("{}.md", c.id), catalog_page(c))),
    );
    let mut stale = Vec::new();
    for (name, doc) in &pages {
        let path = dir.join(name);
        if fs::read_to_string(&path).ok().as_deref() != Some(doc.as_str()) {
            if std::env::var_os("CI").is_none() {
                fs::create_dir_all(&dir).unwrap();
                fs::write(&path, doc).unwrap();
            }
            stale.push(name.clone());
        }
    }
    assert!(
        stale.is_empty(),
        "regenerated stale docs/catalogs/{{{}}} (commit them)",
        stale.join(",")
    );
}

/// A row's `<pid>` and `<pids>` captures name the finding's processes: a
/// harness's list of leftovers gives each of its PIDs (the two
/// lines, verbatim).
#[test]
fn a_rows_pid_list_becomes_the_findings_pids() {
    let pids = |line: &str| -> BTreeSet<u32> {
        let mut sources = SourceMap::new();
        sources.add(Source::new("paste.log", format!("{line}\n").as_bytes()));
        let out = support::analyze(sources);
        out.analysis
            .diagnosis
            .findings
            .iter()
            .filter(|f| f.rule == "known-message")
            .flat_map(|f| f.entities.pids.iter().copied())
            .collect()
    };
    // https://github.com/vllm-project/vllm-omni/issues/4775
    let listed = pids(
        "AssertionError: [kill_serve_root_with_load_sigkill] residual server-tree processes remain alive: [3333, 3334]",
    );
    assert_eq!(listed, BTreeSet::from([3333, 3334]));
    let other = pids(
        "AssertionError: [kill_serve_root_no_load_sigkill] residual server-tree processes remain alive: [11899, 11900]",
    );
    assert_eq!(other, BTreeSet::from([11899, 11900]));
}

/// `nvidia-smi -q | grep -A2 -i license` in a vGPU guest: each licence
/// state as NVML names it. Only an unlicensed product is the fault; the
/// grace period (`Unlicensed (Unrestricted)`) and a licence with its
/// expiry are not. The first paste is gpu-operator#220's (without its
/// section header, which no reader knows yet); the others vary its status line to the states NVML prints (NVIDIA/DCGM's
/// ConvertNvmlGridLicenseStateToString), not copied.
#[test]
fn a_vgpu_licence_status_is_a_fault_only_when_unlicensed() {
    let paste = |status: &str| {
        analyse(&[
            "        Product Name                      : NVIDIA Virtual Compute Server",
            status,
        ])
    };
    let unlicensed = [
        "        License Status                    : Unlicensed",
        "        License Status                    : Unlicensed (Restricted)",
        "        <license_status>Unlicensed (Restricted)</license_status>",
    ];
    for status in unlicensed {
        let (categories, _, _) = paste(status);
        assert!(
            categories.contains("driver-not-loaded"),
            "{status}: {categories:?}"
        );
    }
    let healthy = [
        "        License Status                    : Licensed (Expiry: 2025-6-5 15:22:24 GMT)",
        "        License Status                    : Unlicensed (Unrestricted)",
    ];
    for status in healthy {
        let (categories, _, _) = paste(status);
        assert!(
            !categories.contains("driver-not-loaded"),
            "{status}: {categories:?}"
        );
    }
}
