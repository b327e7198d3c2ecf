//! Stages known by their words, whatever the stack and whatever part of the
//! logger's prefix survived: vLLM (Ascend)'s weights, lmdeploy's TurboMind,
//! NCCL's first collective, TensorRT-LLM's engine, SGLang's graph capture;
//! each with the paste that must stay clean beside it.

use crate::model::Category;
use crate::rules::Finding;

pub(super) fn analysis(text: &str) -> (Vec<Finding>, Option<Category>) {
    let d = crate::testing::analyze_paste(text).diagnosis;
    let root = d
        .root_cause
        .as_ref()
        .and_then(|id| d.findings.iter().find(|f| &f.id == id))
        .map(|f| f.category);
    (d.findings, root)
}

pub(super) fn stalled(text: &str) -> Option<Finding> {
    analysis(text)
        .0
        .into_iter()
        .find(|f| f.rule == super::META.id)
}

/// The stalled finding, which must also be the root cause.
pub(super) fn hang(text: &str) -> Finding {
    let (findings, root) = analysis(text);
    assert_eq!(root, Some(Category::ServerHang), "{text}\n{findings:#?}");
    stalled(text).unwrap_or_else(|| panic!("{text}"))
}

pub(super) fn cites(f: &Finding, text: &str, words: &str) -> bool {
    f.evidence.iter().any(|e| {
        text.lines()
            .nth(e.span.line.saturating_sub(1) as usize)
            .is_some_and(|l| l.contains(words))
    })
}

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/rules/startup-stage-stalled/"
);

fn fixture(case: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}{case}/log.txt")).expect(case)
}

/// vLLM Ascend's two lines as the reporter typed them, no prefix and no
/// space before `GB` (vllm-project/vllm-ascend#698): the weights loaded,
/// then nothing, at the low confidence of a paste that may be cut. The
/// same line with vLLM's whole prefix reads the same; a KV cache sized
/// after it moves the stage on, and ready ends the story.
#[test]
fn weights_loaded_without_the_prefix_then_nothing_is_a_hang_there() {
    let text = fixture("pos-vllm-ascend-weights-loaded-no-prefix");
    let f = hang(&text);
    assert!(f.title.contains("the weights loaded"), "{}", f.title);
    assert!(f.confidence <= 0.3, "{}", f.confidence);
    assert!(cites(&f, &text, "Loading model weights took"), "{f:#?}");
    // The whole prefix of vLLM 0.6 (liunian-Jay/MU-GOT#17).
    let whole = "INFO 11-20 10:45:57 model_runner.py:692] Loading model weights took 1.9900 GB\n";
    assert!(stalled(whole).is_some());
    let served = format!("{text}INFO:     Application startup complete.\n");
    assert!(stalled(&served).is_none(), "{served}");
}

/// lmdeploy's command, TurboMind's DLL path and its routine GEMM warning,
/// then nothing (InternLM/lmdeploy#3167): a hang once the weights are
/// loaded, quoting the warning. The same start followed by the server's
/// `HINT: Please open …` (lmdeploy's docs) is a server that came up.
#[test]
fn lmdeploy_silent_after_turbomind_built_its_engine_is_a_hang() {
    let text = fixture("pos-lmdeploy-turbomind-gemm-warning-then-nothing");
    let f = hang(&text);
    assert!(f.title.contains("the weights loaded"), "{}", f.title);
    assert!(cites(&f, &text, "gemm_config.in"), "{f:#?}");
    let up = format!(
        "{text}HINT:    Please open  http://0.0.0.0:23333   in a browser for detailed api usage!!!\n"
    );
    assert!(stalled(&up).is_none(), "{up}");
}

