//! `symptom-wording`: a line no exact catalog row reads, in the words every
//! stack uses for one failure class (`catalogs/symptoms.toml`: GPU memory
//! exhausted, an address in use, a GPU hang…), is a finding of that class
//! at the row's low confidence: the wording says what class of failure;
//! which program and why, no row of its program says. It is the weakest
//! fallback (`rules::FALLBACKS`): any other finding that cites its line
//! says more, and it ranks below every exact finding (`rules::rank`).
//!
//! A symptom row reads only a line that looks like an error (a level, an
//! exception, a failure statement) unless its wording states a failure
//! wherever it stands (`alone`), and never a line whose words before the
//! wording make it advice, help text or a setting (`to avoid out of
//! memory, lower --gpu-memory-utilization`).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::known_message::{self, Line};
use crate::catalogs::{Hit, Row, Via};
use crate::correlate::Incident;
use crate::rules::unknown::ERRORISH;
use crate::rules::{Category, Finding, Rule, RuleMeta, SYMPTOM_WORDING, Severity};

pub static RULE: SymptomWording = SymptomWording;

/// Characters of the matched words a headline quotes at most.
const SAID: usize = 120;

pub struct SymptomWording;

pub static META: RuleMeta = RuleMeta {
    id: SYMPTOM_WORDING,
    category: Category::Unknown,
    severity: Severity::Error,
    summary: "a line in the words every stack uses for one failure class (GPU memory exhausted, address in use, GPU hang…) that no exact catalog row reads",
    // The symptom catalog's anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
A line of the inputs says a failure in the words every stack uses for one
class of failure (docs/catalogs/symptoms.md): out of GPU memory, an
address already in use, a GPU hang or reset, a driver that does not
answer, a driver/library version mismatch, a GPU the build has no code
for, a collective that timed out, a model that would not load, host
memory exhausted, a process killed. No catalog row of the program that
printed it reads the line (a wording no row knows yet); the finding says
the class the words name, not that the message is known.

## Why it happens
As the class's row says. Which program printed it and why, the line alone
does not say: the confidence is low (0.45 at most).

## How to confirm
The row's confirmation command, shown as a step (`nvidia-smi`, `ss -ltnp
'sport = :PORT'`, `dmesg -T | grep -i -e xid -e amdgpu`, `journalctl
-k`): it settles whether the class is what happened.

## How to fix
The class's usual fix; add an exact row for the program's wording
(CONTRIBUTING.md, "A catalog row") so that the next paste is read as its
message.

## Safety
Advice only: a wording alone never justifies a destructive step.
"#,
};

/// Words before a symptom's wording that make the line advice, help text
/// or a setting rather than a failure: a tip (`to avoid out of memory`),
/// a condition (`if you run out of memory`), an option named before it
/// (`--port … already in use`). A sentence's own words only: an error's
/// own text says `might` and `should` too (PyTorch's `… that might have
/// already set an error?`).
static ADVICE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        \b(?:[Tt]o\x20(?:avoid|prevent)|[Ii]f\x20(?:you|your)|[Ii]n\x20case\x20(?:of|you)|[Ww]hen\x20you|
            [Tt]ry\x20(?:to\x20)?(?:reduc|lower|avoid|set|us|increas|decreas)[A-Za-z]*|[Cc]onsider|
            e\.g\.|[Ff]or\x20example|[Uu]sage:)
        | (?:^|\s)--?[a-z][a-z0-9_-]+[\s=]",
    )
    .expect("advice regex")
});

/// A line that is an option's help or a comment (`  --gpu-memory-utilization
/// … If you run out of memory, reduce it.`, `# … out of memory`), whatever
/// the wording spans.
static HELP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*(?:--?[a-z][a-z0-9_-]*[\s=,]|[\x23;])").expect("help regex"));

/// Error-looking besides [`ERRORISH`]: a level or a failure word in any
/// case (`*ERROR*`, `level=error`, `timed out`) and the C++ loggers'
/// error marks (glog's `E0109 `, c10's `[E ProcessGroupNCCL.cpp:474]`,
/// TensorRT's `[E]`).
static FAILURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?xi)
        \b(?:error|errno|failed|failure|fatal|exception|panic(?:ked)?|abort(?:ed|ing)?|critical|
            unable\x20to|cannot|can't|could\x20not|couldn't|not\x20enough|insufficient|timed\x20out)\b
        | (?-i:^[EF][0-9]{4}\x20)
        | (?-i:\[(?:E|ERROR|ERR|FATAL)[\]\x20])",
    )
    .expect("failure regex")
});

