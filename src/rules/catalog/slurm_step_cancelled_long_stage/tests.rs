//! `slurm-step-cancelled-long-stage`'s tests over real pastes.

use crate::rules::Category;

/// The root cause's category.
fn root(text: &str) -> Option<Category> {
    let a = crate::testing::analyze_paste(text);
    let d = &a.diagnosis;
    d.root_cause
        .as_ref()
        .and_then(|id| d.findings.iter().find(|f| &f.id == id))
        .map(|f| f.category)
}

fn cancelled(text: &str) -> Vec<crate::rules::Finding> {
    crate::testing::findings_of(super::META.id, text)
}

/// batch L 926 (IGNF/myria3d#123): rank 0's bar at 29 minutes with
/// slurmstepd's cancellation glued to it, srun's task 0 Terminated after.
const MYRIA3D: &str = "Preparing test set...:  45%|████▍     | 30/67 [27:15<23:13, 37.65s/it]\n\
Preparing test set...:  46%|████▋     | 31/67 [29:02<35:12, 58.67s/it]slurmstepd: error: *** STEP 6053.0 ON DEL2212S020 CANCELLED AT 2024-04-23T12:18:08 ***\n\
srun: debug:  task 2 done\n\
srun: launch/slurm: _task_finish: Received task exit notification for 1 task of StepId=6053.0 (status=0x000f).\n\
srun: error: DEL2212S020: task 0: Terminated\n\
srun: debug:  task 0 done\n\
srun: Force Terminated StepId=6053.0\n\
srun: debug:  IO thread exiting\n";

#[test]
fn a_step_cancelled_at_the_timeout_of_one_ranks_long_stage_is_the_collective_timeout() {
    let f = cancelled(MYRIA3D);
    assert_eq!(f.len(), 1, "{f:?}");
    let f = &f[0];
    assert_eq!(f.category, Category::NcclTimeout);
    assert!(f.headline.contains("6053.0"), "{}", f.headline);
    assert!(f.headline.contains("29 min"), "{}", f.headline);
    assert!(f.headline.contains("Preparing test set"), "{}", f.headline);
    let lines: Vec<u32> = f.evidence.iter().map(|e| e.span.line).collect();
    assert_eq!(
        lines,
        [2, 5],
        "the cancellation (with its bar) and srun's task line"
    );
    assert!((f.confidence - 0.4).abs() < 1e-9, "{}", f.confidence);
    assert_eq!(root(MYRIA3D), Some(Category::NcclTimeout));
}

/// With the job script's blocking-wait settings beside it (the
/// maintainer's next comment), the setting is cited and the reading is
/// surer.
#[test]
fn the_blocking_wait_settings_are_cited() {
    let text = format!(
        "{MYRIA3D}#Distributed error handlers (optional)\nexport NCCL_BLOCKING_WAIT=1\nexport NCCL_ASYNC_ERROR_HANDLING=1\n"
    );
    let f = cancelled(&text);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].evidence.len(), 4, "{:?}", f[0].evidence);
    assert!((f[0].confidence - 0.5).abs() < 1e-9);
}

/// Near misses: the same cancellation after a stage of a few minutes, a
/// cancellation at the time limit (its own finding, not a collective's),
/// one with no stage before it (dagster-slurm#72), and one after an error.
#[test]
fn a_cancellation_without_a_long_stage_or_at_a_limit_is_not_a_collective_timeout() {
    let short = MYRIA3D.replace("[29:02<35:12", "[02:02<35:12");
    assert!(cancelled(&short).is_empty());
    let limit = MYRIA3D.replace(" ***\n", " DUE TO TIME LIMIT ***\n");
    assert!(cancelled(&limit).is_empty());
    assert_eq!(root(&limit), Some(Category::Unknown));
    let dagster = "[SLURM STDERR fallback] srun: Job step aborted: Waiting up to 182 seconds for job step to finish.\n\
                   [SLURM STDERR fallback] slurmstepd: error: *** STEP 22051979.1 ON lrdn1786 CANCELLED AT 2025-10-23T14:31:08 ***\n\
                   [SLURM STDERR fallback] srun: error: lrdn1786: task 0: Killed\n";
    assert!(cancelled(dagster).is_empty());
    let error =
        format!("RuntimeError: CUDA error: an illegal memory access was encountered\n{MYRIA3D}");
    assert!(cancelled(&error).is_empty());
}

#[test]
fn a_bars_elapsed_time_is_read_in_seconds() {
    assert_eq!(
        super::elapsed_of("| 31/67 [29:02<35:12, 58.67s/it]"),
        Some(29 * 60 + 2)
    );
    assert_eq!(super::elapsed_of("2it [00:25, 12.97s/it]"), Some(25));
    assert_eq!(
        super::elapsed_of("| 3/9 [1:02:03<4:00:00, 1.0s/it]"),
        Some(3723)
    );
    assert_eq!(
        super::elapsed_of("CANCELLED AT 2024-04-23T12:18:08 ***"),
        None
    );
}