/// Every rank shown completed NCCL's init and posted its first AllReduce
/// (`opCount 0`), then nothing (NVIDIA/nccl#997): stuck at the first
/// collective, an operation under way, naming the ranks' Init COMPLETE
/// lines and the next step for every node.
#[test]
fn nccl_initialised_then_the_first_collective_and_nothing_is_a_hang_there() {
    let text = fixture("pos-megatron-16-ranks-first-allreduce-silent");
    let f = hang(&text);
    assert!(f.title.contains("first collective"), "{}", f.title);
    assert!(f.confidence > 0.3 && f.confidence < 0.7, "{}", f.confidence);
    assert!(cites(&f, &text, "Init COMPLETE"), "{f:#?}");
    let advised = |a: &crate::rules::Action| matches!(&a.kind, crate::rules::ActionKind::Advice { text, .. } if text.contains("every rank of every node"));
    assert!(f.actions.iter().any(advised), "{:#?}", f.actions);
    // A later collective of the job (`opCount 1a`, NVIDIA/nccl#203): the
    // first one completed, the job runs.
    let runs = format!(
        "{text}gpu1:13135:13922 [0] NCCL INFO AllReduce: opCount 1a sendbuff 0x10048f82700 recvbuff 0x10048f82800 count 64 datatype 7 op 0 root 0 comm 0x7f0c741162f0 [nranks=2] stream 0x7f0c74002f00\n"
    );
    assert!(stalled(&runs).is_none(), "{runs}");
}

/// A group of one waits for nobody: nccl-tests' `opCount 0` lines on
/// `[nranks=1]` (NVIDIA/nccl#1238) are no first collective to hang at.
#[test]
fn a_first_collective_of_a_group_of_one_is_no_wait() {
    let text = "ip-172-31-54-74:30125:30125 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7fc9c4000000 recvbuff 0x7fc9bc000000 count 33554432 datatype 7 op 0 root 0 comm 0x5631f0816b40 [nranks=1] stream 0x5631f0021140 \n";
    assert!(stalled(text).is_none());
}

/// NCCL's init then the watchdog's timeout 30 minutes later
/// (hiyouga/LlamaFactory#2424's line): the timeout is the story, read by
/// its own rule, not a silent start-up.
#[test]
fn init_complete_then_a_watchdog_timeout_is_the_timeout() {
    let text = "64:219:636 [4] NCCL INFO comm 0x4df81900 rank 4 nranks 16 cudaDev 4 busId 85000 - Init COMPLETE\n\
                [E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800572 milliseconds before timing out.\n";
    let (findings, root) = analysis(text);
    assert_eq!(root, Some(Category::NcclTimeout), "{findings:#?}");
    assert!(stalled(text).is_none());
}

/// A paste that ends on one rank's NCCL `Init COMPLETE` on one node says
/// nothing more than that the group formed: healthy start-ups are pasted
/// to there too (the NCCL rules' near misses), so it is no hang by itself
/// (a group over the network, or part of one, is: training_tests.rs).
#[test]
fn init_complete_alone_at_the_end_is_no_hang() {
    let text = "ubuntu-SYS-420GP-TNR:3740804:3740804 [0] NCCL INFO comm 0xb923230 rank 0 nranks 2 cudaDev 0 nvmlDev 2 busId 56000 commId 0xb587bdc561ea636b - Init COMPLETE\n";
    assert!(stalled(text).is_none());
}

/// TensorRT-LLM began loading its engine and printed nothing more
/// (triton-inference-server/server#8540): stuck loading. Its engines
/// deserialised on every rank, then nothing (NVIDIA/TensorRT-LLM#1507's
/// lines): stalled once the weights loaded, at the low confidence; Triton's
/// `Started HTTPService` after them (server#6821) is a server that serves.
#[test]
fn tensorrt_llm_engine_loading_then_nothing_is_a_hang() {
    let text = fixture("pos-trtllm-engine-version-then-nothing");
    let f = hang(&text);
    assert!(f.title.contains("loading the weights"), "{}", f.title);
    assert!(cites(&f, &text, "Engine version 1.0.0"), "{f:#?}");
    let loaded = "[TensorRT-LLM][INFO] Loaded engine size: 2778 MiB\n\
                  [TensorRT-LLM][INFO] Loaded engine size: 2778 MiB\n";
    let f = hang(loaded);
    assert!(f.title.contains("the weights loaded"), "{}", f.title);
    assert!(f.confidence <= 0.3, "{}", f.confidence);
    assert_eq!(f.occurrences, 2);
    let serving = format!(
        "{loaded}I0122 09:48:46.348120 1180 http_server.cc:4619] Started HTTPService at 0.0.0.0:8000\n"
    );
    assert!(stalled(&serving).is_none(), "{serving}");
}

