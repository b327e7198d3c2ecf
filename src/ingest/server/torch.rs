//! PyTorch's C++ log lines (c10 logging, docs/formats/servers.md) and the c10d
//! reports that rules need typed (docs/rules/nccl-watchdog-timeout.md): the NCCL watchdog's
//! timeout with its sequence number, op and durations, the companion lines,
//! and NCCL errors with their reason and version.

use std::sync::LazyLock;

use regex::Regex;

use super::{time_of_day, yearless};
use crate::model::{Timestamp, TorchDist, TorchDistKind};

/// `[E601 12:30:00.426415540 ProcessGroupNCCL.cpp:629] msg` (a thread id may
/// sit before the file) and the older `[E ProcessGroupNCCL.cpp:475] msg`.
/// c10 pads the day but not the month: `E601` is June 1, `E1029` October 29.
static C10: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\[(?P<level>[IWEF])
        (?:(?P<mon>[0-9]{1,2})(?P<day>[0-9][0-9])\x20(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?:\.(?P<frac>[0-9]{1,9}))?)?
        \x20(?:[0-9]+\x20)?(?P<source>[0-9A-Za-z_.]+:[0-9]+)\]\x20?(?P<msg>.*)$",
    )
    .expect("c10 line regex")
});

static RANK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bRank (?P<rank>[0-9]+)\]").expect("c10d rank regex"));

static WATCHDOG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)(?:Rank\x20(?P<rank>[0-9]+)\]\s+)?Watchdog\x20caught\x20collective\x20operation\x20timeout:\x20
        WorkNCCL\(SeqNum=(?P<seq>[0-9]+),\x20OpType=(?P<op>[A-Z_]+)
        (?:,\x20NumelIn=(?P<in>-?[0-9]+),\x20NumelOut=(?P<out>-?[0-9]+))?
        # A paste may cut the line anywhere after the op (GitHub's issue
        # form, a terminal): the head still names the rank, op and SeqNum.
        (?:,\x20Timeout\(ms\)(?:=(?P<timeout>[0-9]+)\)\x20ran\x20for\x20(?P<ran>[0-9]+)\x20milliseconds)?)?",
    )
    .expect("watchdog timeout regex")
});

static FAILURE_DETECTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:Rank (?P<rank>[0-9]+)\]\s+)?failure detected by watchdog at work sequence id: (?P<seq>[0-9]+) PG status: last enqueued work: (?P<enq>-?[0-9]+), last completed work: (?P<done>-?[0-9]+)",
    )
    .expect("failure detected regex")
});

static STUCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"watchdog got stuck for (?P<secs>[0-9]+) seconds").expect("watchdog stuck regex")
});

/// c10d's `NCCL error in: file:line, reason, NCCL version X` and the pynccl
/// wrappers' `NCCL error: reason (run with NCCL_DEBUG=INFO for details)`.
static NCCL_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"NCCL error(?: in: (?P<loc>[^\s,]+:[0-9]+),|:) (?P<reason>.+?)(?: \(run with NCCL_DEBUG=[0-9A-Za-z_]+ for details\)| - please report this issue to the NCCL developers)?(?:, NCCL version (?P<ver>[0-9][0-9A-Za-z_.+-]*))?$",
    )
    .expect("nccl error regex")
});

pub(super) struct C10Line<'t> {
    pub level: char,
    pub source: &'t str,
    pub time: Option<Timestamp>,
    pub message: &'t str,
}

/// Whether `text` may be a c10 line: the cheap test before [`parse_c10`].
pub(super) fn may_be_c10(text: &str) -> bool {
    matches!(text.as_bytes(), [b'[', b'I' | b'W' | b'E' | b'F', ..])
}

pub(super) fn parse_c10(text: &str, reference: Option<Timestamp>) -> Option<C10Line<'_>> {
    let c = C10.captures(text)?;
    let time = (|| {
        let month = c.name("mon")?.as_str().parse().ok()?;
        let day = c.name("day")?.as_str().parse().ok()?;
        let time = time_of_day(c.name("hms")?.as_str(), c.name("frac").map(|m| m.as_str()))?;
        yearless(month, day, time, reference)
    })();
    Some(C10Line {
        level: c["level"].chars().next().unwrap_or('E'),
        source: c.name("source").map_or("", |m| m.as_str()),
        time: time.or(reference),
        message: c.name("msg").map_or("", |m| m.as_str()),
    })
}

/// The first `[Rank N]` / `[PG … Rank N]` a c10d message names.
pub(super) fn message_rank(text: &str) -> Option<u32> {
    RANK.captures(text)?["rank"].parse().ok()
}

/// `re`'s captures in `text`, asked `is_match` first: [`detect`] is asked
/// of every exception a traceback closes with, and most match none of its
/// patterns, each of which would allocate its captures to say so.
fn captures<'t>(re: &Regex, text: &'t str) -> Option<regex::Captures<'t>> {
    if re.is_match(text) {
        re.captures(text)
    } else {
        None
    }
}

/// A c10d report recognised by its text, wherever it is printed.
pub(super) fn detect(text: &str) -> Option<TorchDist> {
    let dist = |kind, rank: Option<u32>| TorchDist {
        level: None,
        source: None,
        rank: rank.or_else(|| message_rank(text)),
        kind,
    };
    let rank_of = |c: &regex::Captures<'_>| c.name("rank").and_then(|m| m.as_str().parse().ok());
    if let Some(c) = captures(&WATCHDOG, text) {
        let kind = TorchDistKind::WatchdogTimeout {
            seq: c["seq"].parse().ok()?,
            op: c["op"].to_owned(),
            numel_in: c.name("in").and_then(|m| m.as_str().parse().ok()),
            numel_out: c.name("out").and_then(|m| m.as_str().parse().ok()),
            timeout_ms: c.name("timeout").and_then(|m| m.as_str().parse().ok()),
            ran_for_ms: c.name("ran").and_then(|m| m.as_str().parse().ok()),
        };
        return Some(dist(kind, rank_of(&c)));
    }
    if let Some(c) = captures(&FAILURE_DETECTED, text) {
        let kind = TorchDistKind::FailureDetected {
            seq: c["seq"].parse().ok()?,
            last_enqueued: c["enq"].parse().ok()?,
            last_completed: c["done"].parse().ok()?,
        };
        return Some(dist(kind, rank_of(&c)));
    }
    if let Some(c) = captures(&STUCK, text) {
        let kind = TorchDistKind::WatchdogStuck {
            seconds: c["secs"].parse().ok()?,
        };
        return Some(dist(kind, None));
    }
    if text.contains("Heartbeat monitor timed out!") {
        return Some(dist(TorchDistKind::HeartbeatTimeout, None));
    }
    if text.contains("To avoid data inconsistency, we are taking the entire process down.") {
        return Some(dist(TorchDistKind::TakingProcessDown, None));
    }
    if let Some(c) = captures(&NCCL_ERROR, text) {
        let kind = TorchDistKind::NcclError {
            reason: c["reason"].trim().to_owned(),
            location: c.name("loc").map(|m| m.as_str().to_owned()),
            version: c.name("ver").map(|m| m.as_str().to_owned()),
        };
        return Some(dist(kind, None));
    }
    None
}
