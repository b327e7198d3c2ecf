//! `server-killed-no-kernel-line`: the shell reports a model server
//! `Killed` (SIGKILL), nothing failed before, and no kernel line says who
//! killed it: most likely the host's OOM killer, at a confidence that says
//! the kernel's own lines are missing, higher when the server's last
//! figures reserved host memory.

use crate::correlate::Incident;
use crate::model::{Message, ServerEventKind};
use crate::rules::support::round2;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: ServerKilledNoKernelLine = ServerKilledNoKernelLine;

pub struct ServerKilledNoKernelLine;

/// vLLM's KV cache sizes: `# CPU blocks` is the swap space it pins in host
/// memory at start-up.
const KV_SIZED: &str = "startup.vllm-kv-cache-sized";

pub static META: RuleMeta = RuleMeta {
    id: "server-killed-no-kernel-line",
    category: Category::HostOomKiller,
    severity: Severity::Error,
    summary: "the shell reports a model server Killed with no error before it and no kernel line: most likely the host's OOM killer",
    anchors: &["Killed", "# CPU blocks"],
    doc: r#"
## What it means
The shell that ran a model server reports it `Killed` (a line of its own,
or `line 22: 103525 Killed  python -m …`): SIGKILL from outside, with no
traceback and no error before it. The server had reached a stage of its
start-up or was serving. No kernel line is in the inputs, so who sent the
signal is not shown; on a host that runs one big model, by far the most
common sender is the kernel's OOM killer, because the host's RAM ran out.

## Why it happens
A server holds a lot of host memory besides the GPU's: the weights while
they load, pinned buffers, and vLLM's swap space (`# CPU blocks: N`, 4 GiB
per GPU by default, pinned at start-up), a llama.cpp model kept on the
CPU. Several instances, a small host or a container's memory limit make
the kernel kill the biggest process. An operator's `kill -9` or a
supervisor's timeout look the same from the shell.

## How to confirm
The kernel says it: `journalctl -k | grep -i -e oom -e 'killed process'`
or `dmesg -T | grep -i oom` around the time (`Out of memory: Killed process
PID (python)`), and `free -h` for the host's memory. The finding's
confidence stays low until those lines are in the inputs.

## How to fix
Give the server the host memory it needs: lower vLLM's `--swap-space`
(its CPU blocks are pinned RAM), load fewer models or instances at once,
raise the container's memory limit, add RAM or swap.

## Safety
Advice only: nothing is stopped or killed.
"#,
};

impl Rule for ServerKilledNoKernelLine {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // The kernel's own account of an OOM kill explains the death.
        if crate::rules::support::kernel_oom_killed(incident) {
            return;
        }
        for e in &incident.facts.server_events {
            let killed = match &e.kind {
                ServerEventKind::ShellForegroundSignaled { signal } => signal == "Killed",
                ServerEventKind::ShellJobSignaled { signal, .. } => signal == "Killed",
                _ => false,
            };
            if killed && let Some(f) = finding(incident, e.span) {
                out.push(f);
            }
        }
    }
}

