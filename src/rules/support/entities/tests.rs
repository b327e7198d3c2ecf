//! Tests of `entities`: each kind of cited line, and what it must not add.

use super::*;
use crate::rules::{Category, Severity};
use crate::source::{Source, SourceMap};

#[test]
fn cited_process_rows_name_their_pid_and_gpu_and_nothing_else_does() {
    let mut sources = SourceMap::default();
    sources.add(Source::new(
        "paste",
        b"index, uuid, name, memory.used [MiB], memory.total [MiB]\n\
          3, GPU-bb3cdc90-8130-ed6c-9db3-d58a6f1c1ee5, NVIDIA H100 80GB HBM3, 61392 MiB, 81559 MiB\n\
          \n\
          gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n\
          GPU-bb3cdc90-8130-ed6c-9db3-d58a6f1c1ee5, 48213, sglang::scheduler_TP3, 61378 MiB\n",
    ));
    let a = crate::analyze(sources);
    let row = a.incident.gpu_processes[0].spans[0];
    let gpu_row = a.incident.gpus[0].spans[0];
    let mut f = Finding::new("test", Category::Unknown, Severity::Info);
    f.evidence(gpu_row, "a GPU row for contrast");
    from_evidence(&a.incident, &mut f);
    assert!(f.entities.pids.is_empty() && f.entities.gpus.is_empty());
    f.evidence(row, "the holder");
    from_evidence(&a.incident, &mut f);
    assert_eq!(
        f.entities.pids.iter().copied().collect::<Vec<_>>(),
        vec![48213]
    );
    assert_eq!(f.entities.gpus.iter().copied().collect::<Vec<_>>(), vec![3]);
}

#[test]
fn cited_journal_lines_name_their_writer_and_unit_but_not_a_holders_victim() {
    let mut sources = SourceMap::default();
    sources.add(Source::new(
        "journal",
        b"Nov 27 09:38:52 ct200 python3[31544]: [2026-11-27 09:38:52] Received sigquit from a child process. It usually means the child failed.\n\
          Nov 27 09:38:53 ct200 systemd[1]: sglang-k26.service: Main process exited, code=killed, status=9/KILL\n\
          Nov 27 09:38:53 ct200 systemd[1]: sglang-k26.service: Consumed 1min 3.201s CPU time.\n",
    ));
    let a = crate::analyze(sources);
    let spans: Vec<Span> = a.incident.facts.journal.iter().map(|j| j.span).collect();
    assert_eq!(spans.len(), 3);
    let mut f = Finding::new("test", Category::Unknown, Severity::Info);
    for s in &spans {
        f.evidence(*s, "a line");
    }
    from_evidence(&a.incident, &mut f);
    assert_eq!(
        f.entities.pids.iter().copied().collect::<Vec<_>>(),
        vec![31544]
    );
    assert_eq!(
        f.entities
            .units
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        vec!["sglang-k26.service"]
    );
    // A line PID 1 wrote about a unit, in no event `correlate` knows,
    // still names the unit.
    let mut only = Finding::new("test", Category::Unknown, Severity::Info);
    only.evidence(spans[2], "an unknown unit message");
    from_evidence(&a.incident, &mut only);
    assert!(only.entities.units.contains("sglang-k26.service"));
    assert!(
        only.entities.pids.is_empty(),
        "PID 1 is not the unit's process"
    );
    // In a holder finding the writer is the victim, not a holder.
    let mut held = Finding::new(
        "test",
        Category::GpuMemoryHeldByOtherProcess,
        Severity::Error,
    );
    held.evidence(spans[0], "the victim's report");
    from_evidence(&a.incident, &mut held);
    assert!(held.entities.pids.is_empty(), "{:?}", held.entities);
}

fn analysis(text: &str) -> crate::Analysis {
    let mut sources = SourceMap::default();
    sources.add(Source::new("paste", text.as_bytes()));
    crate::analyze(sources)
}

