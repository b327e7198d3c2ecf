//! `startup-stage-stalled`: a model server's start-up reached a stage
//! (NCCL initialised, weights loaded, KV cache sized, CUDA graphs being
//! captured) and then went silent: no later stage, no error, until a stop,
//! an interrupt, a timeout or the end of the log. The stages are the
//! `startup` catalog's rows (`catalogs/startup.toml`), for every stack, so
//! the rule needs no particular server, number of ranks or lines.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::catalogs::Stage;
use crate::correlate::Incident;
use crate::model::{Message, NcclDetail, ServerEventKind, Timestamp};
use crate::rules::{Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod advice;
mod members;
mod ranks;
mod sampled;
mod stalled;
use advice::{FIRST_COLLECTIVE, NETWORK, P2P, RPC, advice, cite_rpc_server, over_network};
use stalled::stalled;

pub static RULE: StartupStageStalled = StartupStageStalled;

pub struct StartupStageStalled;

/// A person or a supervisor gave up waiting: an interrupt, a stop, a kill
/// or a timeout after the last stage.
static GAVE_UP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        KeyboardInterrupt | \^C | Received\ (?:second\ )?interrupt | SIGINT
        | Stopping\ .*\.service | State\ 'stop-sigterm'\ timed\ out
        | start\ operation\ timed\ out | timed\ out\ waiting",
    )
    .expect("regex")
});

/// A wait this long between the last stage and whatever came next is a
/// hang whoever reads it, whatever the paste says.
const LONG_SILENCE_SECS: i64 = 300;

