//! `cuda-oom-at-context-creation`: a raw CUDA call (context creation,
//! NCCL's buffers, cuBLAS) found no memory: the GPU was already full,
//! usually of another process.

use crate::catalogs::Via;
use crate::correlate::{Gpu, Incident};
use crate::model::{Message, OomSource, ServerEvent, ServerEventKind};
use crate::rules::support::holders::{Holders, held_mib};
use crate::rules::support::server::in_graph_capture;
use crate::rules::support::{cite_gpu_memory, confidence, distinct, mib};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

mod device_nodes;

pub static RULE: CudaOomAtContextCreation = CudaOomAtContextCreation;

pub struct CudaOomAtContextCreation;

/// CUDA's out-of-memory code (cudaErrorMemoryAllocation /
/// CUDA_ERROR_OUT_OF_MEMORY, 2) as the CUDA catalog reads it: by name, by
/// number, or by its string in any wrapper (`CUDA error: out of memory`,
/// NCCL's `Cuda failure 'out of memory'`, Caffe's `(2 vs. 0)  out of memory`).
const ALLOCATION: &str = "cuda.memory-allocation";
/// The CUDA catalog's wrappers for TensorRT and TensorRT-LLM.
const TENSORRT_WRAPPERS: &[&str] = &[
    "cuda.wrapper.trtllm",
    "cuda.wrapper.tensorrt",
    "cuda.wrapper.tensorrt-7",
];

/// A GPU this full has no room for another CUDA context.
const FULL: f64 = 0.9;

/// The CUDA catalog's row for a call that creates (or first makes current)
/// a CUDA context, named on the line (`call`): TensorFlow's stream executor
/// (`failed call to cuDevicePrimaryCtxRetain`), `cuCtxCreate`, `cuInit`,
/// `cudaSetDevice`. Out of memory there means the GPU was full before the
/// program had allocated anything of its own.
const CONTEXT_CALL: &str = "cuda.context-creating-call";
/// Python functions that build a model or first move it to the GPU:
/// `nn.Module.__init__` (a layer allocating its parameters on a CUDA
/// default device), `Module.cuda`/`Module.to` through `_apply`.
/// (`torch.cuda.set_device` and `torch.cuda._lazy_init`, the first CUDA
/// call, create the context and read as [`CONTEXT_CALL`]'s lines do, and
/// so does `torch.cuda.empty_cache`, which only frees.)
/// A raw OOM raised in one of the innermost frames is an OOM before the
/// program's own working memory existed.
const CONSTRUCTION_FRAMES: &[&str] = &["__init__", "cuda", "to", "_apply"];
/// How many of the innermost frames are read for [`CONSTRUCTION_FRAMES`].
const INNERMOST: usize = 3;

