//! The rule's tests: who holds the memory, as the message's versions and
//! the captures tell it.

use crate::rules::Category;

/// The root cause's category and entities for a paste.
fn root(text: &str) -> (Category, Vec<u32>, Vec<u32>, usize) {
    let a = crate::testing::analyze_paste(text);
    let report = a.report();
    let f = report.root_cause().expect("a root cause");
    let kills = f
        .actions
        .iter()
        .filter(|x| x.kind.name().contains("terminate") || x.kind.name().contains("stop"))
        .count();
    (
        f.category,
        f.entities.pids.iter().copied().collect(),
        f.entities.gpus.iter().copied().collect(),
        kills,
    )
}

const SIBLINGS: &str = "OutOfMemoryError: CUDA out of memory. Tried to allocate 52.00 MiB. GPU 0 has a total capacty of 31.74 GiB of which 39.62 MiB is free. Process 101553 has 1.19 GiB memory in use. Process 101552 has 1.19 GiB memory in use. Process 101551 has 1.19 GiB memory in use. Process 101550 has 1.19 GiB memory in use. Including non-PyTorch memory, this process has 13.82 GiB memory in use. Of the allocated memory 11.54 GiB is allocated by PyTorch, and 677.26 MiB is reserved by PyTorch but unallocated.";
const OLD_FORM: &str = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.63 GiB (GPU 0; 44.56 GiB total capacity; 27.91 GiB already allocated; 565.31 MiB free; 27.93 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.";
const CUT: &str = "Tried to allocate 216.00 MiB (GPU 0; 7.92 GiB total capacity; 69.17 MiB already allocated; 24.56 MiB free; 86.00 MiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.";
const PREFIX: &str = "[2026-11-27 09:38:52 TP0] ";

#[test]
fn the_one_entry_that_can_hold_pytorch_s_allocation_is_the_writer() {
    use crate::model::{CudaOom, OomSource, ProcessMemory};
    const G: u64 = 1 << 30;
    let mut o = CudaOom::new(OomSource::Allocator);
    o.total_bytes = Some(44 * G);
    o.free_bytes = Some(G / 20);
    o.allocated_bytes = Some(37 * G);
    o.processes = vec![ProcessMemory {
        pid: 3663367,
        bytes: 44 * G - G / 20,
    }];
    assert_eq!(super::listed_writer(&o), Some((3663367, 44 * G - G / 20)));
    // Two entries large enough: either could be the writer.
    o.processes = vec![
        ProcessMemory {
            pid: 1,
            bytes: 38 * G,
        },
        ProcessMemory {
            pid: 2,
            bytes: 38 * G,
        },
    ];
    o.total_bytes = Some(76 * G + G / 20);
    assert_eq!(super::listed_writer(&o), None);
    // A list that does not cover the memory in use may lack the writer.
    o.processes = vec![ProcessMemory {
        pid: 1,
        bytes: 38 * G,
    }];
    assert_eq!(super::listed_writer(&o), None);
}

#[test]
fn sibling_ranks_are_the_job_itself_never_killed() {
    let (category, pids, gpus, kills) = root(&format!("{PREFIX}{SIBLINGS}\n"));
    assert_eq!(category, Category::CudaOom);
    assert_eq!(pids, vec![101550, 101551, 101552, 101553]);
    assert_eq!(gpus, vec![0]);
    assert_eq!(kills, 0);
}

#[test]
fn the_old_message_s_arithmetic_shows_another_process() {
    for line in [OLD_FORM, CUT] {
        let (category, _, gpus, _) = root(&format!("{PREFIX}{line}\n"));
        assert_eq!(category, Category::GpuMemoryHeldByOtherProcess, "{line}");
        assert_eq!(gpus, vec![0]);
    }
}

/// https://github.com/rhymes-ai/Aria/issues/24: vLLM in a container;
/// the driver's per-process figure is 0 bytes while PyTorch allocated
/// 19.02 GiB in the same process.
const ZERO_FIGURE: &str = "(VllmWorkerProcess pid=2421) ERROR 10-14 12:32:47 multiproc_worker_utils.py:233] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.88 GiB. GPU 3 has a total capacity of 21.96 GiB of which 1.29 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory in use. Of the allocated memory 19.02 GiB is allocated by PyTorch, and 1.32 GiB is reserved by PyTorch but unallocated.";
/// fixtures/rules/torch-cuda-oom/pos-2.5-foreign-pid.log: the figure is
/// honest (47.95 GiB >= 45.10 + 1.14) and PID 9911 holds the rest.
const HONEST_FIGURE: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.21 GiB is free. Process 9911 has 30.02 GiB memory in use. Including non-PyTorch memory, this process has 47.95 GiB memory in use. Of the allocated memory 45.10 GiB is allocated by PyTorch, and 1.14 GiB is reserved by PyTorch but unallocated.";

#[test]
fn a_per_process_figure_below_pytorch_s_own_is_not_believed() {
    let (category, pids, gpus, kills) = root(&format!("{ZERO_FIGURE}\n"));
    assert_eq!(category, Category::CudaOom);
    assert_eq!(pids, vec![2421]);
    assert_eq!(gpus, vec![3]);
    assert_eq!(kills, 0);
    let analysis = crate::testing::analyze_paste(&format!("{ZERO_FIGURE}\n"));
    let report = analysis.report();
    let f = report.root_cause().expect("a root cause");
    assert!(
        f.chain
            .iter()
            .any(|c| c.contains("0 bytes") && c.contains("wrong")),
        "{:?}",
        f.chain
    );
    // Near miss: an honest figure and a listed holder stay another process's.
    let (category, pids, ..) = root(&format!("{HONEST_FIGURE}\n"));
    assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
    assert_eq!(pids, vec![9911]);
}

#[test]
#[ignore = "waits on ingest-lines: a bare one-line paste must reach the server parser"]
fn bare_lines_answer_the_same() {
    assert_eq!(root(SIBLINGS).0, Category::CudaOom);
    assert_eq!(root(OLD_FORM).0, Category::GpuMemoryHeldByOtherProcess);
    assert_eq!(root(CUT).0, Category::GpuMemoryHeldByOtherProcess);
}

/// https://github.com/erikguo/yolov3/issues/4: PyTorch 1.0's oldest form on
/// a 3.95 GiB card. 1.62 GiB allocated and 9.10 MiB cached are this
/// process's; 2.3 GiB of the card is held outside it, a third of the card
/// though under 2 GiB once its own CUDA context is discounted.
const SMALL_CARD: &str = "RuntimeError: CUDA out of memory. Tried to allocate 338.00 MiB (GPU 0; 3.95 GiB total capacity; 1.62 GiB already allocated; 23.00 MiB free; 9.10 MiB cached)";

#[test]
fn another_process_s_share_is_judged_relative_to_a_small_card() {
    let (category, _, gpus, _) = root(SMALL_CARD);
    assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
    assert_eq!(gpus, vec![0]);
    // The next paste, a variant of SMALL_CARD's grammar on a 3.82 GiB card:
    // about 1 GiB beyond a context held elsewhere, a quarter of the card.
    let (category, _, _, _) = root(
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 3.82 GiB total capacity; 1.80 GiB already allocated; 11.50 MiB free; 30.00 MiB cached)",
    );
    assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
    // The 2.1+ form's process list on a small card (variant of the
    // SIBLINGS grammar): another PID holds 1.40 GiB of 3.81 GiB.
    let (category, pids, _, _) = root(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 3.81 GiB of which 5.06 MiB is free. Process 1234 has 1.40 GiB memory in use. Including non-PyTorch memory, this process has 2.39 GiB memory in use. Of the allocated memory 2.10 GiB is allocated by PyTorch, and 20.00 MiB is reserved by PyTorch but unallocated.",
    );
    assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
    assert!(pids.contains(&1234));
    // The near miss: the same card filled by this process itself.
    let (category, _, _, _) = root(
        "RuntimeError: CUDA out of memory. Tried to allocate 338.00 MiB (GPU 0; 3.95 GiB total capacity; 2.90 GiB already allocated; 23.00 MiB free; 9.10 MiB cached)",
    );
    assert_eq!(category, Category::CudaOom);
}

