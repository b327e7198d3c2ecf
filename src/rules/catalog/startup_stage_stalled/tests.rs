//! The rule's own tests over real pastes: a rank behind the others, the
//! processes named, a paste ending on a completed stage, ignored interrupts.

fn findings(text: &str) -> Vec<crate::rules::Finding> {
    crate::testing::analyze_paste(text).diagnosis.findings
}

#[test]
fn a_rank_that_never_finished_what_another_finished_is_stalled() {
    // https://github.com/sgl-project/sglang/issues/227 (TP=2 on a 24 GB
    // and an 8 GB GPU): rank 0 loaded its weights, rank 1 never did.
    let text = "$ python -m sglang.launch_server --model-path ./my_model --port 8000 --tp 2\n\
                Rank 0: load weight begin.\n\
                Rank 1: load weight begin.\n\
                quant_config: GPTQConfig(weight_bits=4, group_size=-1, desc_act=True)\n\
                Rank 0: load weight end.\n";
    let f = findings(text);
    let stalled = f
        .iter()
        .find(|f| f.rule == super::META.id)
        .unwrap_or_else(|| panic!("{f:?}"));
    assert!(stalled.title.contains("rank 1"), "{}", stalled.title);
    // Both ranks done: no rank lags; the paste ends on the weights
    // loaded, which says only that it may be cut there.
    let done = format!("{text}Rank 1: load weight end.\n");
    let f = findings(&done);
    let cut = f
        .iter()
        .find(|f| f.rule == super::META.id)
        .unwrap_or_else(|| panic!("{f:?}"));
    assert!(!cut.title.contains("rank 1"), "{}", cut.title);
    assert!(cut.confidence <= 0.3, "{}", cut.confidence);
}

/// The finding cites the last line at the stage and counts the others;
/// it names the writers of all (fixtures/real/739,
/// vLLM 0.5's `(VllmWorkerProcess pid=N)` and the driver without a
/// prefix), and V1's `(VllmWorker rank=4 pid=907)` (vllm-project/vllm#14452).
#[test]
fn the_finding_names_every_process_that_stopped_at_the_stage() {
    let text = "VllmWorkerProcess pid=1153488) INFO 09-03 02:15:41 multiproc_worker_utils.py:215] Worker ready; awaiting tasks\n\
                (VllmWorkerProcess pid=1153488) INFO 09-03 02:15:42 utils.py:965] Found nccl from environment variable VLLM_NCCL_SO_PATH=/home/wyl/llm/qwen/nccl_2.21.5-1+cuda12.4_x86_64/lib/libnccl.so\n\
                INFO 09-03 02:15:42 utils.py:965] Found nccl from environment variable VLLM_NCCL_SO_PATH=/home/wyl/llm/qwen/nccl_2.21.5-1+cuda12.4_x86_64/lib/libnccl.so\n\
                (VllmWorkerProcess pid=1153488) INFO 09-03 02:15:42 pynccl.py:63] vLLM is using nccl==2.21.5\n\
                INFO 09-03 02:15:42 pynccl.py:63] vLLM is using nccl==2.21.5\n";
    let pids_of = |text: &str| {
        let f = findings(text);
        let stalled = f
            .iter()
            .find(|f| f.rule == super::META.id)
            .unwrap_or_else(|| panic!("{f:?}"))
            .clone();
        stalled.entities.pids.iter().copied().collect::<Vec<_>>()
    };
    assert_eq!(pids_of(text), [1153488]);
    let v1 = "(VllmWorker rank=4 pid=907) INFO 03-15 17:24:17 [pynccl.py:69] vLLM is using nccl==2.25.1\n";
    assert_eq!(pids_of(v1), [907]);
}

fn stalled(text: &str) -> Option<crate::rules::Finding> {
    findings(text)
        .into_iter()
        .find(|f| f.rule == super::META.id)
}

