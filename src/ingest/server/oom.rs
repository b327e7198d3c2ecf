//! CUDA out-of-memory messages in every PyTorch variant (docs/rules/torch-cuda-oom.md,
//! C2): the caching allocator's `Tried to allocate …` with the ≤ 2.0
//! parenthesis or the 2.1+ sentences and per-process list, and the raw
//! `CUDA error: out of memory`. Every size becomes bytes.

use std::sync::LazyLock;

use regex::Regex;

use super::sizes::parse_size;
use crate::model::{CudaOom, OomSource, ProcessMemory};

/// A PyTorch `format_size` value: `512 bytes`, `20.00 MiB`, `79.15 GiB`.
const SIZE: &str = r"[0-9]+(?:\.[0-9]+)?\x20?(?:bytes|KiB|MiB|GiB|TiB|B)";

macro_rules! re {
    ($name:ident, $pattern:expr) => {
        static $name: LazyLock<Regex> = LazyLock::new(|| {
            let pattern = $pattern.replace("SIZE", SIZE);
            Regex::new(&pattern).expect($pattern)
        });
    };
}

re!(
    TRIED,
    r"(?:(?:CUDA out of memory|Out of memory)\. )?Tried to allocate (?P<n>SIZE)"
);
re!(
    OLD_DETAILS,
    r"\(GPU (?P<gpu>[0-9]+); (?P<total>SIZE) total capacity; (?P<alloc>SIZE) already allocated; (?P<free>SIZE) free; (?:(?P<allowed>SIZE) allowed; )?(?:(?P<reserved>SIZE) reserved in total by PyTorch|(?P<cached>SIZE) cached)\)"
);
re!(
    CAPACITY,
    r"GPU (?P<gpu>[0-9]+) has a total capaci?ty of (?P<total>SIZE) of which (?P<free>SIZE) is free"
);
re!(
    PROCESS,
    r"Process (?P<pid>[0-9]+) has (?P<n>SIZE) memory in use"
);
// `... this process has 20.67 GiB in use`: a paste that elided the
// sentence's head (and the word `memory`) keeps the figure.
re!(
    THIS_PROCESS,
    r"(?:Including non-PyTorch memory, )?\bthis process has (?P<n>SIZE) (?:memory )?in use"
);
// The sentences PyTorch's message continues with after `Tried to allocate
// N.`, each of which a paste may put on a line of its own.
re!(
    CONTINUES,
    r"^\s*(?:GPU [0-9]+ has a total capaci?ty of |Process [0-9]+ has SIZE memory in use|Including non-PyTorch memory|Of the allocated memory |If reserved but unallocated memory is large)"
);
re!(ALLOWED, r"(?P<n>SIZE) allowed;");
// `Of the allocated memory 37.21 GiB is allo`: a paste cut after the
// figure still carries it (the word after the size shows it is whole).
re!(ALLOCATED, r"Of the allocated memory (?P<n>SIZE) is\b");
re!(PRIVATE, r"with (?P<n>SIZE) allocated in private pools");
re!(
    UNALLOCATED,
    r"(?P<n>SIZE) is reserved by PyTorch but unallocated"
);

/// Whether `text` is a sentence of PyTorch's out-of-memory message that
/// follows `Tried to allocate N.`, on a line of its own: the paste split
/// the one-line message at its sentences.
pub(super) fn continues(text: &str) -> bool {
    CONTINUES.is_match(text)
}

