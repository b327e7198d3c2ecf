//! The layers other programs put in front of a server's own line, peeled
//! outermost first: a log viewer's timestamp (`docker logs -t`, `kubectl logs
//! --timestamps`), docker compose's `service-1  | `, vLLM's and Ray's
//! `(Name pid=N[, ip=…]) `, Open MPI's `[1,N]<stdout>:`, PyTorch's
//! `[rank0]:`, then a logger's record prefix (glog's `E0306 16:40:07.708802
//! 117 file.cc:691] `, TensorRT's `[TensorRT-LLM][INFO] ` / `[TRT] [E] `, Go's
//! `2020/08/10 19:09:42 `, zerolog's console `10:07PM ERR `), and Ray's
//! ` [repeated Nx across cluster]` suffix.
//! Each layer's metadata is kept on the [`Writer`]; the text under the last
//! layer is what the format parsers read.

use std::sync::LazyLock;

use chrono::{NaiveDate, NaiveTime};
use regex::Regex;

use super::title;
use super::{Outer, StreamKey, Writer, time_of_day};
use crate::ingest::process_head::{ProcessHead, process_head};
use crate::ingest::slog_head;
use crate::ingest::viewer_head::{ViewerHead, viewer_head};
use crate::model::{Framework, RankTag, Timestamp};

// RFC 3339 with nanoseconds, as `docker logs -t` and `kubectl logs
// --timestamps` print it: `2026-11-27T09:38:52.123456789Z `. A Kubernetes
// node's own container log files (the CRI's, under `/var/log/pods/`) add
// the stream and a tag, `F` for a full line and `P` for a part of a long
// one (kubelet's `parseCRILog`): `2026-11-27T09:38:52.123456789Z stderr F
// `. Web log viewers copy the time on a line of its own, above the line it
// stamps (`2026-02-14T02:05:12.788Z`): nothing follows it then.
// That time is read by the grammar of `ingest::viewer_head`.

/// The same time in brackets, as a CI viewer (Buildkite) prints it:
/// `[2024-09-05T00:38:34Z] INFO:     Started server process [60858]`.
static VIEWER_TIME_BRACKETED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\[(?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9])T(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?:\.(?P<frac>[0-9]{1,9}))?
        (?P<tz>Z|(?P<sign>[+-])(?P<oh>[0-9][0-9]):(?P<om>[0-9][0-9]))\](?:\x20(?P<rest>.*))?$",
    )
    .expect("bracketed viewer timestamp regex")
});

/// A CI viewer's gutter copied with the log (`  | [2024-09-05T00:38:34Z]
/// …`): one to four spaces, a bar, a space. A table row (`| 0 H100 |`)
/// starts at the bar and ends with one: not a gutter.
static GUTTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\x20{1,4}\|(?:\x20(?P<rest>.*[^|\s]))?\s*$").expect("gutter regex")
});

/// `sglang-1  | text` (compose v2) or `sglang_1  | text` (v1); names are
/// padded to the longest, so at least one space before the bar.
static COMPOSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)\x20+\|(?:\x20(?P<rest>.*))?$")
        .expect("compose prefix regex")
});

/// Ray's own daemons relayed to the driver, which print no PID: `(raylet)
/// `, `(raylet, ip=10.0.0.3) ` (ray python/ray/_private/worker.py,
/// print_worker_logs: the PID is left out for the raylet and the GCS).
static RAY_DAEMON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\((?:raylet|gcs_server|autoscaler|monitor)(?:,\x20ip=[0-9A-Fa-f.:]+)?\)(?:\x20(?P<rest>.*))?$")
        .expect("ray daemon prefix regex")
});

/// PyTorch's per-rank prefix: `[rank0]: ` before Python lines,
/// `[rank0]:[E601 …]` before c10 lines; torchrun's `--tee` prefix names
/// the role and the local rank (`[default0]:`, `[trainer3]:`:
/// torch/distributed/elastic, `[{role}{local_rank}]:`).
static TORCH_RANK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[(?:rank|[a-z][a-z_]*?)(?P<rank>[0-9]+)\]:\x20?(?P<rest>.*)$")
        .expect("torch rank prefix regex")
});

/// A web log viewer's time alone on its line, with a space and no zone
/// (RunPod's `2024-02-02 21:44:03.976`): it stamps the message below it.
static VIEWER_STAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9])\x20(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?:\.(?P<frac>[0-9]{1,9}))?\s*$")
        .expect("viewer stamp regex")
});

