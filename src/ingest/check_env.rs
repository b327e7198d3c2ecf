//! `python -m sglang.check_env`: a `Name: value` listing of the Python,
//! CUDA, GPU and package versions, the `nvidia-smi topo -m` matrix under
//! `NVIDIA Topology:` with its legend, and a few host settings.
//!
//! ```text
//! Python: 3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0]
//! CUDA available: True
//! GPU 0,1: NVIDIA H100 80GB HBM3
//! GPU 0,1 Compute Capability: 9.0
//! PyTorch: 2.5.1+cu124
//! NVIDIA Topology:
//!         GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID
//! GPU0     X      NV18    0-55,112-167    0               N/A
//! ```

use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use super::server::{Outer, ServerLogParser};
use crate::model::{EnvGpu, EnvReport, Facts, Framework, Topology, TopologyRow};
use crate::source::Span;

/// The first line of a listing.
static START: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:Python: [0-9]+\.[0-9]+|CUDA available: (?:True|False)\s*$|NVIDIA Topology:)")
        .expect("check_env start regex")
});

static ENTRY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<key>[A-Za-z][0-9A-Za-z_ .,+/()-]*?):(?:\s+(?P<value>.*?))?\s*$")
        .expect("entry regex")
});

static GPU_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^GPU (?P<ids>[0-9]+(?:,\s*[0-9]+)*)(?P<cc> Compute Capability)?$")
        .expect("GPU key regex")
});

#[derive(Clone, Copy, PartialEq)]
enum Part {
    Entries,
    /// After `NVIDIA Topology:`: the header, then one row per device.
    Topology,
    /// The matrix's `Legend:` and `NIC Legend:` blocks (indented lines).
    Legend,
}

/// Parses one listing (or several, one after the other); returns the number
/// of lines it did not recognise.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut report: Option<EnvReport> = None;
    let mut part = Part::Entries;
    let mut missed = Vec::new();
    // What the listing's segment holds around it (the error that made
    // someone run check_env, a warning torch printed first) is server
    // output: it goes to the server parser, and so does any line of the
    // listing that is not an entry.
    let mut server = ServerLogParser::new(Some(Framework::Sglang));
    let outer = Outer::default();
    let mut started = false;
    for (i, line) in lines.iter().enumerate() {
        let text = line.text;
        if text.trim().is_empty() {
            continue;
        }
        started = started || START.is_match(text);
        if !started || super::server::is_exception_line(text) {
            if !server.feed(text, line.span, &outer, facts) {
                missed.push(i);
            }
            continue;
        }
        if text.starts_with("Python: ") && report.as_ref().is_some_and(|r| r.python.is_some()) {
            facts.env_reports.extend(report.take());
        }
        let r = report.get_or_insert_with(|| EnvReport::new(line.span));
        if text.starts_with("NVIDIA Topology:") {
            part = Part::Topology;
            r.topology = Some(Topology::default());
            continue;
        }
        if matches!(part, Part::Topology | Part::Legend)
            && (text.starts_with("Legend:") || text.starts_with("NIC Legend:"))
        {
            part = Part::Legend;
            continue;
        }
        if part == Part::Legend && text.starts_with([' ', '\t']) {
            continue;
        }
        if part == Part::Topology {
            if let Some(topology) = &mut r.topology {
                if topology_line(text, line.span, topology) {
                    continue;
                }
            }
        }
        part = Part::Entries;
        if !entry(text, r) && !server.feed(text, line.span, &outer, facts) {
            missed.push(i);
        }
    }
    facts.env_reports.extend(report);
    missed
}

/// The number of lines [`read`] did not recognise.
#[cfg(test)]
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    read(lines, facts).len() as u32
}