fn cite(a: &crate::Analysis, category: Category, lines: &[u32]) -> Finding {
    let mut f = Finding::new("test", category, Severity::Error);
    for &line in lines {
        let span = Span {
            source: crate::source::SourceId(0),
            line,
        };
        f.evidence(span, "a line");
    }
    from_evidence(&a.incident, &mut f);
    f
}

fn pids(f: &Finding) -> Vec<u32> {
    f.entities.pids.iter().copied().collect()
}

/// A prefixed worker line no event is made of still names its writer
/// (fixtures/real/473, vllm-project/vllm: `(Worker_TP1 pid=15193)`), and
/// so does Ray's prefix (fixtures/real/020).
#[test]
fn a_cited_prefixed_line_names_its_writer() {
    let a = analysis(
        "(Worker_TP1 pid=15193) ERROR 05-08 19:06:38 [multiproc_executor.py:962] Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n\
         (Worker_TP1 pid=15193) ERROR 05-08 19:06:38 [multiproc_executor.py:962] For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n",
    );
    assert_eq!(pids(&cite(&a, Category::Unknown, &[1])), [15193]);
    let a = analysis(
        " [36m(RayWorkerVllm pid=5310) [0m [W CUDAGraph.cpp:145] Warning: Waiting for pending NCCL work to finish before starting graph capture. (function operator()) [32m [repeated 6x across cluster] [0m\n",
    );
    assert_eq!(pids(&cite(&a, Category::Unknown, &[1])), [5310]);
    // An uncited line adds nothing.
    let a = analysis(
        "(Worker_TP1 pid=15193) ERROR 05-08 19:06:38 [multiproc_executor.py:962] Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n",
    );
    assert!(pids(&cite(&a, Category::Unknown, &[])).is_empty());
}

/// fixtures/real/444 (ollama/ollama#8372): PID 1's lines name the unit;
/// the unit's PID is its forked child's, which failed to exec; PID 1 is
/// never one.
#[test]
fn a_unit_finding_names_the_forked_child_and_not_pid_1() {
    let a = analysis(
        "1月 10 22:38:05 czj-Vector-GP76-12UGSO systemd[1]: ollama.service: Main process exited, code=exited, status=1/FAILURE\n\
         1月 10 22:38:05 czj-Vector-GP76-12UGSO systemd[1]: ollama.service: Failed with result 'exit-code'.\n\
         1月 10 22:38:08 czj-Vector-GP76-12UGSO systemd[1]: ollama.service: Scheduled restart job, restart counter is at 472.\n\
         1月 10 22:38:08 czj-Vector-GP76-12UGSO systemd[1]: Stopped Ollama Service.\n\
         1月 10 22:38:08 czj-Vector-GP76-12UGSO systemd[1]: Started Ollama Service.\n\
         1月 10 22:38:08 czj-Vector-GP76-12UGSO systemd[17836]: ollama.service: Failed to execute /usr/local/bin/ollama: Permission denied\n\
         1月 10 22:38:08 czj-Vector-GP76-12UGSO systemd[17836]: ollama.service: Failed at step EXEC spawning /usr/local/bin/ollama: Permission denied\n",
    );
    let f = cite(&a, Category::UnitCrashLoop, &[1, 3]);
    assert!(
        f.entities.units.contains("ollama.service"),
        "{:?}",
        f.entities
    );
    assert_eq!(pids(&f), [17836]);
    // In a holder finding the unit is often the victim's: its PIDs are
    // not added as holders.
    assert!(pids(&cite(&a, Category::StaleServingInstance, &[1])).is_empty());
}

