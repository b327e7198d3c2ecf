//! `known-message`: a line that is a message of an upstream catalog whose
//! meaning needs no reasoning (a row with a category and a fix) is a
//! finding by itself, at the confidence the row says the line alone gives.
//! Where a rule reasons further about the same line (numbers, holders,
//! causal order), that rule's finding stands instead (`rules::diagnose`
//! drops this one when another finding cites all its lines).

use std::collections::BTreeMap;

use crate::catalogs::{Hit, Origin, Row, Via};
use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{capitalise, distinct};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: KnownMessage = KnownMessage;

pub struct KnownMessage;

/// A kept line and how it was read as its row.
type Line<'a> = (&'a Message, &'a Hit<'static>);

/// Lines cited per row at most; the count says how many there were.
const CITED: usize = 3;

pub static META: RuleMeta = RuleMeta {
    id: super::KNOWN_MESSAGE,
    category: Category::Unknown,
    severity: Severity::Error,
    summary: "a message of an upstream catalog (CUDA, NCCL, systemd, the kernel, a serving stack) that says by itself what failed",
    // The catalogs' anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
A line of the inputs is one of the messages upstream projects list in
their own catalogs (docs/catalogs/): a CUDA runtime or driver error, an
NCCL result or warning, a systemd unit result, a kernel message, a serving
stack's fatal error. Its catalog row says what it means, which category of
failure it establishes and how much the line alone proves.

## Why it happens
As the row says; the finding quotes the row's meaning and names the
upstream source of the wording.

## How to confirm
The row's confirmation command, shown as a step; the finding's conditions
say that only the line itself was read.

## How to fix
The row's fix.

## Safety
Advice only: a line alone never justifies a destructive step.
"#,
};

impl Rule for KnownMessage {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // Rows in catalog order, each with its lines in input order.
        let mut by_row: BTreeMap<&str, (&Row, Vec<Line<'_>>)> = BTreeMap::new();
        for k in &incident.known {
            let Some(row) = k.hit.row else { continue };
            if row.category.is_none() {
                continue;
            }
            by_row
                .entry(row.id.as_str())
                .or_insert_with(|| (row, Vec::new()))
                .1
                .push((&incident.facts.messages[k.message], &k.hit));
        }
        for (row, hits) in by_row.into_values() {
            let mut f = finding(row, &hits);
            // Every line's facts, the counted ones too; the cited lines'
            // (and their blocks') are added again with every finding's.
            for (m, hit) in &hits {
                crate::rules::support::entities::from_hit(incident, &mut f, hit, true);
                // The process the line reports on, named by the row's
                // subject line before it (each attempt's PID).
                if let Some(subject) = row.subject.as_deref()
                    && let Some((_, named)) = incident
                        .known(subject)
                        .filter(|(s, _)| s.span.source == m.span.source && s.span < m.span)
                        .last()
                {
                    crate::rules::support::entities::from_hit(incident, &mut f, named, true);
                }
            }
            out.push(f);
        }
    }
}

fn finding(row: &Row, hits: &[Line<'_>]) -> Finding {
    let category = row.category.unwrap_or(Category::Unknown);
    let mut f = Finding::new(META.id, category, row.severity);
    let lines = distinct(hits.iter().map(|(m, _)| *m));
    let total: usize = lines.iter().map(|(_, n)| n).sum();
    for (m, n) in lines.iter().take(CITED) {
        let hit = hits
            .iter()
            .find(|(h, _)| h.span == m.span)
            .map(|(_, h)| *h)
            .expect("a cited line is one of the row's");
        let times = if *n > 1 {
            format!(" ({n}x)")
        } else {
            String::new()
        };
        f.evidence_marked(
            m.span,
            format!("{}{times}{}", row.title, how_read(hit)),
            hit.matched.trim(),
        );
    }
    f.occurrences = u32::try_from(total).unwrap_or(u32::MAX);
    let first = hits[0].1;
    f.title = row.title.clone();
    f.headline = format!("{}.", row.headline_for(first).trim_end_matches('.'));
    f.explanation = row.meaning.clone();
    f.chain.push(row.headline_for(first));
    f.chain.push(decapitalise(&row.meaning));
    f.condition(
        format!("the line is catalog row `{}` ({})", row.id, upstream(row)),
        true,
    );
    f.condition(
        "only the line itself was read: no other input confirms or rules out its cause",
        false,
    );
    f.confidence = row.confidence;
    if let Some(fix) = &row.fix {
        f.actions
            .push(Action::advice(capitalise(fix), row.confirm.as_deref()));
    } else if let Some(confirm) = &row.confirm {
        f.actions
            .push(Action::advice("Confirm what the line says", Some(confirm)));
    }
    f
}

/// `The kernel's …` → `the kernel's …`, for a chain's "because" line; an
/// acronym (`NCCL …`, `GPU …`) keeps its case.
fn decapitalise(s: &str) -> String {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && !second.is_uppercase() => {
            first.to_lowercase().chain(s.chars().skip(1)).collect()
        }
        _ => s.to_owned(),
    }
}