/// The figures the finding repeats read as PyTorch printed them, so that a
/// reader searching the report for `14.75 MiB` finds it
/// (fixtures/real/743: a Kubernetes pod on a time-sliced
/// T4); and the next paste's figures likewise, small and large.
#[test]
fn the_finding_shows_the_figures_as_pytorch_printed_them() {
    let shown = |text: &str| {
        let a = crate::testing::analyze_paste(text);
        let report = a.report();
        let f = report.root_cause().expect("a root cause");
        format!("{}\n{}", f.headline, f.chain.join("\n"))
    };
    let t = shown(
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 14.76 GiB total capacity; 4.37 GiB already allocated; 14.75 MiB free; 4.43 GiB reserved in total by PyTorch)",
    );
    for figure in ["14.75 MiB free", "20.00 MiB", "14.76 GiB", "4.43 GiB"] {
        assert!(t.contains(figure), "{figure} not in:\n{t}");
    }
    assert!(!t.contains(" 15 MiB"), "{t}");
    let t = shown(SMALL_CARD);
    for figure in ["23.00 MiB free", "338.00 MiB", "3.95 GiB"] {
        assert!(t.contains(figure), "{figure} not in:\n{t}");
    }
}

/// https://github.com/bcmi/libcom/issues/54: the process's own figure
/// (9.43 GiB, its CUDA context included) and 185.50 MiB free leave 0.16
/// GiB of the 9.77 GiB card: nobody else.
const OWN_FIGURE: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity of 9.77 GiB of which 185.50 MiB is free. Including non-PyTorch memory, this process has 9.43 GiB memory in use. Of the allocated memory 9.04 GiB is allocated by PyTorch, and 142.12 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";

