//! `sglang-runtime-kv-pressure`: SGLang's KV cache pool filled up under
//! load: retractions (normal, info) or an out-of-memory crash of the
//! scheduler (error).

use std::sync::LazyLock;

use regex::{Captures, Regex};

use crate::correlate::Incident;
use crate::model::{Framework, Landmark, Message, ServerEventKind};
use crate::rules::support::server::{events_at, flag_action, gib, target};
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: SglangRuntimeKvPressure = SglangRuntimeKvPressure;

pub struct SglangRuntimeKvPressure;

static RETRACT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"KV cache pool is full\. Retract requests\. #retracted_reqs: (?P<n>[0-9]+)")
        .expect("retract regex")
});
static OOM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<phase>Prefill|Decode) out of memory(?:\. Try to lower your batch size\.| happened\.)|alloc_req_slots runs out of memory",
    )
    .expect("kv oom regex")
});

static META: RuleMeta = RuleMeta {
    id: "sglang-runtime-kv-pressure",
    category: Category::KvCacheTooSmall,
    severity: Severity::Error,
    summary: "SGLang's KV cache pool filled up under load: retractions, or a scheduler crash",
    anchors: &[
        "KV cache pool is full",
        "out of memory. Try to lower your batch size",
        "Decode out of memory happened",
        "alloc_req_slots runs out of memory",
    ],
    doc: r#"
## What it means
The running requests needed more KV-cache tokens than the pool holds.
SGLang first retracts requests (`KV cache pool is full. Retract requests.
#retracted_reqs: 3`, they are re-queued: slower, not failed). When even that
is not enough, the scheduler raises `Decode out of memory. Try to lower your
batch size.` (or `Prefill out of memory`, `alloc_req_slots runs out of
memory`) and the server goes down.

## Why it happens
More concurrent requests or longer sequences than the KV pool was sized for:
`--max-running-requests` too high for `max_total_num_tokens`, a pool shrunk
by a low `--mem-fraction-static`, or a burst of very long requests.

## How to confirm
`max_total_num_tokens=…, max_running_requests=…, context_len=…` at start-up,
and the retraction lines growing before the crash.

## How to fix
Lower `--max-running-requests` (the report suggests half the current value),
give the pool more memory (`--mem-fraction-static`, if the GPU has headroom
after the CUDA graphs), or scale out.

## Safety
Flag changes are shown as a diff of the unit's ExecStart and never applied.
"#,
};

impl Rule for SglangRuntimeKvPressure {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let retracts: Vec<_> = matches(incident, &RETRACT).collect();
        let ooms: Vec<_> = matches(incident, &OOM).collect();
        if retracts.is_empty() && ooms.is_empty() {
            return;
        }
        let crashed = !ooms.is_empty();
        let severity = if crashed {
            META.severity
        } else {
            Severity::Info
        };
        let mut f = Finding::new(META.id, META.category, severity);
        let retracted: u64 = retracts
            .iter()
            .filter_map(|(_, c)| c["n"].parse::<u64>().ok())
            .sum();
        for (m, n) in distinct(ooms.iter().map(|(m, _)| *m)).into_iter().take(2) {
            f.evidence(m.span, format!("the KV cache pool ran out ({n}x)"));
        }
        if let Some((m, _)) = retracts.first() {
            f.evidence(m.span, "the first retraction");
        }
        if let Some((m, _)) = retracts.last().filter(|_| retracts.len() > 1) {
            f.evidence(
                m.span,
                format!(
                    "the last of {} retractions ({retracted} requests retracted in all)",
                    retracts.len()
                ),
            );
        }
        let pool = pool_size(incident);
        if let Some((tokens, reqs, _, span)) = pool {
            f.evidence(
                span,
                format!(
                    "the pool holds {tokens} tokens for up to {} running requests",
                    reqs.map_or("?".to_owned(), |r| r.to_string())
                ),
            );
        }
        let event = ooms
            .first()
            .or(retracts.first())
            .and_then(|(m, _)| events_at(incident, m.span).next());
        let tgt = target(incident, event, Framework::Sglang);
        let unit = tgt.as_ref().map(|t| t.0.as_str());
        if let Some(u) = unit {
            f.entities.units.insert(u.to_owned());
        }
        let who = unit.unwrap_or("the SGLang server").to_owned();
        f.occurrences = (ooms.len() + retracts.len()) as u32;
        f.condition("SGLang reported a full KV cache pool", true);
        f.condition("the pool's size is in the log", pool.is_some());
        if crashed {
            explain_crash(&mut f, &who, &ooms, pool, retracted, retracts.is_empty());
        } else {
            f.chain.push(format!(
                "{who} retracted {retracted} requests because its KV cache pool was full"
            ));
            f.title = "SGLang's KV cache pool was full: requests were retracted".to_owned();
            f.headline = format!(
                "{who}'s KV cache pool filled up under load and {retracted} requests were retracted and re-queued; none failed."
            );
        }
        f.explanation = "SGLang sizes the KV pool once at start-up; under heavier load than it was sized for it retracts running requests, and if that is not enough the scheduler fails.".to_owned();
        push_actions(incident, &mut f, unit, pool, crashed);
        f.confidence = confidence(&f, 0.75, 0.9);
        out.push(f);
    }
}