static META: RuleMeta = RuleMeta {
    id: "startup-stage-stalled",
    category: Category::ServerHang,
    severity: Severity::Error,
    summary: "a model server's or training job's start-up reached a stage (NCCL, weights, KV cache, CUDA graphs, the training loop) and went silent there, with no error",
    anchors: &[
        "KeyboardInterrupt",
        "^C",
        "Received second interrupt",
        "SIGINT",
        "stop-sigterm' timed out",
        "start operation timed out",
        "timed out waiting",
    ],
    doc: r#"
## What it means
The server's log shows how far its start-up got, through the milestones
every stack prints (`catalogs/startup.toml`: SGLang's `Load weight end`,
vLLM's `vLLM is using nccl==` and `# GPU blocks` (`# CUDA blocks` from 0.7), NCCL's `Init COMPLETE`
and its first collective (`AllReduce: opCount 0`), `Capturing CUDA graphs
… 0/3`, ollama's `starting llama server`, TGI's `Starting shard`,
llama.cpp's `load_tensors: … model buffer size` (weights being read, or sent to an
`RPC[host:port]` rpc-server), vLLM's per-shape `Capturing a cudagraph on (…)` DEBUG rows,
lmdeploy's `lmdeploy serve api_server` and TurboMind's `gemm_config.in`
warning, TensorRT-LLM's `Engine version … found`, `MPI size: N, rank: R`
and `Loaded engine size: N MiB` …; a training job's set-up: OpenNMT-py's
`Start training loop`, WeNet's `training on multiple gpus, this gpu N`,
Trainer's `***** Running training *****` block, Megatron's `> building
train, validation, and test datasets ...` and `[before the start of
training step]`, DeepSpeed's `DeepSpeed info: version=`), and then
nothing: no later milestone, no step, no error, no exit, until someone
interrupted it (`^C`, `KeyboardInterrupt`), systemd stopped it, a client
timed out, or the log ends. The finding quotes the line where the stage
began and names the ranks seen there. The start-up is stuck at
that stage. The stage lines are read by their text, whatever part of the
logger's prefix a poster kept (`(EngineCore pid=115) Starting to load
model …` with the level and time cut), and one line is enough: a paste
that ends on a stage the server completed (`Model loading took …`, the
ranks assigned, the KV cache sized: the next step is a long one) is read
as stalled there at a low confidence, since the paste may simply be cut
(never when it reaches ready or has captured its graphs, nor on the launch
line alone, nor when anything failed). NCCL's `Init COMPLETE`, whatever
the transport and however many ranks printed it, is such a stage when the
group spans nodes (`via NET/Socket`, `via NET/IB`, two hosts) or only part
of its ranks are shown; one node's whole group, or one rank's line alone,
says only that the group formed. A rank still connecting its rings after
the others completed is a group still forming. Several echoed `^C` with nothing
after them (no shutdown, no `KeyboardInterrupt`) are a process that
ignores SIGINT: blocked in native code, a collective or the driver, the
stronger evidence of a hang. A request's generation is such a stage
too, after the start-up (lollms' `warmup for generating up to N tokens`):
a server that began generating an answer and printed no token, no error
and no end of the generation after it (the web UI's own requests for
static files and status polls are not progress) waits on the model or on
the backend server it calls. So is a worker's count of its work standing
at 0 as the last line (a Celery task's `…, Classifying[…]: 0 / 1535`,
vLLM's `Processed prompts … 0/16`): the first step never finished. A count
part-way through its work (`8/16`) that ends the paste is read as a stall
only when someone gave up after it; alone, the paste may just be cut there.

nccl-tests' results table's header (`#       size         count      type
redop …  algbw   busbw …`, printed once its communicators exist) with no
row and no `# Avg bus bandwidth` after it is a first collective that never
returned; the finding names each rank's process and GPU from its `#  Rank
N … Pid P … device D [bus] MODEL` lines. vLLM's `init engine (profile,
create kv cache, warmup model) took N seconds` as the paste's last stage
is an engine that came up and whose user never went on (the API server's
listener, or the job embedding it: an RL trainer's next stage), read at
the low confidence of a paste that may be cut. TurboMind's DEBUG trace of
a model step (`turbomind::LlamaV2::Forward`, `UnifiedAttentionLayer::Forward`,
`dynamicDecode`) as the last lines of the paste, whether at the start-up's
warm-up or while serving, is a step that never finished.

A server's process sampled by macOS `sample` whose main thread, in every
sample, is inside the program's serve routine (`server.serve`) and waits
for a lock or condition (`__ulock_wait2`, `__psynch_cvwait`), while no
thread of it waits on a socket (`kevent`, `accept`, `select`, `poll`), is
stuck the same way before its listener opened: the finding cites the main
thread, the serve frame and the wait, and asks for a second sample. An
idle server (its main thread in `kevent`) or one whose other thread
accepts connections is not.

## Why it happens
By stage:
- **Forming the distributed group, or right after it** (NCCL initialised,
  then silence at the first collective, often during memory profiling):
  peer-to-peer traffic between the GPUs is blocked or broken (PCIe ACS, an
  IOMMU, a virtualised host, a broken P2P path between consumer cards), or
  a rank is missing.
- **At the first collective** (NCCL initialised, `opCount 0` posted, no
  later count): a rank that never joined it, missing or stuck on another
  node, or the path between the ranks blocked.
- **Loading the weights**: slow or stuck storage or download, or one rank
  waiting for another.
- **Capturing CUDA graphs**: a capture that never finishes (a kernel or
  collective that deadlocks under capture).
- **Sending the weights to a llama.cpp rpc-server** (an `RPC[host:port]`
  buffer, the server only accepting and closing connections): client and
  server built from different commits, or the network path between them.
- **Processing the first request** (a counter at 0): the first forward
  pass's collective.
- **A generation begun, nothing after it**: the backend the app calls
  (an Ollama or llama.cpp server, a remote API) stopped answering or never
  loaded the model; less often the first forward pass itself.
- **An engine up, nothing using it** (vLLM's `init engine … took`): the
  API server's start, or the job around the engine (its other actors not
  placed, the weight-sync group between trainer and engine not formed).
- **Inside a model step** (a trace of its forward pass the last lines):
  one tensor-parallel rank stalled and the others waiting in the step's
  all-reduce, or a kernel that never returns.
- **A training job set up, no step logged** (the loop started, the
  Trainer's bar at 0): the first step's collective, a rank missing or
  stuck (on another node), the network between the nodes; less often the
  data loading.

## How to confirm
`py-spy dump --pid PID` on a stuck rank shows where it waits; `NCCL_DEBUG=INFO`
shows the transport; `nvidia-smi topo -m` the GPU topology; nccl-tests'
`all_reduce_perf` the P2P path on its own.

## How to fix
Multi-GPU hangs at NCCL: try `NCCL_P2P_DISABLE=1` to confirm, then disable
PCIe ACS in the BIOS or boot with `iommu=pt` (or keep P2P off). A process
that ignores Ctrl-C: dump its stacks, `kill -9` it, and reboot the node if
it survives that (state `D`). CUDA graphs:
run with `--enforce-eager` (vLLM) or `--disable-cuda-graph` (SGLang) and
report the regression. Weights: check the disk or the download.

## Safety
Advice only.
"#,
};

/// One input's start-up: its stage lines in order.
struct Startup<'a> {
    lines: Vec<(&'a Message, Stage, Option<u64>)>,
    /// What each stage line's row matched (`Capture cuda graph begin.`),
    /// quoted by the finding as the log says it.
    quotes: BTreeMap<Span, String>,
    /// The rank a stage line names (`rank 11`, WeNet's `this gpu 7`), the
    /// size of its group when it says (`nranks 16`), and whether it is a
    /// rank on its node only (a local rank).
    ranks: BTreeMap<Span, (u32, Option<u32>, bool)>,
    /// The stage lines NCCL itself prints (`Init COMPLETE`, its rings).
    nccl: std::collections::BTreeSet<Span>,
    /// Progress bars at their first draw (`0/1000 [00:00<?, ?it/s]`).
    zero_bars: Vec<Span>,
    /// Stage lines of nccl-tests (its rank rows, its table's header): the
    /// start-up is a benchmark's, not a server's.
    benchmark: bool,
}

/// The rows of nccl-tests' own output (catalogs/startup.toml).
const NCCL_TESTS_ROWS: &str = "startup.nccl-tests-";

/// The row of a progress bar at its first draw (catalogs/startup.toml).
const ZERO_BAR: &str = "startup.progress-bar-at-zero";

/// The rows of NCCL's own lines (catalogs/startup.toml).
const NCCL_ROWS: &str = "startup.nccl-";

impl Rule for StartupStageStalled {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut by_input: BTreeMap<usize, Startup<'_>> = BTreeMap::new();
        for k in &incident.known {
            let message = &incident.facts.messages[k.message];
            if k.hit.row.is_some_and(|r| r.id == ZERO_BAR) {
                startup_of(&mut by_input, message.span)
                    .zero_bars
                    .push(message.span);
                continue;
            }
            let Some(stage) = k.hit.row.and_then(|r| r.stage) else {
                continue;
            };
            // A collective of a group of one waits for no other rank.
            if stage == Stage::FirstCollective
                && k.hit.get("nranks").is_some_and(|n| n.trim() == "1")
            {
                continue;
            }
            // A progress counter (`0/3`, `0/16`, `100%`) says how far the
            // stage got; a full one, that it is done.
            let number = |name: &str| k.hit.get(name).and_then(|d| d.parse::<u64>().ok());
            let done = number("done").or_else(|| number("pct").filter(|p| *p == 0));
            // A collective's operation count past the first (`opCount 1a`,
            // hex): that collective completed, the job runs.
            let later_op = k
                .hit
                .get("op")
                .and_then(|o| u64::from_str_radix(o.trim_start_matches("0x"), 16).ok())
                .is_some_and(|o| o > 0);
            let full = number("pct") == Some(100)
                || number("done").is_some_and(|d| Some(d) == number("total"))
                || later_op;
            let stage = if full { stage.completed() } else { stage };
            // A full counter is a finished stage, not one under way.
            let done = done.filter(|_| !full);
            let startup = startup_of(&mut by_input, message.span);
            startup.lines.push((message, stage, done));
            startup
                .quotes
                .entry(message.span)
                .or_insert_with(|| from_match(&message.text, &k.hit.matched));
            let local = number("rank").is_none();
            if let Some(rank) = number("rank").or_else(|| number("local_rank")) {
                let nranks = number("nranks").and_then(|n| u32::try_from(n).ok());
                if let Ok(rank) = u32::try_from(rank) {
                    startup.ranks.insert(message.span, (rank, nranks, local));
                }
            }
            if k.hit.row.is_some_and(|r| r.id.starts_with(NCCL_ROWS)) {
                startup.nccl.insert(message.span);
            }
            startup.benchmark |= k.hit.row.is_some_and(|r| r.id.starts_with(NCCL_TESTS_ROWS));
        }
        for startup in by_input.values() {
            if let Some(f) = stalled(incident, startup) {
                out.push(f);
            }
        }
        out.extend(sampled::sampled(incident));
    }
}

/// The line from where its row matched to its end (`Capture cuda graph
/// begin. This can take up to several minutes. avail mem=3.66 GB`): the
/// stage's words with what the line says after them, without the logger's
/// prefix. A bare count after a `: ` (`…, Classifying[0a08…]: 0 / 1535`)
/// is quoted with the words before it, which say what is counted, from
/// the end of the logger's bracketed head.
fn from_match(text: &str, matched: &str) -> String {
    let matched = matched.trim();
    match text.find(matched) {
        Some(at) if matched.starts_with(':') => {
            // After the logger's bracketed head (`[… WARNING/ForkPoolWorker-1] `).
            let from = text[..at].rfind("] ").map_or(0, |i| i + 2);
            text[from..].trim().to_owned()
        }
        Some(at) if !matched.is_empty() => text[at..].trim().to_owned(),
        _ => matched.to_owned(),
    }
}

/// Ready, and not a counter stuck at zero (nor the `counting` line, part
/// way): the start-up finished (and after a generation began, or a model
/// step's trace, that generation or step did).
fn finished(startup: &Startup<'_>, counting: Option<Span>) -> bool {
    let generating = startup
        .lines
        .iter()
        .filter(|(_, s, _)| matches!(s, Stage::Generating | Stage::Forward))
        .map(|(m, _, _)| m.span)
        .max();
    startup.lines.iter().any(|(m, s, done)| {
        *s == Stage::Ready
            && *done != Some(0)
            && generating.is_none_or(|g| m.span > g)
            && counting != Some(m.span)
    })
}

/// The start-up of the input `span` is in.
fn startup_of<'a, 'b>(
    by_input: &'b mut BTreeMap<usize, Startup<'a>>,
    span: Span,
) -> &'b mut Startup<'a> {
    by_input.entry(span.source.0).or_insert_with(|| Startup {
        lines: Vec::new(),
        quotes: BTreeMap::new(),
        ranks: BTreeMap::new(),
        nccl: Default::default(),
        zero_bars: Vec::new(),
        benchmark: false,
    })
}

/// A rank stuck inside an operation another rank finished.
struct Lagging<'a> {
    rank: u32,
    stage: Stage,
    line: &'a Message,
    ahead_rank: u32,
    ahead_stage: Stage,
    ahead: &'a Message,
}