/// The bracketed lines a log viewer puts between its time and the message
/// (RunPod's `[b2k2ml81pl56tl]` pod id, then `[info]`).
static VIEWER_BRACKET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[[A-Za-z0-9][0-9A-Za-z_.-]{0,63}\]\s*$").expect("viewer bracket regex")
});

/// Open MPI's `--tag-output`: `[1,3]<stdout>:` (≤ 4.x, no space); PRRTE's
/// `--output tag` (5.x) names the nspace and adds a space:
/// `[prterun-f5n18-100629@1,0]<stdout>: ` (openpmix/prrte#1405).
static MPI_TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[(?:[0-9A-Za-z_.-]+@)?[0-9]+,(?P<rank>[0-9]+)\]<(?:stdout|stderr|stddiag)>:\x20?(?P<rest>.*)$")
        .expect("mpi tag regex")
});

/// glog's prefix (Triton, TensorRT-LLM's backend, klog):
/// `E0306 16:40:07.708802 117 backend_model.cc:691] ` — severity, MMDD,
/// time, thread id, file:line. Triton ≥ 24.x quotes the message. PyTorch's
/// own Python logging writes the same head with the file's path under
/// site-packages (torch/_logging/_internal.py `TorchLogsFormatter`:
/// `W0830 16:40:57.585000 7191 .venv/lib/python3.12/site-packages/torch/utils/cpp_extension.py:2425] `:
/// the file's path made relative, `make_module_path_relative`, with its
/// folders).
static GLOG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^[IWEF](?P<mm>[0-9][0-9])(?P<dd>[0-9][0-9])\x20(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?:\.(?P<frac>[0-9]{1,9}))?
        \x20+[0-9]+\x20[0-9A-Za-z_.+/-]+:[0-9]+\]\x20?(?P<rest>.*)$",
    )
    .expect("glog prefix regex")
});

/// TensorRT's and TensorRT-LLM's loggers: `[TensorRT-LLM][INFO] `,
/// `[TensorRT-LLM][RANK 0][ERROR] `, `[TRT] [E] `, `[TRT-LLM] [W] `, with
/// the Python logger's `[01/20/2025-10:00:00] ` in front.
static TRT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:\[[0-9][0-9]/[0-9][0-9]/[0-9]{4}-[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\]\x20)?\[(?:TensorRT-LLM|TRT-LLM|TRT)\]
        (?:\[RANK\x20[0-9]+\])?\x20?
        \[(?:[VIWEF]|VERBOSE|DEBUG|TRACE|INFO|WARNING|ERROR|INTERNAL_ERROR)\]\x20?(?P<rest>.*)$",
    )
    .expect("tensorrt prefix regex")
});

/// Go's `log` package (`log.LstdFlags`, with `Lmicroseconds` and
/// `Lshortfile` optional): `2020/08/10 19:09:42 file.go:23: ` — the
/// NVIDIA device plugin's and container toolkit's lines.
/// zerolog's console writer (Go: LocalAI), under another layer (`api-1  |
/// 10:07PM ERR [watchdog] error shutting down model …`): a kitchen-clock
/// time and a three-letter level (zerolog console.go, TimeFormat
/// `time.Kitchen`; the frame `zerolog-console` reads it on a line of its
/// own).
static ZEROLOG_CONSOLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[0-9]{1,2}:[0-9][0-9][AP]M (?:TRC|DBG|INF|WRN|ERR|FTL|PNC) (?P<rest>.*)$")
        .expect("zerolog console prefix regex")
});

/// `3:00PM ` or `10:07PM `: a kitchen-clock time first.
fn kitchen_may(text: &str) -> bool {
    let b = text.as_bytes();
    let ampm = |i: usize| matches!(b.get(i..i + 2), Some([b'A' | b'P', b'M']));
    ampm(4) || ampm(5)
}

static GO_LOG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?P<date>[0-9]{4}/[0-9][0-9]/[0-9][0-9])\x20(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?:\.(?P<frac>[0-9]{1,6}))?
        \x20(?:[0-9A-Za-z_.-]+\.go:[0-9]+:\x20)?(?P<rest>.*)$",
    )
    .expect("go log prefix regex")
});

/// Ray's log deduplication suffix: ` [repeated 6x across cluster]`.
static RAY_REPEATED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\x20?\[repeated\x20(?P<n>[0-9]+)x\x20across\x20cluster\]\s*$")
        .expect("ray repeated regex")
});

