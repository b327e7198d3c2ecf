//! `gpu-memory-unaccounted` over real pastes and variants of their grammar.

use crate::rules::{Category, Severity};
use crate::testing::findings_of;

/// https://github.com/pytorch/pytorch/issues/37726 (fixtures/real/724):
/// GPU 7 keeps 8525 MiB at 0 % after the notebook was interrupted.
const GPU7_ROW: &str = "\
+-------------------------------+----------------------+----------------------+
|   7  GeForce RTX 208...  Off  | 00000000:41:00.0 Off |                  N/A |
| 30%   28C    P8    22W / 250W |   8525MiB / 11019MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
";

/// https://github.com/pytorch/pytorch/issues/910 (batch-f/726): GPU 0 full
/// after a crash, GPU 1 the display; the paste ends at the process header.
const CRASHED: &str = "\
atcold@GPU0 ~/MatchNet [master*]$ nvidia-smi 
Fri Mar  3 11:52:29 2017       
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 375.39                 Driver Version: 375.39                    |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce GTX TIT...  Off  | 0000:03:00.0     Off |                  N/A |
| 24%   63C    P2    72W / 250W |  11409MiB / 12207MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
|   1  GeForce GTX TIT...  Off  | 0000:06:00.0      On |                  N/A |
| 22%   49C    P8    18W / 250W |    698MiB / 12204MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
                                                                               
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
";

#[test]
fn a_gpu_with_memory_and_no_process_is_named_not_signalled() {
    let f = findings_of(super::META.id, GPU7_ROW);
    assert_eq!(f.len(), 1, "{f:?}");
    // The table alone looks like a live server's preallocation too.
    assert_eq!(f[0].severity, Severity::Info);
    assert!(f[0].entities.gpus.contains(&7), "{:?}", f[0].entities);
    assert!(f[0].entities.pids.is_empty());
    assert!(
        f[0].confidence < 0.7,
        "partial evidence: {}",
        f[0].confidence
    );
    // Advice only, and it names the command that settles it.
    assert!(
        f[0].actions
            .iter()
            .all(|a| a.safety == crate::rules::Safety::AdvisoryOnly),
        "{:?}",
        f[0].actions
    );
    crate::testing::advises(&f[0], "--query-compute-apps");
}

#[test]
fn only_the_gpu_that_holds_a_share_of_its_memory() {
    let f = findings_of(super::META.id, CRASHED);
    assert_eq!(f.len(), 1, "{f:?}");
    // GPU 1's 698 MiB is the display's, not a run's.
    assert_eq!(
        f[0].entities.gpus.iter().copied().collect::<Vec<_>>(),
        vec![0]
    );
}

#[test]
fn a_variant_with_no_running_processes_found() {
    // Varies 724's row (another index, other figures) and adds the block a
    // full table prints below it when no process is visible.
    let text = "\
+-------------------------------+----------------------+----------------------+
|   3  GeForce RTX 208...  Off  | 00000000:3E:00.0 Off |                  N/A |
| 29%   30C    P8    21W / 250W |   6144MiB / 11019MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
                                                                               
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|  No running processes found                                                 |
+-----------------------------------------------------------------------------+
";
    let f = findings_of(super::META.id, text);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].entities.gpus.contains(&3));
}

#[test]
fn memory_still_held_after_the_server_finished_is_an_error() {
    // Assembled from real lines: the vLLM-Omni API server's last lines
    // (https://github.com/vllm-project/vllm-omni/issues/2768,
    // fixtures/real/664) and, below them, 724's GPU row.
    let text = format!(
        "\
(APIServer pid=58847) INFO:     Shutting down
(APIServer pid=58847) INFO:     Waiting for application shutdown.
(APIServer pid=58847) INFO:     Application shutdown complete.
(APIServer pid=58847) INFO:     Finished server process [58847]
$ nvidia-smi
{GPU7_ROW}"
    );
    let f = findings_of(super::META.id, &text);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Error);
    assert!(f[0].entities.pids.contains(&58847), "{:?}", f[0].entities);
    assert!(f[0].entities.gpus.contains(&7));
    // The table before the shutdown says nothing of what outlived it.
    let before =
        format!("{GPU7_ROW}(APIServer pid=58847) INFO:     Finished server process [58847]\n");
    assert!(findings_of(super::META.id, &before).is_empty());
}

