//! Stages read from a program's own output format: nccl-tests' results
//! table with no row, vLLM's engine built and nothing after it, TurboMind's
//! trace of a model step as the last lines; each with the paste that must
//! stay clean beside it.

use super::stage_word_tests::{cites, hang, stalled};

/// NVIDIA/nccl-tests#117: all_reduce_perf on two RTX 4090s prints its
/// header and never a row. The ranks' process and GPUs are named.
const NCCL_TESTS_HEADER_ONLY: &str = "\
m2@4090-01-R02:~/nccl-tests$ ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 2
# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 
#
# Using devices
#   Rank  0 Pid   4479 on 4090-01-R02 device  0 [0x81] NVIDIA GeForce RTX 4090
#   Rank  1 Pid   4479 on 4090-01-R02 device  1 [0xa1] NVIDIA GeForce RTX 4090
#
#                                                       out-of-place                       in-place          
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
";

#[test]
fn nccl_tests_header_with_no_row_is_a_first_collective_that_never_returned() {
    let f = hang(NCCL_TESTS_HEADER_ONLY);
    assert!(f.title.contains("first collective"), "{}", f.title);
    assert!(f.entities.pids.contains(&4479), "{:?}", f.entities.pids);
    assert!(
        cites(&f, NCCL_TESTS_HEADER_ONLY, "NVIDIA GeForce RTX 4090"),
        "{f:#?}"
    );
}

/// Azure/azurehpc-health-checks#142 (fixtures/real/915): the same table
/// with its row and summary is a run that completed.
#[test]
fn nccl_tests_with_its_rows_and_summary_is_no_hang() {
    let text = "\
# nThread 1 nGpus 8 minBytes 17179869184 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   5026 on         vm device  0 [0x00] NVIDIA H200
#  Rank  1 Group  0 Pid   5026 on         vm device  1 [0x00] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
 17179869184    4294967296     float     sum      -1    62639  274.27  479.97      0    62601  274.44  480.26      0
";
    assert!(stalled(text).is_none(), "a row came: the test ran");
    let summary = format!("{text}# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 480.11\n");
    assert!(stalled(&summary).is_none());
}

/// OpenRLHF/OpenRLHF#951: the vLLM engine of a Ray actor came up (KV
/// cache sized, graphs captured, `init engine … took`) and nothing after
/// it: stalled there, at a low confidence, with the KV cache cited.
const ENGINE_UP: &str = "\
(LLMRayActor pid=123434) INFO 04-09 01:52:12 [kv_cache_utils.py:566] GPU KV cache size: 5,854,768 tokens
(LLMRayActor pid=123434) INFO 04-09 01:52:12 [kv_cache_utils.py:569] Maximum concurrency for 2,048 tokens per request: 2858.77x
(LLMRayActor pid=123434) INFO 04-09 01:52:46 [gpu_model_runner.py:1534] Graph capturing finished in 33 secs, took 1.27 GiB
(LLMRayActor pid=123434) INFO 04-09 01:52:46 [core.py:151] init engine (profile, create kv cache, warmup model) took 47.83 seconds
";

#[test]
fn an_engine_that_came_up_and_went_silent_is_stalled_after_it() {
    let f = hang(ENGINE_UP);
    assert!(f.title.contains("inference engine built"), "{}", f.title);
    assert!(f.confidence <= 0.3, "{}", f.confidence);
    assert!(cites(&f, ENGINE_UP, "GPU KV cache size"), "{f:#?}");
    assert!(f.entities.pids.contains(&123434), "{:?}", f.entities.pids);
}

/// vllm-project/vllm#20707: the engine up, then the API server's lines:
/// the start-up went on.
#[test]
fn an_engine_followed_by_its_api_server_is_no_hang() {
    let text = "\
(EngineCore_0 pid=1399537) INFO 08-19 14:58:40 [core.py:215] init engine (profile, create kv cache, warmup model) took 1.06 seconds
(APIServer pid=1391815) INFO 08-19 14:58:41 [api_server.py:1639] Supported_tasks: ['generate']
INFO:     Application startup complete.
";
    assert!(stalled(text).is_none());
}

/// InternLM/lmdeploy#3568 (start-up, `--tp=8`) and #4053 (serving, its
/// first `[` lost in the paste): TurboMind's trace of a model step as the
/// last lines.
#[test]
fn a_turbomind_step_trace_that_ends_the_paste_is_a_step_that_never_finished() {
    let warmup = "[TM][DEBUG] void turbomind::UnifiedAttentionLayer::Forward(turbomind::UnifiedAttentionLayer::ForwardParam)\n"
        .repeat(7);
    let f = hang(&warmup);
    assert!(f.title.contains("model step"), "{}", f.title);
    assert!(
        f.headline.contains("UnifiedAttentionLayer::Forward"),
        "{}",
        f.headline
    );
    let serving = "\
TM][DEBUG] turbomind::core::Tensor turbomind::LlamaV2::postDecodeEmbedding(const turbomind::core::Tensor&, turbomind::core::Buffer)
[TM][DEBUG] void turbomind::LlamaV2::dynamicDecode(turbomind::core::Buffer, turbomind::core::Buffer, turbomind::core::Buffer, turbomind::core::Tensor, turbomind::core::Tensor, turbomind::core::Buffer, turbomind::core::Buffer, turbomind::core::Buffer, turbomind::core::Buffer, turbomind::core::Buffer, turbomind::core::Buffer, turbomind::core::Buffer, int, int)
";
    let f = hang(serving);
    assert!(cites(&f, serving, "dynamicDecode"), "{f:#?}");
}

/// A trace followed by the server's own lines (a request answered) is a
/// server at work.
#[test]
fn a_step_trace_followed_by_other_lines_is_no_hang() {
    let text = "\
[TM][DEBUG] void turbomind::LlamaV2::dynamicDecode(turbomind::core::Buffer, int, int)
INFO:     127.0.0.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK
";
    assert!(stalled(text).is_none());
}
