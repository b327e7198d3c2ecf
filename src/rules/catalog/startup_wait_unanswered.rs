//! `startup-wait-unanswered`: a model server's front end said, again and
//! again, that it was still waiting for its engine to start (vLLM's
//! `Waiting for 1 local, 0 remote core engine proc(s) to start.`), and the
//! log ends on that wait: the engine never came up. A hang seen from the
//! side that waits, with or without a start-up stage before it.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::catalogs::Stage;
use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::round2;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: StartupWaitUnanswered = StartupWaitUnanswered;

pub struct StartupWaitUnanswered;

/// The catalog rows (`catalogs/*.toml`) of a server saying it still waits
/// for the part of itself that does the work (vLLM's API server for its
/// engine core, TGI's launcher for its shard, Dynamo for its engine
/// worker, SGLang's router for its workers), each with how many waits make a hang: a wait logged every few
/// seconds must repeat, one logged once must only end the log.
const ROWS: &[(&str, usize)] = &[
    ("stacks-vllm.waiting-for-engine-procs", 2),
    ("stacks-tgi.waiting-for-shard", 2),
    ("startup.dynamo-waiting-for-worker", 1),
    ("stacks-sglang.router-worker-not-ready", 2),
    ("startup.tabby-waiting-for-llama-server", 1),
    ("startup.tabby-llama-server-not-ready", 2),
];

/// The rows of an HTTP client's own connection lines to a server on this
/// host (hyper-util's `connecting to 127.0.0.1:PORT`, reqwest's `starting
/// new connection: http://127.0.0.1:PORT/`). Any program logs them for any
/// request, so they are a poll that nothing answers only when they are all
/// the input says from the first to its end, to one address, at least
/// [`LEAST_POLLS`] times.
const POLLS: &[&str] = &["startup.http-client-connecting-loopback"];

/// The fewest connection lines that make a poll: one is a request.
const LEAST_POLLS: usize = 4;

/// What may follow the last wait without answering it: someone or
/// something giving up on the start-up.
static GAVE_UP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"KeyboardInterrupt|\^C|SIGINT|SIGTERM|Terminated|[Tt]imed out|Stopping .*\.service")
        .expect("regex")
});

/// A wait this long, measured between the first and the last line, is a
/// hang whoever reads it (a large model loads in minutes, not in tens).
const LONG_WAIT_SECS: i64 = 300;

static META: RuleMeta = RuleMeta {
    id: "startup-wait-unanswered",
    category: Category::ServerHang,
    severity: Severity::Error,
    summary: "a server kept logging that it still waits for its engine to start, and the log ends waiting: the engine never came up",
    // The catalog rows' anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
vLLM's API server starts its engine core (the process that loads the model
on the GPUs, forms the NCCL group, profiles memory and captures CUDA
graphs) and waits for the engine's ready handshake; every 10 seconds
without it, it logs `Waiting for 1 local, 0 remote core engine proc(s) to
start.` (at DEBUG). The same wait repeated until the log ends, with no
error and no ready line after it, means the engine never finished
starting: the start-up hangs, seen from the side that waits. TGI's
launcher says the same of its shard every 10 seconds (`Waiting for shard
0 to be ready...`); Dynamo says it once (`Waiting for sglang0 to signal
that it's ready`), so for it one line that ends the log is the wait.
SGLang's Rust router polls its workers the same way (`Worker is not ready
yet`, and under `Initializing workers:` each URL it still waits for) until
its worker start-up timeout (300 s by default). Tabby says it of the
llama-server it started (`Waiting for llama-server <completion> to
start...`, then `not ready yet, retrying...`). A program whose own lines
say nothing of the wait is read by its HTTP client's debug lines
(hyper-util's `connecting to 127.0.0.1:PORT`, reqwest's `starting new
connection: http://127.0.0.1:PORT/`): four or more to one address on this
host, nothing else logged from the first to the end of the log, is a
program polling a local backend that never answered.

