//! `server-killed-no-kernel-line`'s tests over real pastes.

fn killed(text: &str) -> Vec<crate::rules::Finding> {
    crate::testing::findings_of(super::META.id, text)
}

/// torchrun's agent reporting its worker killed by SIGKILL, with no
/// error of the worker's own: self-rag's two runs of one PID
/// (fixtures/real/764, AkariAsai/self-rag#83) give one
/// finding; ColossalAI's form with the other workers stopped before it
/// (hpcaitech/ColossalAI#3677) reads the same. A worker that exited 1
/// after its own traceback is its own failure.
#[test]
fn a_torchrun_worker_killed_by_sigkill_is_the_host_oom_reading() {
    let self_rag = "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 1 (pid: 14447) of binary:\n\
                    torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 0 (pid: 14447) of binary:\n";
    let f = killed(self_rag);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
        [14447]
    );
    assert!(f[0].title.contains("14447"), "{}", f[0].title);
    let colossal = "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 1167 closing signal SIGTERM\n\
                    ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 (pid: 1168) of binary: /opt/conda/bin/python\n";
    assert_eq!(killed(colossal).len(), 1);
    let own = "RuntimeError: CUDA error: an illegal memory access was encountered\n\
               E0909 07:11:16.569000 140533383049856 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) local_rank: 0 (pid: 9292) of binary: /opt/conda/envs/sglang/bin/python\n";
    assert!(killed(own).is_empty());
}

/// zsh's report of a job killed, whose command names a checkpoint to
/// load, with nothing printed before it (batch-g/762,
/// henrywoo/pyllama#62); the same job line for a command that names no
/// model says nothing of what was killed.
#[test]
fn a_shell_job_killed_whose_command_loads_a_model_is_the_host_oom_reading() {
    let convert = "python3 -m llama.convert_llama --ckpt_dir $CKPT_DIR --tokenizer_path $TOKENIZER_PATH --model_size 65B --output_dir ./converted_meta_hf_65 --to hf --max_batch_size 4\n\n\
                   [1]    16261 killed     python3 -m llama.convert_llama --ckpt_dir $CKPT_DIR --tokenizer_path   65B\n";
    let f = killed(convert);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
        [16261]
    );
    // The same grammar with a weights file for an argument (a variant,
    // assembled from zsh's job line), and with no model at all.
    assert_eq!(
        killed("[2]  + 4242 killed     python3 chat.py ./models/llama-2-13b.Q8_0.gguf\n").len(),
        1
    );
    assert!(killed("[1]    16261 killed     python3 -m http.server 8000\n").is_empty());
}

/// A checkpoint converter's progress (catalog row
/// `startup.checkpoint-converter-reading`) then the shell's bare
/// `Killed`: llama.cpp's `convert-pth-to-ggml.py` (ggml-org/llama.cpp#138,
/// batch-h/780), lit-llama's shard lines (Lightning-AI/lit-llama#244,
/// batch-h/778) and `convert-hf-to-gguf.py`'s tensor lines
/// (ggml-org/llama.cpp#5156, batch-h/779) read as the host-OOM kill; the
/// same grammar for another part or tensor (a variant: part 1 of a 13B,
/// an attention tensor) too; a script's own `Processing …` line is not a
/// converter's.
#[test]
fn a_converter_killed_while_reading_weights_is_the_host_oom_reading() {
    for paste in [
        "python3 convert-pth-to-ggml.py models/7B/ 1\nn_parts =  1\nProcessing part  0\nKilled\n",
        "Initializing lit-llama\nProcessing pytorch_model-00001-of-00002.bin\nKilled\n",
        "blk.35.ffn_norm.weight, n_dims = 1, torch.bfloat16 --> float32\nKilled\n",
        "Processing part  1\nKilled\n",
        "Processing /data/hf/13B/pytorch_model-00003-of-00003.bin\nKilled\n",
        "blk.0.attn_q.weight, n_dims = 2, torch.float16 --> float16\nKilled\n",
    ] {
        let f = killed(paste);
        assert_eq!(f.len(), 1, "{paste}: {f:?}");
        assert!(f[0].title.contains("converter"), "{}", f[0].title);
        assert!(
            !f[0]
                .actions
                .iter()
                .any(|a| a.describe().contains("swap-space")),
            "a converter is not told a server's settings: {:?}",
            f[0].actions
        );
    }
    assert!(killed("Processing request 42 of 100\nKilled\n").is_empty());
}

