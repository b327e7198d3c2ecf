//! `scheduler-no-progress` over real status lines of vLLM (0.1, V0, V1)
//! and variants of SGLang's decode line.

use crate::rules::{Category, Severity};
use crate::testing::findings_of;

fn findings(text: &str) -> Vec<crate::rules::Finding> {
    findings_of(super::META.id, text)
}

/// https://github.com/vllm-project/vllm/issues/633 (batch M's 936): vLLM
/// 0.1 on a T4; one request fills the KV cache, then waits forever.
const T4: &str = "\
INFO 08-01 03:08:39 scheduler.py:271] Throughput: 0.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 92.9%, CPU KV cache usage: 0.0%
INFO 08-01 03:08:45 scheduler.py:271] Throughput: 181.6 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 100.0%, CPU KV cache usage: 0.0%
INFO 08-01 03:08:51 scheduler.py:271] Throughput: 185.4 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 100.0%, CPU KV cache usage: 0.0%
INFO 08-01 03:08:56 scheduler.py:271] Throughput: 189.7 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 100.0%, CPU KV cache usage: 0.0%
INFO 08-01 03:09:02 scheduler.py:271] Throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%
INFO 08-01 03:09:07 scheduler.py:271] Throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%
INFO 08-01 03:09:12 scheduler.py:271] Throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%
INFO 08-01 03:09:17 scheduler.py:271] Throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%
";

/// https://github.com/vllm-project/vllm/issues/23378 (batch M's 958): V1,
/// engine 004 of DP8 with 255 requests running and nothing generated.
const DP8: &str = "(APIServer pid=2019320) INFO 08-21 14:30:43 [loggers.py:123] Engine 004: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 255 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%\n";

/// https://github.com/vllm-project/vllm/issues/2734 (fixtures/real/020):
/// the next such paste, V0's wording, a request running four minutes
/// without a token.
const V0_STUCK: &str = "\
INFO 02-03 13:14:04 llm_engine.py:706] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%
INFO 02-03 13:18:39 llm_engine.py:706] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%
";

#[test]
fn a_request_that_filled_the_cache_then_waits_forever_is_a_kv_cache_too_small() {
    let f = findings(T4);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::KvCacheTooSmall);
    assert_eq!(f[0].severity, Severity::Error);
    let lines: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
    // The last full line, the first and the last line without progress.
    assert_eq!(lines, vec![4, 5, 8], "{f:?}");
}

#[test]
fn running_requests_with_nothing_generated_are_a_hang() {
    let f = findings(DP8);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::ServerHang);
    assert!(f[0].title.contains("engine 004"), "{}", f[0].title);
    assert!(f[0].entities.pids.contains(&2019320), "{f:?}");
    let f = findings(V0_STUCK);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::ServerHang);
    assert!(f[0].confidence > findings(DP8)[0].confidence);
}

#[test]
fn a_zero_line_between_busy_ones_or_an_idle_server_is_no_stall() {
    // The T4's first four lines: one interval of zero, then tokens.
    let head: String = T4.lines().take(4).map(|l| format!("{l}\n")).collect();
    assert!(findings(&head).is_empty());
    // Work again after the zeros (a variant: the T4's busy line after them).
    let resumed = format!("{T4}{}\n", T4.lines().nth(1).unwrap_or_default());
    assert!(findings(&resumed).is_empty());
    // An idle server: nothing running, nothing waiting
    // (fixtures/chatter/vllm/v0-metrics-406-idle.log).
    let idle = "INFO 08-22 20:52:46 metrics.py:406] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%.\n";
    assert!(findings(&idle.repeat(3)).is_empty());
    // A long prompt being processed: prompt tokens, no generated ones yet
    // (a variant of the V0 line).
    let prefill = V0_STUCK.replace("Avg prompt throughput: 0.0", "Avg prompt throughput: 812.4");
    assert!(findings(&prefill).is_empty());
    // One line with requests running and the cache in use is not enough.
    let one = DP8.replace("GPU KV cache usage: 0.0%", "GPU KV cache usage: 41.3%");
    assert!(findings(&one).is_empty());
}

#[test]
fn sglangs_decode_lines_read_the_same_way() {
    // https://github.com/sgl-project/sglang/issues/3909's decode line, its
    // throughput set to zero on the last two (a variant of the grammar).
    let busy = "[2025-02-27 04:46:39 TP0] Decode batch. #running-req: 8, #token: 62531, token usage: 0.12, gen throughput (token/s): 186.64, #queue-req: 0\n";
    let zero = busy.replace("186.64", "0.00");
    let f = findings(&format!("{busy}{zero}{zero}"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::ServerHang);
    assert!(findings(&format!("{busy}{zero}{busy}")).is_empty());
}
