//! A job's work counter that stands still: a bare `0 / M` count as the
//! last line (catalogs/startup.toml's `startup.job-progress-count`), and a
//! counter part-way through its work that someone gave up on.

use crate::rules::Category;

fn stalled(text: &str) -> Option<crate::rules::Finding> {
    crate::testing::analyze_paste(text)
        .diagnosis
        .findings
        .into_iter()
        .find(|f| f.rule == super::META.id)
}

/// DDMAL/Rodan#1332 (batch Q 1075), verbatim from the worker's first line:
/// the GPU Celery worker takes a task, starts it, prints the Paco
/// classifier's first row count and nothing more.
const RODAN: &str = "[2026-01-19 19:24:37,467: INFO/MainProcess] Connected to amqp://someadmin:**@rabbitmq:5672//\n\
[2026-01-19 19:24:37,659: INFO/MainProcess] mingle: searching for neighbors\n\
[2026-01-19 19:24:39,375: INFO/MainProcess] mingle: all alone\n\
[2026-01-19 19:24:40,428: INFO/MainProcess] celery@GPU ready.\n\
[2026-01-19 19:31:07,251: INFO/MainProcess] Received task: Fast Pixelwise Analysis of Music Document, Classifying[0a08daed-c17f-42ef-92e6-849bfcd0755c]\n\
[2026-01-19 19:31:07,331: INFO/ForkPoolWorker-1] started running the task!\n\
[2026-01-19 19:37:30,073: WARNING/ForkPoolWorker-1] Fast Pixelwise Analysis of Music Document, Classifying[0a08daed-c17f-42ef-92e6-849bfcd0755c]: 0 / 1535\n";

#[test]
fn a_task_count_left_at_zero_is_a_hang_of_its_first_step() {
    let f = stalled(RODAN).expect("a finding");
    assert_eq!(f.category, Category::ServerHang);
    // The quote names the task the count belongs to, not the logger's head.
    assert!(
        f.headline
            .contains("(\"Fast Pixelwise Analysis of Music Document, Classifying[0a08daed-c17f-42ef-92e6-849bfcd0755c]: 0 / 1535\")"),
        "{}",
        f.headline
    );
    assert!(f.title.contains("first request"), "{}", f.title);
    assert!(
        f.chain
            .iter()
            .any(|c| c.contains("was up, but its work stopped")),
        "{:?}",
        f.chain
    );
    assert!(
        f.evidence.iter().any(|e| e.span.line == 7),
        "{:?}",
        f.evidence
    );
    // A counter at 0 corroborates it; no one gave up, so not the most.
    assert!((f.confidence - 0.7).abs() < 1e-9, "{}", f.confidence);
}

#[test]
fn an_error_after_the_count_is_no_hang() {
    // Assembled: the task failed; its error is the story.
    let failed = format!(
        "{RODAN}[2026-01-19 19:38:02,118: ERROR/ForkPoolWorker-1] Task failed: RuntimeError: CUDA error: out of memory\n"
    );
    assert!(stalled(&failed).is_none());
}

#[test]
fn only_a_count_at_zero_after_a_loggers_colon_is_read() {
    // The count further on, or a ratio in prose, is not the row.
    for line in [
        "[2026-01-19 19:37:30,073: WARNING/ForkPoolWorker-1] Fast Pixelwise Analysis of Music Document, Classifying[0a08daed-c17f-42ef-92e6-849bfcd0755c]: 256 / 1535\n",
        "GPUs in use 0 / 8\n",
    ] {
        assert!(stalled(line).is_none(), "{line}");
    }
}

/// vllm-project/vllm#9920's offline bar, its count moved to 8 of 16
/// (assembled), then Ctrl-C and Python's interrupt (assembled).
const PROMPTS_AT_8: &str = "Processed prompts:  50%|█████     | 8/16 [00:21<00:21,  2.70s/it, est. speed input: 0.00 toks/s, output: 0.00 toks/s]\n";

#[test]
fn a_counter_part_way_is_a_hang_only_when_someone_gave_up() {
    // The paste ends part-way: it may just be cut there.
    assert!(stalled(PROMPTS_AT_8).is_none());
    let interrupted = format!("{PROMPTS_AT_8}^C\nKeyboardInterrupt\n");
    let f = stalled(&interrupted).expect("a finding");
    assert_eq!(f.category, Category::ServerHang);
    assert!(
        f.title.contains("working through its requests"),
        "{}",
        f.title
    );
}

#[test]
fn a_count_at_zero_the_job_goes_on_from_is_no_hang() {
    // The same worker's later counts and its task's end, in the Paco
    // classifier's and Celery's words (a continuation of the paste above
    // built for this test, as the run that did not hang would print it):
    // the row reads only the 0 and the count line has no time of its own,
    // so the later lines' times must still tell the rule the job moved on.
    let head = "[2026-01-19 19:37:31,112: WARNING/ForkPoolWorker-1] Fast Pixelwise Analysis of Music Document, Classifying[0a08daed-c17f-42ef-92e6-849bfcd0755c]";
    let went_on = format!(
        "{RODAN}{head}: 1 / 1535\n{head}: 1535 / 1535\n\
[2026-01-19 19:46:02,790: INFO/ForkPoolWorker-1] Task Fast Pixelwise Analysis of Music Document, Classifying[0a08daed-c17f-42ef-92e6-849bfcd0755c] succeeded in 895.4s: None\n"
    );
    let f = stalled(&went_on);
    assert!(f.is_none(), "{:?}", f.map(|f| (f.headline, f.evidence)));
}
