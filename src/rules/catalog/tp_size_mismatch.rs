//! `tp-size-mismatch`: the tensor-parallel size does not fit the model or
//! the GPUs.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::rules::support::{capitalise, confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: TpSizeMismatch = TpSizeMismatch;

pub struct TpSizeMismatch;

static MISMATCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        Total\x20number\x20of\x20(?P<what>attention\x20heads|KV\x20heads|num_key_value_heads)\x20\((?P<heads>[0-9]+)\)\x20must\x20be\x20divisible\x20by\x20tensor\x20parallel\x20size\x20\((?P<tp>[0-9]+)\)
        | (?:is\x20not\x20divisible\x20by|must\x20be\x20divisible\x20by)\x20(?:the\x20)?(?:tensor\x20parallel\x20size|tp_size|tp\x20size)
        | The\x20number\x20of\x20required\x20GPUs\x20exceeds\x20the\x20total\x20number\x20of\x20available\x20GPUs
        | (?:tensor_parallel_size|tp_size)\x20\(?(?P<want>[0-9]+)\)?\x20(?:is\x20)?(?:larger|greater)\x20than\x20the\x20number\x20of\x20(?:available\x20)?GPUs\x20\(?(?P<have>[0-9]+)",
    )
    .expect("tp regex")
});

static META: RuleMeta = RuleMeta {
    id: "tp-size-mismatch",
    category: Category::TpSizeMismatch,
    severity: Severity::Critical,
    summary: "the tensor-parallel size does not divide the model's heads or exceeds the GPUs available",
    anchors: &[
        "must be divisible by",
        "is not divisible by",
        "exceeds the total number of available GPUs",
        "than the number of",
    ],
    doc: r#"
## What it means
The server refused its `--tp` / `--tensor-parallel-size`: the model's
attention (or KV) heads cannot be split evenly across that many GPUs, or the
host has fewer GPUs than asked for.

## Why it happens
A TP size copied from another model (40 heads do not split over 3 or 16
GPUs), or `CUDA_VISIBLE_DEVICES` hiding some GPUs.

## How to confirm
The model's `config.json` (`num_attention_heads`, `num_key_value_heads`) and
`nvidia-smi -L` in the server's environment.

## How to fix
Choose a TP size that divides the head counts and fits the visible GPUs (1,
2, 4, 8 for most models); combine with pipeline or data parallelism for the
rest.

## Safety
Advice only.
"#,
};

impl Rule for TpSizeMismatch {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = matches(incident, &MISMATCH).collect();
        if hits.is_empty() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(3) {
            f.evidence(m.span, format!("the server rejected its TP size ({n}x)"));
        }
        let detail = hits.iter().find_map(|(_, c)| {
            match (
                c.name("heads"),
                c.name("tp"),
                c.name("want"),
                c.name("have"),
            ) {
                (Some(h), Some(t), _, _) => Some(format!(
                    "{} {} cannot be split over {} GPUs",
                    h.as_str(),
                    c.name("what").map_or("attention", |w| w.as_str()),
                    t.as_str()
                )),
                (_, _, Some(w), Some(h)) => Some(format!(
                    "{} GPUs asked for, {} available",
                    w.as_str(),
                    h.as_str()
                )),
                _ => None,
            }
        });
        f.condition("the server rejected the tensor-parallel size", true);
        f.condition("the numbers are in the message", detail.is_some());
        f.title = match &detail {
            Some(d) => format!("the tensor-parallel size does not fit: {d}"),
            None => "the tensor-parallel size does not fit the model or the GPUs".to_owned(),
        };
        f.headline = format!("{}.", capitalise(&f.title));
        f.chain
            .push("the server stopped while configuring tensor parallelism".to_owned());
        f.chain.push(f.title.clone());
        f.actions.push(Action::advice(
            "choose a TP size that divides the model's attention and KV heads and fits the visible GPUs",
            Some("grep -E 'num_attention_heads|num_key_value_heads' MODEL_DIR/config.json; nvidia-smi -L"),
        ));
        f.confidence = confidence(&f, 0.8, 0.95);
        out.push(f);
    }
}
