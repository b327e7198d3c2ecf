//! What usually stops a start-up (or a request's generation) at each stage,
//! what to do about it, the command that shows it, and the story a stalled
//! generation tells.

use super::*;

pub(super) const P2P: (&str, &str, &str) = (
    "a multi-GPU start-up that goes silent while its NCCL group forms or at its first collective is most often peer-to-peer (P2P) traffic between the GPUs blocked or broken: PCIe ACS, an IOMMU, a virtualised host",
    "Test with NCCL_P2P_DISABLE=1; if that starts, disable PCIe ACS in the BIOS or boot with iommu=pt (or keep P2P off); check the topology with nvidia-smi topo -m and the P2P path with nccl-tests",
    "NCCL_DEBUG=INFO NCCL_P2P_DISABLE=1 <the server's command>; nvidia-smi topo -m; py-spy dump --pid PID",
);

pub(super) const FIRST_COLLECTIVE: (&str, &str, &str) = (
    "a group that posted its first collective and went silent waits for a rank that never joined it: a rank missing or stuck (on another node, whose log is not here), or the traffic between the ranks blocked (peer to peer between the GPUs, or the network between the nodes: a firewall, the wrong interface)",
    "Check that every rank of every node reached the same collective (NCCL_DEBUG=INFO on all nodes); test the path with NCCL_P2P_DISABLE=1 on one node, NCCL_SOCKET_IFNAME and the firewall between nodes; set a collective timeout so that a hang becomes an error",
    "py-spy dump --pid PID; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL <the job's command>",
);

pub(super) const NETWORK: (&str, &str, &str) = (
    "ranks that reach each other over the network (NCCL via NET/Socket or NET/IB: several nodes) and went silent once their group formed, or while it formed, wait for a rank that never joined: a rank missing or stuck on another node (whose log is not here), or the network between the nodes blocked (a firewall or security group on NCCL's ports, the wrong interface)",
    "Run with NCCL_DEBUG=INFO on every node and compare which ranks reached Init COMPLETE; open the ports between the nodes (or test with the firewall off) and pin the interface with NCCL_SOCKET_IFNAME; dump a stuck rank's stacks; set a collective timeout so that a hang becomes an error",
    "py-spy dump --pid PID; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET <the job's command>",
);

pub(super) const TRAINING: (&str, &str, &str) = (
    "a training job that set itself up and never logged its first step is most often stuck in the first collective of that step (or of the engine's set-up): a rank missing, stuck or slow to start (on this node or another, whose log is not here), or the traffic between the ranks blocked; less often its data loading",
    "Dump the stacks of every rank to see where each one waits; run with NCCL_DEBUG=INFO on every node to see which rank never joined; set a timeout on init_process_group so that a hang becomes an error; compare with a single-GPU run",
    "py-spy dump --pid PID; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL <the job's command>",
);

pub(super) const GENERATING: (&str, &str, &str) = (
    "a generation that began and never produced a token or an error waits on what computes it: most often the model backend the app calls (a local Ollama or llama.cpp server, a remote API) that stopped answering or never finished loading the model, else the first forward pass on the GPU",
    "Check that the backend answers on its own (its API, its log, its process) and restart it if it does not, then send the request again; if the model runs in the process itself, see where it waits",
    "curl -s http://127.0.0.1:11434/api/ps (Ollama; the backend's own API otherwise); py-spy dump --pid PID",
);

pub(super) const ENGINE_READY: (&str, &str, &str) = (
    "an inference engine that finished its start-up (KV cache allocated, warmed up) and went silent waits on what uses it: an API server that never started its listener, or, where the engine is embedded in a job (an RL trainer's vLLM actors), the job's next stage: its other actors never placed (not enough GPUs for every colocated model) or the process group between the trainer and the engine (the weight sync) never formed",
    "See what the job waits on: pending actors and their resources (ray status, the Ray dashboard), where each process waits (py-spy dump), the weight-sync group with NCCL_DEBUG=INFO; for an RL trainer, try its gloo sync backend or fewer colocated models per GPU",
    "ray status; py-spy dump --pid PID; NCCL_DEBUG=INFO <the job's command>",
);

