//! `gpu-fell-off-bus-no-xid`'s missing-sibling reading over real tables
//! and the next pastes of their shape.

use crate::rules::Severity;
use crate::testing::findings_of;

/// fixtures/rules/gpu-fell-off-bus-no-xid/pos-lost-sibling-cbio-39.txt:
/// three idle TITANs, 03/04 paired and 84 alone, the table cut before
/// its process block.
const IDLE: &str =
    include_str!("../../../../fixtures/rules/gpu-fell-off-bus-no-xid/pos-lost-sibling-cbio-39.txt");
/// fixtures/rules/gpu-memory-unaccounted/pos-two-titans-taken-one-free
/// (cBio/cbio-cluster#422): the same shape, GPUs 0 and 1 nearly full.
const FULL: &str = include_str!(
    "../../../../fixtures/rules/gpu-memory-unaccounted/pos-two-titans-taken-one-free/nvidia-smi.txt"
);

#[test]
fn a_cut_table_lowers_the_absence_and_full_boards_weigh_first() {
    let idle = findings_of(super::META.id, IDLE);
    assert_eq!(idle.len(), 1, "{idle:?}");
    assert_eq!(idle[0].severity, Severity::Error);
    assert!(idle[0].confidence <= 0.35, "{}", idle[0].confidence);
    assert!(idle[0].headline.contains("may simply be cut"));
    let full = findings_of(super::META.id, FULL);
    assert_eq!(full.len(), 1, "{full:?}");
    assert_eq!(full[0].severity, Severity::Warning);
    assert!(full[0].confidence <= 0.3);
    assert!(full[0].headline.contains("GPU 0, GPU 1 full"));
}

/// The next paste: `nvidia-smi | head -20` on an 8-GPU A40 node
/// (open-gpu-kernel-modules#446's table, its first 20 lines): three
/// boards at 03, 04 and 43, cut before 44. An absence the cut explains:
/// said at the cut table's lower confidence, and said to be a cut.
#[test]
fn head_twenty_of_an_eight_gpu_table_is_said_to_be_cut() {
    let table = include_str!(
        "../../../../fixtures/rules/nvidia-smi-gpu-err-row/pos-eight-a40-one-err-row/nvidia-smi.txt"
    );
    let head: String = table.lines().take(20).map(|l| format!("{l}\n")).collect();
    let f = findings_of(super::META.id, &head);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].confidence <= 0.35, "{}", f[0].confidence);
    assert!(
        f[0].headline.contains("may simply be cut"),
        "{}",
        f[0].headline
    );
}

#[test]
fn a_complete_table_keeps_the_absence_at_its_weight() {
    // A variant of cbio-39: its table closed by the process block a
    // later nvidia-smi prints when nothing runs (the block of
    // gpu_memory_unaccounted's tests, pasted below; not a capture).
    let text = format!(
        "{IDLE}\
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|  No running processes found                                                 |
+-----------------------------------------------------------------------------+
"
    );
    let f = findings_of(super::META.id, &text);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Error);
    assert!(!f[0].headline.contains("may simply be cut"));
}
