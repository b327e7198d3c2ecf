//! vLLM's own lines (docs/formats/servers.md): the logger's `LEVEL MM-DD HH:MM:SS
//! [file.py:N] message` in every version's variant (brackets from 0.8, a
//! `(proc pid=N)` layer peeled before), its start-up landmarks and arguments,
//! and the lines that report a failed engine or worker process.
//!
//! vLLM ≥ 0.6 repeats the whole prefix on every line of a multi-line record
//! (`"\r\n" + prefix`), so a logged traceback arrives as records whose
//! messages are traceback lines: they go to the traceback reader, and the
//! prefix text tells a record's own continuation lines from the next record's.

use std::sync::LazyLock;

use regex::Regex;

use super::args::parse_server_args;
use super::sizes::{count, size_bytes};
use super::{Cx, time_of_day, yearless};
use crate::ingest::vllm_head::head;
use crate::model::{Framework, Landmark, ServerEventKind, Timestamp, VllmFailure};

macro_rules! re {
    ($name:ident, $pattern:expr) => {
        static $name: LazyLock<Regex> = LazyLock::new(|| Regex::new($pattern).expect($pattern));
    };
}

re!(VERSION, r"vLLM API server version (?P<v>\S+)");
re!(
    ENGINE,
    r"Initializing an? (?:V1 )?LLM engine \(v(?P<v>[^)]+)\)(?: with config: (?P<config>.*))?"
);
re!(
    MODEL_LOADED,
    r"(?:Model loading|Loading model weights) took (?P<n>[0-9.]+) ?(?P<u>GiB|GB)(?: and (?P<s>[0-9.]+) ?s)?"
);
re!(KV_TOKENS, r"GPU KV cache size: (?P<n>[0-9,]+) tokens");
re!(
    CONCURRENCY,
    r"Maximum concurrency for (?P<t>[0-9,]+) tokens per request: (?P<x>[0-9.]+)x"
);
re!(
    KV_MEMORY,
    r"(?:Available KV cache memory:|reserved for KV Cache is) ?(?P<n>[0-9.]+) ?(?P<u>GiB|GB)"
);
re!(
    BLOCKS,
    r"(?:# )?GPU blocks: (?P<g>[0-9]+), # CPU blocks: (?P<c>[0-9]+)"
);

re!(
    INIT_FAILED,
    r"Engine core initialization failed\.(?: See root cause above\.)?(?: Failed core proc\(s\): \{(?P<procs>[^}]*)\})?"
);
re!(FAILED_PROC, r"'(?P<name>[^']+)':\s*(?P<code>-?[0-9]+)");
re!(
    CORE_DIED,
    r"Engine core proc (?P<name>\S+) died unexpectedly, shutting down client\."
);
re!(
    WORKER_DIED,
    r"Worker proc (?P<name>\S+) died unexpectedly(?: \(exit code: (?P<code>-?[0-9]+)\))?, shutting down executor\."
);
re!(
    V0_WORKER_DIED,
    r"Worker (?P<name>\S+) pid (?P<pid>[0-9]+) died, exit code: (?P<code>-?[0-9]+)"
);
re!(
    V0_WORKER_EXCEPTION,
    r"Exception in worker (?P<name>\S+) while processing method (?P<method>[0-9A-Za-z_]+)"
);

pub(super) struct Record<'t> {
    /// Everything before the message: equal on every line of one record.
    pub prefix: &'t str,
    pub time: Option<Timestamp>,
    pub message: &'t str,
}

/// Reads the logger prefix; `reference` supplies the year vLLM leaves out.
/// Whether `text` may be a vLLM record: the cheap test before
/// [`parse_record`] (a level name first).
pub(super) fn may_be_record(text: &str) -> bool {
    matches!(
        text.as_bytes().first(),
        Some(b'D' | b'I' | b'W' | b'E' | b'C')
    )
}

pub(super) fn parse_record(text: &str, reference: Option<Timestamp>) -> Option<Record<'_>> {
    let head = head(text)?;
    let time = (|| {
        let month = head.month.parse().ok()?;
        let day = head.day.parse().ok()?;
        let hms = match head.hms.len() {
            5 => format!("{}:00", head.hms),
            _ => head.hms.to_owned(),
        };
        let time = time_of_day(&hms, head.frac)?;
        yearless(month, day, time, reference)
    })();
    Some(Record {
        prefix: head.prefix,
        time,
        message: head.message,
    })
}

