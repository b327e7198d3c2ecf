//! `vllm-no-kv-cache-memory`: vLLM had no memory left for KV-cache blocks
//! after profiling, and why: another process, a low
//! `--gpu-memory-utilization`, or a model too large for the TP size.

use crate::rules::support::server::cite_target;

use crate::correlate::Incident;
use crate::model::Framework;
use crate::rules::support::holders::Holders;
use crate::rules::support::server::{
    ceil2, events_at, explicit_flag, flag_action, fraction, unsized_fraction_at_fault,
};
use crate::rules::support::vllm::{self, VllmMemory};
use crate::rules::support::{confidence, distinct};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod held;

pub static RULE: VllmNoKvCacheMemory = VllmNoKvCacheMemory;

pub struct VllmNoKvCacheMemory;

/// vLLM's refusal, as its catalog row reads it (catalogs/stacks-vllm.toml).
const NO_MEMORY: &str = "stacks-vllm.no-cache-blocks";
/// The same verdict in numbers, printed just before it: V0's zero GPU
/// blocks, V1's negative KV-cache memory.
const SIZED_TO_NOTHING: &[&str] = &[
    "stacks-vllm.gpu-blocks-zero",
    "stacks-vllm.negative-kv-cache-memory",
];

/// vLLM 0.6.4–0.6.5's memory profile: the GPU's total (`gib`) and what was
/// in use on it when the profiling run began (`initial`): the weights, the
/// CUDA context and every other process's memory, which the line cannot
/// tell apart.
const PROFILE: &str = "stacks-vllm.memory-profiling";

/// The smallest KV cache worth a suggestion: a twentieth of the GPU.
const KV_FLOOR: f64 = 0.05;
/// vLLM needs a little room outside its budget (CUDA context, NCCL).
const MAX_UTIL: f64 = 0.95;

static META: RuleMeta = RuleMeta {
    id: "vllm-no-kv-cache-memory",
    category: Category::KvCacheTooSmall,
    severity: Severity::Critical,
    summary: "vLLM had no memory left for its KV cache after loading and profiling the model",
    // The refusal's anchor comes with its catalog row.
    anchors: &[
        vllm::ANCHORS[0],
        vllm::ANCHORS[1],
        vllm::ANCHORS[2],
        vllm::ANCHORS[3],
    ],
    doc: r#"
## What it means
vLLM may use `gpu_memory_utilization x total` of each GPU. After loading the
weights and a profiling run, what is left for KV-cache blocks was zero or
less: `ValueError: No available memory for the cache blocks. Try increasing
gpu_memory_utilization when initializing the engine.`

## Why it happens
1. The weights plus the activation peak exceed the budget: the model is too
   large for the tensor-parallel size, or `--gpu-memory-utilization` is too
   low.
2. Another process uses memory on the GPU (in older engines it is counted
   against the budget): vLLM 0.6.4–0.6.5's memory profile says so in
   numbers, `initial_memory_usage` (in use when profiling began) well
   above the weights (`Loading model weights took`) plus a CUDA context,
   or, with no weights figure, more than half of the GPU.
3. A very large `--max-num-batched-tokens` / `--max-num-seqs` inflates the
   profiled activation peak.

## How to confirm
`Model loading took X GiB` and, where printed, `total_gpu_memory (T) x
gpu_memory_utilization (u) = B` and `model weights take …; PyTorch
activation peak memory takes …`; nvidia-smi for other processes on the GPU.

## How to fix
Raise `--gpu-memory-utilization` to the value the report computes (only on
a GPU nothing else uses, at most 0.95); otherwise more tensor parallelism,
quantised weights, or a smaller `--max-num-batched-tokens`. Free the GPU
when another process holds it.

## Safety
Flag changes are shown as a diff of the unit's ExecStart and never applied;
stopping another unit or signalling its process needs confirmation.
"#,
};