#[test]
fn a_listed_holder_a_running_server_or_little_memory_is_no_finding() {
    // The process row accounts for GPU 1's memory: another rule's matter.
    let listed = "\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 384.98                 Driver Version: 384.98                    |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   1  TITAN X (Pascal)    Off  | 00000000:03:00.0 Off |                  N/A |
| 31%   54C    P2    58W / 250W |   7829MiB / 12189MiB |      3%      Default |
+-------------------------------+----------------------+----------------------+
                                                                               
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|    1     52574      C   python                                      7817MiB |
+-----------------------------------------------------------------------------+
";
    assert!(findings_of(super::META.id, listed).is_empty());
    // A model server in ps owns the memory.
    let serving = format!(
        "{GPU7_ROW}$ ps -ef | grep vllm\nroot      4242      1  9 09:12 ?        00:10:00 /usr/bin/python3 /usr/local/bin/vllm serve Qwen/Qwen3-8B --port 8000\n"
    );
    assert!(findings_of(super::META.id, &serving).is_empty());
    // 1,024 MiB of 11,019 is under a quarter of the card.
    let little = GPU7_ROW.replace("  8525MiB / 11019MiB", "  1024MiB / 11019MiB");
    assert!(findings_of(super::META.id, &little).is_empty());
}

/// https://github.com/NVIDIA/gpu-rest-engine/issues/10
/// (fixtures/real/786): a 2 GB card full before a second
/// inference server starts; the one row left in the paste is Xorg's.
const K1100M_FULL: &str = "\
Mon Apr 10 16:17:13 2017       
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 361.93.02              Driver Version: 361.93.02                 |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Quadro K1100M       On   | 0000:01:00.0      On |                  N/A |
| N/A   51C    P0    N/A /  N/A |   1996MiB /  1998MiB |      3%      Default |
+-------------------------------+----------------------+----------------------+
                                                                               
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID  Type  Process name                               Usage      |
|=============================================================================|
|    0      1606    G   /usr/lib/xorg/Xorg                             137MiB |
";

#[test]
fn a_full_card_whose_rows_hold_a_fraction_is_held_by_an_unlisted_process() {
    let f = findings_of(super::META.id, K1100M_FULL);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].category,
        crate::rules::Category::GpuMemoryHeldByOtherProcess
    );
    // Full: nothing else can start on it, from the table alone.
    assert_eq!(f[0].severity, Severity::Error);
    assert_eq!(
        f[0].entities.gpus.iter().copied().collect::<Vec<_>>(),
        vec![0]
    );
    // The figures as printed, the display's share named as not the cause.
    assert!(
        f[0].headline.contains("1996MiB / 1998MiB"),
        "{}",
        f[0].headline
    );
    assert!(f[0].headline.contains("137 MiB"), "{}", f[0].headline);
    assert!(f[0].title.contains("1,859 MiB"), "{}", f[0].title);
    // No holder named: advice only, the command that names it, and a
    // confidence below a named holder's.
    assert!(
        f[0].actions
            .iter()
            .all(|a| a.safety == crate::rules::Safety::AdvisoryOnly)
    );
    crate::testing::advises(&f[0], "--query-compute-apps");
    assert!(f[0].confidence < 0.8, "{}", f[0].confidence);
}