/// The rank a start-up line names: SGLang's `Rank 1: load weight begin.`
/// (early releases) and `[… TP1] Load weight begin.`, vLLM's `(Worker_TP1
/// pid=…)`.
static RANK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bRank ([0-9]+):|\bTP([0-9]+)\]|_TP([0-9]+) pid=").expect("rank regex")
});

/// The rank furthest behind, when it stopped inside an operation (NCCL
/// forming, weights loading, graphs capturing) that another rank of the
/// same start-up finished or passed.
fn lagging_rank<'a>(incident: &Incident, startup: &Startup<'a>) -> Option<Lagging<'a>> {
    let mut furthest: BTreeMap<u32, (Stage, &'a Message)> = BTreeMap::new();
    for &(m, stage, _) in &startup.lines {
        let tagged = crate::rules::support::server::events_at(incident, m.span)
            .find_map(|e| e.rank.and_then(|r| r.tp));
        let Some(rank) = tagged.or_else(|| {
            RANK.captures(&m.text)
                .and_then(|c| c.iter().skip(1).flatten().next())
                .and_then(|r| r.as_str().parse::<u32>().ok())
        }) else {
            continue;
        };
        let entry = furthest.entry(rank).or_insert((stage, m));
        if stage >= entry.0 {
            *entry = (stage, m);
        }
    }
    if furthest.len() < 2 {
        return None;
    }
    let (&ahead_rank, &(ahead_stage, ahead)) = furthest.iter().max_by_key(|(_, (s, _))| *s)?;
    let (&rank, &(stage, line)) = furthest.iter().min_by_key(|(_, (s, _))| *s)?;
    let inside = matches!(
        stage,
        Stage::DistributedInit | Stage::WeightsLoading | Stage::GraphCapture
    );
    (inside && stage < ahead_stage).then_some(Lagging {
        rank,
        stage,
        line,
        ahead_rank,
        ahead_stage,
        ahead,
    })
}

