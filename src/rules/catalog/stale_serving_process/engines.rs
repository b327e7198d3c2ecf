//! Serving engines under their own process titles, and the teardowns that
//! miss them. Serving stacks rename their engine processes
//! (`VLLM::EngineCore`, `sglang::scheduler_TP0`, `sgl_diffusion::scheduler_U0`)
//! or run them as binaries of their own (`ollama runner`,
//! `text-generation-server`, LM Studio's `.internal/utils/node`): a
//! teardown by the server's name (`pkill -9 sglang`, `pkill -f vllm`,
//! `killall python`, `ray stop`) does not reach them, and they keep their
//! GPUs after their server is gone (fixtures/real-incoming/batch-g/742).
//! [`ENGINES`] is the one table of those titles, with where each stack sets
//! it; the rule's orphan check (PPID 1) takes its worker titles from it.

use std::collections::{BTreeMap, BTreeSet};

use regex::Regex;

use super::META;
use crate::correlate::Incident;
use crate::rules::support::{confidence, mib};
use crate::rules::{Action, Finding, Severity};
use crate::source::Span;

/// What a process is to its stack.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Role {
    /// Runs the model and holds the GPU; its server started it.
    Engine,
    /// The server's front end (API server, launcher, app) that starts and
    /// ends the engines.
    FrontEnd,
    /// One process that is both (llama.cpp's server, Triton).
    Whole,
}

/// How a command line shows the name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Spelling {
    /// A process title set by `setproctitle` (a word of the command line
    /// starts with it), or the kernel's 15-byte `comm` of it
    /// (`VLLM::EngineCor`, `sgl_diffusion::`).
    Title,
    /// The program's own binary: the command's first word ends with it.
    Program,
    /// Anywhere in the command line (an argument, a path cut on the left
    /// by nvidia-smi: `...ache/lm-studio/.internal/utils/node`).
    Contains,
}

/// One process name of a serving stack, and where upstream sets it.
pub(crate) struct Engine {
    pub stack: &'static str,
    pub role: Role,
    spelling: Spelling,
    pub text: &'static str,
    /// Where upstream names the process (repository, path, function).
    #[allow(dead_code)]
    upstream: &'static str,
}

const fn row(
    stack: &'static str,
    role: Role,
    spelling: Spelling,
    text: &'static str,
    upstream: &'static str,
) -> Engine {
    Engine {
        stack,
        role,
        spelling,
        text,
        upstream,
    }
}

