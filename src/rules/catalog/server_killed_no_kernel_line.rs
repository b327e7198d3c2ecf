//! `server-killed-no-kernel-line`: the shell reports a model server
//! `Killed` (SIGKILL), nothing failed before, and no kernel line says who
//! killed it: most likely the host's OOM killer, at a confidence that says
//! the kernel's own lines are missing, higher when the server's last
//! figures reserved host memory.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{Message, ServerEventKind, VllmFailure};
use crate::rules::support::round2;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod activity;
mod converter;
mod job;
mod launcher;
mod lone;
mod memory;
mod own_error;
mod person;
mod runtime;
mod siblings;
mod typed;
use activity::Activity;
use memory::Memory;

pub static RULE: ServerKilledNoKernelLine = ServerKilledNoKernelLine;

pub struct ServerKilledNoKernelLine;

/// vLLM's KV cache sizes: `# CPU blocks` is the swap space it pins in host
/// memory at start-up.
const KV_SIZED: &str = "startup.vllm-kv-cache-sized";

/// torchrun's agent naming the first worker that failed, with its exit
/// code (catalogs/stacks-torch.toml): `-9` is SIGKILL.
const TORCH_FAILED: &str = "stacks-torch.elastic-worker-failed";
/// Its stopping the other workers after the first failed.
const TORCH_CLOSING: &str = "stacks-torch.elastic-closing-workers";
/// A checkpoint converter reading a model's weights (its parts, shards or
/// tensors): what was killed is that converter, not a server.
const CONVERTER: &str = "startup.checkpoint-converter-reading";
/// A converter's command line (`python scripts/convert_checkpoint.py
/// --ckpt_dir …`): what the shell then reports killed is that converter,
/// even when it printed nothing of its own but a progress bar.
const CONVERTER_COMMAND: &str = "startup.checkpoint-converter-command";

/// A command line that names a model or a checkpoint to load: an option
/// for one (`--model`, `--model-path`, `--ckpt_dir`, `--checkpoint`,
/// `--model_name_or_path`, `--base_model`) or a weights file.
static MODEL_ARGS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)(?:^|\s)--[A-Za-z_-]*(?:model|ckpt|checkpoint)[A-Za-z_-]*(?:[=\s]|$)
        | \.(?:safetensors|gguf|ckpt|pth)\b",
    )
    .expect("model args regex")
});

