//! `nvidia-smi -L` and `nvidia-smi nvlink --status` (`-s`): one `GPU N:
//! NAME (UUID: GPU-…)` line per GPU, each followed by its MIG devices
//! (`  MIG 1g.10gb     Device  0: (UUID: MIG-…)`, `-L`) or its links
//! (`\t Link 0: 25 GB/s`, `Link 3: <inactive>`, `nvlink -s`). Each GPU line
//! becomes a [`GpuRecord`] (index, name, UUID): what joins a UUID in a
//! compute-apps query or an Xid's bus id to an index. A GPU line whose UUID
//! the person who pasted it cut out (`GPU 0: NVIDIA H200 (...)`, `GPU 6:
//! NVIDIA H100 80GB HBM3 ...`) is still a GPU, by index and name.

use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{Facts, GpuRecord};

/// `GPU 0: NVIDIA A100-PCIE-40GB (UUID: GPU-63110aaa-3561-c8f5-e125-4ab40bbcf838)`.
pub(crate) static GPU_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^GPU (?P<index>[0-9]{1,3}): (?P<name>\S.*?) \(UUID: (?P<uuid>GPU-[0-9a-fA-F-]{8,})\)\s*$",
    )
    .expect("nvidia-smi -L GPU line regex")
});

/// A GPU line whose UUID was elided by the person who pasted it: in its
/// brackets (`(...)`, `(UUID: ...)`, `(UUID: GPU-...)`) or with the
/// brackets (` ...`).
static ELIDED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^GPU (?P<index>[0-9]{1,3}): (?P<name>[A-Za-z]\S*(?: \S+)*?) (?:\((?:UUID: (?:GPU-)?)?(?:\.{3,}|…)\)|\.{3,}|…)\s*$",
    )
    .expect("nvidia-smi -L elided GPU line regex")
});

/// The lines under a GPU line: a MIG device of `-L`, a link of `nvlink -s`.
static UNDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s+(?:MIG [0-9a-z.+]+\s+Device\s+[0-9]+: \(UUID: MIG-[0-9a-fA-F-]+\)|Link [0-9]{1,2}: (?:[0-9.]+ GB/s|<inactive>|Inactive|N/A))\s*$",
    )
    .expect("nvidia-smi -L device regex")
});

/// Whether `line` is a GPU line of `-L` / `nvlink -s`.
pub(crate) fn is_gpu_line(line: &str) -> bool {
    line.starts_with("GPU ") && (GPU_LINE.is_match(line) || ELIDED.is_match(line))
}

/// Parses one segment; returns the lines it did not recognise.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut missed = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let text = line.text;
        if text.trim().is_empty() || UNDER.is_match(text) {
            continue;
        }
        let Some(c) = GPU_LINE.captures(text).or_else(|| ELIDED.captures(text)) else {
            missed.push(i);
            continue;
        };
        facts.gpus.push(GpuRecord {
            index: c["index"].parse().ok(),
            uuid: c.name("uuid").map(|u| u.as_str().to_owned()),
            name: Some(c["name"].to_owned()),
            span: Some(line.span),
            ..GpuRecord::default()
        });
    }
    missed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nvidia-smi nvlink -s` on a B200
    /// (https://github.com/NVIDIA/nvbandwidth/issues/44, cut).
    #[test]
    fn gpu_lines_become_gpus_and_what_is_under_them_is_read() {
        let text = "\
GPU 0: NVIDIA B200 (UUID: GPU-19a556ea-38df-750d-fcf7-3da28757ba5b)
         Link 0: 50 GB/s
         Link 1: 50 GB/s
not a line of it
";
        let mut facts = Facts::default();
        let missed = read(&Line::numbered(text), &mut facts);
        assert_eq!(missed, [3]);
        assert_eq!(facts.gpus.len(), 1);
        assert_eq!(facts.gpus[0].index, Some(0));
        assert_eq!(facts.gpus[0].name.as_deref(), Some("NVIDIA B200"));
        assert_eq!(
            facts.gpus[0].uuid.as_deref(),
            Some("GPU-19a556ea-38df-750d-fcf7-3da28757ba5b")
        );
        assert!(is_gpu_line(
            "GPU 1: Tesla V100-PCIE-16GB (UUID: GPU-b08ecee0-0ea5-7b07-d459-baa5b95f5e89)"
        ));
        assert!(!is_gpu_line("GPU 0: 0.6GiB/140.4GiB (0.4%)"));
    }

    /// `-L` with the UUIDs cut out by the reporter: Hugging Face Jobs'
    /// set-up step (https://github.com/huggingface/huggingface_hub/issues/4134)
    /// and gpu_burn, which runs `nvidia-smi -L` before it burns
    /// (https://github.com/wilicc/gpu-burn/issues/92; gpu_burn-drv.cpp,
    /// `system("nvidia-smi -L")`).
    #[test]
    fn gpu_lines_with_their_uuid_cut_out_are_gpus_by_index_and_name() {
        let text = "\
GPU 0: NVIDIA H200 (...)
GPU 0: NVIDIA H100 80GB HBM3 ...
GPU 6: NVIDIA H100 80GB HBM3 ...
";
        let mut facts = Facts::default();
        let missed = read(&Line::numbered(text), &mut facts);
        assert!(missed.is_empty());
        let gpus: Vec<_> = facts
            .gpus
            .iter()
            .map(|g| (g.index, g.name.as_deref(), g.uuid.as_deref()))
            .collect();
        assert_eq!(
            gpus,
            [
                (Some(0), Some("NVIDIA H200"), None),
                (Some(0), Some("NVIDIA H100 80GB HBM3"), None),
                (Some(6), Some("NVIDIA H100 80GB HBM3"), None),
            ]
        );
        for line in text.lines() {
            assert!(is_gpu_line(line), "{line}");
        }
        // What other programs print after `GPU N:` is no GPU line, nor is
        // collect_env's bare `GPU 0: NAME` or gpu_burn's verdict.
        for no in [
            "GPU 0: Tesla K80",
            "\tGPU 0: OK",
            "GPU 0: 0.6GiB/140.4GiB (0.4%) ...",
            "GPU 0: (...)",
        ] {
            assert!(!is_gpu_line(no), "{no}");
        }
    }
}