/// The process names of the serving stacks, engines before front ends of
/// the same stack (the first row that matches a command names it).
pub(super) const ENGINES: &[Engine] = &[
    row(
        "SGLang",
        Role::Engine,
        Spelling::Title,
        "sglang::scheduler",
        "sgl-project/sglang python/sglang/srt/managers/scheduler.py run_scheduler_process(): setproctitle(f\"sglang::scheduler{prefix}\") (`_TP0`, `_DP0_TP0`)",
    ),
    row(
        "SGLang",
        Role::Engine,
        Spelling::Title,
        "sglang::detokenizer",
        "sgl-project/sglang python/sglang/srt/managers/detokenizer_manager.py run_detokenizer_process(): setproctitle(\"sglang::detokenizer\")",
    ),
    row(
        "SGLang",
        Role::Engine,
        Spelling::Title,
        "sglang::data_parallel_controller",
        "sgl-project/sglang python/sglang/srt/managers/data_parallel_controller.py run_data_parallel_controller_process(): setproctitle(\"sglang::data_parallel_controller\")",
    ),
    row(
        "SGLang diffusion",
        Role::Engine,
        Spelling::Title,
        "sgl_diffusion::scheduler",
        "sgl-project/sglang python/sglang/multimodal_gen (GPUWorker.init_device_and_model(): setproctitle(f\"sgl_diffusion::scheduler_TP{local_rank}\")); `_U0` in radixark/miles_diffusion#165",
    ),
    row(
        "vLLM",
        Role::Engine,
        Spelling::Title,
        "VLLM::EngineCore",
        "vllm-project/vllm vllm/utils/system_utils.py set_process_title(): setproctitle(f\"{VLLM_PROCESS_NAME_PREFIX}::{name}\") (prefix `VLLM`); vllm/v1/engine/core.py names it EngineCore (EngineCore_DP<rank>)",
    ),
    row(
        "vLLM",
        Role::Engine,
        Spelling::Title,
        "VLLM::Worker",
        "vllm-project/vllm vllm/v1/executor/multiproc_executor.py: set_process_title(\"Worker\") with `_TP<r>`, `_PP<r>`, `_DP<r>` suffixes",
    ),
    row(
        "vLLM",
        Role::Engine,
        Spelling::Title,
        "VLLM::DPCoordinator",
        "vllm-project/vllm vllm/v1/engine/coordinator.py: set_process_title(\"DPCoordinator\")",
    ),
    row(
        "vLLM",
        Role::Engine,
        Spelling::Title,
        "ray::RayWorkerWrapper",
        "ray-project/ray: an actor's process is titled `ray::<class>`; vLLM's Ray executor's actor class is RayWorkerWrapper (vllm/executor/ray_utils.py)",
    ),
    row(
        "vLLM",
        Role::FrontEnd,
        Spelling::Title,
        "VLLM::APIServer",
        "vllm-project/vllm vllm/v1/utils.py: set_process_title(\"APIServer\", str(index)) when it runs several API servers",
    ),
    row(
        "vLLM",
        Role::FrontEnd,
        Spelling::Contains,
        "vllm serve",
        "vllm-project/vllm vllm/entrypoints/cli/main.py: the `vllm` command's `serve` (the single API server keeps its command line)",
    ),
    row(
        "vLLM",
        Role::FrontEnd,
        Spelling::Contains,
        "vllm.entrypoints",
        "vllm-project/vllm vllm/entrypoints/openai/api_server.py run as `python -m vllm.entrypoints.openai.api_server`",
    ),
    row(
        "SGLang",
        Role::FrontEnd,
        Spelling::Contains,
        "sglang.launch_server",
        "sgl-project/sglang python/sglang/launch_server.py, run as `python -m sglang.launch_server`",
    ),
    row(
        "SGLang",
        Role::FrontEnd,
        Spelling::Contains,
        "sglang serve",
        "sgl-project/sglang python/sglang/cli: the `sglang serve` command",
    ),
    row(
        "SGLang diffusion",
        Role::FrontEnd,
        Spelling::Contains,
        "sglang.multimodal_gen",
        "sgl-project/sglang python/sglang/multimodal_gen/runtime/entrypoints/cli/main.py `serve`",
    ),
    row(
        "Ollama",
        Role::Engine,
        Spelling::Contains,
        "ollama runner",
        "ollama/ollama llm/server.go: the server execs its own binary with `runner --model <blob> … --port N` (0.4 and later)",
    ),
    row(
        "Ollama",
        Role::Engine,
        Spelling::Program,
        "ollama_llama_server",
        "ollama/ollama llm/server.go before 0.4: the runner binary `ollama_llama_server` unpacked under runners/",
    ),
    row(
        "Ollama",
        Role::FrontEnd,
        Spelling::Contains,
        "ollama serve",
        "ollama/ollama cmd/cmd.go: `ollama serve`",
    ),
    row(
        "Ollama",
        Role::FrontEnd,
        Spelling::Program,
        "ollama",
        "ollama/ollama: the `ollama` binary, as `lsof`, `ss` and nvidia-smi name its server",
    ),
    row(
        "LM Studio",
        Role::Engine,
        Spelling::Contains,
        "lm-studio/.internal/utils/node",
        "LM Studio runs its model engine in its bundled node (`~/.cache/lm-studio/.internal/utils/node`): lmstudio-ai/lmstudio-bug-tracker#588's nvidia-smi rows",
    ),
    row(
        "LM Studio",
        Role::Engine,
        Spelling::Contains,
        "lm-studio --type=",
        "LM Studio's Electron helper processes (`lm-studio --type=broker`): lmstudio-ai/lmstudio-bug-tracker#588",
    ),
    row(
        "LM Studio",
        Role::FrontEnd,
        Spelling::Program,
        "lm-studio",
        "the LM Studio app's main process (its AppImage's `lm-studio`, no `--type=`)",
    ),
    row(
        "TGI",
        Role::Engine,
        Spelling::Program,
        "text-generation-server",
        "huggingface/text-generation-inference launcher/src/main.rs shard_manager(): Command::new(\"text-generation-server\") with `serve <model>`",
    ),
    row(
        "TGI",
        Role::FrontEnd,
        Spelling::Program,
        "text-generation-launcher",
        "huggingface/text-generation-inference launcher/src/main.rs (the binary that starts the shards and the router)",
    ),
    row(
        "TGI",
        Role::FrontEnd,
        Spelling::Program,
        "text-generation-router",
        "huggingface/text-generation-inference router/src/main.rs",
    ),
    row(
        "llama.cpp",
        Role::Whole,
        Spelling::Program,
        "llama-server",
        "ggml-org/llama.cpp tools/server (the `llama-server` binary)",
    ),
    row(
        "LocalAI",
        Role::Whole,
        Spelling::Program,
        "local-ai",
        "mudler/LocalAI: the `local-ai` binary (`local-ai run`), as `ss -ltnp` names it (fixtures/real/678)",
    ),
    row(
        "Triton",
        Role::Whole,
        Spelling::Program,
        "tritonserver",
        "triton-inference-server/server src/main.cc (the `tritonserver` binary)",
    ),
];