/// A converter started by its command line (catalog row
/// `startup.checkpoint-converter-command`) that printed nothing but a
/// progress bar before the shell's bare `Killed`: lit-llama's
/// `convert_checkpoint.py` (Lightning-AI/lit-llama#110, batch-h/777);
/// the same grammar for another converter behind a prompt (a variant:
/// llama.cpp's `convert_hf_to_gguf.py`). A command that converts
/// nothing, or a converter whose run ended in an error, is not it.
#[test]
fn a_converter_started_by_its_command_line_and_killed_is_the_host_oom_reading() {
    let lit = "python scripts/convert_checkpoint.py     --output_dir checkpoints/lit-llama     --ckpt_dir dalai/llama/models     --tokenizer_path dalai/llama/models/tokenizer.model     --model_size 13B\n \
               50%|\u{2588}\u{2588}\u{2588}\u{2588}          | 1/2 [00:32<00:32, 32.09s/it]\n\nKilled\n";
    let variant = "(venv) user@box:~/llama.cpp$ python3 convert_hf_to_gguf.py ../Mixtral-8x7B --outtype f16\nKilled\n";
    for paste in [lit, variant] {
        let f = killed(paste);
        assert_eq!(f.len(), 1, "{paste}: {f:?}");
        assert!(f[0].title.contains("converter"), "{}", f[0].title);
        assert_eq!(f[0].evidence[0].span.line, 1, "{:?}", f[0].evidence);
    }
    assert!(killed("python3 train.py --epochs 3\nKilled\n").is_empty());
    assert!(
        killed("python3 convert_hf_to_gguf.py ../m\nFileNotFoundError: [Errno 2] No such file or directory: '../m/config.json'\nKilled\n")
            .is_empty()
    );
}

/// vLLM's API server when its engine core died during start-up with no
/// error of its own: no exit status at all (vllm-project/vllm#45626,
/// fixtures/real/652) at the lowest confidence, SIGKILL (`-9`, in the
/// `{name: exitcode}` dict upstream prints; assembled) above it; an
/// exit status of its own (vllm-project/vllm#21882) or an error
/// before it is the engine's own failure.
#[test]
fn an_engine_core_gone_without_an_error_is_the_host_oom_reading_at_low_confidence() {
    let empty = killed("Engine core initialization failed. Failed core proc(s): {}\n");
    assert_eq!(empty.len(), 1, "{empty:?}");
    assert!(empty[0].confidence <= 0.3, "{}", empty[0].confidence);
    let sigkill = killed(
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': -9}\n",
    );
    assert_eq!(sigkill.len(), 1, "{sigkill:?}");
    assert!(sigkill[0].confidence > empty[0].confidence);
    assert!(
        killed("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_0': 1}\n")
            .is_empty()
    );
    assert!(
        killed("ValueError: No available memory for the cache blocks.\nEngine core initialization failed. Failed core proc(s): {}\n")
            .is_empty()
    );
    // The engine's own CUDA out-of-memory error pasted under the summary
    // (pastes reorder; the engine's lines come from another process): the
    // engine said why, nothing killed it. The OOM line is
    // noonghunna/club-3090#16's engine line, under vllm-project/vllm#27508's
    // summary.
    assert!(
        killed("(APIServer pid=223598) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB. GPU 0 has a total capacity of 23.56 GiB of which 21.75 MiB is free. Including non-PyTorch memory, this process has 23.50 GiB memory in use.\n")
            .is_empty()
    );
    // A SIGKILL's exit status is a kill whatever follows.
    assert_eq!(
        killed("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': -9}\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB.\n").len(),
        1
    );
}

/// The root cause's category and the PIDs and units of every finding.
fn root(text: &str) -> (Option<crate::rules::Category>, Vec<u32>, Vec<String>) {
    let a = crate::testing::analyze_paste(text);
    let d = &a.diagnosis;
    let category = d
        .root_cause
        .as_ref()
        .and_then(|id| d.findings.iter().find(|f| &f.id == id))
        .map(|f| f.category);
    let pids = d
        .findings
        .iter()
        .flat_map(|f| f.entities.pids.iter().copied());
    let units = d
        .findings
        .iter()
        .flat_map(|f| f.entities.units.iter().cloned());
    (
        category,
        pids.collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        units
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
    )
}