impl Writer {
    pub(super) fn from_outer(outer: &Outer) -> Writer {
        Writer {
            time: outer.time,
            pid: outer.pid,
            unit: outer.unit.clone(),
            key: StreamKey {
                outer_pid: outer.pid,
                unit: outer.unit.clone(),
                ..StreamKey::default()
            },
            ..Writer::default()
        }
    }
}

/// Peels every layer off `text`, recording what each says in `writer`;
/// returns the text under them. Each layer is peeled at most once.
pub(super) fn peel<'t>(mut text: &'t str, writer: &mut Writer) -> &'t str {
    if let Some(c) = ray_may(text).then(|| RAY_REPEATED.captures(text)).flatten() {
        let whole = c.get(0).map_or(0, |m| m.start());
        writer.repeats = c["n"].parse().ok();
        writer.layered = true;
        text = &text[..whole];
    }
    let (mut viewer, mut compose, mut process, mut torch) = (false, false, false, false);
    let (mut mpi, mut gutter) = (false, false);
    loop {
        if !gutter && !viewer && !compose {
            if let Some(c) = gutter_may(text).then(|| GUTTER.captures(text)).flatten() {
                gutter = true;
                text = c.name("rest").map_or("", |m| m.as_str());
                writer.layered = true;
                continue;
            }
        }
        if !viewer {
            if let Some(c) = bracketed_may(text)
                .then(|| VIEWER_TIME_BRACKETED.captures(text))
                .flatten()
            {
                if let Some(time) = bracketed_head(&c).and_then(|h| viewer_time(&h)) {
                    writer.time = Some(time);
                    viewer = true;
                    text = c.name("rest").map_or("", |m| m.as_str());
                    writer.layered = true;
                    continue;
                }
            }
        }
        if !viewer && !writer.layered {
            if let Some(time) = (viewer_may(text) && text.len() <= 40)
                .then(|| VIEWER_STAMP.captures(text))
                .flatten()
                .and_then(|c| stamp_time(&c))
            {
                writer.stamp = Some(time);
                writer.layered = true;
                return "";
            }
        }
        if !viewer {
            if let Some(head) = viewer_may(text).then(|| viewer_head(text)).flatten() {
                if let Some(time) = viewer_time(&head) {
                    writer.time = Some(time);
                    viewer = true;
                    text = head.rest.unwrap_or("");
                    writer.layered = true;
                    continue;
                }
            }
        }
        if !compose && !process && !torch {
            if let Some(c) = compose_may(text).then(|| COMPOSE.captures(text)).flatten() {
                writer.container = Some(c["name"].to_owned());
                writer.key.container = writer.container.clone();
                compose = true;
                text = c.name("rest").map_or("", |m| m.as_str());
                writer.layered = true;
                continue;
            }
        }
        if !process && !torch {
            // vLLM's `(EngineCore_DP0 pid=4201) `, `(VllmWorker rank=1
            // pid=4243) `, Ray's `(WorkerDict pid=3490362, ip=10.0.0.3) `.
            if let Some(head) = process_may(text).then(|| process_head(text)).flatten() {
                if let Ok(pid) = head.pid.parse::<u32>() {
                    process = true;
                    take_process(&head, pid, writer);
                    text = head.rest.unwrap_or("");
                    writer.layered = true;
                    continue;
                }
            }
            if let Some(c) = process_may(text)
                .then(|| RAY_DAEMON.captures(text))
                .flatten()
            {
                process = true;
                text = c.name("rest").map_or("", |m| m.as_str());
                writer.layered = true;
                continue;
            }
        }
        if !mpi && !process && !torch {
            if let Some(c) = mpi_may(text).then(|| MPI_TAG.captures(text)).flatten() {
                if let Ok(rank) = c["rank"].parse::<u32>() {
                    mpi = true;
                    writer.layered = true;
                    let tag = writer.rank.get_or_insert_with(RankTag::default);
                    tag.global.get_or_insert(rank);
                    writer.key.mpi_rank = Some(rank);
                    text = c.name("rest").map_or("", |m| m.as_str());
                    continue;
                }
            }
        }
        if !torch {
            // A paste may indent the whole line; `[rankN]:` after spaces is
            // still the layer.
            let text_ = text.trim_start_matches(' ');
            if let Some(c) = torch_may(text_)
                .then(|| TORCH_RANK.captures(text_))
                .flatten()
            {
                if let Ok(rank) = c["rank"].parse::<u32>() {
                    torch = true;
                    let tag = writer.rank.get_or_insert_with(RankTag::default);
                    tag.global = Some(rank);
                    writer.key.torch_rank = Some(rank);
                    text = c.name("rest").map_or("", |m| m.as_str());
                    writer.layered = true;
                    continue;
                }
            }
        }
        return peel_record(text, writer);
    }
}

