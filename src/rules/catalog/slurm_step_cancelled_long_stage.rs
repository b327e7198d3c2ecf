//! `slurm-step-cancelled-long-stage`: Slurm cancels a step with no limit
//! named and no error of its own, while the rank whose output this is had
//! spent about the collective timeout (30 minutes by default) in one stage
//! by itself: the other ranks, waiting in a collective, most likely timed
//! out and took the job down.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::round2;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: SlurmStepCancelledLongStage = SlurmStepCancelledLongStage;

pub struct SlurmStepCancelledLongStage;

/// slurmstepd's cancellation with no limit named (scancel, or srun after a
/// task failed).
const CANCELLED: &str = "stacks-slurm.step-cancelled";
/// srun's report of how tasks ended.
const TASK_ENDED: &str = "stacks-slurm.srun-task-ended";
/// tqdm's bar over iterations, under way.
const BAR: &str = "startup.iteration-progress";

/// The settings that make a waiting rank end the job at the timeout, and
/// the name of the timeout itself.
const SETTINGS: [&str; 2] = ["NCCL_BLOCKING_WAIT", "NCCL_ASYNC_ERROR_HANDLING"];

/// How many lines before the cancellation the bar may stand.
const WINDOW: u32 = 3;

/// The process group's default timeout (torch.distributed, NCCL backend).
const DEFAULT_TIMEOUT_SECS: u64 = 30 * 60;
/// How near the default timeout a stage's elapsed time must be to read as
/// the waiting ranks' timeout: they began waiting about when this rank
/// began the stage, give or take what each did before.
const NEAR_SECS: u64 = 5 * 60;
/// With a blocking-wait setting in the paste, a stage this long is enough:
/// the timeout may have been set lower than the default.
const SET_MIN_SECS: u64 = 5 * 60;

/// A bar's elapsed time: `[29:02<35:12, …]`, `[1:02:03<…]`, `[00:25, …]`.
static ELAPSED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\[(?:([0-9]+):)?([0-9]{1,2}):([0-9]{2})[<,]").expect("elapsed regex")
});

/// A bar's description: what the stage is (`Preparing test set...:  46%|`).
static DESC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?P<desc>[^|\[]*?\S):\s+[0-9]{1,3}%\|").expect("description regex")
});