/// A paste that ends on a completed stage before a long one, one line
/// and no clock: stalled there at a low confidence (the paste may be
/// cut). vLLM V1's line with its prefix abridged
/// (fixtures/real/749, vllm-project/vllm#39682) and
/// vLLM 0.6's (vllm-project/vllm#10517); not when anything follows the
/// stage, nor when the server became ready.
#[test]
fn a_paste_that_ends_on_a_completed_stage_is_stalled_there_at_low_confidence() {
    for text in [
        "(EngineCore pid=...) INFO ... Model loading took 14.53 GiB memory and 172.4 seconds\n",
        "Loading model weights took 14.9888 GB\n",
    ] {
        let f = stalled(text).unwrap_or_else(|| panic!("{text}"));
        assert!(f.title.contains("the weights loaded"), "{}", f.title);
        assert!(f.confidence <= 0.3, "{}", f.confidence);
        assert!(f.headline.contains("may simply be cut"), "{}", f.headline);
        let ready = format!("{text}INFO:     Application startup complete.\n");
        assert!(stalled(&ready).is_none(), "{ready}");
        let more = format!("{text}some later line of the paste\n");
        assert!(stalled(&more).is_none(), "{more}");
    }
}

/// The ranks assigned, then nothing, in two runs of one paste (vLLM's
/// EngineCore on ROCm, fixtures/real/692): both engines are named.
#[test]
fn a_paste_ending_after_the_ranks_are_assigned_names_each_engine() {
    let text = "(EngineCore pid=24644) INFO 04-14 13:41:01 [parallel_state.py:1400] world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://192.168.68.154:46985 backend=nccl\n\
                (EngineCore pid=24644) INFO 04-14 13:41:01 [parallel_state.py:1712] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank N/A, EPLB rank N/A\n\
                \n\
                (EngineCore pid=54484) INFO 04-14 14:47:52 [distributed/parallel_state.py:1712] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank 0, EPLB rank N/A\n";
    let f = stalled(text).expect("stalled");
    assert!(f.title.contains("distributed group formed"), "{}", f.title);
    assert_eq!(
        f.entities.pids.iter().copied().collect::<Vec<_>>(),
        [24644, 54484]
    );
}

/// vLLM's stage lines read by their text whatever part of the prefix
/// survived: `(EngineCore pid=115)` with the level and time cut
/// (fixtures/real/748, vllm-project/vllm#20891), and
/// the v0 line with its whole prefix (MU-GOT#17). Loading the weights is
/// an operation under way: the finding does not wait for a clock.
#[test]
fn starting_to_load_the_model_then_silence_is_stalled_whatever_the_prefix() {
    let cut = "(EngineCore pid=115) Initializing a V1 LLM engine (v0.18.0) ...\n\
               (EngineCore pid=115) world_size=1 rank=0 ... backend=nccl\n\
               (EngineCore pid=115) Starting to load model unsloth/Qwen3-VL-32B-Instruct-bnb-4bit...\n";
    let f = stalled(cut).expect("stalled");
    assert!(f.title.contains("loading the weights"), "{}", f.title);
    assert_eq!(f.entities.pids.iter().copied().collect::<Vec<_>>(), [115]);
    let whole = "INFO 11-20 10:45:55 model_runner.py:680] Starting to load model /home/lhx/wch/GOT-OCR2.0/GOT_weights...\n";
    assert!(stalled(whole).is_some());
}

/// Ray's start line, then several echoed `^C` and nothing after them
/// (vllm-project/vllm#3766): a process that ignores SIGINT, the stronger
/// evidence. The same interrupts followed by Python's
/// `KeyboardInterrupt` are someone stopping a process that obeyed.
#[test]
fn repeated_interrupts_with_nothing_after_them_are_a_process_ignoring_sigint() {
    let start = "CUDA_VISIBLE_DEVICES=5,7 python -m vllm.entrypoints.api_server --port 8007 --gpu-memory-utilization 0.9 --tensor-parallel-size 2 --model /mnt/huggingface/models/internlm2-chat-7b/ --trust-remote-code\n\
                 2024-04-01 14:04:55,171 INFO worker.py:1752 -- Started a local Ray instance.\n";
    let ignored = |f: &crate::rules::Finding| {
        f.conditions
            .iter()
            .any(|c| c.met && c.text.contains("ignored repeated interrupts"))
    };
    // As the terminal echoed them on one line, and one per line.
    for tail in ["^C^C^C^C^C^C\n", "^C\n^C\n^C\n"] {
        let f = stalled(&format!("{start}{tail}")).expect("stalled");
        assert!(ignored(&f), "{tail}: {:?}", f.conditions);
        assert!(f.confidence >= 0.85, "{}", f.confidence);
        assert!(f.headline.contains("ignores SIGINT"), "{}", f.headline);
    }
    let obeyed = format!("{start}^C^C\nKeyboardInterrupt\n");
    if let Some(f) = stalled(&obeyed) {
        assert!(!ignored(&f), "{:?}", f.conditions);
    }
    // One interrupt is someone stopping it: not yet ignored.
    let once = stalled(&format!("{start}^C\n")).expect("stalled");
    assert!(!ignored(&once));
}

