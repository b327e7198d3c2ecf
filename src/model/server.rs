//! Events a model server (SGLang, vLLM) and the libraries under it (PyTorch,
//! NCCL) report about themselves, and the envelope every such event shares.

use std::fmt;

use super::Timestamp;
use super::{CppAbort, CudaOom, Landmark, NcclLine, PyException, TorchDist, Uvicorn, VllmFailure};
use crate::source::Span;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Framework {
    Sglang,
    Vllm,
    /// A PyTorch, NCCL or Python line in a stream that no SGLang or vLLM
    /// line identified.
    Unknown,
}

impl Framework {
    pub fn name(self) -> &'static str {
        match self {
            Framework::Sglang => "SGLang",
            Framework::Vllm => "vLLM",
            Framework::Unknown => "unknown",
        }
    }
}

/// The parallel ranks of a writer: an SGLang prefix such as `[… DP0 TP3]`, a
/// process title such as `sglang::scheduler_DP0_TP0_EP0` or `VLLM::Worker_TP1`,
/// a vLLM worker `rank=1`, or PyTorch's `[rank0]:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct RankTag {
    pub dp: Option<u32>,
    pub pp: Option<u32>,
    pub tp: Option<u32>,
    pub ep: Option<u32>,
    /// SGLang ≥ 0.5.9 attention context-parallel rank (`ATTN_CP`).
    pub attn_cp: Option<u32>,
    /// SGLang ≥ 0.5.9 MoE data-parallel rank (`MOE_DP`).
    pub moe_dp: Option<u32>,
    /// The process-group (world) rank: PyTorch's `[rank0]:`, vLLM's
    /// `(VllmWorker rank=1 …)`.
    pub global: Option<u32>,
}

impl RankTag {
    pub fn is_empty(&self) -> bool {
        *self == RankTag::default()
    }
}

impl fmt::Display for RankTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            ("DP", self.dp),
            ("PP", self.pp),
            ("ATTN_CP", self.attn_cp),
            ("MOE_DP", self.moe_dp),
            ("TP", self.tp),
            ("EP", self.ep),
            ("rank", self.global),
        ];
        let mut first = true;
        for (name, value) in parts {
            if let Some(v) = value {
                if !first {
                    f.write_str(" ")?;
                }
                write!(f, "{name}{v}")?;
                first = false;
            }
        }
        Ok(())
    }
}

/// What a server process title or log prefix says about its writer:
/// `sglang::scheduler_DP0_TP0_EP0`, `VLLM::Worker_TP1`, `EngineCore_DP0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerProcess {
    pub framework: Framework,
    /// `scheduler`, `detokenizer`, `Worker`, `EngineCore`, `APIServer`, …
    pub role: String,
    pub rank: RankTag,
    /// A trailing instance number without a rank name (`VLLM::APIServer_0`).
    pub index: Option<u32>,
    /// The name is exactly 15 bytes, the kernel's `comm` limit, so it may be
    /// cut (`sglang::schedul`): the role is a prefix and ranks may be missing.
    pub maybe_truncated: bool,
}

/// The launch configuration a server logs at start-up: SGLang's
/// `server_args=…`, vLLM's `args: Namespace(…)`, `non-default args: {…}` and
/// engine `config:` line. Only the keys rules need.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerArgs {
    /// SGLang `model_path`, vLLM `model`.
    pub model_path: Option<String>,
    pub served_model_name: Option<String>,
    /// SGLang `tp_size`, vLLM `tensor_parallel_size`.
    pub tp_size: Option<u32>,
    /// SGLang `pp_size`, vLLM `pipeline_parallel_size`.
    pub pp_size: Option<u32>,
    /// SGLang `dp_size`, vLLM `data_parallel_size`.
    pub dp_size: Option<u32>,
    pub ep_size: Option<u32>,
    pub base_gpu_id: Option<u32>,
    pub gpu_id_step: Option<u32>,
    /// SGLang's static memory fraction (weights + KV pool).
    pub mem_fraction_static: Option<f64>,
    /// vLLM's fraction of total GPU memory.
    pub gpu_memory_utilization: Option<f64>,
    /// vLLM `max_model_len` (`max_seq_len` in the engine config line),
    /// SGLang `context_length`. `None` when left to the model's config.
    pub max_model_len: Option<u64>,
    pub host: Option<String>,
    pub port: Option<u32>,
    pub dist_init_addr: Option<String>,
    pub nnodes: Option<u32>,
    pub node_rank: Option<u32>,
}