/// fixtures/real/445 (old systemd, no bullet): the `Process:` lines and
/// the Main PID are the unit's, cited or not, once a finding names it.
#[test]
fn a_unit_finding_names_the_pids_of_its_status_block() {
    let a = analysis(
        "nvidia-docker.service - NVIDIA Docker plugin\n\
         \x20  Loaded: loaded (/usr/lib/systemd/system/nvidia-docker.service; disabled; vendor preset: disabled)\n\
         \x20  Active: failed (Result: start-limit) since Thu 2021-03-18 20:35:04 CST; 9s ago\n\
         \x20    Docs: https://github.com/NVIDIA/nvidia-docker/wiki\n\
         \x20 Process: 82396 ExecStopPost=/bin/rm -f $SPEC_FILE (code=exited, status=0/SUCCESS)\n\
         \x20 Process: 82378 ExecStart=/usr/bin/nvidia-docker-plugin -s $SOCK_DIR (code=exited, status=1/FAILURE)\n\
         \x20Main PID: 82378 (code=exited, status=1/FAILURE)\n\
         \n\
         Mar 18 20:35:04 HikvisionOS systemd[1]: start request repeated too quickly for nvidia-docker.service\n",
    );
    let status = &a.incident.facts.unit_statuses[0];
    assert_eq!(
        status.processes.iter().map(|p| p.pid).collect::<Vec<_>>(),
        [82396, 82378]
    );
    let f = cite(&a, Category::UnitCrashLoop, &[9]);
    assert!(
        f.entities.units.contains("nvidia-docker.service"),
        "{:?}",
        f.entities
    );
    assert_eq!(pids(&f), [82378, 82396]);
    // A cited `Process:` line names its PID and unit by itself.
    let g = cite(&a, Category::Unknown, &[5]);
    assert!(g.entities.pids.contains(&82396));
    assert!(g.entities.units.contains("nvidia-docker.service"));
}

/// fixtures/real/449 (canonical/inference-snaps#214): `snap logs` names
/// the writer `gemma3.server`, which is snapd's unit
/// `snap.gemma3.server.service`; fixtures/real/452 (ollama/ollama#9322):
/// `ollama[2521]` writes for `ollama.service`.
#[test]
fn a_unit_finding_names_the_pids_that_write_under_its_name() {
    let a = analysis(
        "$ sudo snap logs -f gemma3.server\n\
         2025-12-01T14:54:47Z gemma3.server[391350]: main: exiting due to model loading error\n\
         2025-12-01T14:54:47Z gemma3.server[391330]: Error: exit status 1\n\
         2025-12-01T14:54:47Z systemd[1]: snap.gemma3.server.service: Main process exited, code=exited, status=1/FAILURE\n\
         2025-12-01T14:54:47Z systemd[1]: snap.gemma3.server.service: Start request repeated too quickly.\n",
    );
    let f = cite(&a, Category::UnitCrashLoop, &[5]);
    assert_eq!(pids(&f), [391330, 391350], "{:?}", a.incident.unit_pids);
    let a = analysis(
        "Feb 24 15:36:32 adl ollama[2521]: time=2025-02-24T15:36:32.318-08:00 level=INFO source=memory.go:356 msg=\"offload to cuda\"\n\
         Feb 24 11:16:31 adl systemd[1]: ollama.service: A process of this unit has been killed by the OOM killer.\n\
         Feb 24 11:16:32 adl sshd[2600]: Accepted publickey for root\n",
    );
    let f = cite(&a, Category::HostOomKiller, &[2]);
    assert_eq!(
        pids(&f),
        [2521],
        "another program's writer is not the unit's"
    );
}