#[test]
fn a_variant_in_the_newer_layout_that_is_not_full_is_a_note() {
    // Varies the rows of fixtures/real/635 (nvidia-smi 5xx's layout, with
    // the GI and CI columns; zhao-kun/VibeVoiceFusion#24) under a GPU row of
    // 806's layout with other figures: 7.5 of 8 GiB used, the desktop's two
    // rows listed.
    let text = "\
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 4060        Off |   00000000:01:00.0  On |                  N/A |
|  0%   37C    P5             N/A /  115W |    7680MiB /   8188MiB |     24%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A            2043      G   /usr/lib/xorg/Xorg                       19MiB |
|    0   N/A  N/A            2292      G   /usr/bin/gnome-shell                      8MiB |
";
    let f = findings_of(super::META.id, text);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].category,
        crate::rules::Category::GpuMemoryHeldByOtherProcess
    );
    // 94% in use: room may be left, and a live job looks the same.
    assert_eq!(f[0].severity, Severity::Info);
    assert!(f[0].entities.gpus.contains(&0));
    // The rows explain the memory: nothing to say.
    let explained = text.replace("    7680MiB /   8188MiB", "      40MiB /   8188MiB");
    assert!(findings_of(super::META.id, &explained).is_empty());
}

#[test]
fn rows_without_a_figure_are_not_summed() {
    // Windows prints N/A for each process's memory (WDDM): the rows say
    // nothing of who holds what. 786's table with its one row so printed.
    let text = K1100M_FULL.replace("137MiB |", "   N/A |");
    assert!(
        findings_of(super::META.id, &text)
            .iter()
            .all(|f| f.category != crate::rules::Category::GpuMemoryHeldByOtherProcess)
    );
    // A model server in ps owns the memory.
    let serving = format!(
        "{K1100M_FULL}$ ps -ef | grep vllm\nroot      4242      1  9 09:12 ?        00:10:00 /usr/bin/python3 /usr/local/bin/vllm serve Qwen/Qwen3-8B --port 8000\n"
    );
    assert!(findings_of(super::META.id, &serving).is_empty());
}

/// https://github.com/cBio/cbio-cluster/issues/422 (batch-i/822): on the
/// node a scheduler allocated, GPUs 0 and 1 nearly full and GPU 2 free,
/// the table cut before its process block.
const TITANS: &str = "\
[chodera@gpu-2-14 ~]$ nvidia-smi
Thu Jun  9 13:41:35 2016       
+------------------------------------------------------+                       
| NVIDIA-SMI 352.39     Driver Version: 352.39         |                       
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce GTX TITAN   Off  | 0000:03:00.0     Off |                  N/A |
| 30%   34C    P8    14W / 250W |   5872MiB /  6143MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
|   1  GeForce GTX TITAN   Off  | 0000:04:00.0     Off |                  N/A |
| 30%   33C    P8    14W / 250W |   5771MiB /  6143MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
|   2  GeForce GTX TITAN   Off  | 0000:83:00.0     Off |                  N/A |
| 30%   34C    P8    14W / 250W |     85MiB /  6143MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
";

#[test]
fn full_gpus_beside_a_free_one_are_taken_by_other_processes() {
    let f = findings_of(super::META.id, TITANS);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Error);
    assert_eq!(
        f[0].category,
        crate::rules::Category::GpuMemoryHeldByOtherProcess
    );
    assert_eq!(
        f[0].entities.gpus.iter().copied().collect::<Vec<_>>(),
        vec![0, 1]
    );
    // The figures as the table prints them, for a search.
    assert!(
        f[0].headline.contains("5872MiB / 6143MiB"),
        "{}",
        f[0].headline
    );
    assert!(
        f[0].headline.contains("CUDA_VISIBLE_DEVICES=2"),
        "{}",
        f[0].headline
    );
    assert!(f[0].confidence <= 0.6);
}

#[test]
fn a_full_gpu_with_no_free_one_beside_it_stays_a_note() {
    // The next paste: the same node with GPU 2 taken too (its figures
    // raised to GPU 1's): no free GPU says the host is shared.
    let text = TITANS.replace("    85MiB /  6143MiB", "  5771MiB /  6143MiB");
    let f = findings_of(super::META.id, &text);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Info);
}

