//! `gpu-fell-off-bus-no-xid`'s missing-sibling reading over real tables
//! and the next pastes of their shape.

use crate::rules::Severity;
use crate::testing::findings_of;

/// fixtures/rules/gpu-fell-off-bus-no-xid/pos-lost-sibling-cbio-39.txt
/// (cBio/cbio-cluster#39, "gpu-2-12 has lost a GPU"): three idle TITANs,
/// 03/04 paired and 84 alone, the table closed by its `Compute processes:`
/// block (the thread's paste; the stored copy stops under its title).
const IDLE: &str =
    include_str!("../../../../fixtures/rules/gpu-fell-off-bus-no-xid/pos-lost-sibling-cbio-39.txt");
/// fixtures/rules/gpu-memory-unaccounted/pos-two-titans-taken-one-free
/// (cBio/cbio-cluster#422): the same shape, GPUs 0 and 1 nearly full.
const FULL: &str = include_str!(
    "../../../../fixtures/rules/gpu-memory-unaccounted/pos-two-titans-taken-one-free/nvidia-smi.txt"
);
/// openwall/john#3714: nine P106-100 mining cards, the paste cut after
/// the third (01 alone, 03/04 paired), every card idle.
const NINE_CUT: &str = include_str!(
    "../../../../fixtures/real-incoming/batch-t/1225-john-opencl-office-format-nine-p106-mining-cards-idle-table-negative/input.log"
);

/// The first `n` lines of `text`.
fn head(text: &str, n: usize) -> String {
    text.lines().take(n).map(|l| format!("{l}\n")).collect()
}

#[test]
fn a_table_closed_by_its_process_title_keeps_the_absence_and_full_boards_weigh_first() {
    let idle = findings_of(super::META.id, IDLE);
    assert_eq!(idle.len(), 1, "{idle:?}");
    assert_eq!(idle[0].severity, Severity::Error);
    assert!(!idle[0].headline.contains("may simply be cut"));
    let full = findings_of(super::META.id, FULL);
    assert_eq!(full.len(), 1, "{full:?}");
    assert_eq!(full[0].severity, Severity::Warning);
    assert!(full[0].confidence <= 0.3);
    assert!(full[0].headline.contains("GPU 0, GPU 1 full"));
}

/// A table that stops after its GPU rows counts nothing: the absence is a
/// warning (never the root cause) whose first advice counts the boards.
#[test]
fn a_table_cut_after_its_rows_is_only_advice_to_count_the_boards() {
    for text in [head(IDLE, 16), NINE_CUT.to_owned()] {
        let f = findings_of(super::META.id, &text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(f[0].confidence <= 0.25, "{}", f[0].confidence);
        assert!(f[0].headline.contains("may simply be cut"));
        let crate::rules::ActionKind::Advice { command, .. } = &f[0].actions[0].kind else {
            panic!("{:?}", f[0].actions[0]);
        };
        let first = command.as_deref().unwrap_or_default();
        assert!(
            first.contains("nvidia-smi -L") && first.contains("lspci -d 10de:"),
            "{first}"
        );
        let report = crate::testing::analyze_paste(&text);
        assert!(
            report.diagnosis.root_cause.is_none(),
            "{:?}",
            report.diagnosis.findings
        );
    }
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
    // A variant of cbio-39: its GPU rows closed by the process block a
    // later nvidia-smi prints when nothing runs (the block of
    // gpu_memory_unaccounted's tests, pasted below; not a capture).
    let text = format!(
        "{}\
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|  No running processes found                                                 |
+-----------------------------------------------------------------------------+
",
        head(IDLE, 16)
    );
    let f = findings_of(super::META.id, &text);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Error);
    assert!(!f[0].headline.contains("may simply be cut"));
}
