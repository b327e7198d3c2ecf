//! A kill report with nothing around it: the shell's `Killed` (or a job
//! report that names no command, only a launcher's unexpanded variables,
//! or a server's command) as the whole input. The finding says so, stays at the
//! rule's lowest confidence and asks for what would settle it.

use crate::correlate::Incident;
use crate::rules::{Action, Finding};
use crate::source::Span;

use super::Killed;

/// Whether the kill at `kill` is a lone report: a job report alone in its
/// input that names no command (`line 118: 7080 killed`), or only a
/// launcher's unexpanded variables (`line 241:  3179 Killed
/// "${python_cmd}" "${LAUNCH_SCRIPT}" "$@"`), says no more than a bare
/// `Killed`: the kill is all there is to read.
pub(super) fn is_lone(incident: &Incident, kill: Span, killed: Killed<'_>) -> bool {
    (match killed {
        Killed::Shell(None) => true,
        Killed::Shell(Some((_, command))) => only_variables(command) || runs_a_server(command),
        _ => false,
    }) && alone(incident, kill)
}

/// Whether the shell's `Killed` is all its input shows: its first line,
/// with nothing after it but blank lines (a paste of a loader's output
/// that kept only the last word, a notebook cell's whole output). A
/// command line before it (`python3 train.py`) is not nothing: what it
/// ran is then the question.
fn alone(incident: &Incident, kill: Span) -> bool {
    kill.line == 1
        && incident
            .facts
            .messages
            .iter()
            .filter(|m| m.span.source == kill.source && m.span != kill)
            .all(|m| m.text.trim().is_empty())
}

/// Whether a job's command is only shell variables (`"${python_cmd}"
/// "${LAUNCH_SCRIPT}" "$@"`, bash printing a launcher's line unexpanded),
/// or nothing: it does not say what ran.
fn only_variables(command: &str) -> bool {
    command
        .split_whitespace()
        .all(|w| w.trim_matches('"').starts_with('$'))
}

/// Whether a job's command starts a server: a serving program the
/// programs' table knows (`vllm serve`, `ollama serve`, `llama-server`),
/// or any program given an address to listen on (`--port 8188`,
/// `--listen`, `--host=0.0.0.0`).
fn runs_a_server(command: &str) -> bool {
    crate::correlate::programs::classify(command).is_some()
        || command.split_whitespace().any(|w| {
            matches!(
                w.split('=').next().unwrap_or(w),
                "--port" | "--listen" | "--host"
            )
        })
}

/// `process 3179` → `Process 3179`.
fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|first| first.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// A `Killed` with nothing around it: the kill is all there is to read,
/// so the finding says so, stays at the rule's lowest confidence and asks
/// for what would settle it: the kernel's log and the container's memory
/// limit.
pub(super) fn explain(f: &mut Finding, pid: Option<u32>) {
    let who = pid.map_or_else(|| "a process".to_owned(), |p| format!("process {p}"));
    f.title = format!(
        "{who} was killed by SIGKILL with nothing else in the inputs: most likely the OOM killer"
    );
    f.headline = format!(
        "{} was Killed (SIGKILL) and the inputs show nothing else: most often the kernel's OOM killer, the host's RAM or the container's memory limit exhausted (a model loading into RAM); the kernel's lines are not in the inputs.",
        capitalised(&who)
    );
    if let Some(first) = f.chain.first_mut() {
        *first = "a process was Killed".to_owned();
    }
    if let Some(kill) = f.evidence.first_mut() {
        kill.note = "the shell reports a process Killed: SIGKILL from outside, with no traceback; nothing else was pasted".to_owned();
    }
    f.actions.push(Action::advice(
        "If it ran in a container (Docker, a Kubernetes pod, Binder, Colab), read its memory limit: the OOM killer acts at that limit, below the host's RAM",
        Some("cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; cat /sys/fs/cgroup/memory.events 2>/dev/null"),
    ));
}
