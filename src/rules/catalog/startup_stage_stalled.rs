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
use crate::model::{Message, NcclDetail, ServerEventKind};
use crate::rules::{Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod stalled;
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
    summary: "a model server's start-up reached a stage (NCCL, weights, KV cache, CUDA graphs) and went silent there, with no error",
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
vLLM's `vLLM is using nccl==` and `# GPU blocks`, NCCL's `Init COMPLETE`
and its first collective (`AllReduce: opCount 0`), `Capturing CUDA graphs
… 0/3`, ollama's `starting llama server`, TGI's `Starting shard`,
lmdeploy's `lmdeploy serve api_server` and TurboMind's `gemm_config.in`
warning, TensorRT-LLM's `Engine version … found`, `MPI size: N, rank: R`
and `Loaded engine size: N MiB` …), and then nothing: no later milestone, no error, no
exit, until someone interrupted it (`^C`, `KeyboardInterrupt`), systemd
stopped it, a client timed out, or the log ends. The start-up is stuck at
that stage. The stage lines are read by their text, whatever part of the
logger's prefix a poster kept (`(EngineCore pid=115) Starting to load
model …` with the level and time cut), and one line is enough: a paste
that ends on a stage the server completed (`Model loading took …`, the
ranks assigned, the KV cache sized: the next step is a long one) is read
as stalled there at a low confidence, since the paste may simply be cut
(never when it reaches ready or has captured its graphs, nor on the launch
line alone, nor when anything failed). Several echoed `^C` with nothing
after them (no shutdown, no `KeyboardInterrupt`) are a process that
ignores SIGINT: blocked in native code, a collective or the driver, the
stronger evidence of a hang.

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
- **Processing the first request** (a counter at 0): the first forward
  pass's collective.

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
    /// The lines a library prints in any program (NCCL's `Init
    /// COMPLETE`), not a server's own milestone: what comes after them is
    /// not known to be a long step of a server's start-up.
    library: std::collections::BTreeSet<Span>,
}

/// The rows of a library's own lines (catalogs/startup.toml, NCCL).
const LIBRARY_ROWS: &str = "startup.nccl-";

impl Rule for StartupStageStalled {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut by_input: BTreeMap<usize, Startup<'_>> = BTreeMap::new();
        for k in &incident.known {
            let Some(stage) = k.hit.row.and_then(|r| r.stage) else {
                continue;
            };
            // A collective of a group of one waits for no other rank.
            if stage == Stage::FirstCollective
                && k.hit.get("nranks").is_some_and(|n| n.trim() == "1")
            {
                continue;
            }
            let message = &incident.facts.messages[k.message];
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
            let startup = by_input
                .entry(message.span.source.0)
                .or_insert_with(|| Startup {
                    lines: Vec::new(),
                    library: Default::default(),
                });
            startup.lines.push((message, stage, done));
            if k.hit.row.is_some_and(|r| r.id.starts_with(LIBRARY_ROWS)) {
                startup.library.insert(message.span);
            }
        }
        for startup in by_input.values() {
            if let Some(f) = stalled(incident, startup) {
                out.push(f);
            }
        }
    }
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

const P2P: (&str, &str, &str) = (
    "a multi-GPU start-up that goes silent while its NCCL group forms or at its first collective is most often peer-to-peer (P2P) traffic between the GPUs blocked or broken: PCIe ACS, an IOMMU, a virtualised host",
    "Test with NCCL_P2P_DISABLE=1; if that starts, disable PCIe ACS in the BIOS or boot with iommu=pt (or keep P2P off); check the topology with nvidia-smi topo -m and the P2P path with nccl-tests",
    "NCCL_DEBUG=INFO NCCL_P2P_DISABLE=1 <the server's command>; nvidia-smi topo -m; py-spy dump --pid PID",
);

const FIRST_COLLECTIVE: (&str, &str, &str) = (
    "a group that posted its first collective and went silent waits for a rank that never joined it: a rank missing or stuck (on another node, whose log is not here), or the traffic between the ranks blocked (peer to peer between the GPUs, or the network between the nodes: a firewall, the wrong interface)",
    "Check that every rank of every node reached the same collective (NCCL_DEBUG=INFO on all nodes); test the path with NCCL_P2P_DISABLE=1 on one node, NCCL_SOCKET_IFNAME and the firewall between nodes; set a collective timeout so that a hang becomes an error",
    "py-spy dump --pid PID; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL <the job's command>",
);

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