/// A Slurm batch job's shell reports its process `Killed` and slurmstepd
/// counts an oom-kill event in the step's cgroup (batch-j/842): the OOM
/// killer inside the job's memory limit, with the victim's PID, at the
/// confidence the manager's own line gives. The newer wording with a vLLM
/// server's last start-up line before the kill reads the same (a variant,
/// assembled from Slurm 23.02's format and vLLM's loader line).
#[test]
fn a_job_killed_where_slurm_counts_an_oom_kill_is_the_cgroup_oom_kill() {
    let slurm = "/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed                  python3 main.py --prop hform --epochs 400 --lr_milestones 50 100 200 --gamma 0.25\n\
                 slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.\n";
    let f = killed(slurm);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
        [8156]
    );
    assert!(f[0].confidence >= 0.8, "{}", f[0].confidence);
    crate::testing::cites_line(&f[0], 2);
    assert!(f[0].title.contains("8156"), "{}", f[0].title);
    let vllm = "INFO 05-10 10:00:00 [default_loader.py:262] Loading weights took 30.12 seconds\n\
                /var/spool/slurmd/job1234/slurm_script: line 12: 104242 Killed                  vllm serve /models/m --tensor-parallel-size 4\n\
                slurmstepd: error: Detected 1 oom_kill event in StepId=1234.batch. Some of the step tasks have been OOM Killed.\n";
    let f = killed(vllm);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].entities.pids.contains(&104242));
    // srun's report alone, after a vLLM start-up in a Slurm job (the
    // line from chrisknewman/tusas#149's format): host OOM by its row.
    let srun = "INFO 05-10 10:00:00 [default_loader.py:262] Loading weights took 30.12 seconds\n\
                srun: error: gpu-node-3: task 0: Out Of Memory\n";
    assert_eq!(root(srun).0, Some(crate::rules::Category::HostOomKiller));
}

/// zsh's job report whose `[1]` the weights' progress bar kept at the end
/// of its line (batch-j/860): a kill while the model's weights loaded, with
/// the PID; the same for another job number and command (a variant). A
/// job report after a bar that loads nothing, for a command that names no
/// model, is not read as a model's load.
#[test]
fn a_zsh_job_report_after_the_weights_bar_is_the_host_oom_reading() {
    let comfy = "Loading text encoder model (llm) from: /home/asriel/AI/image/ComfyUI/models/LLM/llava-llama-3-8b-text-encoder-tokenizer\n\
                 Loading checkpoint shards:  25%|\u{2588}\u{2588}\u{2588}\u{2588}\u{2588}                | 1/4 [00:01<00:05,  1.86s/it][1] \n\
                 60190 killed     python main.py\n";
    let f = killed(comfy);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
        [60190]
    );
    assert!(f[0].confidence >= 0.55, "{}", f[0].confidence);
    let variant = "Loading checkpoint shards:  50%|\u{2588}\u{2588}\u{2588}\u{2588}\u{2588}     | 2/4 [00:03<00:03,  1.50s/it][2]  + \n\
                   4321 killed     python app.py\n";
    assert_eq!(killed(variant).len(), 1);
    assert!(killed("Downloading: 100%|\u{2588}\u{2588}| 2/2 [00:01<00:00,  1.86s/it][1] \n4321 killed     python app.py\n").is_empty());
}

