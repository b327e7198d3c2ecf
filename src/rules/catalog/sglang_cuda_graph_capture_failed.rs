//! `sglang-cuda-graph-capture-failed`: SGLang could not capture its CUDA
//! graphs at start-up; reports the error underneath (out of memory: the
//! static fraction or the graph batch size is too large; another CUDA
//! error: that error).

use crate::rules::support::server::cite_target;
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{
    CudaOom, Framework, Landmark, PyException, ServerArgs, ServerEvent, ServerEventKind, root_cause,
};
use crate::rules::support::server::{
    before, events_at, exception_at, explicit_flag, flag_action, floor2, fraction, gib,
    launch_args, server_cmdlines, shorten, target,
};
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod aborted;

pub static RULE: SglangCudaGraphCaptureFailed = SglangCudaGraphCaptureFailed;

pub struct SglangCudaGraphCaptureFailed;

static CAPTURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Capture cuda graph failed:\s*(?P<cause>.*)").expect("capture regex")
});
static CUDA_ERROR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"CUDA error: (?P<e>[^.\n]+)").expect("cuda error regex"));
/// `cuda_graph_max_bs=160` in `server_args=`.
static MAX_BS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bcuda_graph_max_bs=(?P<bs>[0-9]+)").expect("max bs regex"));

/// Memory to free beyond the failed request: the graph pools of the other
/// batch sizes still to capture.
const MARGIN_GIB: f64 = 1.0;

static META: RuleMeta = RuleMeta {
    id: "sglang-cuda-graph-capture-failed",
    category: Category::CudaGraphCaptureFailure,
    severity: Severity::Critical,
    summary: "SGLang could not capture its CUDA graphs at start-up",
    anchors: &[
        "Capture cuda graph failed",
        "cuda_graph_max_bs=",
        "Capturing batches",
        "Capture cuda graph end",
        "terminate called after throwing",
        "Fatal Python error: Aborted",
        "what():",
    ],
    doc: r#"
## What it means
After allocating the KV cache, SGLang records CUDA graphs for the decode batch
sizes up to `--cuda-graph-max-bs`. The capture raised an exception:
`Exception: Capture cuda graph failed: <the original error>` followed by
`Possible solutions:` (lower `--mem-fraction-static`, lower
`--cuda-graph-max-bs`, disable torch compile, `--disable-cuda-graph`). The
scheduler dies and SGLang kills its process tree.

## Why it happens
1. Out of memory: the static fraction (weights + KV cache) left too little
   for the graphs' activations and memory pools. `--mem-fraction-static`
   was set too high, or `--cuda-graph-max-bs` is too large.
2. Another CUDA error during capture (an illegal memory access, a kernel
   incompatible with the GPU or driver): the embedded error says which.

A process that aborts (`terminate called after throwing an instance of
'…'`, `Fatal Python error: Aborted`) while SGLang's capture progress bar
(`Capturing batches (bs=512 avail_mem=19.45 GB)`) is its last stage, with
no `Capture cuda graph end`, failed the same way, inside a kernel
library's code: the exception's `what()` names the library.

## How to confirm
The text after `Capture cuda graph failed:` and the chained exception
before it. For out of memory: `Memory pool end. avail mem=…` (what was left
for the graphs) against the `Tried to allocate` size, and the
`mem_fraction_static` in `server_args=` or on the command line.

## How to fix
1.: lower `--mem-fraction-static` by the amount the report computes (at
least 0.02), or lower `--cuda-graph-max-bs`.
2.: handle that error (see the CUDA fault rule); `--disable-cuda-graph`
confirms the capture is the trigger.

## Safety
Flag changes are shown as a diff of the unit's ExecStart and never applied.
"#,
};

enum Cause {
    Oom {
        tried: Option<f64>,
        free: Option<f64>,
    },
    CudaError(String),
    Other(String),
}