/// SGLang's TP memory balance check: `min < 0.9 * local`, all in GiB.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryImbalance {
    /// `ValueError` (≤ 0.5.6), `RuntimeError` (≥ 0.5.7), `None` when logged
    /// as a warning because the check was disabled.
    pub exception: Option<String>,
    /// `min_per_gpu_memory` (≤ 0.5.9) or `pre_model_load_memory` (≥ 0.5.10);
    /// `None` in 0.3 – 0.4.3, which printed no numbers.
    pub min_label: Option<String>,
    pub min_gib: Option<f64>,
    pub local_gib: Option<f64>,
    pub threshold_gib: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ServerEventKind {
    Args(ServerArgs),
    /// A version the log states: `vLLM API server version 0.8.5`,
    /// `sglang is using nccl==2.21.5`, NCCL's `NCCL version 2.21.5+cuda12.4`.
    Version {
        component: String,
        version: String,
    },
    /// A start-up milestone with the numbers it logs.
    Landmark(Landmark),
    /// uvicorn, the HTTP server of both frameworks.
    Uvicorn(Uvicorn),
    MemoryImbalance(MemoryImbalance),
    /// `Scheduler hit an exception: Traceback …` and its siblings.
    ChildException {
        component: String,
    },
    /// `Received sigquit from a child process.`: the main process is about to
    /// SIGKILL its process tree, itself included.
    SigquitFromChild,
    /// SGLang `Rank 0 scheduler is dead. Please check if there are relevant logs.`
    SchedulerDead {
        rank: u32,
    },
    /// SGLang `Watchdog timeout (self.watchdog_timeout=300)`: a forward batch
    /// did not finish in time; the process kills itself next.
    WatchdogTimeout {
        timeout_secs: Option<f64>,
    },
    /// `The server is fired up and ready to roll!`
    Ready,
    /// The shell's report that a job it started was ended by a signal:
    /// `./run.sh: line 22: 103525 Killed   python -m sglang.launch_server …`.
    /// `pid` is the job's, not the writer's.
    ShellJobSignaled {
        pid: u32,
        /// As bash words it: `Killed`, `Segmentation fault (core dumped)`.
        signal: String,
        command: String,
    },
    /// The shell's report that the foreground command it ran was ended by a
    /// signal, with no job number or PID: a line of its own, `Killed`,
    /// `Segmentation fault (core dumped)`.
    ShellForegroundSignaled {
        /// As bash words it, without `(core dumped)`.
        signal: String,
    },
    /// vLLM's reports that an engine or worker process failed (wrappers: the
    /// cause is in that process's own lines before).
    VllmFailure(VllmFailure),
    /// The closing line of a Python traceback, or an exception line that is
    /// unmistakable on its own. SGLang's memory-balance exception is a
    /// [`ServerEventKind::MemoryImbalance`] instead.
    Exception(PyException),
    /// A C++ `std::terminate` report (`terminate called after throwing …`).
    CppAbort(CppAbort),
    /// Any line stating a CUDA out-of-memory error, with its numbers. An
    /// exception line that states one yields both an `Exception` and this.
    CudaOom(CudaOom),
    /// An NCCL debug line worth keeping (warnings, version, communicator init).
    Nccl(NcclLine),
    /// PyTorch distributed (c10d) reports: watchdog timeouts, NCCL errors.
    TorchDist(TorchDist),
}

impl ServerEventKind {
    /// Whether the line reports the server failing: an exception, a CUDA
    /// out-of-memory error, a wrapper's report of a failed child or
    /// engine, an abort, the memory-balance check, a watchdog. Not a
    /// shell's report of a signal (the death, not its cause) nor a c10d
    /// report (a rank's view of another's failure); a rule that counts
    /// those asks for them too.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            ServerEventKind::Exception(_)
                | ServerEventKind::CudaOom(_)
                | ServerEventKind::VllmFailure(_)
                | ServerEventKind::CppAbort(_)
                | ServerEventKind::MemoryImbalance(_)
                | ServerEventKind::ChildException { .. }
                | ServerEventKind::SigquitFromChild
                | ServerEventKind::SchedulerDead { .. }
                | ServerEventKind::WatchdogTimeout { .. }
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerEvent {
    /// The framework that wrote the line, or whose log stream it appeared in.
    pub framework: Framework,
    pub kind: ServerEventKind,
    pub rank: Option<RankTag>,
    pub time: Option<Timestamp>,
    /// The writer's PID: from the line itself (vLLM's `(Worker_TP1 pid=N)`,
    /// Ray's `(… pid=N)`, NCCL's `host:pid:tid`) or else from an outer layer
    /// (the journal). Inside a container (`container` set) it is a PID of
    /// the container's namespace, not the host's.
    pub pid: Option<u32>,
    /// The unit of the writer when an outer layer recorded it.
    pub unit: Option<String>,
    /// The writer's name from a line prefix: vLLM `EngineCore_DP0`,
    /// `VllmWorker`, Ray `WorkerDict`.
    pub process: Option<String>,
    /// The docker compose service (`sglang-1`) whose output this was.
    pub container: Option<String>,
    /// The host named by the line (NCCL's hostname, Ray's `ip=`).
    pub host: Option<String>,
    pub span: Span,
}

/// Follows `chained_from` links back to the exception that started the
/// chain `event` belongs to: "the real cause under it". Returns `event`
/// itself when it is not an exception or not chained.
pub fn root_cause<'a>(events: &'a [ServerEvent], event: &'a ServerEvent) -> &'a ServerEvent {
    let mut current = event;
    // A chain is finite and acyclic by construction; the bound only guards
    // against a corrupted list.
    for _ in 0..events.len() {
        let ServerEventKind::Exception(e) = &current.kind else {
            break;
        };
        let Some(chained) = e.chained_from else {
            break;
        };
        let earlier = events.iter().find(|c| {
            c.span == chained.span
                && matches!(
                    c.kind,
                    ServerEventKind::Exception(_) | ServerEventKind::MemoryImbalance(_)
                )
        });
        match earlier {
            Some(c) => current = c,
            None => break,
        }
    }
    current
}
