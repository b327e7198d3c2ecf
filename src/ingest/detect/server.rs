//! Detection of what a serving process writes: SGLang's and vLLM's own
//! lines, the PyTorch, NCCL and Python lines they carry, the layers a
//! supervisor or log viewer adds in front (docker compose, `docker logs -t`,
//! Ray), and `python -m sglang.check_env`.
//!
//! Inside a server log, NCCL, c10, traceback and Ray-prefixed lines are
//! ordinary content: they continue the open server segment rather than
//! split it, so that one parser sees a traceback from start to end.

use super::{Class, re};
use crate::ingest::Format;
use crate::ingest::process_head::process_head;
use crate::ingest::server::is_vllm_process_name;

// SGLang's prefix; before 0.4 the time of day alone, with the rank.
re!(
    SGLANG,
    r"^\[(?:[0-9]{4}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]{3})?(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)[0-9]+)*|[0-9][0-9]:[0-9][0-9]:[0-9][0-9](?: (?:DP|PP|TP|EP)[0-9]+)+)\] "
);
re!(
    VLLM,
    r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]+)? \[?[^\]\s]+:[0-9]+\](?: |$)"
);
re!(
    NCCL,
    r"^(?:\[[0-9]{4}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\] )?[A-Za-z0-9][0-9A-Za-z_.-]*:[0-9]+:[0-9]+ \[-?[0-9]+\] (?:[0-9A-Za-z_./-]+:[0-9]+(?: \([0-9A-Za-z_]+\))? )?NCCL (?:INFO|WARN|ERROR|ABORT|TRACE)\b"
);
re!(
    C10,
    r"^\[[IWEF](?:[0-9]{3,4} [0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]+)?)? (?:[0-9]+ )?[0-9A-Za-z_.]+:[0-9]+\]"
);
re!(TORCH_RANK, r"^\[rank[0-9]+\]:");
re!(
    MPI_TAG,
    r"^\[(?:[0-9A-Za-z_.-]+@)?[0-9]+,[0-9]+\]<(?:stdout|stderr|stddiag)>: ?(?P<rest>.*)$"
);
re!(
    PYTHON,
    r"^(?:Traceback \(most recent call last\):|terminate called after throwing an instance of ')"
);
// A Python exception line alone (`torch.OutOfMemoryError: CUDA out of
// memory. …`, `Exception: Capture cuda graph failed: …`): a dotted name
// ending in `Error` (never `Error` alone, which any tool prints) or
// `Exception`, then `: ` and a message.
re!(
    EXCEPTION,
    r"^(?:[A-Za-z_][0-9A-Za-z_]*\.)*(?:[A-Za-z_][0-9A-Za-z_]*Error|(?:[A-Za-z_][0-9A-Za-z_]*)?Exception): \S"
);
re!(
    COMPOSE,
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*) +\|(?: (?P<rest>.*))?$"
);
re!(COMPOSE_REPLICA, r"[-_][0-9]+$");
re!(
    CHECK_ENV,
    r"^(?:Python: [0-9]+\.[0-9]+|CUDA available: (?:True|False)\s*$|NVIDIA Topology:)"
);

/// [`EXCEPTION`] by hand, for the ASCII lines that are most of them: the
/// dotted name is the run of name bytes the line starts with (`:` ends
/// it), each part starts with a letter or `_`, the last ends in `Error`
/// after something or in `Exception`; then `: ` and a byte no whitespace.
/// `None` where the byte after `: ` is not ASCII (the regex's Unicode
/// `\S` decides). Every line that is no exception, and every line of a
/// traceback segment, pays this test: the regex cost more than the rest of
/// the server sniffer.
pub(super) fn exception_line(line: &str) -> Option<bool> {
    let b = line.as_bytes();
    let name = b
        .iter()
        .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
        .count();
    if b.get(name..name + 2) != Some(b": ") {
        return Some(false);
    }
    let parts_ok = b[..name].split(|&c| c == b'.').all(|part| {
        part.first()
            .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_')
    });
    let last = b[..name].rsplit(|&c| c == b'.').next().unwrap_or(&[]);
    let named = (last.len() > 5 && last.ends_with(b"Error")) || last.ends_with(b"Exception");
    if !parts_ok || !named {
        return Some(false);
    }
    match b.get(name + 2) {
        None => Some(false),
        // `\s` is Unicode's White_Space: of ASCII, `\t\n\v\f\r` and space.
        Some(&c) if c.is_ascii() => Some(!matches!(c, b' ' | b'\t'..=b'\r')),
        Some(_) => None,
    }
}

