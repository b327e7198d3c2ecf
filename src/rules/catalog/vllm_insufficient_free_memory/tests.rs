//! The profiling error's tests: the real wrapped paste and its variants.

use crate::testing::findings_of;

/// vLLM issue 56830, verbatim: the assertion wrapped over five lines,
/// its figures split after `82.94 GiB,`.
const WRAPPED: &str = "AssertionError: Error in memory profiling. Initial free memory 82.94 GiB,
current free memory 90.17 GiB. This happens when other processes sharing the
same container release GPU memory while vLLM is profiling during initialization.
To fix this, ensure consistent GPU memory allocation or isolate vLLM in its own
container.
";

#[test]
fn a_wrapped_profiling_error_is_read_with_both_figures() {
    let f = findings_of(super::META.id, WRAPPED);
    assert_eq!(f.len(), 1, "{f:#?}");
    let chain = f[0].chain.join(" ");
    assert!(
        chain.contains("82.94 GiB") && chain.contains("90.17 GiB"),
        "{chain}"
    );
}

/// The same lines quoted in a reply (`> ` in front of each): the second
/// half is still found at the head of the next line's message.
#[test]
fn a_quoted_wrapped_profiling_error_is_read_too() {
    let quoted: String = WRAPPED.lines().map(|l| format!("> {l}\n")).collect();
    let f = findings_of(super::META.id, &quoted);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].chain.join(" ").contains("90.17 GiB"));
}

/// The first half alone (a paste cut after it) has no second figure:
/// nothing to compare, no finding from it.
#[test]
fn half_a_profiling_error_is_not_read_as_figures() {
    let cut = "AssertionError: Error in memory profiling. Initial free memory 82.94 GiB,\n";
    assert!(findings_of(super::META.id, cut).is_empty());
}

/// vLLM's free-memory refusal (fixtures/real/720's line) beside an
/// nvidia-smi process table whose first rows are the desktop's
/// (fixtures/real/635's rows, verbatim; two real pastes put together):
/// the holder named first is the process with the most memory, not the
/// table's first row.
#[test]
fn the_holder_named_first_is_the_one_with_the_most_memory() {
    let paste = "\
(EngineCore_DP0 pid=972) ERROR 01-28 15:59:42 [core.py:935] ValueError: Free memory on device cuda:0 (1.53/22.05 GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.
+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A            2043      G   /usr/lib/xorg/Xorg                       19MiB |
|    0   N/A  N/A            2292      G   /usr/bin/gnome-shell                      8MiB |
|    0   N/A  N/A            5857      C   python3                                3646MiB |
|    0   N/A  N/A         1936717      C   python                                  270MiB |
|    0   N/A  N/A         2084353      C   ...kun/vibevoice/venv/bin/python      11702MiB |
";
    let f = findings_of(super::META.id, paste);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].title.contains("PID 2084353"), "{}", f[0].title);
    assert!(!f[0].title.contains("PID 2043"), "{}", f[0].title);
}

/// A variant assembled from real lines: vLLM's free-memory refusal
/// (fixtures/real/720), an nvidia-smi process row in 635's layout for the
/// `vllm serve` process of 504's `ps` line (gpustack/gpustack#2595), and
/// that process's own uvicorn start-up (the wording of fixtures/real's
/// SGLang and vLLM logs, its PID and port as in the `ps` line). A second
/// server that came up and serves is held, not stale: the advice shares
/// the GPU or moves one server, and no leftover is named.
const SECOND: &str = "\
(EngineCore_DP0 pid=972) ERROR 01-28 15:59:42 [core.py:935] ValueError: Free memory on device cuda:0 (1.53/22.05 GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.
+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A          824867      C   /usr/bin/python3                      20480MiB |
+-----------------------------------------------------------------------------------------+
$ ps -eo pid,ppid,user,stat,lstart,etimes,pcpu,pmem,nlwp,args | grep '[v]llm'
824867  824670 root     Sl   Sat Jun  7 14:06:35 2025 4074589  0.0  0.1   71 /usr/bin/python3 /root/.local/share/pipx/venvs/gpustack/bin/vllm serve /data/models/modelscope/Qwen/Qwen3-Embedding-8B --max-model-len 8192 --task=embed --enforce-eager --host 0.0.0.0 --port 40047 --served-model-name Qwen/Qwen3-Embedding-8B
";

const SECOND_UP: &str = "\
INFO:     Started server process [824867]
INFO:     Uvicorn running on http://0.0.0.0:40047 (Press CTRL+C to quit)
";

#[test]
fn a_second_server_that_serves_holds_the_gpu_and_is_not_stale() {
    let paste = format!("{SECOND}{SECOND_UP}");
    let f = findings_of(super::META.id, &paste);
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(
        f.category,
        crate::rules::Category::GpuMemoryHeldByOtherProcess
    );
    assert!(!f.title.contains("leftover"), "{}", f.title);
    assert!(f.entities.pids.contains(&824867), "{:?}", f.entities);
    assert!(
        f.chain
            .iter()
            .any(|c| c.contains("second serving instance")),
        "{:?}",
        f.chain
    );
    crate::testing::cites_line_saying(f, 12, "another serving instance");
    assert!(
        f.actions
            .iter()
            .any(|a| a.describe().contains("two servers share GPU 0")
                && a.describe().contains("--gpu-memory-utilization")),
        "{:#?}",
        f.actions
    );
}

/// The same paste without the holder's start-up: a `vllm serve` process
/// the inputs show nothing more of is a leftover, as before; and one that
/// came up but later finished (`Finished server process`) is no live
/// server either.
#[test]
fn a_model_server_shown_nowhere_alive_stays_a_leftover() {
    let f = findings_of(super::META.id, SECOND);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].category, crate::rules::Category::StaleServingInstance);
    let finished = format!("{SECOND}{SECOND_UP}INFO:     Finished server process [824867]\n");
    let f = findings_of(super::META.id, &finished);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].category, crate::rules::Category::StaleServingInstance);
}
