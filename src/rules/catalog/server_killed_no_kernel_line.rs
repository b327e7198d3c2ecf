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
}

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

The same death reported by whoever started the process reads the same
way: torchrun's agent (`failed (exitcode: -9) local_rank: 1 (pid: 14447)
of binary: …`: a PyTorch worker, -9 is SIGKILL), vLLM's API server when
its engine core dies during start-up by SIGKILL or with no exit status
and no error of its own (`Engine core initialization failed. Failed core
proc(s): {}`, at a lower confidence), and a shell job whose command names
a model or checkpoint to load (`[1]  16261 killed  python3 -m
llama.convert_llama --ckpt_dir …`) even when it printed nothing.

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
                ServerEventKind::ShellForegroundSignaled { signal } if signal == "Killed" => {
                    Killed::Shell(None)
                }
                ServerEventKind::ShellJobSignaled {
                    pid,
                    signal,
                    command,
                } if signal == "Killed" => Killed::Shell(Some((*pid, command.as_str()))),
                ServerEventKind::VllmFailure(VllmFailure::EngineInitFailed { failed }) => {
                    // A process that exited with a code of its own said
                    // why (its traceback); only a kill, or no code at all.
                    if failed.iter().any(|(_, code)| *code != -9) {
                        continue;
                    }
                    Killed::EngineCore {
                        sigkill: !failed.is_empty(),
                    }
                }
                _ => continue,
            };
            if let Some(f) = finding(incident, e.span, killed) {
                out.push(f);
            }
        }
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
    let command = converter_command(incident, kill, server_line, killed);
    let named = names_a_model_workload(killed) || command.is_some();
    if server_line.is_none() && loading.is_none() && !named {
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

    let converter = command.is_some() || killed_converter(incident, server_line, killed);
    let mut f = Finding::new(META.id, META.category, META.severity);
    cite_command(&mut f, command);
    f.evidence(kill, kill_note(killed, loading.is_some(), converter));
    match killed {
        Killed::Shell(Some((pid, _))) => {
            f.entities.pids.insert(pid);
        }
        Killed::TorchWorker { pid, .. } => {
            f.entities.pids.insert(pid);
            cite_stopped_workers(incident, kill, &mut f);
        }
        _ => {}
    }
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
    let signalled = !matches!(killed, Killed::EngineCore { sigkill: false });
    f.condition(
        "the process was killed by SIGKILL (the shell's `Killed`, exit code -9)",
        signalled,
    );
    f.condition("no error, exception or failure before the kill", true);
    let pinned = f.condition(
        "the server had just reserved host memory (its own figures), or was loading its weights",
        figures.is_some() || loading.is_some(),
    );
    f.condition(
        "a kernel line names the OOM killer (journalctl -k, dmesg)",
        false,
    );
    f.confidence = round2(match (pinned, signalled) {
        (true, _) => 0.55,
        (false, true) => 0.4,
        (false, false) => 0.3,
    });
    explain(
        &mut f,
        figures.map(|(_, cpu)| cpu),
        loading.is_some(),
        killed,
    );
    if converter {
        explain_converter(&mut f);
    }
    Some(f)
}

/// Whether the report of the kill itself says that what was killed runs
/// a model: a PyTorch worker torchrun started, vLLM's engine core, a job
/// whose command names a model or checkpoint to load.
fn names_a_model_workload(killed: Killed<'_>) -> bool {
    match killed {
        Killed::Shell(Some((_, command))) => MODEL_ARGS.is_match(command),
        Killed::Shell(None) => false,
        Killed::TorchWorker { .. } | Killed::EngineCore { .. } => true,
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
        (Killed::TorchWorker { pid, rank }, _) => format!("torchrun's worker of local rank {rank} (PID {pid}) ended with exit code -9: SIGKILL from outside, with no traceback of its own"),
        (Killed::EngineCore { sigkill: true }, _) => "vLLM's engine core died by SIGKILL (-9) during start-up, with no error of its own".to_owned(),
        (Killed::EngineCore { sigkill: false }, _) => "vLLM's engine core died during start-up with no error of its own and no exit status (`Failed core proc(s): {}`): what a kill from outside looks like".to_owned(),
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

/// A checkpoint converter's words: it holds whole checkpoints in host
/// memory while it writes them out, so the advice is memory for it, not a
/// server's settings.
fn explain_converter(f: &mut Finding) {
    f.title =
        "the checkpoint converter was killed by SIGKILL, most likely by the host's OOM killer"
            .to_owned();
    f.headline = "The checkpoint converter was Killed (SIGKILL) while it read the model's weights, with no error before it: most likely the kernel's OOM killer; the kernel's lines are not in the inputs.".to_owned();
    if let Some(first) = f.chain.first_mut() {
        *first = "the checkpoint converter was Killed".to_owned();
    }
    f.actions
        .retain(|a| !a.describe().starts_with("If it was the OOM killer"));
    f.actions.push(Action::advice(
        "If it was the OOM killer: converters hold whole checkpoints (or parts of them) in host memory; add swap, run it on a host with more RAM, or use a converter or mode that streams tensors",
        Some("free -h; swapon --show"),
    ));
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
mod tests {
    fn killed(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// torchrun's agent reporting its worker killed by SIGKILL, with no
    /// error of the worker's own: self-rag's two runs of one PID
    /// (fixtures/real/764, AkariAsai/self-rag#83) give one
    /// finding; ColossalAI's form with the other workers stopped before it
    /// (hpcaitech/ColossalAI#3677) reads the same. A worker that exited 1
    /// after its own traceback is its own failure.
    #[test]
    fn a_torchrun_worker_killed_by_sigkill_is_the_host_oom_reading() {
        let self_rag = "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 1 (pid: 14447) of binary:\n\
                        torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 0 (pid: 14447) of binary:\n";
        let f = killed(self_rag);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
            [14447]
        );
        assert!(f[0].title.contains("14447"), "{}", f[0].title);
        let colossal = "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 1167 closing signal SIGTERM\n\
                        ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 (pid: 1168) of binary: /opt/conda/bin/python\n";
        assert_eq!(killed(colossal).len(), 1);
        let own = "RuntimeError: CUDA error: an illegal memory access was encountered\n\
                   E0909 07:11:16.569000 140533383049856 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) local_rank: 0 (pid: 9292) of binary: /opt/conda/envs/sglang/bin/python\n";
        assert!(killed(own).is_empty());
    }

    /// zsh's report of a job killed, whose command names a checkpoint to
    /// load, with nothing printed before it (batch-g/762,
    /// henrywoo/pyllama#62); the same job line for a command that names no
    /// model says nothing of what was killed.
    #[test]
    fn a_shell_job_killed_whose_command_loads_a_model_is_the_host_oom_reading() {
        let convert = "python3 -m llama.convert_llama --ckpt_dir $CKPT_DIR --tokenizer_path $TOKENIZER_PATH --model_size 65B --output_dir ./converted_meta_hf_65 --to hf --max_batch_size 4\n\n\
                       [1]    16261 killed     python3 -m llama.convert_llama --ckpt_dir $CKPT_DIR --tokenizer_path   65B\n";
        let f = killed(convert);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
            [16261]
        );
        // The same grammar with a weights file for an argument (a variant,
        // assembled from zsh's job line), and with no model at all.
        assert_eq!(
            killed("[2]  + 4242 killed     python3 chat.py ./models/llama-2-13b.Q8_0.gguf\n").len(),
            1
        );
        assert!(killed("[1]    16261 killed     python3 -m http.server 8000\n").is_empty());
    }

    /// A checkpoint converter's progress (catalog row
    /// `startup.checkpoint-converter-reading`) then the shell's bare
    /// `Killed`: llama.cpp's `convert-pth-to-ggml.py` (ggml-org/llama.cpp#138,
    /// batch-h/780), lit-llama's shard lines (Lightning-AI/lit-llama#244,
    /// batch-h/778) and `convert-hf-to-gguf.py`'s tensor lines
    /// (ggml-org/llama.cpp#5156, batch-h/779) read as the host-OOM kill; the
    /// same grammar for another part or tensor (a variant: part 1 of a 13B,
    /// an attention tensor) too; a script's own `Processing …` line is not a
    /// converter's.
    #[test]
    fn a_converter_killed_while_reading_weights_is_the_host_oom_reading() {
        for paste in [
            "python3 convert-pth-to-ggml.py models/7B/ 1\nn_parts =  1\nProcessing part  0\nKilled\n",
            "Initializing lit-llama\nProcessing pytorch_model-00001-of-00002.bin\nKilled\n",
            "blk.35.ffn_norm.weight, n_dims = 1, torch.bfloat16 --> float32\nKilled\n",
            "Processing part  1\nKilled\n",
            "Processing /data/hf/13B/pytorch_model-00003-of-00003.bin\nKilled\n",
            "blk.0.attn_q.weight, n_dims = 2, torch.float16 --> float16\nKilled\n",
        ] {
            let f = killed(paste);
            assert_eq!(f.len(), 1, "{paste}: {f:?}");
            assert!(f[0].title.contains("converter"), "{}", f[0].title);
            assert!(
                !f[0]
                    .actions
                    .iter()
                    .any(|a| a.describe().contains("swap-space")),
                "a converter is not told a server's settings: {:?}",
                f[0].actions
            );
        }
        assert!(killed("Processing request 42 of 100\nKilled\n").is_empty());
    }

    /// A converter started by its command line (catalog row
    /// `startup.checkpoint-converter-command`) that printed nothing but a
    /// progress bar before the shell's bare `Killed`: lit-llama's
    /// `convert_checkpoint.py` (Lightning-AI/lit-llama#110, batch-h/777);
    /// the same grammar for another converter behind a prompt (a variant:
    /// llama.cpp's `convert_hf_to_gguf.py`). A command that converts
    /// nothing, or a converter whose run ended in an error, is not it.
    #[test]
    fn a_converter_started_by_its_command_line_and_killed_is_the_host_oom_reading() {
        let lit = "python scripts/convert_checkpoint.py     --output_dir checkpoints/lit-llama     --ckpt_dir dalai/llama/models     --tokenizer_path dalai/llama/models/tokenizer.model     --model_size 13B\n \
                   50%|\u{2588}\u{2588}\u{2588}\u{2588}          | 1/2 [00:32<00:32, 32.09s/it]\n\nKilled\n";
        let variant = "(venv) user@box:~/llama.cpp$ python3 convert_hf_to_gguf.py ../Mixtral-8x7B --outtype f16\nKilled\n";
        for paste in [lit, variant] {
            let f = killed(paste);
            assert_eq!(f.len(), 1, "{paste}: {f:?}");
            assert!(f[0].title.contains("converter"), "{}", f[0].title);
            assert_eq!(f[0].evidence[0].span.line, 1, "{:?}", f[0].evidence);
        }
        assert!(killed("python3 train.py --epochs 3\nKilled\n").is_empty());
        assert!(
            killed("python3 convert_hf_to_gguf.py ../m\nFileNotFoundError: [Errno 2] No such file or directory: '../m/config.json'\nKilled\n")
                .is_empty()
        );
    }

    /// vLLM's API server when its engine core died during start-up with no
    /// error of its own: no exit status at all (vllm-project/vllm#45626,
    /// fixtures/real/652) at the lowest confidence, SIGKILL (`-9`, in the
    /// `{name: exitcode}` dict upstream prints; assembled) above it; an
    /// exit status of its own (vllm-project/vllm#21882) or an error
    /// before it is the engine's own failure.
    #[test]
    fn an_engine_core_gone_without_an_error_is_the_host_oom_reading_at_low_confidence() {
        let empty = killed("Engine core initialization failed. Failed core proc(s): {}\n");
        assert_eq!(empty.len(), 1, "{empty:?}");
        assert!(empty[0].confidence <= 0.3, "{}", empty[0].confidence);
        let sigkill = killed(
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': -9}\n",
        );
        assert_eq!(sigkill.len(), 1, "{sigkill:?}");
        assert!(sigkill[0].confidence > empty[0].confidence);
        assert!(
            killed("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_0': 1}\n")
                .is_empty()
        );
        assert!(
            killed("ValueError: No available memory for the cache blocks.\nEngine core initialization failed. Failed core proc(s): {}\n")
                .is_empty()
        );
    }
}