/// A catalog row's typed capture names its fact for any finding that
/// cites the line, not only for the row's own: NCCL's `host:pid:tid`
/// header (fixtures/real/619, NVIDIA/nccl-tests; a `connect … failed`
/// line of the same grammar, the `nccl.socket-connect-failed` row's
/// sample) and ggml's `allocating … on device N` (fixtures/real/650, a
/// journal line, and its sample without a frame). A count that only
/// looks like one (`# GPU blocks: 229`) names no GPU.
#[test]
fn a_cited_lines_typed_captures_name_its_facts_for_any_finding() {
    let a = analysis(
        "NCCL failure common.cu:874 'unhandled system error'\n\
         e66aa18dc444:3171:3171 [0] include/socket.h:311 WARN Socket creation failed : Address family not supported by protocol\n",
    );
    assert!(pids(&cite(&a, Category::NcclInitFailure, &[2])).contains(&3171));
    assert!(pids(&cite(&a, Category::NcclInitFailure, &[1])).is_empty());
    let a = analysis(
        "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : Software caused connection abort\n",
    );
    assert!(pids(&cite(&a, Category::NcclTimeout, &[1])).contains(&39964));
    // In a holder finding the line's writer is the victim, not a holder.
    assert!(pids(&cite(&a, Category::GpuMemoryHeldByOtherProcess, &[1])).is_empty());
    let gpus = |f: &Finding| f.entities.gpus.iter().copied().collect::<Vec<_>>();
    let a = analysis(
        "Jan 26 17:50:35 ip-172-31-3-6 ollama[1418]: ggml_backend_cuda_buffer_type_alloc_buffer: allocating 45108.64 MiB on device 0: cudaMalloc failed: out of memory\n",
    );
    assert_eq!(gpus(&cite(&a, Category::CudaOom, &[1])), [0]);
    let a = analysis(
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 144.00 MiB on device 4: cudaMalloc failed: out of memory\n\
         INFO 01-11 15:51:18 llm_engine.py:275] # GPU blocks: 229, # CPU blocks: 512\n",
    );
    assert_eq!(gpus(&cite(&a, Category::CudaOom, &[1])), [4]);
    assert!(gpus(&cite(&a, Category::Unknown, &[2])).is_empty());
}

/// ggml's CUDA error is four lines (`CUDA error: …`, `current device:
/// N, in function …`, the call, the abort: ggml_cuda_error()); the
/// `current device` row's `block` lends its GPU to a finding that cites
/// any of them: Ollama's wrapped first line and `GGML_ASSERT`
/// (fixtures/real/708, ollama/ollama) and a journal's
/// newer `…/ggml-cuda.cu:110: CUDA error`
/// (https://github.com/ikawrakow/ik_llama.cpp/issues/425); the kernel's
/// line after the block gets nothing from it.
#[test]
fn a_blocks_device_line_names_the_gpu_of_every_line_of_the_block() {
    let gpus = |f: &Finding| f.entities.gpus.iter().copied().collect::<Vec<_>>();
    let a = analysis(
        "Error: llama runner process has terminated: signal: aborted (core dumped) CUDA error: CUBLAS_STATUS_EXECUTION_FAILED\n\
         \x20 current device: 0, in function ggml_cuda_mul_mat_batched_cublas at /go/src/github.com/ollama/ollama/llm/llama.cpp/ggml-cuda.cu:1855\n\
         \x20 cublasGemmBatchedEx(ctx.cublas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, ne01, ne11, ne10, alpha, (const void **) (ptrs_src.get() + 0*ne23), CUDA_R_16F, nb01/nb00, (const void **) (ptrs_src.get() + 1*ne23), CUDA_R_16F, nb11/nb10, beta, ( void **) (ptrs_dst.get() + 0*ne23), cu_data_type, ne01, ne23, cu_compute_type, CUBLAS_GEMM_DEFAULT_TENSOR_OP)\n\
         GGML_ASSERT: /go/src/github.com/ollama/ollama/llm/llama.cpp/ggml-cuda.cu:100: !\"CUDA error\"\n",
    );
    assert_eq!(gpus(&cite(&a, Category::ServerException, &[4])), [0]);
    assert_eq!(gpus(&cite(&a, Category::ServerException, &[1])), [0]);
    let a = analysis(
        "May 15 08:57:36 red llama-swap[80783]: CUDA error: an illegal memory access was encountered\n\
         May 15 08:57:36 red llama-swap[80783]:   current device: 0, in function ggml_backend_cuda_synchronize at /home/nux/dev/ik_llama.cpp/ggml/src/ggml-cuda.cu:3067\n\
         May 15 08:57:36 red llama-swap[80783]:   cudaStreamSynchronize(cuda_ctx->stream())\n\
         May 15 08:57:36 red llama-swap[80783]: /home/nux/dev/ik_llama.cpp/ggml/src/ggml-cuda.cu:110: CUDA error\n\
         May 15 08:57:36 red kernel: llama-server[80906]: segfault at 204803fe0 ip 00007f00399189d7 sp 00007ffc4a6104f0 error 4 in libcuda.so.575.51.03[7f00395c5000+e97000] likely on CPU 11 (core 11, socket 0)\n",
    );
    assert_eq!(gpus(&cite(&a, Category::ServerException, &[4])), [0]);
    assert!(gpus(&cite(&a, Category::ServerException, &[5])).is_empty());
}