/// The port each server listens on when not told otherwise: a failed bind
/// on it is most likely another start of that server.
const DEFAULT_PORTS: &[(&str, u16, &str)] = &[
    (
        "Ollama",
        11434,
        "ollama/ollama envconfig/config.go Host(): OLLAMA_HOST defaults to 127.0.0.1:11434",
    ),
    (
        "SGLang",
        30000,
        "sgl-project/sglang python/sglang/srt/server_args.py: port: int = 30000",
    ),
    (
        "vLLM",
        8000,
        "vllm-project/vllm vllm/entrypoints/openai/cli_args.py: --port, default 8000",
    ),
    (
        "Triton",
        8000,
        "triton-inference-server/server: --http-port, default 8000",
    ),
    (
        "llama.cpp",
        8080,
        "ggml-org/llama.cpp common/arg.cpp: --port, default 8080",
    ),
    ("LocalAI", 8080, "mudler/LocalAI: --address, default :8080"),
    (
        "LM Studio",
        1234,
        "LM Studio's local server: port 1234 by default",
    ),
    (
        "TGI",
        3000,
        "huggingface/text-generation-inference launcher/src/main.rs: --port, default 3000",
    ),
];

/// Whether `port` is `stack`'s default port.
pub(crate) fn default_port_of(stack: &str, port: u16) -> bool {
    DEFAULT_PORTS
        .iter()
        .any(|(s, p, _)| *s == stack && *p == port)
}

/// The kernel keeps 15 bytes of a process's name (`TASK_COMM_LEN` 16).
const COMM_LEN: usize = 15;

/// The word of `cmd` that bears `e`'s name, and the row, for the first row
/// that matches.
pub(crate) fn classify(cmd: &str) -> Option<(&'static Engine, &str)> {
    ENGINES.iter().find_map(|e| spelled(e, cmd).map(|w| (e, w)))
}

fn spelled<'c>(e: &Engine, cmd: &'c str) -> Option<&'c str> {
    match e.spelling {
        // The whole title where the line has it (`ps -o comm,args` prints
        // both), else its 15-byte name.
        Spelling::Title => cmd
            .split_whitespace()
            .find(|w| w.starts_with(e.text))
            .or_else(|| {
                cmd.split_whitespace()
                    .find(|w| w.len() == COMM_LEN && e.text.starts_with(*w))
            }),
        Spelling::Program => {
            let first = cmd.split_whitespace().next()?;
            (first == e.text || first.ends_with(&format!("/{}", e.text))).then_some(first)
        }
        Spelling::Contains => cmd.contains(e.text).then_some(cmd),
    }
}

