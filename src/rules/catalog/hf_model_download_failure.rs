//! `hf-model-download-failure`: the model could not be fetched from the
//! Hugging Face Hub (no network, offline cache, gated repo, bad id, disk).

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: HfModelDownloadFailure = HfModelDownloadFailure;

pub struct HfModelDownloadFailure;

/// A cause: the catalog rows that are its messages (catalogs/stacks-hf.toml),
/// the wordings no row has yet, what it means and its fix.
struct Cause {
    rows: &'static [&'static str],
    re: Option<Regex>,
    cause: &'static str,
    fix: &'static str,
}

/// Each cause with the text that gives it away, most specific first.
static CAUSES: LazyLock<Vec<Cause>> = LazyLock::new(|| {
    [
        (
            &["stacks-hf.gated-repo"][..],
            r"You are trying to access a gated repo|401 Client Error|403 Client Error",
            "the repository is gated or private and the service has no token for it",
            "give the unit a token with access (Environment=HF_TOKEN=… or an EnvironmentFile), or pre-download the model",
        ),
        (
            &[][..],
            r"outgoing traffic has been disabled",
            "offline mode (HF_HUB_OFFLINE / local_files_only) with an incomplete cache",
            "complete the cache on a machine with access, or point the server at a local model directory",
        ),
        (
            &["stacks-hf.not-a-model-identifier", "stacks-hf.repo-not-found"][..],
            r"is not a valid git identifier",
            "the model id or revision does not exist (or is private)",
            "check the --model-path / --model value and the revision",
        ),
        (
            &["stacks-hf.missing-file"][..],
            "",
            "the repository lacks a file the loader asked for",
            "check the model id and revision; some repositories need --trust-remote-code or another file layout",
        ),
        (
            &[][..],
            r"\[Errno 28\] No space left on device|\[Errno 13\] Permission denied: '.*huggingface|PermissionError at \S+ when downloading",
            "the Hugging Face cache cannot be written (disk full or wrong owner)",
            "free space in HF_HOME or fix its ownership for the service user",
        ),
        (
            &["stacks-hf.cannot-reach-hub"][..],
            r"There was a specific connection error when trying to load|ReadTimeoutError|ConnectionError: .*huggingface\.co|429 Client Error",
            "the host cannot reach the Hub (network, proxy, firewall, rate limit)",
            "pre-download the model to a local path, or allow the host to reach the Hub through its proxy",
        ),
    ]
    .into_iter()
    .map(|(rows, p, cause, fix)| Cause {
        rows,
        re: (!p.is_empty()).then(|| Regex::new(p).expect("hf regex")),
        cause,
        fix,
    })
    .collect()
});

/// Only lines of a model load are about the Hub; `No space left` alone could
/// be any disk.
static HUB_CONTEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"huggingface|hf_hub|transformers|snapshot_download|\.cache/huggingface|HF_HOME")
        .expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "hf-model-download-failure",
    category: Category::ModelLoadFailure,
    severity: Severity::Critical,
    summary: "the model could not be downloaded from the Hugging Face Hub",
    // The catalog rows (stacks-hf) bring their own anchors.
    anchors: &[
        "gated repo",
        "Client Error",
        "outgoing traffic has been disabled",
        "not a valid git identifier",
        "specific connection error",
        "ReadTimeoutError",
        "No space left on device",
        "Permission denied",
        "PermissionError",
    ],
    doc: r#"
## What it means
The server could not get the model's files from the Hugging Face Hub or its
cache, so it never loaded.

## Why it happens
No network from the GPU node (proxy, firewall); offline mode with an
incomplete cache; a gated or private model and no `HF_TOKEN` in the
service's environment (common under systemd: the login shell's token is not
inherited); a wrong repository id or revision; a full or foreign-owned
`HF_HOME`.

## How to confirm
The exact message says which: `gated repo`, `outgoing traffic has been
disabled`, `is not a valid model identifier`, `No space left on device`.

## How to fix
Pre-download the model and point `--model-path`/`--model` at the local
directory; give the unit `HF_TOKEN`/`HF_HOME` through `Environment=`; free
disk space; fix ownership of the cache.

## Safety
Advice only.
"#,
};

impl Rule for HfModelDownloadFailure {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for Cause {
            rows,
            re,
            cause,
            fix,
        } in CAUSES.iter()
        {
            let mut hits: Vec<&Message> = rows
                .iter()
                .flat_map(|id| incident.known(id).map(|(m, _)| m))
                .chain(
                    re.iter()
                        .flat_map(|re| matches(incident, re).map(|(m, _)| m))
                        .filter(|m| !m.text.contains("Errno 28") || HUB_CONTEXT.is_match(&m.text)),
                )
                .collect();
            if hits.is_empty() {
                continue;
            }
            hits.sort_by_key(|m| m.span);
            hits.dedup_by_key(|m| m.span);
            let mut f = Finding::new(META.id, META.category, META.severity);
            for (m, n) in distinct(hits.iter().copied()).into_iter().take(4) {
                f.evidence(m.span, format!("the download failed ({n}x)"));
            }
            f.occurrences = hits.len() as u32;
            f.condition("a Hugging Face Hub error names the cause", true);
            f.title = format!("model download failed: {cause}");
            f.headline = format!("The model could not be downloaded: {cause}.");
            f.chain
                .push("the server could not load its model".to_owned());
            f.chain.push((*cause).to_string());
            f.explanation =
                "The files never reached the node, so the server stopped before loading weights."
                    .to_owned();
            f.actions.push(Action::advice(*fix, None));
            f.actions.push(Action::advice(
                "check what the service sees of the Hub settings",
                Some("systemctl show -p Environment UNIT; ls -la \"${HF_HOME:-$HOME/.cache/huggingface}\""),
            ));
            f.confidence = confidence(&f, 0.85, 0.93);
            out.push(f);
            // The most specific cause found names the failure; the generic
            // connection errors that follow a gated repo are its echo.
            break;
        }
    }
}
