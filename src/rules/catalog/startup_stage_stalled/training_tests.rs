//! A training job's set-up (OpenNMT-py's loop start, WeNet's ranks,
//! Trainer's `Running training` block, Megatron's datasets, DeepSpeed's
//! engine) and NCCL's `Init COMPLETE` of a group that spans nodes or lacks
//! ranks: silence after them is a hang there, whatever the number of ranks
//! or lines; a step logged after them, a failure, or one node's whole group
//! is not.

use super::stage_word_tests::{analysis, cites, hang, stalled};
use crate::model::Category;

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/real/");

/// The input of the case numbered `number` (`882-…/input.log`) in `dir`.
fn case(dir: &str, number: &str) -> String {
    let entry = std::fs::read_dir(dir)
        .expect(dir)
        .filter_map(Result::ok)
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{number}-"))
        })
        .unwrap_or_else(|| panic!("{dir}{number}-*"));
    std::fs::read_to_string(entry.path().join("input.log")).expect(number)
}

/// OpenNMT-py's two lines on two GPUs, then nothing
/// (OpenNMT/OpenNMT-py#1981, batch K 882): a hang once the training loop
/// started, at the low confidence of a paste that just ends, quoting the
/// loop's line. The run of OpenNMT-py's library tutorial (its docs'
/// `Library.md` example) logs `Step 50/ 1000` after the same line: that
/// job trains.
#[test]
fn a_training_loop_started_then_nothing_is_a_hang_there() {
    let text = case(REAL, "882");
    let f = hang(&text);
    assert!(f.title.contains("training set up"), "{}", f.title);
    assert!(
        f.headline
            .contains("(\"Start training loop and validate every 10000 steps...\")"),
        "{}",
        f.headline
    );
    assert!(f.confidence <= 0.3, "{}", f.confidence);
    assert_eq!(f.chain[0], "the training job never logged a step");
    assert!(cites(&f, &text, "Start training loop"), "{f:#?}");
    let tutorial =
        "    [2020-09-25 15:28:15,184 INFO] Start training loop and validate every 500 steps...\n";
    assert!(stalled(tutorial).is_some(), "{tutorial}");
    let trains = format!(
        "{tutorial}    [2020-09-25 15:28:15,185 INFO] corpus's transforms: TransformPipe()\n\
         \x20   [2020-09-25 15:28:21,140 INFO] Step 50/ 1000; acc:   7.52; ppl: 8832.29; xent: 9.09; lr: 1.00000; 18916/18871 tok/s;      6 sec\n"
    );
    assert!(stalled(&trains).is_none(), "{trains}");
}

/// WeNet's ranks each log their GPU, then nothing (wenet-e2e/wenet#812,
/// batch K 883): one finding for all ten lines, naming the local ranks.
#[test]
fn every_rank_logging_its_gpu_then_nothing_is_one_hang_naming_them() {
    let text = case(REAL, "883");
    let f = hang(&text);
    assert_eq!(f.occurrences, 10);
    assert!(
        f.headline
            .contains("Local ranks (GPUs) seen there: 0, 1, 2, 3, 4, 5, 6, 7."),
        "{}",
        f.headline
    );
    assert!(
        f.headline.contains("training on multiple gpus, this gpu 7"),
        "{}",
        f.headline
    );
    let advised = f.actions.iter().any(|a| {
        matches!(&a.kind, crate::rules::ActionKind::Advice { command: Some(c), .. }
            if c.contains("py-spy dump --pid") && c.contains("NCCL_DEBUG=INFO"))
    });
    assert!(advised, "{:#?}", f.actions);
}

/// Trainer's `Running training` block as huggingface/open-r1#483 shows it,
/// then nothing: a hang once training was set up, quoting the block's
/// head. The same block followed by a bar at its first draw is the loop's
/// counter standing at 0 (the bar here is affjljoo3581/GPT2#4's stuck
/// `Train GPT-2 model: 0% … 0/3000 [00:00<?, ?it/s]`: a paste assembled
/// from two real pages), the stronger evidence; a failure after the block
/// is that failure's story.
#[test]
fn trainer_running_training_then_nothing_or_a_bar_at_zero_is_a_hang() {
    let block = "[INFO|trainer.py:2405] 2025-03-06 12:04:09,913 >> ***** Running training *****\n\
                 [INFO|trainer.py:2406] 2025-03-06 12:04:09,913 >>   Num examples = 5,498\n\
                 [INFO|trainer.py:2407] 2025-03-06 12:04:09,914 >>   Num Epochs = 1\n\
                 [INFO|trainer.py:2408] 2025-03-06 12:04:09,914 >>   Instantaneous batch size per device = 8\n\
                 [INFO|trainer.py:2411] 2025-03-06 12:04:09,914 >>   Total train batch size (w. parallel, distributed & accumulation) = 224\n\
                 [INFO|trainer.py:2412] 2025-03-06 12:04:09,914 >>   Gradient Accumulation steps = 4\n\
                 [INFO|trainer.py:2413] 2025-03-06 12:04:09,914 >>   Total optimization steps = 196\n\
                 [INFO|trainer.py:2414] 2025-03-06 12:04:09,915 >>   Number of trainable parameters = 7,615,616,512\n";
    let f = hang(block);
    assert!(f.title.contains("training set up"), "{}", f.title);
    assert!(
        f.headline.contains("***** Running training *****"),
        "{}",
        f.headline
    );
    assert!(f.confidence <= 0.3, "{}", f.confidence);
    let bar = format!(
        "{block}Train GPT-2 model:   0%|                                                                                                                      | 0/3000 [00:00<?, ?it/s]\n"
    );
    let f = hang(&bar);
    assert!(f.confidence >= 0.7, "{}", f.confidence);
    assert!(cites(&f, &bar, "0/3000"), "{f:#?}");
    let failed = format!(
        "{block}torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.15 GiB total capacity; 77.91 GiB already allocated; 9.25 MiB free; 78.40 GiB reserved in total by PyTorch)\n"
    );
    assert!(stalled(&failed).is_none(), "{failed}");
}