/// What reported the SIGKILL, and what it says of the killed process.
#[derive(Clone, Copy)]
enum Killed<'a> {
    /// The shell's `Killed`: a job's PID and command, or the bare word.
    Shell(Option<(u32, &'a str)>),
    /// torchrun's agent: its worker, by PID and local rank, exitcode -9.
    TorchWorker { pid: u32, rank: &'a str },
    /// vLLM's API server: the engine core died during start-up, by SIGKILL
    /// (`{'EngineCore_DP0': -9}`) or without a code (`{}`: it printed no
    /// error and was gone before vLLM read its status).
    EngineCore { sigkill: bool },
    /// DeepSpeed's launcher: it stopped its workers after one died
    /// (`Killing subprocess 4459`), the worker's PID where it started one,
    /// and whether it reported the code -9 (a paste may end before it).
    Launcher { pid: Option<u32>, sigkill: bool },
}

pub static META: RuleMeta = RuleMeta {
    id: "server-killed-no-kernel-line",
    category: Category::HostOomKiller,
    severity: Severity::Error,
    summary: "the shell reports a model server Killed with no error before it and no kernel line: most likely the host's OOM killer",
    // `checkpoint shards`: the weights' progress bar a zsh job report
    // follows when its `[1]` was glued to the bar.
    anchors: &["Killed", "# CPU blocks", "checkpoint shards"],
    doc: r#"
## What it means
The shell that ran a model server reports it `Killed` (a line of its own,
or `line 22: 103525 Killed  python -m …`): SIGKILL from outside, with no
traceback and no error before it. The server had reached a stage of its
start-up or was serving. No kernel line is in the inputs, so who sent the
signal is not shown; on a host that runs one big model, by far the most
common sender is the kernel's OOM killer, because the host's RAM ran out.

The same death reported by whoever started the process reads the same
way: torchrun's agent (`failed (exitcode: -9) local_rank: 1 (pid: 14447)
of binary: …`: a PyTorch worker, -9 is SIGKILL), vLLM's API server when
its engine core dies during start-up by SIGKILL or with no exit status
and no error of its own (`Engine core initialization failed. Failed core
proc(s): {}`, at a lower confidence; not with its own CUDA OOM anywhere), DeepSpeed's launcher reporting its
worker's code -9 (`[…] exits with return code = -9`) or, where the paste
ends before the code, stopping its workers (`Killing subprocess 4459`)
with no interrupt and no error before it (a worker that died silently,
at a lower confidence unless its model was loading), and a shell job whose command names
a model or checkpoint to load (`[1]  16261 killed  python3 -m
llama.convert_llama --ckpt_dir …`) even when it printed nothing. docker
compose's `comfyui exited with code 137` after the kill is cited as the
same death, not a second one.

Other evidence of memory weighs the same kill: a cgroup manager announcing
an OOM kill in the same output (Slurm's `slurmstepd: error: Detected 1
oom-kill event(s) in StepId=191.batch cgroup`, srun's `task 0: Out Of
Memory`, systemd-oomd's `Killed /….scope due to memory pressure`) makes
it the OOM killer inside the job's memory limit, at a high confidence,
with the PID the shell names; the process's own warning of a large
allocation of host memory just before (TensorFlow's `Allocation of N
exceeds 10% of system memory.`) lets a bare `Killed` take the host-OOM
reading at the lowest confidence; zsh's job report right after the
weights' progress bar (its `[1]` glued to the bar) reads as a kill while
loading. A bare `Killed` right after any program's line that it loads a
model's weights or builds an engine from them, whatever the stack
(tensorrtx's `Loading weights: …`, fairseq2's `Using the cached
checkpoint of the model '…'`, TensorRT's builder's last memory figures),
reads as a kill while loading; so does one after a diffusion program
moved a model into host memory (FramePack's `Offloading … to preserve
memory: 8 GB` and `Unloaded … as complete.`, ControlNet's `Loaded
state_dict from […]`), every such line of the last few cited; one after a loop's bar at its
total (`30/30 [06:13<00:00, 12.46s/it]`) as a kill in the step after it, lower. A job
report alone in its input whose command is only a launcher's unexpanded
variables (`./webui.sh: line 241:  3179 Killed  "${python_cmd}"
"${LAUNCH_SCRIPT}" "$@"`) is as bare as `Killed`: the lowest reading,
with its PID. Several background jobs of one command reported
`Killed` in the same input (`reshard_mp_launch_no_slurm.sh: line 24:
423467 Killed  python3 -m metaseq.scripts.reshard_mp …` for three of
eight parallel parts), none of which reads as above, make one finding
naming every PID: copies of one program run side by side and killed
together with no traceback are the OOM killer's signature. A `kill`, `pkill` or `timeout` typed
before the kill makes it the person's, and nothing is said. A bare `Killed` (`$  Killed` pasted
with its prompt) after the command typed just before it that names a model to load (`$ ./gemma …
--compressed_weights 2b-it.sbs --model 2b-it`) is that load killed, its weights named.

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
raise the container's memory limit, add RAM or swap. Under Slurm, compare
the step's MaxRSS with its ReqMem (`sacct -j JOBID
--format=JobID,State,MaxRSS,ReqMem`) and ask for more (`--mem`).

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
        let mut made = Vec::new();
        for e in &incident.facts.server_events {
            let killed = match &e.kind {
                ServerEventKind::ShellForegroundSignaled { signal } if signal == "Killed" => {
                    Killed::Shell(None)
                }
                ServerEventKind::ShellJobSignaled {
                    pid,
                    signal,
                    command,
                } if signal == "Killed" => Killed::Shell(Some((*pid, command.as_str()))),
                ServerEventKind::VllmFailure(VllmFailure::EngineInitFailed { failed }) => {
                    // A code of its own (its traceback), or no code and
                    // its own error pasted anywhere: it said why.
                    let coded = failed.iter().any(|(_, code)| *code != -9);
                    if coded || failed.is_empty() && own_error::anywhere(incident, e.span) {
                        continue;
                    }
                    Killed::EngineCore {
                        sigkill: !failed.is_empty(),
                    }
                }
                _ => continue,
            };
            if let Some(f) = finding(incident, e.span, killed) {
                made.push(e.span);
                out.push(f);
            }
        }
        siblings::findings(incident, &made, out);
        launcher::findings(incident, out);
        // torchrun's worker killed by SIGKILL: each PID once (the agent
        // names it again when a restart fails the same way).
        let mut seen = BTreeSet::new();
        for (m, hit) in incident.known(TORCH_FAILED) {
            let (Some(-9), Some(pid)) = (
                hit.get("code").and_then(|c| c.parse::<i64>().ok()),
                hit.get("pid").and_then(|p| p.parse::<u32>().ok()),
            ) else {
                continue;
            };
            if !seen.insert(pid) {
                continue;
            }
            let rank = hit.get("rank").unwrap_or("?");
            if let Some(f) = finding(incident, m.span, Killed::TorchWorker { pid, rank }) {
                out.push(f);
            }
        }
    }
}

fn finding(incident: &Incident, kill: Span, killed: Killed<'_>) -> Option<Finding> {
    if person::typed_kill(incident, kill) {
        return None;
    }
    let before = |s: Span| s.source == kill.source && s < kill;
    let loading = loading_bar(incident, kill, killed);
    let server_line = last_server_line(incident, kill);
    let command = converter_command(incident, kill, server_line, killed);
    let typed = typed::model_command(incident, kill, server_line, killed, command);
    let named = names_a_model_workload(killed) || command.is_some() || typed.is_some();
    let memory = Memory::of(incident, kill);
    // What a shell's report says the process was doing: loading a model,
    // or working through a loop.
    let activity = matches!(killed, Killed::Shell(_))
        .then(|| Activity::before(incident, kill))
        .flatten()
        .filter(|_| loading.is_none() && command.is_none());
    let lone = lone::is_lone(incident, kill, killed);
    if server_line.is_none()
        && loading.is_none()
        && activity.is_none()
        && !named
        && !memory.any()
        && !lone
    {
        return None;
    }
    // Nothing failed before: a kill after an error is a harness or a
    // person cleaning up, and the error is the story; unless a cgroup's
    // manager says it was an OOM kill (its own line reads as an error).
    let failed = failed_before(incident, kill);
    if memory.announced.is_none() && failed {
        return None;
    }
    let figures: Option<(&Message, u64)> = incident
        .known(KV_SIZED)
        .filter(|(m, _)| before(m.span))
        .filter_map(|(m, h)| Some((m, h.get("cpu")?.parse::<u64>().ok()?)))
        .filter(|(_, cpu)| *cpu > 0)
        .last();
    let converter = command.is_some() || killed_converter(incident, server_line, killed);
    let mut f = Finding::new(META.id, META.category, META.severity);
    cite_command(&mut f, command);
    typed::cite(&mut f, typed);
    let pid = killed_pid(killed);
    let note = memory
        .kill_note(pid)
        .filter(|_| loading.is_none() && !converter && matches!(killed, Killed::Shell(_)));
    let note = note
        .or_else(|| activity.map(|_| Activity::kill_note(pid)))
        .unwrap_or_else(|| kill_note(killed, loading.is_some(), converter));
    f.evidence(kill, job::named(note, killed));
    memory.cite(&mut f);
    name_victim(incident, kill, killed, &mut f);
    cite_last_words(incident, &mut f, kill, figures, activity, server_line);
    runtime::cite(incident, kill, &mut f);
    let signalled = signalled(killed);
    f.condition(
        "the process was killed by SIGKILL (the shell's `Killed`, exit code -9)",
        signalled,
    );
    f.condition("no error, exception or failure before the kill", !failed);
    let pinned = f.condition(
        "the server had just reserved host memory (its own figures), or was loading its weights",
        figures.is_some()
            || loading.is_some()
            || activity.is_some_and(Activity::loading)
            || launcher::loading(incident, server_line, killed),
    );
    f.condition(
        "a kernel line names the OOM killer (journalctl -k, dmesg)",
        false,
    );
    f.confidence = round2(match (pinned, signalled) {
        (true, _) => 0.55,
        (false, true) if lone => 0.3,
        (false, true) if activity.is_some_and(Activity::finished) => 0.35,
        (false, true) if activity.is_some() => 0.45,
        (false, true) => 0.4,
        (false, false) => 0.3,
    });
    explain(
        &mut f,
        figures.map(|(_, cpu)| cpu),
        loading.is_some(),
        killed,
    );
    if let Some(a) = activity.filter(|_| figures.is_none() && !memory.any()) {
        a.explain(&mut f, pid);
    }
    typed::explain(&mut f, typed);
    if lone {
        lone::explain(&mut f, pid);
    } else if converter {
        converter::explain(&mut f);
    } else if let Some(c) = memory.explain(&mut f, pid) {
        f.confidence = round2(f.confidence.max(c));
    }
    Some(f)
}

/// The killed process's PID, where its report names it.
fn killed_pid(killed: Killed<'_>) -> Option<u32> {
    match killed {
        Killed::Shell(Some((pid, _)))
        | Killed::TorchWorker { pid, .. }
        | Killed::Launcher { pid: Some(pid), .. } => Some(pid),
        _ => None,
    }
}

/// Whether the report says SIGKILL: not vLLM's engine core gone without a
/// code, nor DeepSpeed's launcher stopping its workers before its code.
fn signalled(killed: Killed<'_>) -> bool {
    !matches!(
        killed,
        Killed::EngineCore { sigkill: false } | Killed::Launcher { sigkill: false, .. }
    )
}

/// The killed process's PID, and for torchrun's worker the workers it
/// stopped with it.
fn name_victim(incident: &Incident, kill: Span, killed: Killed<'_>, f: &mut Finding) {
    match killed {
        Killed::Shell(Some((pid, _))) => {
            f.entities.pids.insert(pid);
        }
        Killed::TorchWorker { pid, .. } => {
            f.entities.pids.insert(pid);
            cite_stopped_workers(incident, kill, f);
        }
        Killed::Launcher { .. } => launcher::cite(incident, kill, f),
        _ => {}
    }
}

/// What the process printed last before the kill: its memory figures,
/// what it was doing, the server's last line; each line once.
fn cite_last_words(
    incident: &Incident,
    f: &mut Finding,
    kill: Span,
    figures: Option<(&Message, u64)>,
    activity: Option<Activity>,
    server_line: Option<Span>,
) {
    if let Some((m, cpu)) = figures {
        f.evidence(
            m.span,
            format!("the server's last memory figures: {cpu} CPU blocks, swap space pinned in host memory just before the kill"),
        );
    }
    if let Some(a) = activity {
        a.cite(incident, f, kill);
    }
    if let Some(line) = server_line
        && figures.is_none_or(|(m, _)| m.span != line)
        && activity.is_none_or(|a| a.span() != line)
    {
        f.evidence(line, "the server's last line before the kill");
    }
}

/// The progress bar of a model's weights loading that the kill's report
/// is glued to (`Loading checkpoint shards:  38%|…| 3/8 […]Killed`), or,
/// for a job report, the bar on the line before it (zsh's `[1]` left
/// glued to the bar by its carriage returns).
fn loading_bar<'a>(incident: &'a Incident, kill: Span, killed: Killed<'_>) -> Option<&'a str> {
    let at = |s: Span| {
        incident
            .facts
            .messages
            .binary_search_by_key(&s, |m| m.span)
            .ok()
            .map(|i| incident.facts.messages[i].text.as_str())
    };
    let previous = Span {
        line: kill.line.saturating_sub(1),
        ..kill
    };
    let bar = |t: &&str| t.contains("Loading") && t.contains('%');
    at(kill)
        .filter(|t| t.trim_end() != "Killed")
        .filter(bar)
        .or_else(|| {
            matches!(killed, Killed::Shell(_))
                .then(|| at(previous))
                .flatten()
                .filter(bar)
        })
}

/// What was killed loaded a model: the last line of a serving framework
/// or start-up milestone before the kill, in the same input.
fn last_server_line(incident: &Incident, kill: Span) -> Option<Span> {
    let before = |s: Span| s.source == kill.source && s < kill;
    incident
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
        .max()
}

/// Whether the report of the kill itself says that what was killed runs
/// a model: a PyTorch worker torchrun started, vLLM's engine core, a job
/// whose command names a model or checkpoint to load.
fn names_a_model_workload(killed: Killed<'_>) -> bool {
    match killed {
        Killed::Shell(Some((_, command))) => MODEL_ARGS.is_match(command),
        Killed::Shell(None) => false,
        Killed::TorchWorker { .. } | Killed::EngineCore { .. } | Killed::Launcher { .. } => true,
    }
}

/// The workers torchrun stopped because of the one killed at `kill`
/// (`Sending process 1167 closing signal SIGTERM`, printed before its
/// report), each with its PID: the rest of the job went down with it.
fn cite_stopped_workers(incident: &Incident, kill: Span, f: &mut Finding) {
    let previous = incident
        .known(TORCH_FAILED)
        .map(|(m, _)| m.span)
        .filter(|s| s.source == kill.source && *s < kill)
        .max();
    for (m, hit) in incident.known(TORCH_CLOSING) {
        if m.span.source != kill.source || m.span >= kill || previous.is_some_and(|p| m.span <= p) {
            continue;
        }
        if let Some(other) = hit.get("pid").and_then(|p| p.parse::<u32>().ok()) {
            f.evidence(
                m.span,
                format!("torchrun then stopped another worker, PID {other}"),
            );
            f.entities.pids.insert(other);
        }
    }
}

/// The evidence note on the line that reports the kill.
/// Whether what the shell reports killed is a checkpoint converter: its
/// last stage line before the kill is a converter's reading.
fn killed_converter(incident: &Incident, server_line: Option<Span>, killed: Killed<'_>) -> bool {
    matches!(killed, Killed::Shell(None))
        && server_line.is_some_and(|line| is_converter_line(incident, line))
}

/// The converter's command line before a bare `Killed`, when it is the
/// last thing started before the kill (no server line after it).
fn converter_command(
    incident: &Incident,
    kill: Span,
    server_line: Option<Span>,
    killed: Killed<'_>,
) -> Option<Span> {
    if !matches!(killed, Killed::Shell(None)) {
        return None;
    }
    incident
        .known(CONVERTER_COMMAND)
        .map(|(m, _)| m.span)
        .filter(|s| s.source == kill.source && *s < kill)
        .max()
        .filter(|c| server_line.is_none_or(|l| l < *c || is_converter_line(incident, l)))
}

/// Cites the converter's command line.
fn cite_command(f: &mut Finding, command: Option<Span>) {
    if let Some(c) = command {
        f.evidence(c, "the command line that started the checkpoint converter");
    }
}

/// Whether the stage line at `line` is a converter's reading.
fn is_converter_line(incident: &Incident, line: Span) -> bool {
    incident.known(CONVERTER).any(|(m, _)| m.span == line)
}

fn kill_note(killed: Killed<'_>, loading: bool, converter: bool) -> String {
    if converter {
        return "the shell reports the converter Killed while it read the model's weights: SIGKILL from outside, with no traceback".to_owned();
    }
    match (killed, loading) {
        (Killed::Shell(_), true) => "the shell reports the server Killed while its model's weights were loading: SIGKILL from outside, with no traceback".to_owned(),
        (Killed::Shell(Some((pid, _))), false) => format!("the shell reports job {pid} Killed: SIGKILL from outside, with no traceback; its command names a model to load"),
        (Killed::Shell(None), false) => "the shell reports the server Killed: SIGKILL from outside, with no traceback".to_owned(),
        (Killed::TorchWorker { pid, rank }, _) => format!("torchrun's worker of local rank {rank} (PID {pid}) failed with `exitcode: -9`: SIGKILL from outside, with no traceback of its own"),
        (Killed::EngineCore { sigkill: true }, _) => "vLLM's engine core died by SIGKILL (-9) during start-up, with no error of its own".to_owned(),
        (Killed::EngineCore { sigkill: false }, _) => "vLLM's engine core died during start-up with no error of its own and no exit status (`Failed core proc(s): {}`): what a kill from outside looks like".to_owned(),
        (Killed::Launcher { .. }, _) => launcher::kill_note(killed),
    }
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
fn explain(f: &mut Finding, cpu_blocks: Option<u64>, loading: bool, killed: Killed<'_>) {
    f.title = "the server was killed by SIGKILL, most likely by the host's OOM killer".to_owned();
    f.headline = match (cpu_blocks, loading, killed) {
        (Some(cpu), _, _) => format!("The server was Killed (SIGKILL) right after pinning {cpu} CPU blocks of host memory: most likely the kernel's OOM killer; the kernel's lines are not in the inputs."),
        (None, true, _) => "The server was Killed (SIGKILL) while its model's weights were loading into host memory: most likely the kernel's OOM killer; the kernel's lines are not in the inputs.".to_owned(),
        (None, false, Killed::TorchWorker { pid, .. }) => {
            f.title = format!("torchrun's worker {pid} was killed by SIGKILL, most likely by the host's OOM killer");
            format!("torchrun's worker {pid} was killed by SIGKILL (exit code -9) with no error of its own: most likely the kernel's OOM killer; the kernel's lines are not in the inputs.")
        }
        (None, false, Killed::EngineCore { sigkill: false }) => {
            f.title = "vLLM's engine core died during start-up without an error: likely killed from outside, most often by the host's OOM killer".to_owned();
            "vLLM's engine core died during start-up and left no error and no exit status: what a kill from outside looks like, most often the kernel's OOM killer (host RAM exhausted while loading or compiling); only the kernel's log can confirm it.".to_owned()
        }
        (_, _, Killed::Launcher { pid, sigkill }) => launcher::explain(f, pid, sigkill),
        (None, false, Killed::Shell(Some((pid, _)))) => {
            f.title = format!("process {pid}, which loads a model, was killed by SIGKILL, most likely by the host's OOM killer");
            format!("Process {pid}, whose command names a model to load, was Killed (SIGKILL) with no error before it: most likely the kernel's OOM killer; the kernel's lines are not in the inputs.")
        }
        (None, false, _) => "The server was Killed (SIGKILL) with no error before it: most likely the kernel's OOM killer; the kernel's lines are not in the inputs.".to_owned(),
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

#[cfg(test)]
mod tests;