#[test]
fn a_full_gpu_beside_a_free_one_with_process_rows_is_not_taken() {
    // A process row anywhere is something of the user's shown: the rows
    // say whose the memory is (the partial reading's business). A variant:
    // a process block assembled in the table's own format, not copied.
    let text = format!(
        "{TITANS}\
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID  Type  Process name                               Usage      |
|=============================================================================|
|    2     22342    C   python                                          83MiB |
+-----------------------------------------------------------------------------+
"
    );
    let f = findings_of(super::META.id, &text);
    assert!(f.iter().all(|f| f.severity == Severity::Info), "{f:?}");
}

/// https://github.com/ollama/ollama/issues/3301 (batch-k/879): llama.cpp's
/// own lines put 17999.66 MiB on CUDA0, and the nvidia-smi table above
/// its process rows shows GPU 0 at 22070 of 24576 MiB.
const OFFLOAD_TABLE: &str = "\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.161.07             Driver Version: 535.161.07   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA GeForce RTX 3090        Off | 00000000:08:00.0 Off |                  N/A |
| 30%   44C    P2             150W / 370W |  22070MiB / 24576MiB |     15%      Default |
";

#[test]
fn a_loaders_own_device_buffer_lines_name_the_memorys_owner() {
    // The table alone: a note that no process is listed.
    assert_eq!(findings_of(super::META.id, OFFLOAD_TABLE).len(), 1);
    // With the loader's lines above it (2024's wording, as pasted), and
    // 2025's `model buffer size` (llama.cpp#9390's line, a loader on
    // several GPUs): the memory is the loader's, no note.
    for loader in [
        "llm_load_tensors: offloaded 23/33 layers to GPU\n\
         llm_load_tensors:        CPU buffer size = 25215.87 MiB\n\
         llm_load_tensors:      CUDA0 buffer size = 17999.66 MiB\n",
        "load_tensors:        CUDA2 model buffer size = 25338.47 MiB\n",
        // vLLM's own account of its weights (vllm#10517's line).
        "Loading model weights took 14.9888 GB\n",
    ] {
        let paste = format!("{loader}{OFFLOAD_TABLE}");
        let f = findings_of(super::META.id, &paste);
        assert!(f.is_empty(), "{loader}: {f:?}");
    }
    // A CPU-only load's buffers name no GPU: the note stays.
    let cpu = format!("llm_load_tensors:        CPU buffer size = 25215.87 MiB\n{OFFLOAD_TABLE}");
    assert_eq!(findings_of(super::META.id, &cpu).len(), 1);
}

/// https://github.com/peci1/nvidia-htop/issues/9 (fixtures/real/961): nvidia-smi inside a
/// container, GPU 0 full and computing (the user's own training, whose
/// process another PID namespace hides), GPU 1 idle; the paste ends before
/// the process block.
const CONTAINER_BUSY: &str = "\
(base) [root@oicv3host nvidia-htop]# nvidia-smi
Thu May 14 22:09:09 2020
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 440.82       Driver Version: 440.82       CUDA Version: 10.2     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce GTX 108...  Off  | 00000000:01:00.0 Off |                  N/A |
| 38%   68C    P2    73W / 250W |  10916MiB / 11175MiB |     59%      Default |
+-------------------------------+----------------------+----------------------+
|   1  GeForce GTX 108...  Off  | 00000000:02:00.0 Off |                  N/A |
| 23%   29C    P8     8W / 250W |    149MiB / 11178MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
";

#[test]
fn a_full_gpu_that_computes_beside_a_free_one_stays_a_note() {
    let f = findings_of(super::META.id, CONTAINER_BUSY);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Info);
    assert!(
        f[0].evidence
            .iter()
            .any(|e| e.note.contains("it computes (59% GPU-Util)")),
        "{f:?}"
    );
    // The same table with GPU 0 idle is the cbio-cluster reading: memory
    // taken while a GPU beside it is free.
    let idle = CONTAINER_BUSY.replace("|     59%      Default |", "|      0%      Default |");
    let f = findings_of(super::META.id, &idle);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Error);
    // And the TITANs at work: a live job, a note.
    let busy = TITANS.replace("|      0%      Default |", "|     97%      Default |");
    let f = findings_of(super::META.id, &busy);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Info);
}

