//! `vllm-shm-broadcast-hang`: vLLM's engine keeps waiting for its workers to
//! take the next step from the shared-memory broadcast queue: a hang.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{capitalise, confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: VllmShmBroadcastHang = VllmShmBroadcastHang;

pub struct VllmShmBroadcastHang;

/// Every version's wording: 0.5.x `No available block found in 60 second.`,
/// 0.6 `No available shared memory broadcast block found in 60 second.`,
/// 0.8+ `… found in 60 seconds. This typically happens when …`. SGLang's copy
/// of the queue prints the first wording too.
static WAIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"No available (?:shared memory broadcast )?block found in (?P<secs>[0-9]+) seconds?",
    )
    .expect("regex")
});

/// `(EngineCore_DP1 pid=1455)`, `(VllmWorkerProcess pid=161)`: the process
/// that logged the line.
static PROCESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\((?P<name>[A-Za-z][0-9A-Za-z_.-]*) pid=(?P<pid>[0-9]+)\)").expect("regex")
});

/// Lines that show why a wait at start-up is expected: compilation or a JIT
/// build takes minutes, during which the queue is idle.
static COMPILING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Compiling a graph for|torch\.compile takes|begins to compile kernel|Capturing CUDA graph",
    )
    .expect("regex")
});

/// A CUDA-graph capture's progress bar as tqdm draws it (vLLM's `Capturing
/// CUDA graphs (mixed prefill-decode, PIECEWISE):  71%|███████   | 36/51
/// [00:22<00:01, 11.70it/s]`, SGLang's `Capturing batches (…): 40%|…| 9/23`):
/// how many shapes were captured of how many.
static CAPTURE_BAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Capturing (?:CUDA graphs|batches) \([^)]*\):\s*[0-9]+%\|[^|]*\|\s*(?P<done>[0-9]+)/(?P<total>[0-9]+)",
    )
    .expect("regex")
});

/// The shapes captured and the shapes to capture, when `text` is a capture
/// bar that stopped short of its total: a capture takes seconds per shape,
/// so waits of minutes after it are a capture that hangs, not one that
/// compiles.
fn capture_stopped(text: &str) -> Option<(u64, u64)> {
    let c = CAPTURE_BAR.captures(text)?;
    let done = c["done"].parse::<u64>().ok()?;
    let total = c["total"].parse::<u64>().ok()?;
    (done < total).then_some((done, total))
}

/// The advice for a capture that stopped: confirm without CUDA graphs, and
/// the collective library's version across GPUs.
const EAGER: &str = "confirm without CUDA graphs (--enforce-eager, or PIECEWISE-only capture); with several GPUs, check the NCCL/RCCL version against the server's";
const NCCL_VERSION: &str = "python -c 'import torch; print(torch.cuda.nccl.version())'";

/// Cites a capture bar that stopped short of its total, and, for waits
/// that repeat with no progress after them, names the hang's stage in the
/// title.
fn tell_stopped(
    f: &mut Finding,
    bar: &Message,
    (done, total): (u64, u64),
    (secs, repeats): (u64, usize),
    unresumed: bool,
) {
    f.evidence(
        bar.span,
        format!(
            "CUDA graph capture stopped at {done}/{total}: no later draw of the bar, only the waits"
        ),
    );
    f.condition(
        format!("CUDA graph capture stopped short ({done}/{total}) before the waits"),
        true,
    );
    if unresumed && repeats >= 2 {
        f.title = format!(
            "vLLM hangs in CUDA graph capture at {done}/{total}: its workers took no step for {secs} s, {repeats} times"
        );
    }
}