impl Rule for VllmNoKvCacheMemory {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = incident.known(NO_MEMORY).collect();
        let Some((first, _)) = hits.first() else {
            return;
        };
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
                format!("vLLM found no memory for KV-cache blocks ({n}x)"),
            );
        }
        let unit = cite_target(&mut f, &holders.target);
        if let Some((b, span)) = mem.budget {
            f.evidence(span, format!("vLLM's budget: {b:.2} GiB"));
        }
        if let Some((w, span)) = mem.weights {
            f.evidence(span, format!("the weights take {w:.2} GiB per GPU"));
        }
        if let Some((kv, span)) = mem.kv {
            f.evidence(span, format!("{kv:.2} GiB was left for the KV cache"));
        }
        let profile = incident
            .known(PROFILE)
            .filter(|(m, _)| m.span.source == first.span.source)
            .find_map(|(m, h)| {
                let (total, initial) = (h.get("gib")?, h.get("initial")?);
                Some(held::Profile {
                    span: m.span,
                    total: total.parse().ok()?,
                    initial: initial.parse().ok()?,
                    total_text: total.to_owned(),
                    initial_text: initial.to_owned(),
                })
            });
        if let Some(p) = &profile {
            f.evidence_once_marked(
                p.span,
                format!("{} GiB of the GPU's {} GiB were in use when profiling began: this server's weights and whatever else holds the GPU", p.initial_text, p.total_text),
                &p.initial_text,
            );
        }
        // What the memory profile above did not already cite.
        for id in SIZED_TO_NOTHING {
            for (m, _) in incident.known(id) {
                f.evidence_once(m.span, "vLLM's KV-cache sizing found no room");
            }
        }
        let who = unit.clone().unwrap_or_else(|| "the vLLM server".to_owned());
        f.chain.push(format!(
            "{who} failed at start-up: no memory was left for KV-cache blocks"
        ));
        f.condition("vLLM reported no memory for the cache blocks", true);
        f.condition(
            "the log shows the weights and the budget",
            mem.weights.is_some() && (mem.util.is_some() || mem.budget.is_some()),
        );
        if let Some((gpu, list)) = holders.most_held(group.iter().copied(), 1024) {
            let name = holders.report(&mut f, gpu, &list, &group);
            f.title = format!("GPU {gpu} is held by {name}: no memory left for vLLM's KV cache");
            f.headline = format!(
                "GPU {gpu} is held by {name}, so {who} had no memory left for its KV cache after loading the model."
            );
            f.explanation = "vLLM's budget is a fraction of the GPU's total memory; what another process holds is missing from it. Free the GPU rather than raising the utilization.".to_owned();
        } else if let Some((p, others)) = profile
            .as_ref()
            .and_then(|p| Some((p, held::others(p, &mem)?)))
        {
            held::explain(&mut f, p, &others, &who);
        } else {
            explain_sizes(
                incident,
                &mut f,
                &mem,
                tp,
                first.span,
                unit.as_deref(),
                &who,
            );
        }
        f.confidence = confidence(&f, 0.6, 0.95);
        out.push(f);
    }
}