/// Reads an OOM message anywhere in `text`; `None` when there is none.
pub(super) fn parse(text: &str) -> Option<CudaOom> {
    // A paste cut before the first sentence (`Tried to allocate 216.00 MiB
    // (GPU 0; 7.92 GiB total capacity; …`) still carries the allocator's own
    // details, which no other message has; the ≤ 2.0 parenthesis is the
    // allocator's even cut of its `Tried to allocate` too (`(GPU 0; 15.75
    // GiB total capacity; 79.11 MiB already allocated; 3.62 MiB free; 86.00
    // MiB reserved in total by PyTorch)`): four figures no other message
    // prints together.
    let details = OLD_DETAILS.is_match(text);
    let cut = details || (text.contains("Tried to allocate") && CAPACITY.is_match(text));
    if !text.contains("out of memory") && !text.contains("Out of memory") && !cut {
        return None;
    }
    let size = |re: &Regex, group: &str| {
        re.captures(text)
            .and_then(|c| c.name(group).and_then(|m| parse_size(m.as_str())))
    };
    let tried = TRIED.captures(text);
    if tried.is_some() || details {
        let mut oom = CudaOom::new(OomSource::Allocator);
        oom.tried_bytes = tried.and_then(|t| parse_size(&t["n"]));
        if let Some(c) = OLD_DETAILS.captures(text) {
            let get = |g: &str| c.name(g).and_then(|m| parse_size(m.as_str()));
            oom.gpu = c["gpu"].parse().ok();
            oom.total_bytes = get("total");
            oom.allocated_bytes = get("alloc");
            oom.free_bytes = get("free");
            oom.allowed_bytes = get("allowed");
            oom.reserved_bytes = get("reserved");
            // The oldest form (PyTorch ≤ 1.0) ends `…; 9.10 MiB cached)`: the
            // allocator's cached blocks not in use, on top of `allocated`,
            // not a total (catalogs/stacks-torch.toml `torch.cuda-oom`).
            oom.reserved_unallocated_bytes = get("cached");
        } else if let Some(c) = CAPACITY.captures(text) {
            oom.gpu = c["gpu"].parse().ok();
            oom.total_bytes = parse_size(&c["total"]);
            oom.free_bytes = parse_size(&c["free"]);
            oom.allowed_bytes = size(&ALLOWED, "n");
            oom.allocated_bytes = size(&ALLOCATED, "n");
            oom.private_pool_bytes = size(&PRIVATE, "n");
            oom.reserved_unallocated_bytes = size(&UNALLOCATED, "n");
        }
        oom.this_process_bytes = size(&THIS_PROCESS, "n");
        oom.processes = PROCESS
            .captures_iter(text)
            .filter_map(|c| {
                Some(ProcessMemory {
                    pid: c["pid"].parse().ok()?,
                    bytes: parse_size(&c["n"])?,
                })
            })
            .collect();
        return Some(oom);
    }
    raw_cuda(text)
}

