//! `scheduler-no-progress`: a serving engine's periodic status lines, read
//! as its scheduler's state, show requests running or waiting while nothing
//! is generated, to the end of the paste: a stall. A request that filled
//! the KV cache and then waits forever with the cache empty is a KV cache
//! too small for it.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::SourceId;

mod stuck_shutdown;

pub static RULE: SchedulerNoProgress = SchedulerNoProgress;

pub struct SchedulerNoProgress;

/// vLLM's status line (every wording since 0.1) and SGLang's decode line.
const ROWS: &[&str] = &["stacks-vllm.scheduler-status", "stacks-sglang.decode-batch"];

/// Status lines in a row without progress that make a stall: one line of
/// zero between busy ones is an interval that ended before the work began.
const MIN_LINES: usize = 2;

/// KV cache usage, in percent, at which the cache is full.
const FULL_KV_PCT: f64 = 99.0;

static META: RuleMeta = RuleMeta {
    id: "scheduler-no-progress",
    category: Category::ServerHang,
    severity: Severity::Error,
    summary: "the engine's status lines show requests running or waiting and nothing generated, to the end of the paste",
    // The catalog rows' anchors, which `rules::anchors` adds for every run;
    // uvicorn's shutdown lines (`stuck_shutdown`).
    anchors: &[
        "Waiting for background tasks to complete",
        "Waiting for connections to close",
        "Waiting for application shutdown",
        "Application shutdown complete",
        "Finished server process",
    ],
    doc: r#"
## What it means
vLLM logs its scheduler's state every few seconds while it has work: the
throughput of the last interval, the requests running and waiting, and the
KV cache in use (`Avg prompt throughput: 0.0 tokens/s, Avg generation
throughput: 0.0 tokens/s, Running: 255 reqs, Waiting: 0 reqs, GPU KV cache
usage: 0.0%`; `Throughput: …, Pending: 1 reqs` in 0.1, `Swapped:` in the V0
engine); SGLang logs `Decode batch. #running-req: N, … gen throughput
(token/s): X, #queue-req: N`. Requests running or waiting while no token is
generated (nor any prompt token processed) on every status line to the end
of the paste, or requests running with an empty KV cache on the last one,
is an engine that makes no progress: a hang.

When one request had filled the KV cache (`GPU KV cache usage: 100.0%`)
and the lines after it show it waiting (`Running: 0 reqs, … Pending: 1
reqs`) with the cache at 0%, the scheduler preempted it and can never
schedule it again: the sequence no longer fits the KV cache the GPU holds.
That is a KV cache too small for the request (category
`kv-cache-too-small`).

When the status lines instead show progress to the last one, which has a
request running with the KV cache at 95% or more, and after it the engine
logs nothing while the server, asked to stop, waits for its requests in
flight (uvicorn's `Waiting for background tasks to complete.`) and never
finishes shutting down, the engine hung where it had to preempt the
request: vLLM 0.2.x did so at KV exhaustion. That is a hang (category
`server-hang`), at a lower confidence.

## Why it happens
A hang: a collective or a CUDA graph that never returns, a deadlocked
worker, a data-parallel engine waiting for another. A KV cache too small:
a long generation on a small GPU (a T4) whose cache holds fewer tokens than
one request needs; early vLLM re-queued such a request forever instead of
aborting it.

## How to confirm
While it is stuck: `py-spy dump --pid PID` of the engine and worker
processes (where each thread waits), `nvidia-smi` (busy or idle GPUs). For
the KV cache, the start-up line `# GPU blocks: N` (or `GPU KV cache size: N
tokens`) against the request's prompt plus max tokens.

## How to fix
A hang: capture the stacks, restart the server, then run without what the
stacks point at (`--enforce-eager` for CUDA graphs) and upgrade. A KV cache
too small: give it more memory (a higher `--gpu-memory-utilization`), cap
the request (`--max-model-len`, `max_tokens`), or use a larger GPU.

## Safety
Advice only: nothing is stopped or killed.
"#,
};

/// One engine's lines: an input, and vLLM's data-parallel engine.
type EngineKey<'a> = (SourceId, Option<&'a str>);

/// One status line read.
struct Status<'a> {
    m: &'a Message,
    /// Prompt throughput, where the wording prints it apart.
    prompt: Option<f64>,
    generation: f64,
    running: u32,
    waiting: u32,
    /// KV cache in use, in percent.
    kv_pct: Option<f64>,
}

impl Status<'_> {
    /// Requests running or waiting and nothing processed in the interval.
    fn stalled(&self) -> bool {
        self.running + self.waiting > 0
            && self.generation == 0.0
            && self.prompt.is_none_or(|p| p == 0.0)
    }

    fn kv_empty(&self) -> bool {
        self.kv_pct == Some(0.0)
    }
}