/// TensorFlow 1.x's allocator warning, its XLA note, then a bare `Killed`
/// (batch-j/843): the host-OOM reading at the rule's lower confidence; TF
/// 2.x's wording the same (a variant, NatLibFi/Annif#427's line); the
/// warning with no kill, or a bare `Killed` with no memory evidence, is
/// no OOM.
#[test]
fn a_bare_kill_after_a_large_host_allocation_is_the_host_oom_reading_at_low_confidence() {
    let tf1 = "2019-12-23 16:13:40.451220: W tensorflow/core/framework/allocator.cc:107] Allocation of 367248384 exceeds 10% of system memory.\n\
               2019-12-23 16:13:43.011689: W tensorflow/compiler/jit/mark_for_compilation_pass.cc:1412] (One-time warning): Not using XLA:CPU for cluster because envvar TF_XLA_FLAGS=--tf_xla_cpu_global_jit was not set.\n\
               Killed\n";
    let tf2 = "tensorflow/core/framework/cpu_allocator_impl.cc:81] Allocation of 44089200 exceeds 10% of free system memory.\nKilled\n";
    for paste in [tf1, tf2] {
        let f = killed(paste);
        assert_eq!(f.len(), 1, "{paste}: {f:?}");
        assert!(f[0].confidence <= 0.4, "{}", f[0].confidence);
        crate::testing::cites_line(&f[0], 1);
        crate::testing::advises(&f[0], "container");
    }
    assert!(killed("2019-12-23 16:13:40.451220: W tensorflow/core/framework/allocator.cc:107] Allocation of 367248384 exceeds 10% of system memory.\n").is_empty());
    // A `Killed` after another program's output, with no memory evidence
    // and no loader before it, says nothing of what was killed.
    assert!(
        killed("Downloading: 100%|\u{2588}\u{2588}| 2/2 [00:01<00:00,  1.86s/it]\nKilled\n")
            .is_empty()
    );
}

/// A `Killed` that is the whole paste (batch-k/894,
/// oobabooga/textgen#418: text-generation-webui on Binder, the Logs
/// section's one word) is the host-OOM reading at the rule's lowest
/// confidence, asking for the kernel's log and the container's memory
/// limit; blank lines around it change nothing. The next paste: `Killed`
/// as the last line after a loader's bar at 67% (a variant, assembled
/// from batch-k/872's `Loading checkpoint shards` bar, as a notebook cell
/// prints it on its own line) reads as a kill while loading, above the
/// lone word.
#[test]
fn a_lone_killed_is_the_host_oom_reading_at_the_lowest_confidence() {
    for paste in ["Killed\n", "Killed\n\n"] {
        let f = killed(paste);
        assert_eq!(f.len(), 1, "{paste:?}: {f:?}");
        assert_eq!(f[0].category, crate::rules::Category::HostOomKiller);
        assert!(f[0].confidence <= 0.3, "{}", f[0].confidence);
        let asked: Vec<String> = f[0]
            .actions
            .iter()
            .map(|a| format!("{} {}", a.describe(), a.command().unwrap_or_default()))
            .collect();
        assert!(
            asked.iter().any(|a| a.contains("journalctl -k")),
            "{asked:?}"
        );
        assert!(asked.iter().any(|a| a.contains("memory.max")), "{asked:?}");
    }
    let colab = "Loading checkpoint shards:  67%|\u{2588}\u{2588}\u{2588}\u{2588}\u{2588}\u{2588}\u{258b}   | 2/3 [00:41<00:20, 20.71s/it]\nKilled\n";
    let f = killed(colab);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].confidence > 0.3, "{}", f[0].confidence);
    assert!(f[0].headline.contains("loading"), "{}", f[0].headline);
}

/// A job report that names a PID but no command is as bare as `Killed`:
/// batch L 901 (easydiffusion/easydiffusion#102, the start script's
/// `line 118: 7080 killed` as the whole paste) is the same lowest reading,
/// naming PID 7080; with a command line before it, it is not alone.
#[test]
fn a_commandless_job_report_alone_is_the_lone_reading_with_its_pid() {
    let f = killed("./scripts/on_sd_start.sh: line 118: 7080 killed\n");
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, crate::rules::Category::HostOomKiller);
    assert!(f[0].confidence <= 0.3, "{}", f[0].confidence);
    assert!(
        f[0].entities.pids.contains(&7080),
        "{:?}",
        f[0].entities.pids
    );
    let after_output = "building the index\n./scripts/on_sd_start.sh: line 118: 7080 killed\n";
    assert!(
        killed(after_output).is_empty(),
        "{:?}",
        killed(after_output)
    );
}