fn finding(incident: &Incident, kill: Span) -> Option<Finding> {
    let before = |s: Span| s.source == kill.source && s < kill;
    // What was killed loaded a model: a line of a serving framework or a
    // start-up milestone before the kill, or the kill glued to the
    // progress bar of a model's weights loading (`Loading checkpoint
    // shards:  38%|…| 3/8 […]Killed`).
    let loading = incident
        .facts
        .messages
        .binary_search_by_key(&kill, |m| m.span)
        .ok()
        .map(|i| incident.facts.messages[i].text.as_str())
        .filter(|t| t.contains("Loading") && t.contains('%') && t.trim_end() != "Killed");
    let server_line = incident
        .facts
        .server_events
        .iter()
        .filter(|e| before(e.span) && e.framework != crate::model::Framework::Unknown)
        .map(|e| e.span)
        .chain(
            incident
                .known
                .iter()
                .filter(|k| k.hit.row.is_some_and(|r| r.stage.is_some()))
                .map(|k| incident.facts.messages[k.message].span)
                .filter(|s| before(*s)),
        )
        .max();
    if server_line.is_none() && loading.is_none() {
        return None;
    }
    // Nothing failed before: a kill after an error is a harness or a
    // person cleaning up, and the error is the story.
    if failed_before(incident, kill) {
        return None;
    }
    let figures: Option<(&Message, u64)> = incident
        .known(KV_SIZED)
        .filter(|(m, _)| before(m.span))
        .filter_map(|(m, h)| Some((m, h.get("cpu")?.parse::<u64>().ok()?)))
        .filter(|(_, cpu)| *cpu > 0)
        .last();

    let mut f = Finding::new(META.id, META.category, META.severity);
    f.evidence(
        kill,
        match loading {
            Some(_) => "the shell reports the server Killed while its model's weights were loading: SIGKILL from outside, with no traceback",
            None => "the shell reports the server Killed: SIGKILL from outside, with no traceback",
        },
    );
    if let Some((m, cpu)) = figures {
        f.evidence(
            m.span,
            format!("the server's last memory figures: {cpu} CPU blocks, swap space pinned in host memory just before the kill"),
        );
    }
    if let Some(line) = server_line
        && figures.is_none_or(|(m, _)| m.span != line)
    {
        f.evidence(line, "the server's last line before the kill");
    }
    f.condition("the shell reports the server killed by SIGKILL", true);
    f.condition("no error, exception or failure before the kill", true);
    let pinned = f.condition(
        "the server had just reserved host memory (its own figures), or was loading its weights",
        figures.is_some() || loading.is_some(),
    );
    f.condition(
        "a kernel line names the OOM killer (journalctl -k, dmesg)",
        false,
    );
    f.confidence = round2(if pinned { 0.55 } else { 0.4 });
    explain(&mut f, figures.map(|(_, cpu)| cpu), loading.is_some());
    Some(f)
}

/// Whether the server failed before `kill` (same input): an error line, a
/// failure the server parser names, or a catalog row that is a failure of
/// its own (not a start-up stage), such as SGLang's watchdog or a quoted
/// CUDA error, whose own finding tells the story.
fn failed_before(incident: &Incident, kill: Span) -> bool {
    let before = |s: Span| s.source == kill.source && s < kill;
    incident
        .facts
        .messages
        .iter()
        .any(|m| before(m.span) && crate::rules::unknown::ERRORISH.is_match(&m.text))
        || incident.facts.server_events.iter().any(|e| {
            before(e.span) && e.kind.is_failure()
        })
        // A catalog row that is a failure of its own (not a start-up
        // stage) before the kill: SGLang's watchdog or a quoted CUDA
        // error, whose own finding tells the story.
        || incident.known.iter().any(|k| {
            before(incident.facts.messages[k.message].span)
                && k.hit
                    .row
                    .is_some_and(|r| r.stage.is_none() && r.severity <= Severity::Error)
        })
}

/// The finding's words and advice: what killed the server, most likely,
/// and the command that settles it.
fn explain(f: &mut Finding, cpu_blocks: Option<u64>, loading: bool) {
    f.title = "the server was killed by SIGKILL, most likely by the host's OOM killer".to_owned();
    f.headline = match (cpu_blocks, loading) {
        (Some(cpu), _) => format!("The server was Killed (SIGKILL) right after pinning {cpu} CPU blocks of host memory: most likely the kernel's OOM killer; the kernel's lines are not in the inputs."),
        (None, true) => "The server was Killed (SIGKILL) while its model's weights were loading into host memory: most likely the kernel's OOM killer; the kernel's lines are not in the inputs.".to_owned(),
        (None, false) => "The server was Killed (SIGKILL) with no error before it: most likely the kernel's OOM killer; the kernel's lines are not in the inputs.".to_owned(),
    };
    f.explanation = "A SIGKILL with no traceback and no failure before it comes from outside the process; on a host running a model server it is most often the kernel's OOM killer, when the host's RAM ran out. Only the kernel's log can say so for sure.".to_owned();
    f.chain.push("the server was Killed".to_owned());
    f.chain
        .push("something outside sent it SIGKILL, with no error of its own".to_owned());
    f.chain.push(
        "most likely the kernel's OOM killer: the host ran out of RAM (not confirmed: no kernel line in the inputs)"
            .to_owned(),
    );
    f.actions.push(Action::advice(
        "Confirm who killed it: the kernel logs an OOM kill (`Out of memory: Killed process PID`) around the time; check the host's memory",
        Some("journalctl -k | grep -i -e oom -e 'killed process'; dmesg -T | grep -i oom; free -h"),
    ));
    f.actions.push(Action::advice(
        "If it was the OOM killer: give the server the host memory it needs (lower vLLM's --swap-space, fewer models or instances at once, a higher container memory limit, more RAM or swap)",
        None,
    ));
}
