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
