//! What a test harness prints around the output it captures: pytest's
//! terminal report (src/_pytest/terminal.py: the `=== test session starts
//! ===` rules, `platform …`, `rootdir:`, `collected N items`, progress
//! lines, `FAILED path::test - …`, `tests/utils.py:403: ValueError`) and
//! the GPU summaries CI fixtures print between tests (vLLM's
//! `gpu memory used (GB): 0=30.31; 1=29.41;`, vllm-omni's GPU memory
//! monitor, SGLang's `[CI GPU Idle] Waiting for GPU to become idle: …`) and
//! gpu-burn's (`Initialized device 0 with 8126 MB of memory (…)`, its
//! `10.4%  proc'd: …` progress, `Using compare file: …`, `Burning for 60
//! seconds.` and its clean-up lines). A line read here is the harness's own; the output it
//! captured is read by the other recognisers.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::{Facts, GpuMention};
use crate::source::Span;

/// pytest's lines, by their fixed shapes.
static PYTEST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:
          ={3,}\x20.*\x20={3,}                      # === test session starts ===
        | ={10,}                                    # a report's rule
        | -{3,}\x20.*\x20-{3,}                      # --- Captured stdout call ---
        | _{3,}\x20.*\x20_{3,}                      # ___ test_name ___
        | platform\x20\S+\x20--\x20Python\x20\S+,\x20pytest-\S+.*
        | (?:rootdir|configfile|cachedir|plugins|testpaths|inifile):\x20.*
        | collect(?:ed|ing)\x20.*item.*
        | [0-9A-Za-z_./-]+\.py::\S+                  # a test id `pytest -v -s` prints alone
        | \S+\.py(?:::\S+)?\x20(?:[.FEsxX]+|PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\s+\[\s*[0-9]+%\]
        | (?:FAILED|ERROR|PASSED|SKIPPED|XFAIL|XPASS)\x20\S+\.py(?:::\S+)?(?:\x20-\x20.*)?
        | \S+\.py:[0-9]+:\x20[A-Za-z_][0-9A-Za-z_.]*(?:Error|Exception|Warning|Failed|Interrupt)
        )\s*$",
    )
    .expect("pytest line regex")
});

/// GPU summaries of CI fixtures: vLLM's tests/utils.py
/// (wait_for_gpu_memory_to_clear) and vllm-omni's GPU memory monitor.
static GPU_SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\s*(?:
          gpu\x20memory\x20used\x20\(GB\):(?:\x20[0-9]+=[0-9.]+;)+
        | GPU\x20[0-9]+:\x20[0-9.]+GiB/[0-9.]+GiB\x20\([0-9.]+%\)
        | \[GPU\x20Memory\x20(?:Monitor|Status|Freed)\]\x20.*
        | \[CI\x20GPU\x20Idle\]\x20.*                   # SGLang's CI gate before a test class
        | Initialized\x20device\x20[0-9]+\x20with\x20[0-9]+\x20MB\x20of\x20memory\x20\([0-9]+\x20MB\x20available,\x20using\x20[0-9]+\x20MB\x20of\x20it\).*
        | [0-9]+\.[0-9]+%\x20+proc'd:\x20.*                   # gpu-burn's progress line
        # gpu-burn's other fixed lines (gpu_burn-drv.cpp: main's `Using
        # compare file: %s` and `Burning for %d seconds.`, startBurn's
        # `Results are %zu bytes each, …`, listenClients' kills, the
        # workers' clean-up); its verdict (`GPU 0: FAULTY`) is not here.
        | Using\x20compare\x20file:\x20\S+
        | Burning\x20for\x20[0-9]+\x20seconds\.
        | Results\x20are\x20[0-9]+\x20bytes\x20each,\x20thus\x20performing\x20[0-9]+\x20iterations
        | Killing\x20processes\x20with\x20SIG(?:TERM\x20\(soft|KILL\x20\(force)\x20kill\)
        | Freed\x20memory\x20for\x20dev\x20[0-9]+
        | Uninitted\x20cublas
        | (?:Pre|Post)-test\x20GPU\x20status:
        | Condition:\x20Memory\x20usage\x20ratio\x20.*
        | Wait\x20time:\x20[0-9.]+\x20seconds.*
        | Final\x20status:
        )\s*$",
    )
    .expect("gpu summary regex")
});

/// The GPU a vllm-omni summary row names (`  GPU 4: 0.6GiB/140.4GiB
/// (0.4%)`), and each of vLLM's `0=30.31;` pairs.
static SUMMARY_GPU: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*GPU\x20(?P<row>[0-9]+):\x20|\x20(?P<pair>[0-9]+)=[0-9.]+;")
        .expect("summary gpu regex")
});

/// vllm-omni's fixture after it stopped its server: `Warning: Processes
/// still alive: [30951, 30954]` (vllm-project/vllm-omni#4165).
static LEFTOVERS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:Warning:\x20)?Processes\x20still\x20alive:\x20\[(?P<pids>[0-9]+(?:,\x20?[0-9]+)*)\]\s*$")
        .expect("leftovers regex")
});