/// The most ranks whose NCCL lines a finding cites.
const MAX_RANKS: usize = 8;

/// Each rank's NCCL lines in the input, when the advice is about the GPUs'
/// peer-to-peer path: the line where its communicator formed (`Init
/// COMPLETE`) and its first channel routed through host shared memory (`via
/// SHM`: no P2P path between the GPUs), so that the finding names every
/// rank's process and GPU, not only the one whose milestone came last.
fn cite_ranks(incident: &Incident, source: crate::source::SourceId, f: &mut Finding) {
    let mut ranks: BTreeMap<u32, (Option<Span>, Option<Span>)> = BTreeMap::new();
    for e in incident.facts.server_events.iter() {
        let ServerEventKind::Nccl(n) = &e.kind else {
            continue;
        };
        if e.span.source != source {
            continue;
        }
        if !ranks.contains_key(&n.pid) && ranks.len() >= MAX_RANKS {
            continue;
        }
        let entry = ranks.entry(n.pid).or_default();
        match n.detail {
            NcclDetail::CommInit { .. } => entry.0 = Some(e.span),
            NcclDetail::ShmChannel { .. } if entry.1.is_none() => entry.1 = Some(e.span),
            _ => {}
        }
    }
    let mut shm = false;
    for (pid, (init, channel)) in &ranks {
        if let Some(span) = init {
            f.evidence(
                *span,
                format!("rank process {pid}: its NCCL communicator formed (Init COMPLETE)"),
            );
        }
        if let Some(span) = channel {
            shm = true;
            f.evidence(
                *span,
                format!("rank process {pid}: NCCL routes its traffic to the other GPU through host shared memory (via SHM): no peer-to-peer path between the GPUs"),
            );
        }
    }
    if !ranks.is_empty() {
        f.condition(
            "NCCL routes the GPUs' traffic through host shared memory (via SHM), not peer to peer",
            shm,
        );
    }
}

