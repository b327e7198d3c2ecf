//! `sglang-mem-fraction-below-weights`: SGLang's `--mem-fraction-static`
//! budget is smaller than the loaded weights, so nothing is left for the KV
//! cache.

use std::sync::LazyLock;

use regex::{Captures, Regex};

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::server::{ceil2, fraction};
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: SglangMemFractionBelowWeights = SglangMemFractionBelowWeights;

pub struct SglangMemFractionBelowWeights;

/// SGLang 0.5.x (2025–2026): `ValueError: Loaded weights leave no GPU memory
/// for the KV cache under --mem-fraction-static=0.88. Raise
/// --mem-fraction-static above 0.912 (minimum viable = 1 - available/pre =
/// 0.9113).`; pasted, the sentence is often wrapped after `under`.
static CHECK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Loaded weights leave no GPU memory for the KV cache(?: under)?(?:\s*--mem-fraction-static=(?P<frac>[0-9.]*[0-9]))?",
    )
    .expect("regex")
});

/// The continuation of a wrapped message, and SGLang's own suggestion.
static FRACTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*--mem-fraction-static=(?P<frac>[0-9.]*[0-9])").expect("regex")
});
static SUGGESTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Raise --mem-fraction-static above (?P<above>[0-9.]*[0-9])").expect("regex")
});

/// `Load weight begin. avail mem=137.90 GB` and `Load weight end. …, avail
/// mem=12.25 GB, mem usage=125.65 GB.`
static LOAD_BEGIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Load weight begin\. avail mem=(?P<avail>[0-9.]+) GB").expect("regex")
});
static LOAD_END: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Load weight end\..*?avail mem=(?P<avail>[0-9.]+) GB, mem usage=(?P<usage>[0-9.]+) GB",
    )
    .expect("regex")
});

/// Above this the weights nearly fill the GPU: raising the fraction cannot
/// leave a useful KV cache, more GPUs (or a smaller quantisation) can.
const MAX_FRACTION: f64 = 0.95;

static META: RuleMeta = RuleMeta {
    id: "sglang-mem-fraction-below-weights",
    category: Category::MemFractionMisconfigured,
    severity: Severity::Critical,
    summary: "SGLang's --mem-fraction-static is below what the weights take: no memory left for the KV cache",
    anchors: &[
        "leave no GPU memory for the KV cache",
        "Raise --mem-fraction-static above",
        "Load weight begin",
        "Load weight end",
    ],
    doc: r#"
## What it means
`ValueError: Loaded weights leave no GPU memory for the KV cache under
--mem-fraction-static=0.88. Raise --mem-fraction-static above 0.912`:
SGLang reserves `--mem-fraction-static` of the GPU memory it found before
loading for the weights plus the KV-cache pool. The weights alone already
take more than that fraction, so the pool would be empty, and the scheduler
stops at start-up. (Older SGLang said `Not enough memory. Please try to
increase --mem-fraction-static.`; see `sglang-kv-not-enough-memory`.)

## Why it happens
A fraction tuned for a smaller model or a bigger GPU; a launch script with a
fixed value (0.88, 0.8) for a model whose weights take more per GPU at the
chosen tensor parallelism; another process on the GPU, which shrinks the
memory found before loading.

## How to confirm
`Load weight end. … avail mem=A GB, mem usage=W GB`: the memory before
loading is about A + W, and the minimum fraction is 1 - A / (A + W). SGLang
0.5+ prints it (`minimum viable = 1 - available/pre`).

## How to fix
Raise `--mem-fraction-static` above the minimum with a margin (the KV cache
needs room too), if nothing else shares the GPU. When the minimum is close
to 1, the model does not fit: more tensor parallelism or a smaller
quantisation. Lowering the fraction is the wrong direction for this message.

## Safety
Advice only: the flag is in the launch command or the unit.

## Seen in
- https://github.com/SemiAnalysisAI/InferenceX/issues/2128 (0.88 x ~137.9 GB < 125.65 GB of weights): `pos-2026-dsv4-h200`
- public deployment write-ups quoting the wrapped message (`pos-wrapped-minimum`: 0.3 below the 0.320 floor; `pos-fraction-already-above`: 0.95 above the printed 0.923 minimum and still failing, a fixed reserve of a mamba model with a draft)
- near miss from https://github.com/sgl-project/sglang/pull/4826 (a healthy start)
"#,
};