/// A logger's record prefix, innermost of the layers: its time is kept when
/// no outer layer timed the line; what follows is the message.
fn peel_record<'t>(text: &'t str, writer: &mut Writer) -> &'t str {
    let Some(&first) = text.as_bytes().first() else {
        return text;
    };
    // Most lines have no record prefix: the byte tests say so at once.
    if !record_may(text) {
        return text;
    }
    let (rest, time) = if matches!(first, b'I' | b'W' | b'E' | b'F') {
        match GLOG.captures(text) {
            Some(c) => {
                let time =
                    time_of_day(&c["hms"], c.name("frac").map(|m| m.as_str())).and_then(|t| {
                        let (mm, dd) = (c["mm"].parse().ok()?, c["dd"].parse().ok()?);
                        super::yearless(mm, dd, t, writer.time)
                    });
                (c.name("rest").map_or("", |m| m.as_str()), time)
            }
            None => return text,
        }
    } else if first == b'[' {
        match TRT.captures(text) {
            Some(c) => (c.name("rest").map_or("", |m| m.as_str()), None),
            None => return text,
        }
    } else if matches!(first, b'l' | b't') {
        // Go's `log/slog` text handler (Ollama, the NVIDIA container
        // toolkit); a paste may start at `level=`. The message is the `msg`
        // value, quoted or bare.
        match slog_may(text).then(|| slog_head::record(text)).flatten() {
            Some(record) => {
                let time = record
                    .time
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| Timestamp {
                        local: t.naive_local(),
                        offset_secs: Some(t.offset().local_minus_utc()),
                        year_known: true,
                    });
                (record.message, time)
            }
            None => return text,
        }
    } else if first.is_ascii_digit() && kitchen_may(text) {
        match ZEROLOG_CONSOLE.captures(text) {
            Some(c) => (c.name("rest").map_or("", |m| m.as_str()), None),
            None => return text,
        }
    } else if first.is_ascii_digit() {
        match GO_LOG.captures(text) {
            Some(c) => {
                let time = NaiveDate::parse_from_str(&c["date"], "%Y/%m/%d")
                    .ok()
                    .zip(time_of_day(&c["hms"], c.name("frac").map(|m| m.as_str())))
                    .map(|(d, t)| Timestamp {
                        local: d.and_time(t),
                        offset_secs: None,
                        year_known: true,
                    });
                (c.name("rest").map_or("", |m| m.as_str()), time)
            }
            None => return text,
        }
    } else {
        return text;
    };
    writer.record = true;
    writer.layered = true;
    if writer.time.is_none() {
        writer.record_time = time;
    }
    // Triton ≥ 24.x quotes the message: `] "ERROR: Failed to …"`.
    rest.strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or(rest)
}

/// Whether a line under its layers is a bracketed framing line of a log
/// viewer (`[b2k2ml81pl56tl]`, `[info]`).
pub(super) fn is_viewer_bracket(text: &str) -> bool {
    text.starts_with('[') && VIEWER_BRACKET.is_match(text)
}

// What each layer's pattern requires at least, tested before the pattern:
// most lines have no layer, and these tests cost next to nothing.
fn viewer_may(text: &str) -> bool {
    text.as_bytes().first().is_some_and(u8::is_ascii_digit)
}

fn compose_may(text: &str) -> bool {
    text.as_bytes()
        .first()
        .is_some_and(u8::is_ascii_alphanumeric)
        && memchr::memchr(b'|', text.as_bytes()).is_some()
}

fn gutter_may(text: &str) -> bool {
    text.starts_with(' ') && text.trim_start().starts_with('|')
}

fn bracketed_may(text: &str) -> bool {
    // `[YYYY-MM-DDT`: SGLang's `[YYYY-MM-DD HH:MM:SS` fails at the `T`.
    text.starts_with('[')
        && text.as_bytes().get(1).is_some_and(u8::is_ascii_digit)
        && head(text, 12, |b| b[5] == b'-' && b[8] == b'-' && b[11] == b'T')
}

/// Whether `text` is at least `n` bytes long and its first `n` pass
/// `test`: a pattern's fixed bytes checked by position (the patterns'
/// classes are ASCII, so a byte is a character there).
fn head(text: &str, n: usize, test: impl Fn(&[u8]) -> bool) -> bool {
    text.as_bytes().get(..n).is_some_and(test)
}

