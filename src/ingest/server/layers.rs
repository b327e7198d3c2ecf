//! The layers other programs put in front of a server's own line, peeled
//! outermost first: a log viewer's timestamp (`docker logs -t`, `kubectl logs
//! --timestamps`), docker compose's `service-1  | `, vLLM's and Ray's
//! `(Name pid=N[, ip=…]) ` and PyTorch's `[rank0]:`. Each layer's metadata is
//! kept on the [`Writer`]; the text under the last layer is what the format
//! parsers read.

use std::sync::LazyLock;

use chrono::{NaiveDate, NaiveTime};
use regex::Regex;

use super::title;
use super::{Outer, StreamKey, Writer, time_of_day};
use crate::model::{Framework, RankTag, Timestamp};

/// RFC 3339 with nanoseconds, as `docker logs -t` and `kubectl logs
/// --timestamps` print it: `2026-11-27T09:38:52.123456789Z `. Web log
/// viewers copy the time on a line of its own, above the line it stamps
/// (`2026-02-14T02:05:12.788Z`): nothing follows it then.
static VIEWER_TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?P<date>\d{4}-\d\d-\d\d)T(?P<hms>\d\d:\d\d:\d\d)(?:\.(?P<frac>\d{1,9}))?
        (?P<tz>Z|(?P<sign>[+-])(?P<oh>\d\d):(?P<om>\d\d))(?:\x20(?P<rest>.*))?$",
    )
    .expect("viewer timestamp regex")
});

/// `sglang-1  | text` (compose v2) or `sglang_1  | text` (v1); names are
/// padded to the longest, so at least one space before the bar.
static COMPOSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)\x20+\|(?:\x20(?P<rest>.*))?$")
        .expect("compose prefix regex")
});

/// vLLM's `(EngineCore_DP0 pid=4201) `, `(VllmWorker rank=1 pid=4243) ` and
/// Ray's `(WorkerDict pid=3490362, ip=10.0.0.3) ` / `(pid=123) `.
static PROCESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\((?:(?P<name>[A-Za-z_][\w.:-]*)\x20)?(?:rank=(?P<rank>\d+)\x20)?pid=(?P<pid>\d+)
        (?:,\x20ip=(?P<ip>[0-9A-Fa-f.:]+))?\)(?:\x20(?P<rest>.*))?$",
    )
    .expect("process prefix regex")
});

/// PyTorch's per-rank prefix: `[rank0]: ` before Python lines,
/// `[rank0]:[E601 …]` before c10 lines.
static TORCH_RANK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[rank(?P<rank>\d+)\]:\x20?(?P<rest>.*)$").expect("torch rank prefix regex")
});

