//! Errors no rule explains: error-looking lines that no finding cites, grouped
//! into stable templates so that a new failure is visible even before a rule
//! exists for it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use super::Finding;
use crate::correlate::Incident;
use crate::source::Span;

/// Literals that make a line a candidate (case-insensitive prefilter).
pub const ANCHORS: &[&str] = &[
    "error",
    "exception",
    "fatal",
    "failed",
    "traceback",
    "segmentation fault",
    "core dumped",
    "critical",
];

/// What an error line looks like once the prefilter kept it: a log level, an
/// exception line, or a failure statement. "error" inside a model name or
/// "Ignore import error" is not enough.
pub static ERRORISH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        \b(?:ERROR|CRITICAL|FATAL)\b
        | (?:^|[\s:\]])[A-Za-z_][0-9A-Za-z_.]*(?:Error|Exception):\x20
        | \b[Ff]ailed\x20(?:to|with)\b
        | \berror:\x20
        | Segmentation\x20fault | core\x20dumped
        | \bNCCL\x20WARN\b",
    )
    .expect("errorish regex")
});

/// Variable parts masked out of a template, most specific first: each
/// pattern and what it becomes.
const MASK_PATTERNS: [(&str, &str); 6] = [
    (r"GPU-[0-9a-fA-F-]{36}", "<uuid>"),
    (
        r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        "<uuid>",
    ),
    (r"\b0x[0-9a-fA-F]+\b", "<hex>"),
    (r"\b[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?::[0-9]+)?\b", "<ip>"),
    (r#"(?:[A-Za-z]:)?(?:/[^\s/:'",()\[\]]+)+/?"#, "<path>"),
    (r"\b[0-9]+(?:\.[0-9]+)?\b", "<n>"),
];

/// [`MASK_PATTERNS`], compiled.
static MASKS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    MASK_PATTERNS
        .into_iter()
        .map(|(p, r)| (Regex::new(p).expect("mask regex"), r))
        .collect()
});

/// The wrappers other tools put around a message (journal, SGLang, vLLM,
/// dmesg), so that one message in two captures has one template; the
/// first in this order that a line starts with is stripped.
const PREFIX_PATTERNS: [&str; 5] = [
    r"^[0-9]{4}-[0-9][0-9]-[0-9][0-9]T\S+ \S+ [^:\s]+(?:\[[0-9]+\])?: ",
    r"^[A-Z][a-z]{2} [ 0-3][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]+)? \S+ [^:\s]+(?:\[[0-9]+\])?: ",
    r"^\[[0-9]{4}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9][^\]]*\] ",
    r"^(?:\([^)]*pid=[0-9]+\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] \[?[^\]\s]+\] ",
    r"^\[\s*[0-9]+\.[0-9]+\] ",
];

/// [`PREFIX_PATTERNS`] as one alternation, one search a line instead of
/// five: all are anchored at the start, and the regex crate's
/// leftmost-first alternation takes the first alternative that matches,
/// with the match that alternative alone would make.
static PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    let union: Vec<String> = PREFIX_PATTERNS.iter().map(|p| format!("(?:{p})")).collect();
    Regex::new(&union.join("|")).expect("prefix regex")
});

/// A long run of hex digits with at least one letter: an id, not a number.
const HEX_RUN_PATTERN: &str = r"\b[0-9a-f]{12,}\b";
static HEX_RUN: LazyLock<Regex> = LazyLock::new(|| Regex::new(HEX_RUN_PATTERN).expect("hex regex"));

/// Whether [`HEX_RUN`] or any of [`MASKS`] matches somewhere: their union,
/// one search. Most lines a big input keeps hold something to mask (a
/// time, a PID), but a message that holds none (an error line repeated
/// with a name in words) then costs one pass instead of seven, and no copy
/// per mask. A line none of them matches is its own template (each
/// replacement would leave it as it is).
static MASKABLE: LazyLock<Regex> = LazyLock::new(|| {
    let union: Vec<String> = std::iter::once(HEX_RUN_PATTERN)
        .chain(MASK_PATTERNS.iter().map(|(p, _)| *p))
        .map(|p| format!("(?:{p})"))
        .collect();
    Regex::new(&union.join("|")).expect("maskable regex")
});