/// An SGLang line (see `continues_as` in the parent module).
pub(super) fn is_sglang(line: &str) -> bool {
    SGLANG.is_match(line)
}

/// What a line (under its layers) is, for the segment it belongs to.
enum Kind {
    /// Only this framework writes such lines.
    Framework(Format, &'static str),
    /// Lines any server log may carry.
    Content(Format, &'static str),
}

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    use Class::*;
    // Each pattern is gated by a byte it must start with (or hold): a line
    // of another format pays byte tests, not a regex each (issue 23).
    let first = line.as_bytes().first().copied().unwrap_or(0);
    if let Some((head, rest)) = first
        .is_ascii_digit()
        .then(|| crate::ingest::viewer_head::viewer_head(line))
        .flatten()
        .and_then(|h| Some((h, h.rest?)))
    {
        // Nanoseconds and a zone are what docker and kubectl print; with
        // anything less, trust it only in front of server output.
        if head.frac.is_some() || kind(rest).is_some() {
            return Some(Strong(
                Format::ContainerLog,
                "RFC 3339 timestamp before each line (docker logs -t, kubectl logs --timestamps)",
            ));
        }
    }
    if let Some(c) = memchr::memchr(b'|', line.as_bytes()).and_then(|_| COMPOSE.captures(line)) {
        let rest = c.name("rest").map_or("", |m| m.as_str());
        if COMPOSE_REPLICA.is_match(&c["name"]) || kind(rest).is_some() {
            return Some(Strong(
                Format::DockerComposeLog,
                "service name and `|` before each line (docker compose logs)",
            ));
        }
    }
    if matches!(first, b'P' | b'C' | b'N') && CHECK_ENV.is_match(line) {
        return Some(match current {
            Some(Format::SglangCheckEnv) => Continue,
            _ => Strong(
                Format::SglangCheckEnv,
                "Python/CUDA/GPU version listing (python -m sglang.check_env)",
            ),
        });
    }
    match kind(line)? {
        Kind::Framework(format, why) => Some(Strong(format, why)),
        Kind::Content(format, why) => Some(match current {
            Some(f) if carries_content(f) => Continue,
            _ => Strong(format, why),
        }),
    }
}

/// Server logs, and the content-only formats that a server line may follow.
pub(super) fn carries_content(format: Format) -> bool {
    matches!(
        format,
        Format::SglangLog
            | Format::VllmLog
            | Format::NcclLog
            | Format::TorchLog
            | Format::PythonTraceback
            | Format::RayLog
    )
}

fn kind(line: &str) -> Option<Kind> {
    // Open MPI's `[1,3]<stdout>:` (PRRTE: `[nspace@1,3]<stdout>: `) tags
    // whatever a rank prints: the line under it says what it is.
    let first = line.as_bytes().first().copied().unwrap_or(0);
    if let Some(c) = (first == b'[').then(|| MPI_TAG.captures(line)).flatten() {
        return kind(c.name("rest").map_or("", |m| m.as_str()));
    }
    if let Some(head) = (first == b'(').then(|| process_head(line)).flatten() {
        if head.name.is_some_and(is_vllm_process_name) {
            return Some(Kind::Framework(
                Format::VllmLog,
                "vLLM process prefix `(EngineCore_DP0 pid=N)`",
            ));
        }
        return match kind(head.rest.unwrap_or("")) {
            Some(Kind::Framework(format, why)) => Some(Kind::Framework(format, why)),
            _ => Some(Kind::Content(
                Format::RayLog,
                "Ray actor prefix `(Name pid=N, ip=…)`",
            )),
        };
    }
    // NCCL ≥ 2.26 stamps `[YYYY-MM-DD HH:MM:SS] `, like SGLang's main process.
    static NCCL_WORD: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new("NCCL "));
    if NCCL_WORD.find(line.as_bytes()).is_some() && NCCL.is_match(line) {
        return Some(Kind::Content(
            Format::NcclLog,
            "NCCL debug line `host:pid:tid [dev] NCCL …`",
        ));
    }
    if first == b'[' && SGLANG.is_match(line) {
        return Some(Kind::Framework(
            Format::SglangLog,
            "[YYYY-MM-DD HH:MM:SS rank] prefix (SGLang)",
        ));
    }
    if matches!(first, b'D' | b'I' | b'W' | b'E' | b'C') && VLLM.is_match(line) {
        return Some(Kind::Framework(
            Format::VllmLog,
            "LEVEL MM-DD HH:MM:SS [file.py:N] prefix (vLLM)",
        ));
    }
    if first == b'[' && (C10.is_match(line) || TORCH_RANK.is_match(line)) {
        return Some(Kind::Content(
            Format::TorchLog,
            "PyTorch c10 `[E601 … file.cpp:N]` or `[rankN]:` prefix",
        ));
    }
    if matches!(first, b'T' | b't') && PYTHON.is_match(line) {
        return Some(Kind::Content(
            Format::PythonTraceback,
            "Python traceback or C++ abort",
        ));
    }
    if exception_line(line).unwrap_or_else(|| EXCEPTION.is_match(line)) {
        return Some(Kind::Content(
            Format::PythonTraceback,
            "Python exception line `SomethingError: …`",
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::ingest::Format::{self, *};
    use crate::source::{Source, SourceId};

    fn formats(text: &str) -> Vec<(Format, u32, u32)> {
        let source = Source::new("t", text.as_bytes());
        super::super::segment(SourceId(0), &source)
            .into_iter()
            .map(|s| (s.format, s.first_line, s.last_line))
            .collect()
    }

    /// Open MPI's output tags hide nothing from detection (case 058).
    #[test]
    fn mpi_tagged_lines_are_what_is_under_the_tag() {
        let text = "[1,2]<stdout>:\n[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000\n[1,2]<stdout>:smc-gpu-03:29880:30398 [0] NCCL INFO init.cc:867 -> 5\n";
        let got = formats(text);
        assert!(got.iter().any(|(f, _, _)| *f == NcclLog), "{got:?}");
    }

    #[test]
    fn each_server_format_is_its_own() {
        let cases: [(&str, Format); 16] = [
            (
                "[2026-11-27 09:38:52.123 DP0 TP1] Load weight begin.",
                SglangLog,
            ),
            (
                "INFO 02-03 13:14:04 api_server.py:706] vLLM API server version 0.5.5",
                VllmLog,
            ),
            (
                "INFO 06-01 12:00:00 [api_server.py:1043] vLLM API server version 0.8.5",
                VllmLog,
            ),
            (
                "(APIServer pid=4200) INFO 06-01 12:00:00 [api_server.py:1805] x",
                VllmLog,
            ),
            (
                "\x1b[1;36m(VllmWorker rank=1 pid=4243)\x1b[0;0m Traceback (most recent call last):",
                VllmLog,
            ),
            ("(Worker_PP1_TP0 pid=4250) anything", VllmLog),
            (
                "gpu-node-7:4318:4318 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
                NcclLog,
            ),
            (
                "[2025-06-01 12:00:10] gpu-node-7:4318:4401 [0] misc/shmutils.cc:72 NCCL WARN Error",
                NcclLog,
            ),
            (
                "[rank0]:[E601 12:30:00.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog",
                TorchLog,
            ),
            (
                "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout",
                TorchLog,
            ),
            ("Traceback (most recent call last):", PythonTraceback),
            (
                "(WorkerDict pid=3490362, ip=10.0.0.3) [rank0]: Traceback (most recent call last):",
                RayLog,
            ),
            (
                "\x1b[36msglang-1  |\x1b[0m [2026-11-27 09:38:52 TP1] hi",
                DockerComposeLog,
            ),
            ("web_1  | anything at all", DockerComposeLog),
            (
                "2026-11-27T09:38:52.123456789Z [2026-11-27 09:38:52 TP1] hi",
                ContainerLog,
            ),
            (
                "Python: 3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0]",
                SglangCheckEnv,
            ),
        ];
        for (line, format) in cases {
            assert_eq!(formats(line), [(format, 1, 1)], "{line}");
        }
    }

    #[test]
    fn content_lines_stay_inside_the_server_log_they_interrupt() {
        let log = "\
[2026-11-27 09:38:52 TP1] Scheduler hit an exception: Traceback (most recent call last):
gpu-node-7:4318:4401 [1] NCCL INFO Channel 00/02 : 0 1
[rank1]:[W601 12:30:00.000000000 ProcessGroupNCCL.cpp:1250] Warning: x
(WorkerDict pid=1, ip=10.0.0.3) y
Traceback (most recent call last):
RuntimeError: boom
[2026-11-27 09:38:53] Received sigquit from a child process.";
        assert_eq!(formats(log), [(SglangLog, 1, 7)]);
        // A content-only log that a framework line follows is split there.
        assert_eq!(
            formats(
                "gpu-node-7:4318:4318 [0] NCCL INFO NCCL version 2.21.5\nINFO 06-01 12:00:00 [a.py:1] b"
            ),
            [(NcclLog, 1, 1), (VllmLog, 2, 2)]
        );
    }

    #[test]
    fn a_check_env_listing_is_one_segment() {
        let listing = "\
Python: 3.10.12 (main, Nov 20 2023, 15:14:05) [GCC 11.4.0]
CUDA available: True
GPU 0,1: NVIDIA H100 80GB HBM3
PyTorch: 2.5.1+cu124
NVIDIA Topology: 
\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\t0-55\t0\t\tN/A
Legend:
  X    = Self
ulimit soft: 1048576";
        assert_eq!(formats(listing), [(SglangCheckEnv, 1, 10)]);
    }

    #[test]
    fn near_misses() {
        // A healthy log whose model name says "error" is still one SGLang log.
        assert_eq!(
            formats(
                "[2026-03-05 10:00:01] server_args=ServerArgs(model_path='/models/error-7b')\nERROR: not uvicorn"
            ),
            [(SglangLog, 1, 2)]
        );
        // A journal line carrying a vLLM line is the journal's.
        assert_eq!(
            formats("Jun 01 12:00:00 node vllm[4200]: INFO 06-01 12:00:00 [a.py:1] b"),
            [(JournalShort, 1, 1)]
        );
        assert_eq!(
            formats(
                "2026-11-27T09:38:40+0000 ct200 python3[1]: Traceback (most recent call last):"
            ),
            [(JournalShortIso, 1, 1)]
        );
        // nvidia-smi's CSV names vLLM's processes; it is still nvidia-smi.
        assert_eq!(
            formats("GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 4318, VLLM::Worker_TP0, 1018 MiB"),
            [(NvidiaSmiComputeApps, 1, 1)]
        );
        for text in [
            "total | 42",
            "2026-11-27T09:38:52Z hello",
            "INFO: something",
            "(not a prefix) hello",
            "Python: snake",
            "[E] x",
            "host:1:2 NCCL WARN no device",
            "  File \"x.py\", line 1, in f",
            "Error: no such file",
            "KeyError",
            "see RuntimeError: x",
        ] {
            assert_eq!(formats(text), [(Unknown, 1, 1)], "{text}");
        }
    }

    /// The hand-written test says what the regex says, wherever it says
    /// anything.
    #[test]
    fn the_exception_test_is_the_regex() {
        for line in [
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "torch.OutOfMemoryError: CUDA out of memory.",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.63 GiB",
            "Exception: Capture cuda graph failed",
            "MyException: x",
            "_Private.XError: y",
            "Error: no such file",
            "KeyError",
            "KeyError:",
            "KeyError: ",
            "KeyError:  x",
            "KeyError:\tx",
            "KeyError: \tx",
            "KeyError: \u{b}x",
            "KeyError: \u{a0}x",
            "KeyError: é",
            "see RuntimeError: x",
            "1Error: x",
            "a.1Error: x",
            ".RuntimeError: x",
            "a..RuntimeError: x",
            "RuntimeError.: x",
            "Exceptional: x",
            "xException: y",
            "x.Exception: y",
            "RuntimeErrors: x",
            "XError: x",
            "_Error: x",
            "",
            ": x",
        ] {
            let regex = super::EXCEPTION.is_match(line);
            match super::exception_line(line) {
                Some(by_hand) => assert_eq!(by_hand, regex, "{line:?}"),
                None => assert!(!line.is_ascii(), "{line:?}"),
            }
        }
    }

    #[test]
    fn a_bare_exception_line_starts_a_traceback() {
        // fixtures/real/013, 026, 039, 001.
        for text in [
            "ValueError: Free memory on device (0.49/79.32 GiB) on startup is less than desired GPU memory utilization (0.6, 47.59 GiB).",
            "Exception: Capture cuda graph failed: RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. ",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.63 GiB (GPU 0; 44.56 GiB total capacity; 27.91 GiB already allocated; 565.31 MiB free; 27.93 GiB reserved in total by PyTorch)",
            "RuntimeError: CUDA error: out of memory",
        ] {
            assert_eq!(formats(text), [(PythonTraceback, 1, 1)], "{text}");
        }
        // Inside a server log it is content.
        assert_eq!(
            formats("[2026-11-27 09:38:52 TP1] Scheduler hit an exception: x\nValueError: boom"),
            [(SglangLog, 1, 2)]
        );
    }
}