/// The header (device names, then `CPU Affinity …`) or a row of the matrix.
fn topology_line(text: &str, span: Span, topology: &mut Topology) -> bool {
    let cells: Vec<&str> = text.split_whitespace().collect();
    if topology.devices.is_empty() {
        if !text.starts_with([' ', '\t']) || cells.first().is_none_or(|c| !is_device(c)) {
            return false;
        }
        topology.devices = cells
            .iter()
            .take_while(|c| is_device(c))
            .map(|c| (*c).to_owned())
            .collect();
        return true;
    }
    let Some((device, rest)) = cells.split_first() else {
        return false;
    };
    if !topology.devices.iter().any(|d| d == device) || rest.len() < topology.devices.len() {
        return false;
    }
    let (links, extra) = rest.split_at(topology.devices.len());
    let extra = |i: usize| extra.get(i).map(|s| (*s).to_owned());
    topology.rows.push(TopologyRow {
        device: (*device).to_owned(),
        links: links.iter().map(|s| (*s).to_owned()).collect(),
        cpu_affinity: extra(0),
        numa_affinity: extra(1),
        gpu_numa_id: extra(2),
        span,
    });
    true
}

/// `GPU0`, `NIC1`, `mlx5_0`: a column of the matrix (not `CPU Affinity`).
pub(super) fn is_device(cell: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    cell.strip_prefix("GPU").is_some_and(digits)
        || cell.strip_prefix("NIC").is_some_and(digits)
        || cell.starts_with("mlx") && cell.contains('_')
}

