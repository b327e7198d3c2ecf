//! The evidence matrix: for every category a user expects named, every kind
//! of evidence that can establish it, and what reads it (a rule, or a
//! catalog row by itself) with a real sample that shows it works, or a
//! gap. `docs/evidence.md` is generated from this table and
//! `tests/it/evidence.rs` analyses every sample and checks its reader
//! names the category: a cell is only as true as its test.

use super::Category;

/// What reads a kind of evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// A built-in rule, by id.
    Rule(&'static str),
    /// A catalog row, by id, whose line is a finding by itself
    /// (`known-message`) unless a rule says more.
    Row(&'static str),
    /// Nothing yet: why, and what it would take.
    Gap(&'static str),
}

/// One kind of evidence for one category.
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    pub category: Category,
    /// The evidence, for a person: what the input shows.
    pub evidence: &'static str,
    pub reader: Reader,
    /// A real input that shows it (a `fixtures/real/` case folder, or a
    /// file of real lines), relative to the repository. None for a gap, and
    /// for a catalog row: its own samples (`catalogs/*.toml`) are the cell's.
    pub sample: Option<&'static str>,
    /// For a reader with no real sample: where one was looked for.
    pub searched: Option<&'static str>,
}

const fn cell(
    category: Category,
    evidence: &'static str,
    reader: Reader,
    sample: Option<&'static str>,
) -> Cell {
    Cell {
        category,
        evidence,
        reader,
        sample,
        searched: None,
    }
}

/// A cell whose reader has no real sample yet, with where one was looked
/// for.
const fn unsampled(
    category: Category,
    evidence: &'static str,
    reader: Reader,
    searched: &'static str,
) -> Cell {
    Cell {
        category,
        evidence,
        reader,
        sample: None,
        searched: Some(searched),
    }
}

use Category::*;
use Reader::{Gap, Row, Rule};

/// The matrix, by category in the order of the report schema.
pub const MATRIX: &[Cell] = &[
    // A GPU held by another process.
    cell(
        GpuMemoryHeldByOtherProcess,
        "GPUs of one nvidia-smi table nearly full with no process listed while another GPU of the same table is free, and nothing of the user's running (`5872MiB /  6143MiB` beside `85MiB /  6143MiB`): other jobs' processes hold them",
        Rule("gpu-memory-unaccounted"),
        Some("fixtures/rules/gpu-memory-unaccounted/pos-two-titans-taken-one-free"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "Ray Tune's `wait_for_gpu` at a trial's start polling again and again with the GPU's memory use far above its target (`Waiting for GPU util to reach 0.01. Util: 0.781`), or giving up (`GPU memory was not freed.`): the previous trial's workers still hold the GPU",
        Rule("gpu-memory-taken-before-load"),
        Some(
            "fixtures/rules/gpu-memory-taken-before-load/pos-ray-32725-wait-for-gpu-two-polls-on-one-line.log",
        ),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "TensorFlow's start-up device record pasted from its `name:` line on, below `Found device N` (`major: 6 minor: 1 memoryClockRate (GHz) 1.683`, `pciBusID`, `Total memory: 7.91GiB`, `Free memory: 148.69MiB`): the GPU named by its bus id",
        Rule("gpu-memory-taken-before-load"),
        Some(
            "fixtures/rules/gpu-memory-taken-before-load/pos-tf-3864-record-pasted-from-its-name-line.log",
        ),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "a `dcgmi diag` test that could not create its context on a GPU (`Unable to create CUDA context: 'CUDA-capable device(s) is/are busy or unavailable'` in the warning under `Fail - GPU: 0`): the GPU held by another process, not a fault",
        Rule("dcgm-diag-failed"),
        Some("fixtures/formats/lines/dcgmi-diag-3.3.1-fail.txt"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "an nvidia-smi process row of a PID that is not the failing server's, with the memory that explains SGLang's imbalance",
        Rule("sglang-unbalanced-memory"),
        Some("fixtures/real/000-seed-ct200-ghost-one-rank-tp0"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "a foreign process's share named by PyTorch's out-of-memory message and the process table",
        Rule("torch-cuda-oom"),
        Some("fixtures/real/039-vllm-oom-gpu-shared-with-15g-foreign-process"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "PyTorch's own figures with no process listed for the memory: the GPU's total minus what this process holds (`this process has 2.46 GiB memory in use`, or PyTorch's `reserved in total` in the old message) minus `free` leaves a large share held elsewhere, the arithmetic in the finding",
        Rule("torch-cuda-oom"),
        Some("fixtures/real/669-dynamo-gpu0-occupied-by-another-app-torch-oom-arithmetic"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "vLLM 0.6.4–0.6.5's memory profile (`Memory profiling results: total_gpu_memory=79.15GiB initial_memory_usage=68.01GiB`) before `No available memory for the cache blocks`: what was in use when profiling began well above the weights figure plus a CUDA context, or over half of the GPU with no weights figure (a second server's memory charged to this one's budget)",
        Rule("vllm-no-kv-cache-memory"),
        Some("fixtures/real/679-vllm-second-instance-counts-first-instance-memory"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "free memory at start-up below what the server asks for (vLLM's free-memory check)",
        Rule("vllm-insufficient-free-memory"),
        Some("fixtures/rules/vllm-insufficient-free-memory/pos-0.10-worker-tp1-foreign-unit"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "CUDA error 46, all devices busy or unavailable, in exclusive-process mode",
        Row("cuda.devices-unavailable"),
        None,
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "processes nvidia-smi cannot name (`Unknown Error`) that still hold memory",
        Rule("gpu-held-by-unresolved-process"),
        Some("fixtures/real/092-nvidia-smi-zombie-processes-unknown-error-names"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "gpustat's `(null)` owner: memory in use with no process gpustat could resolve (killed but not released, or another PID namespace): advice, no PID to kill",
        Rule("gpu-held-by-unresolved-process"),
        Some("fixtures/real/668-visedit-gpustat-null-owner-held-process-not-listed"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "a second instance of the same server on the same device: two writers of one name with different PIDs, the later one's start-up KV-cache budget a fraction of the earlier one's (vLLM Ascend's `Available memory: 0`, vLLM's `Available KV cache memory`)",
        Rule("second-server-instance"),
        Some("fixtures/real/680-vllm-ascend-second-instance-available-zero-first-holds"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "vLLM's profiling assertion that another process changed its memory while vLLM measured (`Error in memory profiling. Initial free memory …`), whole or wrapped over lines",
        Rule("vllm-insufficient-free-memory"),
        Some("fixtures/real/693-vllm-profiling-assertion-cotenant-released-memory"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "the driver asked to remove a GPU that processes still hold open (NVRM's `non-zero usage count`): advice, the line names no process",
        Row("kernel.nvrm-remove-device-in-use"),
        None,
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "an unloaded runner's VRAM that did not come back (Ollama's `gpu VRAM usage didn't recover`, with the runner's PID and VRAM) and the next load on the CPU",
        Rule("ollama-vram-not-recovered"),
        Some("fixtures/rules/ollama-vram-not-recovered/pos-ollama-11812-runner-41-then-cpu.log"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "memory used with no process listed (another container or PID namespace, a process still being torn down), as a test harness's GPU-idle gate reports it: advice, no PID to kill",
        Row("stacks-sglang.ci-gpu-not-idle-no-process"),
        None,
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "processes with a GPU's device node open (`fuser -v /dev/nvidia*`: `/dev/nvidia0:  ubuntu  4411 F...m python`) beside a raw CUDA out-of-memory error, neither the failing process nor listed by nvidia-smi with their memory: holder candidates, advice (how much they hold is unknown)",
        Rule("cuda-oom-at-context-creation"),
        Some(
            "fixtures/real-incoming/batch-t/1222-mxnet-gluonnlp-eval-oom-dangling-notebook-kernel-seen-only-by-device-node-holders",
        ),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "a serving launcher's preflight gate finding less free memory than the config's gpu_memory_utilization × total before the server starts (club-3090's `[preflight] ERROR: GPU 0 has 7.1 GiB free, but this config needs ~21.7 GiB/card`; its report's `idle VRAM: … something is using this GPU`), as under WSL2 where nvidia-smi lists no Windows-side holder",
        Row("stacks-vllm.club3090-preflight-gpu-fit"),
        None,
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "a server's own free-memory figures at start-up (ollama's `gpu memory … available`) below the GPU's total with nothing loaded",
        Rule("gpu-memory-taken-before-load"),
        Some("fixtures/rules/gpu-memory-taken-before-load/pos-ollama-11577-held-at-start.log"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "TensorFlow's own figures at start-up (`Found device 0 with properties:` … `Total memory:` / `Free memory:`, or `totalMemory: … freeMemory: …`) below the GPU's total with nothing loaded",
        Rule("gpu-memory-taken-before-load"),
        Some(
            "fixtures/rules/gpu-memory-taken-before-load/pos-tf-8170-free-190mib-of-7.92gib-at-start.log",
        ),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "llama.cpp's own free figure at load (`using device CUDA0 (…) - N MiB free`) below the device's total (its memory breakdown, or nvidia-smi on a one-GPU host)",
        Rule("gpu-memory-taken-before-load"),
        Some(
            "fixtures/rules/gpu-memory-taken-before-load/pos-llamacpp-19437-8720-of-11165-mib-free-at-load.log",
        ),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "SGLang's own free figure at start-up (`Load weight begin. avail mem=`) below the GPU's total with nothing loaded",
        Gap(
            "the line has no total (nvidia-smi's would be needed) and no real sample shows SGLang starting on a GPU already taken; its figures are read for the ranks' imbalance only. Searched again 2026-12-05 (issues and pages corpora: `Load weight begin. avail mem` with a GPU already in use, a second server, nvidia-smi, `Not enough memory`; code search for the line): every public log found starts on a free card (sglang#3419: 23.16 GB of a 4090; sglang#11716: 137.29 GB per H200 rank), shows ranks out of balance (sglang#4233, read by `sglang-unbalanced-memory`), or gives no total beside the figure. Searched again 2026-12-06 (issues and pages: `Load weight begin. avail mem` with two servers on one GPU, a GPU already in use, a low avail mem): sglang#3265 discusses several servers on one GPU with no log; sglang#4895 shows only `Load weight end` (3.64 GB left after 18.82 GB of its own weights on a 4090); AffineFoundation/affine-cortex#493 has two `sglang.launch_server` on one GPU but only PyTorch's OOM (read by `torch-cuda-oom`)",
        ),
        None,
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "nvidia-smi's used memory that its process rows explain only a fraction of (used minus the rows, per GPU: a process in another container or PID namespace, or rows cut from the paste), an error when the card is full",
        Rule("gpu-memory-unaccounted"),
        Some(
            "fixtures/rules/gpu-memory-unaccounted/pos-full-card-only-xorg-listed-gpu-rest-engine-10.txt",
        ),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "Kaldi's allocator's account (`Memory usage: A/H bytes currently allocated/total-held; … device memory info: … used:NM`): the device's memory in use more than 2 GiB above what the program holds and its CUDA context (the `used` of `The active GPU is [N]` when it chose the GPU) is another job's on the same GPU",
        Rule("gpu-memory-taken-before-load"),
        Some(
            "fixtures/rules/gpu-memory-taken-before-load/pos-kaldi-installation-guide-610m-held-11160m-used.log",
        ),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "the NVIDIA container hook's driver service hung and was killed (`terminating driver service (forced)`, `driver error: timed out`): GPUs in exclusive-process mode another process holds, at a confidence that leaves a wedged driver open",
        Row("stacks-containers.driver-service-hung"),
        Some("fixtures/real/637-nvidia-docker-nvc-driver-service-forced-exclusive-mode-held"),
    ),
    cell(
        GpuMemoryHeldByOtherProcess,
        "a pod left Pending because no node has a free `nvidia.com/gpu` (Kubernetes' scheduler: `0/6 nodes are available: 6 Insufficient nvidia.com/gpu`): the GPUs allocated to other pods, a serving workload of an earlier run that was never deleted, at a confidence that leaves GPUs not advertised open",
        Rule("gpu-pod-unschedulable"),
        Some("fixtures/real/666-kubeflow-tfserving-pending-insufficient-gpu-leftover-workload"),
    ),
    // A stale serving instance.
    cell(
        StaleServingInstance,
        "worker processes of a model server that outlived it (orphans, PPID 1)",
        Rule("stale-serving-process"),
        Some("fixtures/real/004-sglang-orphan-dp-schedulers-slurm"),
    ),
    cell(
        StaleServingInstance,
        "systemd alone: `Found left-over process N (COMM) in control group while starting unit`, the unit's previous run still running when it starts again (an error for a serving unit, a warning for a unit nothing ties to GPU serving)",
        Rule("stale-serving-process"),
        Some("fixtures/real/888-archlinuxcn-parsoid-restart-node-survivor-killmode-process"),
    ),
    cell(
        StaleServingInstance,
        "a unit that did not stop in time and was SIGKILLed: what the old instance held (its port, its GPU memory) outlives the stop",
        Rule("systemd-stop-timeout"),
        Some("fixtures/real/443-snap-llama-server-final-sigterm-timeout-sigkill"),
    ),
    cell(
        StaleServingInstance,
        "orphaned workers (PPID 1) whose server's exit the inputs log (uvicorn's `Finished server process [N]`), or that run from a serving product's own environment (`…/venvs/gpustack/bin/python`)",
        Rule("stale-serving-process"),
        Some("fixtures/real/664-vllm-omni-stagediffusion-exit-9-spawn-worker-ppid1-left"),
    ),
    cell(
        StaleServingInstance,
        "processes of a stopped run that a later process table still lists after their siblings left (a rank that kept its memory after Ctrl+C)",
        Rule("stale-serving-process"),
        Some("fixtures/real/661-yolox-ctrl-c-leftover-rank-on-gpu1"),
    ),
    cell(
        StaleServingInstance,
        "GPU memory in use with no process listed and nothing running: a note alone (a live job's preallocation looks the same), an error when the run's end is logged before the table",
        Rule("gpu-memory-unaccounted"),
        Some("fixtures/rules/gpu-memory-unaccounted/pos-gpu7-held-idle-pytorch-37726.txt"),
    ),
    cell(
        StaleServingInstance,
        "a serving process on a port that no instance of its control plane's instance table has (GPUStack's table beside `ps` with command lines): an instance it lost track of; its `ps` start time (`lstart`) is compared with the inputs' own times when they have some",
        Rule("serving-process-untracked"),
        Some("fixtures/real/504-gpustack-ps-eo-stale-vllm-serve-from-june-network-throttle"),
    ),
    cell(
        StaleServingInstance,
        "a server or job process older than the incident: `ps` rows whose start is a date (`May11`), days elapsed (`2-03:04:05`) or an `lstart` a day before the inputs' latest time, of a user a batch scheduler lists no job for (`qstat -u USER` printing nothing, `squeue -u USER` only its header): processes that outlived their job (a start time alone proves nothing: servers run for months)",
        Rule("process-outlived-its-job"),
        Some("fixtures/real/870-cbio-torque-yank-mpi-ranks-since-may11-user-has-no-jobs"),
    ),
    cell(
        StaleServingInstance,
        "copies of one serving command on one GPU, each holding a model's memory (nvtop, a process table with command lines)",
        Rule("stale-serving-process"),
        Some("fixtures/real/454-nvtop-detached-ollama-runners-left-by-benchmark"),
    ),
    cell(
        StaleServingInstance,
        "copies of one server's command line (typed by `serve`, `server`, `--port`, a web or model server's name; paths, ports and valueless options aside) in a `ps` listing, none another's child, started at different times: with PPIDs all PPID 1 on one endpoint, or each on a port of its own with a test harness's per-run directories or ports climbing with the start times; the newest is the live one, the older ones left over",
        Rule("stale-serving-process"),
        Some(
            "fixtures/real-incoming/batch-z/1797-termio-macos-terminal-daemon-seven-copies-reparented-to-launchd-one-holds-connections-lstart-etime",
        ),
    ),
    cell(
        StaleServingInstance,
        "a second process of an active unit's program under PID 1 and outside every control group shown (`systemctl status` with its `CGroup:` tree beside a `ps -ef`): started beside the unit, which does not track it",
        Rule("stale-serving-process"),
        Some(
            "fixtures/real-incoming/batch-z/1810-cronie-sles-second-scheduler-daemon-started-by-hand-beside-unit-managed-one-reparented-to-init",
        ),
    ),
    cell(
        StaleServingInstance,
        "a running process's executable in a versioned install directory (Homebrew's `Cellar/NAME/VERSION/`, an `lsof` `txt` row or a `ps` command line) older than the release the program's own version command typed in the paste answers: an instance the upgrade's restart missed",
        Rule("stale-serving-process"),
        Some(
            "fixtures/real-incoming/batch-z/1794-orch-agent-daemon-homebrew-upgrade-old-cellar-binary-keeps-running-version-check-blames-dead-pid",
        ),
    ),
    cell(
        StaleServingInstance,
        "two runners of one model in a server that runs one runner per loaded model (Ollama's `ollama runner --model <blob>`), in a process listing with command lines: the older is a load the server lost track of",
        Rule("stale-serving-process"),
        Some("fixtures/real/640-ollama-070-three-runners-one-active-model-leak"),
    ),
    cell(
        StaleServingInstance,
        "several per-instance processes of one serving product alive at once (GPUStack's `gpustack_model_instance_<id>`, one per instance it serves) with no backend server beside them in the listing: instances it stopped without ending their process, at a low confidence (a listing may be cut)",
        Rule("stale-serving-process"),
        Some("fixtures/real/698-gpustack-repro-six-leaked-instance-processes"),
    ),
    cell(
        StaleServingInstance,
        "a duplicate of the running server's port: a failed bind beside a socket listing (`lsof -i`, `ss -ltnp`, `netstat -tlnp`) whose holder is the same server (its own bind error names it, or the port is the holder's default: Ollama's 11434)",
        Rule("address-already-in-use"),
        Some("fixtures/real/662-ollama-serve-bind-in-use-lsof-shows-ollama-service"),
    ),
    cell(
        StaleServingInstance,
        "a failed bind on the server's port, with no holder named, right after the server's own stop or restart in the same log (gradio's `Closing server running on port: N`, a web UI's `Restarting UI...`): the relaunch collided with its own earlier server",
        Rule("address-already-in-use"),
        Some("fixtures/real/826-sd-webui-restart-ui-old-server-keeps-its-port"),
    ),
    cell(
        StaleServingInstance,
        "a failed bind on a server's default port beside its app refusing to quit (osascript's `Ollama got an error: User canceled. (-128)`): the app's own server still runs there",
        Rule("address-already-in-use"),
        Some("fixtures/real/807-ollama-macos-app-server-survives-quit-serve-cannot-bind"),
    ),
    cell(
        StaleServingInstance,
        "a failed bind on a port the same log shows the server serving before (uvicorn's `Uvicorn running on http://0.0.0.0:8000`, llama-server's `server is listening on`, Python's `Serving HTTP on 0.0.0.0 port 8000`), a traceback cut inside the bind frame included: its earlier instance still holds it",
        Rule("address-already-in-use"),
        Some(
            "fixtures/rules/address-already-in-use/pos-simplehttpserver-second-start-traceback-cut-in-bind/console.txt",
        ),
    ),
    cell(
        StaleServingInstance,
        "an engine process under its own title (`sgl_diffusion::scheduler_U0`, `VLLM::EngineCore`, `ollama runner`, `text-generation-server`) in a `ps` listing or nvidia-smi's rows, with a teardown of its server in the inputs (`pkill`, `killall`, `ray stop`) that its name escapes, and no front end of its stack listed beside it",
        Rule("stale-serving-process"),
        Some("fixtures/real/742-sgl-diffusion-scheduler-outlives-ray-stop"),
    ),
    cell(
        StaleServingInstance,
        "a control plane's worker that lost its watch on the server and re-listed its instances (GPUStack's `Error watching model instances: watch timeout`, then `Model instance NAME is already running. Skipping start.`): an instance deleted in the gap is never stopped on the worker",
        Rule("control-plane-watch-gap"),
        Some("fixtures/real/649-gpustack-221-watch-timeout-instances-already-running-gpus-full"),
    ),
    cell(
        StaleServingInstance,
        "a test harness's list of processes still alive after it killed the server",
        Row("stacks-vllm.harness-residual-processes"),
        None,
    ),
    cell(
        StaleServingInstance,
        "a test harness's GPU-idle gate naming the process that still holds the GPU (the previous test's server)",
        Row("stacks-sglang.ci-gpu-idle-wait-holder"),
        None,
    ),
    cell(
        StaleServingInstance,
        "Ray's `Failed to connect to the default Ray cluster address at ADDR. This is most likely due to a previous Ray instance that has since crashed.`: ray.init() follows the address a dead head left in /tmp/ray/ray_current_cluster",
        Row("stacks-ray.stale-default-address"),
        None,
    ),
    cell(
        StaleServingInstance,
        "a job the shell stopped with Ctrl-Z (`[1]+  Stopped  CMD`, zsh's `suspended`) and the same command typed again, failing on its port (a failed bind, a traceback frame that binds or listens, even cut before the exception) or on GPU memory: the suspended process still holds them",
        Rule("stale-serving-process"),
        Some("fixtures/rules/stale-serving-process/pos-mesa-ctrl-z-stopped-server-run-again"),
    ),
    cell(
        StaleServingInstance,
        "a pod watch (`kubectl get pods -w`) where a pod of the old revision stays `Terminating` while pods of a newer revision are created and deleted within seconds: the rollout's controller counts the terminating pod as a replica",
        Rule("stale-serving-process"),
        Some(
            "fixtures/rules/stale-serving-process/pos-kubeai-old-pod-terminating-new-pods-deleted",
        ),
    ),
    cell(
        StaleServingInstance,
        "a failed bind (any wording, the port named or not) followed in the same log by a request the server answered (an access line, `127.0.0.1 - - [...] \"POST /json/status HTTP/1.1\" 200 -`): the program's earlier server kept the port and still serves",
        Rule("address-already-in-use"),
        Some(
            "fixtures/rules/address-already-in-use/pos-pyload-in-place-restart-old-server-answers",
        ),
    ),
    // Host out of memory.
    cell(
        HostOomKiller,
        "the kernel's OOM killer lines",
        Rule("kernel-oom-killer"),
        Some("fixtures/real/088-dmesg-iso-oom-killer-kills-process"),
    ),
    cell(
        HostOomKiller,
        "systemd's `Failed with result 'oom-kill'`",
        Row("systemd.result-oom-kill"),
        None,
    ),
    cell(
        HostOomKiller,
        "Ray's memory monitor killing workers",
        Row("stacks-ray.memory-monitor-kill"),
        None,
    ),
    cell(
        HostOomKiller,
        "Kubernetes `OOMKilled`",
        Row("stacks-k8s.oomkilled"),
        None,
    ),
    cell(
        HostOomKiller,
        "the kubelet's (cAdvisor's) `Created an OOM event in container`, where the pod shows only exit code 137 with reason Error",
        Row("stacks-k8s.cadvisor-oom-event"),
        None,
    ),
    cell(
        HostOomKiller,
        "a bare `Killed` of a server with its memory figures (vLLM's `# CPU blocks`, pinned host memory), no error before it and no kernel line: at a lower confidence, naming `journalctl -k` as what settles it",
        Rule("server-killed-no-kernel-line"),
        Some("fixtures/rules/server-killed-no-kernel-line/pos-vllm-killed-after-cpu-blocks"),
    ),
    cell(
        HostOomKiller,
        "a container's exit code 137 (SIGKILL) with reason `Error` or none, and no failed probe or OOM line naming the killer (kubectl, KServe's `exitCode: 137`, Flyte's `terminated with exit code (137)`): its memory limit, at a lower confidence",
        Rule("container-killed-137"),
        Some("fixtures/rules/container-killed-137/pos-flyte-task-pod-200mi"),
    ),
    cell(
        HostOomKiller,
        "Ray's raylet losing a worker without a word (`Worker unexpectedly exits with a connection error code 2. End of file.`, the OOM killer first of Ray's own candidates), at a lower confidence",
        Row("stacks-ray.worker-connection-eof"),
        None,
    ),
    cell(
        HostOomKiller,
        "Slurm's `Detected N oom-kill event(s) in StepId=…` / `oom_kill event in StepId=…. Some of the step tasks have been OOM Killed.` (the job step's memory cgroup)",
        Row("stacks-slurm.step-oom-kill-events"),
        None,
    ),
    cell(
        HostOomKiller,
        "srun's `error: NODE: task N: Out Of Memory`",
        Row("stacks-slurm.srun-task-out-of-memory"),
        None,
    ),
    cell(
        HostOomKiller,
        "a batch script's `line N: PID Killed CMD` with Slurm's oom-kill event in the same output: the OOM kill inside the job's memory limit, with the victim's PID",
        Rule("server-killed-no-kernel-line"),
        Some(
            "fixtures/rules/server-killed-no-kernel-line/pos-slurm-batch-killed-step-oom-kill-event",
        ),
    ),
    cell(
        HostOomKiller,
        "DeepSpeed's launcher reporting its worker's code -9 (`[…] exits with return code = -9`, after `Killing subprocess N`), or, where the paste ends before the code, stopping its worker with no error and no interrupt before it while the model loads (at a lower confidence otherwise)",
        Rule("server-killed-no-kernel-line"),
        Some(
            "fixtures/rules/server-killed-no-kernel-line/pos-deepspeed-launcher-return-code-minus-nine",
        ),
    ),
    cell(
        HostOomKiller,
        "earlyoom's `sending SIGTERM to process N … VmRSS N MiB` (a userspace OOM killer naming its victim and its RSS)",
        Row("oom-daemons.earlyoom-kill"),
        None,
    ),
    cell(
        HostOomKiller,
        "systemd-oomd's own `Killed /….scope due to memory pressure for CGROUP being N% > N% for > Ns with reclaim activity` (v254+: `Marked … for killing due to …`): the watched cgroup, the pressure and the limit in the finding; PID 1's or the user manager's line read with it, and neither speaker's PID taken as a victim (its swap trigger, `due to memory used (N) / total (N) and swap used (N) / total (N) being more than N%`, is row `systemd.oomd-killed-for-swap`: no public capture of it whole yet, systemd/systemd#24185's is cut in the corpus)",
        Row("systemd.oomd-killed-for-pressure"),
        None,
    ),
    cell(
        HostOomKiller,
        "PID 1's (or a user manager's) `UNIT: systemd-oomd killed N process(es) in this unit` without oomd's own line",
        Row("systemd.oomd-killed"),
        None,
    ),
    cell(
        HostOomKiller,
        "Ray's memory monitor seen only through its tail (`ray job submit` keeps the last logs): its advice `Refer to the documentation on how to address the out of memory issue: … RAY_memory_usage_threshold …`, the top users' rows without their header; at a lower confidence, and read with the kill's own line where that is in the same input",
        Row("stacks-ray.memory-monitor-advice"),
        None,
    ),
    cell(
        HostOomKiller,
        "Ray's `Task was killed due to the node running low on memory.` (the OutOfMemoryError a task's or a Serve replica's caller gets, a worker's exit detail), read with the node's figures under it",
        Row("stacks-ray.memory-monitor-killed-header"),
        None,
    ),
    cell(
        HostOomKiller,
        "a `Killed` that is the whole paste (or a job report of it whose command is a launcher's variables or a server's: `line 42:  8 Killed  python3 ./ComfyUI/main.py --listen --port 8188`): SIGKILL with nothing else to read, at the rule's lowest confidence, asking for `journalctl -k` and the container's memory limit",
        Rule("server-killed-no-kernel-line"),
        Some("fixtures/rules/server-killed-no-kernel-line/pos-textgen-lone-killed"),
    ),
    cell(
        HostOomKiller,
        "zsh's job report `[N]    PID killed     CMD` (its `[N]` glued to the weights' progress bar on the line before), while a model's weights load: at a lower confidence",
        Rule("server-killed-no-kernel-line"),
        Some("fixtures/rules/server-killed-no-kernel-line/pos-zsh-job-after-shards-bar"),
    ),
    cell(
        HostOomKiller,
        "a bare `Killed` after the process's own large-allocation warning (TensorFlow's `Allocation of N exceeds 10% of (free) system memory.`): at the rule's lowest confidence, advising the container's or VM's memory",
        Rule("server-killed-no-kernel-line"),
        Some("fixtures/rules/server-killed-no-kernel-line/pos-tf-allocation-warning-then-killed"),
    ),
    cell(
        HostOomKiller,
        "a shell's report of a SIGKILL (bash's `line N: PID Killed CMD`, fish's `Job 1, 'CMD' terminated by signal SIGKILL (Forced quit)`) right after a diffusion UI's model load (ComfyUI's `model_type FLOW`, `Requested to load`, AUTOMATIC1111's `Loading weights [..] from`, diffusers' `Loading pipeline components`) or a loop's bar still counting (a sampler's `2it [00:25, 12.97s/it]`), with no error of its own: a kill while it loaded or worked, at a lower confidence, advising `journalctl -k` and `docker inspect … OOMKilled`",
        Rule("server-killed-no-kernel-line"),
        Some("fixtures/rules/server-killed-no-kernel-line/pos-comfyui-killed-after-model-type"),
    ),
    cell(
        HostOomKiller,
        "the operating system refusing a process host memory, with no kill: PyTorch's CPU allocator (`DefaultCPUAllocator: not enough memory: you tried to allocate N bytes`, Linux's `can't allocate memory … Error code 12`, TH's `$ Torch: not enough memory`) or Windows' commit limit (`The paging file is too small for this operation to complete`, `[WinError 1455]`, `(os error 1455)` in any language), with the load its traceback was in",
        Rule("host-memory-allocation-refused"),
        Some(
            "fixtures/rules/host-memory-allocation-refused/pos-comfyui-7550-safe-open-os-error-1455.log",
        ),
    ),
    // Unit failures.
    cell(
        UnitCrashLoop,
        "a Slurm daemon's `fatal:` line (`slurmd[57977]: fatal: gres.conf duplicate records for gpu`): Slurm's fatal() exits with status 1, so the daemon and its unit are gone, most often at start-up on its configuration",
        Row("stacks-slurm.daemon-fatal"),
        None,
    ),
    cell(
        UnitCrashLoop,
        "systemd's `Failed at step EXEC spawning PATH: ERRNO` (with or without the unit's prefix) or `Failed to locate executable PATH: ERRNO`, joined to the unit's `203/EXEC` exit whatever the order of the lines (a `journalctl --reverse` paste), naming the path and what the errno means (a wrong ExecStart= path; a file mode or a noexec mount)",
        Rule("unit-exit-nonzero"),
        Some("fixtures/rules/unit-exit-nonzero/pos-ollama-reverse-journal-exec"),
    ),
    cell(
        UnitCrashLoop,
        "a unit restarted again and again by systemd",
        Rule("systemd-crash-loop"),
        Some("fixtures/real/016-ollama-unit-restart-loop-status-127"),
    ),
    unsampled(
        UnitCrashLoop,
        "NVIDIA Fabric Manager's start-up error repeated (`fabric manager config file item: ITEM has an invalid value`): restarted into the same configuration error",
        Rule("fabric-manager-start-failure"),
        "siderolabs/extensions#511 quotes the line once and says the log repeats it; fixtures/rules/fabric-manager-start-failure/pos-talos-config-item-repeated.log assembles the repeats from that real line",
    ),
    cell(
        ServerException,
        "NVIDIA Fabric Manager stopping at start-up on its configuration (`fabric manager config file item: FABRIC_NODE_CONFIG_FILE has an invalid value`), once",
        Rule("fabric-manager-start-failure"),
        Some("fixtures/rules/fabric-manager-start-failure/pos-talos-config-item-once.log"),
    ),
    cell(
        UnitCrashLoop,
        "systemd's own watchdog ending every run exactly its limit after the start (`Started …`, then `Watchdog timeout (limit 3min)!` three minutes later, on two starts or more): WatchdogSec= set for a program that never sends a keep-alive",
        Rule("systemd-crash-loop"),
        Some("fixtures/rules/systemd-crash-loop/pos-227-watchdog-at-limit-every-start"),
    ),
    cell(
        UnitCrashLoop,
        "systemd's start limit hit",
        Rule("systemd-start-limit-hit"),
        Some("fixtures/real/107-syslog-iso-nvidia-modprobe-fails-persistenced-start-limit"),
    ),
    cell(
        UnitCrashLoop,
        "a start limit reached by a main process that exits 0 (`Main PID: N (code=exited, status=0/SUCCESS)`): the unit's Type=/Restart= do not fit its program (a script that returns, a daemon that forks)",
        Rule("systemd-start-limit-hit"),
        Some("fixtures/rules/systemd-start-limit-hit/pos-python-script-exits-0"),
    ),
    cell(
        UnitCrashLoop,
        "systemd's lines cut at the terminal's width (`Start request repeated `, `Failed with result 'exi`), read by the start of the one message they begin, at a lower confidence",
        Rule("systemd-start-limit-hit"),
        Some("fixtures/rules/systemd-start-limit-hit/pos-cut-at-terminal-width-zh-dates"),
    ),
    cell(
        UnitCrashLoop,
        "a unit systemd reports failed once (`Failed to start …`, `Failed with result 'exit-code'`), not a loop: its first error line beside its last words (`Error opening /sys/…: 2`: a path not there yet at boot)",
        Rule("unit-exit-nonzero"),
        Some("fixtures/rules/unit-exit-nonzero/pos-jetson-nvpmodel-sysfs-enoent"),
    ),
    cell(
        UnitCrashLoop,
        "systemctl's answer alone, where it was run (a shell, Ansible's `msg` with the host on its `fatal: [host]:` line): `Job for X failed because the control process exited with error code.`, with no line of the unit's own: the unit's failure at start, asking for its status and journal",
        Rule("unit-exit-nonzero"),
        Some("fixtures/rules/unit-exit-nonzero/pos-ansible-job-failed-no-journal"),
    ),
    cell(
        UnitCrashLoop,
        "a status block failed with the start limit's name before systemd v230 (`Active: failed (Result: start-limit)`), its start command's PID read from a `Process: N ExecStart=…` line even when cut before the status",
        Rule("systemd-start-limit-hit"),
        Some("fixtures/rules/systemd-start-limit-hit/pos-result-start-limit-before-v230"),
    ),
    cell(
        UnitCrashLoop,
        "Kubernetes killing and restarting a container for a failed liveness probe (`Liveness probe failed: …`, `failed liveness probe, will be restarted`)",
        Row("stacks-k8s.liveness-probe-failed"),
        None,
    ),
    cell(
        UnitCrashLoop,
        "a desktop app's own respawn counter rising with each server dead within seconds of its start (Ollama's app.log: `server crash 8 - exit code 1 - respawning`, 9, 10, each after `started ollama server with pid N`), outside systemd; not one crash, nor the old app's `exec: already started` bookkeeping",
        Rule("ollama-app-respawn-loop"),
        Some("fixtures/rules/ollama-app-respawn-loop/pos-ollama-9960-crash-8-to-10.log"),
    ),
    cell(
        UnitCrashLoop,
        "a unit's main process killed by SIGSYS (`code=killed, status=31/SYS`, or dumped): seccomp's kill for a system call outside the unit's SystemCallFilter=, ranked above the host-memory kill its own daemon made just before (earlyoom's unit dying right after it acted)",
        Rule("process-died"),
        Some("fixtures/rules/process-died/pos-earlyoom-unit-killed-sigsys-after-its-kill"),
    ),
    cell(
        UnitCrashLoop,
        "a user manager's unit (`systemd[1762]:`, not PID 1) failing at systemd's NAMESPACE step (`Failed to set up mount namespacing: Operation not supported`, `status=226/NAMESPACE`): its path and sandboxing settings need a user namespace",
        Rule("unit-exit-nonzero"),
        Some("fixtures/rules/unit-exit-nonzero/pos-systemk-user-manager-unit-namespace-step"),
    ),
    cell(
        UnitCrashLoop,
        "a container `docker ps` (or `docker compose ps`) lists as `Restarting (N) T ago` (its restart policy after an exit with N), or `Up` for seconds though `CREATED` minutes before while its neighbours stayed up",
        Rule("container-restart-loop"),
        Some(
            "fixtures/rules/container-restart-loop/pos-gpustack-2937-run-container-up-seconds-beside-pause",
        ),
    ),
    cell(
        UnitExitedZeroNoRestart,
        "a server's engine died but its unit exited 0, defeating Restart=on-failure",
        Rule("unit-exited-zero-no-restart"),
        Some("fixtures/real/038-vllm-unit-exit-0-defeats-restart-on-failure"),
    ),
    cell(
        UnitExitedZeroNoRestart,
        "a daemon found `inactive (dead)` with status 0 seconds after start (a forking daemon under Type=simple)",
        Rule("unit-exited-zero-no-restart"),
        Some("fixtures/real/451-nvidia-persistenced-type-simple-exits-zero-dead"),
    ),
    cell(
        UnitCrashLoop,
        "a unit failing once by its process's death with nothing the program printed before it: its main process's signal or core dump (`Main process exited, code=dumped, status=11/SEGV`), a control process's (a forking daemon's start command: `Control process exited, code=killed`), a status block's `Result: core-dump`; not a loop, and a unit failure rather than the program's exception",
        Rule("process-died"),
        Some("fixtures/rules/process-died/pos-logind-core-dump-once-no-words"),
    ),
    cell(
        ServerException,
        "death by a signal or a core dump, once (not a loop), after the program's own error lines or outside a unit: a job the shell reports, a child the server reports (Ollama's runner, vLLM's worker)",
        Rule("process-died"),
        Some("fixtures/rules/process-died/pos-ollama-runner-segfault-core-dumped"),
    ),
    cell(
        ServerException,
        "a unit's main process dumping core once (`Main process exited, code=dumped, status=11/SEGV`, `Active: failed (Result: core-dump)`), with its last lines",
        Rule("process-died"),
        Some("fixtures/real/441-llama-service-segv-draft-model-context-shift"),
    ),
    cell(
        ServerHang,
        "a start-up whose paste ends, with no error, on a model built or its first forward pass (CompVis ldm's `DiffusionWrapper has 859.52 M params.` under AUTOMATIC1111, ChatGLM's `The dtype of attention mask (torch.int64) is not bool`): waiting in the next step (the text encoder fetched from the Hub, the web UI's launch), at a low confidence since a paste may be cut there",
        Rule("startup-stage-stalled"),
        Some(
            "fixtures/rules/startup-stage-stalled/pos-a1111-fresh-clone-silent-after-ldm-model-built",
        ),
    ),
    cell(
        ServerHang,
        "a unit stuck `deactivating` (stop-sigterm)",
        Rule("systemd-stop-timeout"),
        Some("fixtures/real/453-gpustack-unit-stuck-deactivating-stop-sigterm"),
    ),
    // Hangs.
    cell(
        ServerHang,
        "the start-up stage a server reached, then silence until a stop, an interrupt or the end of the log",
        Rule("startup-stage-stalled"),
        Some("fixtures/rules/startup-stage-stalled/pos-vllm-pynccl-init-interrupted.log"),
    ),
    cell(
        ServerHang,
        "a stage line without its logger's prefix, as a reporter typed it (vLLM Ascend's `Loading model weights took 3.3461GB`), then the end of the paste: at the rule's lower confidence",
        Rule("startup-stage-stalled"),
        Some("fixtures/rules/startup-stage-stalled/pos-vllm-ascend-weights-loaded-no-prefix"),
    ),
    cell(
        ServerHang,
        "NCCL initialised (`Init COMPLETE`) and the first collective posted (`AllReduce: opCount 0`, no later count), then silence: a hang at the first collective",
        Rule("startup-stage-stalled"),
        Some("fixtures/rules/startup-stage-stalled/pos-megatron-16-ranks-first-allreduce-silent"),
    ),
    cell(
        ServerHang,
        "a training job's set-up (OpenNMT-py's `Start training loop`, WeNet's `training on multiple gpus, this gpu N`, Trainer's `***** Running training *****` block, Megatron's `> building train, validation, and test datasets ...`, DeepSpeed's `DeepSpeed info: version=`) and no step after it: at the rule's lower confidence when the paste just ends",
        Rule("startup-stage-stalled"),
        Some(
            "fixtures/rules/startup-stage-stalled/pos-opennmt-two-gpus-training-loop-then-nothing",
        ),
    ),
    cell(
        ServerHang,
        "NCCL's `Init COMPLETE`, whatever the transport and however many ranks printed it, for a group that spans nodes (`via NET/Socket`, `via NET/IB`, two hosts) or of which only part is shown, then silence",
        Rule("startup-stage-stalled"),
        Some("fixtures/real/851-horovod-two-node-socket-ranks-init-complete-then-stuck"),
    ),
    cell(
        ServerHang,
        "a rank still connecting its NCCL rings (`Ring 00 : 0 -> 8 [receive] via NET/Socket/0`) after the others printed `Init COMPLETE`, then silence: the group still forming",
        Rule("startup-stage-stalled"),
        Some("fixtures/rules/startup-stage-stalled/pos-nccl-rank-still-connecting-over-sockets"),
    ),
    cell(
        ServerHang,
        "TensorRT-LLM's engine loading begun (`Engine version … found in the config file`) or done (`Loaded engine size: N MiB`), then nothing: no Triton `Started HTTPService`",
        Rule("startup-stage-stalled"),
        Some("fixtures/rules/startup-stage-stalled/pos-trtllm-engine-version-then-nothing"),
    ),
    cell(
        ServerHang,
        "lmdeploy's `lmdeploy serve api_server` and TurboMind's engine built (its `gemm_config.in` warning), never its `HINT: Please open …` or Uvicorn's ready line",
        Rule("startup-stage-stalled"),
        Some(
            "fixtures/rules/startup-stage-stalled/pos-lmdeploy-turbomind-gemm-warning-then-nothing",
        ),
    ),
    cell(
        ServerHang,
        "SGLang's watchdog killing a forward batch that never finished",
        Rule("sglang-watchdog-timeout"),
        Some("fixtures/rules/sglang-watchdog-timeout/pos-tp8-watchdog-then-killed-top"),
    ),
    cell(
        ServerHang,
        "a unit's processes surviving SIGKILL (`Processes still around after SIGKILL`, a PID killed again): stuck in the kernel",
        Rule("systemd-stop-timeout"),
        Some("fixtures/rules/systemd-stop-timeout/pos-user-unit-survivor-gpu-no-progress"),
    ),
    cell(
        ServerHang,
        "a stop timeout ending in SIGKILL, with what kept the unit from stopping (its processes in uninterruptible sleep after a suspend and resume)",
        Rule("systemd-stop-timeout"),
        Some("fixtures/real/694-ollama-unit-stop-timeout-uninterruptible-after-resume"),
    ),
    cell(
        ServerHang,
        "vLLM's engine waiting minute after minute for its workers",
        Rule("vllm-shm-broadcast-hang"),
        Some("fixtures/real/056-vllm-dp-spec-decode-hang-shm-broadcast"),
    ),
    cell(
        ServerHang,
        "a server repeating that it still waits for its engine to start (vLLM's `Waiting for 1 local, 0 remote core engine proc(s) to start.`) to the end of the log",
        Rule("startup-wait-unanswered"),
        Some("fixtures/rules/startup-wait-unanswered/pos-vllm-glm45-tp8-two-waits"),
    ),
    cell(
        ServerHang,
        "TGI's launcher repeating `Waiting for shard 0 to be ready...` to the end of the log",
        Rule("startup-wait-unanswered"),
        Some("fixtures/real/684-tgi-t5-xxl-single-shard-never-ready"),
    ),
    cell(
        ServerHang,
        "TGI's launcher repeating `Waiting for shard to be ready... rank=N` for every rank, with nvidia-smi pasted below the waits (GPUs holding a few hundred MiB: no weights loaded)",
        Rule("startup-wait-unanswered"),
        Some("fixtures/rules/startup-wait-unanswered/pos-tgi-l40s-waits-then-nvidia-smi"),
    ),
    cell(
        ServerHang,
        "Dynamo waiting, once, for its engine worker to signal ready (`Waiting for sglang0 to signal that it's ready`), and nothing after it",
        Rule("startup-wait-unanswered"),
        Some("fixtures/real/691-dynamo-run-sglang-worker-never-signals-ready"),
    ),
    cell(
        ServerHang,
        "`ollama ps` showing a model `Stopping...` with no request in flight (none typed in the background before the row, no generation logged after it): its runner never finished unloading",
        Rule("ollama-model-stuck-stopping"),
        Some(
            "fixtures/rules/ollama-model-stuck-stopping/pos-ollama-12179-phi4-split-five-loaded.log",
        ),
    ),
    // GPU health without an Xid line.
    cell(
        XidOther,
        "the driver asking for a reset (`NV_ERR_RESET_REQUIRED`)",
        Row("kernel.nvrm-reset-required"),
        None,
    ),
    cell(
        XidOther,
        "NVRM's FSP not answering the GSP boot commands on a Hopper or later GPU (`kfspPollForResponse_IMPL: FSP command timed out`, `FSP boot cmds failed. RM cannot boot.`)",
        Row("kernel.nvrm-fsp-boot-failed"),
        None,
    ),
    cell(
        XidOther,
        "the amdgpu driver's ring timeout, its GPU hang (`ring gfx_0.0.0 timeout, signaled seq=…, emitted seq=…`; FreeBSD's `[drm ERROR :amdgpu_job_timedout] …`), the process on the line after it",
        Row("amdgpu.ring-timeout"),
        None,
    ),
    cell(
        XidOther,
        "amdgpu's MES scheduler firmware not answering (`MES failed to response msg=3`, `MES failed to respond to msg=REMOVE_QUEUE`) or KFD declaring it unrecoverable (`MES might be in unrecoverable state, issue a GPU reset`)",
        Row("amdgpu.mes-no-response"),
        None,
    ),
    cell(
        XidOther,
        "an amdgpu engine hung across a reset (`IP block:sdma_v6_0 is hung!`, `IB test timed out`) or a full reset that failed (`GPU reset(1) failed`)",
        Row("amdgpu.ip-block-hung"),
        None,
    ),
    cell(
        XidOther,
        "an amdgpu VM protection fault naming the process (`GPU fault detected: 147 0x04e84402 for process X pid N thread T pid M`, gmc_v9's `[gfxhub] page fault (src_id:…)`): the AMD counterpart of an MMU-fault Xid",
        Row("amdgpu.vm-fault"),
        None,
    ),
    cell(
        XidOther,
        "an amdgpu RAS `uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!`, or the SMU not answering (`Failed to send message 0x26, response 0x0`)",
        Row("amdgpu.ras-uncorrectable-athub"),
        None,
    ),
    cell(
        XidOther,
        "amdgpu's GPU initialisation failing at load (`PSP create ring failed!`, `amdgpu_device_ip_init failed`, `Fatal error during GPU init`)",
        Row("amdgpu.psp-start-failed"),
        None,
    ),
    cell(
        EccUncorrectable,
        "pending row remaps or uncorrectable ECC counts in `nvidia-smi -q`",
        Rule("ecc-uncorrectable-or-remap-pending"),
        Some("fixtures/real/110-nvidia-smi-q-remapped-rows-pending-yes"),
    ),
    cell(
        XidGpuFellOffBus,
        "nvidia-smi unable to reach a GPU (`GPU is lost`) with no kernel line",
        Rule("nvidia-smi-gpu-unreachable"),
        Some("fixtures/real/111-nvidia-smi-gpu-is-lost-reboot-one-line"),
    ),
    cell(
        XidGpuFellOffBus,
        "nvidia-smi's `Unable to determine the device handle for GPU …: Unknown Error` for one GPU while the others answer, with no kernel line: at a lower confidence",
        Rule("nvidia-smi-gpu-unreachable"),
        Some("fixtures/real/634-nvidia-smi-L-unable-device-handle-one-of-four-2080ti"),
    ),
    cell(
        XidGpuFellOffBus,
        "nvidia-smi's table reading `ERR!` in a GPU's name and every sensor while the other GPUs answer (`|   4  ERR!                On   |`, `|ERR!  ERR! ERR!    ERR! / ERR! |`), with no kernel line: at a lower confidence; one `ERR!` cell is not",
        Rule("nvidia-smi-gpu-err-row"),
        Some("fixtures/rules/nvidia-smi-gpu-err-row/pos-eight-a40-one-err-row"),
    ),
    cell(
        XidOther,
        "nvidia-smi's table reading `ERR!` in one GPU's fan cell (`|ERR! 46C P2 124W / 450W |`) while the other GPUs of the same model read their fans: a failed fan, at a lower confidence; a lone GPU's fan `ERR!` is not",
        Rule("nvidia-smi-gpu-err-row"),
        Some("fixtures/rules/nvidia-smi-gpu-err-row/pos-six-4090-gpu3-fan-err"),
    ),
    cell(
        DriverNotLoaded,
        "a vGPU without a licence: `nvidia-smi -q`'s `License Status : Unlicensed` (or `Unlicensed (Restricted)`; `<license_status>` in `-q -x`), the driver restricting the vGPU after its grace period",
        Row("cuda.vgpu-unlicensed"),
        None,
    ),
    cell(
        DriverNotLoaded,
        "DCGM (dcgm-exporter, nv-hostengine) unable to load NVML in its container (`Error: Failed to initialize NVML`, `Cannot init NVML library; err: ERROR_LIBRARY_NOT_FOUND`): the node's driver libraries not mounted",
        Row("dcgm.exporter-nvml-unavailable"),
        None,
    ),
    cell(
        DriverNotLoaded,
        "dcgm-exporter's fatal `Error starting nv-hostengine: DCGM initialization error`",
        Row("dcgm.hostengine-start-failed"),
        None,
    ),
    cell(
        DriverNotLoaded,
        "NVML refused the GPU's control device by the operating system (`Failed to initialize NVML: GPU access blocked by the operating system`, NVML_ERROR_OPERATING_SYSTEM through any NVML wrapper): a container's device cgroup, or a WSL2 guest the Windows host does not give the GPU",
        Row("nvml.operating-system-blocked"),
        None,
    ),
    cell(
        XidGpuFellOffBus,
        "GSP RPCs failing with status 0x0000000f (NV_ERR_GPU_IS_LOST: `rpcSendMessage failed with status 0x0000000f`, `GspRmFree failed: …; status=0x0000000f`) with no Xid line",
        Row("kernel.nvrm-gpu-is-lost"),
        None,
    ),
    cell(
        XidOther,
        "`nvidia-smi nvlink -s` showing all (or some) NVLinks of an SXM GPU inactive (`NVML: Unable to retrieve NVLink information as all links are inActive`, `Link 3: <inactive>`)",
        Rule("nvlink-links-inactive"),
        Some("fixtures/real/623-gpud-b200-gpu2-all-nvlinks-inactive-no-xid"),
    ),
    cell(
        XidGpuFellOffBus,
        "any NVRM line of a failed driver call that prints its status 0x0000000f (`kgmmuInvalidateTlb_GM107: TLB invalidation failed waiting for prior invalidate (status=0x0000000f)`, `status: 0x…`, `Status = 0x…`) with no Xid line",
        Row("kernel.nvrm-gpu-is-lost"),
        None,
    ),
    cell(
        XidOther,
        "`nvidia-smi --query-gpu=index,gpu_recovery_action` naming a recovery (`1, Reset`, rows without a header read by the typed query list), with DCGM's last Xid of the GPU (`dcgmi dmon -e 230`, `GPU 1  120`)",
        Rule("ecc-uncorrectable-or-remap-pending"),
        Some("fixtures/real/483-dcgm-healthy-but-gpu1-recovery-action-reset-xid120"),
    ),
    cell(
        XidOther,
        "nvidia-smi's `GPU Recovery Action` other than None (or `Reset Required: Yes`) with no memory fault shown",
        Rule("ecc-uncorrectable-or-remap-pending"),
        Some(
            "fixtures/rules/ecc-uncorrectable-or-remap-pending/pos-err-gpu14-recovery-action-reset",
        ),
    ),
    cell(
        XidOther,
        "nvidia-smi's `GPU Current Temp` at its `GPU Max Operating Temp` or `GPU Slowdown Temp` (within 2 C): the driver holds the clocks down",
        Rule("gpu-hardware-slowdown"),
        Some("fixtures/rules/gpu-hardware-slowdown/pos-thinkpad-mx330-max-operating-57c"),
    ),
    cell(
        XidOther,
        "a hardware slowdown among nvidia-smi's clock event reasons (`HW Power Brake Slowdown : Active`, `HW Thermal Slowdown : Active`)",
        Rule("gpu-hardware-slowdown"),
        Some("fixtures/rules/gpu-hardware-slowdown/pos-dell-c4130-v100-power-brake"),
    ),
    cell(
        XidOther,
        "DCGM's health watch finding a GPU subsystem in a warning or failed state (the host engine's `Detected a WARNING in health system Thermal: …`)",
        Row("dcgm.health-warning"),
        None,
    ),
    cell(
        XidOther,
        "a `dcgmi diag` result box with a test that failed on a GPU (`|  | Fail - GPU: 0 |` under `| GPU Memory | Pass - GPUs: 1, … |` in DCGM 2–3, `|  | GPU0: Fail |` in DCGM 4) and DCGM's `Warning` under it (thermal violations, a power target missed), the test named by its catalog row (`dcgm.diag-*`)",
        Rule("dcgm-diag-failed"),
        Some("fixtures/formats/lines/dcgmi-diag-row-remap-thermal.txt"),
    ),
    cell(
        EccUncorrectable,
        "a `dcgmi diag` deployment check's `Error` row naming a GPU whose row remappings are pending (`GPU 3 has uncorrectable memory errors and row remappings are pending`, joined from the rows DCGM cut it into)",
        Rule("dcgm-diag-failed"),
        Some("fixtures/formats/lines/dcgmi-diag-row-remap-thermal.txt"),
    ),
    cell(
        XidOther,
        "`dcgmi health -c`'s table (`Health Monitor Report`, `Overall Health: Warning`/`Failure`, each GPU's incidents) and `dcgmi diag -j`'s JSON",
        Gap(
            "not read yet (the `dcgmi diag` text box is: the rows above). `dcgmi health -c` prints a tree (NVIDIA/DCGM dcgmi/Health.cpp, `DcgmiOutputTree`), not the diag box; the one public table with a Failure found (NVIDIA/NVSentinel#1481) is DCGM's false NVLink-down alarm on a PCIe A100 without a bridge, and the JSON verdict of fixtures/real/483 says Healthy beside a GPU that needs a reset: neither can teach a reader that tells a fault. No public `dcgmi diag -j` output with a failing test was found (issues and code corpora, 2026-12-05; NVSentinel#772 shows its own preflight's JSON events, not dcgmi's)",
        ),
        None,
    ),
    unsampled(
        EccUncorrectable,
        "retired pages pending (`Pending Page Blacklist : Yes`, `Pending : Yes` under Retired Pages, `<pending_retirement>Yes` in `-q -x`, `retired_pages.pending` = Yes in a `--query-gpu` list)",
        Rule("ecc-uncorrectable-or-remap-pending"),
        "no public capture of a card with a retirement pending was found (2026-12-05, searched twice): the issues and pages corpora for `Pending Page Blacklist : Yes`, `Retired Pages` with `Pending : Yes`, `retired_pages.pending`, `pending_retirement`/`pending_blacklist` Yes, in NVIDIA forum, DCGM, gpud, NVSentinel, azhpc-diagnostics and cadvisor threads; every hit is NVIDIA's Dynamic Page Retirement guide, the nvidia-smi man page, a `--help-query-gpu` listing or a healthy card's `No`/`N/A`. Upstream tools' test inputs (the code index, exact strings `Pending Page Blacklist : Yes` at several paddings, `<pending_retirement>Yes`, `<pending_blacklist>Yes`, DCGM's `A pending retired page has been detected in GPU`): the only hits are checkers' own constants and docstrings (a health script's `BLACKLIST_PAGES` string, a docstring listing the lines it looks for) and DCGM's format strings and their unit test (dcgmlib/src/tests/dcgm_error_tests.cpp), none a capture; DCGM's repository (NVIDIA/DCGM@72fa3fe) holds no captured nvidia-smi output with it. DCGM's own message for it (`dcgm.pending-page-retirement`) is read, in a diag box's warning too (`dcgm-diag-failed`), with no real sample either",
    ),
    cell(
        XidOther,
        "an NVSwitch SXid (`nvidia-nvswitchN: SXid (PCI:0000:aa:00.0): 24007, …`), the switch named by the bus id its line prints",
        Row("kernel.sxid"),
        None,
    ),
    cell(
        XidOther,
        "the driver failing NVLink discovery between a GPU pair without an Xid (`knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask failed!`, `knvlinkUpdatePostRxDetectLinkMask_IMPL: Failed to update Rx Detect Link mask!`): a warning, NVLink between the pair may not come up",
        Row("kernel.nvlink-post-rxdet-failed"),
        None,
    ),
    // Hardware the installed software does not support.
    cell(
        UnsupportedHardware,
        "the driver ignoring a GPU that only a legacy branch supports (`supported through the NVIDIA 470.xx Legacy drivers`)",
        Row("kernel.nvrm-legacy-gpu"),
        None,
    ),
    cell(
        UnsupportedHardware,
        "dcgm-exporter asked for DCP profiling fields on a GPU without them (`Error watching fields: Profiling is not supported for this group of GPUs or GPU`, `This request is serviced by a module of DCGM that is not currently loaded`)",
        Row("dcgm.exporter-profiling-unsupported"),
        None,
    ),
    cell(
        UnsupportedHardware,
        "HIP's `invalid device function` on an AMD GPU (`HIP error: invalid device function`, PyTorch's ROCm build, rocALUTION): no code object for the card's gfx target in the build",
        Row("hip.invalid-device-function"),
        None,
    ),
    cell(
        UnsupportedHardware,
        "HIP's `hipErrorNoBinaryForGpu: Unable to find code object for all current devices!` (or `no kernel image is available for execution on the device` through a HIP wrapper)",
        Row("hip.no-binary-for-gpu"),
        None,
    ),
    // A step cancelled with no error: the other ranks' collective timeout.
    cell(
        NcclTimeout,
        "slurmstepd's `*** STEP N ON NODE CANCELLED AT T ***` with no limit named (glued to a progress bar, srun's `task N: Terminated` after it) and no error, after this rank's one stage ran about the process group's 30-minute timeout (or with NCCL_BLOCKING_WAIT set): the other ranks' collective timeout, at a lower confidence, asking for their logs",
        Rule("slurm-step-cancelled-long-stage"),
        Some("fixtures/rules/slurm-step-cancelled-long-stage/pos-myria3d-test-set-29-minutes"),
    ),
    // NCCL that cannot connect its ranks.
    cell(
        NcclInitFailure,
        "NCCL's socket interface list (`NET/Socket : Using`, one line or wrapped one item a line) with docker bridges, veths or link-local addresses beside the node's uplink, and no communicator built",
        Rule("nccl-socket-host-local-interfaces"),
        Some("fixtures/real/620-nccl-two-nodes-socket-uses-docker-bridges-ifname-bond0"),
    ),
];
