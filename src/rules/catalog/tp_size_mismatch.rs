//! `tp-size-mismatch`: the tensor-parallel size does not fit the model or
//! the GPUs.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{capitalise, confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: TpSizeMismatch = TpSizeMismatch;

pub struct TpSizeMismatch;

/// The catalog rows that are this failure (catalogs/stacks-*.toml).
const ROWS: &[&str] = &[
    "stacks-vllm.heads-not-divisible-by-tp",
    "stacks-vllm.ray-gpus-exceed-available",
    "stacks-tgi.not-enough-cuda-devices",
    "stacks-trtllm.mpi-size-mismatch",
    "stacks-trtllm.engine-world-size-mismatch",
];

/// The wordings no catalog row has yet: KV heads, other servers' TP checks.
static MISMATCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        Total\x20number\x20of\x20(?P<what>KV\x20heads|num_key_value_heads)\x20\((?P<heads>[0-9]+)\)\x20must\x20be\x20divisible\x20by\x20tensor\x20parallel\x20size\x20\((?P<tp>[0-9]+)\)
        | (?:is\x20not\x20divisible\x20by|must\x20be\x20divisible\x20by)\x20(?:the\x20)?(?:tensor\x20parallel\x20size|tp_size|tp\x20size)
        | (?:tensor_parallel_size|tp_size)\x20\(?(?P<want>[0-9]+)\)?\x20(?:is\x20)?(?:larger|greater)\x20than\x20the\x20number\x20of\x20(?:available\x20)?GPUs\x20\(?(?P<have>[0-9]+)",
    )
    .expect("tp regex")
});

/// What a line's numbers say, as the finding's title words it.
fn detail(get: impl Fn(&str) -> Option<String>) -> Option<String> {
    if let (Some(h), Some(t)) = (get("heads"), get("tp").filter(|_| get("mpi").is_none())) {
        let what = get("what").unwrap_or_else(|| "attention heads".to_owned());
        return Some(format!("{h} {what} cannot be split over {t} GPUs"));
    }
    if let (Some(w), Some(h)) = (get("want"), get("have")) {
        return Some(format!("{w} GPUs asked for, {h} available"));
    }
    if let (Some(mpi), Some(tp), Some(pp)) = (get("mpi"), get("tp"), get("pp")) {
        return Some(format!(
            "the engine needs TP {tp} × PP {pp} ranks, {mpi} were started"
        ));
    }
    if let (Some(e), Some(r)) = (get("engine"), get("runtime")) {
        return Some(format!(
            "the engine was built for world size {e}, {r} ranks were started"
        ));
    }
    get("n").map(|n| format!("sharded over more GPUs than the {n} visible"))
}

static META: RuleMeta = RuleMeta {
    id: "tp-size-mismatch",
    category: Category::TpSizeMismatch,
    severity: Severity::Critical,
    summary: "the tensor-parallel size does not divide the model's heads or exceeds the GPUs available",
    // The catalogs' rows bring their own anchors.
    anchors: &[
        "must be divisible by",
        "is not divisible by",
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
        let mut hits: Vec<(&Message, Option<String>)> = ROWS
            .iter()
            .flat_map(|id| incident.known(id))
            .map(|(m, hit)| (m, detail(|name| hit.get(name).map(str::to_owned))))
            .chain(matches(incident, &MISMATCH).map(|(m, c)| {
                (
                    m,
                    detail(|name| c.name(name).map(|x| x.as_str().to_owned())),
                )
            }))
            .collect();
        if hits.is_empty() {
            return;
        }
        // A row's line may match the remaining regex too: one hit per line,
        // the one with numbers first.
        hits.sort_by_key(|(m, d)| (m.span, d.is_none()));
        hits.dedup_by_key(|(m, _)| m.span);
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(3) {
            f.evidence(m.span, format!("the server rejected its TP size ({n}x)"));
        }
        let detail = hits.iter().find_map(|(_, d)| d.clone());
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