static META: RuleMeta = RuleMeta {
    id: "slurm-step-cancelled-long-stage",
    category: Category::NcclTimeout,
    severity: Severity::Error,
    summary: "Slurm cancelled a step, with no limit named and no error, after this rank spent about the collective timeout in one stage: the other ranks' collective most likely timed out",
    anchors: &SETTINGS,
    doc: r#"
## What it means
slurmstepd cancelled the step (`*** STEP 6053.0 ON node CANCELLED AT
2024-04-23T12:18:08 ***`, often glued to the end of the job's progress
bar) with no limit named: not its time limit, not a preemption, not a
node failure. Until Slurm 24.11 those words mean `scancel` or srun ending
the step because one of its tasks failed; from 25.05 slurmstepd says `DUE
TO TASK FAILURE`. The output shows no error of its own, and its last line
is a progress bar that had run for about 30 minutes in one stage
(`Preparing test set...: 46% | 31/67 [29:02<35:12, …]`), or a paste that
sets `NCCL_BLOCKING_WAIT`/`NCCL_ASYNC_ERROR_HANDLING`.

In a distributed job (DDP, torchrun, Lightning under srun) that is the
shape of a collective timeout seen from the rank that was late: one rank
did a long piece of work by itself (preparing data, evaluating, saving)
while the others waited for it in a collective; after the process group's
timeout (30 minutes by default) the waiting ranks' watchdog aborted them,
srun saw a task fail and cancelled the whole step, this rank included,
in the middle of its bar.

## Why it happens
Work done on one rank only (rank 0 preparing or caching a dataset,
writing a checkpoint, running an evaluation) inside the distributed
section, longer than the process group's timeout. With
`NCCL_BLOCKING_WAIT=1` or `NCCL_ASYNC_ERROR_HANDLING=1` (or their
`TORCH_NCCL_` names) a timed-out collective ends the process instead of
hanging.

## How to confirm
The other ranks' output shows the watchdog: `Watchdog caught collective
operation timeout: WorkNCCL(… Timeout(ms)=1800000) ran for 1800… ms`.
`sacct -j JOBID --format=JobID,State,ExitCode,Elapsed` shows the step
FAILED or CANCELLED and which task failed first. The confidence stays low
until those lines are in the inputs.

## How to fix
Do the long single-rank work before `init_process_group` (or on every
rank, or offline), or raise the timeout
(`init_process_group(timeout=timedelta(hours=2))`, Lightning's
`DDPStrategy(timeout=…)`), or drop the blocking-wait settings so that a
slow stage is not taken for a hang.

## Safety
Advice only: nothing is stopped or killed.
"#,
};

impl Rule for SlurmStepCancelledLongStage {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let settings: Vec<&Message> = incident
            .facts
            .messages
            .iter()
            .filter(|m| SETTINGS.iter().any(|s| m.text.contains(s)))
            .collect();
        for (m, hit) in incident.known(CANCELLED) {
            if failed_before(incident, m.span) {
                continue;
            }
            let Some((bar, elapsed)) = last_bar(incident, m) else {
                continue;
            };
            let near = elapsed.abs_diff(DEFAULT_TIMEOUT_SECS) <= NEAR_SECS;
            // The job script's settings may be an input of their own.
            let set = !settings.is_empty();
            let long_with_settings = set && elapsed >= SET_MIN_SECS;
            if !near && !long_with_settings {
                continue;
            }
            let step = hit.get("step").unwrap_or("?");
            let node = hit.get("node").unwrap_or("?");
            let mut f = Finding::new(META.id, META.category, META.severity);
            f.evidence(
                m.span,
                format!("slurmstepd cancelled step {step} on {node} with no limit named: scancel, or srun after another task failed"),
            );
            if bar.span != m.span {
                f.evidence(
                    bar.span,
                    "this rank's last line: one stage's progress bar, still running",
                );
            }
            cite_tasks(incident, m.span, &mut f);
            for s in &settings {
                f.evidence(
                    s.span,
                    "a setting that makes a timed-out collective end the process",
                );
            }
            f.condition("the step was cancelled with no limit named (not its time limit, a preemption or a node failure)", true);
            f.condition("no error before the cancellation in this output", true);
            f.condition(
                "this rank had spent about the process group's default timeout (30 min) in one stage",
                near,
            );
            f.condition(
                "NCCL_BLOCKING_WAIT / NCCL_ASYNC_ERROR_HANDLING set in the inputs",
                set,
            );
            f.condition("another rank's watchdog timeout in the inputs", false);
            f.confidence = round2(if near && set { 0.5 } else { 0.4 });
            explain(&mut f, step, node, stage_name(&bar.text), elapsed);
            out.push(f);
        }
    }
}

/// The bar the cancellation is glued to, or the last one in the lines
/// before it, with its elapsed time in seconds.
fn last_bar<'a>(incident: &'a Incident, cancel: &'a Message) -> Option<(&'a Message, u64)> {
    let glued = cancel
        .text
        .find("slurmstepd")
        .map(|i| &cancel.text[..i])
        .and_then(elapsed_of)
        .map(|e| (cancel, e));
    glued.or_else(|| {
        incident
            .known(BAR)
            .map(|(m, _)| m)
            .filter(|m| {
                m.span.source == cancel.span.source
                    && m.span < cancel.span
                    && cancel.span.line - m.span.line <= WINDOW
            })
            .max_by_key(|m| m.span)
            .and_then(|m| Some((m, elapsed_of(&m.text)?)))
    })
}

/// The elapsed time of the last bar in `text`, in seconds.
fn elapsed_of(text: &str) -> Option<u64> {
    let c = ELAPSED.captures_iter(text).last()?;
    let n = |i: usize| c.get(i).map_or(Some(0), |m| m.as_str().parse::<u64>().ok());
    Some(n(1)? * 3600 + n(2)? * 60 + n(3)?)
}

/// What the stage is, by its bar's description.
fn stage_name(bar: &str) -> Option<String> {
    DESC.captures(bar)
        .and_then(|c| c.name("desc"))
        .map(|d| d.as_str().trim_end_matches('.').trim().to_owned())
        .filter(|d| !d.is_empty())
}

/// srun's reports of the tasks that ended with the step, after it.
fn cite_tasks(incident: &Incident, cancel: Span, f: &mut Finding) {
    for (m, hit) in incident.known(TASK_ENDED) {
        if m.span.source != cancel.source || m.span < cancel {
            continue;
        }
        let tasks = hit.get("tasks").unwrap_or("?");
        let how = hit.get("how").unwrap_or("?");
        f.evidence(
            m.span,
            format!("srun reports task {tasks} {how}: ended with the step"),
        );
    }
}

/// Whether this output shows an error before the cancellation: then the
/// error is the story.
fn failed_before(incident: &Incident, cancel: Span) -> bool {
    let before = |s: Span| s.source == cancel.source && s < cancel;
    incident
        .facts
        .messages
        .iter()
        .any(|m| before(m.span) && crate::rules::unknown::ERRORISH.is_match(&m.text))
        || incident
            .facts
            .server_events
            .iter()
            .any(|e| before(e.span) && e.kind.is_failure())
}

fn minutes(secs: u64) -> String {
    format!("{} min", (secs + 30) / 60)
}

fn explain(f: &mut Finding, step: &str, node: &str, stage: Option<String>, elapsed: u64) {
    let stage = stage.map_or_else(|| "one stage".to_owned(), |s| format!("one stage (`{s}`)"));
    let took = minutes(elapsed);
    f.title = format!(
        "Slurm cancelled step {step} while this rank spent {took} in {stage}: most likely the other ranks' collective timed out"
    );
    f.headline = format!(
        "Slurm cancelled step {step} on {node} after this rank had spent {took} in {stage}, with no error of its own: most likely the other ranks, waiting for it in a collective, hit the process group's timeout (30 min by default) and the job was taken down. Their logs are not in the inputs."
    );
    f.explanation = "A step cancelled with no limit named is scancel or srun ending the step after a task failed. When the rank that was cancelled was still in a long stage of its own, about as long as the collective timeout, the task that failed first is most likely a rank that waited for it in a collective and timed out.".to_owned();
    f.chain.push(format!("Slurm cancelled step {step}"));
    f.chain.push(format!(
        "this rank was still in {stage} after {took}, while the other ranks waited in a collective"
    ));
    f.chain.push("the waiting ranks' collective timed out (the process group's timeout, 30 min by default) and srun took the step down (not confirmed: their logs are not in the inputs)".to_owned());
    f.actions.push(Action::advice(
        "Confirm it in the other ranks' output: the watchdog's timeout (`Watchdog caught collective operation timeout`, `Timeout(ms)=1800000`), and which task failed first",
        Some("grep -h -e 'Watchdog caught' -e 'Timeout(ms)' slurm-JOBID*.out; sacct -j JOBID --format=JobID,State,ExitCode,Elapsed"),
    ));
    f.actions.push(Action::advice(
        "Move the long single-rank work before init_process_group (or run it on every rank, or offline), or raise the timeout: init_process_group(timeout=timedelta(hours=2)), Lightning's DDPStrategy(timeout=…); NCCL_BLOCKING_WAIT / TORCH_NCCL_BLOCKING_WAIT=1 make a slow stage end the job at the timeout",
        None,
    ));
}

#[cfg(test)]
mod tests;
