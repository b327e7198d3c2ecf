//! End-to-end tests of the server-output reader: one sample per format
//! variant, fed line by line as an input or as journal messages, pinning the
//! typed fields, spans and the count of unrecognised lines.

use super::*;
use crate::model::{
    ChainLink, Landmark, NcclLevel, OomSource, ProcessMemory, PyException, ServerArgs,
    TorchDistKind, Uvicorn, VllmFailure, root_cause,
};
use crate::source::{Source, SourceId};

fn run_with(text: &str, hint: Option<Framework>) -> (Vec<ServerEvent>, u32) {
    let source = Source::new("t", text.as_bytes());
    let cleaned: Vec<(u32, std::borrow::Cow<'_, str>)> = source.lines().collect();
    let lines: Vec<Line<'_>> = cleaned
        .iter()
        .map(|(n, text)| {
            // As the stream hands lines over: under their frames.
            let peeled = crate::ingest::frame::peel_line(text);
            let text: &str = match peeled.body {
                std::borrow::Cow::Borrowed(b) => b,
                std::borrow::Cow::Owned(o) => Box::leak(o.into_boxed_str()),
            };
            Line {
                span: Span {
                    source: SourceId(0),
                    line: *n,
                },
                text,
                frame: Box::leak(Box::new(peeled.frame)),
            }
        })
        .collect();
    let mut facts = Facts::default();
    let unrecognized = parse(&lines, &mut facts, hint);
    (facts.server_events, unrecognized)
}

fn run(text: &str) -> (Vec<ServerEvent>, u32) {
    run_with(text, None)
}

/// The line numbers `feed` did not recognise.
fn unrecognized_lines(text: &str) -> Vec<u32> {
    let source = Source::new("t", text.as_bytes());
    let mut parser = ServerLogParser::default();
    let mut facts = Facts::default();
    source
        .lines()
        .filter(|(n, l)| {
            let span = Span {
                source: SourceId(0),
                line: *n,
            };
            // As the stream hands lines over: under their frames.
            let peeled = crate::ingest::frame::peel_line(l);
            !parser.feed(&peeled.body, span, &Outer::default(), &mut facts)
        })
        .map(|(n, _)| n)
        .collect()
}

fn exceptions(events: &[ServerEvent]) -> Vec<(&ServerEvent, &PyException)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::Exception(x) => Some((e, x)),
            _ => None,
        })
        .collect()
}

fn landmarks(events: &[ServerEvent]) -> Vec<(u32, Option<u32>, &Landmark)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::Landmark(l) => Some((e.span.line, e.rank.and_then(|r| r.tp), l)),
            _ => None,
        })
        .collect()
}

fn gib(x: f64) -> Option<u64> {
    Some((x * 1073741824.0).round() as u64)
}

// ---------------------------------------------------------------- SGLang