impl Rule for SglangMemFractionBelowWeights {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = matches(incident, &CHECK).collect();
        let Some((first, caps)) = hits.first() else {
            return;
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = hits.len() as u32;
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(2) {
            f.evidence(
                m.span,
                format!("SGLang found no memory for the KV cache ({n}x)"),
            );
        }
        let (frac, suggested) = read_fraction(&mut f, incident, first, caps);
        let (end, begin) = load_lines(incident, first);
        if let Some((span, avail, usage)) = end {
            f.evidence(
                span,
                format!("the weights take {usage:.2} GB; {avail:.2} GB was left"),
            );
        }
        if let Some((span, avail)) = begin {
            f.evidence(span, format!("{avail:.2} GB was free before loading"));
        }
        // Numbers decide: memory before loading (measured, or weights +
        // what was left), and the fraction the weights alone take.
        let pre = begin
            .map(|b| b.1)
            .or(end.map(|(_, a, u)| a + u))
            .filter(|p| *p > 0.0);
        let weights = end.map(|e| e.2);
        let minimum = match (end, pre) {
            (Some((_, avail, _)), Some(p)) => Some(1.0 - avail / p),
            _ => suggested,
        };
        f.condition(
            "SGLang reported no memory for the KV cache under its fraction",
            true,
        );
        f.condition("the fraction given is known", frac.is_some());
        f.condition(
            "the weights and the memory before loading are in the log",
            weights.is_some() && pre.is_some(),
        );
        let given = frac.map(fraction).unwrap_or_else(|| "its value".to_owned());
        let flag = format!("--mem-fraction-static={given}");
        // SGLang's own minimum already below the fraction given: the
        // fraction is not what is short (a fixed reserve, draft or mamba
        // state takes the room).
        let already_above = matches!((frac, minimum), (Some(fr), Some(min)) if fr >= min);
        match minimum {
            Some(min) if min > MAX_FRACTION || already_above => {
                explain_no_room(&mut f, &flag, min, weights, already_above);
            }
            _ => explain_below(&mut f, &flag, minimum, pre, weights, frac),
        }
        f.chain.insert(
            0,
            "the SGLang scheduler stopped at start-up: no memory for the KV-cache pool".to_owned(),
        );
        f.explanation = "--mem-fraction-static is the share of the memory found before loading that SGLang may use for weights plus KV cache; the weights come out first. A smaller value only makes this worse; another process on the GPU lowers the memory found before loading.".to_owned();
        f.actions.push(Action::advice(
            "check that no other process holds memory on the GPUs (it lowers the memory SGLang finds before loading)",
            Some(crate::rules::support::COMPUTE_APPS),
        ));
        f.confidence = confidence(&f, 0.8, 0.97);
        out.push(f);
    }
}

fn ceil3(x: f64) -> f64 {
    (x * 1000.0).ceil() / 1000.0
}

/// Returns the fraction SGLang was given and the minimum it suggests, read
/// from the message or from its next line when the paste wrapped it (that
/// line is cited when it carries the fraction).
fn read_fraction(
    f: &mut Finding,
    incident: &Incident,
    first: &Message,
    caps: &Captures,
) -> (Option<f64>, Option<f64>) {
    let next_line = |line: u32| {
        incident
            .facts
            .messages
            .iter()
            .find(|m| m.span.source == first.span.source && m.span.line == line + 1)
    };
    // The fraction: on the line, or on the next one when wrapped.
    let mut frac = caps
        .name("frac")
        .and_then(|v| v.as_str().parse::<f64>().ok());
    let mut suggested = SUGGESTED
        .captures(&first.text)
        .and_then(|c| c["above"].parse::<f64>().ok());
    if let Some(next) = next_line(first.span.line) {
        if frac.is_none()
            && let Some(c) = FRACTION.captures(&next.text)
        {
            frac = c["frac"].parse().ok();
            f.evidence(next.span, "the fraction SGLang was given");
        }
        if suggested.is_none()
            && let Some(c) = SUGGESTED.captures(&next.text)
        {
            suggested = c["above"].parse().ok();
        }
    }
    (frac, suggested)
}

/// `Load weight end`: its line, the GB left, the GB the weights take.
type LoadEnd = (Span, f64, f64);
/// `Load weight begin`: its line, the GB free.
type LoadBegin = (Span, f64);

