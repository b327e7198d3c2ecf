//! CUDA out-of-memory reports, with every number they carry in bytes.

/// Which layer ran out of memory (docs/rules/torch-cuda-oom.md, docs/rules/cuda-oom-at-context-creation.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OomSource {
    /// PyTorch's caching allocator: `CUDA out of memory. Tried to allocate …`.
    Allocator,
    /// A raw CUDA call (context creation, cuBLAS, `mem_get_info`):
    /// `CUDA error: out of memory`.
    CudaRuntime,
    /// CUDA inside NCCL: `Cuda failure 'out of memory'` / `Cuda failure 2 'out of memory'`.
    Nccl,
}

/// A process's memory on the GPU, from PyTorch's NVML-based list
/// (`Process 12345 has 40.12 GiB memory in use`). The PID is a host PID even
/// when the writer runs in a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessMemory {
    pub pid: u32,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CudaOom {
    pub source: OomSource,
    /// The exception class when the line is an exception line
    /// (`torch.OutOfMemoryError`, `torch.cuda.OutOfMemoryError`, `RuntimeError`).
    pub exception: Option<String>,
    /// The CUDA ordinal PyTorch names (`GPU 0`), an index into
    /// `CUDA_VISIBLE_DEVICES`, not necessarily nvidia-smi's index.
    pub gpu: Option<u32>,
    pub tried_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    /// `<X> allowed` (a per-process memory fraction was set).
    pub allowed_bytes: Option<u64>,
    /// Allocated by PyTorch (`already allocated` ≤ 2.0, `is allocated by
    /// PyTorch` 2.1+).
    pub allocated_bytes: Option<u64>,
    /// `reserved in total by PyTorch` (≤ 2.0).
    pub reserved_bytes: Option<u64>,
    /// `reserved by PyTorch but unallocated` (2.1+): fragmentation.
    pub reserved_unallocated_bytes: Option<u64>,
    /// `allocated in private pools (e.g., CUDA Graphs)`.
    pub private_pool_bytes: Option<u64>,
    /// `Including non-PyTorch memory, this process has … memory in use`.
    pub this_process_bytes: Option<u64>,
    /// `Process N has … memory in use`, in the order printed: with the
    /// writer's own PIDs removed, what other processes hold on that GPU.
    pub processes: Vec<ProcessMemory>,
    /// The lines after the first that the message was pasted over, split
    /// at its sentences (`GPU 0 has a total capacity …` / `Process N has
    /// … memory in use` on lines of their own): the figures read from them
    /// are cited there.
    pub continued: Vec<crate::source::Span>,
}

impl CudaOom {
    pub fn new(source: OomSource) -> CudaOom {
        CudaOom {
            source,
            exception: None,
            gpu: None,
            tried_bytes: None,
            total_bytes: None,
            free_bytes: None,
            allowed_bytes: None,
            allocated_bytes: None,
            reserved_bytes: None,
            reserved_unallocated_bytes: None,
            private_pool_bytes: None,
            this_process_bytes: None,
            processes: Vec::new(),
            continued: Vec::new(),
        }
    }
}
