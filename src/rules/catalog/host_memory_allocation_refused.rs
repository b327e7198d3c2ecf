//! `host-memory-allocation-refused`: the operating system refused a
//! process host memory it asked for (PyTorch's CPU allocator's `not enough
//! memory`, Windows' commit limit, error 1455): the host's memory is used
//! up, and the operation that asked failed without a kill. Read from the
//! catalog rows of those messages, with what the process was doing named by
//! the traceback the message closes (a model being loaded).

use crate::correlate::Incident;
use crate::model::{Frame, Message};
use crate::rules::support::{confidence, server::exception_at};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: HostMemoryAllocationRefused = HostMemoryAllocationRefused;

pub struct HostMemoryAllocationRefused;

/// PyTorch's CPU allocator refusing a tensor's memory.
const TORCH: &str = "stacks-torch.cpu-allocator-out-of-memory";
/// Windows refusing to commit memory (ERROR_COMMITMENT_LIMIT, 1455).
const WINDOWS: &str = "windows.commitment-limit";

/// Lines cited per row at most, as `known-message` cites them.
const CITED: usize = 3;
/// A request under this many bytes refused: the host had nothing left (a
/// request larger than the host is the request's own fault).
const SMALL: u64 = 1 << 30;
/// Frames of a load named at most.
const FRAMES: usize = 4;