## Why it happens
The engine is stuck somewhere in its start-up, and its own last line says
where: most often forming the distributed group or the first collective
(peer-to-peer traffic between GPUs blocked: PCIe ACS, an IOMMU, a
virtualised or GPU-sharing layer, a P2P path between consumer cards),
sometimes loading weights from slow storage or capturing CUDA graphs.

## How to confirm
`py-spy dump --pid PID` on the engine core (`VLLM::EngineCore`) and its
workers shows where they wait; `NCCL_DEBUG=INFO` shows whether NCCL's
group formed; the engine's lines just before the waits are the last stage
it reached.

## How to fix
By the stage: for NCCL, test `NCCL_P2P_DISABLE=1` (then fix the P2P path,
or `NCCL_P2P_LEVEL`), `--disable-custom-all-reduce`; for CUDA graphs,
`--enforce-eager`; for weights, the storage. Start the server again once
the cause is fixed.

## Safety
Advice only: nothing is stopped or changed.
"#,
};

impl Rule for StartupWaitUnanswered {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut by_input: BTreeMap<usize, (Vec<&Message>, usize)> = BTreeMap::new();
        for &(id, least) in ROWS {
            for (m, _) in incident.known(id) {
                let entry = by_input
                    .entry(m.span.source.0)
                    .or_insert((Vec::new(), least));
                entry.0.push(m);
                entry.1 = entry.1.min(least);
            }
        }
        for (waits, least) in by_input.values_mut() {
            waits.sort_by_key(|m| m.span);
            if let Some(f) = unanswered(incident, waits, *least) {
                out.push(f);
            }
        }
        let mut polls: BTreeMap<usize, Vec<(&Message, String)>> = BTreeMap::new();
        for id in POLLS {
            for (m, h) in incident.known(id) {
                let port = h.get("port").unwrap_or_default().to_owned();
                polls.entry(m.span.source.0).or_default().push((m, port));
            }
        }
        for polls in polls.values_mut() {
            polls.sort_by_key(|(m, _)| m.span);
            if by_input.contains_key(&polls[0].0.span.source.0) {
                continue;
            }
            if let Some(f) = polled_to_the_end(incident, polls) {
                out.push(f);
            }
        }
    }
}

/// A finding when an input's connection lines to a server on this host
/// are all it says from the first to its last line, to one port, at least
/// [`LEAST_POLLS`] times: a client polling a local backend that never
/// answered (a connection that succeeded would be followed by the
/// request's own lines).
fn polled_to_the_end(incident: &Incident, polls: &[(&Message, String)]) -> Option<Finding> {
    let (first, port) = polls.first()?;
    let last = polls.last()?.0;
    if polls.len() < LEAST_POLLS || polls.iter().any(|(_, p)| p != port) {
        return None;
    }
    let lines = usize::try_from(last.span.line - first.span.line + 1).ok()?;
    if lines != polls.len() || !incident.facts.input_ends.contains(&last.span) {
        return None;
    }
    let waits: Vec<&Message> = polls.iter().map(|(m, _)| *m).collect();
    let mut f = unanswered(incident, &waits, LEAST_POLLS)?;
    let addr = first
        .text
        .rsplit(' ')
        .find(|w| !w.is_empty())
        .unwrap_or_default()
        .trim_end_matches('/');
    let addr = addr.rsplit("//").next().unwrap_or(addr);
    f.title =
        format!("a local backend never answered: the program polled {addr} to the end of the log");
    f.headline = format!(
        "The program kept opening connections to {addr}, a server on this host ({} attempts and nothing else logged), and the log ends there: the backend it started or calls on port {port} never answered.",
        polls.len()
    );
    f.explanation = format!(
        "A Rust program's HTTP client (hyper-util, reqwest) logs each connection it opens. The same local address, tried again and again with nothing else between the attempts to the end of the log, is a program polling a backend on this host that never became ready: a model server it started (Tabby's llama-server) still loading, dead at start, or never listening on port {port}."
    );
    for e in &mut f.evidence {
        if e.span == first.span {
            e.note = format!("the program opens a connection to {addr}, a server on this host");
        } else if e.span == last.span {
            e.note = format!(
                "still connecting: the same address {} times, nothing else logged between the attempts, and the log ends here",
                polls.len()
            );
        }
    }
    f.chain = vec![
        format!(
            "the program opened connections to {addr} again and again ({} attempts), nothing else logged between them",
            polls.len()
        ),
        format!("nothing answered: the backend on port {port} never became ready"),
    ];
    // Connection lines alone, cut from a debug stream: a poll, said at
    // less than a server's own wait.
    f.confidence = f.confidence.min(0.5);
    f.actions.clear();
    f.actions.push(Action::advice(
        format!("find what should listen on port {port} (the backend the program started: its process, its own output, its memory for the model) and run its command by hand to see why it never answers"),
        Some(format!("ss -ltnp 'sport = :{port}'; ps -ef | grep -i server; curl -s http://127.0.0.1:{port}/health").as_str()),
    ));
    Some(f)
}