/// One `Name: value` line.
fn entry(text: &str, r: &mut EnvReport) -> bool {
    let Some(c) = ENTRY.captures(text) else {
        return false;
    };
    let key = c["key"].trim();
    let value = c.name("value").map_or("", |m| m.as_str()).trim();
    if let Some(g) = GPU_KEY.captures(key) {
        for index in g["ids"]
            .split(',')
            .filter_map(|i| i.trim().parse::<u32>().ok())
        {
            let gpu = match r.gpus.iter_mut().position(|x| x.index == index) {
                Some(i) => &mut r.gpus[i],
                None => {
                    r.gpus.push(EnvGpu {
                        index,
                        name: String::new(),
                        compute_capability: None,
                    });
                    r.gpus.last_mut().expect("just pushed")
                }
            };
            if g.name("cc").is_some() {
                gpu.compute_capability = Some(value.to_owned());
            } else {
                gpu.name = value.to_owned();
            }
        }
        r.gpus.sort_by_key(|g| g.index);
        return true;
    }
    let owned = || (!value.is_empty()).then(|| value.to_owned());
    match key {
        "Python" => r.python = value.split_whitespace().next().map(str::to_owned),
        "CUDA available" => {
            r.cuda_available = match value {
                "True" => Some(true),
                "False" => Some(false),
                _ => None,
            }
        }
        "CUDA_HOME" => r.cuda_home = owned(),
        "NVCC" => r.nvcc = owned(),
        k if k.ends_with("Driver Version") => r.driver_version = owned(),
        _ if value == "Module Not Found" || value.is_empty() => {}
        _ => {
            r.versions.insert(key.to_owned(), value.to_owned());
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> (Vec<EnvReport>, u32) {
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        (facts.env_reports, unrecognized)
    }

    const SAMPLE: &str = "\
Python: 3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0]
CUDA available: True
GPU 0,1,2,3: NVIDIA A100-SXM4-80GB
GPU 4,5: NVIDIA A100-SXM4-40GB
GPU 0,1,2,3,4,5 Compute Capability: 8.0
CUDA_HOME: /usr/local/cuda
NVCC: Cuda compilation tools, release 12.4, V12.4.131
CUDA Driver Version: 550.54.15
PyTorch: 2.5.1+cu124
sglang: 0.4.1.post3
sgl_kernel: Module Not Found
flashinfer: 0.1.6+cu124torch2.4
triton: 3.1.0
transformers: 4.47.1
vllm: 0.6.4.post1
NVIDIA Topology: 
\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV12\tSYS\t0-31,64-95\t0\t\tN/A
GPU1\tNV12\t X \tSYS\t0-31,64-95\t0\t\tN/A
NIC0\tSYS\tSYS\t X 

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NV#  = Connection traversing a bonded set of # NVLinks

NIC Legend:

  NIC0: mlx5_0

Hypervisor vendor: KVM
ulimit soft: 1048576";

    #[test]
    fn versions_gpus_and_topology() {
        let (reports, unrecognized) = run(SAMPLE);
        assert_eq!(unrecognized, 0);
        let r = &reports[0];
        assert_eq!(r.span.line, 1);
        assert_eq!(r.python.as_deref(), Some("3.10.12"));
        assert_eq!(r.cuda_available, Some(true));
        assert_eq!(r.cuda_home.as_deref(), Some("/usr/local/cuda"));
        assert_eq!(
            r.nvcc.as_deref(),
            Some("Cuda compilation tools, release 12.4, V12.4.131")
        );
        assert_eq!(r.driver_version.as_deref(), Some("550.54.15"));
        assert_eq!(r.version("PyTorch"), Some("2.5.1+cu124"));
        assert_eq!(r.version("sglang"), Some("0.4.1.post3"));
        assert_eq!(r.version("flashinfer"), Some("0.1.6+cu124torch2.4"));
        assert_eq!(r.version("sgl_kernel"), None);
        assert_eq!(r.version("ulimit soft"), Some("1048576"));
        let gpus: Vec<(u32, &str, Option<&str>)> = r
            .gpus
            .iter()
            .map(|g| (g.index, g.name.as_str(), g.compute_capability.as_deref()))
            .collect();
        assert_eq!(gpus[0], (0, "NVIDIA A100-SXM4-80GB", Some("8.0")));
        assert_eq!(gpus[5], (5, "NVIDIA A100-SXM4-40GB", Some("8.0")));
        let t = r.topology.as_ref().unwrap();
        assert_eq!(t.devices, ["GPU0", "GPU1", "NIC0"]);
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.link("GPU0", "GPU1"), Some("NV12"));
        assert_eq!(t.link("GPU1", "NIC0"), Some("SYS"));
        assert_eq!(t.rows[0].cpu_affinity.as_deref(), Some("0-31,64-95"));
        assert_eq!(t.rows[0].numa_affinity.as_deref(), Some("0"));
        assert_eq!(t.rows[0].gpu_numa_id.as_deref(), Some("N/A"));
        assert_eq!(
            (t.rows[2].cpu_affinity.as_deref(), t.rows[2].span.line),
            (None, 20)
        );
    }

    #[test]
    fn two_listings_and_garbage() {
        let text = format!(
            "{SAMPLE}\nPython: 3.12.3\nCUDA available: False\n\u{0}\u{ff} ?? no colon here\n   indented: odd"
        );
        let (reports, unrecognized) = run(&text);
        assert_eq!(reports.len(), 2);
        assert_eq!(reports[1].python.as_deref(), Some("3.12.3"));
        assert_eq!(reports[1].cuda_available, Some(false));
        assert!(reports[1].topology.is_none());
        assert_eq!(unrecognized, 2);
    }

    /// What a real paste holds around the listing: the imbalance error that
    /// made someone run check_env (https://github.com/sgl-project/sglang/issues/5338)
    /// and torch's warning with its source line
    /// (https://github.com/dstackai/dstack/issues/2348). They are server
    /// output, not entries.
    #[test]
    fn lines_around_the_listing_are_server_output() {
        let text = "\
ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=23.16046142578125, local_gpu_memory=30.41015625, local_gpu_memory * 0.9=27.369140625
/opt/conda/envs/workflow/lib/python3.9/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)
  return torch._C._cuda_getDeviceCount() > 0
Python: 3.10.12 (main, Feb  4 2025, 14:57:36) [GCC 11.4.0]
CUDA available: True
GPU 2: NVIDIA GeForce RTX 5090";
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        assert_eq!(unrecognized, 0);
        let report = &facts.env_reports[0];
        assert_eq!(report.span.line, 4);
        assert!(!report.versions.contains_key("ValueError"), "{report:?}");
        let imbalance: Vec<u32> = facts
            .server_events
            .iter()
            .filter(|e| matches!(e.kind, crate::model::ServerEventKind::MemoryImbalance(_)))
            .map(|e| e.span.line)
            .collect();
        assert_eq!(imbalance, vec![1]);
    }
}