impl Rule for SchedulerNoProgress {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut lines: Vec<Status> = ROWS
            .iter()
            .flat_map(|id| incident.known(id))
            .filter_map(|(m, h)| {
                let num = |name: &str| h.get(name).and_then(|v| v.parse::<f64>().ok());
                let kv_pct = num("kv").or_else(|| num("usage").map(|u| u * 100.0));
                Some(Status {
                    m,
                    prompt: num("prompt"),
                    generation: num("gen")?,
                    running: h.get("running")?.parse().ok()?,
                    waiting: h.get("pending").and_then(|v| v.parse().ok()).unwrap_or(0),
                    kv_pct,
                })
            })
            .collect();
        lines.sort_by_key(|s| s.m.span);
        // One engine's lines: an input, and vLLM's data-parallel engine.
        let mut groups: Vec<(EngineKey, Vec<&Status>)> = Vec::new();
        for s in &lines {
            let key = (s.m.span.source, engine(&s.m.text));
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, g)) => g.push(s),
                None => groups.push((key, vec![s])),
            }
        }
        let stalls: Vec<Stall> = groups
            .iter()
            .filter_map(|((_, engine), g)| stall(*engine, g))
            .collect();
        for kv in [true, false] {
            let of: Vec<&Stall> = stalls.iter().filter(|s| s.full.is_some() == kv).collect();
            if !of.is_empty() {
                out.push(finding(&of));
            }
        }
        if stalls.is_empty() {
            // Progress to the last status line, then silence and a
            // shutdown that never ends.
            out.extend(
                groups
                    .iter()
                    .find_map(|(_, g)| stuck_shutdown::finding(incident, g)),
            );
        }
    }
}

/// `Engine 004: ` → `004`: vLLM's data-parallel engine a line is about.
fn engine(text: &str) -> Option<&str> {
    let rest = &text[text.find("Engine ")? + "Engine ".len()..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0 && rest[digits..].starts_with(':')).then(|| &rest[..digits])
}

/// One engine's lines that end without progress.
struct Stall<'a> {
    engine: Option<&'a str>,
    /// The status lines without progress, to the last.
    stalled: Vec<&'a Status<'a>>,
    /// The line before them where the KV cache was full, when the requests
    /// then wait with the cache empty: a KV cache too small.
    full: Option<&'a Status<'a>>,
}

fn stall<'a>(engine: Option<&'a str>, lines: &[&'a Status<'a>]) -> Option<Stall<'a>> {
    let busy = lines.iter().rposition(|s| !s.stalled());
    let stalled: Vec<&Status> = lines[busy.map_or(0, |i| i + 1)..].to_vec();
    let last = stalled.last()?;
    let enough = stalled.len() >= MIN_LINES || (last.running > 0 && last.kv_empty());
    if !enough {
        return None;
    }
    // Waiting with the cache empty after it was full: preempted, and never
    // scheduled again.
    let waits_empty = stalled
        .iter()
        .all(|s| s.running == 0 && s.waiting > 0 && s.kv_empty());
    let full = waits_empty
        .then(|| {
            lines[..lines.len() - stalled.len()]
                .iter()
                .rev()
                .find(|s| s.kv_pct.is_some_and(|k| k >= FULL_KV_PCT))
        })
        .flatten()
        .copied();
    Some(Stall {
        engine,
        stalled,
        full,
    })
}

/// The counters as the line prints them, for a search: vLLM's `Running:
/// 1 reqs, Pending: 0 reqs` (`Waiting:` in V1), SGLang's `#running-req: 8,
/// #queue-req: 0`.
fn state(s: &Status) -> String {
    let text = &s.m.text;
    if text.contains("#running-req: ") {
        let usage = s
            .kv_pct
            .map(|k| format!(", token usage: {:.2}", k / 100.0))
            .unwrap_or_default();
        return format!(
            "#running-req: {}, #queue-req: {}, gen throughput (token/s): {:.2}{usage}",
            s.running, s.waiting, s.generation
        );
    }
    let waiting = if text.contains(" reqs, Waiting: ") {
        "Waiting"
    } else {
        "Pending"
    };
    let kv = s
        .kv_pct
        .map(|k| format!(", GPU KV cache usage: {k:.1}%"))
        .unwrap_or_default();
    format!(
        "{:.1} tokens/s, Running: {} reqs, {waiting}: {} reqs{kv}",
        s.generation, s.running, s.waiting
    )
}