impl Rule for SglangCudaGraphCaptureFailed {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = matches(incident, &CAPTURE).collect();
        let Some((first, caps)) = hits.first() else {
            aborted::check(incident, out, META.id);
            return;
        };
        let event = events_at(incident, first.span).next();
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = hits.len() as u32;
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(2) {
            f.evidence(m.span, format!("the CUDA graph capture failed ({n}x)"));
        }
        // The exception underneath: the start of the chain, else the text.
        let inner = inner_exception(incident, first.span);
        if let Some((e, x)) = inner {
            f.evidence(
                e.span,
                format!("the error underneath: {}: {}", x.name, shorten(&x.message)),
            );
        }
        let cause = cause_of(incident, first.span, inner, &caps["cause"]);

        let tgt = target(incident, event, Framework::Sglang);
        let unit = cite_target(&mut f, &tgt);
        let unit = unit.as_deref();
        if let Some(pid) = event.and_then(|e| e.pid) {
            f.entities.pids.insert(pid);
        }
        let who = unit.unwrap_or("the SGLang server").to_owned();
        f.chain.push(format!(
            "{who} failed at start-up: SGLang could not capture its CUDA graphs"
        ));
        f.condition("SGLang reported `Capture cuda graph failed`", true);
        // Torch compile, SGLang's first hint, set on the command line: a
        // capture that fails with no memory or CUDA error under it is
        // most often torch.compile's (a model it does not compile).
        let compiled = switch_flag(incident, unit, Framework::Sglang, "--enable-torch-compile")
            .filter(|_| matches!(cause, Cause::Other(_)));
        match cause {
            Cause::Oom { tried, free } => {
                explain_oom(incident, &mut f, first.span, unit, &who, tried, free)
            }
            Cause::CudaError(err) => explain_cuda_error(&mut f, &who, &err),
            // SGLang printed only its hint list: no error underneath.
            Cause::Other(text) if text.trim().is_empty() => explain_no_message(&mut f, &who),
            Cause::Other(text) => {
                f.chain.push(format!("the capture raised: {text}"));
                f.title = "CUDA graph capture failed".to_owned();
                f.headline = format!("{who} could not capture its CUDA graphs: {text}.");
                f.explanation = "The error underneath is neither out of memory nor a CUDA fault; it names the cause.".to_owned();
                f.actions.push(Action::advice(
                    "start once with --disable-cuda-graph to confirm the capture is the trigger",
                    None,
                ));
            }
        }
        if let Some(span) = compiled {
            torch_compile(&mut f, span);
        }
        f.confidence = confidence(&f, 0.7, 0.95);
        out.push(f);
    }
}

/// The line of a server's command line that sets a switch, a flag with no
/// value (`--enable-torch-compile`), when one does.
fn switch_flag(
    incident: &Incident,
    unit: Option<&str>,
    framework: Framework,
    flag: &str,
) -> Option<Span> {
    // SGLang accepts `_` for `-` in flag names.
    let wanted = flag.trim_start_matches('-').replace('_', "-");
    server_cmdlines(incident, unit, framework)
        .into_iter()
        .find(|(cmd, _)| {
            cmd.split_whitespace().any(|t| {
                t.strip_prefix("--")
                    .is_some_and(|n| n.replace('_', "-") == wanted)
            })
        })
        .map(|(_, span)| span)
}

/// The command line enables torch compile and the capture failed with no
/// memory or CUDA error under it: cites the flag and advises starting
/// without it first, before any memory setting or --disable-cuda-graph.
fn torch_compile(f: &mut Finding, span: Span) {
    f.evidence(
        span,
        "the command line enables torch compile (--enable-torch-compile), which compiles the graphs being captured",
    );
    f.chain
        .push("torch compile (--enable-torch-compile) compiled the captured graphs: most likely the trigger".to_owned());
    f.headline = format!(
        "{} The command line sets --enable-torch-compile: start without it first (a model torch.compile does not handle in this version fails here).",
        f.headline.trim_end()
    );
    f.actions.insert(
        0,
        Action::advice(
            "start the server without --enable-torch-compile (or upgrade SGLang, torch and Triton together); keep --disable-cuda-graph as a last resort",
            None,
        ),
    );
}

