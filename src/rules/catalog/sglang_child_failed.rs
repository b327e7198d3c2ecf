//! `sglang-child-failed`: SGLang's main process killed its own process tree
//! because a child (a scheduler, the detokenizer) failed. A wrapper: it only
//! points at the child's exception, which other findings classify.

use std::collections::BTreeSet;

use crate::correlate::{Incident, UnitEventKind};
use crate::model::{Framework, ServerEvent, ServerEventKind, root_cause};
use crate::rules::support::confidence;
use crate::rules::support::server::{shorten, target};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: SglangChildFailed = SglangChildFailed;

pub struct SglangChildFailed;

/// The launcher's verdict, as its catalog row reads it
/// (catalogs/stacks-sglang.toml).
const INIT_FAILED: &str = "stacks-sglang.initialization-failed";

/// How far after a `hit an exception` line its traceback's exception line
/// may be (a long traceback, interleaved with other ranks').
const TRACEBACK_LINES: u32 = 400;

static META: RuleMeta = RuleMeta {
    id: "sglang-child-failed",
    category: Category::Unknown,
    severity: Severity::Info,
    summary: "SGLang killed its own process tree because a child process failed (the real error is above)",
    anchors: &[
        "hit an exception",
        "Received sigquit from a child process",
        "SIGQUIT received",
        "scheduler is dead",
    ],
    doc: r#"
## What it means
A child process of SGLang (a scheduler, the detokenizer, the tokenizer
manager, the data-parallel controller) caught an exception and logged it as
`Scheduler hit an exception: Traceback …`, then sent SIGQUIT to the main
process, which logged `Received sigquit from a child process. It usually
means the child failed.` and SIGKILLed the whole tree, itself included. At
start-up the main process may instead report `Rank 0 scheduler is dead` or
`Initialization failed. Please see the error messages above.`

This finding is a wrapper: the cause is the child's exception just above,
which the report classifies on its own.

## Why it happens
Any exception in a child: out of memory, a CUDA fault, a failed memory check,
a bad argument.

## How to confirm
The traceback after `hit an exception:`. Under systemd the unit's main
process dies by `status=9/KILL` and the unit fails with result `signal`:
that SIGKILL is SGLang's own, not the kernel's OOM killer, unless the kernel
log shows an OOM kill of that PID.

## How to fix
Fix the child's exception; this wrapper needs no action of its own.

## Safety
Nothing to run.
"#,
};

impl Rule for SglangChildFailed {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let events = &incident.facts.server_events;
        let wrappers: Vec<&ServerEvent> = events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    ServerEventKind::ChildException { .. }
                        | ServerEventKind::SigquitFromChild
                        | ServerEventKind::SchedulerDead { .. }
                )
            })
            .collect();
        let init: Vec<_> = incident.known(INIT_FAILED).map(|(m, _)| m).collect();
        if wrappers.is_empty() && init.is_empty() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        let children: Vec<(&ServerEvent, &str)> = wrappers
            .iter()
            .filter_map(|e| match &e.kind {
                ServerEventKind::ChildException { component } => Some((*e, component.as_str())),
                _ => None,
            })
            .collect();
        let component = children.first().map_or("a child process", |c| c.1);
        let ranks: BTreeSet<String> = children
            .iter()
            .filter_map(|(e, _)| e.rank.map(|r| r.to_string()))
            .filter(|r| !r.is_empty())
            .collect();
        // The exception each child's traceback ends with, then the start of
        // its chain: the real error.
        let real = real_error(events, &children);
        // One line per step of the failure path, whichever capture has it.
        cite_failure_path(&mut f, &wrappers);
        for m in &init {
            f.evidence_once(m.span, "the main process gave up: initialization failed");
        }
        let real_text = real.map(real_error_text);
        // The real error is named, not cited: a rule that classifies it cites
        // it, and one no rule classifies stays visible as unrecognised.
        let tgt = target(incident, wrappers.iter().copied(), Framework::Sglang);
        if let Some((unit, _, _)) = &tgt {
            f.entities.units.insert(unit.clone());
            cite_unit_kill(&mut f, incident, unit);
        }
        // The same failure in two captures (log file and journal) is once.
        let distinct_children: BTreeSet<_> =
            children.iter().map(|(e, _)| (e.rank, e.time)).collect();
        f.occurrences = distinct_children.len().max(1) as u32;
        let who = tgt.as_ref().map_or("the SGLang server", |t| t.0.as_str());
        let rank_text = if ranks.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                ranks.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        };
        f.chain.push(format!(
            "{who} went down: SGLang's main process killed its own process tree"
        ));
        f.chain.push(format!("{component}{rank_text} failed"));
        if let Some(text) = &real_text {
            f.chain.push(text.clone());
        }
        f.condition("SGLang reported a failed child process", true);
        f.condition("the child's exception is in the log", real.is_some());
        f.title = format!("SGLang killed its process tree after {component} failed");
        f.headline = match &real_text {
            Some(text) => format!(
                "{who} killed its own process tree after {component}{rank_text} failed; the real error is above: {text}"
            ),
            None => format!(
                "{who} killed its own process tree after {component}{rank_text} failed; the child's error is not in the inputs."
            ),
        };
        f.explanation = "A wrapper, not a cause: SGLang ends every process of the server when one child fails, so the SIGKILL and the unit's failure follow from the child's exception.".to_owned();
        f.actions.push(Action::advice(
            "fix the child's exception (the finding that classifies it comes first in this report)",
            None,
        ));
        f.confidence = confidence(&f, 0.8, 0.95);
        out.push(f);
    }
}

