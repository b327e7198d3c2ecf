//! `python -m torch.utils.collect_env` and vLLM's `collect_env.py` (which
//! prints the same report with a few more entries): the environment
//! listing GitHub issue templates ask for. Read into the same
//! [`EnvReport`] as SGLang's `check_env`: the driver version, the GPUs, the
//! Python, PyTorch and vLLM versions.
//!
//! ```text
//! PyTorch version: 1.5.1
//! Is debug build: No
//! CUDA used to build PyTorch: 10.2
//! Python version: 3.6
//! Is CUDA available: Yes
//! GPU models and configuration: GPU 0: Tesla K80
//! Nvidia driver version: 440.64.00
//! Versions of relevant libraries:
//! [pip3] torch==1.5.1
//! ```
//!
//! The `CPU:` section is `lscpu` (`Architecture: x86_64`, …), the `GPU
//! Topology:` section vLLM adds is `nvidia-smi topo -m`, and newer vLLM
//! frames sections with `=====` banners: all recognised.

use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{EnvGpu, EnvReport, Facts};

static ENTRY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<key>[A-Za-z][0-9A-Za-z_ .,+/()'-]*?):(?:\s+(?P<value>.*?))?\s*$")
        .expect("entry regex")
});
static GPU: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^GPU (?P<index>[0-9]+): (?P<name>.+?)\s*$").expect("gpu regex"));
static LIBRARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[(?:pip3?|conda)\] (?P<name>[0-9A-Za-z_.-]+)(?:==| +)(?P<version>\S+)")
        .expect("library regex")
});

/// Parses one or more reports; returns the number of lines it did not
/// recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut report: Option<EnvReport> = None;
    let mut unrecognized = 0;
    for line in lines {
        let text = line.text.trim_end();
        let trimmed = text.trim();
        if trimmed.is_empty()
            || trimmed.starts_with("====")
            || trimmed == "Collecting environment information..."
        {
            continue;
        }
        if text.starts_with("PyTorch version: ")
            && report
                .as_ref()
                .is_some_and(|r| r.versions.contains_key("PyTorch"))
        {
            facts.env_reports.extend(report.take());
        }
        let r = report.get_or_insert_with(|| EnvReport::new(line.span));
        if let Some(c) = GPU.captures(trimmed) {
            push_gpu(r, &c["index"], &c["name"]);
            continue;
        }
        if let Some(c) = LIBRARY.captures(trimmed) {
            r.versions
                .entry(c["name"].to_owned())
                .or_insert_with(|| c["version"].to_owned());
            continue;
        }
        if trimmed.starts_with("[pip") || trimmed.starts_with("[conda]") {
            continue;
        }
        // cuDNN's candidate libraries, one path a line; lscpu's and the
        // topology legend's indented lines.
        if trimmed.starts_with('/') || text.starts_with(' ') || text.starts_with('\t') {
            continue;
        }
        // The topology matrix vLLM adds: `GPU0  X  NV12 …` rows.
        let first = trimmed.split_whitespace().next().unwrap_or_default();
        let device = |prefix: &str| {
            first.len() > prefix.len()
                && first.starts_with(prefix)
                && first[prefix.len()..].bytes().all(|b| b.is_ascii_digit())
        };
        if device("GPU") || device("NIC") || device("mlx5_") {
            continue;
        }
        let Some(c) = ENTRY.captures(text) else {
            // A section title (`System Info`, `PyTorch Info`) between banners.
            if trimmed.split_whitespace().count() <= 4
                && trimmed
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == ' ' || c == '/')
            {
                continue;
            }
            unrecognized += 1;
            continue;
        };
        let value = c.name("value").map_or("", |m| m.as_str());
        match &c["key"] {
            "PyTorch version" => set(r, "PyTorch", value),
            "vLLM Version" => set(r, "vllm", value),
            "CUDA runtime version" => set(r, "CUDA runtime", value),
            "CUDA used to build PyTorch" => set(r, "CUDA used to build PyTorch", value),
            "Python version" => {
                r.python = value.split_whitespace().next().map(str::to_owned);
            }
            "Is CUDA available" => {
                r.cuda_available = match value {
                    "Yes" | "True" => Some(true),
                    "No" | "False" => Some(false),
                    _ => None,
                };
            }
            "Nvidia driver version" => {
                let known = value.chars().next().is_some_and(|c| c.is_ascii_digit());
                r.driver_version = known.then(|| value.to_owned());
            }
            "GPU models and configuration" => {
                if let Some(c) = GPU.captures(value) {
                    push_gpu(r, &c["index"], &c["name"]);
                }
            }
            _ => {}
        }
    }
    facts.env_reports.extend(report);
    unrecognized
}