/// earlyoom's kills name the victim and its RSS (batch-j/861's two): host
/// OOM with both PIDs; its low-memory notice alone is no kill. systemd-oomd
/// killing `ollama.service` (a variant, assembled from oomd's format in
/// systemd/systemd#23606) names the unit.
#[test]
fn userspace_oom_killers_name_host_oom_with_their_victims() {
    let earlyoom = "Aug 04 10:39:10 debian earlyoom[845]: low memory! at or below SIGTERM limits: mem  3.00%, swap 10.00%\n\
                    Aug 04 10:39:10 debian earlyoom[845]: sending SIGTERM to process 322603 uid 1000 \"python3.13\": oom_score 1282, VmRSS 29931 MiB, cmdline \"/home/x/miniconda3/envs/comfy-env/bin/python3.13 main.py --listen 0.0.0.0\"\n\
                    Aug 04 10:39:12 debian earlyoom[845]: process 322603 exited after 2.805 seconds\n\
                    Aug 04 10:48:44 debian earlyoom[845]: sending SIGTERM to process 324012 uid 1000 \"python3.13\": oom_score 1288, VmRSS 30165 MiB, cmdline \"/home/x/miniconda3/envs/comfy-env/bin/python3.13 main.py --listen 0.0.0.0\"\n";
    let (category, pids, _) = root(earlyoom);
    assert_eq!(category, Some(crate::rules::Category::HostOomKiller));
    assert!(pids.contains(&322603) && pids.contains(&324012), "{pids:?}");
    let notice = "Aug 04 10:39:10 debian earlyoom[845]: low memory! at or below SIGTERM limits: mem  3.00%, swap 10.00%\n";
    assert_eq!(root(notice).0, None);
    let oomd = "Mar 02 10:00:01 gpu1 systemd-oomd[812]: Killed /system.slice/ollama.service due to memory pressure for /system.slice being 62.10% > 50.00% for > 20s with reclaim activity\n";
    let (category, _, units) = root(oomd);
    assert_eq!(category, Some(crate::rules::Category::HostOomKiller));
    assert_eq!(units, ["ollama.service"]);
}

/// fixtures/real/784 (https://github.com/YanWenKun/ComfyUI-Docker/issues/123):
/// the entrypoint's shell reports the server Killed, then docker compose
/// reports the container's exit 137. One death: the kill's finding cites
/// the exit, and the compose row's own finding folds into it.
#[test]
fn the_containers_exit_137_after_the_kill_is_the_same_death() {
    let text = "\
comfyui  | Requested to load WanVAE
comfyui  | loaded completely 2116.2459716796875 242.02829551696777 True
comfyui  | /runner-scripts/entrypoint.sh: line 52:     9 Killed                  python3 ./ComfyUI/main.py --listen --port 8188 ${CLI_ARGS}
comfyui exited with code 137
";
    let all = crate::testing::analyze_paste(text).diagnosis.findings;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].rule, super::META.id);
    crate::testing::cites_line_saying(&all[0], 4, "the same kill");
    assert!(all[0].entities.pids.contains(&9));
    // The exit alone is still the compose row's finding.
    let alone = crate::testing::analyze_paste("comfyui exited with code 137\n")
        .diagnosis
        .findings;
    assert_eq!(alone.len(), 1, "{alone:?}");
    assert_eq!(alone[0].rule, "known-message");
}

/// A bare `Killed` right after any program's line that it loads a
/// model's weights or builds an engine from them, whatever the stack:
/// TensorRT's builder's last figures (NVIDIA/TensorRT-LLM#191: the build
/// ran out of the container's memory), fairseq2's cached checkpoint after
/// a Python logging line (facebookresearch/seamless_communication#165,
/// WSL), tensorrtx's weights loader (wang-xinyu/tensorrtx#650: "Killed
/// means memory not enough"). A line that loads nothing is no such line.
#[test]
fn a_killed_after_any_programs_load_or_build_line_is_the_host_oom_reading() {
    let trt = "[10/30/2023-10:32:57] [TRT] [I] [MemUsageStats] Peak memory usage of TRT CPU/GPU memory allocators: CPU 1250 MiB, GPU 25301 MiB\n\
               [10/30/2023-10:32:57] [TRT] [I] [MemUsageChange] TensorRT-managed allocation in building engine: CPU +0, GPU +25301, now: CPU 0, GPU 25301 (MiB)\n\
               Killed\n";
    let f = killed(trt);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].title.contains("TensorRT engine"), "{}", f[0].title);
    crate::testing::cites_line(&f[0], 3);
    crate::testing::cites_line_saying(&f[0], 2, "engine build");
    crate::testing::advises(&f[0], "journalctl -k");
    let m4t = "2023-09-19 15:55:56,968 INFO -- m4t_scripts.predict.predict: Running inference on the CPU in torch.float32.\n\
               Using the cached checkpoint of the model 'seamlessM4T_large'. Set `force=True` to download again.\n\
               Killed\n";
    let g = killed(m4t);
    assert_eq!(g.len(), 1, "{g:?}");
    assert!(g[0].title.contains("loading a model"), "{}", g[0].title);
    crate::testing::advises(&g[0], ".wslconfig");
    let tensorrtx = "Loading weights: yolov5s.wts\nKilled\n";
    assert_eq!(killed(tensorrtx).len(), 1);
    // A script's line that loads nothing says nothing of what was killed.
    assert!(killed("2023-09-19 15:55:56,968 INFO -- m4t_scripts.predict.predict: Running inference on the CPU in torch.float32.\nKilled\n").is_empty());
}