/// How the line was read, for the evidence note: the wrapper and the code
/// (`, cudaErrorDevicesUnavailable (46) as THC prints it`), or nothing
/// when the row's own wording matched.
fn how_read(hit: &Hit<'_>) -> String {
    let code = hit
        .row
        .map(|r| match (&r.name, r.code) {
            (Some(name), Some(code)) => format!("{name} ({code})"),
            (Some(name), None) => name.clone(),
            (None, Some(code)) => format!("code {code}"),
            (None, None) => String::new(),
        })
        .unwrap_or_default();
    match hit.via {
        Via::Wrapper(w) if !code.is_empty() => format!(": {code}, as {} prints it", w.title),
        Via::Wrapper(w) => format!(": as {} prints it", w.title),
        _ if !code.is_empty() => format!(": {code}"),
        _ => String::new(),
    }
}

/// Where the row's wordings come from, shortened to the first wording's
/// source or the catalog's.
fn upstream(row: &Row) -> String {
    let first = row
        .wordings
        .first()
        .map(|w| w.upstream.as_str())
        .or_else(|| row.strings.first().and_then(|s| s.upstream.as_deref()))
        .unwrap_or("the catalog's upstream source");
    let sampled = row
        .samples
        .iter()
        .any(|s| matches!(s.origin, Origin::Page(_)));
    let short: String = first.chars().take(120).collect();
    if sampled {
        short
    } else {
        format!("{short}; no public sample yet")
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// system76-power issue 448, verbatim: a row of a held GPU names the
    /// GPU by the bus id its line prints (no nvidia-smi maps it here).
    #[test]
    fn a_held_gpu_row_names_its_gpu_by_bus_id() {
        let line = "Feb 26 18:22:12 adder kernel: NVRM: Attempting to remove device 0000:01:00.0 with non-zero usage count!\n";
        let f = findings_of(super::META.id, line);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].entities.gpu_bus_ids.contains("0000:01:00"),
            "{:?}",
            f[0].entities
        );
    }

    /// NVIDIA/open-gpu-kernel-modules#1118, verbatim: an SXid names the
    /// NVSwitch by the bus id its line prints, so that a user searching
    /// the report for the switch finds it.
    #[test]
    fn an_sxid_names_its_switch_by_bus_id() {
        let line = "192.168.11.119: kern:     err: [2026-04-22T21:25:20.466440686Z]: nvidia-nvswitch1: SXid (PCI:0000:aa:00.0): 24007, Severity 1 Engine instance 12 Sub-engine instance 00\n";
        let f = findings_of(super::META.id, line);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(
            f[0].entities.gpu_bus_ids.contains("0000:aa:00"),
            "{:?}",
            f[0].entities
        );
        assert!(f[0].headline.contains("0000:aa:00.0"), "{}", f[0].headline);
    }

    /// Ollama's Windows app (ollama/ollama#4999, batch-h/800): the respawn
    /// finding names the PID of the attempt that crashed, from the app's
    /// `started ollama server with pid 15024` before it (the row's
    /// subject); in a loop, each crash the PID started just before it (a
    /// variant: a second attempt, assembled from the same two lines).
    #[test]
    fn a_respawn_names_the_pid_of_each_attempt() {
        let app = r#"time=2024-06-12T18:35:12.068+08:00 level=INFO source=server.go:135 msg="starting server..."
time=2024-06-12T18:35:12.069+08:00 level=INFO source=server.go:121 msg="started ollama server with pid 15024"
time=2024-06-12T18:35:12.116+08:00 level=WARN source=server.go:157 msg="server crash 21 - exit code 1 - respawning"
"#;
        let respawn = |text: &str| {
            findings_of(super::META.id, text)
                .into_iter()
                .find(|f| f.title.contains("respawned"))
                .expect("the respawn finding")
        };
        let f = respawn(app);
        assert_eq!(f.entities.pids.iter().copied().collect::<Vec<_>>(), [15024]);
        let again = format!(
            "{app}{}",
            r#"time=2024-06-12T18:35:13.120+08:00 level=INFO source=server.go:121 msg="started ollama server with pid 15188"
time=2024-06-12T18:35:13.170+08:00 level=WARN source=server.go:157 msg="server crash 22 - exit code 1 - respawning"
"#
        );
        let f = respawn(&again);
        assert_eq!(
            f.entities.pids.iter().copied().collect::<Vec<_>>(),
            [15024, 15188]
        );
        // A start with no crash after it names nobody.
        let started = app.lines().take(2).collect::<Vec<_>>().join("\n");
        assert!(
            findings_of(super::META.id, &started)
                .iter()
                .all(|f| f.entities.pids.is_empty())
        );
    }
}