static META: RuleMeta = RuleMeta {
    id: "host-memory-allocation-refused",
    category: Category::HostOomKiller,
    severity: Severity::Critical,
    summary: "the operating system refused a process host memory (PyTorch's CPU allocator, Windows' paging file): the host's memory is used up",
    // The catalog rows' anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
A process asked the operating system for host (CPU) memory and was
refused: PyTorch's CPU allocator says `DefaultCPUAllocator: not enough
memory: you tried to allocate N bytes` (Windows; `can't allocate memory …
Error code 12` on Linux), Windows says `The paging file is too small for
this operation to complete` (`[WinError 1455]`, `(os error 1455)`, in the
system's language). Nothing was killed: the allocation failed, and with it
the operation that asked, most often a model being read into CPU memory
on its way to the GPU (a checkpoint unpickled, a safetensors file mapped,
`import torch` loading its CUDA libraries).

## Why it happens
The host's memory is used up. On Windows every process's committed memory
counts against the commit limit, RAM plus the page file: other programs,
earlier models still loaded, a page file that is small, fixed, or on a
full drive. A request of a few megabytes refused means the limit was
already reached. On Linux the allocator's refusal usually means the
request alone exceeds what RAM, swap and the overcommit policy allow: a
request larger than the host's memory is the program's (a wrong shape, an
image or batch far too large).

## How to confirm
The host's memory when it failed: Task Manager's Committed figure against
its limit (`wmic pagefile list /format:list`) on Windows; `free -h` and
/proc/meminfo's `CommitLimit` and `Committed_AS` on Linux.

## How to fix
Free host memory (close other programs, load one model at a time, a
smaller or quantised checkpoint, safetensors rather than a pickle, fewer
data-loader workers); on Windows let the system manage the page file, or
enlarge it, on a drive with free space; add RAM.

## Safety
Advice only: nothing is stopped or killed.
"#,
};

impl Rule for HostMemoryAllocationRefused {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let torch: Vec<_> = incident.known(TORCH).collect();
        let windows: Vec<_> = incident.known(WINDOWS).collect();
        let Some((first, _)) = torch.first().or(windows.first()) else {
            return;
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        // The size asked for, in bytes, where the allocator says it.
        let asked = torch
            .iter()
            .find_map(|(_, h)| h.get("size").and_then(bytes).zip(h.get("size")));
        for (m, h) in torch.iter().take(CITED) {
            match h.get("size") {
                Some(size) => f.evidence_marked(
                    m.span,
                    format!("PyTorch's CPU allocator was refused {size} of host memory"),
                    size,
                ),
                None => f.evidence(m.span, "PyTorch's CPU allocator was refused host memory"),
            }
        }
        for (m, _) in windows.iter().take(CITED) {
            f.evidence(
                m.span,
                "Windows refused to commit memory: the paging file is too small (error 1455, the commit limit reached)",
            );
        }
        let who = if torch.is_empty() {
            "Windows"
        } else {
            "PyTorch's CPU allocator"
        };
        f.condition(
            format!("{who} says the host refused memory; no process was killed"),
            true,
        );
        let small = match asked {
            Some((n, _)) => f.condition(
                format!(
                    "the request refused was small ({}): the host's memory was already used up, not the request too big",
                    human(n)
                ),
                n < SMALL,
            ),
            // Windows' commit limit is the host's, whatever was asked.
            None => f.condition("the refusal is Windows' commit limit (RAM plus the page file)", !windows.is_empty()),
        };
        let load = load_frames(incident, first);
        let during = match &load {
            Some(frames) => {
                f.condition(format!("it was raised while loading ({frames})"), true);
                format!(" while loading ({frames})")
            }
            None => String::new(),
        };
        let size = asked.map_or(String::new(), |(n, text)| format!(" {text} ({})", human(n)));
        let refused = if torch.is_empty() {
            "Windows refused to commit memory (the paging file is too small, error 1455)".to_owned()
        } else {
            format!("PyTorch's CPU allocator was refused{size} of host memory")
        };
        f.title = format!("Host memory exhausted: {refused}{during}");
        f.headline = if small {
            format!(
                "The host's memory is used up: {refused}{during}, and the operation that asked failed (nothing was killed; it is not a GPU out-of-memory)."
            )
        } else {
            format!(
                "The host refused{size} of memory{during}: more than the host's RAM and swap allow, and the operation that asked failed (nothing was killed; it is not a GPU out-of-memory)."
            )
        };
        f.chain.push(format!("{refused}{during}"));
        f.chain
            .push("the host's memory (RAM plus swap or the page file) was used up".to_owned());
        f.explanation = "An allocation refused by the operating system is the host's memory running out without the OOM killer: on Windows every process's committed memory counts against the commit limit, RAM plus the page file, and once it is reached even a few megabytes are refused; on Linux the refusal means the request exceeds what RAM, swap and the overcommit policy allow.".to_owned();
        f.actions.push(Action::advice(
            "free host memory: close other programs, load one model at a time, use a smaller or quantised checkpoint (safetensors rather than a pickle), fewer data-loader workers or a smaller batch",
            None,
        ));
        f.actions.push(Action::advice(
            "on Windows let the system manage the page file size (or enlarge it) on a drive with free space, or add RAM; check Task Manager's Committed figure against its limit",
            Some("wmic pagefile list /format:list"),
        ));
        if !small {
            f.actions.push(Action::advice(
                "a request larger than the host's whole memory is the program's: check the shape, image or batch size that asked for it",
                None,
            ));
        }
        f.confidence = confidence(&f, 0.6, 0.9);
        out.push(f);
    }
}

/// A size as the allocator prints it (`13107200 bytes`), in bytes.
fn bytes(size: &str) -> Option<u64> {
    size.strip_suffix("bytes")?.trim().parse().ok()
}

/// Bytes for a person: `12.5 MiB`, `1.9 GiB`.
fn human(n: u64) -> String {
    let mib = n as f64 / (1024.0 * 1024.0);
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

/// The functions of the traceback that the refusal at `line` closes which
/// load something (`load_unet → load_diffusion_model → load_torch_file`),
/// outermost first; else the innermost function it was raised in.
fn load_frames(incident: &Incident, line: &Message) -> Option<String> {
    let (_, x) = exception_at(incident, line.span)?;
    let names: Vec<&str> = x
        .frames
        .iter()
        .filter_map(|fr: &Frame| fr.function.as_deref())
        .collect();
    let mut loads: Vec<&str> = Vec::new();
    for name in names.iter().copied().filter(|n| is_load(n)) {
        if loads.last() != Some(&name) {
            loads.push(name);
        }
    }
    if loads.is_empty() {
        return names.last().map(|n| format!("in {n}"));
    }
    let skip = loads.len().saturating_sub(FRAMES);
    Some(loads[skip..].join(" → "))
}

/// Whether a function's name says it loads or reads a model in.
fn is_load(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["load", "from_pretrained", "refresh", "unpickl", "safe_open"]
        .iter()
        .any(|w| name.contains(w))
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    const RULE: &str = "host-memory-allocation-refused";

    /// https://github.com/Comfy-Org/ComfyUI/issues/7550 (batch S 1202):
    /// ComfyUI Desktop's UNet load, safetensors' safe_open refused by
    /// Windows' commit limit; the load's frames name the stage.
    #[test]
    fn windows_commit_limit_under_a_model_load_names_the_load() {
        let paste = r#"  File "C:\Users\jijoj\AppData\Local\Programs\@comfyorgcomfyui-electron\resources\ComfyUI\execution.py", line 163, in process_inputs
    results.append(getattr(obj, func)(**inputs))
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "C:\Users\jijoj\AppData\Local\Programs\@comfyorgcomfyui-electron\resources\ComfyUI\nodes.py", line 911, in load_unet
    model = comfy.sd.load_diffusion_model(unet_path, model_options=model_options)
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "C:\Users\jijoj\AppData\Local\Programs\@comfyorgcomfyui-electron\resources\ComfyUI\comfy\sd.py", line 1052, in load_diffusion_model
    sd = comfy.utils.load_torch_file(unet_path)
         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "C:\Users\jijoj\AppData\Local\Programs\@comfyorgcomfyui-electron\resources\ComfyUI\comfy\utils.py", line 68, in load_torch_file
    raise e
  File "C:\Users\jijoj\AppData\Local\Programs\@comfyorgcomfyui-electron\resources\ComfyUI\comfy\utils.py", line 55, in load_torch_file
    with safetensors.safe_open(ckpt, framework="pt", device=device.type) as f:
         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
OSError: The paging file is too small for this operation to complete. (os error 1455)

2025-04-09T20:26:41.903524 - Prompt executed in 0.02 seconds
"#;
        let f = crate::testing::findings_of(RULE, paste);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].category, Category::HostOomKiller);
        assert!(
            f[0].headline
                .contains("load_unet → load_diffusion_model → load_torch_file"),
            "{}",
            f[0].headline
        );
        assert!(
            f[0].conditions.iter().all(|c| c.met),
            "{:?}",
            f[0].conditions
        );
        let a = crate::testing::analyze_paste(paste);
        let top = a.diagnosis.findings.first().expect("a finding");
        assert_eq!(top.rule, RULE);
    }

    /// https://github.com/AUTOMATIC1111/stable-diffusion-webui/issues/6720
    /// (batch S 1189): 12.5 MiB refused while the web UI's safety check
    /// unpickles the checkpoint; https://github.com/JingyunLiang/VRT/issues/49:
    /// Linux's refusal of a 109 GiB request, the request's own fault.
    #[test]
    fn the_size_refused_says_whether_the_host_or_the_request_is_at_fault() {
        let small = r#"Traceback (most recent call last):
  File "C:\Stable-Diffusion\stable-diffusion-webui\modules\safe.py", line 135, in load_with_extra
    check_pt(filename, extra_handler)
  File "C:\Stable-Diffusion\stable-diffusion-webui\modules\safe.py", line 93, in check_pt
    unpickler.load()
RuntimeError: [enforce fail at ..\c10\core\impl\alloc_cpu.cpp:81] data. DefaultCPUAllocator: not enough memory: you tried to allocate 13107200 bytes.
"#;
        let f = crate::testing::findings_of(RULE, small);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].headline.contains("The host's memory is used up"),
            "{}",
            f[0].headline
        );
        assert!(
            f[0].headline.contains("13107200 bytes (12.5 MiB)"),
            "{}",
            f[0].headline
        );
        assert!(
            f[0].headline.contains("load_with_extra"),
            "{}",
            f[0].headline
        );
        let large = "RuntimeError: [enforce fail at alloc_cpu.cpp:73] . DefaultCPUAllocator: can't allocate memory: you tried to allocate 116813856768 bytes. Error code 12 (Cannot allocate memory)\n";
        let f = crate::testing::findings_of(RULE, large);
        assert_eq!(f.len(), 1);
        assert!(f[0].headline.contains("108.8 GiB"), "{}", f[0].headline);
        assert!(
            f[0].conditions.iter().any(|c| !c.met),
            "{:?}",
            f[0].conditions
        );
        assert!(f[0].confidence < 0.9);
    }

    /// A GPU's out-of-memory is not the host's: no finding of this rule.
    #[test]
    fn a_cuda_out_of_memory_is_not_read() {
        let cuda = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 7.79 GiB of which 20.69 MiB is free.\n";
        assert!(crate::testing::findings_of(RULE, cuda).is_empty());
    }
}