#[test]
fn this_process_s_figure_counts_its_context_already() {
    let (category, _, _, _) = root(&format!("{OWN_FIGURE}\n"));
    assert_eq!(category, Category::CudaOom);
    // A variant of the same message on a 2 GB laptop card a desktop
    // shares (the figures changed, assembled, not copied): 2.00 GiB total,
    // 1.20 GiB this process's, 50 MiB free leaves 0.75 GiB to other
    // processes. The figure already holds this process's CUDA context, so
    // nothing is discounted for it: over a quarter of a small card is
    // another process's share (the desktop's, Xorg and the shell).
    let shared = OWN_FIGURE
        .replace(
            "9.77 GiB of which 185.50 MiB",
            "2.00 GiB of which 50.00 MiB",
        )
        .replace("this process has 9.43 GiB", "this process has 1.20 GiB")
        .replace("9.04 GiB is allocated", "1.02 GiB is allocated");
    let (category, _, gpus, kills) = root(&format!("{shared}\n"));
    assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
    assert_eq!(gpus, vec![0]);
    assert_eq!(kills, 0);
}

/// OpenBMB/MiniCPM-V#640 (batch M's 945): vLLM started with
/// `--gpu_memory_utilization 1` on an A10; the next allocation fails in
/// the server's own process (8007 is the server, inside its container).
const WHOLE_GPU: &str = "\
vllm serve /docker_storage/models/MiniCPM-V-2_6 --dtype auto --max-model-len 2048 --gpu_memory_utilization 1 --trust-remote-code
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 22.18 GiB of which 3.47 GiB is free. Process 8007 has 18.71 GiB memory in use. Of the allocated memory 18.29 GiB is allocated by PyTorch, and 142.04 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
";

#[test]
fn a_memory_fraction_of_the_whole_gpu_is_the_cause_of_the_servers_own_oom() {
    let a = crate::testing::analyze_paste(WHOLE_GPU);
    let report = a.report();
    let f = report.root_cause().expect("a root cause");
    assert_eq!(f.category, Category::MemFractionMisconfigured);
    assert!(
        f.headline.contains("--gpu_memory_utilization 1"),
        "{}",
        f.headline
    );
    assert!(f.evidence.iter().any(|e| e.span.line == 1), "{f:?}");
    // The dash spelling with `=`, and SGLang's fraction (variants of the
    // launch line).
    for launch in [
        "vllm serve /docker_storage/models/MiniCPM-V-2_6 --gpu-memory-utilization=0.98",
        "python3 -m sglang.launch_server --model-path /models/m --mem-fraction-static 0.95",
    ] {
        let text = WHOLE_GPU.replacen(WHOLE_GPU.lines().next().unwrap_or_default(), launch, 1);
        assert_eq!(
            root(&text).0,
            Category::MemFractionMisconfigured,
            "{launch}"
        );
    }
    // vLLM's default share leaves headroom: the OOM stays the server's own.
    let default = WHOLE_GPU.replace("--gpu_memory_utilization 1", "--gpu_memory_utilization 0.9");
    assert_eq!(root(&default).0, Category::CudaOom);
    // A flag of a program that is not a server says nothing.
    let other = WHOLE_GPU.replace("vllm serve", "python3 bench.py");
    assert_eq!(root(&other).0, Category::CudaOom);
}