/// Returns the exception each child's traceback ends with (the first child's
/// whose traceback is in the log), followed back to the start of its chain:
/// the real error.
fn real_error<'a>(
    events: &'a [ServerEvent],
    children: &[(&ServerEvent, &str)],
) -> Option<&'a ServerEvent> {
    children.iter().find_map(|(c, _)| {
        let closing = events.iter().find(|e| {
            e.span.source == c.span.source
                && e.span.line > c.span.line
                && e.span.line - c.span.line <= TRACEBACK_LINES
                && matches!(
                    e.kind,
                    ServerEventKind::Exception(_) | ServerEventKind::MemoryImbalance(_)
                )
                && (c.rank.is_none() || e.rank.is_none() || e.rank == c.rank)
        })?;
        Some(root_cause(events, closing))
    })
}

/// Cites one line per step of the failure path (the child's exception, the
/// SIGQUIT, a dead scheduler), whichever capture has it.
fn cite_failure_path(f: &mut Finding, wrappers: &[&ServerEvent]) {
    for e in wrappers {
        let note = match &e.kind {
            ServerEventKind::ChildException { component } => {
                format!("{component} caught an exception and reported it")
            }
            ServerEventKind::SigquitFromChild => {
                "the main process got SIGQUIT from the failed child and killed the tree".to_owned()
            }
            ServerEventKind::SchedulerDead { rank } => {
                format!("the main process saw rank {rank}'s scheduler die")
            }
            _ => continue,
        };
        f.evidence_once(e.span, note);
    }
}

/// Returns the real error as the chain and headline name it: the exception's
/// name and shortened message, or the failed memory balance check.
fn real_error_text(e: &ServerEvent) -> String {
    match &e.kind {
        ServerEventKind::Exception(x) => format!("{}: {}", x.name, shorten(&x.message)),
        ServerEventKind::MemoryImbalance(_) => {
            "the TP memory balance check failed: the memory capacity is unbalanced".to_owned()
        }
        _ => String::new(),
    }
}

/// Cites the unit's SIGKILLed main process (SGLang's own kill unless the
/// kernel log has an OOM kill) and its failure with result 'signal'.
fn cite_unit_kill(f: &mut Finding, incident: &Incident, unit: &str) {
    let oom_killed = crate::rules::support::kernel_oom_killed(incident);
    for e in incident.units.get(unit).map_or(&[][..], |u| &u.events) {
        match &e.kind {
            UnitEventKind::MainProcessExited { status, .. } if status.contains("KILL") => {
                f.evidence_once(
                    e.span,
                    if oom_killed {
                        format!("{unit}'s main process died by SIGKILL (the kernel log also has an OOM kill: see that finding)")
                    } else {
                        format!("{unit}'s main process died by SIGKILL: SGLang's own kill of its tree, not the OOM killer")
                    },
                )
            }
            UnitEventKind::FailedWithResult(r) if r == "signal" => f.evidence_once(
                e.span,
                format!("{unit} failed with result 'signal' after SGLang's self-kill"),
            ),
            _ => {}
        }
    }
}