/// CUDA's out-of-memory code (the CUDA catalog's `cuda.memory-allocation`)
/// as PyTorch, ggml, the driver API or NCCL print it: a raw CUDA call, not
/// the caching allocator.
fn raw_cuda(text: &str) -> Option<CudaOom> {
    let hits = crate::catalogs::catalogs().hits(text);
    // A line another catalog's wording reads as a warning quotes CUDA's
    // code, not an out-of-memory error of the GPU: TensorFlow's pinned
    // host memory refused and retried smaller (`failed to alloc N bytes on
    // host: CUDA_ERROR_OUT_OF_MEMORY`, stacks-tf.pinned-host-alloc-failed).
    // `known-message` reads such lines the same way.
    if hits.iter().any(|h| {
        matches!(h.via, crate::catalogs::Via::Wording(_))
            && h.row.is_some_and(|r| {
                r.category.is_none() && r.severity == crate::model::Severity::Warning
            })
    }) {
        return None;
    }
    let hit = hits
        .into_iter()
        .find(|h| h.row.is_some_and(|r| r.id == "cuda.memory-allocation"))?;
    let source = match hit.via {
        crate::catalogs::Via::Wrapper(w) if w.id.starts_with("cuda.wrapper.nccl-cuda-failure") => {
            OomSource::Nccl
        }
        crate::catalogs::Via::Wrapper(w)
            if matches!(
                w.id.as_str(),
                "cuda.wrapper.torch-runtime-error"
                    | "cuda.wrapper.torch-accelerator-error"
                    | "cuda.wrapper.cuda-error"
                    | "cuda.wrapper.driver-name"
            ) =>
        {
            OomSource::CudaRuntime
        }
        _ => return None,
    };
    Some(CudaOom::new(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    const MIB: f64 = 1024.0 * 1024.0;

    fn b(x: f64, unit: f64) -> Option<u64> {
        Some((x * unit).round() as u64)
    }

    #[test]
    fn pytorch_2_5_with_several_processes() {
        let oom = parse("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free. Process 12345 has 40.12 GiB memory in use. Process 23456 has 2.50 GiB memory in use. Including non-PyTorch memory, this process has 35.45 GiB memory in use. Of the allocated memory 33.20 GiB is allocated by PyTorch, with 1.50 GiB allocated in private pools (e.g., CUDA Graphs), and 812.34 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)").unwrap();
        assert_eq!(oom.source, OomSource::Allocator);
        assert_eq!(oom.gpu, Some(0));
        assert_eq!(oom.tried_bytes, Some(2 << 30));
        assert_eq!(oom.total_bytes, b(79.15, GIB));
        assert_eq!(oom.free_bytes, b(1.06, GIB));
        assert_eq!(oom.this_process_bytes, b(35.45, GIB));
        assert_eq!(oom.allocated_bytes, b(33.20, GIB));
        assert_eq!(oom.private_pool_bytes, b(1.50, GIB));
        assert_eq!(oom.reserved_unallocated_bytes, b(812.34, MIB));
        assert_eq!(oom.reserved_bytes, None);
        assert_eq!(
            oom.processes,
            vec![
                ProcessMemory {
                    pid: 12345,
                    bytes: b(40.12, GIB).unwrap()
                },
                ProcessMemory {
                    pid: 23456,
                    bytes: b(2.50, GIB).unwrap()
                },
            ]
        );
    }

    #[test]
    fn pytorch_2_0_parenthesis_and_2_1_typo() {
        let old = parse("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.15 GiB total capacity; 77.50 GiB already allocated; 11.81 MiB free; 78.20 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF").unwrap();
        assert_eq!((old.gpu, old.tried_bytes), (Some(0), Some(20 << 20)));
        assert_eq!(old.total_bytes, b(79.15, GIB));
        assert_eq!(old.allocated_bytes, b(77.50, GIB));
        assert_eq!(old.free_bytes, b(11.81, MIB));
        assert_eq!(old.reserved_bytes, b(78.20, GIB));
        assert!(old.processes.is_empty());
        // Cut before `CUDA out of memory.`, as pasted in a forum thread.
        // https://github.com/erikguo/yolov3/issues/4: the oldest form's
        // `cached` is unused cache beside `allocated`, so this process holds
        // 1.62 GiB + 9.10 MiB.
        let oldest = parse("RuntimeError: CUDA out of memory. Tried to allocate 338.00 MiB (GPU 0; 3.95 GiB total capacity; 1.62 GiB already allocated; 23.00 MiB free; 9.10 MiB cached)").unwrap();
        assert_eq!(oldest.total_bytes, b(3.95, GIB));
        assert_eq!(oldest.allocated_bytes, b(1.62, GIB));
        assert_eq!(oldest.free_bytes, Some(23 * 1024 * 1024));
        assert_eq!(oldest.reserved_unallocated_bytes, b(9.10, MIB));
        assert_eq!(oldest.reserved_bytes, None);
        let cut = parse("Tried to allocate 216.00 MiB (GPU 0; 7.92 GiB total capacity; 69.17 MiB already allocated; 24.56 MiB free; 86.00 MiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.").unwrap();
        assert_eq!(cut.gpu, Some(0));
        assert_eq!(cut.reserved_bytes, Some(86 * 1024 * 1024));
        // Cut before `Tried to allocate` as well: the parenthesis alone
        // (Morizeyao/GPT2-Chinese#215), no request size.
        let tail = parse("(GPU 0; 15.75 GiB total capacity; 79.11 MiB already allocated; 3.62 MiB free; 86.00 MiB reserved in total by PyTorch)").unwrap();
        assert_eq!((tail.gpu, tail.tried_bytes), (Some(0), None));
        assert_eq!(tail.source, OomSource::Allocator);
        assert_eq!(tail.free_bytes, b(3.62, MIB));
        assert_eq!(tail.allocated_bytes, b(79.11, MIB));
        assert!(parse("(GPU 0; 15.75 GiB total capacity)").is_none());
        assert!(parse("Tried to allocate a buffer for the request").is_none());
        let allowed = parse("CUDA out of memory. Tried to allocate 512 bytes (GPU 3; 39.39 GiB total capacity; 1.00 GiB already allocated; 0 bytes free; 2.00 GiB allowed; 1.50 GiB reserved in total by PyTorch)").unwrap();
        assert_eq!(
            (allowed.gpu, allowed.tried_bytes, allowed.free_bytes),
            (Some(3), Some(512), Some(0))
        );
        assert_eq!(allowed.allowed_bytes, Some(2 << 30));
        let typo = parse("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 1 has a total capacty of 23.65 GiB of which 512.00 KiB is free. Process 999 has 23.64 GiB memory in use. Of the allocated memory 22.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.").unwrap();
        assert_eq!((typo.gpu, typo.free_bytes), (Some(1), Some(512 * 1024)));
        assert_eq!(typo.processes.len(), 1);
        assert_eq!(typo.this_process_bytes, None);
    }

    #[test]
    fn allocated_figure_of_a_cut_paste() {
        // A SageMaker endpoint's notes (public GitHub file, "Comparison of
        // HuggingFace Inference Endpoint vs SageMaker Endpoint"), cut after
        // `is allo` the way a one-line paste of a server error ends: the
        // figure is whole, the sentence is not.
        let cut = parse("CUDA out of memory. Tried to allocate 5.96 GiB. GPU 0 has a total capacty of 14.76 GiB of which 5.68 GiB is free. Process 9533 has 9.08 GiB memory in use. Of the allocated memory 7.46 GiB is allo").unwrap();
        assert_eq!(cut.allocated_bytes, b(7.46, GIB));
        assert_eq!(cut.this_process_bytes, None);
        assert_eq!(cut.processes.len(), 1);
        // Cut inside the figure: nothing is read.
        let inside = parse("CUDA out of memory. Tried to allocate 5.96 GiB. GPU 0 has a total capacty of 14.76 GiB of which 5.68 GiB is free. Process 9533 has 9.08 GiB memory in use. Of the allocated memory 7.4").unwrap();
        assert_eq!(inside.allocated_bytes, None);
    }

    #[test]
    fn the_sentences_that_continue_a_split_message() {
        // noonghunna/club-3090#16's one-line message, split at its
        // sentences the way a paste splits it.
        assert!(continues(
            "GPU 0 has a total capacity of 23.56 GiB of which 21.75 MiB is free."
        ));
        assert!(continues(
            "Including non-PyTorch memory, this process has 23.50 GiB memory in use."
        ));
        assert!(continues(
            "Of the allocated memory 22.88 GiB is allocated by PyTorch, with 24.00 MiB allocated in private pools (e.g., CUDA Graphs), and 275.38 MiB is reserved by PyTorch but unallocated."
        ));
        assert!(continues("Process 29529 has 796.00 MiB memory in use."));
        assert!(!continues("Process 29529 exited with code 1"));
        assert!(!continues("INFO 05-01 14:39:06 GPU 0 has a total capacity"));
        // `...` for the sentence's head, and no `memory` before `in use`.
        let cut = parse("CUDA out of memory. Tried to allocate 594.00 MiB.\nGPU 0 has a total capacity of 22.03 GiB of which 582.00 MiB is free.\nProcess 29529 has 796.00 MiB memory in use. ... this process has 20.67 GiB in use.").unwrap();
        assert_eq!(cut.this_process_bytes, b(20.67, GIB));
        assert_eq!(cut.processes.len(), 1);
        assert_eq!(cut.free_bytes, b(582.0, MIB));
    }

    #[test]
    fn raw_cuda_and_nccl_variants_and_near_misses() {
        assert_eq!(
            parse("RuntimeError: CUDA error: out of memory")
                .unwrap()
                .source,
            OomSource::CudaRuntime
        );
        assert_eq!(
            parse("misc/x.cc:1 NCCL WARN Cuda failure 2 'out of memory'")
                .unwrap()
                .source,
            OomSource::Nccl
        );
        assert_eq!(
            parse("Prefill out of memory. Try to lower your batch size."),
            None
        );
        assert_eq!(parse("KV cache pool is full. Retract requests."), None);
        // TensorFlow's pinned host memory refused (Accenture/AIR#7): the
        // host's memory, retried smaller, not a GPU out-of-memory error.
        assert_eq!(
            parse(
                "2022-06-16 02:36:14.576914: E tensorflow/stream_executor/cuda/cuda_driver.cc:893] failed to alloc 966367744 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory"
            ),
            None
        );
        // The same stack's device allocation is one (philip-huang/PIXOR#31).
        assert!(parse("failed to allocate 17.79G (19104890880 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory").is_some());
        assert_eq!(parse("--out-of-memory-guard enabled"), None);
    }
}