#[test]
fn an_xid_finding_lists_every_xid_of_its_gpu() {
    let mut sources = SourceMap::default();
    sources.add(Source::new(
        "dmesg",
        b"[14328.198504] NVRM: Xid (PCI:0000:0a:00): 31, pid=13332, name=cuda_plot_k32_v, Ch 00000010, intr 00000000. MMU Fault: ENGINE CE2 HUBCLIENT_CE0 faulted @ 0x7f29_5b8c9000. Fault is of type FAULT_PRIV_VIOLATION\n\
          [14370.687545] NVRM: Xid (PCI:0000:0a:00): 62, pid='<unknown>', name=<unknown>, 2023b230 20238a3a 2023e8b6 2023eac4\n\
          [14372.202098] NVRM: Xid (PCI:0000:0b:00): 43, pid=777, name=python3, Ch 00000009\n",
    ));
    let a = crate::analyze(sources);
    let first = a.incident.xids().next().expect("an Xid").0.span;
    let mut f = Finding::new("test", Category::XidOther, Severity::Error);
    f.evidence(first, "the Xid 31");
    from_evidence(&a.incident, &mut f);
    assert_eq!(
        f.entities.xid.iter().copied().collect::<Vec<_>>(),
        vec![31, 62]
    );
    assert_eq!(
        f.entities.pids.iter().copied().collect::<Vec<_>>(),
        vec![13332]
    );
    // Other categories list only the codes they cite.
    let mut g = Finding::new("test", Category::Unknown, Severity::Error);
    g.evidence(first, "the Xid 31");
    from_evidence(&a.incident, &mut g);
    assert_eq!(g.entities.xid.iter().copied().collect::<Vec<_>>(), vec![31]);
}

#[test]
fn a_cited_xid_line_names_its_code_pid_and_bus() {
    let mut sources = SourceMap::default();
    sources.add(Source::new(
        "dmesg",
        b"[Wed Feb 19 10:02:11 2025] NVRM: Xid (PCI:0000:cb:00): 13, pid=1797828, name=python3, Graphics Exception\n",
    ));
    let a = crate::analyze(sources);
    let (e, _) = a.incident.xids().next().expect("an Xid");
    let mut f = Finding::new("test", Category::Unknown, Severity::Info);
    f.evidence(e.span, "the Xid");
    from_evidence(&a.incident, &mut f);
    assert_eq!(f.entities.xid.iter().copied().collect::<Vec<_>>(), vec![13]);
    assert!(f.entities.pids.contains(&1797828));
    assert!(
        f.entities.gpu_bus_ids.contains("0000:cb:00"),
        "{:?}",
        f.entities
    );
}