/// A finding when the waits of one input were repeated (`least` times at
/// least), nothing answered them (a ready stage, an error, an exit) and the
/// log ends on them.
fn unanswered(incident: &Incident, waits: &[&Message], least: usize) -> Option<Finding> {
    let (first, last) = (*waits.first()?, *waits.last()?);
    if waits.len() < least.max(1) {
        return None;
    }
    let source = first.span.source;
    let ready = incident.known.iter().any(|k| {
        let m = &incident.facts.messages[k.message];
        m.span.source == source
            && m.span > first.span
            && k.hit.row.and_then(|r| r.stage) == Some(Stage::Ready)
    });
    if ready {
        return None;
    }
    let after: Vec<&Message> = incident
        .facts
        .messages
        .iter()
        .filter(|m| m.span.source == source && m.span > first.span && !reported(incident, m.span))
        .collect();
    // An error after the first wait is the story, and its own rule tells it.
    if after
        .iter()
        .any(|m| crate::rules::unknown::ERRORISH.is_match(&m.text))
    {
        return None;
    }
    // The log ends waiting: after the last wait, nothing but a give-up.
    let gave_up = after
        .iter()
        .filter(|m| m.span > last.span && !m.text.trim().is_empty())
        .try_fold(None, |seen: Option<&Message>, m| {
            GAVE_UP.is_match(&m.text).then(|| seen.or(Some(*m)))
        })?;
    let waited = incident
        .time_of(first.span)
        .zip(incident.time_of(last.span))
        .map(|(a, b)| b.utc_seconds() - a.utc_seconds())
        .filter(|s| *s >= 0);

    let mut f = Finding::new(META.id, META.category, META.severity);
    f.occurrences = u32::try_from(waits.len()).unwrap_or(u32::MAX);
    let span_text = waited.map_or(String::new(), |s| format!(" over {s} s"));
    if waits.len() == 1 {
        f.evidence(
            first.span,
            "the server waits for its engine to be ready, and the log ends here",
        );
    } else {
        f.evidence(first.span, "the server starts waiting for its engine");
        f.evidence(
            last.span,
            format!(
                "still waiting: the same wait {} times{span_text}, and the log ends here",
                waits.len()
            ),
        );
    }
    if let Some(g) = gave_up {
        f.evidence(g.span, "then the start-up was given up on");
    }
    let idle = idle_gpus(incident, last.span);
    if let Some((span, n, most)) = idle {
        f.evidence(span, format!("a snapshot after the waits: {n} GPU(s), none holding more than {most} MiB: no model weights are on them yet"));
    }
    f.condition(
        "the server said it waits for its engine, as often as that wait is logged",
        true,
    );
    f.condition("no ready line, error or exit follows the waits", true);
    let many = f.condition("the wait was logged 3 times or more", waits.len() >= 3);
    let long = f.condition(
        format!("the wait is measured: {LONG_WAIT_SECS} s or more"),
        waited.is_some_and(|s| s >= LONG_WAIT_SECS),
    );
    let stopped = f.condition("someone or something gave up waiting", gave_up.is_some());
    f.confidence = round2(match (many || stopped, long) {
        (true, true) => 0.8,
        (true, false) => 0.65,
        (false, _) => 0.45,
    });
    f.chain
        .push("the server never became ready: its engine did not finish starting".to_owned());
    words(&mut f, first, waits.len(), &span_text);
    if let Some((_, n, most)) = idle {
        f.chain.push(format!(
            "the engine stopped before loading any weights: its {n} GPU(s) hold {most} MiB at most, no more than a CUDA context (the ranks' first NCCL set-up between the GPUs is the usual place)"
        ));
    }
    Some(f)
}