fn set(report: &mut EnvReport, key: &str, value: &str) {
    let known = value.chars().next().is_some_and(|c| c.is_ascii_digit());
    if known {
        report.versions.insert(key.to_owned(), value.to_owned());
    }
}

fn push_gpu(report: &mut EnvReport, index: &str, name: &str) {
    if let Ok(index) = index.parse() {
        if !report.gpus.iter().any(|g| g.index == index) {
            report.gpus.push(EnvGpu {
                index,
                name: name.to_owned(),
                compute_capability: None,
            });
            report.gpus.sort_by_key(|g| g.index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verbatim from https://github.com/pytorch/pytorch/issues/40863
    /// (fixtures/real/071, PyTorch 1.5.1).
    const TORCH_1_5: &str = "\
PyTorch version: 1.5.1
Is debug build: No
CUDA used to build PyTorch: 10.2

OS: Debian GNU/Linux 9 (stretch)
GCC version: (Debian 6.3.0-18+deb9u1) 6.3.0 20170516
CMake version: version 3.7.2

Python version: 3.6
Is CUDA available: Yes
CUDA runtime version: 10.2.89
GPU models and configuration: GPU 0: Tesla K80
Nvidia driver version: 440.64.00
cuDNN version: Could not collect

Versions of relevant libraries:
[pip3] numpy==1.18.3
[pip3] torch==1.5.1
[pip3] torchvision==0.6.1
[conda] Could not collect
";

    #[test]
    fn a_torch_1_5_report() {
        let mut facts = Facts::default();
        assert_eq!(parse(&Line::numbered(TORCH_1_5), &mut facts), 0);
        let [r] = facts.env_reports.as_slice() else {
            panic!("one report");
        };
        assert_eq!(r.driver_version.as_deref(), Some("440.64.00"));
        assert_eq!(r.python.as_deref(), Some("3.6"));
        assert_eq!(r.cuda_available, Some(true));
        assert_eq!(r.gpus.len(), 1);
        assert_eq!(r.gpus[0].name, "Tesla K80");
        assert_eq!(r.version("PyTorch"), Some("1.5.1"));
        assert_eq!(r.version("torch"), Some("1.5.1"));
    }

    /// The layout of PyTorch ≥ 1.10 and vLLM's `collect_env.py`: one GPU a
    /// line under the key, cuDNN candidates, lscpu, "No CUDA" values.
    #[test]
    fn a_multi_gpu_report_with_its_cpu_section() {
        let text = "Collecting environment information...\nPyTorch version: 2.2.1+cu121\nIs debug build: False\nCUDA used to build PyTorch: 12.1\nROCM used to build PyTorch: N/A\n\nPython version: 3.10.14 (main, Mar 21 2024, 16:24:04) [GCC 11.2.0] (64-bit runtime)\nPython platform: Linux-5.4.0-155-generic-x86_64-with-glibc2.31\nIs CUDA available: True\nCUDA runtime version: 12.2.91\nCUDA_MODULE_LOADING set to: LAZY\nGPU models and configuration: \nGPU 0: NVIDIA A800 80GB PCIe\nGPU 1: NVIDIA A800 80GB PCIe\n\nNvidia driver version: 535.54.03\ncuDNN version: Probably one of the following:\n/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2\nHIP runtime version: N/A\nIs XNNPACK available: True\n\nCPU:\nArchitecture:                       x86_64\nCPU op-mode(s):                     32-bit, 64-bit\n\nVersions of relevant libraries:\n[pip3] torch==2.2.1\n[conda] torch                     2.2.1                    pypi_0    pypi\nvLLM Version: 0.4.2\n";
        let mut facts = Facts::default();
        assert_eq!(parse(&Line::numbered(text), &mut facts), 0);
        let r = &facts.env_reports[0];
        assert_eq!(
            r.gpus.iter().map(|g| g.index).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(r.driver_version.as_deref(), Some("535.54.03"));
        assert_eq!(r.version("vllm"), Some("0.4.2"));
        assert_eq!(r.python.as_deref(), Some("3.10.14"));
    }

    #[test]
    fn no_cuda_is_no_driver() {
        let mut facts = Facts::default();
        parse(
            &Line::numbered(
                "PyTorch version: 2.6.0+cpu\nNvidia driver version: No CUDA\nGPU models and configuration: No CUDA\n",
            ),
            &mut facts,
        );
        assert_eq!(facts.env_reports[0].driver_version, None);
        assert!(facts.env_reports[0].gpus.is_empty());
    }
}