impl Cx<'_> {
    pub(super) fn vllm(&mut self, record: Record<'_>) {
        let kinds = classify(record.message);
        let time = record.time.or(self.writer.time);
        if !kinds.is_empty() {
            self.stream.tracebacks.end_continuation();
            for kind in kinds {
                self.push(kind, Some(Framework::Vllm), None, time);
            }
            return;
        }
        if self.plain(record.message, Some(record.prefix), time) {
            return;
        }
        self.detect(record.message, None, None, time);
    }
}

/// The landmarks, arguments, versions and failures a record's message states.
fn classify(msg: &str) -> Vec<ServerEventKind> {
    let mut kinds = Vec::new();
    if let Some(c) = VERSION.captures(msg) {
        kinds.push(version(&c["v"]));
    } else if let Some(c) = ENGINE.captures(msg) {
        kinds.push(version(&c["v"]));
        // A paste may cut the config (`(v0.18.0) ...`): the version stands.
        if let Some(config) = c.name("config") {
            kinds.push(ServerEventKind::Args(parse_server_args(config.as_str())));
        }
    } else if let Some(args) = msg
        .strip_prefix("args: ")
        .or_else(|| msg.strip_prefix("non-default args: "))
    {
        kinds.push(ServerEventKind::Args(parse_server_args(args)));
    } else if let Some(landmark) = landmark(msg) {
        kinds.push(ServerEventKind::Landmark(landmark));
    } else if let Some(failure) = failure(msg) {
        kinds.push(ServerEventKind::VllmFailure(failure));
    }
    kinds
}

/// How vLLM's own messages begin, for a line pasted without the logger's
/// prefix (or with the prefix cut): such a line is vLLM's by its message.
/// `# ` may be lost to Markdown, which makes it a heading. `true`: the
/// message states figures, and is vLLM's only when they read.
const OWN_MESSAGES: &[(&str, bool)] = &[
    ("vLLM API server version ", true),
    ("Initializing an LLM engine (v", true),
    ("Initializing a V1 LLM engine (v", true),
    ("Loading model weights took ", true),
    ("Model loading took ", true),
    ("Available KV cache memory: ", true),
    ("GPU KV cache size: ", true),
    ("# GPU blocks: ", true),
    ("GPU blocks: ", true),
    ("Maximum concurrency for ", true),
    ("Memory profiling takes ", false),
    ("Memory profiling results: total_gpu_memory=", false),
    ("The model's max seq len (", false),
    (
        "Bfloat16 is only supported on GPUs with compute capability of at least ",
        false,
    ),
    ("Writing input of failed execution to ", false),
    // The engine core's start-up steps (vllm/v1/worker/gpu_model_runner.py
    // load_model(), vllm/distributed/parallel_state.py
    // init_distributed_environment()), kept under `(EngineCore pid=N)` when
    // a poster cuts the level and time.
    ("Starting to load model ", false),
    ("world_size=", false),
    // The API server's verdict, pasted without `RuntimeError: `.
    ("Engine core initialization failed.", false),
];

/// The tail of a cut logger prefix, `model_runner_base.py:120] `: the
/// message after it.
static CUT_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[0-9A-Za-z_.-]+\.py:[0-9]+\]\x20(?P<msg>\S.*)$").expect("cut vllm prefix regex")
});

/// A message of vLLM's own, pasted bare (one of [`OWN_MESSAGES`]) or under
/// a cut prefix (any message): the message, or `None` when the line is not
/// vLLM's.
pub(super) fn bare(text: &str) -> Option<&str> {
    if text.as_bytes().first().is_some_and(u8::is_ascii_lowercase) {
        if let Some(m) = text
            .contains(".py:")
            .then(|| CUT_PREFIX.captures(text))
            .flatten()
            .and_then(|c| c.name("msg"))
        {
            return Some(m.as_str());
        }
    }
    let (_, figures) = OWN_MESSAGES.iter().find(|(m, _)| text.starts_with(m))?;
    (!figures || !classify(text).is_empty()).then_some(text)
}