/// Whether `span` is a line of a command's report pasted in the input (an
/// nvidia-smi table, `ps` rows): a snapshot of the host, not the server
/// going on.
fn reported(incident: &Incident, span: Span) -> bool {
    incident.facts.host_reports.iter().any(|(first, last)| {
        first.source == span.source && (first.line..=*last).contains(&span.line)
    })
}

/// The most memory any GPU of a host report after `last` holds, when every
/// GPU it lists holds no more than a CUDA context (under
/// [`CONTEXT_ONLY_MIB`]): the report's first GPU line, how many GPUs, the
/// most any holds.
fn idle_gpus(incident: &Incident, last: Span) -> Option<(Span, usize, u64)> {
    let (first, end) = incident
        .facts
        .host_reports
        .iter()
        .find(|(first, _)| first.source == last.source && first.line > last.line)?;
    let gpus: Vec<(Span, u64)> = incident
        .facts
        .gpus
        .iter()
        .filter_map(|g| Some((g.span?, g.memory_used_mib?)))
        .filter(|(span, _)| span.source == first.source && (first.line..=*end).contains(&span.line))
        .collect();
    let most = gpus.iter().map(|(_, used)| *used).max()?;
    (most < CONTEXT_ONLY_MIB).then(|| (gpus[0].0, gpus.len(), most))
}

/// Memory a GPU holds with a CUDA context (and NCCL's buffers) but no
/// model weights: a few hundred MiB, under a GiB.
const CONTEXT_ONLY_MIB: u64 = 1024;