/// An SGR colour code whose ESC a paste lost (` [36m(RayWorkerVllm
/// pid=5085) [0m [E …`): the space or nothing left where the ESC was, then
/// `[`, the parameters and `m`.
static ORPHAN_SGR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|\x20)\[\d{1,3}(?:;\d{1,3})*m").expect("orphan SGR regex"));

/// `text` without the colour codes a paste stripped of their ESC byte. Only
/// a line with a reset code (`[0m`) is touched: a log's own `[1m` alone is
/// left as it is.
pub(super) fn strip_orphan_sgr(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("[0m") {
        return std::borrow::Cow::Borrowed(text);
    }
    match ORPHAN_SGR.replace_all(text, "") {
        std::borrow::Cow::Owned(s) => std::borrow::Cow::Owned(s.trim_start().to_owned()),
        borrowed => borrowed,
    }
}

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
    let (mut viewer, mut compose, mut process, mut torch) = (false, false, false, false);
    loop {
        if !viewer {
            if let Some(c) = viewer_may(text)
                .then(|| VIEWER_TIME.captures(text))
                .flatten()
            {
                if let Some(time) = viewer_time(&c) {
                    writer.time = Some(time);
                    viewer = true;
                    text = c.name("rest").map_or("", |m| m.as_str());
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
                continue;
            }
        }
        if !process && !torch {
            if let Some(c) = process_may(text).then(|| PROCESS.captures(text)).flatten() {
                if let Ok(pid) = c["pid"].parse::<u32>() {
                    process = true;
                    take_process(&c, pid, writer);
                    text = c.name("rest").map_or("", |m| m.as_str());
                    continue;
                }
            }
        }
        if !torch {
            if let Some(c) = torch_may(text).then(|| TORCH_RANK.captures(text)).flatten() {
                if let Ok(rank) = c["rank"].parse::<u32>() {
                    torch = true;
                    let tag = writer.rank.get_or_insert_with(RankTag::default);
                    tag.global = Some(rank);
                    writer.key.torch_rank = Some(rank);
                    text = c.name("rest").map_or("", |m| m.as_str());
                    continue;
                }
            }
        }
        return text;
    }
}

// What each layer's pattern requires at least, tested before the pattern:
// most lines have no layer, and these tests cost next to nothing.
fn viewer_may(text: &str) -> bool {
    // `\d` is any Unicode digit: only an ASCII non-digit rules it out.
    text.as_bytes()
        .first()
        .is_some_and(|b| b.is_ascii_digit() || !b.is_ascii())
}

fn compose_may(text: &str) -> bool {
    text.as_bytes()
        .first()
        .is_some_and(u8::is_ascii_alphanumeric)
        && memchr::memchr(b'|', text.as_bytes()).is_some()
}

fn process_may(text: &str) -> bool {
    text.starts_with('(')
}

fn torch_may(text: &str) -> bool {
    text.starts_with("[rank")
}

/// Whether [`peel`] may find a layer on `text` (never false when it does).
pub(super) fn may_peel(text: &str) -> bool {
    (viewer_may(text) && VIEWER_TIME.is_match(text))
        || (compose_may(text) && COMPOSE.is_match(text))
        || (process_may(text) && PROCESS.is_match(text))
        || (torch_may(text) && TORCH_RANK.is_match(text))
}

fn take_process(c: &regex::Captures<'_>, pid: u32, writer: &mut Writer) {
    let name = c.name("name").map(|m| m.as_str());
    let rank = c.name("rank").and_then(|m| m.as_str().parse().ok());
    writer.pid = Some(pid);
    writer.key.process_pid = Some(pid);
    writer.process = name.map(str::to_owned);
    if let Some(ip) = c.name("ip") {
        writer.host = Some(ip.as_str().to_owned());
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

fn viewer_time(c: &regex::Captures<'_>) -> Option<Timestamp> {
    let date = NaiveDate::parse_from_str(&c["date"], "%Y-%m-%d").ok()?;
    let time: NaiveTime = time_of_day(&c["hms"], c.name("frac").map(|m| m.as_str()))?;
    let offset = match c.name("sign") {
        None => 0,
        Some(sign) => {
            let hours: i32 = c["oh"].parse().ok()?;
            let minutes: i32 = c["om"].parse().ok()?;
            let secs = hours * 3600 + minutes * 60;
            if sign.as_str() == "-" { -secs } else { secs }
        }
    };
    Some(Timestamp {
        local: date.and_time(time),
        offset_secs: Some(offset),
        year_known: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Ray's colours with their ESC lost in a paste
    /// (https://github.com/vllm-project/vllm/issues/2734); brackets that
    /// only look like codes stay.
    #[test]
    fn orphan_colour_codes() {
        assert_eq!(
            strip_orphan_sgr(" [36m(RayWorkerVllm pid=5085) [0m [E ProcessGroupNCCL.cpp:475] x"),
            "(RayWorkerVllm pid=5085) [E ProcessGroupNCCL.cpp:475] x"
        );
        assert_eq!(
            strip_orphan_sgr("a (function operator()) [32m [repeated 6x across cluster] [0m"),
            "a (function operator()) [repeated 6x across cluster]"
        );
        for text in [
            "ERROR 02-13 18:05 [multiproc_executor.py:852] WorkerProc hit an exception.",
            "[2m] not a reset anywhere",
            "arr[0m] has no space before its bracket",
        ] {
            assert_eq!(strip_orphan_sgr(text), text);
        }
    }

    #[test]
    fn plain_lines_are_left_alone() {
        for text in [
            "[2026-11-27 09:38:52 TP1] hi",
            "INFO 06-01 12:00:00 [x.py:1] hi",
            "Traceback (most recent call last):",
            "| 0 NVIDIA H100 |",
            "(not a prefix) hello",
        ] {
            let (rest, w) = peeled(text);
            assert_eq!(rest, text);
            assert_eq!(w.key, StreamKey::default());
        }
    }
}