/// https://forums.developer.nvidia.com/t/memory-on-gpu-not-freed-after-the-program-is-killed/62311
/// (batch P 1034): four TITAN X in exclusive-process mode after the user's
/// program was killed, each idle with 536–602 MiB in use, the process block
/// cut after its header. Two of the four GPUs, as printed.
const EXCLUSIVE_IDLE: &str = "\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 390.30                 Driver Version: 390.30                    |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  TITAN X (Pascal)    Off  | 00000000:02:00.0 Off |                  N/A |
| 23%   37C    P8    17W / 250W |    602MiB / 12196MiB |      0%   E. Process |
+-------------------------------+----------------------+----------------------+
|   1  TITAN X (Pascal)    Off  | 00000000:03:00.0 Off |                  N/A |
| 23%   35C    P8    10W / 250W |    536MiB / 12196MiB |      0%   E. Process |
+-------------------------------+----------------------+----------------------+
                                                                               
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
";

#[test]
fn an_idle_exclusive_gpu_holding_a_context_is_closed_to_others() {
    let f = findings_of(super::META.id, EXCLUSIVE_IDLE);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Error);
    assert_eq!(
        f[0].category,
        crate::rules::Category::GpuMemoryHeldByOtherProcess
    );
    assert_eq!(
        f[0].entities.gpus.iter().copied().collect::<Vec<_>>(),
        [0, 1]
    );
    // The table does not say whose the context is: a modest confidence,
    // and the command that names the holder.
    assert!(f[0].confidence <= 0.6, "{}", f[0].confidence);
    crate::testing::advises(&f[0], "fuser -v /dev/nvidia0 /dev/nvidia1");
    let cited: Vec<&str> = f[0].evidence.iter().map(|e| e.note.as_str()).collect();
    assert!(
        cited
            .iter()
            .any(|n| n.contains("602MiB / 12196MiB") && n.contains("E. Process")),
        "{cited:?}"
    );
}

#[test]
fn an_idle_exclusive_gpu_at_idle_memory_or_in_default_mode_stays_quiet() {
    // fixtures/real/647 (conda-forge/staged-recipes#13659): a GTX 1080 in
    // E. Process mode with no context shows 1 MiB.
    let idle = EXCLUSIVE_IDLE
        .replace("   602MiB / 12196MiB", "     1MiB / 12196MiB")
        .replace("   536MiB / 12196MiB", "     1MiB / 12196MiB");
    assert!(findings_of(super::META.id, &idle).is_empty());
    // The same memory in Default mode is a display's or a context's that
    // closes nothing: below the table-only note's quarter of the card.
    let default = EXCLUSIVE_IDLE.replace("   E. Process |", "      Default |");
    assert!(findings_of(super::META.id, &default).is_empty());
    // A GPU that computes runs its holder's live job: not idle.
    let busy = EXCLUSIVE_IDLE.replace("      0%   E. Process", "     97%   E. Process");
    assert!(findings_of(super::META.id, &busy).is_empty());
    // Another exclusive GPU of the table free (fixtures/real/501's V100s:
    // `1092MiB` beside `10MiB`): a shared node's other job as likely, a note.
    let one_free = EXCLUSIVE_IDLE.replace("   536MiB / 12196MiB", "    10MiB / 12196MiB");
    let f = findings_of(super::META.id, &one_free);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Info);
    assert_eq!(f[0].entities.gpus.iter().copied().collect::<Vec<_>>(), [0]);
}

/// https://github.com/wandb/wandb/issues/1247 (batch P 1033): the trial's
/// PID asked about twice; in state `Dl+` in the first answer, gone from the
/// second. The thread says nvidia-smi then listed nothing while the memory
/// stayed used; that table is not in the paste, so the variant adds one in
/// the grammar of fixtures/real/724's row with `No running processes found`.
const ASKED_TWICE: &str = "\
(3.9.7) goncalo@server:~$ ps aux | grep 2559215
goncalo  2559215 94.0 24.7 58570208 32577444 pts/8 Dl+ 00:32 499:48 /home/goncalo/.pyenv/versions/nmt/bin/python -m nmt.train --config nmt_config.yaml  --model.init_args.prior_latent_size 2048
goncalo  2905447  0.0  0.0   6432  1968 pts/19   S+   09:23   0:00 grep --color=auto 2559215
(3.9.7) goncalo@server:~$ ps aux | grep 2559215
goncalo  2926176  0.0  0.0   6432   676 pts/19   S+   12:46   0:00 grep --color=auto 2559215
";

