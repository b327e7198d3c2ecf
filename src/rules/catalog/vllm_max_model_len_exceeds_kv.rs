//! `vllm-max-model-len-exceeds-kv`: vLLM's KV cache cannot hold one
//! sequence of the model's maximum length; suggests the `--max-model-len`
//! that fits (or the utilization that would).

use crate::rules::support::server::cite_target;
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Framework;
use crate::rules::support::holders::Holders;
use crate::rules::support::server::{ceil2, events_at, explicit_flag, flag_action, fraction};
use crate::rules::support::vllm::{self, VllmMemory};
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: VllmMaxModelLenExceedsKv = VllmMaxModelLenExceedsKv;

pub struct VllmMaxModelLenExceedsKv;

static V0: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"The model's max seq len \((?P<len>[0-9]+)\) is larger than the maximum number of tokens that can be stored in KV cache \((?P<kv>[0-9]+)\)",
    )
    .expect("v0 regex")
});
static V1: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"To serve at least one request with the models?'s max seq len \((?P<len>[0-9]+)\), \((?P<need>[0-9.]+) Gi?B KV cache is needed, which is larger than the available KV cache memory \((?P<avail>[0-9.]+) Gi?B\)\.(?: Based on the available memory,(?: the estimated maximum model length is (?P<est>[0-9]+)\.)?)?",
    )
    .expect("v1 regex")
});

const MAX_UTIL: f64 = 0.95;

static META: RuleMeta = RuleMeta {
    id: "vllm-max-model-len-exceeds-kv",
    category: Category::KvCacheTooSmall,
    severity: Severity::Critical,
    summary: "vLLM's KV cache cannot hold one sequence of the model's maximum length",
    anchors: &[
        "max seq len",
        vllm::ANCHORS[0],
        vllm::ANCHORS[1],
        vllm::ANCHORS[2],
        vllm::ANCHORS[3],
    ],
    doc: r#"
## What it means
vLLM refuses to start when its KV cache cannot hold even one request of
`max_model_len` tokens. v0: `The model's max seq len (131072) is larger than
the maximum number of tokens that can be stored in KV cache (43984)`. V1: `To
serve at least one request with the models's max seq len (131072), (16.00 GiB
KV cache is needed, which is larger than the available KV cache memory (5.37
GiB). Based on the available memory, the estimated maximum model length is
43984.` (0.8.x prints no estimate.)

## Why it happens
`max_model_len` defaulted from the model's config (often 128k) to more than
the GPU can hold next to the weights; a low `--gpu-memory-utilization`;
memory taken by another process.

## How to confirm
The numbers in the message: the estimate, or `len x available / needed`.

## How to fix
Set `--max-model-len` to at most the estimate (the report rounds it down),
or give the KV cache more memory (`--gpu-memory-utilization` on a dedicated
GPU, more tensor parallelism, freeing the GPU).

## Safety
Flag changes are shown as a diff of the unit's ExecStart and never applied;
stopping another unit or signalling its process needs confirmation.
"#,
};