fn slog_may(text: &str) -> bool {
    (text.starts_with("level=") || text.starts_with("time=")) && text.contains(" msg=")
}

fn process_may(text: &str) -> bool {
    text.starts_with('(')
}

fn torch_may(text: &str) -> bool {
    // `[rank0]:`, or a role's `[trainer3]:` (a `]:` within the head).
    text.starts_with("[rank")
        || (text.starts_with("[")
            && text.as_bytes().get(1).is_some_and(u8::is_ascii_lowercase)
            && memchr::memmem::find(&text.as_bytes()[..text.len().min(24)], b"]:").is_some())
}

fn mpi_may(text: &str) -> bool {
    // The tag's first `]` closes it (`[job,rank]`, `[host@job,rank]`).
    text.starts_with('[')
        && memchr::memchr(b']', text.as_bytes())
            .is_some_and(|i| text.as_bytes()[i..].starts_with(b"]<std"))
}

fn ray_may(text: &str) -> bool {
    text.trim_end().ends_with("cluster]")
}

pub(super) fn record_may(text: &str) -> bool {
    let digits = |b: &[u8]| b.iter().all(u8::is_ascii_digit);
    match text.as_bytes().first() {
        // `E0306 `
        Some(b'I' | b'W' | b'E' | b'F') => {
            head(text, 6, |b| digits(&b[1..5]) && b[5] == b' ') && GLOG.is_match(text)
        }
        // `[TRT]`, `[TensorRT-LLM]`, `[TRT-LLM]`, or a `[MM/DD/YYYY-` stamp first.
        Some(b'[') => {
            (text.starts_with("[T") || head(text, 4, |b| b[3] == b'/')) && TRT.is_match(text)
        }
        // `YYYY/`
        Some(b) if b.is_ascii_digit() => {
            (head(text, 5, |b| b[4] == b'/') && GO_LOG.is_match(text))
                || (kitchen_may(text) && ZEROLOG_CONSOLE.is_match(text))
        }
        Some(b'l' | b't') => slog_may(text) && slog_head::record(text).is_some(),
        _ => false,
    }
}

/// Whether [`peel`] may find a layer on `text` (never false when it does).
pub(super) fn may_peel(text: &str) -> bool {
    may_peel_outer(text) || record_may(text)
}

/// The message under a logger's record prefix when that prefix is the
/// line's only layer (what [`peel`] would leave of it); `None` otherwise.
pub(super) fn record_only(text: &str) -> Option<&str> {
    if may_peel_outer(text) || !record_may(text) {
        return None;
    }
    let mut writer = Writer::default();
    Some(peel_record(text, &mut writer))
}

/// [`record_only`] with the time the record's own head printed, for a line
/// no outer layer timed (a raw log's record).
pub(super) fn record_only_timed(text: &str) -> Option<(&str, Option<Timestamp>)> {
    if may_peel_outer(text) || !record_may(text) {
        return None;
    }
    let mut writer = Writer::default();
    let payload = peel_record(text, &mut writer);
    Some((payload, writer.record_time))
}

/// A line whose only outer layer is a process prefix (vLLM's
/// `(EngineCore_DP0 pid=4201) `, Ray's `(WorkerDict pid=3490362, ip=…) `),
/// a logger's record prefix under it or not: what [`peel`] would record of
/// its writer and leave of it.
pub(super) struct ProcessOnly<'t> {
    pub pid: u32,
    name: Option<&'t str>,
    rank: Option<u32>,
    /// A logger's record prefix was peeled under the process prefix.
    pub record: bool,
    pub payload: &'t str,
}

impl ProcessOnly<'_> {
    /// The framework the prefix names (vLLM's process roles), as [`peel`]
    /// sets it on the writer.
    pub(super) fn framework(&self) -> Option<Framework> {
        self.name
            .and_then(|n| title::vllm_prefix_name(n, self.rank))
            .map(|_| Framework::Vllm)
    }
}

/// [`ProcessOnly`] of `text`; `None` when it has no process prefix or any
/// other layer than a record prefix under it (Ray's repeat suffix included).
pub(super) fn process_only(text: &str) -> Option<ProcessOnly<'_>> {
    if !process_may(text) || ray_may(text) {
        return None;
    }
    let head = process_head(text)?;
    let pid = head.pid.parse::<u32>().ok()?;
    let rest = head.rest.unwrap_or("");
    if may_peel_outer(rest) {
        return None;
    }
    let (record, payload) = match record_may(rest) {
        true => {
            let mut writer = Writer::default();
            let payload = peel_record(rest, &mut writer);
            (writer.record, payload)
        }
        false => (false, rest),
    };
    Some(ProcessOnly {
        pid,
        name: head.name,
        rank: head.rank.and_then(|r| r.parse().ok()),
        record,
        payload,
    })
}

