//! `gpustat` (formats.md, docs/formats/nvidia.md): one line per GPU,
//! `[0] GeForce GTX 750 Ti | 48'C,   7 % |   213 /  1995 MB | user(213M)`,
//! under a `host  ctime  [driver]` line. Its `MB` are MiB (gpustat divides by
//! 1024²). With `-p`/`-c`/`-u` each process reads `user:command/pid(NM)`;
//! only entries with a PID become process records.

use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{Facts, GpuProcessRecord, GpuRecord};

/// `[0] NAME | 48'C,   7 % | 213 / 1995 MB |` and an optional power field
/// (`-P`: `, 20 / 250 W`) and fan field (`-F`: `, 30 %`) before the memory;
/// gpustat 1.x prints `°C` (wookayin/gpustat gpustat/core.py, 1.0), the
/// encoder and decoder use after the utilisation with `-e` (`(E:  88 %
/// D:  67 %)`), and no closing `|` when no process column follows.
pub(crate) static GPU_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\[(?P<index>[0-9]{1,3})\]\s+(?P<name>[^|]*?)\s*\|\s*(?:[0-9]+|\?+)\s*(?:'|°)C,\s*(?:(?:[0-9]+|\?+)\s*%\s*,\s*)?(?:[0-9]+|\?+)\s*%(?:\s*\(E:\s*(?:[0-9]+|\?+)\s*%\s+D:\s*(?:[0-9]+|\?+)\s*%\))?(?:\s*,\s*(?:[0-9]+|\?+)\s*/\s*(?:[0-9]+|\?+)\s*W)?\s*\|\s*(?P<used>[0-9]+)\s*/\s*(?P<total>[0-9]+)\s*MB\s*(?:\|(?P<procs>.*))?$",
    )
    .expect("gpustat gpu line regex")
});

/// One process entry: `user(213M)`, `user:python/12345(1234M)`,
/// `python/12345(1234M)`; `(null)` where gpustat found no process.
static PROCESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:(?P<user>[^\s:/()]+):)?(?P<cmd>[^\s/()]+)?(?:/(?P<pid>[0-9]+))?\((?P<mem>[0-9]+)M\)",
    )
    .expect("gpustat process regex")
});

/// A process under its GPU with `--show-full-cmd` (gpustat 1.x):
/// ` ├─  48448 (  85%,  257MB): python` — CPU use and host memory, then
/// the command.
static PROCESS_TREE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*[├└]─\s*[0-9]+ \(\s*[0-9.]+%,\s*[0-9.]+[KMGT]?i?B\): \S")
        .expect("gpustat process tree regex")
});

/// The line gpustat prints above its GPUs: `feline  Sun Aug 13 15:45:59 2017`,
/// newer versions with the driver version after the time.
static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\S+\s+[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-3]?[0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] [0-9]{4}(?:\s+[0-9]+\.[0-9]+(?:\.[0-9]+)?)?\s*$",
    )
    .expect("gpustat header regex")
});

/// `gpustat 0.4.0.dev` (`--version`), and the command typed for it
/// (`% python -m gpustat -cpu`).
static VERSION_OR_COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:gpustat [0-9]+\.[0-9]+\S*|.*[$#%>]\s*(?:python3? -m )?gpustat(?:\s+-{1,2}[0-9A-Za-z_-]+)*)\s*$",
    )
    .expect("gpustat version regex")
});

/// Parses one segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut unrecognized = 0;
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        if let Some(c) = GPU_LINE.captures(text) {
            let index: Option<u32> = c["index"].parse().ok();
            let name = c["name"].trim();
            facts.gpus.push(GpuRecord {
                index,
                name: (!name.is_empty()).then(|| name.to_owned()),
                memory_used_mib: c["used"].parse().ok(),
                memory_total_mib: c["total"].parse().ok(),
                span: Some(line.span),
                ..GpuRecord::default()
            });
            let procs = c.name("procs").map_or("", |m| m.as_str());
            for p in PROCESS.captures_iter(procs) {
                let Some(pid) = p.name("pid").and_then(|m| m.as_str().parse().ok()) else {
                    continue;
                };
                facts.gpu_processes.push(GpuProcessRecord {
                    gpu_index: index,
                    gpu_uuid: None,
                    pid,
                    name: p.name("cmd").map_or("", |m| m.as_str()).to_owned(),
                    name_truncated: false,
                    used_mib: p["mem"].parse().ok(),
                    used_truncated: false,
                    span: line.span,
                });
            }
            continue;
        }
        if HEADER.is_match(text) || VERSION_OR_COMMAND.is_match(text) || PROCESS_TREE.is_match(text)
        {
            continue;
        }
        unrecognized += 1;
    }
    unrecognized
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(input: &str) -> (Facts, u32) {
        let mut facts = Facts::default();
        let n = parse(&Line::numbered(input), &mut facts);
        (facts, n)
    }

    /// https://github.com/wookayin/gpustat/issues/18 (gpustat 0.4, fixture
    /// 106 of the real corpus): header, command and one GPU, no process.
    #[test]
    fn a_gpu_line_is_a_gpu_record_with_its_memory() {
        let (facts, missed) = read(
            "gpustat 0.4.0.dev\n% python -m gpustat -cpu                       \nfeline  Sun Aug 13 15:45:59 2017\n[0] GeForce GTX 750 Ti | 48'C,   7 % |   213 /  1995 MB |\n",
        );
        assert_eq!(missed, 0);
        assert_eq!(facts.gpus.len(), 1);
        let g = &facts.gpus[0];
        assert_eq!(g.index, Some(0));
        assert_eq!(g.name.as_deref(), Some("GeForce GTX 750 Ti"));
        assert_eq!(
            (g.memory_used_mib, g.memory_total_mib),
            (Some(213), Some(1995))
        );
        assert_eq!(g.span.map(|s| s.line), Some(4));
        assert!(facts.gpu_processes.is_empty());
    }

    /// https://github.com/qizhou000/VisEdit/issues/5 (a newer gpustat): the
    /// process field reads `(null)`, no process record.
    #[test]
    fn a_null_process_field_is_no_process() {
        let (facts, missed) =
            read("[6] NVIDIA A100 80GB PCIe | 52'C, 100 % | 10151 / 81920 MB | (null)\n");
        assert_eq!(missed, 0);
        assert_eq!(facts.gpus[0].index, Some(6));
        assert_eq!(facts.gpus[0].memory_used_mib, Some(10151));
        assert!(facts.gpu_processes.is_empty());
    }

    #[test]
    fn other_lines_are_counted() {
        let (facts, missed) = read("[0] not a gpustat line\nhello\n");
        assert_eq!(missed, 2);
        assert!(facts.gpus.is_empty());
    }
}