/// A `Killed` the person caused: a `kill`, `pkill` or a run under
/// `timeout -s KILL` typed before it (assembled, not copied: a prompt, a
/// typed command and bash's `Killed`, around tensorrtx#650's loader line).
#[test]
fn a_killed_after_a_typed_kill_or_timeout_is_the_persons() {
    let timeout = "$ timeout -s KILL 60 ./yolov5 -s yolov5s.wts yolov5s.engine s\nLoading weights: yolov5s.wts\nKilled\n";
    assert!(killed(timeout).is_empty(), "{:?}", killed(timeout));
    let plain =
        "$ ./yolov5 -s yolov5s.wts yolov5s.engine s\nLoading weights: yolov5s.wts\nKilled\n";
    assert_eq!(killed(plain).len(), 1);
}

/// A bare `Killed` after a diffusion program moved a model into host
/// memory: FramePack's offload of its transformer then the VAE's unload
/// (lllyasviel/FramePack#127, batch P 1024), sd-webui-controlnet's
/// ControlNet weights read from disk (Mikubill/sd-webui-controlnet#668,
/// batch P 1025). Both are a kill while loading, and every loading line of
/// the window is cited (the 8 GB offload, not only the last unload). The
/// same lines with a traceback after them (FramePack#542's decode error
/// shape) are no kill.
#[test]
fn a_kill_after_a_model_moved_into_host_memory_is_a_kill_while_loading() {
    let framepack = "100%|\u{2588}\u{2588}\u{2588}| 1/1 [00:36<00:00, 36.06s/it]\n\
                     Offloading DynamicSwap_HunyuanVideoTransformer3DModelPacked from cuda:0 to preserve memory: 8 GB\n\
                     Loaded AutoencoderKLHunyuanVideo to cuda:0 as complete.\n\
                     Unloaded AutoencoderKLHunyuanVideo as complete.\n\
                     Killed\n";
    let f = killed(framepack);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, crate::rules::Category::HostOomKiller);
    assert!(f[0].confidence >= 0.5, "{}", f[0].confidence);
    let cited: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
    assert!(cited.contains(&2) && cited.contains(&4), "{cited:?}");
    let controlnet = "Loading model: control_sd15_openpose [fef5e48e]\n\
                      Loaded state_dict from [/workspace/stable-diffusion-webui/extensions/sd-webui-controlnet/models/control_sd15_openpose.pth]\n\
                      Killed\n";
    let f = killed(controlnet);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].headline.contains("loaded a model"),
        "{}",
        f[0].headline
    );
    let unkilled = "Offloading DynamicSwap_HunyuanVideoTransformer3DModelPacked from cuda:0 to preserve memory: 8 GB\n\
                    Loaded AutoencoderKLHunyuanVideo to cuda:0 as complete.\n\
                    Traceback (most recent call last):\n";
    assert!(killed(unkilled).is_empty());
}

/// bash's job report with a launcher's command as the whole paste
/// (`./webui.sh: line 241:  3179 Killed  "${python_cmd}"
/// "${LAUNCH_SCRIPT}" "$@"`, AUTOMATIC1111/stable-diffusion-webui#11951,
/// batch P 1035) says no more than a bare `Killed`: the lone reading,
/// naming PID 3179; with output before it, it is not alone.
#[test]
fn a_job_report_with_a_command_alone_is_the_lone_reading_with_its_pid() {
    let line = "./webui.sh: line 241:  3179 Killed                  \"${python_cmd}\" \"${LAUNCH_SCRIPT}\" \"$@\"\n";
    let f = killed(line);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, crate::rules::Category::HostOomKiller);
    assert!(f[0].confidence <= 0.3, "{}", f[0].confidence);
    assert!(
        f[0].entities.pids.contains(&3179),
        "{:?}",
        f[0].entities.pids
    );
    assert!(
        f[0].headline.starts_with("Process 3179"),
        "{}",
        f[0].headline
    );
    let after_output = format!("Model loaded in 3.2s\n{line}");
    assert!(
        killed(&after_output).is_empty(),
        "{:?}",
        killed(&after_output)
    );
}

