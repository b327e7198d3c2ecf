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