/// A training script's OOM on a card where another user's vLLM engine
/// holds most of the memory (a reduction of batch Y's 1745, an 8×H200 box
/// shared by several accounts): the engine is a large titled process on
/// the writer's own GPU, so not a rank of the script's job; fuser shows its
/// launcher `vllm` alive beside it, so it is a running server (another
/// process's memory), not a leftover. Without the launcher's rows, a vLLM
/// engine the inputs show nothing more of is the leftover.
#[test]
fn a_colleagues_running_vllm_engine_on_the_writers_gpu_holds_it() {
    let paste = "\
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 112.00 MiB. GPU 0 has a total capacity of 139.81 GiB of which 24.12 MiB is free. Process 1117159 has 127.15 GiB memory in use. Including non-PyTorch memory, this process has 12.62 GiB memory in use. Of the allocated memory 12.10 GiB is allocated by PyTorch, and 7.55 MiB is reserved by PyTorch but unallocated.
$ sudo fuser -v /dev/nvidia*
                     USER        PID ACCESS COMMAND
/dev/nvidia0:        aiuser1   1116621 F.... vllm
                     aiuser1   1117159 F...m VLLM::EngineCor
";
    let (category, pids, gpus, kills) = root(paste);
    assert_eq!(category, Category::GpuMemoryHeldByOtherProcess, "{pids:?}");
    assert!(pids.contains(&1117159) && gpus == [0], "{pids:?} {gpus:?}");
    // Another user's running server: nothing to end.
    assert_eq!(kills, 0);
    // The engine alone (its launcher's row gone): a leftover engine.
    let alone: String = paste
        .lines()
        .filter(|l| !l.contains(" vllm"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(root(&alone).0, Category::StaleServingInstance);
}

/// PyTorch's message pasted split at its sentences, one a line (a reduction
/// of batch AA's 1940, cited as such: skyrl's nightly on an L4, a vLLM
/// engine starting beside an FSDP trainer): the lines under the exception
/// are the same message, so the listed process is read. Its 796.00 MiB
/// covers the 12 MiB the allocation lacked, and vLLM sizes itself as a
/// share of the whole card: the other process is the cause, named with
/// its figure as printed, and not signalled (nothing says whose it is).
#[test]
fn a_message_split_at_its_sentences_is_one_and_a_small_holder_covering_the_shortfall_of_a_budgeted_server_is_blamed()
 {
    let split = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n\n\
                 torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 594.00 MiB.\n\
                 GPU 0 has a total capacity of 22.03 GiB of which 582.00 MiB is free.\n\
                 Process 29529 has 796.00 MiB memory in use. ... this process has 20.67 GiB in use.\n";
    let (category, pids, gpus, kills) = root(split);
    assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
    assert!(pids.contains(&29529), "{pids:?}");
    assert_eq!(gpus, [0]);
    assert_eq!(kills, 0);
    let a = crate::testing::analyze_paste(split);
    let report = a.report();
    let f = report.root_cause().expect("a root cause");
    assert!(f.title.contains("796.00 MiB"), "{}", f.title);
    assert_eq!(f.evidence.len(), 3, "{:?}", f.evidence);
    // The same figures with no server that budgets the card (a training
    // script): 796 MiB is below a large share, the process's own.
    let script = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 594.00 MiB.\n\
                  GPU 0 has a total capacity of 22.03 GiB of which 582.00 MiB is free.\n\
                  Process 29529 has 796.00 MiB memory in use. Including non-PyTorch memory, this process has 20.67 GiB memory in use.\n";
    assert_eq!(root(script).0, Category::CudaOom);
}