/// The worker titles (`setproctitle`) of engines: a command that starts
/// with one is a worker whose parent is its server.
pub(super) fn worker_title(cmd: &str) -> Option<&'static str> {
    ENGINES
        .iter()
        .filter(|e| e.role == Role::Engine && e.spelling == Spelling::Title)
        .find(|e| cmd.starts_with(e.text))
        .map(|e| e.text)
}

/// Whether `family` is one of the engines' titles.
pub(super) fn is_worker_title(family: &str) -> bool {
    ENGINES
        .iter()
        .any(|e| e.role == Role::Engine && e.spelling == Spelling::Title && e.text == family)
}

/// Whether `cmd` runs a server's front end or a whole server (a
/// container's PID 1 that its engines have as parent).
pub(super) fn is_server(cmd: &str) -> bool {
    classify(cmd).is_some_and(|(e, _)| e.role != Role::Engine)
}

/// A teardown command of the paste (a prompt line, a script's line).
struct Teardown {
    span: Span,
    /// The command as typed, without prompt and comment.
    text: String,
    how: Kill,
}

enum Kill {
    /// `pkill [-f] PATTERN`: an extended regex against the name (or with
    /// `-f` the whole command line).
    Pkill { full: bool, pattern: String },
    /// `killall [-r] NAME`: the name exactly (or with `-r` a regex).
    Killall { regex: bool, name: String },
    /// `ray stop`: ends Ray's own processes (raylet, GCS, `ray::` actors).
    RayStop,
}

/// `pkill`'s and `killall`'s options that take a value.
const VALUE_OPTIONS: &[&str] = &[
    "-u",
    "-U",
    "-g",
    "-G",
    "-P",
    "-s",
    "-t",
    "-F",
    "--signal",
    "--ns",
    "--nslist",
    "-O",
    "--older",
    "--user",
    "--pidfile",
];

fn teardown(text: &str) -> Option<(String, Kill)> {
    // The command's words, up to a comment or the next command.
    let words: Vec<&str> = text
        .split_whitespace()
        .enumerate()
        .take_while(|(i, w)| {
            !matches!(*w, "|" | ";" | "&&" | "||") && (*i == 0 || !w.starts_with('#'))
        })
        .map(|(_, w)| w)
        .collect();
    let at = words
        .iter()
        .position(|w| matches!(w.rsplit('/').next(), Some("pkill" | "killall" | "ray")))?;
    // Only a prompt, `sudo` and its options stand before the command.
    let prompt = |w: &&str| {
        w.ends_with('$')
            || w.ends_with('#')
            || w.ends_with('>')
            || *w == "sudo"
            || w.starts_with('-')
    };
    if !words[..at].iter().all(prompt) {
        return None;
    }
    let program = words[at].rsplit('/').next()?;
    if program == "ray" {
        return (words.get(at + 1) == Some(&"stop"))
            .then(|| (words[at..].join(" "), Kill::RayStop));
    }
    let mut full = false;
    let mut regex = false;
    let mut args = words[at + 1..].iter().enumerate();
    while let Some((i, w)) = args.next() {
        if VALUE_OPTIONS.contains(w) {
            args.next();
        } else if *w == "-f" || *w == "--full" {
            full = true;
        } else if *w == "-r" || *w == "--regexp" {
            regex = true;
        } else if w.starts_with('-') {
            continue;
        } else {
            let name = quoted(&words[at + 1 + i..]);
            let how = if program == "pkill" {
                Kill::Pkill {
                    full,
                    pattern: name,
                }
            } else {
                Kill::Killall { regex, name }
            };
            return Some((words[at..].join(" "), how));
        }
    }
    None
}