/// Explains, from vLLM's memory profile, why no cache block fit when no
/// other process holds the GPU: the utilization too low, the model too
/// large for `tp` GPUs, or (without the sizes) what the log allows.
fn explain_sizes(
    incident: &Incident,
    f: &mut Finding,
    mem: &VllmMemory,
    tp: u32,
    failure: Span,
    unit: Option<&str>,
    who: &str,
) {
    let total = mem.total.map(|t| t.0);
    let util = mem.util.map(|u| u.0).unwrap_or(0.9);
    let weights = mem.weights.map(|w| w.0);
    let overhead = mem.non_torch.unwrap_or(0.0).max(0.0) + mem.activation.unwrap_or(0.0);
    let needed = match (total, weights) {
        (Some(t), Some(w)) if t > 0.0 => Some(ceil2((w + overhead + KV_FLOOR * t) / t)),
        _ => None,
    };
    let explicit = explicit_flag(incident, unit, Framework::Vllm, "--gpu-memory-utilization");
    if let Some((v, span)) = &explicit {
        f.evidence(
            *span,
            format!("the command line sets --gpu-memory-utilization {v}"),
        );
    }
    let evidence: Vec<Span> = [
        Some(failure),
        mem.weights.map(|w| w.1),
        mem.util.map(|u| u.1),
    ]
    .into_iter()
    .flatten()
    .collect();
    let failed = Failed {
        incident,
        unit,
        who,
        evidence,
    };
    match needed {
        Some(n) if n <= MAX_UTIL => {
            // A fraction below vLLM's default that the command line or the
            // log states was set by someone: it is the knob at fault.
            let low = (explicit.is_some() || mem.util.is_some()) && util < 0.9;
            fraction_too_low(failed, f, util, weights, overhead, n, low);
        }
        Some(n) => too_large_for_tp(failed, f, tp, weights, n),
        None => {
            // No sizes: vLLM's own advice (raise the fraction) is the best
            // supported answer unless the fraction is known to be high
            // already; the failed condition lowers the confidence.
            let set = explicit
                .as_ref()
                .and_then(|(v, _)| v.parse::<f64>().ok())
                .or(mem.util.map(|u| u.0));
            explain_unsized(f, set, who);
        }
    }
    if mem.activation.is_some_and(|a| a > 8.0) {
        f.actions.push(Action::advice(
            "the profiled activation peak is large: a smaller --max-num-batched-tokens lowers it",
            None,
        ));
    }
}

/// Who failed and where, as the verdicts of `explain_sizes` word and act
/// on it.
struct Failed<'a> {
    incident: &'a Incident,
    unit: Option<&'a str>,
    who: &'a str,
    /// The lines a changed flag cites: the failure, the weights, the
    /// utilization.
    evidence: Vec<Span>,
}

/// Words the verdict that the utilization `util` is too low for the
/// weights and the activations (`overhead`, GiB) while `n` fits; `low`:
/// someone set it below vLLM's default, so the knob is at fault. Pushes the
/// flag change.
fn fraction_too_low(
    failed: Failed,
    f: &mut Finding,
    util: f64,
    weights: Option<f64>,
    overhead: f64,
    n: f64,
    low: bool,
) {
    let Failed {
        incident,
        unit,
        who,
        evidence,
    } = failed;
    let suggest = n.max(ceil2(util + 0.02));
    f.category = if low {
        Category::MemFractionMisconfigured
    } else {
        Category::KvCacheTooSmall
    };
    f.chain.push(format!(
        "gpu_memory_utilization {} is too low for {:.2} GiB of weights{}: {} would leave a twentieth of the GPU for the KV cache",
        fraction(util),
        weights.unwrap_or_default(),
        if overhead > 0.0 { format!(" and {overhead:.2} GiB of activations") } else { String::new() },
        fraction(n)
    ));
    f.condition(
        format!("a utilization of {} (at most {MAX_UTIL}) fits", fraction(n)),
        true,
    );
    f.title = format!(
        "--gpu-memory-utilization {} is too low for the model",
        fraction(util)
    );
    f.headline = format!(
        "{who} had no memory for its KV cache: gpu_memory_utilization {} leaves nothing after {:.2} GiB of weights; {} would.",
        fraction(util),
        weights.unwrap_or_default(),
        fraction(suggest)
    );
    f.explanation = "vLLM's budget is gpu_memory_utilization x the GPU's total; the weights and the profiled activation peak come out of it first, the KV cache gets the rest.".to_owned();
    let action = flag_action(
        incident,
        f,
        unit,
        "--gpu-memory-utilization",
        &fraction(suggest),
        "gives the KV cache room next to the weights (only if nothing else uses the GPU)",
        evidence,
    );
    f.actions.push(action);
}