/// Writes the chain, conditions, title, headline, explanation and fixes when
/// the capture ran out of memory (`tried` GiB asked with `free` GiB free):
/// lower --mem-fraction-static by what was missing, or --cuda-graph-max-bs.
fn explain_oom(
    incident: &Incident,
    f: &mut Finding,
    failure: Span,
    unit: Option<&str>,
    who: &str,
    tried: Option<f64>,
    free: Option<f64>,
) {
    let (args, explicit) = cite_fraction_settings(incident, f, unit);
    let fraction_now = args.as_ref().and_then(|(a, _)| a.mem_fraction_static);
    let (pool_left, before_load) = cite_pool_memory(incident, f, failure);
    let cur = fraction_now.map(fraction);
    f.chain.push(match (tried, free) {
        (Some(t), Some(fr)) => {
            format!("the capture ran out of memory: it asked for {t:.2} GiB with {fr:.2} GiB free")
        }
        _ => "the capture ran out of memory".to_owned(),
    });
    f.chain.push(match &cur {
        Some(c) => format!(
            "mem_fraction_static={c} gave the weights and KV cache so much that too little was left for the graphs"
        ),
        None => "the static memory pool left too little for the graphs".to_owned(),
    });
    f.condition("the error underneath is a CUDA out-of-memory error", true);
    f.condition(
        "the log shows what the KV cache left for the graphs",
        pool_left.is_some(),
    );
    // How much lower the fraction must go: the missing memory plus a margin,
    // as a share of the memory the fraction is taken of.
    let step = match (tried, free, before_load) {
        (Some(t), Some(fr), Some((x, _))) if x > 0.0 => ((t - fr).max(0.0) + MARGIN_GIB) / x,
        _ => 0.03,
    };
    let step = ((step * 100.0).ceil() / 100.0).max(0.02);
    let high = explicit.is_some() || fraction_now.is_some_and(|v| v >= 0.9);
    f.title = match &cur {
        Some(c) => format!("CUDA graph capture ran out of memory at mem_fraction_static={c}"),
        None => "CUDA graph capture ran out of memory".to_owned(),
    };
    f.headline = match (&cur, fraction_now) {
        (Some(c), Some(v)) => format!(
            "{who} could not capture its CUDA graphs: out of memory, because --mem-fraction-static {c}{} leaves too little outside the KV cache; {} would.",
            if high { " is set too high and" } else { "" },
            fraction(floor2(v - step))
        ),
        _ => format!(
            "{who} could not capture its CUDA graphs: out of memory, because the static memory pool left too little for them."
        ),
    };
    f.explanation = "SGLang reserves mem_fraction_static of the free memory for the weights and the KV cache up front; CUDA graphs, their memory pools and the activations must fit in the rest. A fraction set close to 1, or graphs for large batch sizes, do not.".to_owned();
    if let Some(v) = fraction_now {
        let new = floor2(v - step);
        let why = match (tried, free) {
            (Some(t), Some(fr)) => format!(
                "frees about {:.2} GiB for the graphs, which needed {t:.2} GiB with {fr:.2} GiB free",
                step * before_load.map_or(0.0, |b| b.0)
            ),
            _ => "leaves more memory outside the KV cache for the graphs".to_owned(),
        };
        let evidence: Vec<Span> = [
            Some(failure),
            explicit.as_ref().map(|e| e.1),
            args.as_ref().map(|a| a.1),
        ]
        .into_iter()
        .flatten()
        .collect();
        let action = flag_action(
            incident,
            f,
            unit,
            "--mem-fraction-static",
            &fraction(new),
            why,
            evidence,
        );
        f.actions.push(action);
    } else {
        f.actions.push(Action::advice(
            "lower --mem-fraction-static by 0.03-0.05",
            None,
        ));
    }
    batch_size_action(incident, f);
}