/// The argument that starts `words`, its quotes removed and its quoted
/// words joined (`"vllm serve"`).
fn quoted(words: &[&str]) -> String {
    let first = words[0];
    let Some(q) = first.chars().next().filter(|c| *c == '"' || *c == '\'') else {
        return first.to_owned();
    };
    let mut out: Vec<&str> = Vec::new();
    for w in words {
        out.push(w);
        if (out.len() > 1 || w.len() > 1) && w.ends_with(q) {
            break;
        }
    }
    out.join(" ").trim_matches(q).to_owned()
}

fn teardowns(incident: &Incident) -> Vec<Teardown> {
    incident
        .facts
        .messages
        .iter()
        .filter(|m| {
            m.text.contains("pkill") || m.text.contains("killall") || m.text.contains("ray stop")
        })
        .filter_map(|m| {
            let (text, how) = teardown(&m.text)?;
            Some(Teardown {
                span: m.span,
                text,
                how,
            })
        })
        .collect()
}

/// Whether a teardown reaches a process whose name (`comm`) and command
/// line are these.
fn reaches(how: &Kill, comm: &str, cmdline: &str) -> bool {
    let matches = |pattern: &str, target: &str| match Regex::new(pattern) {
        Ok(re) => re.is_match(target),
        Err(_) => target.contains(pattern),
    };
    match how {
        Kill::Pkill {
            full: true,
            pattern,
        } => matches(pattern, cmdline),
        Kill::Pkill {
            full: false,
            pattern,
        } => matches(pattern, comm),
        Kill::Killall { regex: true, name } => matches(name, comm),
        Kill::Killall { regex: false, name } => {
            name == comm || (name.len() >= COMM_LEN && name.starts_with(comm))
        }
        Kill::RayStop => comm.starts_with("ray::") || comm == "raylet" || comm == "gcs_server",
    }
}

/// One engine process of the paste: its rows in `ps` and GPU tables.
struct Seen<'a> {
    engine: &'static Engine,
    /// The name a report shows: the title, or the stack's program.
    name: &'a str,
    comm: String,
    cmdline: &'a str,
    rows: Vec<(Span, String)>,
    gpus: BTreeSet<u32>,
    used: Option<u64>,
}

/// The name the kernel keeps: a title's first 15 bytes, else the
/// program's file name's.
fn comm_of(e: &Engine, word: &str, cmd: &str) -> String {
    let name = if e.spelling == Spelling::Title {
        word
    } else {
        let first = cmd.split_whitespace().next().unwrap_or(cmd);
        first.rsplit('/').next().unwrap_or(first)
    };
    name.chars().take(COMM_LEN).collect()
}

fn seen(incident: &Incident) -> BTreeMap<u32, Seen<'_>> {
    let mut out: BTreeMap<u32, Seen<'_>> = BTreeMap::new();
    for p in &incident.facts.ps {
        let Some((e, word)) = classify(&p.cmd) else {
            continue;
        };
        let s = out.entry(p.pid).or_insert_with(|| Seen {
            engine: e,
            name: if e.spelling == Spelling::Title {
                word
            } else {
                e.text
            },
            comm: comm_of(e, word, &p.cmd),
            cmdline: if e.spelling == Spelling::Title {
                word
            } else {
                &p.cmd
            },
            rows: Vec::new(),
            gpus: BTreeSet::new(),
            used: None,
        });
        s.rows.push((p.span, ps_note(p)));
    }
    for g in &incident.gpu_processes {
        let Some((e, word)) = classify(&g.name) else {
            continue;
        };
        let s = out.entry(g.pid).or_insert_with(|| Seen {
            engine: e,
            name: if e.spelling == Spelling::Title {
                word
            } else {
                e.text
            },
            comm: comm_of(e, word, &g.name),
            cmdline: if e.spelling == Spelling::Title {
                word
            } else {
                &g.name
            },
            rows: Vec::new(),
            gpus: BTreeSet::new(),
            used: None,
        });
        if let Some(gpu) = g.gpu {
            s.gpus.insert(gpu);
        }
        if let Some(m) = g.used_mib {
            s.used = Some(s.used.unwrap_or(0) + m);
        }
        if let Some(span) = g.spans.first() {
            s.rows.push((
                *span,
                format!(
                    "PID {} `{}` holds {}{}",
                    g.pid,
                    g.name,
                    g.used_mib
                        .map_or("GPU memory".to_owned(), |m| format!("{m}MiB")),
                    g.gpu.map_or(String::new(), |i| format!(" on GPU {i}"))
                ),
            ));
        }
    }
    // A listing's other rows of those PIDs (a command cut short, a start
    // time): the same process.
    for p in &incident.facts.ps {
        if let Some(s) = out.get_mut(&p.pid) {
            if !s.rows.iter().any(|(span, _)| *span == p.span) {
                s.rows.push((p.span, ps_note(p)));
            }
        }
    }
    out
}