/// Returns the last `Load weight end` (its line, the GB left, the GB the
/// weights take) and the last `Load weight begin` (its line, the GB free)
/// before the message, in its source.
fn load_lines(incident: &Incident, first: &Message) -> (Option<LoadEnd>, Option<LoadBegin>) {
    let before = |m: &Message| m.span.source == first.span.source && m.span < first.span;
    let end = matches(incident, &LOAD_END)
        .filter(|(m, _)| before(m))
        .last()
        .and_then(|(m, c)| {
            Some((
                m.span,
                c["avail"].parse::<f64>().ok()?,
                c["usage"].parse::<f64>().ok()?,
            ))
        });
    let begin = matches(incident, &LOAD_BEGIN)
        .filter(|(m, _)| before(m))
        .last()
        .and_then(|(m, c)| Some((m.span, c["avail"].parse::<f64>().ok()?)));
    (end, begin)
}

/// Writes the title, headline, chain and action when raising the fraction
/// cannot help: SGLang's minimum (`min`) is already below the fraction given
/// (`already_above`: a fixed reserve takes the room), or the weights nearly
/// fill the GPU.
fn explain_no_room(
    f: &mut Finding,
    flag: &str,
    min: f64,
    weights: Option<f64>,
    already_above: bool,
) {
    f.category = Category::KvCacheTooSmall;
    if already_above {
        f.title =
            format!("{flag} is above SGLang's minimum ({min:.3}) and still leaves no KV cache");
        f.headline = format!(
            "SGLang had no memory for its KV cache although {flag} is above the minimum it computes ({min:.3}): a fixed reserve (activations, a draft model, mamba state) takes the room, so raising the fraction does not help."
        );
        f.chain.push(format!(
            "{flag} already exceeds 1 - available/pre = {min:.3}: the fraction is not the limit"
        ));
        f.actions.push(Action::advice(
            "shrink what sits next to the weights (speculative draft, mamba/state cache, chunked-prefill size) or use more tensor parallelism",
            None,
        ));
    } else {
        f.title = format!(
            "the weights need {} of the GPU: no room for a KV cache",
            fraction(ceil3(min))
        );
        f.headline = format!(
            "SGLang had no memory for its KV cache: the weights{} take {:.1}% of the GPU memory found before loading, so no value of --mem-fraction-static leaves a useful KV cache; the model needs more GPUs.",
            weights.map(|w| format!(" ({w:.2} GB)")).unwrap_or_default(),
            min * 100.0
        );
        f.chain.push("the weights nearly fill each GPU".to_owned());
        f.actions.push(Action::advice(
            "use more tensor parallelism (--tp) or a smaller quantisation so the weights take less per GPU",
            None,
        ));
    }
}

/// Writes the title, headline, chain and action when the fraction given is
/// below what the weights take: raise it to SGLang's minimum with a margin.
fn explain_below(
    f: &mut Finding,
    flag: &str,
    minimum: Option<f64>,
    pre: Option<f64>,
    weights: Option<f64>,
    frac: Option<f64>,
) {
    let target = minimum.map(|m| ceil2(m + 0.01));
    let arithmetic = match (pre, weights, frac) {
        (Some(p), Some(w), Some(fr)) => format!(
            ": {fr} x {p:.2} GB = {:.2} GB < {w:.2} GB of weights",
            fr * p
        ),
        _ => String::new(),
    };
    f.title = format!("{flag} is below what the weights take");
    f.headline = format!(
        "SGLang had no memory for its KV cache: {flag} reserves less than the loaded weights take{arithmetic}; raise it{}.",
        target
            .map(|t| format!(" to at least {}", fraction(t)))
            .unwrap_or_default()
    );
    f.chain.push(format!(
        "{flag} reserves less than the weights take{arithmetic}"
    ));
    let text = match (minimum, target) {
        (Some(min), Some(t)) => format!(
            "raise --mem-fraction-static to {} or a little more (the weights alone need {:.4}; the KV cache needs the rest), if nothing else shares the GPU",
            fraction(t),
            min
        ),
        _ => "raise --mem-fraction-static above what the weights need (SGLang's message names the minimum), if nothing else shares the GPU".to_owned(),
    };
    f.actions.push(Action::advice(text, None));
}