/// Returns the exception underneath the capture failure: the start of the
/// chain of the exception on its line, unless that is the failure line itself.
fn inner_exception(incident: &Incident, failure: Span) -> Option<(&ServerEvent, &PyException)> {
    let events = &incident.facts.server_events;
    exception_at(incident, failure).and_then(|(e, _)| {
        let root = root_cause(events, e);
        match &root.kind {
            ServerEventKind::Exception(x) if root.span != failure => Some((root, x)),
            _ => None,
        }
    })
}

/// Returns what the capture failed of: out of memory (with the request and
/// the free memory when the OOM line gives them), another CUDA error, or the
/// error's text (the exception underneath, else `fallback`, the failure
/// line's own cause).
fn cause_of(
    incident: &Incident,
    failure: Span,
    inner: Option<(&ServerEvent, &PyException)>,
    fallback: &str,
) -> Cause {
    let oom: Option<&CudaOom> = inner
        .and_then(|(e, _)| {
            events_at(incident, e.span).find_map(|c| match &c.kind {
                ServerEventKind::CudaOom(o) => Some(o),
                _ => None,
            })
        })
        .or_else(|| {
            events_at(incident, failure).find_map(|c| match &c.kind {
                ServerEventKind::CudaOom(o) => Some(o),
                _ => None,
            })
        });
    let text = inner.map_or_else(
        || fallback.to_owned(),
        |(_, x)| format!("{}: {}", x.name, x.message),
    );
    if oom.is_some() || text.contains("out of memory") {
        Cause::Oom {
            tried: oom.and_then(|o| o.tried_bytes).map(gib),
            free: oom.and_then(|o| o.free_bytes).map(gib),
        }
    } else if let Some(c) = CUDA_ERROR.captures(&text) {
        Cause::CudaError(c["e"].trim().to_owned())
    } else {
        Cause::Other(shorten(&text))
    }
}

/// Writes the chain, title, headline, explanation and actions when a kernel
/// failed with CUDA error `err` during the capture (not out of memory).
fn explain_cuda_error(f: &mut Finding, who: &str, err: &str) {
    f.chain.push(format!(
        "a kernel failed during the capture: CUDA error: {err}"
    ));
    f.condition(
        "the error underneath is a CUDA error other than out of memory",
        true,
    );
    f.title = format!("CUDA graph capture failed: CUDA error: {err}");
    f.headline = format!(
        "{who} could not capture its CUDA graphs because a kernel failed with `CUDA error: {err}`; the memory settings are not the cause."
    );
    f.explanation = "A kernel faulted while SGLang recorded its graphs. The hint SGLang prints (lower the memory fraction) does not apply: the fault is in a kernel (attention backend, custom all-reduce, a quantised GEMM) or the GPU. Check the kernel log for an Xid on the same GPU.".to_owned();
    f.actions.push(Action::advice(
        "check the kernel log for an Xid at the same time (79, 48, 95 mean the GPU, 13 and 31 a faulting kernel)",
        Some("journalctl -k --since '-1h' | grep -E 'NVRM: Xid'"),
    ));
    f.actions.push(Action::advice(
        "start once with --disable-cuda-graph to confirm the capture is the trigger, then change the attention backend or disable custom all-reduce to find the faulting kernel",
        None,
    ));
}