/// A GPU the rule named by its bus id in one spelling is not added again
/// in the kernel's (fixtures/rules/gpu-init-failed/pos-two-gpus-dmesg:
/// `NVRM: GPU 0000:04:01.0: RmInitAdapter failed!`, whose row captures the
/// bus): it is named as the line prints it, with its function.
#[test]
fn a_bus_the_rule_named_is_not_named_twice() {
    let a = analysis(
        "[ 1097.650222] NVRM: GPU 0000:04:01.0: RmInitAdapter failed! (0x11:0x45:2525)\n\
         [ 1097.650377] NVRM: GPU 0000:04:01.0: rm_init_adapter failed, device minor number 0\n",
    );
    let f = cite(&a, Category::XidOther, &[1, 2]);
    assert_eq!(
        f.entities.gpu_bus_ids.iter().collect::<Vec<_>>(),
        ["0000:04:01.0"]
    );
    let mut g = Finding::new("test", Category::XidOther, Severity::Error);
    g.entities.gpu_bus_ids.insert("0000:04:01.0".to_owned());
    for line in [1, 2] {
        let span = Span {
            source: crate::source::SourceId(0),
            line,
        };
        g.evidence(span, "a line");
    }
    from_evidence(&a.incident, &mut g);
    assert_eq!(
        g.entities.gpu_bus_ids.iter().collect::<Vec<_>>(),
        ["0000:04:01.0"]
    );
}

/// A GPU a cited line names as the program spells it is the GPU's index:
/// vLLM's `cuda:1` (fixtures/real/702, noonghunna/club-3090#535), the
/// driver's `GPU0` in front of an NVRM check
/// (NVIDIA/open-gpu-kernel-modules#1045), TensorFlow's `CUDA device
/// ordinal 0` (tensorflow/tensorflow#30594), Gaudi's `hl: 6`
/// (HabanaAI/vllm-fork#2134); and the next paste's other device, wrapped
/// or whole.
#[test]
fn a_gpu_named_as_the_program_spells_it_is_its_index() {
    let gpus = |text: &str| {
        let a = analysis(text);
        let f = cite(&a, Category::Unknown, &[1]);
        f.entities.gpus.iter().copied().collect::<Vec<_>>()
    };
    assert_eq!(
        gpus(
            "ValueError: Free memory on device cuda:1 (22.06/23.56 GiB) on startup is less than\n"
        ),
        [1]
    );
    assert_eq!(
        gpus(
            "ValueError: Free memory on device cuda:3 (8.88/121.69 GiB) on startup is less than desired GPU memory utilization (0.9, 109.52 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n"
        ),
        [3]
    );
    // The older wording names no device: no GPU.
    assert!(gpus("ValueError: Free memory on device (0.49/79.32 GiB) on startup is less than desired GPU memory utilization (0.6, 47.59 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n").is_empty());
    assert_eq!(
        gpus(
            "Jun 12 16:31:50 fedora-box kernel: NVRM: GPU0 nvCheckOkFailedNoLog: Check failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from _gpushareddataSendDataPollRpc(pGpu, polle>\n"
        ),
        [0]
    );
    assert!(gpus(" [Sun Jan 11 09:52:01 2026] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2874 \n").is_empty());
    assert_eq!(
        gpus(
            "2019-07-11 12:42:11.226602: W tensorflow/compiler/xla/service/platform_util.cc:240] unable to create StreamExecutor for CUDA:0: failed initializing StreamExecutor for CUDA device ordinal 0: Internal: failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY: out of memory; total memory reported: 11523260416\n"
        ),
        [0]
    );
    assert_eq!(
        gpus(
            "F tensorflow/stream_executor/lib/statusor.cc:34] Attempting to fetch value instead of handling error Internal: failed initializing StreamExecutor for CUDA device ordinal 2: Internal: failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered\n"
        ),
        [2]
    );
    assert_eq!(
        gpus(
            "Synapse detected a device critical error that requires a restart. Killing process in 5 seconds (hl: 6) 10:29:11 [No progress error]\n"
        ),
        [6]
    );
}

