//! `sglang-kv-not-enough-memory`: SGLang found no memory for its KV cache
//! after loading the weights, and why: another process, a low
//! `--mem-fraction-static`, or a model too large for the TP size.

use crate::rules::support::server::cite_target;

use crate::catalogs::Hit;
use crate::correlate::{Gpu, Incident};
use crate::model::{Framework, Landmark, ServerArgs, ServerEvent, ServerEventKind};
use crate::rules::support::holders::{Holder, Holders, held_mib};
use crate::rules::support::server::{
    before, ceil2, events_at, explicit_flag, flag_action, fraction, gib, gpu_of_rank, launch_args,
    target, unsized_fraction_at_fault,
};
use crate::rules::support::{cite_gpu_memory, confidence, distinct, mib};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: SglangKvNotEnoughMemory = SglangKvNotEnoughMemory;

pub struct SglangKvNotEnoughMemory;

/// SGLang's refusal, as its catalog row reads it (catalogs/stacks-sglang.toml):
/// `Not enough memory. Please try to increase --mem-fraction-static.`, and
/// from 0.5 ` Current value: …mem_fraction_static=0.88` (`fraction`).
const NOT_ENOUGH: &str = "stacks-sglang.not-enough-memory";

/// Free memory at `Load weight begin` this much below the GPU's total means
/// something else holds memory (CUDA context and NCCL take 1–2 GiB).
const FOREIGN_GAP_GIB: f64 = 4.0;
/// The smallest KV pool worth suggesting a fraction for: a twentieth of the
/// memory SGLang measured before loading (a 70B model on two 80 GB GPUs
/// runs with about that).
const KV_FLOOR: f64 = 0.05;
/// SGLang needs room outside the static pool for activations and CUDA
/// graphs; a fraction above this is not advised.
const MAX_FRACTION: f64 = 0.90;
/// Below this a fraction is someone's choice: SGLang's own defaults are
/// higher on every GPU it sizes for.
const LOW_FRACTION: f64 = 0.70;

static META: RuleMeta = RuleMeta {
    id: "sglang-kv-not-enough-memory",
    category: Category::KvCacheTooSmall,
    severity: Severity::Critical,
    summary: "SGLang had no memory left for its KV cache after loading the weights",
    // The refusal's anchor comes with its catalog row.
    anchors: &[],
    doc: r#"
## What it means
After loading the weights, SGLang computed a KV-cache budget of zero or less
and refused to start: `RuntimeError: Not enough memory. Please try to
increase --mem-fraction-static.` (0.5.x adds `Current value:
mem_fraction_static=0.88`). The budget is `rest = avail_after_weights -
pre_load_free x (1 - mem_fraction_static)`: the weights and reserves took
everything the static fraction allowed.

## Why it happens
1. Another process holds memory on the GPUs, so the free memory measured at
   `Load weight begin` is far below the GPU's total.
2. `--mem-fraction-static` was set too low for the model.
3. The model is too large for the GPUs at this tensor-parallel size: even a
   high fraction leaves no room for a KV cache.

## How to confirm
`Load weight begin. avail mem=X GB` against nvidia-smi's total (a gap above a
few GiB is someone else's memory); `Load weight end. … mem usage=W GB` (the
weights per GPU) against `mem_fraction_static x X` in `server_args=`.

## How to fix
1.: free the GPUs (stop the holder's unit) or move the server to free GPUs.
2.: raise `--mem-fraction-static` to the value the report computes (weights
plus a twentieth of the memory for the KV cache), keeping it at or below 0.90.
3.: more tensor parallelism (`--tp-size`), quantised weights or a smaller
model.

## Safety
A flag change is shown as a diff of the unit's ExecStart and never applied.
Stopping another unit or signalling its process needs confirmation and is
re-checked (start time, command line, unit) before it runs.
"#,
};

/// The numbers the decision rests on, all in GiB.
struct Numbers {
    /// Free memory when the weights began loading (group minimum).
    before: Option<(f64, Span)>,
    /// Free memory after the weights, and what they took.
    after: Option<(f64, Option<f64>, Span)>,
    fraction: Option<(f64, Span)>,
    /// The GPU's total (nvidia-smi).
    total: Option<f64>,
}

