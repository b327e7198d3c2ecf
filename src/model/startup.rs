//! Start-up milestones of a model server and its HTTP front end, with the
//! memory numbers they log in bytes (docs/formats/servers.md).

/// One milestone. SGLang's `GB` are GiB (2^30 bytes), as are vLLM's `GB`
/// (≤ 0.7) and `GiB`; all are converted to bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Landmark {
    /// SGLang `Init torch distributed begin.`
    InitDistributedBegin,
    /// SGLang `Init torch distributed ends. [elapsed=1.92 s, ]mem usage=0.85
    /// GB`, or ≥ 0.5.16 `Init parallel ends. elapsed=… s`.
    InitDistributedEnd {
        elapsed_secs: Option<f64>,
        mem_usage_bytes: Option<u64>,
    },
    /// SGLang ≥ 0.5.16 `Memory baseline taken. mem usage=0.85 GB`.
    MemoryBaseline { mem_usage_bytes: Option<u64> },
    /// SGLang `Load weight begin. avail mem=78.35 GB`.
    LoadWeightBegin { avail_bytes: Option<u64> },
    /// SGLang `Load weight end. [elapsed=… s, ]type=…, dtype=…, avail mem=…
    /// GB[, mem usage=… GB].`
    LoadWeightEnd {
        elapsed_secs: Option<f64>,
        model_type: Option<String>,
        dtype: Option<String>,
        avail_bytes: Option<u64>,
        mem_usage_bytes: Option<u64>,
    },
    /// SGLang `KV Cache is allocated. #tokens: N, K size: X GB, V size: Y GB`
    /// (or the MLA form `KV size: X GB`).
    KvCacheAllocated {
        tokens: Option<u64>,
        k_bytes: Option<u64>,
        v_bytes: Option<u64>,
        kv_bytes: Option<u64>,
    },
    /// SGLang `Memory pool end. avail mem=4.98 GB`.
    MemoryPoolEnd { avail_bytes: Option<u64> },
    /// SGLang `Capture cuda graph begin. … avail mem=… GB`.
    CaptureCudaGraphBegin { avail_bytes: Option<u64> },
    /// SGLang `Capture cuda graph end. Time elapsed: 18.62 s. [mem usage=…
    /// GB. avail mem=… GB.]`
    CaptureCudaGraphEnd {
        elapsed_secs: Option<f64>,
        mem_usage_bytes: Option<u64>,
        avail_bytes: Option<u64>,
    },
    /// SGLang `max_total_num_tokens=N, chunked_prefill_size=…,
    /// max_prefill_tokens=…, max_running_requests=…, context_len=…,
    /// available_gpu_mem=… GB`: the KV pool the scheduler ended up with.
    MaxTotalTokens {
        max_total_num_tokens: u64,
        max_prefill_tokens: Option<u64>,
        max_running_requests: Option<u64>,
        context_len: Option<u64>,
        available_gpu_mem_bytes: Option<u64>,
    },
    /// vLLM `Model loading took 34.0512 GiB and 61.203455 seconds`.
    ModelLoaded {
        weights_bytes: u64,
        elapsed_secs: Option<f64>,
    },
    /// vLLM V1 `GPU KV cache size: 412,336 tokens`.
    KvCacheTokens { tokens: u64 },
    /// vLLM `Maximum concurrency for 32,768 tokens per request: 12.58x`.
    MaxConcurrency {
        tokens_per_request: u64,
        factor: f64,
    },
    /// vLLM ≥ 0.10 `Available KV cache memory: 30.85 GiB`, v0 `… the rest of
    /// the memory reserved for KV Cache is 30.85GiB.`
    AvailableKvCacheMemory { bytes: u64 },
    /// vLLM v0 `# GPU blocks: 25264, # CPU blocks: 3276`.
    KvCacheBlocks { gpu: u64, cpu: u64 },
}

/// uvicorn's lines, bare (`INFO:     …`) or under a server's prefix.
#[derive(Debug, Clone, PartialEq)]
pub enum Uvicorn {
    /// `Started server process [4242]`.
    StartedProcess { pid: u32 },
    /// `Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)`.
    Running { url: String, port: Option<u32> },
    /// `Application startup complete.`
    StartupComplete,
    /// `Shutting down`.
    ShuttingDown,
    /// `Finished server process [2231]`.
    FinishedProcess { pid: u32 },
    /// `Waiting for background tasks to complete.`, `Waiting for
    /// connections to close.`: a graceful shutdown waiting for the
    /// requests in flight (uvicorn/server.py `shutdown()`).
    WaitingForRequests,
    /// `Waiting for application shutdown.`, `Application shutdown
    /// complete.`: the shutdown got past the requests in flight.
    ShutdownProceeding,
    /// `[Errno 98] error while attempting to bind on address ('0.0.0.0',
    /// 30000): address already in use`.
    BindFailed {
        host: String,
        port: u32,
        errno: u32,
        reason: String,
    },
}