static META: RuleMeta = RuleMeta {
    id: "vllm-shm-broadcast-hang",
    category: Category::ServerHang,
    severity: Severity::Error,
    summary: "vLLM's engine waits minute after minute for its workers: the server hangs",
    anchors: &[
        "No available shared memory broadcast block found",
        "No available block found in",
        "Compiling a graph for",
        "torch.compile takes",
        "begins to compile kernel",
        "Capturing CUDA graph",
    ],
    doc: r#"
## What it means
`No available shared memory broadcast block found in 60 seconds` (vLLM
0.8+; `No available block found in 60 second.` in 0.5–0.6): the engine
process wrote a step into its shared-memory ring buffer and the workers have
not taken the previous one for 60 s. It repeats every 60 s while the wait
lasts. Repeated with nothing else, the workers are stuck: the server hangs,
it does not crash, and no timeout ends it.

## Why it happens
A worker blocked in a collective (a peer died or took another code path:
different flags per rank, a bug in a model or speculative-decoding path), a
GPU that stopped responding, or a worker busy for minutes (a first
torch.compile, a JIT kernel build, weight quantisation). The message itself
says only that the workers did not come back.

## How to confirm
Count the repeats and look for progress between them (throughput lines,
requests answered). Dump the workers' stacks: `py-spy dump --pid PID` on
each `VllmWorker`/`EngineCore` process shows the collective or kernel they
wait in. `nvidia-smi` shows whether the GPUs spin at 100 % (a stuck kernel)
or idle.

## How to fix
Capture the stacks first, then restart the server. If it recurs at the same
point, reduce the trigger (disable speculative decoding or the feature named
in the stacks, keep the prompt below the length limit) and report the stack
upstream. A one-off warning during compilation at start-up is normal.

A wait after a CUDA-graph capture bar that stopped short (`Capturing CUDA
graphs (…):  71%|███████   | 36/51 [00:22<00:01, 11.70it/s]`, no later draw)
is not compilation, whatever the message's own "(e.g. compilation …)"
says: each shape captures in well under a second, so minutes of waits
there are a capture that hangs (a kernel or collective that never
completes under capture; ROCm's RCCL, CPU KV offloading). Run with
`--enforce-eager` to confirm, and check the collective library's version
when the server spans GPUs.

## Safety
Advice only: a restart drops the requests in flight.

## Seen in
- https://github.com/vllm-project/vllm/issues/44185 (two DP engine cores, every 60 s): `pos-0.9-dp-engine-cores`
- https://github.com/vllm-project/vllm/issues/7145 (0.5.x wording `No available block found in 60 second.`): `pos-0.5-worker-processes`
- https://github.com/vllm-project/vllm/issues/46933 (CUDA graph capture stopped at `1/83`, then only the waits): `pos-capture-stopped-1-of-83`
"#,
};

impl Rule for VllmShmBroadcastHang {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let waits: Vec<(&Message, u64)> = matches(incident, &WAIT)
            .map(|(m, c)| (m, c["secs"].parse().unwrap_or(60)))
            .collect();
        let Some(&(first, secs)) = waits.first() else {
            return;
        };
        let last = waits.last().map(|(m, _)| m.span).unwrap_or(first.span);
        // Progress after the last wait in the same input: the wait ended.
        // Ingest follows it (`model::Resumed`): progress lines are too many
        // to keep as messages.
        let resumed = incident
            .facts
            .resumed
            .iter()
            .find(|r| r.wait == last)
            .map(|r| r.progress);
        let compiling = matches(incident, &COMPILING)
            .map(|(m, _)| m)
            .filter(|m| m.span.source == last.source && m.span < last)
            .last();
        // A capture bar that stopped short is where the workers hang, not
        // a compilation that explains the wait.
        let stopped = compiling.and_then(|m| capture_stopped(&m.text).map(|c| (m, c)));
        let compiling = compiling.filter(|_| stopped.is_none());
        let processes = waiting_processes(&waits);
        let repeats = waits.len();
        let waited = secs * repeats as u64;
        let severity = if resumed.is_some() || repeats < 2 {
            Severity::Info
        } else if compiling.is_some() {
            Severity::Warning
        } else {
            META.severity
        };
        let mut f = Finding::new(META.id, META.category, severity);
        f.occurrences = repeats as u32;
        for (m, n) in distinct(waits.iter().map(|(m, _)| *m)).into_iter().take(3) {
            f.evidence(
                m.span,
                format!("no worker took the engine's next step for {secs} seconds ({n}x)"),
            );
        }
        if let Some(m) = compiling {
            f.evidence(m.span, "compilation was under way before the waits");
        }

        if let Some(span) = resumed {
            f.evidence(span, "the engine made progress after the waits");
        }
        for pid in processes.keys() {
            f.entities.pids.insert(*pid);
        }
        let who = who_waits(&processes);
        f.condition(
            format!("the wait was logged repeatedly ({repeats}x, about {waited} s in all)"),
            repeats >= 2,
        );
        f.condition(
            "no progress was logged after the last wait",
            resumed.is_none(),
        );
        f.condition("no compilation was under way", compiling.is_none());
        f.title = title(secs, repeats, resumed.is_some(), compiling.is_some());
        if let Some((m, counts)) = stopped {
            tell_stopped(&mut f, m, counts, (secs, repeats), resumed.is_none());
        }
        f.headline = if resumed.is_some() {
            format!(
                "{} waited for its workers ({repeats}x {secs} seconds, shm_broadcast) but made progress afterwards.",
                capitalise(&who)
            )
        } else {
            format!(
                "{} stopped making progress: for about {waited} seconds (shm_broadcast: no broadcast block free in {secs} seconds, {repeats}x) its workers have not taken the next step.",
                capitalise(&who)
            )
        };
        f.chain.push(format!(
            "{who} logged every {secs} seconds that no shared-memory broadcast block was free"
        ));
        f.chain.push(if resumed.is_some() {
            "the engine made progress afterwards: one slow step (a compilation, a long prefill), not a hang".to_owned()
        } else if let Some((_, (done, total))) = stopped {
            format!("the workers stopped inside CUDA graph capture after {done} of {total} shapes (each takes well under a second): a kernel or collective that never completes under capture, not a slow compilation")
        } else if compiling.is_some() {
            "the workers were compiling: a long first compilation can explain the wait".to_owned()
        } else {
            "the workers are stuck (a collective waiting for a peer, a stuck kernel or a model-path bug): nothing crashed and no timeout fired".to_owned()
        });
        f.explanation = "The engine broadcasts each step to its workers through a shared-memory ring buffer; this message repeats while they do not read it. It is a hang, not a crash: the server stays up and answers nothing until restarted. Which worker is stuck, and where, is not in the log: their stacks say it.".to_owned();
        push_actions(&mut f, &processes, resumed.is_some());
        if stopped.is_some() && resumed.is_none() {
            f.actions
                .insert(1, Action::advice(EAGER, Some(NCCL_VERSION)));
        }
        f.confidence = confidence(&f, 0.55, 0.9);
        out.push(f);
    }
}