/// A container's entrypoint shell reporting its server `Killed` as the
/// whole paste (`entrypoint.sh: line 42:  8 Killed  python3
/// ./ComfyUI/main.py --listen --port 8188 ${CLI_ARGS}`, batch U 1331,
/// under docker compose's prefix): a server's command is as bare as a
/// launcher's variables, the lone reading naming PID 8; so is a serving
/// program the programs' table knows. A command that starts no server
/// stays unread.
#[test]
fn a_server_command_killed_alone_is_the_lone_reading() {
    let line = "comfyui     | /home/scripts/entrypoint.sh: line 42:     8 Killed                  python3 ./ComfyUI/main.py --listen --port 8188 ${CLI_ARGS}\n";
    let f = killed(line);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, crate::rules::Category::HostOomKiller);
    assert!(f[0].confidence <= 0.3, "{}", f[0].confidence);
    assert!(f[0].entities.pids.contains(&8), "{:?}", f[0].entities.pids);
    let f = killed("run.sh: line 3: 4242 Killed                  vllm serve facebook/opt-125m\n");
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(killed("run.sh: line 3: 4242 Killed                  sort big.txt\n").is_empty());
}

/// metaseq's resharding launcher (batch Q 1083, facebookresearch/metaseq
/// #50): three of eight parallel `reshard_mp` jobs reported `Killed` by
/// bash while the others save their parts: one host-OOM finding naming
/// the three PIDs. One job of each of two commands is no group; a kill
/// typed before them is the person's.
#[test]
fn sibling_jobs_of_one_command_killed_together_are_the_host_oom_reading() {
    let job = |pid: u32| {
        format!(
            "metaseq/scripts/reshard_mp_launch_no_slurm.sh: line 24: {pid} Killed                  python3 -m metaseq.scripts.reshard_mp $prefix $save_dir --part $i --target-ddp-size $tgt_size\n"
        )
    };
    let paste = format!(
        "python -m metaseq.scripts.reshard_mp model/checkpoint_last metaseq_model_combined/ --part 7 --target-ddp-size 1\n\
         reshard_mp7_ddp1\n\
         Waiting on jobs...\n\n\n{}{}{}\
         Saving to metaseq_model_combined//reshard-model_part-1-shard[i].pt: 1it [01:42, 102.60s/it]\n",
        job(423467),
        job(423469),
        job(423472)
    );
    let f = killed(&paste);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
        [423467, 423469, 423472]
    );
    assert!(f[0].headline.contains("Killed"), "{}", f[0].headline);
    assert!(
        f[0].title.contains("python3 -m metaseq.scripts.reshard_mp"),
        "{}",
        f[0].title
    );
    let two_commands = format!(
        "{}./run.sh: line 9: 423470 Killed                  sort big.txt\n",
        job(423467)
    );
    assert!(killed(&two_commands).is_empty());
    let typed = format!("$ pkill -9 -f reshard_mp\n{}{}", job(423467), job(423469));
    assert!(killed(&typed).is_empty());
}

/// A loop's bar at its total, then a bare `Killed` (castorini/hedwig#70,
/// batch W 1505, reduced to its last two lines): the kill came in the step
/// after the loop, read at a confidence below a bar still counting, with
/// the kernel's log as the check; a download's bar at its total is not.
#[test]
fn a_kill_after_a_loops_bar_at_its_total_is_the_lower_reading() {
    let f = killed(
        "100%\u{2588}\u{2588}\u{2588}\u{2588}| 3000001/3000001 [03:33<00:00, 14061.26it/s]\nKilled\n",
    );
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].confidence < 0.45, "{}", f[0].confidence);
    crate::testing::cites_line(&f[0], 1);
    crate::testing::advises(
        &f[0],
        "dmesg -T | grep -i -E 'killed process|out of memory'",
    );
}