/// [`may_peel`] for every layer but a record prefix, the innermost.
fn may_peel_outer(text: &str) -> bool {
    (viewer_may(text) && viewer_head(text).is_some())
        || (compose_may(text) && COMPOSE.is_match(text))
        || (process_may(text) && (process_head(text).is_some() || RAY_DAEMON.is_match(text)))
        || (torch_may(text.trim_start_matches(' '))
            && TORCH_RANK.is_match(text.trim_start_matches(' ')))
        || (gutter_may(text) && GUTTER.is_match(text))
        || (bracketed_may(text) && VIEWER_TIME_BRACKETED.is_match(text))
        || (mpi_may(text) && MPI_TAG.is_match(text))
        || (ray_may(text) && RAY_REPEATED.is_match(text))
        || (viewer_may(text) && text.len() <= 40 && VIEWER_STAMP.is_match(text))
}

fn take_process(head: &ProcessHead<'_>, pid: u32, writer: &mut Writer) {
    let name = head.name;
    let rank = head.rank.and_then(|r| r.parse().ok());
    writer.pid = Some(pid);
    writer.key.process_pid = Some(pid);
    writer.process = name.map(str::to_owned);
    if let Some(ip) = head.ip {
        writer.host = Some(ip.to_owned());
    }
    match name.and_then(|n| title::vllm_prefix_name(n, rank)) {
        Some(p) => {
            writer.framework = Some(Framework::Vllm);
            if !p.rank.is_empty() {
                writer.rank = Some(p.rank);
            }
        }
        None => {
            if let Some(rank) = rank {
                writer.rank = Some(RankTag {
                    global: Some(rank),
                    ..RankTag::default()
                });
            }
        }
    }
}

fn stamp_time(c: &regex::Captures<'_>) -> Option<Timestamp> {
    let date = NaiveDate::parse_from_str(&c["date"], "%Y-%m-%d").ok()?;
    let time = time_of_day(&c["hms"], c.name("frac").map(|m| m.as_str()))?;
    Some(Timestamp {
        local: date.and_time(time),
        offset_secs: None,
        year_known: true,
    })
}

fn viewer_time(head: &ViewerHead<'_>) -> Option<Timestamp> {
    let date = NaiveDate::parse_from_str(head.date, "%Y-%m-%d").ok()?;
    let time: NaiveTime = time_of_day(head.hms, head.frac)?;
    let offset = match head.offset {
        None => 0,
        Some((sign, hours, minutes)) => {
            let hours: i32 = hours.parse().ok()?;
            let minutes: i32 = minutes.parse().ok()?;
            let secs = hours * 3600 + minutes * 60;
            if sign == '-' { -secs } else { secs }
        }
    };
    Some(Timestamp {
        local: date.and_time(time),
        offset_secs: Some(offset),
        year_known: true,
    })
}

