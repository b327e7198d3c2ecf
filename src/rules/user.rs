//! Users' own signature rules, written as data: one TOML file per rule,
//! loaded with `--rules DIR`. They match lines by regex with counts, time
//! windows and "not if" clauses; rules that need arithmetic stay in Rust.
//!
//! ```toml
//! id = "disk-full"
//! category = "unknown"
//! severity = "error"
//! summary = "a process ran out of disk space"
//! anchors = ["No space left on device"]
//! patterns = ['OSError: \[Errno 28\] No space left on device']
//! not_patterns = ['/tmp/']          # a matching line does not count
//! unless = ['disk cleanup done']    # any such line anywhere: no finding
//! min_count = 1
//! within_secs = 600                 # min_count lines within this window
//! title = "the disk is full"
//! explanation = "Writes fail with ENOSPC."
//!
//! [doc]
//! what_it_means = "…"
//! why_it_happens = "…"
//! how_to_confirm = "…"
//! how_to_fix = "…"
//! safety = "…"
//!
//! [[remediation]]
//! text = "free space on the volume"
//! command = "df -h"
//! ```

use std::collections::BTreeMap;
use std::fmt;

use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use super::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::correlate::Incident;

/// A rule file that cannot be used, with the line to look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleFileError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for RuleFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    id: Spanned<String>,
    category: Spanned<String>,
    severity: Spanned<String>,
    summary: String,
    anchors: Spanned<Vec<String>>,
    patterns: Vec<Spanned<String>>,
    #[serde(default)]
    not_patterns: Vec<Spanned<String>>,
    #[serde(default)]
    unless: Vec<Spanned<String>>,
    #[serde(default = "one")]
    min_count: usize,
    within_secs: Option<u64>,
    title: Option<String>,
    explanation: Option<String>,
    doc: Doc,
    #[serde(default)]
    remediation: Vec<Remedy>,
}

fn one() -> usize {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    what_it_means: String,
    why_it_happens: String,
    how_to_confirm: String,
    how_to_fix: String,
    safety: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Remedy {
    text: String,
    command: Option<String>,
}

/// A loaded TOML rule.
#[derive(Debug)]
pub struct UserRule {
    meta: RuleMeta,
    category: Category,
    patterns: Vec<Regex>,
    not_patterns: Vec<Regex>,
    unless: Vec<Regex>,
    min_count: usize,
    within_secs: Option<u64>,
    title: String,
    explanation: String,
    remediation: Vec<(String, Option<String>)>,
    /// The file it came from, for `rootcause rules`.
    pub file: String,
}

/// A rule file's `severity`, or what is wrong with it. (Not `FromStr`:
/// `Severity` is the model crate's, and this wording is the rule files'.)
fn severity_named(s: &str) -> Result<Severity, String> {
    Severity::from_name(s).ok_or_else(|| {
        format!("unknown severity `{s}` (expected critical, error, warning or info)")
    })
}

/// A rule file's `category`, or what is wrong with it, with the nearest name.
fn category_named(s: &str) -> Result<Category, String> {
    Category::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Category::ALL.iter().map(|c| c.name()).collect();
        format!("unknown category `{s}`{}", did_you_mean(s, &names))
    })
}

/// ` (did you mean `x`?)` when a known name is close to `s`.
pub fn did_you_mean(s: &str, known: &[&str]) -> String {
    known
        .iter()
        .map(|k| (strsim::jaro_winkler(s, k), *k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default()
}

/// Rule metadata must live as long as the built-in catalog's; a rule file
/// is read once per process, so leaking its few strings is the simple way.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Parses and validates one rule file's text. `taken` holds the ids already
/// in use (built-in and earlier files).
pub fn parse(file: &str, text: &str, taken: &[&str]) -> Result<UserRule, RuleFileError> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let err = |offset: usize, message: String| RuleFileError {
        file: file.to_owned(),
        line: line_of(offset),
        message,
    };
    let raw: RuleFile = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        err(offset, e.message().trim().to_owned())
    })?;

    let id = raw.id.get_ref();
    let id_ok = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !id_ok {
        return Err(err(
            raw.id.span().start,
            format!("rule id `{id}` must be kebab-case (a-z, 0-9, -)"),
        ));
    }
    if taken.contains(&id.as_str()) {
        return Err(err(
            raw.id.span().start,
            format!("rule id `{id}` is already taken"),
        ));
    }
    let category =
        category_named(raw.category.get_ref()).map_err(|m| err(raw.category.span().start, m))?;
    let severity =
        severity_named(raw.severity.get_ref()).map_err(|m| err(raw.severity.span().start, m))?;
    if raw.anchors.get_ref().iter().all(|a| a.trim().is_empty()) {
        return Err(err(
            raw.anchors.span().start,
            "`anchors` needs at least one literal that every matching line contains".to_owned(),
        ));
    }
    if raw.patterns.is_empty() {
        return Err(err(0, "`patterns` needs at least one regex".to_owned()));
    }
    let compile = |list: &[Spanned<String>]| -> Result<Vec<Regex>, RuleFileError> {
        list.iter()
            .map(|p| {
                Regex::new(p.get_ref())
                    .map_err(|e| err(p.span().start, format!("invalid regex: {e}")))
            })
            .collect()
    };
    let patterns = compile(&raw.patterns)?;
    let not_patterns = compile(&raw.not_patterns)?;
    let unless = compile(&raw.unless)?;
    if raw.min_count == 0 {
        return Err(err(0, "`min_count` must be at least 1".to_owned()));
    }

    let d = &raw.doc;
    let doc = format!(
        "\n## What it means\n{}\n\n## Why it happens\n{}\n\n## How to confirm\n{}\n\n## How to fix\n{}\n\n## Safety\n{}\n",
        d.what_it_means.trim(),
        d.why_it_happens.trim(),
        d.how_to_confirm.trim(),
        d.how_to_fix.trim(),
        d.safety.trim()
    );
    let anchors: Vec<&'static str> = raw.anchors.into_inner().into_iter().map(leak).collect();
    let title = raw.title.unwrap_or_else(|| raw.summary.clone());
    Ok(UserRule {
        meta: RuleMeta {
            id: leak(raw.id.into_inner()),
            category,
            severity,
            summary: leak(raw.summary),
            anchors: Box::leak(anchors.into_boxed_slice()),
            doc: leak(doc),
        },
        category,
        patterns,
        not_patterns,
        unless,
        min_count: raw.min_count,
        within_secs: raw.within_secs,
        title,
        explanation: raw.explanation.unwrap_or_default(),
        remediation: raw
            .remediation
            .into_iter()
            .map(|r| (r.text, r.command))
            .collect(),
        file: file.to_owned(),
    })
}