impl Cx<'_> {
    /// A bare vLLM message ([`bare`]): its landmarks, else what the
    /// text-only detectors find in it.
    pub(super) fn vllm_bare(&mut self, msg: &str) {
        self.stream.tracebacks.end_continuation();
        let time = self.writer.time;
        let kinds = classify(msg);
        if kinds.is_empty() {
            self.detect(msg, None, None, time);
        }
        for kind in kinds {
            self.push(kind, Some(Framework::Vllm), None, time);
        }
    }
}

/// Whether [`bare`] reads `text`.
pub(super) fn may_be_bare(text: &str) -> bool {
    bare(text).is_some()
}

fn version(v: &str) -> ServerEventKind {
    ServerEventKind::Version {
        component: "vLLM".to_owned(),
        version: v.to_owned(),
    }
}

fn landmark(msg: &str) -> Option<Landmark> {
    if let Some(c) = MODEL_LOADED.captures(msg) {
        return Some(Landmark::ModelLoaded {
            weights_bytes: size_bytes(&c["n"], &c["u"])?,
            elapsed_secs: c.name("s").and_then(|s| s.as_str().parse().ok()),
        });
    }
    if let Some(c) = KV_TOKENS.captures(msg) {
        return Some(Landmark::KvCacheTokens {
            tokens: count(&c["n"])?,
        });
    }
    if let Some(c) = CONCURRENCY.captures(msg) {
        return Some(Landmark::MaxConcurrency {
            tokens_per_request: count(&c["t"])?,
            factor: c["x"].parse().ok()?,
        });
    }
    if let Some(c) = KV_MEMORY.captures(msg) {
        return Some(Landmark::AvailableKvCacheMemory {
            bytes: size_bytes(&c["n"], &c["u"])?,
        });
    }
    if let Some(c) = BLOCKS.captures(msg) {
        return Some(Landmark::KvCacheBlocks {
            gpu: c["g"].parse().ok()?,
            cpu: c["c"].parse().ok()?,
        });
    }
    None
}

/// vLLM's process-failure lines (docs/rules/vllm-engine-core-failed.md), found anywhere in a
/// message or an exception line.
pub(super) fn failure(text: &str) -> Option<VllmFailure> {
    if !(text.contains("Engine") || text.contains("Worker") || text.contains("worker")) {
        return None;
    }
    let plain: [(&str, VllmFailure); 5] = [
        (
            "EngineCore failed to start.",
            VllmFailure::EngineCoreFailedToStart,
        ),
        (
            "EngineCore encountered a fatal error.",
            VllmFailure::EngineCoreFatalError,
        ),
        (
            "EngineCore encountered an issue. See stack trace (above) for the root cause.",
            VllmFailure::EngineDead,
        ),
        (
            "WorkerProc failed to start.",
            VllmFailure::WorkerProcFailedToStart,
        ),
        (
            "WorkerProc initialization failed due to an exception in a background process.",
            VllmFailure::WorkerProcInitFailed,
        ),
    ];
    if let Some((_, failure)) = plain.into_iter().find(|(t, _)| text.contains(t)) {
        return Some(failure);
    }
    if let Some(c) = INIT_FAILED.captures(text) {
        let failed = c.name("procs").map_or_else(Vec::new, |procs| {
            FAILED_PROC
                .captures_iter(procs.as_str())
                .filter_map(|p| Some((p["name"].to_owned(), p["code"].parse().ok()?)))
                .collect()
        });
        return Some(VllmFailure::EngineInitFailed { failed });
    }
    if let Some(c) = CORE_DIED.captures(text) {
        return Some(VllmFailure::EngineCoreDied {
            name: c["name"].to_owned(),
        });
    }
    if let Some(c) = WORKER_DIED.captures(text) {
        return Some(VllmFailure::WorkerDied {
            name: c["name"].to_owned(),
            pid: None,
            exit_code: c.name("code").and_then(|m| m.as_str().parse().ok()),
        });
    }
    if let Some(c) = V0_WORKER_DIED.captures(text) {
        return Some(VllmFailure::WorkerDied {
            name: c["name"].to_owned(),
            pid: c["pid"].parse().ok(),
            exit_code: c["code"].parse().ok(),
        });
    }
    if let Some(c) = V0_WORKER_EXCEPTION.captures(text) {
        return Some(VllmFailure::WorkerException {
            worker: c["name"].to_owned(),
            method: c["method"].to_owned(),
        });
    }
    None
}