/// Whether a symptom row's line is a failure it reports: its wording
/// stands alone, or the line looks like an error; and never advice.
pub(crate) fn reads(hit: &Hit<'_>, text: &str) -> bool {
    let Some(row) = hit.row else {
        return false;
    };
    let alone = match hit.via {
        Via::Wording(w) => row.wordings.get(w).is_some_and(|w| w.alone),
        _ => false,
    };
    let before = text
        .find(hit.matched.as_str())
        .map_or(text, |at| &text[..at]);
    if ADVICE.is_match(before) || HELP.is_match(text) {
        return false;
    }
    alone || ERRORISH.is_match(text) || FAILURE.is_match(text)
}

/// The hit a line's symptom rows give: the first, in the catalog's order
/// (the most telling class first), that reads it as a failure ([`reads`]).
pub(crate) fn first_read<'h>(
    hits: impl IntoIterator<Item = &'h Hit<'static>>,
    text: &str,
) -> Option<&'h Hit<'static>> {
    hits.into_iter()
        .find(|h| h.row.is_some_and(|r| r.category.is_some()) && reads(h, text))
}

impl Rule for SymptomWording {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut by_row: BTreeMap<&str, (&Row, Vec<Line<'_>>)> = BTreeMap::new();
        // `incident.symptoms` is in line order, each line's hits in the
        // catalog's: one class per line.
        for line in incident.symptoms.chunk_by(|a, b| a.message == b.message) {
            let m = &incident.facts.messages[line[0].message];
            let Some(hit) = first_read(line.iter().map(|k| &k.hit), &m.text) else {
                continue;
            };
            let Some(row) = hit.row else { continue };
            by_row
                .entry(row.id.as_str())
                .or_insert_with(|| (row, Vec::new()))
                .1
                .push((m, hit));
        }
        let read_with = supersede(&mut by_row);
        for (id, (row, hits)) in by_row {
            if hits.is_empty() {
                continue;
            }
            let mut f = known_message::finding(row, &hits);
            f.rule = META.id;
            f.title = format!("{} (by its wording)", row.title);
            let said = hits[0].1.matched.trim();
            let said: String = match said.char_indices().nth(SAID) {
                Some((at, _)) => format!("{}…", &said[..at]),
                None => said.to_owned(),
            };
            f.headline = format!(
                "The line says `{said}`: {}, in the words every stack uses for it (a wording class, not a known message of the program that printed it).",
                decapitalise(&row.title)
            );
            f.conditions.clear();
            f.condition(
                format!(
                    "the line's words are symptom row `{}`: the class in the words every stack uses for it",
                    row.id
                ),
                true,
            );
            f.condition(
                "no catalog row of the program that printed it reads the line: which program failed and why are not known",
                false,
            );
            let also = read_with.get(id).map(Vec::as_slice).unwrap_or_default();
            known_message::cite_superseded(&mut f, also);
            for (_, hit) in hits.iter().chain(also.iter().map(|(_, line)| line)) {
                crate::rules::support::entities::from_hit(incident, &mut f, hit, true);
            }
            out.push(f);
        }
    }
}

/// A class's lines that a more telling class in the same input explains
/// (the row's `superseded_by`: a model that failed to load where the GPU
/// ran out of memory): taken from their row, and returned under the row
/// whose finding cites them instead.
fn supersede<'a>(
    by_row: &mut BTreeMap<&'a str, (&'a Row, Vec<Line<'a>>)>,
) -> BTreeMap<&'a str, Vec<(&'a Row, Line<'a>)>> {
    // Each class's inputs, to ask whether a stronger one is in a line's.
    let sources: BTreeMap<&'a str, Vec<crate::source::SourceId>> = by_row
        .iter()
        .map(|(id, (_, hits))| (*id, hits.iter().map(|(m, _)| m.span.source).collect()))
        .collect();
    let mut moved: BTreeMap<&'a str, Vec<(&'a Row, Line<'a>)>> = BTreeMap::new();
    for (row, hits) in by_row.values_mut() {
        hits.retain(|line| {
            let source = line.0.span.source;
            let stronger = row.superseded_by.iter().find_map(|id| {
                let (key, in_inputs) = sources.get_key_value(id.as_str())?;
                in_inputs.contains(&source).then_some(*key)
            });
            match stronger {
                Some(id) => {
                    moved.entry(id).or_default().push((*row, *line));
                    false
                }
                None => true,
            }
        });
    }
    moved
}

/// A title in a sentence: `Host memory exhausted` → `host memory
/// exhausted`; an acronym (`GPU memory exhausted`) keeps its case.
fn decapitalise(s: &str) -> String {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && !second.is_uppercase() => {
            first.to_lowercase().chain(s.chars().skip(1)).collect()
        }
        _ => s.to_owned(),
    }
}

#[cfg(test)]
mod tests;