fn asked_then_table(answers: &str) -> String {
    format!(
        "{answers}(3.9.7) goncalo@server:~$ nvidia-smi\n\
+-----------------------------------------------------------------------------+\n\
| NVIDIA-SMI 440.33.01    Driver Version: 440.33.01    CUDA Version: 10.2     |\n\
|-------------------------------+----------------------+----------------------+\n\
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n\
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n\
|===============================+======================+======================|\n\
{GPU7_ROW}\n\
+-----------------------------------------------------------------------------+\n\
| Processes:                                                       GPU Memory |\n\
|  GPU       PID   Type   Process name                             Usage      |\n\
|=============================================================================|\n\
|  No running processes found                                                 |\n\
+-----------------------------------------------------------------------------+\n"
    )
}

#[test]
fn memory_held_after_the_pid_asked_about_is_gone_is_an_error() {
    let f = findings_of(super::META.id, &asked_then_table(ASKED_TWICE));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Error);
    assert!(f[0].entities.pids.contains(&2559215), "{:?}", f[0].entities);
    assert!(f[0].entities.gpus.contains(&7), "{:?}", f[0].entities);
    let cited: Vec<&str> = f[0].evidence.iter().map(|e| e.note.as_str()).collect();
    assert!(
        cited
            .iter()
            .any(|n| n.contains("PID 2559215") && n.contains("`Dl+`")),
        "{cited:?}"
    );
    // Still listed in the later answer: no end, the table alone (a note).
    let alive = ASKED_TWICE.replace(
        "goncalo  2926176",
        "goncalo  2559215 94.0 24.7 58570208 32577444 pts/8 Dl+ 00:32 499:48 /home/goncalo/.pyenv/versions/nmt/bin/python -m nmt.train\ngoncalo  2926176",
    );
    let f = findings_of(super::META.id, &asked_then_table(&alive));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].severity, Severity::Info);
    // The answers alone, with no GPU table: nothing to say of GPU memory.
    assert!(findings_of(super::META.id, ASKED_TWICE).is_empty());
}

/// The table of `CRASHED` (GPU 0 full, GPU 1 the display) and `fuser -v
/// /dev/nvidia0 /dev/nvidia1` in its own grammar (dmlc/gluon-nlp#338's
/// rows; the PIDs here are made up): the display server and the desktop
/// hold both GPUs' nodes, a `python` only GPU 0's. It is named as the
/// likely holder, and the memory is held by it, not unaccounted; with
/// GPU 0's node alone listed, no holder stands out.
#[test]
fn a_process_holding_only_the_held_gpus_node_is_its_likely_holder() {
    let fuser = "\
                     USER        PID ACCESS COMMAND
/dev/nvidia0:        root       1712 F...m Xorg
                     atcold     2290 F...m compiz
                     atcold    31337 F...m python
/dev/nvidia1:        root       1712 F...m Xorg
                     atcold     2290 F...m compiz
";
    let f = findings_of(super::META.id, &format!("{CRASHED}{fuser}"));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
    assert_eq!(f[0].severity, Severity::Error);
    assert_eq!(
        f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
        [31337]
    );
    assert!(
        f[0].headline.contains("PID 31337 (python)"),
        "{}",
        f[0].headline
    );
    // GPU 0's node alone: every holder opens it, no one stands out.
    let only0 = fuser.split("/dev/nvidia1").next().unwrap_or_default();
    let f = findings_of(super::META.id, &format!("{CRASHED}{only0}"));
    assert!(f.iter().all(|f| f.entities.pids.is_empty()), "{f:?}");
}