/// vLLM 0.6–0.10's capture notice (`Capturing cudagraphs for decoding.`,
/// catalogs/startup.toml) as the last lines of a load: stalled at the
/// capture, naming the worker that printed it (xorbitsai/inference#2958,
/// fixtures/real/1004, verbatim); the next such paste, several workers'
/// notices (vllm-project/vllm#14447), too; and not once the capture
/// finished (vllm-project/vllm#11349's own log).
#[test]
fn a_capture_notice_with_nothing_after_it_is_a_stall_at_the_capture() {
    let xinference = "INFO 02-27 09:58:41 executor_base.py:116] Maximum concurrency for 32768 tokens per request: 10.64x\n\
(VllmWorkerProcess pid=11055) INFO 02-27 09:58:44 model_runner.py:1434] Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization` or switching to eager mode. You can also reduce the `max_num_seqs` as needed to decrease memory usage.\n\
INFO 02-27 09:58:44 model_runner.py:1434] Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization` or switching to eager mode. You can also reduce the `max_num_seqs` as needed to decrease memory usage.\n";
    let f = stalled(xinference).expect("a stall at the capture");
    assert!(f.title.contains("capturing CUDA graphs"), "{}", f.title);
    assert!(f.entities.pids.contains(&11055), "{:?}", f.entities.pids);
    let workers = "(VllmWorkerProcess pid=507) INFO 04-12 08:22:02 [model_runner.py:1456] Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization` or switching to eager mode. You can also reduce the `max_num_seqs` as needed to decrease memory usage.\n\
(VllmWorkerProcess pid=577) INFO 04-12 08:22:03 [model_runner.py:1456] Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization` or switching to eager mode. You can also reduce the `max_num_seqs` as needed to decrease memory usage.\n";
    let f = stalled(workers).expect("a stall at the capture");
    assert!(f.title.contains("capturing CUDA graphs"), "{}", f.title);
    let finished = "INFO 12-19 22:58:27 model_runner.py:1415] Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization` or switching to eager mode. You can also reduce the `max_num_seqs` as needed to decrease memory usage.\n\
INFO 12-19 22:58:41 model_runner.py:1535] Graph capturing finished in 14 secs, took 0.21 GiB\n";
    assert!(
        stalled(finished).is_none_or(|f| f.confidence <= 0.3),
        "{:?}",
        stalled(finished)
    );
}

/// Transformers' shard bar (`Loading checkpoint shards: 0%| | 0/3`) as the
/// last line: the first shard never read, a stall at the weights
/// (lm-sys/FastChat on SageMaker, fixtures/real/1014, verbatim). The same
/// bar ended by the shell's `Killed` is the kill's story, not a stall
/// (fixtures/real/872's shape); a full bar (`7/7`, zai-org/ChatGLM3#681)
/// says only that the paste may be cut after the weights.
#[test]
fn a_checkpoint_shard_bar_left_at_zero_is_a_stall_at_the_weights() {
    let fastchat = "init_kwargs {'torch_dtype': torch.float16, 'device_map': 'sequential', 'max_memory': {0: '12GiB', 1: '12GiB', 2: '12GiB', 3: '12GiB'}}\n\
Loading checkpoint shards:   0%|      | 0/3 [00:00<?, ?it/s]\n";
    let f = stalled(fastchat).expect("a stall at the weights");
    assert!(f.title.contains("loading the weights"), "{}", f.title);
    assert!(f.headline.contains("0/3"), "{}", f.headline);
    let killed = format!("{fastchat}Killed\n");
    assert!(stalled(&killed).is_none(), "{:?}", stalled(&killed));
    let full = "Loading checkpoint shards: 100%|██████████| 7/7 [00:08<00:00,  1.27s/it]\n";
    assert!(
        stalled(full).is_none_or(|f| f.confidence <= 0.3),
        "{:?}",
        stalled(full)
    );
}