impl Rule for VllmMaxModelLenExceedsKv {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = matches(incident, &V1)
            .chain(matches(incident, &V0))
            .collect();
        let Some((first, c)) = hits.first() else {
            return;
        };
        let len: u64 = match c["len"].parse() {
            Ok(v) => v,
            Err(_) => return,
        };
        let need = c.name("need").and_then(|m| m.as_str().parse::<f64>().ok());
        let avail = c.name("avail").and_then(|m| m.as_str().parse::<f64>().ok());
        // What fits: vLLM's estimate, v0's token count, or len x avail / need.
        let fits: Option<u64> = c
            .name("est")
            .or(c.name("kv"))
            .and_then(|m| m.as_str().parse().ok())
            .or_else(|| match (need, avail) {
                (Some(n), Some(a)) if n > 0.0 => Some((len as f64 * a / n) as u64),
                _ => None,
            });
        let event = events_at(incident, first.span).next();
        let mem = VllmMemory::before(incident, first.span);
        let holders = Holders::of_run(incident, event, Framework::Vllm);
        let tp = mem.tp.unwrap_or(1);
        let group: Vec<u32> = (0..tp).collect();
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = hits.len() as u32;
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(2) {
            f.evidence(
                m.span,
                format!("the KV cache cannot hold one {len}-token sequence ({n}x)"),
            );
        }
        let unit = cite_target(&mut f, &holders.target);
        if let Some((w, span)) = mem.weights {
            f.evidence(span, format!("the weights take {w:.2} GiB per GPU"));
        }
        let who = unit.clone().unwrap_or_else(|| "the vLLM server".to_owned());
        f.chain.push(format!(
            "{who} failed at start-up: its KV cache cannot hold one sequence of max_model_len={len} tokens"
        ));
        f.chain.push(fits_link(len, need, avail, fits));
        f.condition(
            "vLLM reported that max_model_len does not fit the KV cache",
            true,
        );
        f.condition("the message says how many tokens fit", fits.is_some());
        if let Some((gpu, list)) = holders.most_held(group.iter().copied(), 1024) {
            let name = holders.report(&mut f, gpu, &list, &group);
            f.title = format!(
                "GPU {gpu} is held by {name}: the KV cache is too small for max_model_len={len}"
            );
            f.headline = format!(
                "GPU {gpu} is held by {name}, so {who}'s KV cache is too small for one {len}-token sequence."
            );
            f.explanation = "vLLM's budget is a fraction of the GPU's total memory; what another process holds is missing from the KV cache.".to_owned();
        } else {
            let suggest = fits.map(round_len);
            f.title = format!("max_model_len={len} does not fit the KV cache");
            f.headline = match suggest {
                Some(s) => format!(
                    "{who} cannot hold one {len}-token sequence in its KV cache; --max-model-len {s} fits."
                ),
                None => format!("{who} cannot hold one {len}-token sequence in its KV cache."),
            };
            f.explanation = "max_model_len usually defaults to the model's full context window; the KV cache left next to the weights on these GPUs is smaller than one such sequence.".to_owned();
            if let Some(s) = suggest.filter(|s| *s >= 256) {
                let action = flag_action(
                    incident,
                    &mut f,
                    unit.as_deref(),
                    "--max-model-len",
                    &s.to_string(),
                    format!(
                        "one {s}-token sequence fits the KV cache ({} fit)",
                        fits.unwrap_or(s)
                    ),
                    [first.span],
                );
                f.actions.push(action);
            }
            // Or the utilization that would hold one full sequence.
            f.actions.extend(util_action(
                incident,
                unit.as_deref(),
                &mem,
                len,
                need,
                avail,
            ));
        }
        f.confidence = confidence(&f, 0.75, 0.97);
        out.push(f);
    }
}

/// The chain's link on what the KV cache holds: the sizes and the tokens
/// that fit, as far as the message gives them.
fn fits_link(len: u64, need: Option<f64>, avail: Option<f64>, fits: Option<u64>) -> String {
    match (need, avail, fits) {
        (Some(n), Some(a), Some(e)) => format!(
            "one {len}-token sequence needs {n:.2} GiB of KV cache, {a:.2} GiB is available: about {e} tokens fit"
        ),
        (_, _, Some(e)) => format!("the KV cache holds {e} tokens"),
        _ => "the KV cache is smaller than one sequence".to_owned(),
    }
}

/// The advice to keep `len` with a higher `--gpu-memory-utilization`, the
/// one that would hold one full sequence, when the log gives the sizes and
/// that utilization is at most `MAX_UTIL`.
fn util_action(
    incident: &Incident,
    unit: Option<&str>,
    mem: &VllmMemory,
    len: u64,
    need: Option<f64>,
    avail: Option<f64>,
) -> Option<Action> {
    let util = mem.util.map(|u| u.0);
    let total = mem.total.map(|t| t.0);
    if let (Some(u), Some(t), Some(n), Some(a)) = (util, total, need, avail) {
        let new = ceil2(u + (n - a) / t + 0.01);
        let explicit = explicit_flag(incident, unit, Framework::Vllm, "--gpu-memory-utilization");
        if new <= MAX_UTIL {
            return Some(Action::advice(
                format!(
                    "or, on a GPU nothing else uses, keep max_model_len={len} with --gpu-memory-utilization {} (now {}{})",
                    fraction(new),
                    fraction(u),
                    if explicit.is_some() {
                        ", set on the command line"
                    } else {
                        ""
                    }
                ),
                None,
            ));
        }
    }
    None
}

/// A tidy `--max-model-len` at most `tokens`: a multiple of 1024 from 8192
/// on, of 256 below.
fn round_len(tokens: u64) -> u64 {
    let step = if tokens >= 8192 { 1024 } else { 256 };
    tokens / step * step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggested_lengths_round_down() {
        for (tokens, want) in [(43984, 43008), (8192, 8192), (5000, 4864), (200, 0)] {
            assert_eq!(round_len(tokens), want, "{tokens}");
        }
    }
}