/// Writes the chain, title, headline, explanation and actions when the
/// capture's exception carries no message (only SGLang's hint list).
fn explain_no_message(f: &mut Finding, who: &str) {
    f.chain
        .push("the capture raised an exception with no message".to_owned());
    f.title = "CUDA graph capture failed (no error underneath)".to_owned();
    f.headline = format!(
        "{who} could not capture its CUDA graphs, and the exception carries no message: try it without torch compile, then with smaller capture sizes."
    );
    f.explanation = "With no error underneath, SGLang's own hint list is what is left: torch compile (--enable-torch-compile) is the usual trigger with a new model; otherwise the capture runs out of memory (--mem-fraction-static, --cuda-graph-max-bs).".to_owned();
    f.actions.push(Action::advice(
        "if the server runs with --enable-torch-compile, start it once without (disable torch compile) before changing memory settings",
        None,
    ));
    f.actions.push(Action::advice(
        "then lower --cuda-graph-max-bs (e.g. 16) or --mem-fraction-static; --disable-cuda-graph confirms the capture is the trigger",
        None,
    ));
}

/// A value read from the inputs, with the line it was read from.
type Cited<T> = Option<(T, Span)>;

/// Returns the server's launch arguments and the --mem-fraction-static its
/// command line sets, each with its line, and cites them.
fn cite_fraction_settings(
    incident: &Incident,
    f: &mut Finding,
    unit: Option<&str>,
) -> (Cited<ServerArgs>, Cited<String>) {
    let args = launch_args(incident, Framework::Sglang);
    let explicit = explicit_flag(incident, unit, Framework::Sglang, "--mem-fraction-static");
    if let Some((a, span)) = &args {
        f.evidence(
            *span,
            format!(
                "launch arguments: mem_fraction_static={}",
                a.mem_fraction_static.map_or("?".to_owned(), fraction)
            ),
        );
    }
    if let Some((v, span)) = &explicit {
        f.evidence(
            *span,
            format!("the command line sets --mem-fraction-static {v}"),
        );
    }
    (args, explicit)
}

/// Returns what the weights and KV cache left for the graphs and what the
/// memory was before loading (the base of the fraction), in GiB with their
/// lines: the last of each before the failure; cites both.
fn cite_pool_memory(
    incident: &Incident,
    f: &mut Finding,
    failure: Span,
) -> (Cited<f64>, Cited<f64>) {
    let mut pool_left = None;
    let mut before_load = None;
    for e in before(incident, failure) {
        match &e.kind {
            ServerEventKind::Landmark(Landmark::MemoryPoolEnd {
                avail_bytes: Some(b),
            }) if pool_left.is_none() => pool_left = Some((gib(*b), e.span)),
            ServerEventKind::Landmark(Landmark::LoadWeightBegin {
                avail_bytes: Some(b),
            }) if before_load.is_none() => before_load = Some((gib(*b), e.span)),
            _ => {}
        }
    }
    if let Some((left, span)) = pool_left {
        f.evidence(
            span,
            format!("{left:.2} GiB was left for the graphs after the KV cache"),
        );
    }
    if let Some((x, span)) = before_load {
        f.evidence(
            span,
            format!("{x:.2} GiB was free before loading (the fraction's base)"),
        );
    }
    (pool_left, before_load)
}

/// Pushes the other way out: lower --cuda-graph-max-bs (halved from the
/// value in the server's arguments, which is cited, when the log has it).
fn batch_size_action(incident: &Incident, f: &mut Finding) {
    let max_bs = incident.facts.messages.iter().rev().find_map(|m| {
        let c = MAX_BS.captures(&m.text)?;
        Some((c["bs"].parse::<u32>().ok()?, m.span))
    });
    let bs_text = match max_bs {
        Some((bs, span)) => {
            f.evidence(
                span,
                format!("CUDA graphs are captured up to batch size {bs}"),
            );
            format!(
                "lower --cuda-graph-max-bs instead (now {bs}, e.g. to {})",
                (bs / 2).max(8)
            )
        }
        None => "lower --cuda-graph-max-bs instead".to_owned(),
    };
    f.actions.push(Action::advice(
        format!("if the KV cache must stay as large, {bs_text}"),
        None,
    ));
}
