//! `gpu-memory-taken-before-load`: a server's own free-memory figures show
//! GPU memory held by something else: Ollama's inventory at start-up
//! (`inference compute … total=… available=…`) with much less free than the
//! card's total before it loaded anything, free memory that fell between
//! start-up and the first load, or two loads' plans (`memory.available`)
//! that saw different amounts free, the lower one cutting layers; and the
//! same start-up figures of TensorFlow and llama.cpp (`reported`).

mod kaldi;
mod paddle;
mod ray;
mod reported;
mod trtllm;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: GpuMemoryTakenBeforeLoad = GpuMemoryTakenBeforeLoad;

pub struct GpuMemoryTakenBeforeLoad;

/// Less than this (GiB) held by others is a desktop's display and noise.
const MIN_HELD_GIB: f64 = 2.0;
/// Held at start-up, as a share of the total, that is worth a finding.
const START_SHARE: f64 = 0.2;
/// Held at start-up, as a share of the total, that is an error by itself.
const START_SHARE_ERROR: f64 = 0.3;

static META: RuleMeta = RuleMeta {
    id: "gpu-memory-taken-before-load",
    category: Category::GpuMemoryHeldByOtherProcess,
    severity: Severity::Error,
    summary: "the server's own free-memory figures show GPU memory held by another program",
    anchors: &[],
    doc: r#"
## What it means
A serving stack that plans its loads prints how much GPU memory it found
free. Ollama prints each GPU at start-up (`msg="inference compute" …
total="48.0 GiB" available="28.9 GiB"`), before it has loaded anything, and
its plan for every load (`msg="offload to cuda" … layers.offload=0 …
memory.available="[3.5 GiB]" … memory.required.full="6.2 GiB"`). Free
memory well below the total at start-up, free memory that fell between
start-up and the first load, or one load that found several GiB less free
than another, is memory some other program held at that moment; Ollama
then puts fewer layers on the GPU and runs the rest on the CPU.

Other programs print the same figures before they load anything:
TensorFlow's record of each GPU it finds (`Found device 0 with
properties:` … `Total memory: 7.92GiB` / `Free memory: 190.31MiB`, or
`totalMemory: 8.00GiB freeMemory: 6.57GiB` from 1.5) and llama.cpp's
`using device CUDA0 (…) - 8720 MiB free`, whose total is in its memory
breakdown (`| 11165 = 8702 + (…`) or nvidia-smi. Free memory more than
1 GiB and a fifth of the device below its total there is memory other
processes held; with an allocation that failed afterwards it is why.

TensorRT prints the device's memory in use as it initialises its libraries
(`[MemUsageChange] Init cuBLAS/cuBLASLt: CPU +0, GPU +8, now: CPU 4064,
GPU 77667 (MiB)`: cudaMemGetInfo's figure, every process's). Right after
`Loaded engine size: 3937 MiB`, before the engine's weights are placed,
the loading process holds its CUDA context and little else: 8 GiB or more
above 2 GiB is another process's or model instance's memory (a second
Triton instance on the GPU the first one's KV cache fills), an error.

Kaldi's allocator prints what the program itself holds beside the
device's memory in use by every process (`Memory usage: 0/0 bytes
currently allocated/total-held; … device memory info: free:15724M,
used:16778M, total:32502M`). The device's figure more than 2 GiB above
what the program holds and its CUDA context (the device's `used` in `The
active GPU is [2]: … used:1050M` when Kaldi chose the GPU, else 1 GiB) is
another process's memory: another job on a GPU in the Default compute mode.

PaddlePaddle's out-of-memory error prints the request, what its own
allocator holds and what was free (`Cannot allocate 2.250000kB memory on
GPU 0, … memory has been allocated and available memory is only
0.000000B`): a request of at most 1 MiB refused with nothing free, while
Paddle holds under 1 GiB (or a figure no card has, a counter gone wrong),
means the card was full before the process allocated anything.

## Why it happens
Another program on the same GPU: a second server, a notebook or training
job, a game or a desktop application, a left-over runner of an earlier
instance. On Windows and desktops the display and browsers hold some
memory too (this rule ignores the first 2 GiB and a fifth of the card).

## How to confirm
`nvidia-smi` (or `nvidia-smi --query-compute-apps=pid,process_name,used_memory
--format=csv`) at the moment of the load lists the holders and their
memory; `ollama ps` shows what Ollama itself keeps loaded.

## How to fix
Close or move the other program, then reload the model; or make the model
fit what is free (a smaller context, a smaller quantisation, `num_gpu`).

## Safety
Advice only: the figures say how much is held, not by whom.
"#,
};

/// Ollama's inventory of one GPU at start-up.
struct Start<'a> {
    msg: &'a Message,
    total: Size<'a>,
    available: Size<'a>,
}

/// Ollama's plan for one load.
struct Plan<'a> {
    msg: &'a Message,
    available: Vec<Size<'a>>,
    offload: Option<u32>,
    model: Option<u32>,
    required_full: Option<Size<'a>>,
}

impl Plan<'_> {
    fn free(&self) -> f64 {
        self.available.iter().map(|s| s.gib).sum()
    }
    fn free_text(&self) -> String {
        let parts: Vec<&str> = self.available.iter().map(|s| s.text).collect();
        parts.join(" + ")
    }
    /// Layers left on the CPU, when the plan says.
    fn cut(&self) -> Option<(u32, u32)> {
        match (self.offload, self.model) {
            (Some(o), Some(m)) if o < m => Some((o, m)),
            _ => None,
        }
    }
}

/// A size as printed (`10.8 GiB`) and in GiB.
#[derive(Clone, Copy)]
pub(super) struct Size<'a> {
    pub(super) text: &'a str,
    pub(super) gib: f64,
}

pub(super) fn size(text: &str) -> Option<Size<'_>> {
    let text = text.trim();
    let (num, unit) = text.split_once(' ')?;
    let n: f64 = num.parse().ok()?;
    let scale = match unit {
        "B" => 1.0 / (1024.0 * 1024.0 * 1024.0),
        "KiB" => 1.0 / (1024.0 * 1024.0),
        "MiB" => 1.0 / 1024.0,
        "GiB" => 1.0,
        "TiB" => 1024.0,
        _ => return None,
    };
    Some(Size {
        text,
        gib: n * scale,
    })
}

/// The value of `key="…"` or `key=…` in a slog record.
pub(super) fn attr<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(at) = text[from..].find(key) {
        let start = from + at;
        from = start + key.len();
        // A whole key: at the start or after a space.
        if start > 0 && !text[..start].ends_with(' ') {
            continue;
        }
        let Some(rest) = text[from..].strip_prefix('=') else {
            continue;
        };
        return Some(match rest.strip_prefix('"') {
            Some(q) => &q[..q.find('"').unwrap_or(q.len())],
            None => &rest[..rest.find(' ').unwrap_or(rest.len())],
        });
    }
    None
}

fn starts(incident: &Incident) -> Vec<Start<'_>> {
    incident
        .known("stacks-ollama.inference-compute")
        .filter_map(|(msg, _)| {
            // The CPU's line counts host RAM, not a GPU's memory.
            let library = attr(&msg.text, "library")?;
            if library.eq_ignore_ascii_case("cpu") {
                return None;
            }
            Some(Start {
                msg,
                total: size(attr(&msg.text, "total")?)?,
                available: size(attr(&msg.text, "available")?)?,
            })
        })
        .collect()
}

fn plans(incident: &Incident) -> Vec<Plan<'_>> {
    incident
        .known("stacks-ollama.memory-plan")
        .filter_map(|(msg, _)| {
            let list = attr(&msg.text, "memory.available")?;
            let available: Vec<Size> = list
                .trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .filter_map(size)
                .collect();
            if available.is_empty() {
                return None;
            }
            Some(Plan {
                msg,
                available,
                offload: attr(&msg.text, "layers.offload").and_then(|v| v.parse().ok()),
                model: attr(&msg.text, "layers.model").and_then(|v| v.parse().ok()),
                required_full: attr(&msg.text, "memory.required.full").and_then(size),
            })
        })
        .collect()
}

impl Rule for GpuMemoryTakenBeforeLoad {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let starts = starts(incident);
        let mut plans = plans(incident);
        plans.sort_by_key(|p| p.msg.span);
        if let Some(f) = fell_before_load(&starts, &plans)
            .or_else(|| held_at_start(&starts, &plans))
            .or_else(|| loads_differ(&plans))
            .or_else(|| reported::held_at_start(incident))
            .or_else(|| trtllm::held_at_load(incident))
            .or_else(|| kaldi::held_beside_kaldi(incident))
            .or_else(|| ray::held_before_trial(incident))
            .or_else(|| paddle::held_at_failure(incident))
        {
            out.push(f);
        }
    }
}

fn finding() -> Finding {
    Finding::new(META.id, META.category, META.severity)
}

/// Cites a start-up inventory line, marking its free figure.
fn cite_start(f: &mut Finding, s: &Start, lead: &str) {
    f.evidence_marked(
        s.msg.span,
        format!(
            "at start-up, before any load: {lead}{} free of {}",
            s.available.text, s.total.text
        ),
        s.available.text,
    );
}

/// Cites a load's plan, marking its first free figure.
fn cite_plan(f: &mut Finding, p: &Plan, what: &str) {
    f.evidence_marked(
        p.msg.span,
        format!("{what}: {} free{}", p.free_text(), cut_note(p)),
        p.available[0].text,
    );
}

fn cut_note(plan: &Plan) -> String {
    match plan.cut() {
        Some((o, m)) => format!(" ({o} of {m} layers on the GPU)"),
        None => String::new(),
    }
}

fn advise(f: &mut Finding, plan: Option<&Plan>) {
    f.actions.push(Action::advice(
        "list what holds the GPU's memory at the moment of the load (another server, a notebook, a desktop application, a left-over runner) and close or move it",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "check what Ollama itself keeps loaded",
        Some("ollama ps"),
    ));
    let need = plan
        .and_then(|p| p.required_full)
        .map(|r| format!(" (the full load needs {})", r.text))
        .unwrap_or_default();
    f.actions.push(Action::advice(
        format!("or make the model fit what is free{need}: a smaller context or quantisation, or fewer GPU layers (num_gpu)"),
        None,
    ));
}

/// Free memory fell between start-up and the first load after it: what
/// fell was taken by another program (Ollama had loaded nothing yet).
fn fell_before_load(starts: &[Start], plans: &[Plan]) -> Option<Finding> {
    let last_start = starts.iter().map(|s| s.msg.span).max()?;
    let plan = plans.iter().find(|p| p.msg.span > last_start)?;
    let at_start: f64 = starts.iter().map(|s| s.available.gib).sum();
    let taken = at_start - plan.free();
    if taken < MIN_HELD_GIB {
        return None;
    }
    let mut f = finding();
    let start_text: Vec<&str> = starts.iter().map(|s| s.available.text).collect();
    let start_text = start_text.join(" + ");
    for s in starts {
        cite_start(&mut f, s, "");
    }
    cite_plan(&mut f, plan, "at the load");
    f.condition(
        "free GPU memory fell between start-up and the first load",
        true,
    );
    let cut = f.condition(
        "the load put fewer layers on the GPU than the model has",
        plan.cut().is_some(),
    );
    if !cut {
        f.severity = Severity::Warning;
    }
    f.title = format!(
        "GPU memory taken by another program between start-up and the load: {start_text} free at start-up, {} at the load",
        plan.free_text()
    );
    f.headline = format!(
        "Free GPU memory fell from {start_text} at start-up to {} when the model was loaded{}: about {taken:.1} GiB was taken by another program in between.",
        plan.free_text(),
        cut_note(plan)
    );
    if let Some((o, m)) = plan.cut() {
        f.chain.push(format!(
            "the load found too little free and put {o} of {m} layers on the GPU, the rest on the CPU"
        ));
    }
    f.chain.push(format!(
        "another program took about {taken:.1} GiB of the GPU after the server started"
    ));
    f.explanation = "Ollama had loaded nothing between its start-up inventory and this plan, so the memory that disappeared is another program's. The figures cannot name it: nvidia-smi at the moment of the load does.".to_owned();
    advise(&mut f, Some(plan));
    f.confidence = crate::rules::support::confidence(&f, 0.55, 0.75);
    Some(f)
}

/// Much less free than the total at start-up, with nothing of Ollama's
/// loaded yet.
fn held_at_start(starts: &[Start], plans: &[Plan]) -> Option<Finding> {
    let held: Vec<(&Start, f64)> = starts
        .iter()
        .map(|s| (s, s.total.gib - s.available.gib))
        .filter(|(s, h)| *h >= MIN_HELD_GIB && *h >= START_SHARE * s.total.gib)
        .collect();
    if held.is_empty() {
        return None;
    }
    let mut f = finding();
    let mut parts = Vec::new();
    let mut big = false;
    for (s, h) in &held {
        big |= *h >= START_SHARE_ERROR * s.total.gib;
        parts.push(format!(
            "{} free of {} (about {h:.1} GiB held)",
            s.available.text, s.total.text
        ));
        cite_start(&mut f, s, "only ");
    }
    let cut_plan = plans.iter().find(|p| p.cut().is_some());
    if let Some(p) = cut_plan {
        cite_plan(&mut f, p, "a later load");
    }
    f.condition(
        "the GPU's free memory at start-up is well below its total",
        true,
    );
    let cut = f.condition(
        "a load put fewer layers on the GPU than the model has",
        cut_plan.is_some(),
    );
    if !big && !cut {
        f.severity = Severity::Warning;
    }
    f.title = format!(
        "GPU memory already held by another program when the server started: {}",
        parts.join(", ")
    );
    f.headline = format!(
        "When the server started, before it had loaded anything, its GPU had {}: other programs hold that memory, and the models it loads get only what is left.",
        parts.join(", ")
    );
    f.chain
        .push("loads get only the rest: layers that do not fit run on the CPU, slower".to_owned());
    f.chain
        .push("other programs held GPU memory before the server loaded anything".to_owned());
    f.explanation = "Ollama prints each GPU's total and free memory once, at start-up, before any model is loaded: what is missing from the total then is held by other programs (a desktop's display holds a little; this rule counts only more than 2 GiB and a fifth of the card).".to_owned();
    advise(&mut f, cut_plan);
    f.confidence = crate::rules::support::confidence(&f, 0.5, 0.7);
    Some(f)
}

/// Two loads saw different amounts free, and the one with less cut layers.
fn loads_differ(plans: &[Plan]) -> Option<Finding> {
    let most = plans.iter().max_by(|a, b| a.free().total_cmp(&b.free()))?;
    let low = plans
        .iter()
        .filter(|p| p.cut().is_some() && most.free() - p.free() >= MIN_HELD_GIB)
        .min_by(|a, b| a.free().total_cmp(&b.free()))?;
    let diff = most.free() - low.free();
    let mut f = finding();
    let (first, second) = if low.msg.span < most.msg.span {
        (low, most)
    } else {
        (most, low)
    };
    for p in [first, second] {
        cite_plan(&mut f, p, "a load");
    }
    f.condition("two loads found different amounts of GPU memory free", true);
    f.condition("the load with less free put fewer layers on the GPU", true);
    f.title = format!(
        "GPU memory held by another program at one load: {} free, against {} at another",
        low.free_text(),
        most.free_text()
    );
    f.headline = format!(
        "One load found {} of GPU memory free{}, another {}: about {diff:.1} GiB was held by something else at the first, and the split between GPU and CPU depends on it.",
        low.free_text(),
        cut_note(low),
        most.free_text()
    );
    f.chain
        .push("one load put fewer layers on the GPU and ran the rest on the CPU".to_owned());
    f.chain.push(format!(
        "about {diff:.1} GiB of the GPU was held by another program at that load"
    ));
    f.explanation = "How much of a model goes to the GPU is decided at each load from the memory free at that moment; the difference between two loads is memory another program held at one of them (or a model Ollama itself still kept loaded: `ollama ps` tells).".to_owned();
    advise(&mut f, Some(low));
    f.confidence = crate::rules::support::confidence(&f, 0.45, 0.6);
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_attributes_as_printed() {
        // Ollama issue 8310 (the maintainer's quote of the reporter's log).
        let line = r#"time=2025-01-05T16:44:53.336+02:00 level=INFO source=memory.go:356 msg="offload to cuda" projector.weights="1.8 GiB" projector.graph="2.8 GiB" layers.requested=-1 layers.model=41 layers.offload=0 layers.split="" memory.available="[3.5 GiB]" memory.gpu_overhead="0 B" memory.required.full="6.2 GiB""#;
        assert_eq!(attr(line, "memory.available"), Some("[3.5 GiB]"));
        assert_eq!(attr(line, "layers.offload"), Some("0"));
        assert_eq!(attr(line, "layers.model"), Some("41"));
        assert_eq!(attr(line, "memory.required.full"), Some("6.2 GiB"));
        // `memory.required` is not `memory.required.full`'s prefix match.
        assert_eq!(attr(line, "memory.required"), None);
        let s = size("656.2 MiB").expect("size");
        assert!((s.gib - 0.6408).abs() < 0.001);
        assert_eq!(size("0 B").map(|s| s.text), Some("0 B"));
        assert!(size("3.5GiB").is_none());
    }
}