/// The KV pool as SGLang sized it at start-up: its tokens, the most running
/// requests, the GiB left free, and its line.
type Pool = (u64, Option<u64>, Option<f64>, Span);

/// Returns the KV pool's size from the last `max_total_num_tokens=` line.
fn pool_size(incident: &Incident) -> Option<Pool> {
    incident
        .facts
        .server_events
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            ServerEventKind::Landmark(Landmark::MaxTotalTokens {
                max_total_num_tokens,
                max_running_requests,
                available_gpu_mem_bytes,
                ..
            }) => Some((
                *max_total_num_tokens,
                *max_running_requests,
                available_gpu_mem_bytes.map(gib),
                e.span,
            )),
            _ => None,
        })
}

/// Writes the chain, title and headline when the scheduler crashed out of KV
/// cache (`ooms`, whose first phase is named), with the pool's size and the
/// requests `retracted` before it unless there were none (`no_retracts`).
fn explain_crash(
    f: &mut Finding,
    who: &str,
    ooms: &[(&Message, Captures)],
    pool: Option<Pool>,
    retracted: u64,
    no_retracts: bool,
) {
    let phase = ooms
        .iter()
        .find_map(|(_, c)| c.name("phase").map(|p| p.as_str().to_lowercase()))
        .unwrap_or_else(|| "request scheduling".to_owned());
    f.chain.push(format!(
        "{who} went down: its scheduler ran out of KV cache during {phase}"
    ));
    f.chain.push(match pool {
        Some((tokens, _, _, _)) => format!(
            "the running requests needed more KV cache tokens than the pool's {tokens}{}",
            if no_retracts {
                String::new()
            } else {
                format!(", and retracting {retracted} requests did not relieve it")
            }
        ),
        None => "the running requests needed more KV cache tokens than the pool holds".to_owned(),
    });
    f.title = format!("SGLang's KV cache pool ran out during {phase}");
    f.headline = format!(
        "{who}'s scheduler crashed with `{} out of memory`: the running requests needed more KV cache than the pool holds{}.",
        if phase == "prefill" {
            "Prefill"
        } else {
            "Decode"
        },
        pool.map(|p| format!(" ({} tokens)", p.0))
            .unwrap_or_default()
    );
}

/// Pushes the fixes: halve --max-running-requests (from the pool's line,
/// after a crash) or lower it, use the memory left free, add replicas.
fn push_actions(
    incident: &Incident,
    f: &mut Finding,
    unit: Option<&str>,
    pool: Option<Pool>,
    crashed: bool,
) {
    match pool.and_then(|p| p.1.map(|r| (r, p.3))) {
        Some((reqs, span)) if crashed && reqs >= 4 => {
            let action = flag_action(
                incident,
                f,
                unit,
                "--max-running-requests",
                &(reqs / 2).to_string(),
                format!("fewer concurrent requests than {reqs} fit the pool"),
                [span],
            );
            f.actions.push(action);
        }
        _ => f.actions.push(Action::advice(
            "lower --max-running-requests so the running requests fit the KV pool",
            None,
        )),
    }
    if let Some(headroom) = pool.and_then(|p| p.2).filter(|h| *h >= 3.0) {
        f.actions.push(Action::advice(
            format!("{headroom:.2} GiB stayed free after start-up: a higher --mem-fraction-static would give the pool more of it"),
            None,
        ));
    }
    f.actions
        .push(Action::advice("or add replicas / GPUs for the load", None));
}