/// The finding's story, title, headline and steps: `first` is the first
/// wait, `n` how many there were, `span_text` how long they lasted.
fn words(f: &mut Finding, first: &Message, n: usize, span_text: &str) {
    // The message under its record head: after vLLM's `[file.py:N] `, or
    // after the last `: ` of a tracing record (`target: src/file.rs:N: `).
    let text = first.text.trim();
    let said = match text.rsplit_once("] ") {
        Some((_, m)) => m,
        None => text.rsplit(": ").next().unwrap_or(text),
    }
    .trim();
    let times = match n {
        1 => String::new(),
        n => format!(" {n} times{span_text}"),
    };
    f.chain.push(format!(
        "the front end logged `{said}`{times} and nothing answered it"
    ));
    f.title = "the engine never finished starting: the server waited for it to the end of the log"
        .to_owned();
    f.headline = if n == 1 {
        "The server's start-up hung: it waited for its engine to signal that it was ready, and nothing followed to the end of the log.".to_owned()
    } else {
        format!(
            "The server's start-up hung: it kept waiting for its engine ({n} times{span_text}) and nothing answered."
        )
    };
    f.explanation = "The server's front end (vLLM's API server, TGI's launcher, Dynamo, SGLang's router for its workers) launched its engine and waits for its ready signal; the signal never came. The engine is stuck in its own start-up (most often the NCCL group or its first collective, sometimes weights, a download or CUDA graphs): its last line before the waits is the stage it reached.".to_owned();
    f.actions.push(Action::advice(
        "see where the engine waits: py-spy dump on the engine process (vLLM's VLLM::EngineCore and its workers, TGI's text-generation-server shard, Dynamo's engine worker, the SGLang server behind SGLang's router), and read its own output",
        Some("py-spy dump --pid ENGINE_PID"),
    ));
    f.actions.push(Action::advice(
        "for a multi-GPU start-up, rerun with NCCL_DEBUG=INFO and test the P2P path with NCCL_P2P_DISABLE=1 (then fix it, or set NCCL_P2P_LEVEL); with --enforce-eager if it stops at CUDA graphs",
        None,
    ));
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    const WAIT: &str = "(APIServer pid=1) DEBUG 08-09 20:55:10 [v1/engine/utils.py:1262] Waiting for 1 local, 0 remote core engine proc(s) to start.\n(APIServer pid=1) DEBUG 08-09 20:55:20 [v1/engine/utils.py:1262] Waiting for 1 local, 0 remote core engine proc(s) to start.\n(APIServer pid=1) DEBUG 08-09 20:55:30 [v1/engine/utils.py:1262] Waiting for 1 local, 0 remote core engine proc(s) to start.\n";

    #[test]
    fn waits_to_the_end_of_the_log_are_a_hang() {
        let f = findings(WAIT);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::ServerHang);
        assert_eq!(f[0].occurrences, 3);
    }

    /// sgl-project/sglang#7870 (batch H's 799): SGLang's router waits for
    /// its worker at :31000, the terminal's `^C^C^C` echoed before the
    /// first line; the log ends waiting.
    #[test]
    fn sglang_routers_waits_for_a_worker_are_a_hang() {
        let text = "^C^C^C2025-07-08 19:58:04  INFO sglang_router_rs::router: src/router.rs:354: Worker is not ready yet\n\
2025-07-08 19:58:04  INFO sglang_router_rs::router: src/router.rs:354: Worker is not ready yet\n\
2025-07-08 19:58:04  INFO sglang_router_rs::router: src/router.rs:354: Worker is not ready yet\n\
2025-07-08 19:58:04  INFO sglang_router_rs::router: src/router.rs:354: Worker is not ready yet\n\
2025-07-08 19:58:04  INFO sglang_router_rs::router: src/router.rs:365: Initializing workers:\n\
2025-07-08 19:58:04  INFO sglang_router_rs::router: src/router.rs:367:   http://0.0.0.0:31000 - Worker is not ready yet\n";
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::ServerHang);
        assert!(
            f[0].chain
                .iter()
                .any(|c| c.contains("`Worker is not ready yet`")),
            "{:?}",
            f[0].chain
        );
        // One poll is a worker still loading.
        assert!(findings(text.lines().nth(1).unwrap_or_default()).is_empty());
    }

    #[test]
    fn one_wait_is_start_up_in_progress() {
        let one = WAIT.lines().next().unwrap_or_default();
        assert!(findings(one).is_empty());
    }

    #[test]
    fn an_error_after_the_waits_is_its_own_story() {
        let text = format!(
            "{WAIT}(Worker_TP1 pid=530) ERROR 10-06 18:54:30 [v1/executor/multiproc_executor.py:597] WorkerProc failed to start.\n"
        );
        assert!(findings(&text).is_empty());
    }

    /// TGI 0.x's launcher, its shard never ready
    /// (huggingface/text-generation-inference#81).
    const TGI: &str = "2023-02-20T16:45:14.079644Z  INFO text_generation_launcher: Starting shard 0\n2023-02-20T16:45:24.091665Z  INFO text_generation_launcher: Waiting for shard 0 to be ready...\n2023-02-20T16:45:34.101538Z  INFO text_generation_launcher: Waiting for shard 0 to be ready...\n";

    #[test]
    fn a_tgi_shard_that_never_gets_ready_is_a_hang_and_ready_ends_it() {
        let f = findings(TGI);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].occurrences, 2);
        // The launcher's verdict that the shard came up answers the waits.
        let ready = format!(
            "{TGI}2023-02-20T16:45:40.101538Z  INFO text_generation_launcher: Shard 0 ready in 26.0s\n"
        );
        assert!(findings(&ready).is_empty());
        // TGI 0.9's wording, the rank as a span field (assembled from
        // launcher/src/main.rs's format, not copied).
        let newer = "2024-05-07T12:39:20.293016Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready... rank=0\n2024-05-07T12:39:30.298136Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready... rank=0\n";
        assert_eq!(findings(newer).len(), 1);
    }

    /// Batch L's 912 (huggingface/text-generation-inference#1838, cut):
    /// TGI's waits, then an nvidia-smi table pasted below them. The table
    /// is a snapshot of the host, not the server going on, and its GPUs
    /// hold no weights.
    #[test]
    fn a_report_pasted_after_the_waits_does_not_answer_them() {
        let waits = "2024-05-01T01:17:02.618817Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready... rank=1\n2024-05-01T01:17:12.629043Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready... rank=1\n2024-05-01T01:17:22.639083Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready... rank=1\n\n";
        let table = "Wed May  1 03:37:22 2024       \n+-----------------------------------------------------------------------------------------+\n| NVIDIA-SMI 550.54.14              Driver Version: 550.54.14      CUDA Version: 12.4     |\n|-----------------------------------------+------------------------+----------------------+\n| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n|                                         |                        |               MIG M. |\n|=========================================+========================+======================|\n|   0  NVIDIA L40S                    On  |   00000000:01:00.0 Off |                    0 |\n| N/A   41C    P0             96W /  350W |     636MiB /  46068MiB |    100%      Default |\n|                                         |                        |                  N/A |\n+-----------------------------------------+------------------------+----------------------+\n";
        let f = findings(&format!("{waits}{table}"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].chain.iter().any(|c| c.contains("636 MiB at most")),
            "{:?}",
            f[0].chain
        );
        // A table whose GPU holds a model's weights says nothing of where
        // the engine stopped.
        let loaded = table.replace("   636MiB", " 40636MiB");
        let f = findings(&format!("{waits}{loaded}"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(!f[0].chain.iter().any(|c| c.contains("MiB at most")));
    }

    #[test]
    fn dynamo_waits_once_and_a_log_that_ends_there_is_a_hang() {
        // ai-dynamo/dynamo#480.
        let wait = "2025-03-27T13:39:33.390990Z  INFO dynamo_llm::engines::sglang::worker: Waiting for sglang0 to signal that it's ready\n";
        let f = findings(wait);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::ServerHang);
        assert!(f[0].confidence < 0.5, "{}", f[0].confidence);
        // Another worker's name, the same grammar (assembled, not copied).
        let vllm = wait.replace("sglang0", "vllm0");
        assert_eq!(findings(&vllm).len(), 1);
        // The worker's error after the wait is its own story.
        let failed = format!("{wait}RuntimeError: CUDA error: out of memory\n");
        assert!(findings(&failed).is_empty());
    }

    /// TabbyML/tabby#2627 (fixtures/real/986), verbatim: Tabby 0.13's
    /// HTTP client connecting to the llama-server it started, in a loop.
    const TABBY: &str = "2024-07-12T07:20:56.410356Z DEBUG hyper_util::client::legacy::connect::http: /Users/runner/.cargo/registry/src/index.crates.io-6f17d22bba15001f/hyper-util-0.1.5/src/client/legacy/connect/http.rs:631: connecting to 127.0.0.1:30890\n\
2024-07-12T07:20:56.410445Z DEBUG reqwest::connect: /Users/runner/.cargo/registry/src/index.crates.io-6f17d22bba15001f/reqwest-0.12.4/src/connect.rs:497: starting new connection: http://127.0.0.1:30890/    \n\
2024-07-12T07:20:56.410450Z DEBUG hyper_util::client::legacy::connect::http: /Users/runner/.cargo/registry/src/index.crates.io-6f17d22bba15001f/hyper-util-0.1.5/src/client/legacy/connect/http.rs:631: connecting to 127.0.0.1:30890\n\
2024-07-12T07:20:56.410565Z DEBUG reqwest::connect: /Users/runner/.cargo/registry/src/index.crates.io-6f17d22bba15001f/reqwest-0.12.4/src/connect.rs:497: starting new connection: http://127.0.0.1:30890/    \n\
2024-07-12T07:20:56.410570Z DEBUG hyper_util::client::legacy::connect::http: /Users/runner/.cargo/registry/src/index.crates.io-6f17d22bba15001f/hyper-util-0.1.5/src/client/legacy/connect/http.rs:631: connecting to 127.0.0.1:30890\n\
2024-07-12T07:20:56.410669Z DEBUG reqwest::connect: /Users/runner/.cargo/registry/src/index.crates.io-6f17d22bba15001f/reqwest-0.12.4/src/connect.rs:497: starting new connection: http://127.0.0.1:30890/    \n";

    #[test]
    fn a_client_polling_a_local_port_to_the_end_is_a_backend_that_never_answered() {
        let f = findings(TABBY);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::ServerHang);
        assert_eq!(f[0].occurrences, 6);
        assert!(
            f[0].headline.contains("127.0.0.1:30890"),
            "{}",
            f[0].headline
        );
        assert!(f[0].confidence <= 0.5, "{}", f[0].confidence);
        // Three connections are requests, not a poll.
        let three: String = TABBY.lines().take(3).map(|l| format!("{l}\n")).collect();
        assert!(findings(&three).is_empty());
    }

    #[test]
    fn connections_that_are_not_all_the_log_says_are_requests() {
        let lines: Vec<&str> = TABBY.lines().collect();
        // Anything else logged between them: the client was answered, or
        // the program went on.
        let between = format!(
            "{}\n{}\n2024-07-12T07:20:56.410500Z DEBUG hyper_util::client::legacy::connect::http: connected to 127.0.0.1:30890\n{}\n",
            lines[..3].join("\n"),
            lines[3],
            lines[4..].join("\n")
        );
        assert!(findings(&between).is_empty());
        // A line after them: the log did not end polling.
        let after = format!(
            "{TABBY}2024-07-12T07:20:57.000000Z  INFO tabby::serve: Listening at 0.0.0.0:8080\n"
        );
        assert!(findings(&after).is_empty());
        // Two addresses: a client at work, not one poll.
        let other = TABBY.replacen("127.0.0.1:30890", "127.0.0.1:30891", 1);
        assert!(findings(&other).is_empty());
        // A remote address is no backend of this host's.
        let remote = TABBY.replace("127.0.0.1", "10.0.0.7");
        assert!(findings(&remote).is_empty());
    }

    /// Tabby 0.20's own lines (the message from
    /// crates/llama-cpp-server/src/supervisor.rs, rendered): the wait,
    /// its retries, and the backend's answer that ends it.
    #[test]
    fn tabbys_own_wait_for_its_llama_server() {
        let wait = "Waiting for llama-server <completion> to start...\nllama-server <completion> not ready yet, retrying...\nllama-server <completion> not ready yet, retrying...\n";
        let f = findings(wait);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::ServerHang);
        let up = format!("{wait}llama-server <completion> started successfully\n");
        assert!(findings(&up).is_empty());
    }

    #[test]
    fn a_later_line_that_is_not_a_give_up_means_it_went_on() {
        let text = format!(
            "{WAIT}(APIServer pid=1) INFO 08-09 20:55:35 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000\n"
        );
        assert!(findings(&text).is_empty());
    }
}
