//! `vllm-engine-core-failed`: vLLM's notices that its engine core or a
//! worker process failed. A wrapper: it only points at the failed process's
//! own exception, which other findings classify.

use crate::correlate::Incident;
use crate::model::{Framework, ServerEvent, ServerEventKind, VllmFailure, root_cause};
use crate::rules::support::confidence;
use crate::rules::support::server::{shorten, target};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use std::collections::BTreeSet;

pub static RULE: VllmEngineCoreFailed = VllmEngineCoreFailed;

pub struct VllmEngineCoreFailed;

/// Exceptions that are themselves vLLM's wrappers, not a cause.
const WRAPPER_TEXTS: &[&str] = &[
    "Engine core initialization failed",
    "EngineCore encountered",
    "WorkerProc initialization failed",
    "died unexpectedly",
    "EngineDeadError",
    "Engine loop has died",
];

/// Notices the typed reader does not make events of (V1's worker and
/// output-handler reports, v0's background-loop and front-end ones): catalog
/// rows, each with how the finding words it.
const NOTICES: &[(&str, &str)] = &[
    (
        "stacks-vllm.workerproc-hit-exception",
        "a worker reported its exception to the engine",
    ),
    (
        "stacks-vllm.output-handler-failed",
        "the API server's output handler saw the engine die",
    ),
    (
        "stacks-vllm.mqllmengine-dead",
        "the API server found the v0 engine process dead",
    ),
    (
        "stacks-vllm.engine-background-task-failed",
        "the engine's background loop failed",
    ),
];

/// How far around the wrappers the failed process's exception may be.
const WINDOW_LINES: u32 = 400;

static META: RuleMeta = RuleMeta {
    id: "vllm-engine-core-failed",
    category: Category::Unknown,
    severity: Severity::Info,
    summary: "vLLM reported that its engine core or a worker failed (the real error is above)",
    anchors: &[
        "EngineCore failed to start",
        "EngineCore encountered",
        "Engine core initialization failed",
        "WorkerProc failed to start",
        "WorkerProc initialization failed",
        "died unexpectedly",
        "Exception in worker",
        "died, exit code",
        // The notices' anchors come with their catalog rows.
    ],
    doc: r#"
## What it means
vLLM runs its engine core and its workers in separate processes. When one of
them fails, the others report it: `EngineCore failed to start.`, `Engine core
initialization failed. See root cause above. Failed core proc(s):
{'EngineCore_DP0': 1}`, `Worker proc VllmWorker-1 died unexpectedly,
shutting down executor.`, `EngineCore encountered a fatal error.`, and in the
v0 engine `Exception in worker VllmWorkerProcess while processing method
init_device.` or `Worker VllmWorkerProcess pid 4243 died, exit code: -9`.

This finding is a wrapper: the cause is the failed process's own traceback,
in its `(EngineCore…)` or `(Worker…)` lines just before, which the report
classifies on its own.

## Why it happens
Any error in the engine core or a worker. The exit code of a dead worker
says how it ended: `-9` is SIGKILL (the kernel's OOM killer, or an operator),
`-6` is an abort (often PyTorch's NCCL watchdog).

## How to confirm
The traceback of the failed process before these lines; for `-9`, the kernel
log for an OOM kill of that PID.

## How to fix
Fix the failed process's error; this wrapper needs no action of its own.

## Safety
Nothing to run.
"#,
};

impl Rule for VllmEngineCoreFailed {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let events = &incident.facts.server_events;
        let failures: Vec<(&ServerEvent, &VllmFailure)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                ServerEventKind::VllmFailure(v) => Some((e, v)),
                _ => None,
            })
            .collect();
        let Some((first, _)) = failures.first() else {
            return;
        };
        let real = failed_process_exception(events, first, &failures);
        let mut f = Finding::new(META.id, META.category, META.severity);
        // One line per kind of notice, whichever capture has it.
        for (e, v) in &failures {
            f.evidence_once(e.span, notice(v));
        }
        for (id, note) in NOTICES {
            for (m, _) in incident.known(id) {
                f.evidence_once(m.span, *note);
            }
        }
        let real_text = real.and_then(|e| match &e.kind {
            ServerEventKind::Exception(x) => Some(format!("{}: {}", x.name, shorten(&x.message))),
            _ => None,
        });
        // The real error is named, not cited: a rule that classifies it cites
        // it, and one no rule classifies stays visible as unrecognised.
        if let Some(p) = real.and_then(|e| e.pid) {
            f.entities.pids.insert(p);
        }
        let (names, signals) = failed_processes(&failures);
        let tgt = target(incident, failures.iter().map(|(e, _)| *e), Framework::Vllm);
        if let Some((unit, _, _)) = &tgt {
            f.entities.units.insert(unit.clone());
        }
        f.occurrences = failures.len() as u32;
        let who = tgt.as_ref().map_or("the vLLM server", |t| t.0.as_str());
        let failed = if names.is_empty() {
            "its engine core".to_owned()
        } else {
            names.join(", ")
        };
        f.chain.push(format!(
            "{who} went down: vLLM reported that {failed} failed"
        ));
        for s in &signals {
            f.chain.push(match s {
                -9 => "a process died by SIGKILL (-9): the kernel's OOM killer or an operator, see the kernel log".to_owned(),
                -6 => "a process aborted (-6): often PyTorch's NCCL watchdog".to_owned(),
                c => format!("a process died by signal {}", -c),
            });
        }
        if let Some(text) = &real_text {
            f.chain.push(text.clone());
        }
        f.condition("vLLM reported a failed engine or worker process", true);
        f.condition(
            "the failed process's exception is in the log",
            real.is_some(),
        );
        f.title = format!("vLLM reported that {failed} failed");
        f.headline = match &real_text {
            Some(text) => format!("{who}: {failed} failed; the real error is above: {text}"),
            None => format!(
                "{who}: {failed} failed; its own error is not in the inputs (look for its traceback, or the kernel log for a kill)."
            ),
        };
        f.explanation = "A wrapper, not a cause: vLLM's front end and executor report the death of the process that failed; that process's own lines say why.".to_owned();
        f.actions.push(Action::advice(
            "fix the failed process's error (the finding that classifies it comes first in this report)",
            None,
        ));
        f.confidence = confidence(&f, 0.8, 0.95);
        out.push(f);
    }
}

