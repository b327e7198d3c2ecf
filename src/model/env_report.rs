//! What `python -m sglang.check_env` says about a host: versions, GPUs and
//! the `nvidia-smi topo -m` matrix.

use std::collections::BTreeMap;

use crate::source::Span;

#[derive(Debug, Clone, PartialEq)]
pub struct EnvReport {
    /// `3.10.12` from `Python: 3.10.12 (main, …) [GCC 11.4.0]`.
    pub python: Option<String>,
    pub cuda_available: Option<bool>,
    /// One per GPU index, from `GPU 0,1: NVIDIA H100 80GB HBM3` and
    /// `GPU 0,1 Compute Capability: 9.0`, sorted by index.
    pub gpus: Vec<EnvGpu>,
    pub cuda_home: Option<String>,
    /// `Cuda compilation tools, release 12.4, V12.4.131`.
    pub nvcc: Option<String>,
    /// `CUDA Driver Version: 550.54.15`.
    pub driver_version: Option<String>,
    /// Every other `name: value` line: `PyTorch`, `sglang`, `flashinfer`,
    /// `triton`, `transformers`, `vllm`, `ulimit soft`, … Packages reported as
    /// `Module Not Found` are left out.
    pub versions: BTreeMap<String, String>,
    pub topology: Option<Topology>,
    /// The first line of the listing.
    pub span: Span,
}

impl EnvReport {
    /// A report with nothing read yet, starting at `span`.
    pub fn new(span: Span) -> EnvReport {
        EnvReport {
            python: None,
            cuda_available: None,
            gpus: Vec::new(),
            cuda_home: None,
            nvcc: None,
            driver_version: None,
            versions: Default::default(),
            topology: None,
            span,
        }
    }

    pub fn version(&self, name: &str) -> Option<&str> {
        self.versions.get(name).map(String::as_str)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvGpu {
    pub index: u32,
    pub name: String,
    pub compute_capability: Option<String>,
}

/// The `nvidia-smi topo -m` matrix.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Topology {
    /// Device columns in header order: `GPU0`, `GPU1`, `NIC0`, …
    pub devices: Vec<String>,
    pub rows: Vec<TopologyRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TopologyRow {
    pub device: String,
    /// One link per column of [`Topology::devices`]: `X`, `NV18`, `SYS`,
    /// `PIX`, `PXB`, `PHB`, `NODE`.
    pub links: Vec<String>,
    pub cpu_affinity: Option<String>,
    pub numa_affinity: Option<String>,
    pub gpu_numa_id: Option<String>,
    pub span: Span,
}

impl Topology {
    /// The link between two devices, as printed (`NV18`, `SYS`).
    pub fn link(&self, from: &str, to: &str) -> Option<&str> {
        let column = self.devices.iter().position(|d| d == to)?;
        let row = self.rows.iter().find(|r| r.device == from)?;
        row.links.get(column).map(String::as_str)
    }
}
