//! `nvidia-ctk cdi list` (nvidia-container-toolkit,
//! `cmd/nvidia-ctk/cdi/list/list.go`): the toolkit's logger says how many
//! devices the CDI specifications on the host declare (`INFO[0000] Found 5
//! CDI devices`, or logrus' `time="…" level=info msg="Found 5 CDI devices"`
//! when not at a terminal), then one fully qualified CDI device name a line,
//! `VENDOR/CLASS=NAME` (the CDI specification's grammar: a vendor domain, a
//! class of letters, digits, `-` and `_`, a name). NVIDIA's specs name each
//! GPU by index (`nvidia.com/gpu=0`) and by UUID (`nvidia.com/gpu=GPU-…`),
//! each MIG device by `GPU:MIG` (`nvidia.com/gpu=0:1`) and UUID, and all of
//! them as `nvidia.com/gpu=all`. Each `nvidia.com/gpu` name of a GPU
//! becomes a [`GpuRecord`] (its index, or its UUID): the GPUs a container
//! runtime can hand to a container.

use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{Facts, GpuRecord};

/// `nvidia.com/gpu=0`: a qualified CDI device name alone on its line.
static DEVICE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<vendor>[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+)/(?P<class>[A-Za-z0-9][A-Za-z0-9_-]*)=(?P<name>[A-Za-z0-9][A-Za-z0-9_.:-]*)\s*$",
    )
    .expect("CDI device name regex")
});

/// The logger's count, at a terminal or not.
static FOUND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^(?:INFO\[[0-9]{4,}\] |time="[^"]*" level=info msg=")Found [0-9]+ CDI devices"?\s*$"#,
    )
    .expect("CDI device count regex")
});

/// Whether `line` is a line only `nvidia-ctk cdi list` prints: its count,
/// or a CDI device name of NVIDIA's.
pub(crate) fn is_cdi_line(line: &str) -> bool {
    (line.starts_with("nvidia.com/") && DEVICE.is_match(line))
        // FOUND's two heads (logrus' text and logfmt forms), before its regex.
        || ((line.starts_with("INFO[") || line.starts_with("time=\"")) && FOUND.is_match(line))
}

/// Parses one segment; returns the lines it did not recognise.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut missed = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let text = line.text;
        if text.trim().is_empty() || FOUND.is_match(text) {
            continue;
        }
        let Some(c) = DEVICE.captures(text) else {
            missed.push(i);
            continue;
        };
        if &c["vendor"] != "nvidia.com" || &c["class"] != "gpu" {
            continue;
        }
        let name = &c["name"];
        let (index, uuid) = if name.bytes().all(|b| b.is_ascii_digit()) {
            (name.parse().ok(), None)
        } else if name.starts_with("GPU-") {
            (None, Some(name.to_owned()))
        } else {
            // `all`, a MIG device (`0:1`, `MIG-…`): no GPU of its own.
            continue;
        };
        facts.gpus.push(GpuRecord {
            index,
            uuid,
            span: Some(line.span),
            ..GpuRecord::default()
        });
    }
    missed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nvidia-ctk cdi list` with its count
    /// (https://github.com/ssst0n3/docker_archive,
    /// nvidia-container-toolkit/v1.14.0/README.md), and without it under
    /// `--quiet` and a `grep` for the indices
    /// (https://github.com/containers/ai-lab-recipes/issues/514).
    #[test]
    fn device_names_become_gpus_by_index() {
        let text = "\
INFO[0000] Found 5 CDI devices                          
nvidia.com/gpu=0
nvidia.com/gpu=1
nvidia.com/gpu=2
nvidia.com/gpu=3
nvidia.com/gpu=all
";
        let mut facts = Facts::default();
        let missed = read(&Line::numbered(text), &mut facts);
        assert!(missed.is_empty());
        let indices: Vec<_> = facts.gpus.iter().map(|g| g.index).collect();
        assert_eq!(indices, [Some(0), Some(1), Some(2), Some(3)]);
        assert!(facts.gpus.iter().all(|g| g.uuid.is_none()));
        let mut facts = Facts::default();
        let quiet = "nvidia.com/gpu=0\nnvidia.com/gpu=1\nnvidia.com/gpu=2\n";
        assert!(read(&Line::numbered(quiet), &mut facts).is_empty());
        assert_eq!(facts.gpus.len(), 3);
        assert_eq!(facts.gpus[2].index, Some(2));
        for line in text.lines() {
            assert!(is_cdi_line(line), "{line}");
        }
        // Not its lines: a Kubernetes label, a resource limit, a flag.
        for no in [
            "nvidia.com/gpu.present=true",
            "  nvidia.com/gpu=0",
            "nvidia.com/gpu: 1",
            "--device nvidia.com/gpu=all",
        ] {
            assert!(!is_cdi_line(no), "{no}");
        }
    }
}
