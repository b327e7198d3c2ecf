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

use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_till1, take_while_m_n};
use nom::character::complete::char;
use nom::combinator::{opt, recognize};
use nom::sequence::preceded;
use regex::Regex;

use super::args::parse_server_args;
use super::sizes::{count, size_bytes};
use super::{Cx, time_of_day, yearless};
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

/// The logger's head, in its parts: `LEVEL MM-DD HH:MM[:SS][.frac]
/// [file.py:N] message`, the opening bracket absent before 0.8, the seconds
/// absent where a viewer cut them (`ERROR 02-13 18:05 [x.py:852]`).
pub(crate) struct Head<'t> {
    /// Everything before the message: equal on every line of one record.
    pub prefix: &'t str,
    pub month: &'t str,
    pub day: &'t str,
    /// `HH:MM:SS` or `HH:MM`.
    pub hms: &'t str,
    /// Up to six digits of the second (`.123456`).
    pub frac: Option<&'t str>,
    /// After one space; empty when the line ends at the bracket.
    pub message: &'t str,
}

/// Splits a vLLM record's head. A grammar, not a regex: this runs on every
/// vLLM line a search anchors, and a regex with six groups over a whole
/// line took its bounded backtracker about 9,000 instructions a line.
pub(crate) fn head(text: &str) -> Option<Head<'_>> {
    let level = alt((
        tag("DEBUG"),
        tag("INFO"),
        tag("WARNING"),
        tag("ERROR"),
        tag("CRITICAL"),
    ));
    let two = || take_while_m_n(2, 2, |c: char| c.is_ascii_digit());
    let hms = recognize((two(), char(':'), two(), opt((char(':'), two()))));
    let frac = opt(preceded(
        char('.'),
        take_while_m_n(1, 6, |c: char| c.is_ascii_digit()),
    ));
    // `()` for errors: a line that is no record needs no reason why.
    let parsed: nom::IResult<&str, _, ()> = (
        level,
        char(' '),
        two(),
        char('-'),
        two(),
        char(' '),
        hms,
        frac,
        char(' '),
        opt(char('[')),
    )
        .parse(text);
    let (rest, (_, _, month, _, day, _, hms, frac, _, bracket)) = parsed.ok()?;
    // `file.py:123]`: no `]` or space inside, digits after its last colon.
    let (after, source) =
        take_till1::<_, _, ()>(|c: char| c == ']' || c.is_whitespace())(rest).ok()?;
    let after = after.strip_prefix(']')?;
    let (file, line) = source.rsplit_once(':')?;
    // An empty file name stands only behind a bracket, which is then read as
    // the name's first character (`[:12]`).
    if (file.is_empty() && bracket.is_none())
        || line.is_empty()
        || !line.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    // Then the end, or a space and the message, on one line.
    let message = match after.strip_prefix(' ') {
        Some(message) if !message.contains('\n') => message,
        None if after.is_empty() => "",
        _ => return None,
    };
    Some(Head {
        prefix: &text[..text.len() - after.len()],
        month,
        day,
        hms,
        frac,
        message,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::real_lines::real_lines;

    /// The regex the grammar replaced, kept as its oracle.
    static ORACLE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?x)^(?P<prefix>(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\x20
            (?P<mon>[0-9][0-9])-(?P<day>[0-9][0-9])\x20(?P<hms>[0-9][0-9]:[0-9][0-9](?::[0-9][0-9])?)(?:\.(?P<frac>[0-9]{1,6}))?\x20
            \[?(?P<source>[^\]\s]+:[0-9]+)\])(?:\x20(?P<msg>.*))?$",
        )
        .expect("oracle")
    });

    fn oracle(text: &str) -> Option<[Option<&str>; 6]> {
        let c = ORACLE.captures(text)?;
        let group = |name| c.name(name).map(|m| m.as_str());
        Some([
            group("prefix"),
            group("mon"),
            group("day"),
            group("hms"),
            group("frac"),
            Some(group("msg").unwrap_or("")),
        ])
    }

    fn parts(text: &str) -> Option<[Option<&str>; 6]> {
        let h = head(text)?;
        Some([
            Some(h.prefix),
            Some(h.month),
            Some(h.day),
            Some(h.hms),
            h.frac,
            Some(h.message),
        ])
    }

    #[test]
    fn the_grammar_splits_every_line_as_the_regex_did() {
        let mut lines = real_lines();
        // Each real vLLM head, and its bytes cut or changed where the
        // grammar decides: the level, the date, the seconds, the fraction,
        // the bracket, the source, the space before the message.
        let edges = [
            "INFO 11-14 03:12:09 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s",
            "INFO 05-12 09:41:09.123456 [logger.py:43] Received request chatcmpl-1",
            "INFO 05-12 09:41:09.1234567 [logger.py:43] x",
            "INFO 05-12 09:41:09. [logger.py:43] x",
            "WARNING 01-02 03:04:05 engine.py:75] x",
            "ERROR 02-13 18:05 [x.py:852] cut seconds",
            "ERROR 02-13 18:5 [x.py:852] x",
            "DEBUG 01-02 03:04:05 [core.py:9]",
            "DEBUG 01-02 03:04:05 [core.py:9] ",
            "DEBUG 01-02 03:04:05 [core.py:9]x",
            "CRITICAL 01-02 03:04:05 [a:b:9] x",
            "INFO 01-02 03:04:05 [:12] x",
            "INFO 01-02 03:04:05 :12] x",
            "INFO 01-02 03:04:05 [a.py:] x",
            "INFO 01-02 03:04:05 [a.py:1x] x",
            "INFO 01-02 03:04:05 [a b.py:1] x",
            "INFO 01-02 03:04:05 [a\u{a0}b.py:1] x",
            "INFO 01-02 03:04:05 [a.py:1] two\nlines",
            "INFO 01-02 03:04:05 [[a.py:1] x",
            "INFO 01-02 03:04:05  [a.py:1] x",
            "INFOS 01-02 03:04:05 [a.py:1] x",
            "info 01-02 03:04:05 [a.py:1] x",
            "INFO 1-02 03:04:05 [a.py:1] x",
            "INFO 01-02 03:04:05 [a.py:1] ünïcode ✓",
            "INFO:     10.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK",
        ];
        lines.extend(edges.iter().map(|l| l.to_string()));
        let vllm: Vec<String> = lines
            .iter()
            .filter(|l| oracle(l).is_some())
            .cloned()
            .collect();
        for line in &vllm {
            for cut in (0..=line.len()).filter(|&i| line.is_char_boundary(i)) {
                lines.push(line[..cut].to_owned());
            }
        }
        let mut agreed = 0;
        for line in &lines {
            assert_eq!(parts(line), oracle(line), "{line:?}");
            agreed += usize::from(oracle(line).is_some());
        }
        assert!(agreed > 1000, "only {agreed} vLLM heads among the lines");
    }
}