/// A group of unrecognised error lines sharing a template.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownError {
    /// Stable id of the template: FNV-1a of its text, independent of input order.
    pub fingerprint: String,
    pub template: String,
    pub count: usize,
    /// The first occurrence in input order.
    pub first: Span,
}

/// An error-looking message that is no traceback frame: what [`group`]
/// groups unless a finding explains it. Which message (its index in the
/// incident's messages), its template and the template's fingerprint.
pub struct Candidate {
    message: usize,
    template: String,
    fingerprint: String,
}

/// Every message [`group`] would group were none explained, in input
/// order: its template is most of the work, and depends on no finding, so
/// it is worked out beside the rules (`rules::check_all`).
pub fn candidates(incident: &Incident) -> Vec<Candidate> {
    incident
        .facts
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| ERRORISH.is_match(&m.text))
        .filter_map(|(message, m)| {
            // The message under its wrappers, stripped once for both questions.
            let body = strip_prefixes(&m.text);
            if is_frame_body(body) {
                return None;
            }
            let template = masked(body);
            let fingerprint = fnv1a(&template);
            Some(Candidate {
                message,
                template,
                fingerprint,
            })
        })
        .collect()
}

/// The error-looking lines no finding explains, grouped by template.
pub fn group(incident: &Incident, findings: &[Finding]) -> Vec<UnknownError> {
    group_candidates(incident, findings, candidates(incident))
}

/// [`group`], of the [`candidates`] worked out already.
pub fn group_candidates(
    incident: &Incident,
    findings: &[Finding],
    candidates: Vec<Candidate>,
) -> Vec<UnknownError> {
    let cited: BTreeSet<Span> = findings
        .iter()
        .flat_map(|f| f.evidence.iter().map(|e| e.span))
        .collect();
    // A line saying what a cited line says (another rank, another capture
    // of the same message) is explained too.
    let explained: BTreeSet<String> = incident
        .facts
        .messages
        .iter()
        .filter(|m| cited.contains(&m.span))
        .map(|m| template(&m.text))
        .collect();
    let mut groups: BTreeMap<String, UnknownError> = BTreeMap::new();
    for c in candidates {
        let span = incident.facts.messages[c.message].span;
        if cited.contains(&span) || explained.contains(&c.template) {
            continue;
        }
        groups
            .entry(c.fingerprint.clone())
            .and_modify(|g| {
                g.count += 1;
                g.first = g.first.min(span);
            })
            .or_insert(UnknownError {
                fingerprint: c.fingerprint,
                template: c.template,
                count: 1,
                first: span,
            });
    }
    let mut out: Vec<UnknownError> = groups.into_values().collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.first.cmp(&b.first)));
    out
}