impl Rule for SglangKvNotEnoughMemory {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = incident.known(NOT_ENOUGH).collect();
        let Some((first, caps)) = hits.first() else {
            return;
        };
        let event = events_at(incident, first.span).next();
        let args = launch_args(incident, Framework::Sglang);
        let rank = event.and_then(|e| e.rank?.tp).unwrap_or(0);
        let gpu_index = gpu_of_rank(args.as_ref().map(|a| &a.0), rank);
        let gpu = incident.gpu(gpu_index).or(incident.gpus.first());
        let numbers = numbers(incident, first.span, rank, args.as_ref(), caps, gpu);
        let tgt = target(incident, event, Framework::Sglang);
        let own_pids = incident
            .facts
            .server_events
            .iter()
            .filter(|e| e.framework == Framework::Sglang)
            .filter_map(|e| e.pid)
            .collect();
        let holders = Holders {
            incident,
            own_pids,
            target: tgt.clone(),
            framework: Framework::Sglang,
        };
        let tp = args.as_ref().and_then(|a| a.0.tp_size).unwrap_or(1);
        let group: Vec<u32> = (0..tp)
            .map(|r| gpu_of_rank(args.as_ref().map(|a| &a.0), r))
            .collect();
        // The most-held GPU of the group, by memory of foreign processes.
        let held = holders.most_held(group.iter().copied(), 1024);

        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = hits.len() as u32;
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(3) {
            f.evidence(
                m.span,
                format!("SGLang found no memory for the KV cache ({n}x)"),
            );
        }
        let unit = cite_target(&mut f, &tgt);
        let unit = unit.as_deref();
        if let Some((a, span)) = &args {
            f.evidence(
                *span,
                format!(
                    "launch arguments: tp_size={}, mem_fraction_static={}",
                    a.tp_size.map_or("?".to_owned(), |t| t.to_string()),
                    a.mem_fraction_static.map_or("?".to_owned(), fraction)
                ),
            );
        }
        if let Some((x, span)) = numbers.before {
            f.evidence(
                span,
                format!("{x:.2} GiB free when the weights began to load"),
            );
        }
        if let Some((y, w, span)) = numbers.after {
            f.evidence(
                span,
                match w {
                    Some(w) => format!("the weights took {w:.2} GiB per GPU; {y:.2} GiB was left"),
                    None => format!("{y:.2} GiB was left after the weights"),
                },
            );
        }
        if let Some(g) = gpu {
            cite_gpu_memory(&mut f, g);
        }
        let who = unit.unwrap_or("the SGLang server").to_owned();
        f.chain.push(format!(
            "{who} failed at start-up: SGLang found no memory for its KV cache after loading the weights"
        ));
        if let Some(line) = budget_line(&numbers) {
            f.chain.push(line);
        }
        f.condition("SGLang reported `Not enough memory` for the KV cache", true);
        f.condition(
            "the log shows the free memory before and after the weights",
            numbers.before.is_some() && numbers.after.is_some(),
        );

        let gap = match (numbers.total, numbers.before) {
            (Some(t), Some((x, _))) => Some(t - x),
            _ => None,
        };
        let foreign_gap = gap.is_some_and(|g| g > FOREIGN_GAP_GIB);
        if let Some((gpu_index, list)) = held.filter(|_| foreign_gap || gap.is_none()) {
            explain_held(&mut f, &holders, gpu_index, &list, gap, &group, &who);
        } else if foreign_gap {
            explain_invisible(&mut f, gap.unwrap_or_default(), &numbers, &who);
        } else {
            explain_sizes(incident, &mut f, &numbers, tp, unit, &who);
        }
        f.confidence = confidence(&f, 0.6, 0.95);
        out.push(f);
    }
}

fn numbers(
    incident: &Incident,
    failure: Span,
    rank: u32,
    args: Option<&(ServerArgs, Span)>,
    caps: &Hit<'_>,
    gpu: Option<&Gpu>,
) -> Numbers {
    let of_rank = |e: &&ServerEvent| e.rank.and_then(|r| r.tp).unwrap_or(0) == rank;
    let mut before_weights = None;
    let mut after = None;
    for e in before(incident, failure).filter(of_rank) {
        match &e.kind {
            ServerEventKind::Landmark(Landmark::LoadWeightBegin {
                avail_bytes: Some(b),
            }) if before_weights.is_none() => before_weights = Some((gib(*b), e.span)),
            ServerEventKind::Landmark(Landmark::LoadWeightEnd {
                avail_bytes: Some(b),
                mem_usage_bytes,
                ..
            }) if after.is_none() => after = Some((gib(*b), mem_usage_bytes.map(gib), e.span)),
            _ => {}
        }
        if before_weights.is_some() && after.is_some() {
            break;
        }
    }
    // The error's own `Current value:` is the value that failed.
    let fraction = caps
        .get("fraction")
        .and_then(|m| m.parse().ok())
        .map(|v| (v, failure))
        .or_else(|| args.and_then(|(a, span)| a.mem_fraction_static.map(|f| (f, *span))));
    let total = gpu
        .and_then(|g| g.memory_total_mib)
        .map(|t| t as f64 / 1024.0);
    Numbers {
        before: before_weights,
        after,
        fraction,
        total,
    }
}