pub(super) const FORWARD: (&str, &str, &str) = (
    "a model step that began and never finished, with no error, is stuck inside the forward pass: with several GPUs (tensor parallel), one rank stalled and the others wait for it in the step's all-reduce (busy GPUs at 100 % and one idle); with one GPU, a kernel that never returns",
    "Find the stalled rank: per-GPU utilisation (the idle one among busy ones), py-spy or gdb on its process, dmesg for an Xid on its GPU; run with NCCL_DEBUG=INFO and a collective timeout so that a hang becomes an error; try fewer tensor-parallel ranks or NCCL_P2P_DISABLE=1; restart the server",
    "nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv; py-spy dump --pid PID; dmesg -T | grep -i xid",
);

pub(super) const RPC: (&str, &str, &str) = (
    "a llama.cpp start-up that placed weights on an RPC device (`RPC[host:port] model buffer size`) and went silent is stuck sending them to the rpc-server: a client and server built from different llama.cpp commits (the RPC protocol changes between builds), or the network path between them",
    "Build the client and every rpc-server from the same llama.cpp commit; check the path between them (firewall, MTU, the address the server binds); run both with -v (verbose RPC logging) to see which command stalls",
    "rpc-server -H HOST -p PORT (and the client) with -v; git -C llama.cpp rev-parse HEAD on both machines",
);

/// Whether the input's NCCL lines route traffic over the network (`via
/// NET/Socket/0`, `via NET/IB/0`): ranks on several nodes.
pub(super) fn over_network(incident: &Incident, source: crate::source::SourceId) -> bool {
    incident
        .facts
        .messages
        .iter()
        .any(|m| m.span.source == source && m.text.contains("via NET/"))
}

/// What usually stops a start-up at `stage`, what to do, and the command
/// that shows it.
pub(super) fn advice(
    stage: Stage,
    multi_gpu: bool,
    over_network: bool,
) -> (&'static str, &'static str, &'static str) {
    match stage {
        Stage::FirstCollective => FIRST_COLLECTIVE,
        // Ranks that reach each other over the network (NCCL's `via
        // NET/Socket`, `via NET/IB`): the nodes' path, not the GPUs' P2P.
        Stage::DistributedInit | Stage::DistributedReady if over_network => NETWORK,
        Stage::Training => TRAINING,
        Stage::Generating => GENERATING,
        Stage::EngineReady => ENGINE_READY,
        Stage::Forward => FORWARD,
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

/// ` ("quote")` for a quoted line, else nothing.
fn quoted(quote: Option<&str>) -> String {
    quote.map(|q| format!(" (\"{q}\")")).unwrap_or_default()
}

/// How long the silence lasted, as a headline says it.
fn silent_until(gave_up: bool) -> &'static str {
    if gave_up {
        "until it was stopped"
    } else {
        "to the end of the log"
    }
}

/// Sets a stall's story on `f`: its title, headline, the chain's two
/// steps before `why`, and `why` as the explanation.
fn tell(f: &mut Finding, title: &str, headline: String, chain: [String; 2], why: &str) {
    f.title = title.to_owned();
    f.headline = headline;
    f.chain.extend(chain);
    f.chain.push(why.to_owned());
    f.explanation = why.to_owned();
}

/// The story of a request whose generation began and never ended: the
/// server was up, the model (or the backend it calls) never answered.
pub(super) fn tell_generation(f: &mut Finding, quote: Option<&str>, gave_up: bool, why: &str) {
    let (quote, until) = (quoted(quote), silent_until(gave_up));
    tell(
        f,
        "a request's generation began and never produced an answer",
        format!(
            "The server accepted a request and began generating its answer{quote}, then nothing came: no token, no error, no end of the generation {until}. What it was waiting on, the model or the backend server it calls, never answered."
        ),
        [
            "the server took the request and began its generation".to_owned(),
            format!(
                "the generation went silent at its start{quote}: no token, no error and no end followed"
            ),
        ],
        why,
    );
}

/// The row of llama.cpp's rpc-server's own lines (catalogs/stacks-llamacpp.toml).
const RPC_SERVING: &str = "stacks-llamacpp.rpc-server-serving";

/// The rpc-server's last line, where its log is pasted too (`Client
/// connection closed` after each `Accepted client connection`): the other
/// side of the exchange the client stalled in.
pub(super) fn cite_rpc_server(incident: &Incident, f: &mut Finding) {
    if let Some((m, _)) = incident.known(RPC_SERVING).last() {
        f.evidence(
            m.span,
            "the rpc-server's last line: it only accepted and closed client connections",
        );
    }
}

/// The story of a model step that began and never finished: the engine's
/// trace of its forward pass is the last thing it printed.
pub(super) fn tell_forward(f: &mut Finding, quote: Option<&str>, gave_up: bool, why: &str) {
    let (quote, until) = (quoted(quote), silent_until(gave_up));
    tell(
        f,
        "a model step (forward pass) began and never finished",
        format!(
            "The engine's last lines trace a model step{quote}, and nothing followed them {until}: no later step, no error, no exit. The step never finished: a hang inside the forward pass, not a crash."
        ),
        [
            "the engine entered a model step (its trace of the forward pass)".to_owned(),
            "nothing followed: the step never finished and nothing failed".to_owned(),
        ],
        why,
    );
}

/// What a row's id says of the stage line's program.
const NCCL_TESTS_HEADER: &str = "startup.nccl-tests-table-header";
const NCCL_TESTS_RANK: &str = "startup.nccl-tests-rank";
/// vLLM's KV cache sized (catalogs/startup.toml).
const KV_SIZED: &str = "startup.vllm-kv-cache-sized";

/// The lines that say what stood behind the stage: nccl-tests' ranks (the
/// process and GPU of each) where its table's header is the last stage
/// line; the KV cache an engine sized where it came up and went silent.
pub(super) fn cite_context(
    incident: &Incident,
    f: &mut Finding,
    startup: &Startup<'_>,
    reached: Stage,
    source: crate::source::SourceId,
) {
    let here = |m: &Message| m.span.source == source;
    let header = startup.lines.iter().any(|(m, s, _)| {
        *s == reached
            && incident
                .known(NCCL_TESTS_HEADER)
                .any(|(h, _)| h.span == m.span)
    });
    if header {
        let first = startup.lines.iter().map(|(m, _, _)| m.span).min();
        if let Some(c) = incident
            .facts
            .typed_commands
            .iter()
            .filter(|c| c.span.source == source && first.is_some_and(|f| c.span < f))
            .max_by_key(|c| c.span)
        {
            f.evidence(c.span, "the command that ran the test");
        }
        for (m, hit) in incident
            .known(NCCL_TESTS_RANK)
            .filter(|(m, _)| here(m))
            .take(8)
        {
            let pid = hit.get("pid").and_then(|p| p.parse::<u32>().ok());
            let model = hit.get("model").unwrap_or("?").trim();
            let rank = hit.get("rank").unwrap_or("?");
            let who = pid.map_or_else(String::new, |p| format!(", process {p}"));
            f.evidence(m.span, format!("rank {rank}{who}: {model}"));
            f.entities.pids.extend(pid);
        }
    }
    if reached == Stage::EngineReady
        && let Some((m, _)) = incident.known(KV_SIZED).filter(|(m, _)| here(m)).last()
    {
        f.evidence(
            m.span,
            "the engine sized its KV cache before it came up: its start-up completed",
        );
    }
}

/// Whose start-up it is: a model server's, a training job's, or a
/// benchmark's (nccl-tests), as its stage lines say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Runner {
    Server,
    TrainingJob,
    Benchmark,
}