/// The frames of a traceback printed at ERROR level (vLLM prefixes every
/// line) are not errors of their own: the exception line at their end is.
/// `body` is the line with its wrappers stripped ([`strip_prefixes`]).
fn is_frame_body(body: &str) -> bool {
    // PyTorch's standard advice under every CUDA error.
    const BOILERPLATE: [&str; 3] = [
        "CUDA kernel errors might be asynchronously reported",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA`",
    ];
    if BOILERPLATE.iter().any(|b| body.starts_with(b)) {
        return true;
    }
    body.starts_with("Traceback (most recent call last)")
        || body.trim_start().starts_with("File \"")
        || body.starts_with("  ")
        || body.trim().chars().all(|c| matches!(c, '^' | '~'))
}

fn strip_prefixes(line: &str) -> &str {
    let mut text = line.trim_end();
    while let Some(m) = PREFIX.find(text) {
        text = &text[m.end()..];
    }
    text
}

/// The line with its variable parts masked: timestamps, PIDs, sizes, paths,
/// addresses and ids all become placeholders.
pub fn template(line: &str) -> String {
    masked(strip_prefixes(line))
}

/// [`template`] of a line whose wrappers are stripped already.
fn masked(body: &str) -> String {
    let text = body.trim();
    if !MASKABLE.is_match(text) {
        return text.to_owned();
    }
    let mut text = HEX_RUN
        .replace_all(text, |c: &regex::Captures<'_>| {
            if c[0].bytes().any(|b| b.is_ascii_alphabetic()) {
                "<hex>".to_owned()
            } else {
                c[0].to_owned()
            }
        })
        .into_owned();
    for (re, with) in MASKS.iter() {
        // A mask that matches nothing leaves the text as it is: no copy.
        if let Cow::Owned(masked) = re.replace_all(&text, *with) {
            text = masked;
        }
    }
    text
}

fn fnv1a(text: &str) -> String {
    use std::hash::Hasher as _;
    let mut hash = fnv::FnvHasher::default();
    hash.write(text.as_bytes());
    format!("{:016x}", hash.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::fixture_lines;

    #[test]
    fn fingerprints_are_fnv1a_64() {
        // The published FNV-1a test vectors: fingerprints in saved reports
        // stay what they were when the hash was written by hand.
        assert_eq!(fnv1a(""), "cbf29ce484222325");
        assert_eq!(fnv1a("a"), "af63dc4c8601ec8c");
        assert_eq!(fnv1a("foobar"), "85944171f73967e8");
    }

    #[test]
    fn templates_mask_what_varies() {
        let a = template(
            "Nov 27 09:38:52 ct200 python3[31544]: OSError: [Errno 28] No space left on device: '/var/cache/x/shard-00012.bin'",
        );
        let b = template(
            "Nov 28 10:01:07 ct200 python3[4242]: OSError: [Errno 28] No space left on device: '/var/cache/y/shard-00099.bin'",
        );
        assert_eq!(a, b);
        assert_eq!(fnv1a(&a), fnv1a(&b));
        assert!(
            a.contains("OSError: [Errno <n>] No space left on device"),
            "{a}"
        );
    }

    /// The prefixes stripped as they were first: each pattern tried in
    /// turn. The oracle of [`PREFIX`].
    fn strip_each_prefix(line: &str) -> &str {
        static PREFIXES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
            PREFIX_PATTERNS
                .iter()
                .map(|p| Regex::new(p).expect("prefix regex"))
                .collect()
        });
        let mut text = line.trim_end();
        while let Some(m) = PREFIXES.iter().find_map(|re| re.find(text)) {
            text = &text[m.end()..];
        }
        text
    }

    /// The template as it was written first: every prefix tried in turn,
    /// every mask run on every line, each replacement copied. The oracle
    /// of [`masked`]'s gate and of [`PREFIX`].
    fn template_by_every_mask(line: &str) -> String {
        let text = strip_each_prefix(line).trim();
        let mut text = HEX_RUN
            .replace_all(text, |c: &regex::Captures<'_>| {
                if c[0].bytes().any(|b| b.is_ascii_alphabetic()) {
                    "<hex>".to_owned()
                } else {
                    c[0].to_owned()
                }
            })
            .into_owned();
        for (re, with) in MASKS.iter() {
            text = re.replace_all(&text, *with).into_owned();
        }
        text
    }

    #[test]
    fn one_prefix_search_and_the_maskable_gate_make_the_template_each_pattern_makes() {
        let mut lines = fixture_lines();
        // What each mask alone takes, with nothing else to mask, and lines
        // with nothing to mask at all.
        lines.extend(
            [
                "RuntimeError: CUDA error: an illegal memory access was encountered in kernel qwhzkdpbmxra",
                "failed on GPU-abcdefab-cdef-abcd-efab-cdefabcdefab now",
                "request abcdefab-cdef-abcd-efab-cdefabcdefab failed",
                "kernel deadbeefcafe faulted",
                "kernel deadbeefcafz faulted",
                "bad address 0xdeadbeef",
                "cannot reach 10.0.0.1:29500",
                "cannot open /models/llama: no such file",
                "exit code 137",
                "  ERROR: indented, nothing to mask  ",
                "Ünïcödé wörds, nothing to mask",
                "Ünïcödé wörds, 42 to mask",
            ]
            .map(str::to_owned),
        );
        let (mut plain, mut stripped) = (0, 0);
        for line in &lines {
            let body = strip_prefixes(line);
            assert_eq!(body, strip_each_prefix(line), "{line:?}");
            assert_eq!(template(line), template_by_every_mask(line), "{line:?}");
            plain += usize::from(!MASKABLE.is_match(body.trim()));
            stripped += usize::from(body.len() < line.trim_end().len());
        }
        // Every prefix is met, and many lines have none.
        for p in PREFIX_PATTERNS {
            let re = Regex::new(p).expect("prefix regex");
            assert!(
                lines.iter().any(|l| re.is_match(l)),
                "no line starts with {p}"
            );
        }
        assert!(
            stripped > 1000 && stripped + 1000 < lines.len(),
            "{stripped} of {}",
            lines.len()
        );
        // The gate is taken by lines with nothing to mask, and not by all.
        assert!(
            plain > 1000 && plain + 1000 < lines.len(),
            "{plain} of {}",
            lines.len()
        );
    }

    /// [`group`] as it was first written, one message at a time: the
    /// oracle of the candidates worked out beside the rules.
    fn group_one_by_one(incident: &Incident, findings: &[Finding]) -> Vec<UnknownError> {
        let cited: BTreeSet<Span> = findings
            .iter()
            .flat_map(|f| f.evidence.iter().map(|e| e.span))
            .collect();
        let explained: BTreeSet<String> = incident
            .facts
            .messages
            .iter()
            .filter(|m| cited.contains(&m.span))
            .map(|m| template_by_every_mask(&m.text))
            .collect();
        let mut groups: BTreeMap<String, UnknownError> = BTreeMap::new();
        for m in &incident.facts.messages {
            if cited.contains(&m.span)
                || !ERRORISH.is_match(&m.text)
                || is_frame_body(strip_each_prefix(&m.text))
            {
                continue;
            }
            let template = template_by_every_mask(&m.text);
            if explained.contains(&template) {
                continue;
            }
            let fingerprint = fnv1a(&template);
            groups
                .entry(fingerprint.clone())
                .and_modify(|g| {
                    g.count += 1;
                    g.first = g.first.min(m.span);
                })
                .or_insert(UnknownError {
                    fingerprint,
                    template,
                    count: 1,
                    first: m.span,
                });
        }
        let mut out: Vec<UnknownError> = groups.into_values().collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.first.cmp(&b.first)));
        out
    }

    #[test]
    fn the_candidates_group_as_each_message_did() {
        use crate::model::{Facts, Message};
        use crate::rules::{Category, Severity};
        use crate::source::SourceId;
        let mut facts = Facts::default();
        for (i, text) in fixture_lines().into_iter().enumerate() {
            let span = Span {
                source: SourceId(0),
                line: i as u32 + 1,
            };
            facts.messages.push(Message {
                span,
                text,
                pid: None,
            });
        }
        let incident = crate::correlate::correlate(facts);
        // Findings citing every seventh error line: those, and the lines
        // of their templates, are explained.
        let mut finding = Finding::new("test", Category::Unknown, Severity::Error);
        for m in incident
            .facts
            .messages
            .iter()
            .filter(|m| ERRORISH.is_match(&m.text))
            .step_by(7)
        {
            finding.evidence(m.span, "cited");
        }
        for findings in [Vec::new(), vec![finding]] {
            let grouped = group(&incident, &findings);
            assert!(grouped.len() > 100, "{}", grouped.len());
            assert_eq!(grouped, group_one_by_one(&incident, &findings));
        }
    }

    #[test]
    fn benign_mentions_of_error_are_not_errors() {
        for benign in [
            "[2026-03-05 10:00:01] Ignore import error when loading sglang.srt.models.glm4v_moe: No module named 'x'",
            "model_path='/models/llama-3.3-70b-error-correction-v3'",
            "0 errors, 0 warnings",
        ] {
            assert!(!ERRORISH.is_match(benign), "{benign}");
        }
        for error in [
            "ERROR 06-01 12:00:10 [core.py:396] EngineCore failed to start.",
            "OSError: [Errno 28] No space left on device",
            "systemd[1]: Failed to start foo.service - Foo.",
            "host:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect failed",
        ] {
            assert!(ERRORISH.is_match(error), "{error}");
        }
    }
}