/// A bracketed viewer time's captures as a [`ViewerHead`].
fn bracketed_head<'t>(c: &regex::Captures<'t>) -> Option<ViewerHead<'t>> {
    let s = |name: &str| c.name(name).map(|m| m.as_str());
    Some(ViewerHead {
        date: s("date")?,
        hms: s("hms")?,
        frac: s("frac"),
        offset: match s("sign") {
            Some(sign) => Some((sign.chars().next()?, s("oh")?, s("om")?)),
            None => None,
        },
        rest: s("rest"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_prefix_alone_leaves_its_message_to_skim() {
        let glog =
            r#"I1103 01:55:50.020810    1502 scope.go:117] "RemoveContainer" containerID="06c8""#;
        // What `peel` leaves: a quoted message loses its quotes (Triton's).
        assert_eq!(
            record_only(glog),
            Some(r#"RemoveContainer" containerID="06c8"#)
        );
        assert_eq!(
            record_only("[TRT] [E] 2: out of memory"),
            Some("2: out of memory")
        );
        // Another layer around it, or no record at all: read in full.
        assert_eq!(
            record_only("web-1  | I1103 01:55:50.020810 1 a.go:1] x"),
            None
        );
        assert_eq!(
            record_only("INFO 11-14 03:12:09 [loggers.py:123] Engine 000"),
            None
        );
        assert_eq!(record_only("plain words"), None);
    }

    fn peeled(text: &str) -> (String, Writer) {
        let mut writer = Writer::from_outer(&Outer::default());
        let rest = peel(text, &mut writer).to_owned();
        (rest, writer)
    }

    #[test]
    fn layers_are_peeled_outermost_first_and_kept() {
        let (rest, w) = peeled(
            "2026-11-27T09:38:52.123456789Z sglang-1  | [2026-11-27 09:38:52 TP1] Load weight begin. avail mem=78.35 GB",
        );
        assert_eq!(
            rest,
            "[2026-11-27 09:38:52 TP1] Load weight begin. avail mem=78.35 GB"
        );
        assert_eq!(w.container.as_deref(), Some("sglang-1"));
        let t = w.time.unwrap();
        assert_eq!(t.local.to_string(), "2026-11-27 09:38:52.123456789");
        assert_eq!(t.offset_secs, Some(0));

        // A CRI log file's line: the stream and the full-line tag go with
        // the time (kubernetes/kubernetes pkg/kubelet/kuberuntime/logs).
        let (rest, w) =
            peeled("2016-10-06T00:17:09.669794202Z stdout F The content of the log entry 1");
        assert_eq!(rest, "The content of the log entry 1");
        assert!(w.time.is_some());
        let (rest, _) = peeled("2016-10-06T00:17:10.113242941Z stderr P partial content");
        assert_eq!(rest, "partial content");

        let (rest, w) = peeled(
            "(WorkerDict pid=3490362, ip=10.0.0.3) [rank0]:[E601 12:30:00.426415540 ProcessGroupNCCL.cpp:629] x",
        );
        assert_eq!(rest, "[E601 12:30:00.426415540 ProcessGroupNCCL.cpp:629] x");
        assert_eq!(
            (w.pid, w.process.as_deref(), w.host.as_deref()),
            (Some(3490362), Some("WorkerDict"), Some("10.0.0.3"))
        );
        assert_eq!(w.rank.and_then(|r| r.global), Some(0));
        assert_eq!(w.framework, None);

        let (rest, w) = peeled("(VllmWorker rank=1 pid=4243) INFO 06-01 12:01:10 [x.py:1] hi");
        assert_eq!(rest, "INFO 06-01 12:01:10 [x.py:1] hi");
        assert_eq!(
            (w.framework, w.rank.and_then(|r| r.global)),
            (Some(Framework::Vllm), Some(1))
        );

        let (rest, w) = peeled("(Worker_PP1_TP0 pid=4250) ");
        assert_eq!(rest, "");
        assert_eq!(w.rank.map(|r| (r.pp, r.tp)), Some((Some(1), Some(0))));

        let (_, w) = peeled("2026-11-27T17:38:52+08:00 x");
        assert_eq!(w.time.unwrap().offset_secs, Some(8 * 3600));
        // An empty compose line.
        assert_eq!(peeled("sglang-1  |").0, "");
    }

    /// Open MPI ≤ 4.x `--tag-output` (case 058) and PRRTE's `--output tag`
    /// (https://github.com/openpmix/prrte/issues/1405): the rank is kept, an
    /// empty tagged line is empty under the tag.
    #[test]
    fn mpi_output_tags() {
        let (rest, w) = peeled(
            "[1,3]<stdout>:smc-gpu-03:29881:30401 [0] init.cc:497 NCCL WARN Duplicate GPU detected",
        );
        assert_eq!(
            rest,
            "smc-gpu-03:29881:30401 [0] init.cc:497 NCCL WARN Duplicate GPU detected"
        );
        assert_eq!(w.rank.and_then(|r| r.global), Some(3));
        assert_eq!(w.key.mpi_rank, Some(3));
        let (rest, w) =
            peeled("[prterun-f5n18-100629@1,2]<stderr>: Traceback (most recent call last):");
        assert_eq!(rest, "Traceback (most recent call last):");
        assert_eq!(w.key.mpi_rank, Some(2));
        let (rest, w) = peeled("[1,0]<stdout>:");
        assert_eq!((rest.as_str(), w.layered), ("", true));
        // Not a tag: no stream name.
        assert!(!peeled("[1,0] hello").1.layered);
    }

    /// Ray's dedup suffix (ray/_private/ray_logging.py formats
    /// `line + " [repeated {count}x across cluster]"`): stripped, N kept.
    #[test]
    fn ray_repeated_suffix() {
        let (rest, w) = peeled(
            "(RayWorkerWrapper pid=5310, ip=10.0.0.2) INFO 02-01 10:00:00 model_runner.py:1 Loading model weights took 1 GB [repeated 7x across cluster]",
        );
        assert_eq!(
            rest,
            "INFO 02-01 10:00:00 model_runner.py:1 Loading model weights took 1 GB"
        );
        assert_eq!((w.repeats, w.pid), (Some(7), Some(5310)));
        assert!(may_peel("x [repeated 2x across cluster]"));
    }

    /// glog (Triton: https://github.com/triton-inference-server/tensorrtllm_backend/issues/328,
    /// quoted in https://github.com/NVIDIA/TensorRT-LLM/issues/2440),
    /// TensorRT-LLM's `[TensorRT-LLM][INFO]` (NVIDIA/TensorRT-LLM#10450),
    /// TensorRT's `[TRT] [E]` and Go's `log` prefix.
    #[test]
    fn logger_record_prefixes() {
        let (rest, w) = peeled(
            "E0306 16:40:07.708802 117 backend_model.cc:691] ERROR: Failed to create instance: x",
        );
        assert_eq!(rest, "ERROR: Failed to create instance: x");
        assert!(w.record);
        let t = w.record_time.unwrap();
        assert_eq!(t.local.to_string(), "2000-03-06 16:40:07.708802");
        assert!(!t.year_known);
        let (rest, _) = peeled(
            r#"E1113 01:00:58.469718 3545 backend_model.cc:692] "ERROR: Failed to create instance""#,
        );
        assert_eq!(rest, "ERROR: Failed to create instance");
        for (line, msg) in [
            (
                "[TensorRT-LLM][INFO] Allocate 956301312 bytes for k/v cache.",
                "Allocate 956301312 bytes for k/v cache.",
            ),
            (
                "[TensorRT-LLM][RANK 0][ERROR] CUDA runtime error",
                "CUDA runtime error",
            ),
            (
                "[TRT] [E] 2: [virtualMemoryBuffer.cpp::resizePhysical::140] Error Code 2: OutOfMemory",
                "2: [virtualMemoryBuffer.cpp::resizePhysical::140] Error Code 2: OutOfMemory",
            ),
            ("[01/20/2025-10:00:00] [TRT-LLM] [W] x", "x"),
        ] {
            let (rest, w) = peeled(line);
            assert_eq!((rest.as_str(), w.record), (msg, true), "{line}");
        }
        let (rest, w) =
            peeled("2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device=GPU-7540a9b3");
        assert_eq!(rest, "XidCriticalError: Xid=69 on Device=GPU-7540a9b3");
        assert_eq!(
            w.record_time.unwrap().local.to_string(),
            "2020-08-10 19:09:42"
        );
        let (rest, _) = peeled("2024/01/02 03:04:05.123456 main.go:77: Starting FS watcher.");
        assert_eq!(rest, "Starting FS watcher.");
        // Under an outer time the record's own time is not kept.
        let (rest, w) = peeled("2026-11-27T09:38:52.1Z I1128 01:02:03.000004 1 server.cc:1] hi");
        assert_eq!((rest.as_str(), w.record_time), ("hi", None));
        for text in [
            "E: not glog",
            "[TRT]x",
            "Error 0306 hello",
            "2020/08/10 no time",
        ] {
            assert!(!peeled(text).1.record, "{text}");
        }
    }

    /// RunPod's log viewer prints each record as a time line, `[pod id]`,
    /// `[level]`, then the message (case 067).
    #[test]
    fn viewer_stamp_and_brackets() {
        let (rest, w) = peeled("2024-02-02 21:44:03.976");
        assert_eq!(rest, "");
        assert_eq!(
            w.stamp.unwrap().local.to_string(),
            "2024-02-02 21:44:03.976"
        );
        assert!(peeled("2024-02-02 21:44:03.976 hello").1.stamp.is_none());
        assert!(is_viewer_bracket("[b2k2ml81pl56tl]"));
        assert!(is_viewer_bracket("[info]"));
        assert!(!is_viewer_bracket("[info] message"));
        assert!(!is_viewer_bracket("[]"));
    }

    #[test]
    fn plain_lines_are_left_alone() {
        for text in [
            "[2026-11-27 09:38:52 TP1] hi",
            "INFO 06-01 12:00:00 [x.py:1] hi",
            "Traceback (most recent call last):",
            "| 0 NVIDIA H100 |",
            "  | 0 NVIDIA H100 |",
            "(not a prefix) hello",
        ] {
            let (rest, w) = peeled(text);
            assert_eq!(rest, text);
            assert_eq!(w.key, StreamKey::default());
        }
    }
}
