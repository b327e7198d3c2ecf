//! `hf-model-load-failure`: the model's files are there but cannot be
//! loaded: corrupt or truncated weights, an unknown architecture, a
//! checkpoint that does not fit the model.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: HfModelLoadFailure = HfModelLoadFailure;

pub struct HfModelLoadFailure;

/// A cause: the catalog rows that are its messages (catalogs/stacks-*.toml),
/// the wordings no row has yet, what it means and its fix.
struct Cause {
    rows: &'static [&'static str],
    re: Option<Regex>,
    cause: &'static str,
    fix: &'static str,
}

static CAUSES: LazyLock<Vec<Cause>> = LazyLock::new(|| {
    [
        (
            &["stacks-hf.safetensors-header"][..],
            "",
            "a weight file is truncated or corrupt (or a Git LFS pointer instead of weights)",
            "re-download the model and compare file sizes with the repository; `git lfs pull` if it was cloned",
        ),
        (
            &[
                "stacks-hf.unrecognized-model-type",
                "stacks-vllm.architectures-not-supported",
            ][..],
            r"Unsupported architectures?: ",
            "the serving framework is too old for this model's architecture",
            "upgrade SGLang/vLLM and transformers to a release that supports the architecture",
        ),
        (
            &["stacks-hf.unrecognized-model"][..],
            "",
            "the folder or repository is not a transformers checkpoint (no `model_type` in a config.json: GGUF files only, an adapter, the wrong folder)",
            "point the loader at the original transformers checkpoint (the folder holding config.json), or serve GGUF files with a GGUF runtime",
        ),
        (
            &["stacks-hf.trust-remote-code-required"][..],
            r"contains custom code which must be executed to correctly load the model",
            "the model needs its own code and the server was not allowed to run it",
            "add --trust-remote-code after reviewing the repository's code",
        ),
        (
            &["stacks-torch.state-dict-load-error"][..],
            r"which is required according to the checkpoint index",
            "the checkpoint does not match the model (missing shards, wrong quantisation or config)",
            "re-download all shards and check the quantisation flags against the checkpoint",
        ),
    ]
    .into_iter()
    .map(|(rows, p, cause, fix)| Cause {
        rows,
        re: (!p.is_empty()).then(|| Regex::new(p).expect("hf load regex")),
        cause,
        fix,
    })
    .collect()
});

static META: RuleMeta = RuleMeta {
    id: "hf-model-load-failure",
    category: Category::ModelLoadFailure,
    severity: Severity::Critical,
    summary: "the model's files are present but cannot be loaded",
    // The catalog rows (stacks-hf, -vllm, -torch) bring their own anchors.
    anchors: &[
        "Unsupported architecture",
        "contains custom code",
        "checkpoint index",
    ],
    doc: r#"
## What it means
The weights and config were found but the loader rejected them.

## Why it happens
An incomplete download or Git LFS pointers instead of weights
(`SafetensorError: … HeaderTooLarge`), a framework too old for the model type,
a model that needs `--trust-remote-code`, or a checkpoint that does not match
the configuration or quantisation flags.

## How to confirm
The message names the file or the architecture; `ls -l` of the model
directory shows suspiciously small files.

## How to fix
Re-download and verify sizes or hashes; upgrade the serving framework;
pass the flags the model needs.

## Safety
Advice only.
"#,
};

impl Rule for HfModelLoadFailure {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let Some((hits, cause, fix)) = CAUSES.iter().find_map(|c| {
            let mut hits: Vec<&Message> = c
                .rows
                .iter()
                .flat_map(|id| incident.known(id).map(|(m, _)| m))
                .chain(
                    c.re.iter()
                        .flat_map(|re| matches(incident, re).map(|(m, _)| m)),
                )
                .collect();
            hits.sort_by_key(|m| m.span);
            hits.dedup_by_key(|m| m.span);
            (!hits.is_empty()).then_some((hits, c.cause, c.fix))
        }) else {
            return;
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(hits.iter().copied()).into_iter().take(4) {
            f.evidence(m.span, format!("the loader rejected the model ({n}x)"));
        }
        f.occurrences = hits.len() as u32;
        f.condition("the loader's message names the cause", true);
        f.title = format!("model load failed: {cause}");
        f.headline = format!("The model could not be loaded: {cause}.");
        f.chain
            .push("the server stopped while loading its model".to_owned());
        f.chain.push(cause.to_string());
        f.actions.push(Action::advice(fix, None));
        f.confidence = confidence(&f, 0.85, 0.92);
        out.push(f);
    }
}