/// Megatron's set-up milestones as NVIDIA/nccl#743 shows them, ending at
/// building the datasets: a hang in the training's set-up; what the page
/// printed next (`> datasets target sizes`) is the job going on.
#[test]
fn megatron_building_its_datasets_then_nothing_is_a_hang() {
    let text = "[after model, optimizer, and learning rate scheduler are built] datetime: 2022-10-31 08:35:48 \n\
                > building train, validation, and test datasets ...\n";
    let f = hang(text);
    assert!(f.title.contains("training set up"), "{}", f.title);
    let on = format!("{text} > datasets target sizes (minimum size):\n");
    assert!(stalled(&on).is_none(), "{on}");
}

/// DeepSpeed's engine announced and its data-parallel groups sized, then
/// nothing (huggingface/transformers#12418: "The Trainer gets stuck with"
/// these two lines): a hang while the engine is built.
#[test]
fn deepspeed_initialize_then_nothing_is_a_hang() {
    let text = "[2021-06-29 14:29:44,747] [INFO] [logging.py:60:log_dist] [Rank 0] DeepSpeed info: version=0.4.1, git-hash=unknown, git-branch=unknown\n\
                [2021-06-29 14:29:44,757] [INFO] [utils.py:13:_initialize_parameter_parallel_groups] data_parallel_size: 1, parameter_parallel_size: 1\n";
    let f = hang(text);
    assert!(f.title.contains("training set up"), "{}", f.title);
    assert!(
        f.headline.contains("DeepSpeed info: version=0.4.1"),
        "{}",
        f.headline
    );
}

/// Horovod's ranks on two nodes over NCCL sockets reach Init COMPLETE,
/// then nothing (horovod/horovod#3658, fixtures/real 851): a hang once
/// the communicators formed, naming the ranks seen of the group's eight,
/// with the network between the nodes as the next step.
#[test]
fn init_complete_over_the_network_then_nothing_is_a_hang() {
    let text = case(REAL, "851");
    let f = hang(&text);
    assert!(f.title.contains("NCCL initialised"), "{}", f.title);
    assert!(f.confidence <= 0.3, "{}", f.confidence);
    assert!(
        f.headline.contains("Ranks seen there: 3, 5, 6, 7 (of 8)."),
        "{}",
        f.headline
    );
    assert!(f.headline.contains("Init COMPLETE"), "{}", f.headline);
    assert!(
        f.explanation.contains("network between the nodes"),
        "{}",
        f.explanation
    );
}

/// Six ranks of sixteen reach Init COMPLETE while rank 8's process is
/// still connecting its ring over NET/Socket, then an hour of nothing
/// (OpenNMT/OpenNMT-py#1606, batch K 890): the group is still forming,
/// an operation under way, and the finding names the process that never
/// completed.
#[test]
fn a_rank_still_connecting_after_the_others_completed_is_a_hang_in_the_init() {
    let text = case(REAL, "890");
    let f = hang(&text);
    assert!(f.confidence > 0.3 && f.confidence < 0.7, "{}", f.confidence);
    let connecting = f
        .evidence
        .iter()
        .find(|e| e.note.contains("NCCL process 435 is still connecting"));
    assert!(connecting.is_some(), "{:#?}", f.evidence);
    assert!(f.headline.contains("(of 16)"), "{}", f.headline);
}

/// Sixteen-rank Megatron's Init COMPLETE lines without the collective
/// that followed them (fixtures/real 850's lines 1, 4, 5, 8 and 9): five
/// ranks of the group shown, the others never here, then nothing: a hang.
/// Both ranks of one node's group complete (vllm-project/vllm#8422, the
/// NCCL rules' near miss) say only that the group formed: no hang.
#[test]
fn init_complete_of_part_of_a_group_is_a_hang_and_of_a_whole_node_group_is_not() {
    let real = case(REAL, "850");
    let inits: String = real
        .lines()
        .filter(|l| l.contains("Init COMPLETE"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(inits.lines().count(), 5, "{inits}");
    let f = hang(&inits);
    assert!(f.title.contains("NCCL initialised"), "{}", f.title);
    assert!(f.confidence <= 0.3, "{}", f.confidence);
    let whole = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/rules/nccl-init-cuda-failure/neg-vllm-tp2-nccl-init-complete/nccl.log"
    ))
    .expect("near miss");
    let (findings, root) = analysis(&whole);
    assert_eq!(root, None, "{findings:#?}");
    assert!(stalled(&whole).is_none());
}

/// SGLang's capture begun then its bar at 0 and the ranks' registrations
/// (batch K 875): the finding quotes the line where the stage began, not
/// only its name.
#[test]
fn the_finding_quotes_the_line_where_the_stage_began() {
    let text = case(REAL, "875");
    let f = hang(&text);
    assert!(
        f.headline
            .contains("(\"Capture cuda graph begin. This can take"),
        "{}",
        f.headline
    );
    assert!(cites(&f, &text, "Capture cuda graph begin"), "{f:#?}");
    assert_eq!(
        analysis(&text).1,
        Some(Category::ServerHang),
        "{:#?}",
        f.evidence
    );
}