/// SGLang began capturing its CUDA graphs, then nothing
/// (sgl-project/sglang#4826's line): stuck in the capture.
#[test]
fn sglang_capture_begun_then_nothing_is_a_hang_in_the_capture() {
    let text = "[2025-03-27 21:33:31 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=13.95 GB\n";
    let f = hang(text);
    assert!(f.title.contains("capturing CUDA graphs"), "{}", f.title);
}

/// KoboldCpp's settings banner, printed with `Loading model:` just before
/// its backend loads the model, then nothing (LostRuins/koboldcpp#766);
/// Tabby's downloader finishing a model file, then nothing
/// (TabbyML/tabby#2719): both start-ups stopped while loading the weights.
/// An error after either is the story instead.
#[test]
fn koboldcpps_banner_and_tabbys_download_are_the_weights_loading() {
    let banner = "[Threads: 2, BlasThreads: 2, SmartContext: False, ContextShift: True]\n";
    let f = hang(banner);
    assert!(f.title.contains("loading the weights"), "{}", f.title);
    assert!(cites(&f, banner, "BlasThreads: 2"), "{f:#?}");
    let tabby = "Writing to new file.\n\
                 🎯 Downloaded https://huggingface.co/Qwen/Qwen2-1.5B-Instruct-GGUF/resolve/main/qwen2-1_5b-instruct-q8_0.gguf to /data/models/TabbyML/Qwen2-1.5B-Instruct/ggml/model.gguf.tmp\n";
    let f = hang(tabby);
    assert!(cites(&f, tabby, "Qwen2-1.5B-Instruct"), "{f:#?}");
    let failed = format!("{banner}CUDA error: out of memory\n");
    assert!(stalled(&failed).is_none(), "{failed}");
}

/// vLLM's per-shape DEBUG capture rows of both workers, then nothing
/// (vllm-project/vllm-ascend#2416, a docker compose log): stuck in the
/// capture; the same rows followed by vLLM's `Graph capturing finished`
/// (the catalog's line, rendered from its format string) are a capture
/// that completed.
#[test]
fn vllms_per_shape_capture_rows_then_nothing_are_a_hang_in_the_capture() {
    let text = "vllm     | (Worker_TP1_EP1 pid=43) DEBUG 09-13 16:16:38 [compilation/cuda_graph.py:134] Capturing a cudagraph on (PIECEWISE,BatchDescriptor(num_tokens=2, uniform_decode=False))\n\
                vllm     | (Worker_TP0_EP0 pid=42) DEBUG 09-13 16:16:38 [compilation/cuda_graph.py:134] Capturing a cudagraph on (PIECEWISE,BatchDescriptor(num_tokens=8, uniform_decode=False))\n";
    let f = hang(text);
    assert!(f.title.contains("capturing CUDA graphs"), "{}", f.title);
    let done = format!(
        "{text}INFO 08-16 09:05:03 model_runner.py:1225] Graph capturing finished in 5 secs.\n"
    );
    assert!(stalled(&done).is_none(), "{done}");
}

/// llama.cpp placed its weights on an RPC device and went silent, the
/// rpc-server pasted below it only accepting and closing connections
/// (ggml-org/llama.cpp#11552): stuck sending the weights, advised as the
/// RPC exchange (matching builds), citing the server's last line.
#[test]
fn llama_rpc_weights_placed_then_silence_is_a_hang_in_the_rpc_upload() {
    let text = "load_tensors: offloaded 29/29 layers to GPU\n\
                load_tensors: RPC[192.168.90.190:50052] model buffer size =  2700.00 MiB\n\
                load_tensors:   CPU_Mapped model buffer size =   170.54 MiB\n\
                Starting RPC server on 192.168.90.190:50052, backend memory: 23210 MB\n\
                Accepted client connection, free_mem=24337514496, total_mem=25327697920\n\
                Client connection closed\n";
    let f = hang(text);
    assert!(f.title.contains("loading the weights"), "{}", f.title);
    assert!(cites(&f, text, "Client connection closed"), "{f:#?}");
    assert!(f.explanation.contains("rpc-server"), "{}", f.explanation);
    // A model on local devices only keeps the storage advice.
    let local = "load_tensors:        CUDA0 model buffer size = 25338.47 MiB\n";
    let f = hang(local);
    assert!(!f.explanation.contains("rpc-server"), "{}", f.explanation);
}