impl Rule for UserRule {
    fn meta(&self) -> &RuleMeta {
        &self.meta
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let messages = &incident.facts.messages;
        if messages
            .iter()
            .any(|m| self.unless.iter().any(|re| re.is_match(&m.text)))
        {
            return;
        }
        let hits: Vec<_> = messages
            .iter()
            .filter(|m| self.patterns.iter().any(|re| re.is_match(&m.text)))
            .filter(|m| !self.not_patterns.iter().any(|re| re.is_match(&m.text)))
            .collect();
        if hits.len() < self.min_count {
            return;
        }
        let mut f = Finding::new(self.meta.id, self.category, self.meta.severity);
        f.title = self.title.clone();
        f.headline = format!("{}.", self.title.trim_end_matches('.'));
        f.explanation = self.explanation.clone();
        f.occurrences = hits.len() as u32;
        f.condition(
            format!("at least {} matching line(s)", self.min_count),
            true,
        );
        if let Some(window) = self.within_secs {
            let mut times: Vec<i64> = hits
                .iter()
                .filter_map(|m| incident.time_of(m.span))
                .map(|t| t.utc_seconds())
                .collect();
            times.sort_unstable();
            let dense = times
                .windows(self.min_count)
                .any(|w| (w[w.len() - 1] - w[0]) as u64 <= window);
            if !f.condition(
                format!("{} matching line(s) within {window} s", self.min_count),
                dense,
            ) {
                return;
            }
        }
        if !self.unless.is_empty() {
            f.condition("no line matches an `unless` pattern", true);
        }
        // Cite at most a handful of lines per distinct text.
        let mut per_text: BTreeMap<&str, usize> = BTreeMap::new();
        for m in &hits {
            let n = per_text.entry(m.text.as_str()).or_default();
            *n += 1;
            if *n <= 3 {
                f.evidence(m.span, format!("matches rule {}", self.meta.id));
            }
        }
        f.confidence = 0.5
            + 0.4 * f.conditions.iter().filter(|c| c.met).count() as f64
                / f.conditions.len() as f64;
        f.confidence = (f.confidence * 100.0).round() / 100.0;
        f.chain.push(self.title.clone());
        for (text, command) in &self.remediation {
            f.actions
                .push(Action::advice(text.clone(), command.as_deref()));
        }
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
id = "disk-full"
category = "unknown"
severity = "error"
summary = "a process ran out of disk space"
anchors = ["No space left on device"]
patterns = ['No space left on device']
doc = { what_it_means = "w", why_it_happens = "y", how_to_confirm = "c", how_to_fix = "f", safety = "s" }
"#;

    #[test]
    fn a_valid_rule_loads() {
        let r = parse("disk.toml", GOOD, &[]).unwrap();
        assert_eq!(r.meta().id, "disk-full");
        assert_eq!(r.meta().severity, Severity::Error);
        assert!(r.meta().doc.contains("## How to fix\nf"));
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let bad_regex = GOOD.replace(
            "patterns = ['No space left on device']",
            "patterns = ['No space (left']",
        );
        let e = parse("disk.toml", &bad_regex, &[]).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("disk.toml", 7));
        assert!(e.message.starts_with("invalid regex"), "{e}");

        let bad_category = GOOD.replace("category = \"unknown\"", "category = \"cuda-om\"");
        let e = parse("disk.toml", &bad_category, &[]).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("did you mean `cuda-oom`?"), "{e}");

        let unknown_key = format!("{GOOD}\nseverityy = \"error\"\n");
        let e = parse("disk.toml", &unknown_key, &[]).unwrap_err();
        assert!(e.message.contains("unknown field"), "{e}");
        assert_eq!(e.line, 10);

        let e = parse("disk.toml", GOOD, &["disk-full"]).unwrap_err();
        assert!(e.message.contains("already taken"), "{e}");
    }
}