/// The spellings one capture may hold, each read the one way: an ordinal
/// after its prefix, a UUID through the GPUs the captures list, a bus id
/// as a kernel line's; a word that is none of them names nothing.
#[test]
fn a_gpu_reference_reads_every_spelling_and_nothing_else() {
    for (s, want) in [
        ("3", Some(3)),
        ("cuda:1", Some(1)),
        ("CUDA:0", Some(0)),
        ("CUDA0", Some(0)),
        ("ROCm1", Some(1)),
        ("GPU0", Some(0)),
        ("GPU 2", Some(2)),
        ("gpu(0)", Some(0)),
        ("nvidia0", None),
        ("cpu", None),
        ("cuda:", None),
    ] {
        assert_eq!(ordinal(s), want, "{s}");
    }
    let a = analysis(
        "index, uuid, name, memory.used [MiB], memory.total [MiB]\n\
         3, GPU-bb3cdc90-8130-ed6c-9db3-d58a6f1c1ee5, NVIDIA H100 80GB HBM3, 61392 MiB, 81559 MiB\n",
    );
    let mut f = Finding::new("test", Category::Unknown, Severity::Error);
    gpu_ref(
        &a.incident,
        &mut f,
        "GPU-bb3cdc90-8130-ed6c-9db3-d58a6f1c1ee5",
    );
    assert_eq!(f.entities.gpus.iter().copied().collect::<Vec<_>>(), [3]);
    let mut f = Finding::new("test", Category::Unknown, Severity::Error);
    gpu_ref(
        &a.incident,
        &mut f,
        "GPU-00000000-8130-ed6c-9db3-d58a6f1c1ee5",
    );
    assert!(f.entities.gpus.is_empty() && f.entities.gpu_bus_ids.is_empty());
    gpu_ref(&a.incident, &mut f, "0000:3b:00.0");
    assert!(f.entities.gpus.is_empty());
    assert_eq!(f.entities.gpu_bus_ids.len(), 1, "{:?}", f.entities);
}

/// The journal lines `systemctl status` prints under its block are the
/// unit's, whatever name their writer logs under: `nvidia-smi[1407]`
/// under `nvidia-persistenced.service` (fixtures/real/451,
/// bottlerocket-os/bottlerocket#4166), `llama-server[10778]` under
/// `llama.service` (fixtures/real/441, ggml-org/llama.cpp#10681). A user
/// manager's lines in the tail (`systemd[1315]:`, fixtures/real/813) are
/// not the unit's processes, nor is a journal pasted after another
/// command below the block.
#[test]
fn the_lines_under_a_status_block_are_the_units() {
    let a = analysis(
        "\u{25cb} nvidia-persistenced.service - NVIDIA Persistence Daemon\n\
         \x20    Loaded: loaded (/x86_64-bottlerocket-linux-gnu/sys-root/usr/lib/systemd/system/nvidia-persistenced.service; enabled; preset: enabled)\n\
         \x20    Active: inactive (dead) since Fri 2024-09-06 17:24:31 UTC; 1min 50s ago\n\
         \x20  Duration: 2.102s\n\
         \x20  Main PID: 1424 (code=exited, status=0/SUCCESS)\n\
         \x20       CPU: 2.814s\n\
         \n\
         Sep 06 17:24:28 ip-172-31-92-66.ec2.internal nvidia-smi[1407]: |  GPU   GI   CI        PID   Type   Process name                            GPU Memory |\n",
    );
    let f = cite(&a, Category::UnitExitedZeroNoRestart, &[3, 5]);
    assert_eq!(pids(&f), [1407, 1424]);
    // The tail line names the unit by itself too.
    let g = cite(&a, Category::Unknown, &[8]);
    assert!(g.entities.units.contains("nvidia-persistenced.service"));
    let a = analysis(
        "\u{d7} llama.service\n\
         \x20    Loaded: loaded (/etc/systemd/system/llama.service; enabled; preset: enabled)\n\
         \x20    Active: failed (Result: core-dump) since Wed 2024-12-04 01:59:28 EST; 19min ago\n\
         \x20  Main PID: 10778 (code=dumped, signal=SEGV)\n\
         \x20       CPU: 9min 16.395s\n\
         \n\
         Dec 04 01:59:28 kamala llama-server[10778]: llama_decode: failed to decode, ret = 1\n\
         Dec 04 01:59:28 kamala systemd[1]: llama.service: Main process exited, code=dumped, status=11/SEGV\n\
         \n\
         $ journalctl -b\n\
         Dec 04 01:59:30 kamala sshd[2600]: Accepted publickey for root\n",
    );
    assert_eq!(
        a.incident
            .unit_pids
            .get("llama.service")
            .map(|p| p.iter().copied().collect::<Vec<_>>()),
        Some(vec![10778])
    );
    let g = cite(&a, Category::Unknown, &[7]);
    assert!(
        g.entities.units.contains("llama.service"),
        "{:?}",
        g.entities
    );
    let a = analysis(
        "\u{25cf} auto-fix-vscode-server.service - Automatically fix the VS Code server used by the remote SSH extension\n\
         \x20    Active: failed (Result: start-limit-hit) since Thu 2021-09-02 19:07:50 UTC; 1s ago\n\
         \x20  Main PID: 4607 (code=exited, status=0/SUCCESS)\n\
         \n\
         Sep 02 19:07:50 doodoo systemd[1315]: auto-fix-vscode-server.service: Start request repeated too quickly.\n",
    );
    assert_eq!(
        a.incident
            .unit_pids
            .get("auto-fix-vscode-server.service")
            .map(|p| p.iter().copied().collect::<Vec<_>>()),
        Some(vec![4607])
    );
}