/// An error, an exception, a death or a known failure in the input.
fn failed_in(incident: &Incident, source: crate::source::SourceId) -> bool {
    let here = |s: Span| s.source == source;
    let server = incident.facts.server_events.iter().any(|e| {
        here(e.span)
            && match &e.kind {
                // An interrupt is someone giving up, not a failure.
                ServerEventKind::Exception(x) => !is_interrupt(&x.name),
                // A death the shell saw and a rank's report of another's
                // failure end a start-up too.
                ServerEventKind::ShellJobSignaled { .. }
                | ServerEventKind::ShellForegroundSignaled { .. }
                | ServerEventKind::TorchDist(_) => true,
                kind => kind.is_failure(),
            }
    });
    let known = incident.known.iter().any(|k| {
        here(incident.facts.messages[k.message].span)
            && k.hit
                .row
                .and_then(|r| r.category)
                .is_some_and(|c| c != Category::ServerHang)
    });
    server || known
}

/// Whether the input printed anything later in time than `last`: then
/// the server was not silent, only quiet about its start-up (serving, or a
/// log that mixes runs). Only what reads the same with and without the
/// prefilter counts: the latest dated time of the input (a skimmed line's
/// time is kept only when it is the latest), not which line or writer it
/// was, and nothing for a log whose times have no year.
fn kept_printing(incident: &Incident, last: Span) -> bool {
    let Some(since) = incident.time_of(last).filter(|t| t.year_known) else {
        return false;
    };
    printed_since(incident, last, since)
}