/// `rest = Y - X x (1 - f)`, SGLang's own arithmetic, when the log has it.
fn budget_line(n: &Numbers) -> Option<String> {
    let (x, _) = n.before?;
    let (y, _, _) = n.after?;
    let (fr, _) = n.fraction?;
    let rest = y - x * (1.0 - fr);
    Some(format!(
        "the KV budget is avail after weights - free before x (1 - mem_fraction_static) = {y:.2} - {x:.2} x {:.2} = {rest:.2} GiB",
        1.0 - fr
    ))
}

#[allow(clippy::too_many_arguments)]
fn explain_held(
    f: &mut Finding,
    holders: &Holders<'_>,
    gpu: u32,
    list: &[Holder<'_>],
    gap: Option<f64>,
    group: &[u32],
    who: &str,
) {
    let held = held_mib(list);
    let held_gib = held as f64 / 1024.0;
    // The same holders on the group's other GPUs.
    for &other in group.iter().filter(|g| **g != gpu) {
        for h in holders.on(other) {
            if h.process.used_mib.unwrap_or(0) < 1024 {
                continue;
            }
            f.entities.gpus.insert(other);
            if let Some(span) = h.process.spans.first() {
                f.evidence(
                    *span,
                    format!(
                        "PID {} also holds {} on GPU {other}",
                        h.process.pid,
                        mib(h.process.used_mib)
                    ),
                );
            }
        }
    }
    let name = holders.report(f, gpu, list, group);
    if let Some(g) = gap {
        f.condition(
            format!(
                "free memory before loading is {g:.2} GiB below the GPU's total, about what the holder takes ({held_gib:.2} GiB)"
            ),
            (g - held_gib).abs() <= 2.5,
        );
    }
    f.title = format!("GPU {gpu} is held by {name}, leaving SGLang no room for its KV cache");
    f.headline = format!(
        "GPU {gpu} is held by {name} with {}, so {who} had no memory left for its KV cache after loading the weights.",
        mib(Some(held))
    );
    f.explanation = "SGLang sizes its static pool as a fraction of the free memory it measures before loading; memory another process holds shrinks that pool, and the weights took all of it. Raising --mem-fraction-static on a shared GPU only moves the failure to run time.".to_owned();
}

fn explain_invisible(f: &mut Finding, gap: f64, n: &Numbers, who: &str) {
    f.category = Category::GpuMemoryHeldByOtherProcess;
    let x = n.before.map_or(0.0, |b| b.0);
    let t = n.total.unwrap_or(0.0);
    f.chain.push(format!(
        "only {x:.2} GiB of the GPU's {t:.2} GiB was free before loading: {gap:.2} GiB is held by something the process list does not show"
    ));
    f.condition(
        format!("free memory before loading is {gap:.2} GiB below the GPU's total"),
        true,
    );
    f.condition("the holder is visible in nvidia-smi's process list", false);
    f.title = format!("{gap:.2} GiB of the GPU was in use before SGLang loaded; no KV cache fits");
    f.headline = format!(
        "{gap:.2} GiB of the GPU was already in use when {who} started, by a process the inputs do not show, so no memory was left for the KV cache."
    );
    f.explanation = "SGLang measures free memory before loading and sizes its static pool from it. The gap between the GPU's total and that free memory is far more than a CUDA context: another process (in another container, or gone before the snapshot) held it.".to_owned();
    f.actions.push(Action::advice(
        "list the processes on the server's GPUs from the host, outside any container",
        Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
    ));
    f.actions.push(Action::advice(
        "stop the holder (or move the server to free GPUs with CUDA_VISIBLE_DEVICES), then restart the server",
        None,
    ));
}

fn explain_sizes(
    incident: &Incident,
    f: &mut Finding,
    n: &Numbers,
    tp: u32,
    unit: Option<&str>,
    who: &str,
) {
    let explicit = explicit_flag(incident, unit, Framework::Sglang, "--mem-fraction-static");
    if let Some((v, span)) = &explicit {
        f.evidence(
            *span,
            format!("the command line sets --mem-fraction-static {v}"),
        );
    }
    let current = n.fraction.map(|x| x.0);
    // The fraction that leaves a twentieth of the memory for the KV cache.
    let needed = match (n.before, n.after) {
        (Some((x, _)), Some((y, _, _))) if x > 0.0 => Some(ceil2(1.0 - (y - KV_FLOOR * x) / x)),
        _ => None,
    };
    let Some(needed) = needed else {
        let stated = current.or_else(|| explicit.as_ref().and_then(|(v, _)| v.parse().ok()));
        if unsized_fraction_at_fault(f, stated, LOW_FRACTION, false) {
            explain_low_unsized(incident, f, stated.unwrap_or_default(), n, tp, unit, who);
            return;
        }
        f.title = "SGLang found no memory for its KV cache".to_owned();
        f.headline = format!(
            "{who} found no memory for its KV cache after loading the weights; the log lacks the numbers to say whether the fraction or the model size is at fault."
        );
        f.explanation =
            "Without the `Load weight` lines the budget cannot be recomputed.".to_owned();
        f.actions.push(Action::advice(
            "raise --mem-fraction-static a little (at most 0.90), or add GPUs (--tp-size) if the weights alone fill the GPU",
            None,
        ));
        return;
    };
    let low = current.is_some_and(|c| c < LOW_FRACTION) || explicit.is_some();
    if needed <= MAX_FRACTION {
        explain_fraction_low(incident, f, n, unit, who, needed, low);
    } else {
        explain_too_large(incident, f, n, tp, unit, who, needed);
    }
}

/// The lines the fraction's fix rests on: the memory before loading, the
/// memory after it, the fraction in the launch arguments.
fn fraction_evidence(n: &Numbers) -> Vec<Span> {
    [
        n.before.map(|b| b.1),
        n.after.map(|a| a.2),
        n.fraction.map(|x| x.1),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Writes the category, chain, conditions, title, headline, explanation and
/// fix when a fraction up to the maximum (`needed`) fits the weights and a KV
/// cache: raise --mem-fraction-static to it. `low`: the fraction was set
/// explicitly or far below SGLang's defaults.
fn explain_fraction_low(
    incident: &Incident,
    f: &mut Finding,
    n: &Numbers,
    unit: Option<&str>,
    who: &str,
    needed: f64,
    low: bool,
) {
    let current = n.fraction.map(|x| x.0);
    let weights = n.after.and_then(|a| a.1);
    let suggest = current.map_or(needed, |c| needed.max(ceil2(c + 0.02)));
    let cur = current.map_or("its current value".to_owned(), fraction);
    f.category = if low {
        Category::MemFractionMisconfigured
    } else {
        Category::KvCacheTooSmall
    };
    f.chain.push(format!(
        "mem_fraction_static={cur} is too low for this model: {} leaves a twentieth of the memory for the KV cache",
        fraction(needed)
    ));
    f.condition(
        format!(
            "a fraction of {} (at most {MAX_FRACTION:.2}) fits the weights and a KV cache",
            fraction(needed)
        ),
        true,
    );
    if low {
        f.condition(
            "the fraction was set explicitly or far below SGLang's defaults",
            true,
        );
    }
    f.title = format!("--mem-fraction-static {cur} is too low for the model's weights");
    f.headline = format!(
        "{who} had no memory for its KV cache because mem_fraction_static={cur} leaves too little after the weights{}; {} would fit.",
        weights
            .map(|w| format!(" ({w:.2} GiB per GPU)"))
            .unwrap_or_default(),
        fraction(suggest)
    );
    f.explanation = format!(
        "SGLang's static pool (weights + KV cache) is mem_fraction_static x the free memory before loading. At {cur} the weights used it all. \
         {} leaves about a twentieth of the memory for the KV cache and keeps {:.0} % outside the pool for activations and CUDA graphs.",
        fraction(suggest),
        (1.0 - suggest) * 100.0
    );
    let action = flag_action(
        incident,
        f,
        unit,
        "--mem-fraction-static",
        &fraction(suggest),
        format!("the weights need more than mem_fraction_static={cur} of the free memory"),
        fraction_evidence(n),
    );
    f.actions.push(action);
}

/// Writes the category, chain, condition, title, headline, explanation and
/// fix when no fraction up to the maximum fits (`needed` is above it): the
/// model is too large for its GPUs at `tp`; more GPUs or a smaller model.
fn explain_too_large(
    incident: &Incident,
    f: &mut Finding,
    n: &Numbers,
    tp: u32,
    unit: Option<&str>,
    who: &str,
    needed: f64,
) {
    let weights = n.after.and_then(|a| a.1);
    f.category = Category::KvCacheTooSmall;
    let w = weights.map_or("the weights".to_owned(), |w| {
        format!("{w:.2} GiB of weights per GPU")
    });
    f.chain.push(format!(
        "{w} leave no room for a KV cache at tp_size={tp}: even mem_fraction_static={MAX_FRACTION:.2} would not"
    ));
    f.condition(
        format!(
            "no fraction up to {MAX_FRACTION:.2} fits the weights and a KV cache (needs {})",
            fraction(needed)
        ),
        true,
    );
    f.title = format!("the model is too large for its GPUs at tp_size={tp}");
    f.headline = format!(
        "{who} had no memory for its KV cache: {w} fill the GPUs at tp_size={tp}, and no --mem-fraction-static can fix that."
    );
    f.explanation = "The weights alone take nearly all of the memory SGLang may use, so the KV cache gets nothing. Split the model over more GPUs, quantise it, or serve a smaller one.".to_owned();
    let free_gpus = incident.gpus.len() as u32;
    if free_gpus >= tp * 2 {
        let action = flag_action(
            incident,
            f,
            unit,
            "--tp-size",
            &(tp * 2).to_string(),
            format!("halves the weights per GPU; the host has {free_gpus} GPUs"),
            fraction_evidence(n),
        );
        f.actions.push(action);
    } else {
        f.actions.push(Action::advice(
            "serve a quantised checkpoint (FP8/AWQ) or a smaller model, or run on more GPUs",
            None,
        ));
    }
}

/// SGLang's own default for `--mem-fraction-static` at a TP size, as
/// `server_args.py` set it through 0.4.x (0.88 at TP 1 down to 0.79 at 16;
/// some releases used 0.83 at TP 8). Later releases derive it from the GPU's
/// memory instead, which lands in the same range on serving GPUs: an
/// assumption the finding states.
fn sglang_default(tp: u32) -> f64 {
    match tp {
        16.. => 0.79,
        8.. => 0.81,
        4.. => 0.85,
        2.. => 0.87,
        _ => 0.88,
    }
}

/// A stated fraction far below SGLang's defaults, without the `Load weight`
/// sizes: the fraction is the best-supported cause, at a lower confidence.
fn explain_low_unsized(
    incident: &Incident,
    f: &mut Finding,
    current: f64,
    n: &Numbers,
    tp: u32,
    unit: Option<&str>,
    who: &str,
) {
    let cur = fraction(current);
    let default = sglang_default(tp);
    // The TP size is an assumption when no `server_args=` line states it.
    let at_tp = if launch_args(incident, Framework::Sglang)
        .and_then(|a| a.0.tp_size)
        .is_some()
    {
        format!("at tp_size={tp}")
    } else {
        format!("at tp_size={tp} (assumed; the log does not state it)")
    };
    f.category = Category::MemFractionMisconfigured;
    f.chain.push(format!(
        "mem_fraction_static={cur} was set far below SGLang's default (about {} {at_tp}): the static pool it allows is too small for the weights and a KV cache",
        fraction(default)
    ));
    f.condition(
        format!("the fraction ({cur}) is far below SGLang's defaults (0.79-0.88 by TP size)"),
        true,
    );
    f.title = format!("--mem-fraction-static {cur} is far below SGLang's defaults");
    f.headline = format!(
        "{who} had no memory for its KV cache: mem_fraction_static={cur} is far below SGLang's default of about {} {at_tp}, so the weights took the whole static pool; the log lacks the `Load weight` sizes to compute the exact value.",
        fraction(default)
    );
    f.explanation = format!(
        "SGLang's static pool (weights + KV cache) is mem_fraction_static x the free memory before loading. Its own default is 0.88 at TP 1 down to 0.79 at TP 16 \
         (newer releases derive it from the GPU's memory, in the same range on serving GPUs; this is an assumption, the log does not state the default). \
         At {cur} the pool is a fraction of that. The `Load weight begin/end` lines (avail mem, mem usage) would settle the value; if the GPU is shared, check nvidia-smi before raising it."
    );
    let evidence: Vec<Span> = n.fraction.map(|x| x.1).into_iter().collect();
    let action = flag_action(
        incident,
        f,
        unit,
        "--mem-fraction-static",
        &fraction(default),
        format!("SGLang's default at tp_size={tp}; {cur} leaves the KV cache no room"),
        evidence,
    );
    f.actions.push(action);
    f.actions.push(Action::advice(
        "check that nothing else holds the GPU before raising the fraction, and read the `Load weight begin/end` lines for the sizes",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
}

#[cfg(test)]
mod tests;