/// A journal line written under a serving program's name is its installed
/// unit's where the inputs name no unit for it: `ollama[27605]` is
/// `ollama.service`'s (fixtures/real/756, ollama/ollama#7009; and the next
/// paste's `ollama[22199]`, fixtures/real-incoming/batch-m/950); a unit the
/// inputs tie the writer to wins (a renamed unit: the status block above
/// 950's line is constructed, no public paste with one was found), and
/// another program's writer gets none.
#[test]
fn a_serving_programs_journal_line_names_its_installed_unit() {
    let units = |f: &Finding| f.entities.units.iter().cloned().collect::<Vec<_>>();
    let a = analysis(
        "9\u{6708} 28 23:37:31 ubuntu-homaer ollama[27605]: [GIN] 2024/09/28 - 23:37:31 | 200 | 10.729482469s |   192.168.2.210 | POST     \"/api/generate\"\n\
         9\u{6708} 29 00:10:02 ubuntu-homaer systemd[1]: Stopping Ollama Service...\n\
         9\u{6708} 29 00:10:02 ubuntu-homaer ollama[27605]: [GIN] 2024/09/29 - 00:10:02 | 500 |        32m31s |   192.168.2.210 | POST     \"/api/generate\"\n",
    );
    let f = cite(&a, Category::ServerHang, &[3, 2]);
    assert_eq!(units(&f), ["ollama.service"]);
    assert_eq!(pids(&f), [27605]);
    let a = analysis(
        "Feb 28 17:05:26 iZ0jl5att67k7fqmbzp4j2Z ollama[22199]: [GIN] 2025/02/28 - 17:05:26 | 500 |         5m16s |    10.219.32.13 | POST     \"/api/chat\"\n\
         Feb 28 17:05:30 iZ0jl5att67k7fqmbzp4j2Z sshd[2600]: Accepted publickey for root\n",
    );
    assert_eq!(
        units(&cite(&a, Category::ServerHang, &[1])),
        ["ollama.service"]
    );
    assert!(units(&cite(&a, Category::Unknown, &[2])).is_empty());
    let a = analysis(
        "\u{25cf} ollama-gpu1.service - Ollama on GPU 1\n\
         \x20    Active: active (running) since Fri 2025-02-28 16:58:01 CST; 7min ago\n\
         \x20  Main PID: 22199 (ollama)\n\
         \n\
         Feb 28 17:05:26 iZ0jl5att67k7fqmbzp4j2Z ollama[22199]: [GIN] 2025/02/28 - 17:05:26 | 500 |         5m16s |    10.219.32.13 | POST     \"/api/chat\"\n",
    );
    assert_eq!(
        units(&cite(&a, Category::ServerHang, &[5])),
        ["ollama-gpu1.service"]
    );
}