impl Runner {
    /// What the headline calls it.
    pub(super) fn noun(self) -> &'static str {
        match self {
            Runner::Server => "server",
            Runner::TrainingJob => "training job",
            Runner::Benchmark => "nccl-tests run",
        }
    }

    /// The first link of the causal chain: what never happened.
    pub(super) fn never(self, ready_reached: bool) -> &'static str {
        match self {
            Runner::TrainingJob => "the training job never logged a step",
            Runner::Benchmark => "the benchmark never printed a result row",
            Runner::Server if ready_reached => {
                "the server or worker was up, but its work stopped advancing"
            }
            Runner::Server => "the server never became ready",
        }
    }
}

/// The headline: the stage the start-up hung at, the words of the line
/// where it began, and how long nothing followed it (until someone gave
/// up, or to the end of the log).
pub(super) fn headline(
    stage_name: &str,
    quote: Option<&str>,
    runner: Runner,
    gave_up: bool,
    silence: Option<i64>,
) -> String {
    let quote = quoted(quote);
    let who = runner.noun();
    format!(
        "The {who}'s start-up hung at this stage: {stage_name}{quote}. Nothing followed it{}.",
        match (gave_up, silence) {
            (true, Some(s)) if s >= 60 => format!(" for {} until it was stopped", duration(s)),
            (true, _) => " until it was stopped".to_owned(),
            (false, _) => " to the end of the log".to_owned(),
        }
    )
}