/// Reads a harness's line: whether it is one, recording the GPUs its
/// memory summary names and the PIDs it says it left alive.
pub(crate) fn read(text: &str, span: Span, facts: &mut Facts) -> bool {
    if let Some(c) = LEFTOVERS.captures(text) {
        let pids = c["pids"].split(',').filter_map(|p| p.trim().parse().ok());
        facts.leftover_pids.extend(pids.map(|p| (p, span)));
        return true;
    }
    if !recognizes(text) {
        return false;
    }
    if GPU_SUMMARY.is_match(text) {
        for c in SUMMARY_GPU.captures_iter(text) {
            let index = c.name("row").or_else(|| c.name("pair"));
            if let Some(i) = index.and_then(|m| m.as_str().parse().ok()) {
                facts.gpu_mentions.push(GpuMention {
                    index: i,
                    by: "a test harness's memory summary",
                    span,
                });
            }
        }
    }
    true
}

/// Whether `text` is a line a test harness printed.
pub(crate) fn recognizes(text: &str) -> bool {
    let Some(&first) = text.trim_start().as_bytes().first() else {
        return false;
    };
    // Byte tests first: every shape starts with a rule, a letter, `[` or
    // gpu-burn's percentage.
    match first {
        b'=' | b'-' | b'_' => PYTEST.is_match(text),
        b'[' => GPU_SUMMARY.is_match(text),
        b'0'..=b'9' => text.contains("proc'd: ") && GPU_SUMMARY.is_match(text),
        b if b.is_ascii_alphabetic() => PYTEST.is_match(text) || GPU_SUMMARY.is_match(text),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pytest's report from https://github.com/vllm-project/vllm/pull/31853
    /// and the pytest docs' own example session; vllm-omni's GPU memory
    /// monitor from https://github.com/vllm-project/vllm-omni/pull/1743 and
    /// https://github.com/vllm-project/vllm-omni/pull/4900.
    #[test]
    fn harness_lines_are_read_and_captured_output_is_not() {
        for line in [
            "tests/utils/test_gpu_memory_monitor.py .............................. [100%]",
            "14 passed in 0.45s",
            "=========================== test session starts ============================",
            "platform linux -- Python 3.x.y, pytest-8.x.y, pluggy-1.x.y",
            "rootdir: /home/sweet/project",
            "collected 1 item",
            "test_sample.py F                                                     [100%]",
            "================================= FAILURES =================================",
            "_______________________________ test_answer ________________________________",
            "test_sample.py:6: AssertionError",
            // `pytest -v -s`'s test id (https://github.com/vllm-project/vllm-omni/pull/2032).
            "tests/e2e/online_serving/test_bagel_online.py::test_bagel_img2img_online[omni_server0] ",
            "FAILED test_sample.py::test_answer - assert 4 == 5",
            "============================ 1 failed in 0.12s =============================",
            "[GPU Memory Monitor] Waiting for GPU 3, 7 to free memory, Condition: Memory usage ratio ≤ 5.0%",
            "[GPU Memory Status] Current usage:",
            "  GPU 3: 3.0GiB/80.0GiB (3.8%)",
            "[GPU Memory Freed] Devices 3, 7 meet memory condition",
            "   Condition: Memory usage ratio ≤ 5.0%",
            "   Wait time: 0.0 seconds (0.0 minutes)",
            "   Final status:",
            "Post-test GPU status:",
            // gpu-burn's first line from https://github.com/wilicc/gpu-burn/issues/92;
            // the others written from gpu_burn-drv.cpp's format strings
            // (wilicc/gpu-burn@3ead140: printf at lines 914, 196, 612, 144, 147).
            "Using compare file: /tmp/gpu-burn-master/compare.ptx",
            "Burning for 60 seconds.",
            "Results are 268435456 bytes each, thus performing 280 iterations",
            "Killing processes with SIGTERM (soft kill)",
            "Freed memory for dev 0",
            "Uninitted cublas",
        ] {
            // `14 passed in 0.45s` is pytest's without its rules (the PR
            // cut them): not read alone.
            assert_eq!(recognizes(line), !line.starts_with("14 "), "{line}");
        }
        // What the summaries name: the GPUs (vLLM's pairs, vllm-omni's
        // rows) and the PIDs a fixture left alive
        // (vllm-project/vllm-omni#4165).
        let mut facts = Facts::default();
        let span = |line| Span {
            source: crate::source::SourceId(0),
            line,
        };
        for (n, line) in [
            "gpu memory used (GB): 0=30.31; 1=29.41; ",
            "  GPU 7: 0.6GiB/140.4GiB (0.4%)",
            "Warning: Processes still alive: [30951, 30954]",
            "[GPU Memory Freed] Devices 3, 7 meet memory condition",
        ]
        .iter()
        .enumerate()
        {
            assert!(read(line, span(n as u32 + 1), &mut facts), "{line}");
        }
        let gpus: Vec<(u32, u32)> = facts
            .gpu_mentions
            .iter()
            .map(|m| (m.index, m.span.line))
            .collect();
        assert_eq!(gpus, [(0, 1), (1, 1), (7, 2)]);
        assert_eq!(facts.leftover_pids, [(30951, span(3)), (30954, span(3))]);
        assert!(!read("ValueError: boom", span(9), &mut facts));
        for line in [
            "ValueError: boom",
            "INFO 01-14 12:36:52 worker.py:240] Memory profiling takes 1.46 seconds",
            "GPU 0: NVIDIA B200 (UUID: GPU-19a556ea-38df-750d-fcf7-3da28757ba5b)",
        ] {
            assert!(!recognizes(line), "{line}");
        }
    }
}
