//! Unrecognised errors: error-looking lines that no finding cites, grouped
//! into stable templates so that a new failure is visible even before a rule
//! exists for it.

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

/// Variable parts masked out of a template, most specific first.
static MASKS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (r"GPU-[0-9a-fA-F-]{36}", "<uuid>"),
        (
            r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
            "<uuid>",
        ),
        (r"\b0x[0-9a-fA-F]+\b", "<hex>"),
        (r"\b[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?::[0-9]+)?\b", "<ip>"),
        (r#"(?:[A-Za-z]:)?(?:/[^\s/:'",()\[\]]+)+/?"#, "<path>"),
        (r"\b[0-9]+(?:\.[0-9]+)?\b", "<n>"),
    ]
    .into_iter()
    .map(|(p, r)| (Regex::new(p).expect("mask regex"), r))
    .collect()
});

/// The wrappers other tools put around a message (journal, SGLang, vLLM,
/// dmesg), so that one message in two captures has one template.
static PREFIXES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"^[0-9]{4}-[0-9][0-9]-[0-9][0-9]T\S+ \S+ [^:\s]+(?:\[[0-9]+\])?: ",
        r"^[A-Z][a-z]{2} [ 0-3][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]+)? \S+ [^:\s]+(?:\[[0-9]+\])?: ",
        r"^\[[0-9]{4}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9][^\]]*\] ",
        r"^(?:\([^)]*pid=[0-9]+\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] \[?[^\]\s]+\] ",
        r"^\[\s*[0-9]+\.[0-9]+\] ",
    ]
    .into_iter()
    .map(|p| Regex::new(p).expect("prefix regex"))
    .collect()
});

/// A long run of hex digits with at least one letter: an id, not a number.
static HEX_RUN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[0-9a-f]{12,}\b").expect("hex regex"));

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

pub fn group(incident: &Incident, findings: &[Finding]) -> Vec<UnknownError> {
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
    for m in &incident.facts.messages {
        if cited.contains(&m.span) || !ERRORISH.is_match(&m.text) || is_traceback_frame(&m.text) {
            continue;
        }
        let template = template(&m.text);
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

/// The frames of a traceback printed at ERROR level (vLLM prefixes every
/// line) are not errors of their own: the exception line at their end is.
fn is_traceback_frame(line: &str) -> bool {
    let body = strip_prefixes(line);
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
    while let Some(m) = PREFIXES.iter().find_map(|re| re.find(text)) {
        text = &text[m.end()..];
    }
    text
}

/// The line with its variable parts masked: timestamps, PIDs, sizes, paths,
/// addresses and ids all become placeholders.
pub fn template(line: &str) -> String {
    let text = strip_prefixes(line).trim();
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

fn fnv1a(text: &str) -> String {
    use std::hash::Hasher as _;
    let mut hash = fnv::FnvHasher::default();
    hash.write(text.as_bytes());
    format!("{:016x}", hash.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

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