fn ps_note(p: &crate::model::PsRecord) -> String {
    format!(
        "PID {} runs `{}`{}",
        p.pid,
        p.cmd.trim(),
        p.started
            .as_deref()
            .map_or(String::new(), |t| format!(", started {t}"))
    )
}

/// Findings for engine processes whose server is gone: a teardown in the
/// paste that their title escapes (an error), or, with no teardown, an
/// engine that holds GPU memory with no front end of its stack and no
/// server log beside it (a warning). `named` are PIDs the rule reported.
pub(super) fn engines(incident: &Incident, named: &BTreeSet<u32>) -> Vec<Finding> {
    let seen = seen(incident);
    let fronts: BTreeSet<&str> = seen
        .values()
        .filter(|s| s.engine.role != Role::Engine)
        .map(|s| s.engine.stack)
        .collect();
    let kills = teardowns(incident);
    let mut out = Vec::new();
    for (pid, s) in &seen {
        if named.contains(pid) || s.engine.role == Role::FrontEnd || fronts.contains(s.engine.stack)
        {
            continue;
        }
        let (missed, reached): (Vec<&Teardown>, Vec<&Teardown>) = kills
            .iter()
            .partition(|t| !reaches(&t.how, &s.comm, s.cmdline));
        if !missed.is_empty() {
            out.push(finding(*pid, s, &missed, &reached));
        } else if reached.is_empty()
            && s.engine.role == Role::Engine
            && s.used.is_some_and(|m| m > 0)
            && incident.facts.server_events.is_empty()
        {
            out.push(finding(*pid, s, &[], &[]));
        }
    }
    out
}