/// Returns who waits: one entry per process that logged the message, by
/// PID, with its name and how many waits it logged.
fn waiting_processes(waits: &[(&Message, u64)]) -> BTreeMap<u32, (String, usize)> {
    let mut processes: BTreeMap<u32, (String, usize)> = BTreeMap::new();
    for (m, _) in waits {
        if let Some(c) = PROCESS.captures(&m.text)
            && let Ok(pid) = c["pid"].parse::<u32>()
        {
            processes
                .entry(pid)
                .or_insert_with(|| (c["name"].to_owned(), 0))
                .1 += 1;
        }
    }
    processes
}

/// Returns the waiting processes as the report names them
/// (`EngineCore_DP0 (PID 1455) and …`), or the engine when none is named.
fn who_waits(processes: &BTreeMap<u32, (String, usize)>) -> String {
    if processes.is_empty() {
        "the vLLM engine".to_owned()
    } else {
        let list: Vec<String> = processes
            .iter()
            .map(|(pid, (name, _))| format!("{name} (PID {pid})"))
            .collect();
        list.join(" and ")
    }
}

/// Returns the finding's title: a wait that ended, a single wait, waits
/// while compiling, or a hang.
fn title(secs: u64, repeats: usize, resumed: bool, compiling: bool) -> String {
    let times = if repeats == 1 {
        "once".to_owned()
    } else {
        format!("{repeats} times")
    };
    if resumed {
        format!("vLLM's workers left the engine waiting {secs} s ({times}), then it went on")
    } else if repeats < 2 {
        format!("vLLM's workers left the engine waiting {secs} s once")
    } else if compiling {
        format!("vLLM's workers took no step for {secs} s, {times}, while compiling")
    } else {
        format!("vLLM hangs: its workers took no step for {secs} s, {times}")
    }
}

/// Pushes the advice: nothing while the engine went on after the waits;
/// otherwise dump the waiting processes' stacks, look at the GPUs, restart.
fn push_actions(f: &mut Finding, processes: &BTreeMap<u32, (String, usize)>, resumed: bool) {
    let pids: Vec<String> = processes.keys().map(u32::to_string).collect();
    let dump = if pids.is_empty() {
        "pgrep -f -a 'VLLM|vllm' ; py-spy dump --pid PID".to_owned()
    } else {
        format!(
            "for p in {}; do py-spy dump --pid \"$p\"; done; pgrep -f -a VllmWorker",
            pids.join(" ")
        )
    };
    if resumed {
        f.actions.push(Action::advice(
            "nothing to do while it stays a single wait; if the message repeats with no progress between, dump the workers' stacks",
            None,
        ));
    } else {
        f.actions.push(Action::advice(
            "dump the stacks of the engine and its workers to see which collective or kernel they wait in",
            Some(&dump),
        ));
        f.actions.push(Action::advice(
            "check whether the GPUs spin (a stuck kernel) or idle (a missing peer)",
            Some("nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv"),
        ));
        f.actions.push(Action::advice(
            "restart the server after capturing the stacks; if it recurs at the same point, disable the feature the stacks name (e.g. speculative decoding) and report it upstream",
            None,
        ));
    }
}