fn finding(stalls: &[&Stall]) -> Finding {
    let kv = stalls.iter().any(|s| s.full.is_some());
    let category = if kv {
        Category::KvCacheTooSmall
    } else {
        META.category
    };
    let mut f = Finding::new(META.id, category, META.severity);
    let mut whose = Vec::new();
    let mut most = 0;
    for s in stalls {
        let first = s.stalled[0];
        let last = s.stalled[s.stalled.len() - 1];
        most = most.max(s.stalled.len());
        let name = s.engine.map(|e| format!("engine {e}"));
        whose.extend(name.clone());
        let of = name.map(|n| format!("{n}: ")).unwrap_or_default();
        if let Some(full) = s.full {
            f.evidence(
                full.m.span,
                format!(
                    "{of}the KV cache full with the request running ({})",
                    state(full)
                ),
            );
        }
        f.evidence(
            first.m.span,
            format!("{of}no progress from here: {}", state(first)),
        );
        if s.stalled.len() > 1 {
            f.evidence(
                last.m.span,
                format!(
                    "{of}still none on the last status line ({} in a row): {}",
                    s.stalled.len(),
                    state(last)
                ),
            );
        }
        for st in &s.stalled {
            f.entities.pids.extend(st.m.pid);
        }
    }
    let last = stalls[0].stalled[stalls[0].stalled.len() - 1];
    f.condition(
        "requests are running or waiting and no token is generated",
        true,
    );
    f.condition(
        "on every status line to the end of the paste (two or more)",
        most >= MIN_LINES,
    );
    f.condition(
        "with the KV cache empty, so nothing is being held for a step in progress",
        last.kv_empty(),
    );
    let engines = if whose.is_empty() {
        String::new()
    } else {
        format!(" ({})", whose.join(", "))
    };
    if let Some(full) = stalls.iter().find_map(|s| s.full) {
        kv_text(&mut f, &engines, full, last);
    } else {
        hang_text(&mut f, &engines, last);
    }
    f.confidence = confidence(&f, 0.35, 0.65);
    f
}

fn kv_text(f: &mut Finding, engines: &str, full: &Status, last: &Status) {
    f.title = format!("a request filled the KV cache, then waits forever{engines}");
    f.headline = format!(
        "The engine{engines} stopped making progress: a request filled the GPU KV cache ({}), was preempted, and now waits with the cache empty ({}) on every status line after it. The sequence no longer fits the KV cache this GPU holds, so the scheduler never runs it again: the KV cache is too small for the request.",
        state(full),
        state(last)
    );
    f.chain
        .push("a request grew until the KV cache was full".to_owned());
    f.chain
        .push("the scheduler preempted it and cannot schedule it again".to_owned());
    f.chain
        .push("the server makes no progress: the request waits forever".to_owned());
    f.explanation = "When the running sequences need more KV blocks than are free, vLLM preempts one (recompute or swap) and re-queues it. A single sequence that needs more blocks than the whole cache can never be rescheduled; early vLLM left it waiting instead of aborting it.".to_owned();
    f.actions.push(Action::advice(
        "give the KV cache more room: a higher --gpu-memory-utilization, or a GPU with more memory",
        None,
    ));
    f.actions.push(Action::advice(
        "cap what one request may need: a smaller --max-model-len, a lower max_tokens per request",
        None,
    ));
    f.actions.push(Action::advice(
        "upgrade vLLM: newer releases abort a request that cannot fit instead of waiting on it",
        None,
    ));
}

fn hang_text(f: &mut Finding, engines: &str, last: &Status) {
    f.title = format!("the engine makes no progress with requests in flight{engines}");
    f.headline = format!(
        "The engine{engines} has requests in flight and generates nothing: its status lines show {} to the end of the paste. The scheduler is stuck (a hung collective, CUDA graph or worker), not idle.",
        state(last)
    );
    f.chain
        .push("requests were admitted to the scheduler".to_owned());
    f.chain
        .push("no token is generated on any status line after that".to_owned());
    f.chain
        .push("the engine hangs: its requests never finish".to_owned());
    f.explanation = "A server with requests running or waiting produces tokens every interval; throughput at zero line after line, with the requests still counted, is an engine blocked on something that does not return (a collective, a CUDA graph replay, a worker or another data-parallel engine).".to_owned();
    f.actions.push(Action::advice(
        "while it is stuck, dump the engine's and workers' stacks to see where they wait",
        Some("py-spy dump --pid PID"),
    ));
    f.actions.push(Action::advice(
        "restart the server; to confirm, run again without CUDA graphs (--enforce-eager) or without the largest capture sizes, then upgrade",
        None,
    ));
}

#[cfg(test)]
mod tests;