fn finding(pid: u32, s: &Seen<'_>, missed: &[&Teardown], reached: &[&Teardown]) -> Finding {
    let escaped = !missed.is_empty();
    let severity = if escaped {
        META.severity
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(META.id, META.category, severity);
    f.entities.pids.insert(pid);
    f.entities.gpus.extend(s.gpus.iter().copied());
    for (span, note) in &s.rows {
        f.evidence(*span, note.clone());
    }
    for t in missed {
        f.evidence(
            t.span,
            format!(
                "`{}` does not reach PID {pid}: its name is `{}`{}",
                t.text,
                s.comm,
                if s.cmdline == s.comm {
                    String::new()
                } else {
                    format!(" and its command line `{}`", s.cmdline)
                }
            ),
        );
    }
    for t in reached {
        f.evidence(t.span, format!("`{}` reaches PID {pid}", t.text));
    }
    let gpus: Vec<String> = s.gpus.iter().map(|g| g.to_string()).collect();
    let on = match gpus.len() {
        0 => String::new(),
        1 => format!(" on GPU {}", gpus[0]),
        _ => format!(" on GPUs {}", gpus.join(", ")),
    };
    let held = s
        .used
        .map_or(String::new(), |m| format!(", holding {}", mib(Some(m))));
    let what = format!("{}'s engine process `{}`", s.engine.stack, s.name);
    f.condition(
        format!("PID {pid} bears {what}, which its server starts and ends"),
        true,
    );
    f.condition(
        format!("no front end of {} is listed beside it", s.engine.stack),
        true,
    );
    f.condition(
        "a teardown in the inputs does not reach it (its name escapes the pattern)",
        escaped,
    );
    f.condition(
        "its parent is gone (missing: ps -o pid,ppid,lstart,args -p PID)",
        false,
    );
    if escaped {
        f.title = format!("PID {pid} ({what}) outlives the teardown{on}");
        f.headline = format!(
            "PID {pid} is {what}{on}{held}; `{}` does not reach it, because the engine runs under its own name, so it outlives its server and keeps its GPU memory (inferred from the names; its parent settles it).",
            missed[0].text
        );
        f.explanation = format!(
            "{} renames its engine processes (or runs them as programs of their own), so a teardown by the server's name (pkill, killall, ray stop) does not match them: they stay alive after their server, re-parented to PID 1, with their GPU memory, and the next start finds the GPUs taken.",
            s.engine.stack
        );
    } else {
        f.title = format!("PID {pid} ({what}) holds GPU memory with no server beside it{on}");
        f.headline = format!(
            "PID {pid} is {what}{on}{held}, and no front end of {} is listed and no server log is in the inputs: if no server should be running, it is a leftover engine of an earlier one (its parent settles it).",
            s.engine.stack
        );
        f.explanation = format!(
            "{} starts its engine processes from a front end (an API server, a launcher, an app) and ends them with it. An engine listed on the GPUs with none of its front end may be one that outlived it: a parent killed by a timeout, an app closed while its engine stayed.",
            s.engine.stack
        );
    }
    f.chain.push(format!("GPU memory stays in use{on}"));
    f.chain.push(format!("PID {pid} outlived its server"));
    f.actions.push(Action::advice(
        "check that it is a leftover: PPID 1 or its server gone, started before the current run",
        Some(&format!("ps -o pid,ppid,stat,lstart,args -p {pid}")),
    ));
    f.actions.push(Action::advice(
        "then end it by PID (SIGTERM, then SIGKILL) and check that its memory is freed",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    let by_name = if s.engine.spelling == Spelling::Title {
        format!("^{}", s.engine.text)
    } else {
        s.engine.text.to_owned()
    };
    f.actions.push(Action::advice(
        format!(
            "tear the server down by its process group, or by its engines' names too (`pkill -f '{by_name}'`)"
        ),
        None,
    ));
    f.confidence = confidence(&f, 0.35, 0.8);
    f
}

#[cfg(test)]
mod tests {
    use super::{Kill, Role, classify, reaches, teardown};
    use crate::rules::Severity;
    use crate::testing::findings_of;

    /// fixtures/real-incoming/batch-g/742 (radixark/miles_diffusion#165):
    /// the renamed diffusion scheduler and the teardown that missed it.
    const REAL_742: &str = "$ ps -eo pid,comm,args | grep sgl_diffusion\n3636386 sgl_diffusion:: sgl_diffusion::scheduler_U0\n$ pkill -9 sglang        # still alive\n$ pkill -9 sgl_diffusion # killed\n";

    #[test]
    fn a_renamed_engine_outlives_a_teardown_by_the_servers_name() {
        let f = findings_of(super::META.id, REAL_742);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].entities.pids.contains(&3636386));
        assert!(
            f[0].headline.contains("pkill -9 sglang"),
            "{}",
            f[0].headline
        );
        // The ps row alone, with no teardown and no GPU figure: no claim.
        let alone = "$ ps -eo pid,comm,args | grep sgl_diffusion\n3636386 sgl_diffusion:: sgl_diffusion::scheduler_U0\n";
        assert!(findings_of(super::META.id, alone).is_empty());
    }

    /// The next such paste: vLLM's engine core in nvidia-smi's process
    /// rows after `pkill -f "vllm serve"` (the rows' layout is nvidia-smi's,
    /// fixtures/real/631's title; assembled, not copied). The same rows
    /// beside the API server's row are a live server.
    #[test]
    fn vllms_engine_core_after_a_kill_of_its_api_server() {
        let rows =
            "|    1   N/A  N/A    396079      C   VLLM::EngineCore                  108862MiB |\n";
        let killed = format!("$ pkill -f \"vllm serve\"\n$ nvidia-smi\n{rows}");
        let f = findings_of(super::META.id, &killed);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].entities.gpus.contains(&1));
        let live = format!(
            "$ pkill -f \"vllm serve\"\n$ nvidia-smi\n{rows}\n$ ps -ef | grep vllm\nroot      396001       1  2 10:02 ?        00:01:10 /usr/bin/python3 /usr/local/bin/vllm serve Qwen/Qwen2.5-7B\n"
        );
        assert!(findings_of(super::META.id, &live).is_empty());
    }

    /// fixtures/real-incoming/batch-h/793 (lmstudio-ai/lmstudio-bug-tracker#588):
    /// LM Studio's node utility on seven GPUs after the app exited. The
    /// paste alone does not show the exit: a warning naming the PID and
    /// every GPU.
    #[test]
    fn lm_studios_engine_on_seven_gpus_is_a_warning() {
        let rows: String = (0..7)
            .map(|g| format!("|    {g}   N/A  N/A     18146      C   ...ache/lm-studio/.internal/utils/node        254MiB |\n"))
            .collect();
        let paste = format!(
            "{rows}\n/tmp/.mount_LM-StumEkll2/lm-studio --type=broker\nadmin_ia   18146  0.3  0.3 34746620 807052 ?     Sl   10:28   0:07 /home/admin_ia/.cache/lm-studio/.internal/utils/no\n"
        );
        let f = findings_of(super::META.id, &paste);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(f[0].entities.pids.contains(&18146));
        assert_eq!(f[0].entities.gpus.len(), 7);
    }

    #[test]
    fn names_and_teardowns() {
        assert_eq!(
            classify("VLLM::EngineCor").map(|(e, _)| e.text),
            Some("VLLM::EngineCore")
        );
        assert_eq!(
            classify("sglang::scheduler_TP0").map(|(e, _)| e.role),
            Some(Role::Engine)
        );
        assert_eq!(
            classify("/usr/bin/python3 -m vllm.entrypoints.openai.api_server").map(|(e, _)| e.role),
            Some(Role::FrontEnd)
        );
        assert_eq!(
            classify("/usr/local/bin/text-generation-server serve m").map(|(e, _)| e.stack),
            Some("TGI")
        );
        assert!(classify("/usr/bin/python3 train.py").is_none());
        let Some((text, Kill::Pkill { full, pattern })) =
            teardown("$ pkill -9 sglang        # still alive")
        else {
            panic!("a pkill");
        };
        assert!(!full && pattern == "sglang" && text == "pkill -9 sglang");
        assert!(!reaches(
            &teardown("pkill -9 sglang").unwrap().1,
            "sgl_diffusion::",
            "sgl_diffusion::scheduler_U0"
        ));
        assert!(reaches(
            &teardown("pkill -9 sgl_diffusion").unwrap().1,
            "sgl_diffusion::",
            "sgl_diffusion::scheduler_U0"
        ));
        assert!(!reaches(
            &teardown("pkill -f vllm").unwrap().1,
            "VLLM::EngineCor",
            "VLLM::EngineCore"
        ));
        assert!(reaches(
            &teardown("killall text-generation-server").unwrap().1,
            "text-generation",
            "text-generation-server serve"
        ));
        let Some((
            _,
            Kill::Pkill {
                full: true,
                pattern,
            },
        )) = teardown("user@host:~$ sudo pkill -f \"vllm serve\"")
        else {
            panic!("a pkill -f");
        };
        assert_eq!(pattern, "vllm serve");
        assert!(!reaches(
            &teardown("ray stop --force").unwrap().1,
            "VLLM::EngineCor",
            "VLLM::EngineCore"
        ));
        assert!(teardown("$ echo pkill").is_none());
    }
}