/// Whether a line of `last`'s input after it is timed later than `since`.
fn printed_since(incident: &Incident, last: Span, since: Timestamp) -> bool {
    let start = Span {
        source: last.source,
        line: 0,
    };
    incident
        .times
        .range(start..)
        .take_while(|(s, _)| s.source == last.source)
        .any(|(_, t)| t.year_known && t.utc_seconds() > since.utc_seconds())
}

/// Whether the input printed on after its last stage line: a later time
/// than the line's own; or, for a worker's count at 0 with no time of its
/// own (a Celery task's `…: 0 / 1535`, read by its row alone), than the
/// time before it, since a later line (its next counts, the task's end,
/// which the row does not read) says the worker went on.
fn went_on(incident: &Incident, last: &Message, stage: Stage, done: Option<u64>) -> bool {
    if kept_printing(incident, last.span) {
        return true;
    }
    stage == Stage::Ready
        && done == Some(0)
        && incident.time_of(last.span).is_none()
        && time_before(incident, last.span)
            .filter(|t| t.year_known)
            .is_some_and(|t| printed_since(incident, last.span, t))
}

/// The time of the last timed line at or before `span` in its input: a
/// line read for its words alone (a catalog row's) may carry no time of
/// its own.
fn time_before(incident: &Incident, span: Span) -> Option<Timestamp> {
    let start = Span {
        source: span.source,
        line: 0,
    };
    incident
        .times
        .range(start..=span)
        .next_back()
        .map(|(_, t)| *t)
}

fn is_interrupt(name: &str) -> bool {
    name.ends_with("KeyboardInterrupt") || name.ends_with("CancelledError")
}

/// The interrupt exceptions' lines: a person pressed Ctrl-C.
fn interrupts(incident: &Incident) -> impl Iterator<Item = &Message> + '_ {
    incident
        .facts
        .server_events
        .iter()
        .filter(|e| matches!(&e.kind, ServerEventKind::Exception(x) if is_interrupt(&x.name)))
        .filter_map(|e| {
            incident
                .facts
                .messages
                .binary_search_by_key(&e.span, |m| m.span)
                .ok()
                .map(|i| &incident.facts.messages[i])
        })
}

/// More than one GPU or rank: the inputs show several GPUs, or a world
/// larger than one.
fn multi_gpu(incident: &Incident) -> bool {
    incident.gpus.len() > 1
        || incident.known.iter().any(|k| {
            k.hit
                .get("nranks")
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| n > 1)
        })
        || incident
            .facts
            .server_events
            .iter()
            .filter_map(|e| e.rank.as_ref())
            .map(|r| format!("{r:?}"))
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1
        || incident.facts.server_events.iter().any(
            |e| matches!(&e.kind, ServerEventKind::Args(a) if a.tp_size.is_some_and(|t| t > 1)),
        )
}

/// `25 min`, `2 h 5 min`, `40 s`.
fn duration(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod engine_tests;

#[cfg(test)]
mod generation_tests;

#[cfg(test)]
mod members_tests;

#[cfg(test)]
mod progress_tests;

#[cfg(test)]
mod stage_word_tests;

#[cfg(test)]
mod training_tests;

#[cfg(test)]
mod tests;