/// What usually stops a start-up at `stage`, what to do, and the command
/// that shows it.
fn advice(stage: Stage, multi_gpu: bool) -> (&'static str, &'static str, &'static str) {
    match stage {
        Stage::FirstCollective => FIRST_COLLECTIVE,
        Stage::DistributedInit | Stage::DistributedReady => P2P,
        Stage::WeightsLoaded | Stage::KvCache | Stage::Ready if multi_gpu => P2P,
        Stage::GraphCapture => (
            "CUDA graph capture that never finishes is a kernel or collective that deadlocks under capture",
            "Run without CUDA graphs to confirm (vLLM --enforce-eager, SGLang --disable-cuda-graph), then upgrade or report the regression",
            "py-spy dump --pid PID",
        ),
        Stage::Launched | Stage::WeightsLoading => (
            "a start-up stuck before or while loading the weights waits on storage, a download, or another rank",
            "Check the model's storage and download (disk I/O, network, the Hugging Face cache) and that every rank started",
            "py-spy dump --pid PID; iostat -x 5",
        ),
        _ => (
            "a start-up that goes silent after loading is waiting in its first forward pass or warm-up",
            "Look at where the process waits, and at the GPU's state",
            "py-spy dump --pid PID; nvidia-smi",
        ),
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
mod stage_word_tests;

#[cfg(test)]
mod tests {

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::analyze_paste(text).diagnosis.findings
    }

    #[test]
    fn a_rank_that_never_finished_what_another_finished_is_stalled() {
        // https://github.com/sgl-project/sglang/issues/227 (TP=2 on a 24 GB
        // and an 8 GB GPU): rank 0 loaded its weights, rank 1 never did.
        let text = "$ python -m sglang.launch_server --model-path ./my_model --port 8000 --tp 2\n\
                    Rank 0: load weight begin.\n\
                    Rank 1: load weight begin.\n\
                    quant_config: GPTQConfig(weight_bits=4, group_size=-1, desc_act=True)\n\
                    Rank 0: load weight end.\n";
        let f = findings(text);
        let stalled = f
            .iter()
            .find(|f| f.rule == super::META.id)
            .unwrap_or_else(|| panic!("{f:?}"));
        assert!(stalled.title.contains("rank 1"), "{}", stalled.title);
        // Both ranks done: no rank lags; the paste ends on the weights
        // loaded, which says only that it may be cut there.
        let done = format!("{text}Rank 1: load weight end.\n");
        let f = findings(&done);
        let cut = f
            .iter()
            .find(|f| f.rule == super::META.id)
            .unwrap_or_else(|| panic!("{f:?}"));
        assert!(!cut.title.contains("rank 1"), "{}", cut.title);
        assert!(cut.confidence <= 0.3, "{}", cut.confidence);
    }

    /// The finding cites the last line at the stage and counts the others;
    /// it names the writers of all (fixtures/real/739,
    /// vLLM 0.5's `(VllmWorkerProcess pid=N)` and the driver without a
    /// prefix), and V1's `(VllmWorker rank=4 pid=907)` (vllm-project/vllm#14452).
    #[test]
    fn the_finding_names_every_process_that_stopped_at_the_stage() {
        let text = "VllmWorkerProcess pid=1153488) INFO 09-03 02:15:41 multiproc_worker_utils.py:215] Worker ready; awaiting tasks\n\
                    (VllmWorkerProcess pid=1153488) INFO 09-03 02:15:42 utils.py:965] Found nccl from environment variable VLLM_NCCL_SO_PATH=/home/wyl/llm/qwen/nccl_2.21.5-1+cuda12.4_x86_64/lib/libnccl.so\n\
                    INFO 09-03 02:15:42 utils.py:965] Found nccl from environment variable VLLM_NCCL_SO_PATH=/home/wyl/llm/qwen/nccl_2.21.5-1+cuda12.4_x86_64/lib/libnccl.so\n\
                    (VllmWorkerProcess pid=1153488) INFO 09-03 02:15:42 pynccl.py:63] vLLM is using nccl==2.21.5\n\
                    INFO 09-03 02:15:42 pynccl.py:63] vLLM is using nccl==2.21.5\n";
        let pids_of = |text: &str| {
            let f = findings(text);
            let stalled = f
                .iter()
                .find(|f| f.rule == super::META.id)
                .unwrap_or_else(|| panic!("{f:?}"))
                .clone();
            stalled.entities.pids.iter().copied().collect::<Vec<_>>()
        };
        assert_eq!(pids_of(text), [1153488]);
        let v1 = "(VllmWorker rank=4 pid=907) INFO 03-15 17:24:17 [pynccl.py:69] vLLM is using nccl==2.25.1\n";
        assert_eq!(pids_of(v1), [907]);
    }

    fn stalled(text: &str) -> Option<crate::rules::Finding> {
        findings(text)
            .into_iter()
            .find(|f| f.rule == super::META.id)
    }

    /// A paste that ends on a completed stage before a long one, one line
    /// and no clock: stalled there at a low confidence (the paste may be
    /// cut). vLLM V1's line with its prefix abridged
    /// (fixtures/real/749, vllm-project/vllm#39682) and
    /// vLLM 0.6's (vllm-project/vllm#10517); not when anything follows the
    /// stage, nor when the server became ready.
    #[test]
    fn a_paste_that_ends_on_a_completed_stage_is_stalled_there_at_low_confidence() {
        for text in [
            "(EngineCore pid=...) INFO ... Model loading took 14.53 GiB memory and 172.4 seconds\n",
            "Loading model weights took 14.9888 GB\n",
        ] {
            let f = stalled(text).unwrap_or_else(|| panic!("{text}"));
            assert!(f.title.contains("the weights loaded"), "{}", f.title);
            assert!(f.confidence <= 0.3, "{}", f.confidence);
            assert!(f.headline.contains("may simply be cut"), "{}", f.headline);
            let ready = format!("{text}INFO:     Application startup complete.\n");
            assert!(stalled(&ready).is_none(), "{ready}");
            let more = format!("{text}some later line of the paste\n");
            assert!(stalled(&more).is_none(), "{more}");
        }
    }

    /// The ranks assigned, then nothing, in two runs of one paste (vLLM's
    /// EngineCore on ROCm, fixtures/real/692): both engines are named.
    #[test]
    fn a_paste_ending_after_the_ranks_are_assigned_names_each_engine() {
        let text = "(EngineCore pid=24644) INFO 04-14 13:41:01 [parallel_state.py:1400] world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://192.168.68.154:46985 backend=nccl\n\
                    (EngineCore pid=24644) INFO 04-14 13:41:01 [parallel_state.py:1712] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank N/A, EPLB rank N/A\n\
                    \n\
                    (EngineCore pid=54484) INFO 04-14 14:47:52 [distributed/parallel_state.py:1712] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank 0, EPLB rank N/A\n";
        let f = stalled(text).expect("stalled");
        assert!(f.title.contains("distributed group formed"), "{}", f.title);
        assert_eq!(
            f.entities.pids.iter().copied().collect::<Vec<_>>(),
            [24644, 54484]
        );
    }

    /// vLLM's stage lines read by their text whatever part of the prefix
    /// survived: `(EngineCore pid=115)` with the level and time cut
    /// (fixtures/real/748, vllm-project/vllm#20891), and
    /// the v0 line with its whole prefix (MU-GOT#17). Loading the weights is
    /// an operation under way: the finding does not wait for a clock.
    #[test]
    fn starting_to_load_the_model_then_silence_is_stalled_whatever_the_prefix() {
        let cut = "(EngineCore pid=115) Initializing a V1 LLM engine (v0.18.0) ...\n\
                   (EngineCore pid=115) world_size=1 rank=0 ... backend=nccl\n\
                   (EngineCore pid=115) Starting to load model unsloth/Qwen3-VL-32B-Instruct-bnb-4bit...\n";
        let f = stalled(cut).expect("stalled");
        assert!(f.title.contains("loading the weights"), "{}", f.title);
        assert_eq!(f.entities.pids.iter().copied().collect::<Vec<_>>(), [115]);
        let whole = "INFO 11-20 10:45:55 model_runner.py:680] Starting to load model /home/lhx/wch/GOT-OCR2.0/GOT_weights...\n";
        assert!(stalled(whole).is_some());
    }

    /// Ray's start line, then several echoed `^C` and nothing after them
    /// (vllm-project/vllm#3766): a process that ignores SIGINT, the stronger
    /// evidence. The same interrupts followed by Python's
    /// `KeyboardInterrupt` are someone stopping a process that obeyed.
    #[test]
    fn repeated_interrupts_with_nothing_after_them_are_a_process_ignoring_sigint() {
        let start = "CUDA_VISIBLE_DEVICES=5,7 python -m vllm.entrypoints.api_server --port 8007 --gpu-memory-utilization 0.9 --tensor-parallel-size 2 --model /mnt/huggingface/models/internlm2-chat-7b/ --trust-remote-code\n\
                     2024-04-01 14:04:55,171 INFO worker.py:1752 -- Started a local Ray instance.\n";
        let ignored = |f: &crate::rules::Finding| {
            f.conditions
                .iter()
                .any(|c| c.met && c.text.contains("ignored repeated interrupts"))
        };
        // As the terminal echoed them on one line, and one per line.
        for tail in ["^C^C^C^C^C^C\n", "^C\n^C\n^C\n"] {
            let f = stalled(&format!("{start}{tail}")).expect("stalled");
            assert!(ignored(&f), "{tail}: {:?}", f.conditions);
            assert!(f.confidence >= 0.85, "{}", f.confidence);
            assert!(f.headline.contains("ignores SIGINT"), "{}", f.headline);
        }
        let obeyed = format!("{start}^C^C\nKeyboardInterrupt\n");
        if let Some(f) = stalled(&obeyed) {
            assert!(!ignored(&f), "{:?}", f.conditions);
        }
        // One interrupt is someone stopping it: not yet ignored.
        let once = stalled(&format!("{start}^C\n")).expect("stalled");
        assert!(!ignored(&once));
    }
}