/// Returns the failed process's exception: the earliest one near the
/// wrappers (from `first` to the last notice in its input) that is not
/// itself a wrapper, followed to its chain's start.
fn failed_process_exception<'a>(
    events: &'a [ServerEvent],
    first: &ServerEvent,
    failures: &[(&ServerEvent, &VllmFailure)],
) -> Option<&'a ServerEvent> {
    let last_line = failures
        .iter()
        .filter(|(e, _)| e.span.source == first.span.source)
        .map(|(e, _)| e.span.line)
        .max()
        .unwrap_or(first.span.line);
    events
        .iter()
        .filter(|e| {
            e.span.source == first.span.source
                && e.span.line + WINDOW_LINES >= first.span.line
                && e.span.line <= last_line + 60
        })
        .filter_map(|e| match &e.kind {
            ServerEventKind::Exception(x)
                if !WRAPPER_TEXTS.iter().any(|w| x.message.contains(w)) =>
            {
                Some(root_cause(events, e))
            }
            _ => None,
        })
        .next()
}

/// Returns the evidence note for one of vLLM's failure notices.
fn notice(v: &VllmFailure) -> String {
    match v {
        VllmFailure::EngineCoreFailedToStart => "the engine core failed to start".to_owned(),
        VllmFailure::EngineCoreFatalError => "the engine core hit a fatal error".to_owned(),
        VllmFailure::EngineDead => "the API server found the engine core dead".to_owned(),
        VllmFailure::EngineInitFailed { .. } => {
            "the API server gave up: engine core initialization failed".to_owned()
        }
        VllmFailure::EngineCoreDied { name } => format!("{name} died unexpectedly"),
        VllmFailure::WorkerProcFailedToStart | VllmFailure::WorkerProcInitFailed => {
            "a worker process failed to start".to_owned()
        }
        VllmFailure::WorkerDied {
            name, exit_code, ..
        } => match exit_code {
            Some(c) => format!("{name} died with exit code {c}"),
            None => format!("{name} died unexpectedly"),
        },
        VllmFailure::WorkerException { worker, method } => {
            format!("{worker} raised while running {method}")
        }
    }
}

/// Returns the processes the notices name as failed, in the order first
/// named, and the signals (negative exit codes) that killed any of them.
fn failed_processes<'a>(
    failures: &[(&ServerEvent, &'a VllmFailure)],
) -> (Vec<&'a str>, BTreeSet<i32>) {
    let mut signals = BTreeSet::new();
    let mut names = Vec::new();
    for (_, v) in failures {
        let (name, code) = match v {
            VllmFailure::WorkerDied {
                name, exit_code, ..
            } => (Some(name.as_str()), *exit_code),
            VllmFailure::EngineCoreDied { name } => (Some(name.as_str()), None),
            VllmFailure::EngineInitFailed { failed } => {
                for (n, c) in failed {
                    if !names.contains(&n.as_str()) {
                        names.push(n.as_str());
                    }
                    if *c < 0 {
                        signals.insert(*c);
                    }
                }
                (None, None)
            }
            VllmFailure::WorkerException { worker, .. } => (Some(worker.as_str()), None),
            _ => (None, None),
        };
        if let Some(n) = name {
            if !names.contains(&n) {
                names.push(n);
            }
        }
        if let Some(c) = code.filter(|c| *c < 0) {
            signals.insert(c);
        }
    }
    (names, signals)
}
