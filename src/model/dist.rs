//! Distributed-runtime reports: NCCL's debug lines and PyTorch c10d's
//! watchdog and error messages (docs/formats/servers.md, docs/rules/nccl-watchdog-timeout.md).

/// `NCCL_DEBUG` level of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NcclLevel {
    Info,
    Warn,
    Error,
    Abort,
    Trace,
}

/// One NCCL debug line: `host:pid:tid [dev] file:line NCCL WARN message`.
#[derive(Debug, Clone, PartialEq)]
pub struct NcclLine {
    pub host: String,
    pub pid: u32,
    pub tid: u32,
    /// The CUDA ordinal in brackets (`[0]`); `None` when NCCL printed `-1`
    /// (no device yet).
    pub cuda_dev: Option<u32>,
    pub level: NcclLevel,
    /// `misc/socket.cc:484`, when printed (WARN lines, and INFO ≥ 2.26).
    pub source: Option<String>,
    /// `(function)` after the source, NCCL ≥ 2.27.
    pub function: Option<String>,
    pub message: String,
    pub detail: NcclDetail,
}

/// What a kept NCCL line says beyond its text.
#[derive(Debug, Clone, PartialEq)]
pub enum NcclDetail {
    /// Nothing more than the message (warnings).
    None,
    /// `NCCL version 2.21.5+cuda12.4`.
    Version(String),
    /// `comm 0x… rank 0 nranks 8 cudaDev 0 [nvmlDev 0] busId 18000 … - Init
    /// COMPLETE`: which GPU a rank of a communicator runs on.
    CommInit {
        rank: u32,
        nranks: u32,
        cuda_dev: u32,
        /// Normalised to sysfs spelling: `0000:18:00.0`.
        bus_id: Option<String>,
    },
    /// `Cuda failure 'out of memory'` / `Cuda failure 2 'out of memory'`.
    CudaFailure { code: Option<u32>, error: String },
    /// `Channel 00 : 0[0] -> 1[1] via SHM/direct/direct`: a channel between
    /// two GPUs of one host that goes through host shared memory, that is,
    /// with no peer-to-peer path between them (P2P off, blocked by PCIe ACS
    /// or an IOMMU, or GPUs that cannot reach each other). The sender's
    /// GPU as NCCL names it after its rank: an NVML index (`2[6]`: rank 2
    /// on GPU 6, whatever `CUDA_VISIBLE_DEVICES` made its CUDA ordinal), or,
    /// before NCCL 2.12, a bus id in sysfs spelling (`11[3e000]`).
    ShmChannel {
        nvml_dev: Option<u32>,
        bus_id: Option<String>,
    },
}

/// A PyTorch c10d report (from a `[E601 12:30:00.4 ProcessGroupNCCL.cpp:629]`
/// line, a `what():` line, or an exception message).
#[derive(Debug, Clone, PartialEq)]
pub struct TorchDist {
    /// The c10 log level letter (`I`, `W`, `E`, `F`) when the line had one.
    pub level: Option<char>,
    /// `ProcessGroupNCCL.cpp:629` from the c10 prefix.
    pub source: Option<String>,
    /// The rank named in the message (`[Rank 1]`, `[PG ID 0 PG GUID 0 Rank 1]`).
    pub rank: Option<u32>,
    pub kind: TorchDistKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TorchDistKind {
    /// `Watchdog caught collective operation timeout: WorkNCCL(SeqNum=…,
    /// OpType=…, …, Timeout(ms)=…) ran for … milliseconds before timing out.`
    WatchdogTimeout {
        seq: u64,
        op: String,
        numel_in: Option<i64>,
        numel_out: Option<i64>,
        /// `None` where the paste cut the line after `OpType=…` (a wrap:
        /// the rest is on the next line, joined to the message there).
        timeout_ms: Option<u64>,
        ran_for_ms: Option<u64>,
    },
    /// `failure detected by watchdog at work sequence id: N PG status: last
    /// enqueued work: N, last completed work: N`: the lowest `last_completed`
    /// across ranks points at the rank that stalled.
    FailureDetected {
        seq: u64,
        last_enqueued: i64,
        last_completed: i64,
    },
    /// `ProcessGroupNCCL's watchdog got stuck for N seconds …`
    WatchdogStuck { seconds: u64 },
    /// `Heartbeat monitor timed out! …`
    HeartbeatTimeout,
    /// `To avoid data inconsistency, we are taking the entire process down.`
    TakingProcessDown,
    /// `NCCL error in: file:line, <reason>, NCCL version X` (c10d) or
    /// `NCCL error: <reason>` (SGLang/vLLM pynccl).
    NcclError {
        reason: String,
        /// `ProcessGroupNCCL.cpp:1970`, c10d only.
        location: Option<String>,
        version: Option<String>,
    },
    /// Any other error-level c10 line (`[E…]`, `[F…]`).
    Other { message: String },
}