fn imbalances(events: &[ServerEvent]) -> Vec<(Option<u32>, u32, crate::model::MemoryImbalance)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::MemoryImbalance(m) => {
                Some((e.rank.and_then(|r| r.tp), e.span.line, m.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn sglang_interleaved_tracebacks_are_attributed_to_their_ranks_in_order() {
    let log = "\
[2026-11-27 09:38:52 TP1] Scheduler hit an exception: Traceback (most recent call last):
[2026-11-27 09:38:52 TP2] Scheduler hit an exception: Traceback (most recent call last):
  File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process
  File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process
    raise RuntimeError(
RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875
    raise RuntimeError(
RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875

[2026-11-27 09:38:53] Received sigquit from a child process. It usually means the child failed.";
    let (events, unrecognized) = run_with(log, Some(Framework::Sglang));
    assert_eq!(unrecognized, 0);
    let found = imbalances(&events);
    assert_eq!(
        found.iter().map(|f| (f.0, f.1)).collect::<Vec<_>>(),
        vec![(Some(1), 6), (Some(2), 8)]
    );
    let m = &found[0].2;
    assert_eq!(m.exception.as_deref(), Some("RuntimeError"));
    assert_eq!(m.min_label.as_deref(), Some("pre_model_load_memory"));
    assert_eq!(m.min_gib, Some(39.74761962890625));
    assert_eq!(m.local_gib, Some(93.7274169921875));
    assert_eq!(m.threshold_gib, Some(84.35467529296875));
    assert!(
        events
            .iter()
            .any(|e| e.kind == ServerEventKind::SigquitFromChild)
    );
    assert!(events.iter().all(|e| e.framework == Framework::Sglang));
}

#[test]
fn sglang_old_value_error_variant_and_number_less_variant() {
    let (events, _) = run("\
[2025-09-02 10:00:11 TP1] Scheduler hit an exception: Traceback (most recent call last):
ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=39.5, local_gpu_memory=79.5, local_gpu_memory * 0.9=71.55
[2024-01-02 10:00:11 TP0] Traceback (most recent call last):
ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.");
    let found = imbalances(&events);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].2.min_label.as_deref(), Some("min_per_gpu_memory"));
    assert_eq!(found[0].2.exception.as_deref(), Some("ValueError"));
    assert_eq!(found[1].0, Some(0));
    assert_eq!(found[1].2.min_gib, None);
}

#[test]
fn sglang_server_args_in_both_reprs() {
    let (events, _) = run("\
[2026-11-27 09:38:41] server_args=ServerArgs(model_path='/models/Kimi-K2-Instruct', tp_size=8, mem_fraction_static=0.85, port=30000, base_gpu_id=0, gpu_id_step=1)
[2026-11-27 09:38:41] server_args={'model_path': '/models/x', 'tp_size': 4, 'base_gpu_id': 2}");
    let args: Vec<&ServerArgs> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::Args(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(args[0].tp_size, Some(8));
    assert_eq!(
        args[0].model_path.as_deref(),
        Some("/models/Kimi-K2-Instruct")
    );
    assert_eq!(args[0].mem_fraction_static, Some(0.85));
    assert_eq!(args[1].tp_size, Some(4));
    assert_eq!(args[1].base_gpu_id, Some(2));
}

#[test]
fn sglang_unprefixed_noise_outside_a_traceback_is_unrecognised() {
    // An exception class's line is the end of a traceback whose top was
    // cut; a name that is not one (`Timeout: x`) stays unread.
    let (events, unrecognized) = run_with(
        "[2026-11-27 09:38:41] ok\nLoading safetensors checkpoint shards:  50% Completed\nValueError: stray\n\nTimeout: stray\n\nError: not Python",
        Some(Framework::Sglang),
    );
    assert_eq!(unrecognized, 3);
    assert_eq!(exceptions(&events).len(), 1);
}

#[test]
fn sglang_prefix_variants_milliseconds_and_ranks() {
    let (events, unrecognized) = run("\
[2026-03-05 10:00:09.123 DP1 TP3] Init torch distributed begin.
[2026-03-05 10:00:09 PP1 TP0] Init torch distributed begin.
[2026-03-05 10:00:09 DP0 PP1 ATTN_CP1 MOE_DP0 TP2 EP2] Init torch distributed begin.
[2026-03-05 10:00:09 TP1 EP1] Init torch distributed begin.
[2026-03-05 10:00:10] The server is fired up and ready to roll!");
    assert_eq!(unrecognized, 0);
    let ranks: Vec<String> = events
        .iter()
        .map(|e| e.rank.map(|r| r.to_string()).unwrap_or_default())
        .collect();
    assert_eq!(
        ranks,
        [
            "DP1 TP3",
            "PP1 TP0",
            "DP0 PP1 ATTN_CP1 MOE_DP0 TP2 EP2",
            "TP1 EP1",
            ""
        ]
    );
    assert_eq!(
        events[0].time.unwrap().local.to_string(),
        "2026-03-05 10:00:09.123"
    );
    assert!(events[0].time.unwrap().year_known);
    assert_eq!(events[4].kind, ServerEventKind::Ready);
    assert_eq!(events[2].rank.unwrap().attn_cp, Some(1));
}

#[test]
fn sglang_startup_landmarks_in_bytes() {
    let (events, unrecognized) = run("\
[2024-06-01 12:00:09 TP0] Init torch distributed begin.
[2024-06-01 12:00:11 TP0] Init torch distributed ends. mem usage=0.85 GB
[2024-06-01 12:00:11 TP1] Init torch distributed ends. elapsed=1.92 s, mem usage=0.85 GB
[2024-06-01 12:00:11 TP0] Load weight begin. avail mem=78.35 GB
[2024-06-01 12:01:20 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=11.12 GB, mem usage=67.23 GB.
[2024-06-01 12:01:20 TP1] Load weight end. elapsed=61.03 s, type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=11.12 GB, mem usage=67.23 GB.
[2024-06-01 12:01:21 TP0] KV Cache is allocated. #tokens: 187432, K size: 2.86 GB, V size: 2.86 GB
[2024-06-01 12:01:21 TP1] KV Cache is allocated. #tokens: 187432, KV size: 5.72 GB
[2024-06-01 12:01:21 TP0] Memory pool end. avail mem=4.98 GB
[2024-06-01 12:01:22 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=4.97 GB
[2024-06-01 12:01:40 TP0] Capture cuda graph end. Time elapsed: 18.62 s. mem usage=0.06 GB. avail mem=4.91 GB.
[2024-06-01 12:01:41 TP0] max_total_num_tokens=187432, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, available_gpu_mem=4.91 GB
[2024-06-01 12:01:41 TP0] Memory baseline taken. mem usage=0.85 GB
[2024-06-01 12:01:41 TP0] Init parallel ends. elapsed=2.10 s
[2024-06-01 12:01:41 TP0] sglang is using nccl==2.21.5");
    assert_eq!(unrecognized, 0);
    let found = landmarks(&events);
    let expected = [
        (1, Some(0), Landmark::InitDistributedBegin),
        (
            2,
            Some(0),
            Landmark::InitDistributedEnd {
                elapsed_secs: None,
                mem_usage_bytes: gib(0.85),
            },
        ),
        (
            3,
            Some(1),
            Landmark::InitDistributedEnd {
                elapsed_secs: Some(1.92),
                mem_usage_bytes: gib(0.85),
            },
        ),
        (
            4,
            Some(0),
            Landmark::LoadWeightBegin {
                avail_bytes: gib(78.35),
            },
        ),
        (
            5,
            Some(0),
            Landmark::LoadWeightEnd {
                elapsed_secs: None,
                model_type: Some("LlamaForCausalLM".into()),
                dtype: Some("torch.bfloat16".into()),
                avail_bytes: gib(11.12),
                mem_usage_bytes: gib(67.23),
            },
        ),
        (
            6,
            Some(1),
            Landmark::LoadWeightEnd {
                elapsed_secs: Some(61.03),
                model_type: Some("LlamaForCausalLM".into()),
                dtype: Some("torch.bfloat16".into()),
                avail_bytes: gib(11.12),
                mem_usage_bytes: gib(67.23),
            },
        ),
        (
            7,
            Some(0),
            Landmark::KvCacheAllocated {
                tokens: Some(187432),
                k_bytes: gib(2.86),
                v_bytes: gib(2.86),
                kv_bytes: None,
            },
        ),
        (
            8,
            Some(1),
            Landmark::KvCacheAllocated {
                tokens: Some(187432),
                k_bytes: None,
                v_bytes: None,
                kv_bytes: gib(5.72),
            },
        ),
        (
            9,
            Some(0),
            Landmark::MemoryPoolEnd {
                avail_bytes: gib(4.98),
            },
        ),
        (
            10,
            Some(0),
            Landmark::CaptureCudaGraphBegin {
                avail_bytes: gib(4.97),
            },
        ),
        (
            11,
            Some(0),
            Landmark::CaptureCudaGraphEnd {
                elapsed_secs: Some(18.62),
                mem_usage_bytes: gib(0.06),
                avail_bytes: gib(4.91),
            },
        ),
        (
            12,
            Some(0),
            Landmark::MaxTotalTokens {
                max_total_num_tokens: 187432,
                max_prefill_tokens: Some(16384),
                max_running_requests: Some(4096),
                context_len: Some(131072),
                available_gpu_mem_bytes: gib(4.91),
            },
        ),
        (
            13,
            Some(0),
            Landmark::MemoryBaseline {
                mem_usage_bytes: gib(0.85),
            },
        ),
        (
            14,
            Some(0),
            Landmark::InitDistributedEnd {
                elapsed_secs: Some(2.10),
                mem_usage_bytes: None,
            },
        ),
    ];
    assert_eq!(found.len(), expected.len());
    for (got, want) in found.iter().zip(expected.iter()) {
        assert_eq!((got.0, got.1, got.2), (want.0, want.1, &want.2));
    }
    assert!(events.iter().any(|e| e.kind
        == ServerEventKind::Version {
            component: "NCCL".into(),
            version: "2.21.5".into()
        }));
}

#[test]
fn sglang_failure_path_lines() {
    let (events, unrecognized) = run("\
[2025-01-01 10:00:00] Rank 0 scheduler is dead. Please check if there are relevant logs.
[2025-01-01 10:05:00 TP0] Watchdog timeout (self.watchdog_timeout=300)
[2025-01-01 10:05:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300.0, self.soft=False)
[2025-01-01 10:05:01] SIGQUIT received. signum=None, frame=None. It usually means one child failed.");
    assert_eq!(unrecognized, 0);
    let kinds: Vec<&ServerEventKind> = events.iter().map(|e| &e.kind).collect();
    assert_eq!(
        kinds,
        [
            &ServerEventKind::SchedulerDead { rank: 0 },
            &ServerEventKind::WatchdogTimeout {
                timeout_secs: Some(300.0)
            },
            &ServerEventKind::WatchdogTimeout {
                timeout_secs: Some(300.0)
            },
            &ServerEventKind::SigquitFromChild,
        ]
    );
}

#[test]
fn uvicorn_lines_bare_and_under_a_prefix() {
    let (events, unrecognized) = run("\
[2024-06-01 12:02:41] INFO:     Started server process [4242]
[2024-06-01 12:02:41] INFO:     Waiting for application startup.
[2024-06-01 12:02:41] INFO:     Application startup complete.
[2024-06-01 12:02:41] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2024-06-01 12:03:10] INFO:     10.1.2.3:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK
ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use
INFO:     Finished server process [4242]
ERROR: not uvicorn's padding");
    assert_eq!(unrecognized, 1);
    let got: Vec<(u32, &Uvicorn)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::Uvicorn(u) => Some((e.span.line, u)),
            _ => None,
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, &Uvicorn::StartedProcess { pid: 4242 }),
            (3, &Uvicorn::StartupComplete),
            (
                4,
                &Uvicorn::Running {
                    url: "http://0.0.0.0:30000".into(),
                    port: Some(30000)
                }
            ),
            (
                6,
                &Uvicorn::BindFailed {
                    host: "0.0.0.0".into(),
                    port: 30000,
                    errno: 98,
                    reason: "address already in use".into()
                }
            ),
            (7, &Uvicorn::FinishedProcess { pid: 4242 }),
        ]
    );
}

// ---------------------------------------------------------------- vLLM

#[test]
fn vllm_line_formats_by_version() {
    let (events, unrecognized) = run("\
INFO 02-03 13:14:04 api_server.py:706] vLLM API server version 0.5.5
INFO 06-01 12:00:00 [api_server.py:1043] vLLM API server version 0.8.5
INFO 06-01 12:00:00 [v1/engine/core.py:58] vLLM API server version 0.10.2
(APIServer pid=4200) INFO 06-01 12:00:00 [api_server.py:1805] vLLM API server version 0.33.0
\x1b[1;36m(VllmWorker rank=1 pid=4243)\x1b[0;0m INFO 06-01 12:01:10 [gpu_model_runner.py:1347] Model loading took 34.0512 GiB and 61.203455 seconds
DEBUG 06-01 12:01:10 [x.py:1] anything at all");
    assert_eq!(unrecognized, 0);
    let versions: Vec<(u32, &str, Option<u32>)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::Version { version, .. } => {
                Some((e.span.line, version.as_str(), e.pid))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        versions,
        [
            (1, "0.5.5", None),
            (2, "0.8.5", None),
            (3, "0.10.2", None),
            (4, "0.33.0", Some(4200))
        ]
    );
    let first = events[0].time.unwrap();
    assert_eq!(first.local.to_string(), "2000-02-03 13:14:04");
    assert!(!first.year_known);
    assert!(events.iter().all(|e| e.framework == Framework::Vllm));
    let loaded = &events[4];
    assert_eq!(
        loaded.kind,
        ServerEventKind::Landmark(Landmark::ModelLoaded {
            weights_bytes: gib(34.0512).unwrap(),
            elapsed_secs: Some(61.203455)
        })
    );
    assert_eq!(
        (loaded.pid, loaded.process.as_deref()),
        (Some(4243), Some("VllmWorker"))
    );
    assert_eq!(loaded.rank.and_then(|r| r.global), Some(1));
}

#[test]
fn vllm_process_prefixes_give_pid_process_and_ranks() {
    let prefixes = [
        (
            "(VllmWorkerProcess pid=4243) ",
            "VllmWorkerProcess",
            4243,
            "",
            Framework::Vllm,
        ),
        (
            "(VllmWorker rank=2 pid=4244) ",
            "VllmWorker",
            4244,
            "rank2",
            Framework::Vllm,
        ),
        (
            "(Worker_TP1 pid=4245) ",
            "Worker_TP1",
            4245,
            "TP1",
            Framework::Vllm,
        ),
        (
            "(Worker_PP1_TP0 pid=4246) ",
            "Worker_PP1_TP0",
            4246,
            "PP1 TP0",
            Framework::Vllm,
        ),
        (
            "(EngineCore_DP0 pid=4201) ",
            "EngineCore_DP0",
            4201,
            "DP0",
            Framework::Vllm,
        ),
        (
            "(EngineCore pid=4202) ",
            "EngineCore",
            4202,
            "",
            Framework::Vllm,
        ),
        (
            "(RayWorkerVllm pid=4247) ",
            "RayWorkerVllm",
            4247,
            "",
            Framework::Vllm,
        ),
        (
            "(APIServer pid=4200) ",
            "APIServer",
            4200,
            "",
            Framework::Vllm,
        ),
        (
            "(MainProcess pid=4199) ",
            "MainProcess",
            4199,
            "",
            Framework::Vllm,
        ),
        (
            "(WorkerDict pid=3490362, ip=10.0.0.3) ",
            "WorkerDict",
            3490362,
            "",
            Framework::Unknown,
        ),
    ];
    for (prefix, name, pid, ranks, framework) in prefixes {
        let line = format!("{prefix}Traceback (most recent call last):\n{prefix}ValueError: boom");
        let (events, unrecognized) = run(&line);
        assert_eq!(unrecognized, 0, "{prefix}");
        let e = &events[0];
        assert_eq!(e.process.as_deref(), Some(name), "{prefix}");
        assert_eq!(e.pid, Some(pid), "{prefix}");
        assert_eq!(
            e.rank.map(|r| r.to_string()).unwrap_or_default(),
            ranks,
            "{prefix}"
        );
        assert_eq!(e.framework, framework, "{prefix}");
    }
}

/// docs/formats/servers.md's V1 failure chain: the engine core logs the cause in a
/// multi-line record; the API server raises the wrapper.
const VLLM_V1_FAILURE: &str = "\
(APIServer pid=4200) INFO 06-01 12:00:00 [utils.py:328] non-default args: {'model': '/models/Qwen2.5-72B-Instruct', 'tensor_parallel_size': 4, 'gpu_memory_utilization': 0.95, 'max_model_len': 32768}
(EngineCore_DP0 pid=4201) INFO 06-01 12:00:05 [core.py:73] Initializing a V1 LLM engine (v0.10.1.1) with config: model='/models/Qwen2.5-72B-Instruct', speculative_config=None, dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=4, pipeline_parallel_size=1
(Worker_TP1 pid=4244) INFO 06-01 12:01:20 [gpu_worker.py:298] Available KV cache memory: 30.85 GiB
(EngineCore_DP0 pid=4201) INFO 06-01 12:01:22 [kv_cache_utils.py:849] GPU KV cache size: 412,336 tokens
(EngineCore_DP0 pid=4201) INFO 06-01 12:01:22 [kv_cache_utils.py:853] Maximum concurrency for 32,768 tokens per request: 12.58x
(EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718] EngineCore failed to start.\r
(EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718] Traceback (most recent call last):\r
(EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718]   File \"/opt/vllm/vllm/v1/engine/core.py\", line 709, in run_engine_core\r
(EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718]     engine_core = EngineCoreProc(*args, **kwargs)\r
(EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718]                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\r
(EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718]   File \"/opt/vllm/vllm/v1/core/kv_cache_utils.py\", line 686, in check_enough_kv_cache_memory\r
(EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718]     raise ValueError(\"No available memory for the cache blocks. \"\r
(EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
(EngineCore_DP0 pid=4201) Process EngineCore_DP0:
(APIServer pid=4200) Traceback (most recent call last):
(APIServer pid=4200)   File \"/opt/vllm/vllm/v1/engine/utils.py\", line 691, in wait_for_engine_startup
(APIServer pid=4200)     raise RuntimeError(\"Engine core initialization failed. \"
(APIServer pid=4200) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}
";

#[test]
fn vllm_v1_failure_chain_with_crlf_records() {
    let (events, unrecognized) = run(VLLM_V1_FAILURE);
    assert_eq!(unrecognized, 0);
    let args: Vec<&ServerArgs> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::Args(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(args.len(), 2);
    assert_eq!(
        (
            args[0].tp_size,
            args[0].gpu_memory_utilization,
            args[0].max_model_len
        ),
        (Some(4), Some(0.95), Some(32768))
    );
    assert_eq!(
        args[1].model_path.as_deref(),
        Some("/models/Qwen2.5-72B-Instruct")
    );
    let found = landmarks(&events);
    assert_eq!(
        found.iter().map(|l| l.2.clone()).collect::<Vec<_>>(),
        [
            Landmark::AvailableKvCacheMemory {
                bytes: gib(30.85).unwrap()
            },
            Landmark::KvCacheTokens { tokens: 412_336 },
            Landmark::MaxConcurrency {
                tokens_per_request: 32_768,
                factor: 12.58
            },
        ]
    );
    assert_eq!(found[0].1, Some(1), "Worker_TP1's rank");
    let failures: Vec<(u32, Option<u32>, &VllmFailure)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::VllmFailure(f) => Some((e.span.line, e.pid, f)),
            _ => None,
        })
        .collect();
    assert_eq!(
        failures,
        [
            (6, Some(4201), &VllmFailure::EngineCoreFailedToStart),
            (
                18,
                Some(4200),
                &VllmFailure::EngineInitFailed {
                    failed: vec![("EngineCore_DP0".into(), 1)]
                }
            ),
        ]
    );
    let found = exceptions(&events);
    assert_eq!(found.len(), 2);
    let (e, cause) = found[0];
    assert_eq!(
        (e.span.line, e.pid, e.process.as_deref()),
        (13, Some(4201), Some("EngineCore_DP0"))
    );
    assert_eq!(cause.name, "ValueError");
    assert!(
        cause
            .message
            .starts_with("No available memory for the cache blocks.")
    );
    assert_eq!(
        cause
            .frames
            .iter()
            .map(|f| (f.line, f.function.as_deref()))
            .collect::<Vec<_>>(),
        [
            (709, Some("run_engine_core")),
            (686, Some("check_enough_kv_cache_memory"))
        ]
    );
    assert_eq!(e.rank.and_then(|r| r.dp), Some(0));
    assert_eq!(e.time.unwrap().local.to_string(), "2000-06-01 12:01:25");
    let (wrapper, w) = found[1];
    assert_eq!((wrapper.span.line, wrapper.pid), (18, Some(4200)));
    assert_eq!(w.name, "RuntimeError");
    assert_eq!(w.frames.len(), 1);
}

#[test]
fn vllm_crlf_endings_are_stripped_by_line_cleaning() {
    // The source splits on `\n`; the `\r` before it is a line ending, not a
    // progress-bar redraw, so nothing of the line is lost.
    let source = Source::new(
        "v",
        b"ERROR 06-01 12:00:10 [core.py:396] EngineCore hit an exception: Traceback (most recent call last):\r\nERROR 06-01 12:00:10 [core.py:396]   File \"x.py\", line 1, in f\r\nERROR 06-01 12:00:10 [core.py:396] RuntimeError: boom\n",
    );
    let lines: Vec<String> = source.lines().map(|(_, l)| l.into_owned()).collect();
    assert!(lines[0].ends_with("(most recent call last):"));
    assert!(lines[1].ends_with("line 1, in f"));
    // The same text arriving as one journal message keeps its `\r`s; feed
    // strips them too.
    let mut parser = ServerLogParser::default();
    let mut facts = Facts::default();
    let span = Span {
        source: SourceId(0),
        line: 1,
    };
    for line in "ERROR 06-01 12:00:10 [core.py:396] Traceback (most recent call last):\r\nERROR 06-01 12:00:10 [core.py:396]   File \"x.py\", line 1, in f\r\nERROR 06-01 12:00:10 [core.py:396] RuntimeError: boom".split('\n') {
        assert!(parser.feed(line, span, &Outer::default(), &mut facts));
    }
    let found = exceptions(&facts.server_events);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].1.message, "boom");
    assert_eq!(found[0].1.frames[0].function.as_deref(), Some("f"));
}

#[test]
fn vllm_v0_failures_and_landmarks() {
    let (events, unrecognized) = run("\
INFO 06-01 12:00:05 llm_engine.py:185] Initializing an LLM engine (v0.5.5) with config: model='/models/x', tensor_parallel_size=2, max_seq_len=4096
INFO 06-01 12:00:30 worker.py:238] Memory profiling takes 5.12 seconds\r
INFO 06-01 12:00:30 worker.py:238] the current vLLM instance can use total_gpu_memory (79.15GiB) x gpu_memory_utilization (0.90) = 71.24GiB\r
INFO 06-01 12:00:30 worker.py:238] model weights take 34.05GiB; non_torch_memory takes 0.25GiB; PyTorch activation peak memory takes 6.09GiB; the rest of the memory reserved for KV Cache is 30.85GiB.
INFO 06-01 12:00:30 gpu_executor.py:76] # GPU blocks: 25264, # CPU blocks: 3276
ERROR 06-01 12:01:00 multiproc_worker_utils.py:116] Worker VllmWorkerProcess pid 4243 died, exit code: -9
(VllmWorkerProcess pid=4244) ERROR 06-01 12:00:10 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess while processing method init_device.
ERROR 06-01 12:02:00 [multiproc_executor.py:140] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.
ERROR 06-01 12:02:00 [multiproc_executor.py:140] Worker proc VllmWorker-2 died unexpectedly (exit code: -6), shutting down executor.
ERROR 06-01 12:02:00 [core_client.py:1] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.
ERROR 06-01 12:02:00 [core.py:1] EngineCore encountered a fatal error.
ERROR 06-01 12:02:00 [async_llm.py:1] EngineCore encountered an issue. See stack trace (above) for the root cause.
ERROR 06-01 12:02:00 [multiproc_executor.py:1] WorkerProc failed to start.
ERROR 06-01 12:02:00 [multiproc_executor.py:1] WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.");
    assert_eq!(unrecognized, 0);
    let failures: Vec<&VllmFailure> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::VllmFailure(f) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(
        failures,
        [
            &VllmFailure::WorkerDied {
                name: "VllmWorkerProcess".into(),
                pid: Some(4243),
                exit_code: Some(-9)
            },
            &VllmFailure::WorkerException {
                worker: "VllmWorkerProcess".into(),
                method: "init_device".into()
            },
            &VllmFailure::WorkerDied {
                name: "VllmWorker-1".into(),
                pid: None,
                exit_code: None
            },
            &VllmFailure::WorkerDied {
                name: "VllmWorker-2".into(),
                pid: None,
                exit_code: Some(-6)
            },
            &VllmFailure::EngineCoreDied {
                name: "EngineCore_DP0".into()
            },
            &VllmFailure::EngineCoreFatalError,
            &VllmFailure::EngineDead,
            &VllmFailure::WorkerProcFailedToStart,
            &VllmFailure::WorkerProcInitFailed,
        ]
    );
    let found = landmarks(&events);
    assert_eq!(
        found.iter().map(|l| l.2.clone()).collect::<Vec<_>>(),
        [
            Landmark::AvailableKvCacheMemory {
                bytes: gib(30.85).unwrap()
            },
            Landmark::KvCacheBlocks {
                gpu: 25264,
                cpu: 3276
            },
        ]
    );
    assert!(events.iter().any(|e| matches!(&e.kind, ServerEventKind::Args(a) if a.tp_size == Some(2) && a.max_model_len == Some(4096))));
}

#[test]
fn vllm_year_comes_from_an_outer_timestamp() {
    let mut parser = ServerLogParser::default();
    let mut facts = Facts::default();
    let span = Span {
        source: SourceId(0),
        line: 1,
    };
    let outer = |y, m, d| Outer {
        pid: Some(4200),
        unit: Some("vllm.service".into()),
        time: Some(Timestamp {
            local: NaiveDate::from_ymd_opt(y, m, d)
                .unwrap()
                .and_hms_opt(0, 0, 1)
                .unwrap(),
            offset_secs: Some(0),
            year_known: true,
        }),
    };
    parser.feed(
        "INFO 06-01 12:00:00 [api_server.py:1043] vLLM API server version 0.8.5",
        span,
        &outer(2026, 6, 1),
        &mut facts,
    );
    // Written on Dec 31, stamped by journald just after New Year.
    parser.feed(
        "INFO 12-31 23:59:59 [api_server.py:1043] vLLM API server version 0.8.5",
        span,
        &outer(2027, 1, 1),
        &mut facts,
    );
    let times: Vec<String> = facts
        .server_events
        .iter()
        .map(|e| e.time.unwrap().local.to_string())
        .collect();
    assert_eq!(times, ["2026-06-01 12:00:00", "2026-12-31 23:59:59"]);
    assert!(
        facts
            .server_events
            .iter()
            .all(|e| e.time.unwrap().year_known)
    );
    assert_eq!(facts.server_events[0].unit.as_deref(), Some("vllm.service"));
}

// ---------------------------------------------------------------- tracebacks

#[test]
fn chained_tracebacks_link_the_wrapper_to_the_real_cause() {
    // SGLang's CUDA graph capture failure wraps an OOM (docs/rules/sglang-cuda-graph-capture-failed.md).
    let log = "\
[2025-06-01 12:01:22 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File \"/opt/sglang/cuda_graph_runner.py\", line 300, in __init__
    self.capture()
  File \"/opt/torch/cuda/graphs.py\", line 10, in capture
    out = fn()
          ^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free. Process 12345 has 40.12 GiB memory in use. Including non-PyTorch memory, this process has 38.00 GiB memory in use. Of the allocated memory 33.20 GiB is allocated by PyTorch, and 812.34 MiB is reserved by PyTorch but unallocated.

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process
    raise Exception(
Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free.
Possible solutions:
1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)
2. set --cuda-graph-max-bs to a smaller value (e.g., 16)

[2025-06-01 12:01:23] Received sigquit from a child process. It usually means the child failed.";
    let (events, unrecognized) = run(log);
    assert_eq!(unrecognized, 0);
    let found = exceptions(&events);
    assert_eq!(found.len(), 2);
    let (inner_event, inner) = found[0];
    let (outer_event, outer) = found[1];
    assert_eq!((inner_event.span.line, outer_event.span.line), (7, 14));
    assert_eq!(inner.name, "torch.OutOfMemoryError");
    assert!(inner.is_root_cause() && !inner.is_outermost());
    assert_eq!(inner.wrapped_by, Some(outer_event.span));
    assert_eq!(inner.frames.len(), 2);
    assert_eq!(outer.name, "Exception");
    assert!(outer.is_outermost() && !outer.is_root_cause());
    assert_eq!(outer.chained_from.unwrap().link, ChainLink::DuringHandling);
    assert_eq!(outer.chained_from.unwrap().span, inner_event.span);
    assert!(
        outer
            .message
            .ends_with("2. set --cuda-graph-max-bs to a smaller value (e.g., 16)")
    );
    assert_eq!(
        outer_event.rank.and_then(|r| r.tp),
        Some(0),
        "the chain keeps the announcing rank"
    );
    assert!(std::ptr::eq(root_cause(&events, outer_event), inner_event));
    // Both lines state an OOM; the root's carries the exception class.
    let ooms: Vec<(u32, Option<&str>)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::CudaOom(o) => Some((e.span.line, o.exception.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(
        ooms,
        [(7, Some("torch.OutOfMemoryError")), (14, Some("Exception"))]
    );
}

#[test]
fn direct_cause_chain_and_cuda_error_suffix_lines() {
    let (events, unrecognized) = run("\
Traceback (most recent call last):
  File \"a.py\", line 1, in f
RuntimeError: CUDA error: out of memory
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File \"b.py\", line 2, in g
torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
Last error:
Error: failed to extend /dev/shm/nccl-AbCdEf to 9637892 bytes");
    assert_eq!(unrecognized, 0);
    let found = exceptions(&events);
    assert_eq!(found[0].1.message.lines().count(), 4);
    assert_eq!(
        found[1].1.chained_from.unwrap().link,
        ChainLink::DirectCause
    );
    assert!(found[1].1.message.ends_with("to 9637892 bytes"));
    let oom = events.iter().find_map(|e| match &e.kind {
        ServerEventKind::CudaOom(o) => Some(o),
        _ => None,
    });
    assert_eq!(oom.map(|o| o.source), Some(OomSource::CudaRuntime));
    let nccl = events.iter().find_map(|e| match &e.kind {
        ServerEventKind::TorchDist(t) => Some(&t.kind),
        _ => None,
    });
    assert_eq!(
        nccl,
        Some(&TorchDistKind::NcclError {
            reason: "unhandled system error".into(),
            location: Some("../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970".into()),
            version: Some("2.21.5".into()),
        })
    );
}

#[test]
fn rank_prefixed_tracebacks_interleave_without_mixing_frames() {
    let (events, unrecognized) = run("\
[rank0]: Traceback (most recent call last):
[rank1]: Traceback (most recent call last):
[rank0]:   File \"/w/train.py\", line 10, in <module>
[rank1]:   File \"/w/train.py\", line 10, in <module>
[rank1]:     main()
[rank0]:     main()
[rank1]:   File \"/w/train.py\", line 7, in main
[rank1]:     x = torch.empty(n, device=\"cuda\")
[rank1]:         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which 3.00 GiB is free. Process 777 has 76.14 GiB memory in use. Of the allocated memory 75.00 GiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.
[rank0]:   File \"/w/train.py\", line 8, in main
[rank0]:     dist.barrier()
[rank0]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 0.");
    assert_eq!(unrecognized, 0);
    let found = exceptions(&events);
    let summary: Vec<(Option<u32>, &str, Vec<u32>)> = found
        .iter()
        .map(|(e, x)| {
            (
                e.rank.and_then(|r| r.global),
                x.name.as_str(),
                x.frames.iter().map(|f| f.line).collect(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (Some(1), "torch.OutOfMemoryError", vec![10, 7]),
            (Some(0), "torch.distributed.DistBackendError", vec![10, 8]),
        ]
    );
    let oom = events.iter().find_map(|e| match &e.kind {
        ServerEventKind::CudaOom(o) => Some((e.rank.and_then(|r| r.global), o)),
        _ => None,
    });
    let (rank, oom) = oom.unwrap();
    assert_eq!(rank, Some(1));
    assert_eq!(oom.gpu, Some(1));
    assert_eq!(oom.tried_bytes, gib(20.0));
    assert_eq!(
        oom.processes,
        [ProcessMemory {
            pid: 777,
            bytes: gib(76.14).unwrap()
        }]
    );
    assert_eq!(oom.reserved_unallocated_bytes, Some(0));
}

#[test]
fn unprefixed_interleaved_tracebacks_drop_frames_they_cannot_attribute() {
    let (events, _) = run("\
[2026-11-27 09:38:52 TP2] Scheduler hit an exception: Traceback (most recent call last):
  File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process
[2026-11-27 09:38:52 TP6] Scheduler hit an exception: Traceback (most recent call last):
  File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process
  File \"/opt/sglang/model_runner.py\", line 781, in init_torch_distributed
RuntimeError: boom two
  File \"/opt/sglang/model_runner.py\", line 781, in init_torch_distributed
RuntimeError: boom six");
    let found = exceptions(&events);
    assert_eq!(
        found
            .iter()
            .map(|(e, x)| (
                e.rank.and_then(|r| r.tp),
                x.message.as_str(),
                x.frames.len()
            ))
            .collect::<Vec<_>>(),
        [(Some(2), "boom two", 0), (Some(6), "boom six", 0)]
    );
}

#[test]
fn cpp_abort_from_the_nccl_watchdog() {
    let (events, unrecognized) = run("\
[rank1]:[E601 12:30:00.426415540 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
[rank1]:[E601 12:30:00.426500000 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 1]  failure detected by watchdog at work sequence id: 12 PG status: last enqueued work: 12, last completed work: 11
[rank1]:[E601 12:30:00.426600000 ProcessGroupNCCL.cpp:667] Stack trace of the failed collective not found, potentially because FlightRecorder is disabled.
[rank1]:[E601 12:30:00.426700000 ProcessGroupNCCL.cpp:681] [Rank 1] To avoid data inconsistency, we are taking the entire process down.
[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800531 milliseconds before timing out.
[W601 12:30:01.000000000 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL.
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:607 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f2e0d8b6897 in /usr/lib/python3/dist-packages/torch/lib/libc10.so)
frame #1: <unknown function> + 0x1d2 (0x7f2e0eb8c1b2 in /usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so)");
    assert_eq!(unrecognized, 0);
    let dist: Vec<(u32, Option<u32>, Option<char>, &TorchDistKind)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::TorchDist(t) => Some((e.span.line, t.rank, t.level, &t.kind)),
            _ => None,
        })
        .collect();
    let timeout = |seq, op: &str, numel, timeout_ms, ran_for_ms| TorchDistKind::WatchdogTimeout {
        seq,
        op: op.into(),
        numel_in: numel,
        numel_out: numel,
        timeout_ms: Some(timeout_ms),
        ran_for_ms: Some(ran_for_ms),
    };
    assert_eq!(
        dist,
        [
            (1, Some(1), Some('E'), &timeout(12, "ALLREDUCE", Some(1), 600_000, 600_012)),
            (2, Some(1), Some('E'), &TorchDistKind::FailureDetected { seq: 12, last_enqueued: 12, last_completed: 11 }),
            (3, None, Some('E'), &TorchDistKind::Other { message: "Stack trace of the failed collective not found, potentially because FlightRecorder is disabled.".into() }),
            (4, Some(1), Some('E'), &TorchDistKind::TakingProcessDown),
            (5, Some(0), Some('E'), &timeout(7, "BROADCAST", None, 1_800_000, 1_800_531)),
            (8, Some(1), None, &timeout(12, "ALLREDUCE", Some(1), 600_000, 600_012)),
        ]
    );
    assert_eq!(events[0].rank.and_then(|r| r.global), Some(1));
    assert_eq!(
        events[0].time.unwrap().local.to_string(),
        "2000-06-01 12:30:00.426415540"
    );
    let abort = events.iter().find_map(|e| match &e.kind {
        ServerEventKind::CppAbort(a) => Some((e.span.line, a)),
        _ => None,
    });
    let (line, abort) = abort.unwrap();
    assert_eq!(line, 7);
    assert_eq!(abort.exception.as_deref(), Some("c10::DistBackendError"));
    assert!(
        abort
            .what
            .as_deref()
            .unwrap()
            .contains("Process group watchdog thread terminated")
    );
    assert_eq!(
        abort.raised_from.as_deref(),
        Some("checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:607")
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.kind, ServerEventKind::CppAbort(_)))
            .count(),
        1
    );
}

// ---------------------------------------------------------------- NCCL

#[test]
fn nccl_lines_old_and_new_keep_warnings_version_and_ranks() {
    let (events, unrecognized) = run("\
gpu-node-7:4318:4318 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>
gpu-node-7:4318:4318 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
gpu-node-7:4318:4401 [0] NCCL INFO comm 0x55d0c6a0 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1b2c3d4e5f607182 - Init COMPLETE

gpu-node-7:4318:4401 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.12<43337> failed : Connection refused
[2025-06-01 12:00:10] gpu-node-7:4319:4402 [1] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-AbCdEf to 9637892 bytes
[2025-06-01 12:00:11] gpu-node-7:4319:4402 [1] include/alloc.h:103 (ncclCudaCalloc) NCCL WARN Cuda failure 2 'out of memory'");
    assert_eq!(unrecognized, 0);
    let nccl: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::Nccl(n) => Some((
                e.span.line,
                e.pid,
                n.level,
                n.source.as_deref(),
                n.function.as_deref(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        nccl,
        [
            (2, Some(4318), NcclLevel::Info, None, None),
            (3, Some(4318), NcclLevel::Info, None, None),
            (
                5,
                Some(4318),
                NcclLevel::Warn,
                Some("misc/socket.cc:484"),
                None
            ),
            (
                6,
                Some(4319),
                NcclLevel::Warn,
                Some("misc/shmutils.cc:72"),
                None
            ),
            (
                7,
                Some(4319),
                NcclLevel::Warn,
                Some("include/alloc.h:103"),
                Some("ncclCudaCalloc")
            ),
        ]
    );
    let init = events.iter().find_map(|e| match &e.kind {
        ServerEventKind::Nccl(n) => match &n.detail {
            crate::model::NcclDetail::CommInit {
                rank,
                nranks,
                cuda_dev,
                bus_id,
            } => Some((*rank, *nranks, *cuda_dev, bus_id.clone())),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(init, Some((0, 8, 0, Some("0000:18:00.0".into()))));
    let warn = events.iter().find(|e| e.span.line == 6).unwrap();
    assert_eq!(warn.time.unwrap().local.to_string(), "2025-06-01 12:00:10");
    assert_eq!(warn.host.as_deref(), Some("gpu-node-7"));
    assert_eq!(warn.framework, Framework::Unknown);
    assert!(events.iter().any(|e| e.span.line == 7
        && matches!(&e.kind, ServerEventKind::CudaOom(o) if o.source == OomSource::Nccl)));
    assert!(events.iter().any(|e| e.kind
        == ServerEventKind::Version {
            component: "NCCL".into(),
            version: "2.21.5+cuda12.4".into()
        }));
}

#[test]
fn an_nccl_info_line_alone_is_no_warning() {
    let (events, unrecognized) =
        run("gpu-node-7:4318:4318 [0] NCCL INFO Channel 00/24 :    0   1   2   3");
    assert_eq!((events.len(), unrecognized), (0, 0));
}

// ---------------------------------------------------------------- nesting

#[test]
fn docker_compose_services_keep_their_own_tracebacks() {
    let (events, unrecognized) = run("\
\x1b[36msglang-1  |\x1b[0m [2026-11-27 09:38:52 TP1] Scheduler hit an exception: Traceback (most recent call last):
\x1b[33mvllm-1    |\x1b[0m Traceback (most recent call last):
\x1b[36msglang-1  |\x1b[0m   File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process
\x1b[33mvllm-1    |\x1b[0m   File \"/opt/vllm/x.py\", line 5, in y
\x1b[33mvllm-1    |\x1b[0m OSError: [Errno 98] Address already in use
\x1b[36msglang-1  |\x1b[0m RuntimeError: boom
\x1b[36msglang-1  |\x1b[0m
sglang-1  | [2026-11-27 09:38:53] Received sigquit from a child process. It usually means the child failed.");
    assert_eq!(unrecognized, 0);
    let found = exceptions(&events);
    let got: Vec<_> = found
        .iter()
        .map(|(e, x)| {
            (
                e.span.line,
                e.container.as_deref(),
                e.rank.and_then(|r| r.tp),
                x.name.as_str(),
                x.frames.len(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (5, Some("vllm-1"), None, "OSError", 1),
            (6, Some("sglang-1"), Some(1), "RuntimeError", 1),
        ]
    );
    assert_eq!(found[1].0.framework, Framework::Sglang);
}

#[test]
fn log_viewer_timestamps_and_ray_prefixes() {
    let (events, unrecognized) = run("\
2026-11-27T09:38:52.123456789Z [2026-11-27 09:38:52 TP1] Load weight begin. avail mem=78.35 GB
2026-11-27T09:38:53.5Z Traceback (most recent call last):
2026-11-27T09:38:53.5Z   File \"x.py\", line 1, in f
2026-11-27T09:38:53.6Z ValueError: boom
(WorkerDict pid=3490362, ip=10.0.0.3) [rank0]:[E601 12:30:00.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLGATHER, NumelIn=8, NumelOut=64, Timeout(ms)=600000) ran for 600321 milliseconds before timing out.");
    assert_eq!(unrecognized, 0);
    // The server's own time wins over the viewer's; the viewer's fills in.
    assert_eq!(events[0].time.unwrap().offset_secs, None);
    let boom = exceptions(&events)[0].0;
    let t = boom.time.unwrap();
    assert_eq!(
        (t.local.to_string(), t.offset_secs),
        ("2026-11-27 09:38:53.500".into(), Some(0))
    );
    let ray = events.last().unwrap();
    assert_eq!(
        (ray.pid, ray.process.as_deref(), ray.host.as_deref()),
        (Some(3490362), Some("WorkerDict"), Some("10.0.0.3"))
    );
    assert_eq!(ray.rank.and_then(|r| r.global), Some(0));
    assert!(
        matches!(&ray.kind, ServerEventKind::TorchDist(t) if matches!(t.kind, TorchDistKind::WatchdogTimeout { seq: 3, ran_for_ms: Some(600321), .. }))
    );
}

#[test]
fn journal_messages_reach_every_parser() {
    let (facts, unrecognized) = {
        let source = Source::new("j", "\
Jun 01 12:01:25 gpu-node-7 vllm[4201]: (EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718] EngineCore failed to start.
Jun 01 12:01:25 gpu-node-7 vllm[4201]: (EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718] Traceback (most recent call last):
Jun 01 12:01:25 gpu-node-7 vllm[4201]: (EngineCore_DP0 pid=4201) ERROR 06-01 12:01:25 [core.py:718] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 100.00 MiB is free. Process 9999 has 40.00 GiB memory in use.
Jun 01 12:01:26 gpu-node-7 vllm[4200]: gpu-node-7:4201:4301 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.12<43337> failed : Connection refused
Jun 01 12:01:27 gpu-node-7 vllm[4200]: [rank0]:[E601 12:01:27.000000000 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.
Jun 01 12:01:28 gpu-node-7 compose[900]: sglang-1  | [2026-06-01 12:01:28 TP0] Load weight begin. avail mem=78.35 GB
".as_bytes());
        let lines: Vec<(u32, String)> = source.lines().map(|(n, l)| (n, l.into_owned())).collect();
        let lines: Vec<Line<'_>> = lines
            .iter()
            .map(|(n, t)| {
                Line::bare(
                    Span {
                        source: SourceId(0),
                        line: *n,
                    },
                    t,
                )
            })
            .collect();
        let mut facts = Facts::default();
        let u = crate::ingest::journal_short::parse(
            &lines,
            &mut facts,
            crate::ingest::journal_short::Ident::Identifier,
        );
        (facts, u)
    };
    assert_eq!(unrecognized, 0);
    let events = &facts.server_events;
    let summary: Vec<(u32, &str, Option<u32>, Option<&str>)> = events
        .iter()
        .map(|e| {
            let kind = match &e.kind {
                ServerEventKind::VllmFailure(_) => "vllm-failure",
                ServerEventKind::Exception(_) => "exception",
                ServerEventKind::CudaOom(_) => "oom",
                ServerEventKind::Nccl(_) => "nccl",
                ServerEventKind::TorchDist(_) => "torch",
                ServerEventKind::Landmark(_) => "landmark",
                _ => "other",
            };
            (e.span.line, kind, e.pid, e.container.as_deref())
        })
        .collect();
    assert_eq!(
        summary,
        [
            (1, "vllm-failure", Some(4201), None),
            (3, "exception", Some(4201), None),
            (3, "oom", Some(4201), None),
            (4, "nccl", Some(4201), None),
            (5, "torch", Some(4200), None),
            (6, "landmark", Some(900), Some("sglang-1")),
        ]
    );
    // The vLLM record has no year: the journal's `-o short` has none either.
    assert!(!events[0].time.unwrap().year_known);
    assert_eq!(events[5].framework, Framework::Sglang);
}

// ---------------------------------------------------------------- near misses

#[test]
fn a_healthy_log_whose_model_name_says_error_has_no_failures() {
    let (events, unrecognized) = run("\
[2026-03-05 10:00:01] server_args=ServerArgs(model_path='/models/error-correction-7b-OutOfMemoryError', tp_size=2, port=30000)
[2026-03-05 10:00:09 TP0] Load weight end. type=ErrorCorrectionForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB, mem usage=14.00 GB.
[2026-03-05 10:00:30] INFO:     127.0.0.1:40000 - \"POST /v1/completions HTTP/1.1\" 200 OK
[2026-03-05 10:00:31] The server is fired up and ready to roll!
INFO 03-05 10:00:00 [api_server.py:1] non-default args: {'model': '/models/Exception-Handler-13B', 'served_model_name': ['cuda-out-of-memory-tester']}");
    assert_eq!(unrecognized, 0);
    assert!(
        events.iter().all(|e| !matches!(
            e.kind,
            ServerEventKind::Exception(_)
                | ServerEventKind::CudaOom(_)
                | ServerEventKind::VllmFailure(_)
                | ServerEventKind::MemoryImbalance(_)
        )),
        "{events:#?}"
    );
}

#[test]
fn garbage_is_counted_and_never_panics() {
    let garbage = "\
hello world
[2026-13-45 99:99:99 TP0] bad date still has the shape
\u{0}\u{1b}[31m\u{ff}
(pid=) INFO
[rank]: x
INFO 13-45 99:99:99 [x.py:1] impossible date
terminate called
  what():
frame #0: x
NCCL WARN alone
a:b:c [0] NCCL WARN not numbers
ValueError
    indented nothing open
  File \"orphan.py\", line 1, in f
RuntimeError: CUDA out of memory. Tried to allocate 99999999999999999999999 GiB
::::
[E601 99:99:99.0 x.cpp:1] odd time
\u{fffd}\u{fffd}[2026-11-27 09:38:52 TP1]";
    // Recognised: the SGLang, vLLM and c10 shapes (their impossible times
    // are dropped), a C++ frame line, and the OOM line, which is
    // unmistakable even outside a traceback; the line after it continues
    // its message.
    assert_eq!(
        unrecognized_lines(garbage),
        // An orphan `File "…"` frame opens a traceback (a paste may start
        // below its first line); a bare `ValueError` ends one whose top
        // was cut.
        [1, 3, 4, 5, 7, 8, 10, 11, 13, 18]
    );
    let (events, _) = run(garbage);
    assert!(events.iter().all(|e| e.time.is_none()), "{events:#?}");
    let oom = exceptions(&events)[1].1;
    assert_eq!(oom.message.lines().last(), Some("::::"));
}

// ---------------------------------------------------------------- whole inputs

#[test]
fn every_server_format_reaches_its_parser_through_ingest() {
    use crate::ingest::{Format, ingest};
    use crate::source::SourceMap;
    let inputs = [
        ("vllm.log", VLLM_V1_FAILURE),
        (
            "compose.log",
            "sglang-1  | [2026-11-27 09:38:52 TP1] Load weight begin. avail mem=78.35 GB\nsglang-1  | Traceback (most recent call last):\nsglang-1  | RuntimeError: boom\n",
        ),
        (
            "kubectl.log",
            "2026-11-27T09:38:52.123456789Z [2026-11-27 09:38:52 TP1] Load weight begin. avail mem=78.35 GB\n",
        ),
        (
            "ray.log",
            "(WorkerDict pid=3490362, ip=10.0.0.3) [rank0]: Traceback (most recent call last):\n(WorkerDict pid=3490362, ip=10.0.0.3) [rank0]: ValueError: boom\n",
        ),
        (
            "nccl.log",
            "\ngpu-node-7:4318:4401 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.12<43337> failed : Connection refused\n",
        ),
        (
            "torch.log",
            "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800531 milliseconds before timing out.\n",
        ),
        (
            "traceback.txt",
            "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nKeyError: 'model.layers.0.weight'\n",
        ),
        (
            "check_env.txt",
            "Python: 3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0]\nCUDA available: True\nGPU 0: NVIDIA H200\nsglang: 0.5.6\n",
        ),
    ];
    let mut sources = SourceMap::new();
    for (name, text) in inputs {
        sources.add(Source::new(name, text.as_bytes()));
    }
    let ingested = ingest(&sources, &crate::ingest::Anchors::none());
    let summary: Vec<(Format, u32)> = ingested
        .inputs
        .iter()
        .map(|i| (i.segment.format, i.unrecognized))
        .collect();
    assert_eq!(
        summary,
        [
            (Format::VllmLog, 0),
            (Format::DockerComposeLog, 0),
            (Format::ContainerLog, 0),
            (Format::RayLog, 0),
            (Format::NcclLog, 0),
            (Format::TorchLog, 0),
            (Format::PythonTraceback, 0),
            (Format::SglangCheckEnv, 0),
        ]
    );
    let facts = &ingested.facts;
    let sources_with_events: std::collections::BTreeSet<usize> = facts
        .server_events
        .iter()
        .map(|e| e.span.source.0)
        .collect();
    assert_eq!(sources_with_events, (0..7).collect());
    assert_eq!(facts.env_reports.len(), 1);
    assert_eq!(facts.env_reports[0].version("sglang"), Some("0.5.6"));
    // vLLM's hint marks its events even where a line does not say.
    assert!(
        facts
            .server_events
            .iter()
            .filter(|e| e.span.source.0 == 0)
            .all(|e| e.framework == Framework::Vllm)
    );
}

/// Every cut of every sample line (a paste cut mid-line, a line cut by a
/// terminal) is read without panicking, in any order.
#[test]
fn cut_lines_never_panic() {
    let samples = [
        VLLM_V1_FAILURE,
        "[2024-06-01 12:01:20 TP0] Load weight end. elapsed=61.03 s, type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=11.12 GB, mem usage=67.23 GB.",
        "[2024-06-01 12:01:41 TP0] max_total_num_tokens=187432, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, available_gpu_mem=4.91 GB",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free. Process 12345 has 40.12 GiB memory in use.",
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.15 GiB total capacity; 77.50 GiB already allocated; 11.81 MiB free; 78.20 GiB reserved in total by PyTorch)",
        "[2025-06-01 12:00:11] gpu-node-7:4319:4402 [1] include/alloc.h:103 (ncclCudaCalloc) NCCL WARN Cuda failure 2 'out of memory'",
        "gpu-node-7:4318:4401 [0] NCCL INFO comm 0x55d0c6a0 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1b2c3d4e5f607182 - Init COMPLETE",
        "(WorkerDict pid=3490362, ip=10.0.0.3) [rank0]:[E601 12:30:00.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLGATHER, NumelIn=8, NumelOut=64, Timeout(ms)=600000) ran for 600321 milliseconds before timing out.",
        "2026-11-27T09:38:52.123456789Z sglang-1  | [2026-11-27 09:38:52.123 DP0 TP1] Scheduler hit an exception: Traceback (most recent call last):",
        "terminate called after throwing an instance of 'c10::DistBackendError'\n  what():  [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: NCCL error in: x.cpp:1, unhandled system error, NCCL version 2.21.5",
        "(APIServer pid=4200) ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use ✓ é",
    ];
    let mut parser = ServerLogParser::default();
    let mut facts = Facts::default();
    let span = Span {
        source: SourceId(0),
        line: 1,
    };
    let outer = Outer::default();
    for sample in samples {
        for line in sample.lines() {
            for (i, _) in line.char_indices() {
                parser.feed(&line[..i], span, &outer, &mut facts);
                parser.feed(&line[i..], span, &outer, &mut facts);
            }
        }
    }
    assert!(!facts.server_events.is_empty());
}

#[test]
fn a_balance_check_failure_is_sglang_even_when_the_capture_starts_there() {
    let (events, unrecognized) = run(
        "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.7, local_gpu_memory=93.7, local_gpu_memory * 0.9=84.3",
    );
    assert_eq!(unrecognized, 0);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].framework, Framework::Sglang);
}

/// Pastes that start below `Traceback (most recent call last):`, with the
/// frames' indentation lost, under compose prefixes
/// (https://github.com/sgl-project/sglang/issues/11218,
/// https://github.com/vllm-project/vllm/issues/11617): the frames open the
/// traceback, the exception line closes it with them.
#[test]
fn a_traceback_cut_at_the_top() {
    let log = r#"deepseek-v32-exp  |   File "/sgl-workspace/sglang-private/python/sglang/srt/model_executor/model_runner.py", line 1825, in init_device_graphs
deepseek-v32-exp  |     self.graph_runner = graph_runners[self.device](self)
deepseek-v32-exp  |                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
deepseek-v32-exp  |   File "/sgl-workspace/sglang-private/python/sglang/srt/model_executor/cuda_graph_runner.py", line 393, in __init__
deepseek-v32-exp  |     raise Exception(
deepseek-v32-exp  | Exception: Capture cuda graph failed: 
deepseek-v32-exp  | Possible solutions:
File "/miniforge3/envs/vllm/lib/python3.10/site-packages/torch/distributed/rendezvous.py", line 186, in _create_c10d_store
    return TCPStore(
RuntimeError: The server socket has failed to listen on any local network address. useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"#;
    assert_eq!(unrecognized_lines(log), Vec::<u32>::new());
    let (events, _) = run(log);
    let got: Vec<(u32, &str, Vec<u32>, Option<&str>)> = exceptions(&events)
        .into_iter()
        .map(|(e, x)| {
            (
                e.span.line,
                x.name.as_str(),
                x.frames.iter().map(|f| f.line).collect(),
                e.container.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (6, "Exception", vec![1825, 393], Some("deepseek-v32-exp")),
            (10, "RuntimeError", vec![186], None),
        ]
    );
    let (_, first) = exceptions(&events)[0];
    assert_eq!(
        first.message,
        "Capture cuda graph failed: \nPossible solutions:"
    );
}

/// What log viewers and pastes do to lines: a viewer's time alone on its
/// line, seconds cut from vLLM's prefix
/// (https://github.com/vllm-project/vllm/issues/34643), colour codes whose
/// ESC was lost (https://github.com/vllm-project/vllm/issues/2734).
#[test]
fn what_viewers_and_pastes_leave() {
    let log = "\
2026-02-14T02:05:12.788Z
ERROR 02-13 18:05 [multiproc_executor.py:852] WorkerProc hit an exception.
 [36m(RayWorkerVllm pid=5085) [0m [E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=20518, OpType=ALLREDUCE, NumelIn=106496, NumelOut=106496, Timeout(ms)=1800000) ran for 1800270 milliseconds before timing out.
 [36m(RayWorkerVllm pid=5310) [0m [W CUDAGraph.cpp:145] Warning: Waiting for pending NCCL work to finish before starting graph capture. (function operator()) [32m [repeated 6x across cluster] [0m";
    assert_eq!(unrecognized_lines(log), Vec::<u32>::new());
    let (events, _) = run(log);
    let dist: Vec<(u32, Option<u32>, Option<&str>)> = events
        .iter()
        .filter(|e| matches!(e.kind, ServerEventKind::TorchDist(_)))
        .map(|e| (e.span.line, e.pid, e.process.as_deref()))
        .collect();
    assert_eq!(dist, vec![(3, Some(5085), Some("RayWorkerVllm"))]);
    let vllm: Vec<(u32, Option<String>)> = events
        .iter()
        .filter(|e| e.framework == Framework::Vllm && e.span.line == 2)
        .map(|e| {
            (
                e.span.line,
                e.time.map(|t| t.local.format("%m-%d %H:%M:%S").to_string()),
            )
        })
        .collect();
    assert!(
        vllm.iter()
            .all(|(_, t)| t.as_deref() == Some("02-13 18:05:00")),
        "{vllm:?}"
    );
}

/// Python's logging formats, tqdm bars and the shell's job report
/// (https://github.com/sgl-project/sglang/pull/4826,
/// https://github.com/sgl-project/sglang/issues/6888).
#[test]
fn logging_bars_and_shell_jobs() {
    let log = "\
[2025-03-27 21:33:31 TP0] Memory pool end. avail mem=14.61 GB
2025-03-27 21:33:31,320 - INFO - flashinfer.jit: Prebuilt kernels not found, using JIT backend
Capturing batches (avail_mem=12.55 GB):   0%|          | 0/23 [00:00<?, ?it/s]2025-03-27 21:33:31,890 - INFO - flashinfer.jit: Loading
./run.sh: line 22: 103525 Killed                  python -m sglang.launch_server --host 0.0.0.0 --port 8188 --tp-size 2";
    assert_eq!(unrecognized_lines(log), Vec::<u32>::new());
    let (events, _) = run(log);
    let jobs: Vec<(u32, &ServerEventKind)> = events
        .iter()
        .filter(|e| matches!(e.kind, ServerEventKind::ShellJobSignaled { .. }))
        .map(|e| (e.span.line, &e.kind))
        .collect();
    assert_eq!(
        jobs,
        vec![(
            4,
            &ServerEventKind::ShellJobSignaled {
                pid: 103525,
                signal: "Killed".to_owned(),
                command: "python -m sglang.launch_server --host 0.0.0.0 --port 8188 --tp-size 2"
                    .to_owned(),
            }
        )]
    );
}

/// A journal tail that starts mid-traceback, then a whole traceback of one
/// rank: the fragment is dropped when the whole one opens, so the
/// exception belongs to the rank that announced it.
#[test]
fn a_fragment_gives_way_to_a_whole_traceback() {
    let log = r#"    scheduler = Scheduler(
  File "/opt/sglang/srt/managers/scheduler.py", line 362, in __init__
[2026-11-27 09:38:52 TP4] Scheduler hit an exception: Traceback (most recent call last):
  File "/opt/sglang/srt/model_executor/model_runner.py", line 781, in init_torch_distributed
    raise RuntimeError(
RuntimeError: boom"#;
    let (events, _) = run(log);
    let got: Vec<(u32, Option<u32>, Vec<u32>)> = exceptions(&events)
        .into_iter()
        .map(|(e, x)| {
            (
                e.span.line,
                e.rank.and_then(|r| r.tp),
                x.frames.iter().map(|f| f.line).collect(),
            )
        })
        .collect();
    assert_eq!(got, vec![(6, Some(4), vec![781])]);
}

// ---------------------------------------------------------------- bare and cut lines

/// vLLM's start-up messages pasted without the logger's prefix, `# ` lost
/// to Markdown on one (https://github.com/vllm-project/vllm/issues/10517),
/// SGLang's `Load weight end` bare
/// (https://github.com/SemiAnalysisAI/InferenceX/issues/2128), and a
/// prefix cut mid-way (https://github.com/vllm-project/vllm/issues/8177):
/// read as the framework's by their messages, with the same landmarks.
#[test]
fn framework_messages_without_their_prefix() {
    let log = "\
Loading model weights took 14.9888 GB
Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90
GPU blocks: 1952, # CPU blocks: 2048
Maximum concurrency for 20000 tokens per request: 1.56x
# GPU blocks: 1478, # CPU blocks: 2048
The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
model_runner_base.py:120] Writing input of failed execution to /tmp/err_execute_model_input_20250219-121443.pkl...
Load weight end. quant=fp8, fmt=e4m3, avail mem=12.25 GB, mem usage=125.65 GB.
Maximum concurrency for everyone
key: value";
    assert_eq!(unrecognized_lines(log), [9, 10]);
    let (events, _) = run(log);
    let got: Vec<(u32, &Landmark)> = landmarks(&events)
        .into_iter()
        .map(|(line, _, l)| (line, l))
        .collect();
    assert!(
        matches!(got[0], (1, Landmark::ModelLoaded { .. })),
        "{got:?}"
    );
    assert!(matches!(
        got[1],
        (
            3,
            Landmark::KvCacheBlocks {
                gpu: 1952,
                cpu: 2048
            }
        )
    ));
    assert!(matches!(
        got[2],
        (
            4,
            Landmark::MaxConcurrency {
                tokens_per_request: 20000,
                ..
            }
        )
    ));
    assert!(matches!(
        got[3],
        (5, Landmark::KvCacheBlocks { gpu: 1478, .. })
    ));
    assert!(matches!(got[4], (8, Landmark::LoadWeightEnd { .. })));
    assert_eq!(got.len(), 5);
    let frameworks: Vec<Framework> = events.iter().map(|e| e.framework).collect();
    assert_eq!(&frameworks[..4], [Framework::Vllm; 4]);
    assert_eq!(frameworks[4], Framework::Sglang);
}

/// The lines that continue an exception or a CUDA error: the message's
/// further lines (https://github.com/sgl-project/sglang/issues/6888,
/// https://github.com/sgl-project/sglang/issues/6033), a bare `raise` line
/// of a cut traceback (https://github.com/QwenLM/Qwen3/issues/295), the
/// CUDA error trailer (https://github.com/vllm-project/vllm/issues/8177).
#[test]
fn continuations_of_cut_tracebacks_and_cuda_errors() {
    let log = "\
ValueError: token_to_kv_pool_allocator memory leak detected! available_size=3189424, protected_size=0, self.max_total_num_tokens=3185200
self.token_to_kv_pool_allocator.available_size()=2864304
self.tree_cache.evictable_size()=325120

Exception: Capture cuda graph failed: RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture.
If you need this call to be captured, please file an issue.
Current cudaStreamCaptureStatus: cudaStreamCaptureStatusActive

 raise ValueError(
ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (7344).

For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address.

Timeout: not a class";
    assert_eq!(unrecognized_lines(log), [16]);
    let (events, _) = run(log);
    let got: Vec<(u32, &str, usize)> = exceptions(&events)
        .into_iter()
        .map(|(e, x)| (e.span.line, x.name.as_str(), x.message.lines().count()))
        .collect();
    assert_eq!(
        got,
        [
            (1, "ValueError", 3),
            (5, "Exception", 3),
            (10, "ValueError", 1),
            (14, "torch.distributed.DistNetworkError", 1),
        ]
    );
}

/// A frame's code line and the frames after it flattened onto one line by
/// a paste, inside a traceback
/// (https://github.com/vllm-project/vllm/issues/34643).
#[test]
fn flattened_frames_inside_a_traceback() {
    let log = r#"Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3689, in sample_tokens
c prompt_logprobs_dict = self._get_prompt_logprobs_dict( ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 4308, in _get_prompt_logprobs_dict logprobs = self.sampler.compute
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.71 GiB.

c prompt_logprobs_dict = self._get_prompt_logprobs_dict( File "/x.py", line 1, in f"#;
    // Outside a traceback the same line is not a frame.
    assert_eq!(unrecognized_lines(log), [6]);
}

/// Layers of a CI viewer (https://github.com/vllm-project/vllm/issues/8204):
/// a bracketed time, a `  | ` gutter, grep's `--`; Go's slog
/// (https://github.com/ollama/ollama/issues/9160); an indented `[rankN]:`
/// (https://github.com/NVIDIA/nccl/issues/1409).
#[test]
fn ci_viewer_layers_and_go_slog() {
    let log = "\
[2024-09-05T00:38:34Z] INFO:     Started server process [60858]
--
  | [2024-09-05T00:38:34Z] INFO:     Waiting for application startup.
  | [2024-09-05T00:38:34Z] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 44319): [errno 98] address already in use
  | [2024-09-05T00:38:34Z] DEBUG 09-04 17:38:34 launcher.py:64] port 44319 is used by process psutil.Process(pid=60914, name='pt_main_thread', status='sleeping', started='17:37:05') launched with command:
level=WARN source=sched.go:646 msg=\"gpu VRAM usage didn't recover within timeout\"
    [rank7]:[E816 01:45:40.184373931 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 7] Exception (either an error or timeout) detected by watchdog at work: 80078, last enqueued NCCL work: 80078, last completed NCCL work: 80077.
Illegal instruction (core dumped)
 | not a layer";
    assert_eq!(unrecognized_lines(log), [9]);
    let (events, _) = run(log);
    let uvicorn: Vec<(u32, &Uvicorn, bool)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::Uvicorn(u) => Some((e.span.line, u, e.time.is_some())),
            _ => None,
        })
        .collect();
    assert!(matches!(
        uvicorn[0],
        (1, Uvicorn::StartedProcess { pid: 60858 }, true)
    ));
    assert!(matches!(
        uvicorn[1],
        (4, Uvicorn::BindFailed { port: 44319, .. }, true)
    ));
    let rank = events
        .iter()
        .find(|e| e.span.line == 7)
        .and_then(|e| e.rank);
    assert_eq!(rank.and_then(|r| r.global), Some(7));
}

/// The exception line read by hand is the regex's reading: the same name
/// and message, or none, on every fixture line and on the edges of the
/// pattern.
#[test]
fn the_exception_line_by_hand_is_the_regex() {
    fn oracle(text: &str) -> Option<(&str, &str)> {
        let c = traceback::EXCEPTION_LINE.captures(text)?;
        let name = c.name("name")?.as_str();
        Some((name, c.name("msg").map_or("", |m| m.as_str())))
    }
    let mut lines: Vec<String> = [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "torch.OutOfMemoryError: CUDA out of memory.",
        "KeyboardInterrupt",
        "SystemExit: 1",
        "StopIteration",
        "asyncio.exceptions.TimeoutError",
        "Error",
        "Error:",
        "Error:x",
        "Error:  two spaces",
        "Error: \u{e9}t\u{e9}",
        "Error: a\nb",
        "Error:\n",
        "Error\n",
        "_Failed: x",
        "1Error: x",
        "a.1Error: x",
        ".Error: x",
        "a..Error: x",
        "Error.: x",
        "Errors: x",
        "MyWarning: y",
        "xTimeout",
        "see RuntimeError: x",
        " RuntimeError: x",
        "RuntimeError : x",
        "RuntimeError- x",
        "\u{e9}Error: x",
        "",
        ":",
    ]
    .map(str::to_owned)
    .to_vec();
    for line in crate::source::fixture_lines() {
        // The reader asks it of a line under its prefixes too.
        if let Some((_, rest)) = line.split_once("] ") {
            lines.push(rest.to_owned());
        }
        lines.push(line);
    }
    let mut matched = 0;
    for line in &lines {
        let by_hand = traceback::exception_line(line);
        assert_eq!(by_hand, oracle(line), "{line:?}");
        matched += usize::from(by_hand.is_some());
    }
    assert!(matched > 100, "{matched}");
}

/// glog's failure and signal reports under a fatal line (Caffe's, from
/// CMU-Perceptual-Computing-Lab/caffe_rtpose#11, fixtures/real/773; the
/// signal handler's lines as glog's src/signalhandler.cc writes them,
/// assembled, not copied): every line is read, and a line that only looks
/// like a frame is not.
#[test]
fn glog_stack_traces_are_read() {
    let text = "\
F0123 10:43:52.732602  6844 syncedmem.cpp:56] Check failed: error == cudaSuccess (2 vs. 0)  out of memory
*** Check failure stack trace: ***
    @     0x7fabd153fdaa  (unknown)
    @     0x7fabd1d1f962  caffe::SyncedMemory::to_gpu()
    @     0x7fabd1cfb1a2  caffe::Blob<>::mutable_gpu_data()
    @           0x409bcf  warmup()
*** Aborted at 1486382014 (unix time) try \"date -d @1486382014\" if you are using GNU date ***
PC: @     0x7f3d1c0a2428 gsignal
*** SIGABRT (@0x3e800001aac) received by PID 6828 (TID 0x7f3cd6ffd700) from PID 6828; stack trace: ***
    @     0x7f3d1c0a24b0 (unknown)
";
    assert_eq!(unrecognized_lines(text), Vec::<u32>::new());
    assert_eq!(unrecognized_lines("@ home: the GPU is full"), vec![1]);
    assert_eq!(unrecognized_lines("*** nothing here ***"), vec![1]);
}

/// TensorRT-LLM's own call stack under its exception (`TllmException`,
/// tllmException.cpp's getTrace(): `%-3d %*p %s + %zd`, or the object and
/// offset backtrace_symbols gives): lines of
/// https://github.com/NVIDIA/TensorRT-LLM/issues/583 and
/// https://github.com/triton-inference-server/server/issues/7118, both
/// kinds, two and three digits; a numbered line that is not a frame stays
/// unread.
#[test]
fn tensorrt_llm_stack_frames_are_read() {
    let text = "\
1       0x7f6ce803be0b /opt/tritonserver/backends/tensorrtllm/libnvinfer_plugin_tensorrt_llm.so.9(+0x35e0b) [0x7f6ce803be0b]
2       0x7f6ce809746c tensorrt_llm::plugins::GPTAttentionPluginCommon::GPTAttentionPluginCommon(void const*, unsigned long) + 908
10      0x7fd1e8abce32 /usr/local/tensorrt/lib/libnvinfer.so.9(+0x1081e32) [0x7fd1e8abce32]
34      0x7fd2b0c70814 clone + 68
";
    assert_eq!(unrecognized_lines(text), Vec::<u32>::new());
    assert_eq!(
        unrecognized_lines("1       0x10 is where it stopped"),
        vec![1]
    );
    assert_eq!(unrecognized_lines("2 0x7f6ce809746c"), vec![1]);
}

/// Lua's traceback under a CUDA error (Torch7's cutorch, fixtures/real's
/// batch I 823, jcjohnson/neural-style's thread): every frame is read, and
/// a sentence with `: in ` in it is not a frame.
#[test]
fn lua_stack_tracebacks_are_read() {
    let text = "\
stack traceback:
\t[C]: in function 'error'
\t/home/user/torch/install/share/lua/5.1/trepl/init.lua:384: in function 'require'
\tneural_style.lua:2: in main chunk
\t[C]: in function 'docile'
\t...user/torch/install/lib/luarocks/rocks/trepl/scm-1/bin/th:145: in main chunk
\t[C]: at 0x00405ea0
";
    assert_eq!(unrecognized_lines(text), Vec::<u32>::new());
    // Lua 5.4's other frame kinds, as luaL_traceback words them.
    let text = "\
stack traceback:
\t[C]: in ?
\tmodel.lua:12: in local 'load'
\tmodel.lua:40: in method 'forward'
\t(...tail calls...)
\ttrain.lua:7: in function <train.lua:3>
";
    assert_eq!(unrecognized_lines(text), Vec::<u32>::new());
    assert_eq!(
        unrecognized_lines("note: in the end it was the driver"),
        vec![1]
    );
}

/// zulip/zulip#11386: a traceback whose code lines the paste indented with
/// a tab instead of four spaces; each is read as its frame's code line.
#[test]
fn tab_indented_code_lines_of_a_traceback_are_read() {
    let text = "Traceback (most recent call last):
  File \"./tools/run-dev.py\", line 421, in <module>
\tapp.listen(proxy_port, address=options.interface)
  File \"/srv/zulip-py3-venv/lib/python3.5/site-packages/tornado/netutil.py\", line 197, in bind_sockets
\tsock.bind(sockaddr)
OSError: [Errno 98] Address already in use
";
    assert_eq!(unrecognized_lines(text), Vec::<u32>::new());
    // Outside a traceback a tab-indented line is not claimed.
    assert_eq!(unrecognized_lines("\tsock.bind(sockaddr)\n"), vec![1]);
}

/// A `warnings` message that starts with a new line stands below its
/// `UserWarning:` and above the source line (Hydra's `version_base`
/// warning, meta-llama/llama-stack-apps#15, batch R 1128); PyTorch's own
/// logging heads its records like glog with the file's relative path
/// (sgl-project/sglang, batch R 1136). A line after a message-less warning
/// that opens a traceback is the traceback's, and a warning's message
/// stops at its limit.
#[test]
fn warnings_below_their_category_and_torch_glog_records_are_read() {
    let hydra = "\
/opt/LLama_Agentic_System/llama3_1venv/lib/python3.11/site-packages/llama_toolchain/utils.py:43: UserWarning:
The version_base parameter is not specified.
Please specify a compatability version level, or None.
Will assume defaults for version 1.1
  initialize(config_path=relative_path)
W0830 16:40:57.585000 7191 .venv/lib/python3.12/site-packages/torch/utils/cpp_extension.py:2425] TORCH_CUDA_ARCH_LIST is not set, all archs for visible cards are included for compilation. 
";
    assert_eq!(unrecognized_lines(hydra), Vec::<u32>::new());
    let stray = "\
/x/site-packages/a/b.py:43: UserWarning:
one
two
three
four
five
six
seven
";
    assert_eq!(unrecognized_lines(stray), vec![8]);
    let (events, _) = run("\
/x/site-packages/a/b.py:43: UserWarning:
Traceback (most recent call last):
  File \"/x/serve.py\", line 3, in <module>
    main()
RuntimeError: CUDA error: out of memory
");
    assert_eq!(exceptions(&events).len(), 1);
}

/// The watchdog's progress line in its later wordings (PyTorch 2.4 – 2.6's
/// `Exception (either an error or timeout) detected …`, vllm-project/vllm
/// in batch R 1132; 2.7's `NCCL error is detected …`, written to upstream
/// ProcessGroupNCCL.cpp's format, not copied): the work, the last
/// enqueued, the last completed (-1: none ever did).
#[test]
fn the_watchdogs_later_progress_wordings_give_last_completed_work() {
    let (events, _) = run("\
[rank2]:[E1001 16:06:04.537356909 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 2] Exception (either an error or timeout) detected by watchdog at work: 1, last enqueued NCCL work: 1, last completed NCCL work: -1.
[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] NCCL error is detected by watchdog at work: 6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.
");
    let got: Vec<(Option<u32>, &TorchDistKind)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::TorchDist(t) => Some((t.rank, &t.kind)),
            _ => None,
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                Some(2),
                &TorchDistKind::FailureDetected {
                    seq: 1,
                    last_enqueued: 1,
                    last_completed: -1
                }
            ),
            (
                Some(1),
                &TorchDistKind::FailureDetected {
                    seq: 6463,
                    last_enqueued: 6463,
                    last_completed: 6462
                }
            ),
        ]
    );
}