/// Words the verdict that the weights fill the GPUs at `tp`: no
/// utilization up to the maximum fits (`n` would). Pushes a larger
/// tensor-parallel size when the host has the GPUs, else advice.
fn too_large_for_tp(failed: Failed, f: &mut Finding, tp: u32, weights: Option<f64>, n: f64) {
    let Failed {
        incident,
        unit,
        who,
        evidence,
    } = failed;
    f.category = Category::KvCacheTooSmall;
    f.chain.push(format!(
        "{:.2} GiB of weights per GPU leave no room for a KV cache at tensor_parallel_size={tp} (it would take a utilization of {})",
        weights.unwrap_or_default(),
        fraction(n)
    ));
    f.condition(
        format!(
            "no utilization up to {MAX_UTIL} fits (needs {})",
            fraction(n)
        ),
        true,
    );
    f.title = format!("the model is too large for its GPUs at tensor_parallel_size={tp}");
    f.headline = format!(
        "{who} had no memory for its KV cache: {:.2} GiB of weights per GPU fill the GPUs at tensor_parallel_size={tp}.",
        weights.unwrap_or_default()
    );
    f.explanation = "The weights and the activation peak take nearly all of the GPU; no utilization setting leaves room for a KV cache. Split the model over more GPUs or quantise it.".to_owned();
    let gpus = incident.gpus.len() as u32;
    if gpus >= tp * 2 {
        let action = flag_action(
            incident,
            f,
            unit,
            "--tensor-parallel-size",
            &(tp * 2).to_string(),
            format!("halves the weights per GPU; the host has {gpus} GPUs"),
            evidence,
        );
        f.actions.push(action);
    } else {
        f.actions.push(Action::advice(
            "serve a quantised checkpoint (FP8/AWQ) or run on more GPUs",
            None,
        ));
    }
}

/// Words the verdict when the log lacks the sizes: the utilization `set`
/// (from the command line or the log) is at fault unless it is known to be
/// high already; otherwise the cause stays open.
fn explain_unsized(f: &mut Finding, set: Option<f64>, who: &str) {
    let knob = unsized_fraction_at_fault(f, set, 0.9, true);
    if knob {
        f.category = Category::MemFractionMisconfigured;
        f.title = match set {
            Some(u) => format!(
                "--gpu-memory-utilization {} leaves no memory for the cache blocks",
                fraction(u)
            ),
            None => "gpu_memory_utilization leaves no memory for the cache blocks".to_owned(),
        };
        f.headline = format!(
            "{who} had no memory for its KV cache: the budget gpu_memory_utilization x total was used up by the weights and the profiling peak before any cache block fit{}; raise gpu_memory_utilization (the log lacks the sizes to compute the value).",
            set.map_or(String::new(), |u| format!(" at {}", fraction(u)))
        );
        f.explanation = "vLLM's message says to increase gpu_memory_utilization: the fraction caps weights + activation peak + KV cache. Lowering it makes this worse. Without `Model loading took` and the GPU's total the value cannot be recomputed, and another process on the GPU would also shrink what vLLM can take: nvidia-smi settles that.".to_owned();
        f.actions.push(Action::advice(
            "raise --gpu-memory-utilization (e.g. 0.5-0.9, at most 0.95 on a dedicated GPU); never lower it for this message",
            None,
        ));
        f.actions.push(Action::advice(
            "check that nothing else holds the GPU, and read vLLM's `Model loading took` / `model weights take` lines for the sizes",
            Some(crate::rules::support::COMPUTE_APPS),
        ));
    } else {
        f.title = "vLLM had no memory for its KV cache".to_owned();
        f.headline = format!(
            "{who} had no memory for its KV cache after loading the model; the log lacks the numbers to say whether the utilization or the model size is at fault."
        );
        f.explanation =
            "Without `Model loading took` and the GPU's total the budget cannot be recomputed."
                .to_owned();
        f.actions.push(Action::advice(
            "raise --gpu-memory-utilization (at most 0.95, on a dedicated GPU) or add GPUs (--tensor-parallel-size)",
            None,
        ));
    }
}