static META: RuleMeta = RuleMeta {
    id: "cuda-oom-at-context-creation",
    category: Category::CudaOom,
    severity: Severity::Critical,
    summary: "a raw CUDA call found no GPU memory (context creation, NCCL buffers): the GPU was already full",
    // The catalog row's anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
Not PyTorch's allocator but a raw CUDA call failed for lack of memory:
`RuntimeError: CUDA error: out of memory` (creating the CUDA context,
`cudaSetDevice`, `mem_get_info`, a cuBLAS workspace) or NCCL's `NCCL WARN
Cuda failure 'out of memory'` while allocating its buffers. Typical at
start-up, when the GPU is already (nearly) full. When the failing call
creates the CUDA context (TensorFlow's `failed call to
cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY`, `cuCtxCreate`,
`cuInit`) the program had nothing of its own on the GPU yet: another
process held it. A raw `CUDA error: out of memory` raised while the model
is still being built or first moved (`__init__`, `.cuda()`, `.to()`,
`set_device` in the innermost frames) reads the same, at lower confidence.

## Why it happens
Another process or a leftover server instance fills the GPU; too many
processes share one GPU (each CUDA context costs 0.3–1 GiB); MPS or MIG
limits; NCCL buffers at high tensor parallelism on nearly full GPUs.

## How to confirm
nvidia-smi: `memory.used` close to `memory.total` on the GPU, and who holds
it.

## How to fix
Free the GPU (stop the holder's unit after confirming whose it is), or run
fewer processes per GPU. Lowering `NCCL_BUFFSIZE` is a last resort.

## Safety
Stopping a unit and signalling a process need confirmation and are re-checked
before they run.
"#,
};

impl Rule for CudaOomAtContextCreation {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let typed: Vec<&ServerEvent> = incident
            .facts
            .server_events
            .iter()
            .filter(|e| {
                matches!(&e.kind, ServerEventKind::CudaOom(o) if o.source != OomSource::Allocator)
            })
            .collect();
        let lines = oom_lines(incident, &typed);
        let Some(first) = lines.first() else {
            return;
        };
        let event = typed.iter().copied().find(|e| e.span == first.span);
        let framework = event.map_or(crate::model::Framework::Unknown, |e| e.framework);
        let holders = Holders::of_run(incident, event, framework);
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = lines.len() as u32;
        let nccl = lines.iter().any(|m| m.text.contains("Cuda failure"));
        for (m, n) in distinct(lines.iter().copied()).into_iter().take(3) {
            f.evidence(m.span, format!("a CUDA call found no memory ({n}x)"));
        }
        if let Some((u, _, _)) = &holders.target {
            f.entities.units.insert(u.clone());
        }
        if let Some(p) = event.and_then(|e| e.pid) {
            f.entities.pids.insert(p);
        }
        // NCCL's `[N]` is the CUDA device the failing call ran on.
        for m in &lines {
            for e in incident
                .facts
                .server_events
                .iter()
                .filter(|e| e.span == m.span)
            {
                if let ServerEventKind::Nccl(n) = &e.kind {
                    f.entities.gpus.extend(n.cuda_dev);
                    f.entities.pids.insert(n.pid);
                }
            }
        }
        let who = holders
            .target
            .as_ref()
            .map_or("the server", |t| t.0.as_str())
            .to_owned();
        let what = if nccl {
            "NCCL could not allocate its buffers"
        } else {
            "a CUDA call (context creation, cuBLAS, mem_get_info) found no memory"
        };
        f.chain.push(format!("{who} failed: {what}"));
        f.condition("a raw CUDA call reported out of memory", true);
        // Nearly full GPUs, the fullest first.
        let mut full: Vec<_> = incident
            .gpus
            .iter()
            .filter(|g| match (g.memory_used_mib, g.memory_total_mib) {
                (Some(u), Some(t)) if t > 0 => u as f64 >= t as f64 * FULL,
                _ => false,
            })
            .collect();
        full.sort_by_key(|g| std::cmp::Reverse(g.memory_used_mib));
        f.condition(
            "nvidia-smi shows a GPU at least 90 % full",
            !full.is_empty(),
        );
        let all: Vec<u32> = incident.gpus.iter().map(|g| g.index).collect();
        let held = holders.most_held(full.iter().map(|g| g.index), 1024);
        // A reading from where the traceback stands, not from the call, is
        // capped: the model may be built inside a loop that already ran.
        let mut cap = 1.0;
        match (held, full.first()) {
            (Some((gpu, list)), _) => {
                let held = held_mib(&list);
                let name = holders.report(&mut f, gpu, &list, &all);
                f.title = format!("GPU {gpu} is full: {name} holds {}", mib(Some(held)));
                f.headline = format!(
                    "GPU {gpu} was full, {name} holding {}, so {who} could not even allocate its CUDA context or buffers.",
                    mib(Some(held))
                );
                f.explanation = "Creating a CUDA context or NCCL's buffers needs a few hundred MiB to a few GiB; a GPU another process has filled cannot give it.".to_owned();
            }
            (None, Some(g)) => explain_unlisted_holder(&mut f, g, &who),
            (None, None) => {
                cap = explain_without_table(&mut f, incident, &who, nccl, &lines, event);
            }
        }
        f.confidence = confidence(&f, 0.6, 0.95).min(cap);
        out.push(f);
    }
}

/// Says on `f` why a raw OOM with no full GPU in the inputs happened: an
/// OOM before the program's own memory (`Early`), the device nodes'
/// holders (fuser), or nothing known. Returns the confidence's cap.
fn explain_without_table(
    f: &mut Finding,
    incident: &Incident,
    who: &str,
    nccl: bool,
    lines: &[&Message],
    event: Option<&ServerEvent>,
) -> f64 {
    match (nccl, before_own_memory(incident, lines)) {
        (false, Some(early)) => {
            explain_before_own_memory(f, who, &early);
            if matches!(early, Early::Construction(_)) {
                0.55
            } else {
                1.0
            }
        }
        // The holders of the device nodes (fuser): candidates whose memory
        // is not known.
        _ if device_nodes::explain(f, incident, who, event.and_then(|e| e.pid)) => 0.6,
        _ => {
            explain_unknown_holder(f, who, nccl);
            1.0
        }
    }
}

/// Where an OOM that came before the program's own memory was raised.
enum Early {
    /// A context-creating call named on the line (`cuDevicePrimaryCtxRetain`).
    Context(String),
    /// The Python function of the traceback that was building the model or
    /// first moving it to the GPU.
    Construction(String),
}

/// Whether the first OOM line names a context-creating call, or its Python
/// traceback stands in model construction or the first move to the GPU.
fn before_own_memory(incident: &Incident, lines: &[&Message]) -> Option<Early> {
    let first = lines.first()?;
    if let Some(call) = incident
        .known(CONTEXT_CALL)
        .find(|(m, _)| m.span == first.span)
        .and_then(|(_, h)| h.get("call"))
    {
        return Some(Early::Context(call.to_owned()));
    }
    let (_, x) = crate::rules::support::server::exception_at(incident, first.span)?;
    x.frames.iter().rev().take(INNERMOST).find_map(|fr| {
        let name = fr.function.as_deref()?;
        // Selecting the device or the first CUDA call creates the context.
        match name {
            "set_device" => {
                return Some(Early::Context(
                    "cudaSetDevice, from torch.cuda.set_device".to_owned(),
                ));
            }
            "_lazy_init" => {
                return Some(Early::Context(
                    "cuInit, from torch.cuda._lazy_init".to_owned(),
                ));
            }
            // It only frees: what it can run out of memory on is a context
            // it opens on a device the process had not used (each worker
            // of a job that set no device opens one on device 0).
            "empty_cache" => {
                return Some(Early::Context(
                    "a context torch.cuda.empty_cache opens on a device the process had not used"
                        .to_owned(),
                ));
            }
            _ => {}
        }
        (CONSTRUCTION_FRAMES.contains(&name) || name.starts_with("build_"))
            .then(|| Early::Construction(name.to_owned()))
    })
}

/// Says on `f` that the GPU was already full when the program started: the
/// OOM came before it had memory of its own (a CUDA context being created, or
/// the model still being built), so another process holds the GPU.
fn explain_before_own_memory(f: &mut Finding, who: &str, early: &Early) {
    f.category = Category::GpuMemoryHeldByOtherProcess;
    let (when, condition) = match early {
        Early::Context(call) => (
            format!("creating its CUDA context ({call})"),
            format!(
                "the failing call creates a CUDA context ({call}): nothing of the program's own was allocated yet"
            ),
        ),
        Early::Construction(function) => (
            format!("building its model (in {function})"),
            format!(
                "the OOM was raised while the model was being built or first moved to the GPU (in {function}), before any batch ran"
            ),
        ),
    };
    f.condition(&condition, true);
    f.chain.push(format!(
        "{who} ran out of GPU memory {when}: the GPU was already full of another process's memory"
    ));
    f.title = format!("GPU already full when {who} started: out of memory {when}");
    f.headline = format!(
        "{who} ran out of GPU memory {when}, before it had allocated anything of its own: another process already held the GPU."
    );
    f.explanation = "A CUDA context needs a few hundred MiB and an unbuilt model has no working memory yet: an OOM this early means the GPU was full before this program started, usually of another user's or a leftover process. A smaller batch does not help.".to_owned();
    f.actions.push(Action::advice(
        "see which processes hold the GPU, and run on a free one",
        Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
    ));
    f.actions.push(Action::advice(
        "pick a GPU with free memory for this program (CUDA_VISIBLE_DEVICES=<index of a free GPU>)",
        None,
    ));
}

/// The raw CUDA out-of-memory lines this rule explains, in input order: the
/// typed OOM events outside PyTorch's allocator that no graph capture
/// explains, and the catalog's allocation lines outside TensorRT.
fn oom_lines<'a>(incident: &'a Incident, typed: &[&'a ServerEvent]) -> Vec<&'a Message> {
    let text = |span| {
        incident
            .facts
            .messages
            .iter()
            .find(|m| m.span == span)
            .map_or("", |m| m.text.as_str())
    };
    let mut lines: Vec<_> = typed
        .iter()
        .filter(|e| !in_graph_capture(incident, e.span, text(e.span)))
        // vLLM's graph-capture rule reports an OOM while capturing.
        .filter(|e| crate::rules::support::vllm::graph_capture(incident, e).is_none())
        .filter_map(|e| incident.facts.messages.iter().find(|m| m.span == e.span))
        .collect();
    // TensorRT's and TensorRT-LLM's own out-of-memory lines are
    // `trtllm-cuda-oom`'s to explain (the engine's own reservations); a
    // typed OOM event was judged above. A line another row reads as a
    // warning quotes the code (TensorFlow's pinned host memory refused and
    // retried smaller: the host's memory, not the GPU's).
    let warnings = crate::rules::support::warning_lines(incident);
    for (m, _) in incident.known(ALLOCATION).filter(|(m, h)| {
        !matches!(h.via, Via::Wrapper(w) if TENSORRT_WRAPPERS.contains(&w.id.as_str()))
            && (matches!(h.via, Via::Wording(_)) || !warnings.contains(&m.span))
    }) {
        if !typed.iter().any(|e| e.span == m.span) && !in_graph_capture(incident, m.span, &m.text) {
            lines.push(m);
        }
    }
    lines.sort_by_key(|m| m.span);
    lines
}

/// Says on `f` that GPU `g` was full with no listed process to account for
/// it (another container or the host holds it): the title, the headline
/// and how to find the holder.
fn explain_unlisted_holder(f: &mut Finding, g: &Gpu, who: &str) {
    f.category = Category::GpuMemoryHeldByOtherProcess;
    f.entities.gpus.insert(g.index);
    cite_gpu_memory(f, g);
    f.chain.push(format!(
        "GPU {} was full ({} of {}) with no process listed to account for it",
        g.index,
        mib(g.memory_used_mib),
        mib(g.memory_total_mib)
    ));
    f.title = format!(
        "GPU {} was full, held by a process the inputs do not show",
        g.index
    );
    f.headline = format!(
        "GPU {} was full when {who} started, held by a process nvidia-smi does not list here (another container or the host).",
        g.index
    );
    f.explanation = "The memory is in use but no listed process accounts for it: find the holder from the host.".to_owned();
    f.actions.push(Action::advice(
        "list the GPU's processes from the host, outside any container",
        Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
    ));
}

/// Says on `f` that a raw CUDA call (`nccl`: NCCL's buffers) found no
/// memory and the inputs do not show what filled the GPU: the title, the
/// headline and what to check.
fn explain_unknown_holder(f: &mut Finding, who: &str, nccl: bool) {
    f.title = if nccl {
        "NCCL could not allocate its buffers: out of GPU memory".to_owned()
    } else {
        "CUDA out of memory outside PyTorch's allocator".to_owned()
    };
    f.headline = format!(
        "{who} could not allocate GPU memory outside PyTorch ({}); the inputs do not show what filled the GPU.",
        if nccl {
            "NCCL's buffers"
        } else {
            "CUDA context or library workspace"
        }
    );
    f.explanation = "Capture nvidia-smi when it happens to see what fills the GPU; too many processes per GPU, MPS/MIG limits, or NCCL buffers at high TP on nearly full GPUs are the other causes.".to_owned();
    f.actions.push(Action::advice(
        "see what holds the GPU's memory, and run fewer processes per GPU",
        Some("nvidia-smi; nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
    ));
    // The holder most often missed: the same program's earlier instance
    // (a server a GUI or a script started and did not stop, an interrupted
    // run's workers), in no log of this run and not always in nvidia-smi.
    f.actions.push(Action::advice(
        "rule out an earlier instance of the same program still holding the GPU (a server a GUI or script started and never stopped, an interrupted run's workers) before shrinking the model: list what has the GPU open, then each process's start time and parent",
        Some("fuser -v /dev/nvidia*; ps -o pid,ppid,lstart,args -p PID"),
    ));
    if nccl {
        // The usual filler is the server itself: a static
        // reservation that leaves NCCL no room.
        f.actions.push(Action::advice(
            "if the server reserves the GPU up front, lower its static fraction so NCCL's buffers fit: TensorRT-LLM kv_cache_free_gpu_mem_fraction, vLLM --gpu-memory-utilization, SGLang --mem-fraction-static",
            None,
        ));
        f.actions.push(Action::advice(
            "as a last resort, lower NCCL_BUFFSIZE for the server",
            None,
        ));
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    /// The rule's one finding on `text`: its category and confidence.
    fn read(text: &str) -> (Category, f64, String) {
        let f = crate::testing::findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{text}");
        (f[0].category, f[0].confidence, f[0].headline.clone())
    }

    /// https://github.com/tensorflow/tensorflow/issues/30594 (batch G 769).
    const TF_CTX: &str = "2019-07-11 12:42:11.226602: W tensorflow/compiler/xla/service/platform_util.cc:240] unable to create StreamExecutor for CUDA:0: failed initializing StreamExecutor for CUDA device ordinal 0: Internal: failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY: out of memory; total memory reported: 11523260416";

    #[test]
    fn an_oom_creating_the_context_is_another_process_s_memory() {
        let (category, confidence, headline) = read(TF_CTX);
        assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
        assert!(headline.contains("cuDevicePrimaryCtxRetain"), "{headline}");
        assert!(confidence > 0.55, "{confidence}");
        // The next paste, a variant of TF_CTX's grammar: the older stream
        // executor's `cuCtxCreate`.
        let (category, _, headline) = read(
            "E tensorflow/stream_executor/cuda/cuda_driver.cc:405] failed call to cuCtxCreate: CUDA_ERROR_OUT_OF_MEMORY; total memory reported: 8506769408",
        );
        assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
        assert!(headline.contains("cuCtxCreate"), "{headline}");
    }

    /// https://github.com/amdegroot/ssd.pytorch/issues/447 (batch G 770): the
    /// raw OOM raised in `nn.Conv2d.__init__` while the model is built.
    const BUILDING: &str = r#"Traceback (most recent call last):
  File "train.py", line 257, in <module>
    train()
  File "train.py", line 97, in train
    ssd_net = build_ssd('train', cfg['min_dim'], cfg['num_classes'])
  File "/media/disk/wudi/ssd.pytorch/ssd.py", line 207, in build_ssd
    base_, extras_, head_ = multibox(vgg(base[str(size)], 3),
  File "/media/disk/wudi/ssd.pytorch/ssd.py", line 136, in vgg
    conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
  File "/media/disk/wudi/.local/lib/python3.6/site-packages/torch/nn/modules/conv.py", line 330, in __init__
    False, _pair(0), groups, bias, padding_mode)
  File "/media/disk/wudi/.local/lib/python3.6/site-packages/torch/nn/modules/conv.py", line 41, in __init__
    out_channels, in_channels // groups, *kernel_size))
RuntimeError: CUDA error: out of memory
"#;

    #[test]
    fn a_raw_oom_while_the_model_is_built_is_read_the_same_at_lower_confidence() {
        let (category, confidence, _) = read(BUILDING);
        assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
        assert!(confidence <= 0.55, "{confidence}");
        // The next paste (same grammar as BUILDING, PyTorch 1.0's module.py):
        // the first `model.cuda()`, Module.cuda → _apply → <lambda>.
        let moved = r#"Traceback (most recent call last):
  File "train.py", line 120, in <module>
    net = net.cuda()
  File "/usr/lib/python3.6/site-packages/torch/nn/modules/module.py", line 260, in cuda
    return self._apply(lambda t: t.cuda(device))
  File "/usr/lib/python3.6/site-packages/torch/nn/modules/module.py", line 187, in _apply
    module._apply(fn)
  File "/usr/lib/python3.6/site-packages/torch/nn/modules/module.py", line 193, in _apply
    param.data = fn(param.data)
  File "/usr/lib/python3.6/site-packages/torch/nn/modules/module.py", line 260, in <lambda>
    return self._apply(lambda t: t.cuda(device))
RuntimeError: CUDA error: out of memory
"#;
        assert_eq!(read(moved).0, Category::GpuMemoryHeldByOtherProcess);
        // The near miss: the same raw OOM in a forward pass is the
        // program's own.
        let forward = r#"Traceback (most recent call last):
  File "train.py", line 150, in train
    out = net(images)
  File "/usr/lib/python3.6/site-packages/torch/nn/modules/module.py", line 489, in __call__
    result = self.forward(*input, **kwargs)
  File "/usr/lib/python3.6/site-packages/torch/nn/modules/conv.py", line 320, in forward
    self.padding, self.dilation, self.groups)
RuntimeError: CUDA error: out of memory
"#;
        assert_eq!(read(forward).0, Category::CudaOom);
    }

    /// https://github.com/ray-project/ray/issues/30809 (batch S 1164): Ray
    /// Train's worker calls torch.cuda.empty_cache at shutdown with no
    /// device set; it only frees, so its OOM is a context opened on device
    /// 0, which the other workers' contexts fill. The near miss is the same
    /// OOM one frame further out, in the program's own loop.
    #[test]
    fn an_oom_raised_in_empty_cache_is_a_context_it_opens() {
        let shutdown = r#"  File "/home/ubuntu/miniconda3/envs/seeweed/lib/python3.8/site-packages/ray/train/torch/config.py", line 118, in _shutdown_torch
    torch.cuda.empty_cache()
  File "/home/ubuntu/miniconda3/envs/seeweed/lib/python3.8/site-packages/torch/cuda/memory.py", line 114, in empty_cache
    torch._C._cuda_emptyCache()
RuntimeError: CUDA error: out of memory
"#;
        let (category, _, headline) = read(shutdown);
        assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
        assert!(headline.contains("empty_cache"), "{headline}");
        let own = shutdown
            .replace("in empty_cache", "in step")
            .replace("in _shutdown_torch", "in train_loop");
        assert_eq!(read(&own).0, Category::CudaOom);
    }

    /// https://github.com/qwersyk/Newelle/issues/339 (batch H 794): the GUI's
    /// 503 and ggml's allocation failure with its size abridged by the
    /// reporter; a llama-server left running by the closed app held the GPU.
    #[test]
    fn ggml_s_failed_allocation_names_its_device_and_the_earlier_instance_to_rule_out() {
        let text = "Error code: 503 ... 'type': 'unavailable_error'\nggml_backend_cuda_buffer_type_alloc_buffer: allocating ... MiB on device 0: cudaMalloc failed: out of memory\n";
        let f = crate::testing::findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.gpus.contains(&0), "{:?}", f[0].entities);
        // The earlier instance is the first holder to rule out, with the
        // command that finds it even where nvidia-smi lists nothing.
        crate::testing::advises(&f[0], "fuser -v /dev/nvidia");
        // The next paste: the size printed, another device
        // (https://github.com/ollama/ollama/issues/6860).
        let f = crate::testing::findings_of(
            super::META.id,
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 144.00 MiB on device 4: cudaMalloc failed: out of memory\n",
        );
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.gpus.contains(&4), "{:?}", f[0].entities);
    }
}
