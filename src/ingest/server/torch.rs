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

/// The catalog row that holds the NCCL watchdog's sentence (one place per
/// message): the reader reads its captures and adds what the row does not
/// say (WorkNCCL's `NumelIn=`/`NumelOut=`, a line cut after the op).
const WATCHDOG_ROW: &str = "stacks-torch.nccl-watchdog-timeout";

/// The row's wording: the whole sentence, with its timeout and duration.
fn watchdog_wording() -> Option<&'static crate::catalogs::Wording> {
    static WORDING: LazyLock<Option<&'static crate::catalogs::Wording>> = LazyLock::new(|| {
        crate::catalogs::catalogs()
            .row(WATCHDOG_ROW)?
            .wordings
            .first()
    });
    *WORDING
}

/// The row's wording up to its first `<*>`: the sentence's head, which
/// names the SeqNum and the op. A paste may cut the line anywhere after
/// the op (GitHub's issue form, a terminal); the head still reads.
static WATCHDOG_HEAD: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let template = watchdog_wording()?.template.as_deref()?;
    let head = &template[..template.find("<*>")?];
    let compiled = crate::catalogs::template::compile(head).ok()?;
    Regex::new(&compiled.regex).ok()
});

/// What WorkNCCL's `operator<<` prints after the op from PyTorch 2.0
/// (`, NumelIn=73728, NumelOut=73728`), right after the head.
static NUMEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^,\x20NumelIn=(?P<in>-?[0-9]+),\x20NumelOut=(?P<out>-?[0-9]+)")
        .expect("numel regex")
});

/// `[Rank 3] ` right before the sentence.
static RANK_BEFORE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Rank\x20(?P<rank>[0-9]+)\]\s+$").expect("rank before regex"));

/// The watchdog's account of the work it failed at and of the group's
/// progress, as ProcessGroupNCCL.cpp's `watchdogHandler` words it: `failure
/// detected by watchdog at work sequence id: N PG status: last enqueued
/// work: N, last completed work: N` (PyTorch 2.2 – 2.3), then `Exception
/// (either an error or timeout) detected by watchdog at work: N, last
/// enqueued NCCL work: N, last completed NCCL work: N.` (2.4 – 2.6; its
/// `Timeout at NCCL work: N, …` line beside it), then `NCCL error is
/// detected by watchdog at work: N, …` (2.7 –). `last completed … -1`: no
/// work of the group ever completed.
static FAILURE_DETECTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:Rank (?P<rank>[0-9]+)\]\s+)?(?:failure detected by watchdog at work sequence id: (?P<seq>[0-9]+) PG status: last enqueued work: (?P<enq>-?[0-9]+), last completed work: (?P<done>-?[0-9]+)|(?:Exception \(either an error or timeout\)|NCCL error is) detected by watchdog at work: (?P<seq2>[0-9]+), last enqueued NCCL work: (?P<enq2>-?[0-9]+), last completed NCCL work: (?P<done2>-?[0-9]+))",
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

/// The NCCL watchdog's timeout, read by its catalog row's wording (its head
/// where the line was cut), and the rank named right before it.
fn watchdog(text: &str) -> Option<(TorchDistKind, Option<u32>)> {
    let head_re = WATCHDOG_HEAD.as_ref()?;
    let head = captures(head_re, text)?;
    let at = head.get(0)?;
    let after = &text[at.end()..];
    let numel = NUMEL.captures(after);
    let numel_of = |name: &str| {
        numel
            .as_ref()
            .and_then(|c| c.name(name))
            .and_then(|m| m.as_str().parse().ok())
    };
    let full = watchdog_wording()
        .and_then(|w| w.regex())
        .and_then(|re| re.captures(&text[at.start()..]));
    let full_of = |name: &str| {
        full.as_ref()
            .and_then(|c| c.name(name))
            .and_then(|m| m.as_str().parse().ok())
    };
    let kind = TorchDistKind::WatchdogTimeout {
        seq: head["seq"].parse().ok()?,
        op: head["op"].to_owned(),
        numel_in: numel_of("in"),
        numel_out: numel_of("out"),
        timeout_ms: full_of("timeout"),
        ran_for_ms: full_of("ran"),
    };
    let rank = RANK_BEFORE
        .captures(&text[..at.start()])
        .and_then(|c| c["rank"].parse().ok());
    Some((kind, rank))
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
    if let Some(kind) = watchdog(text) {
        return Some(dist(kind.0, kind.1));
    }
    if let Some(c) = captures(&FAILURE_DETECTED, text) {
        let field = |a: &str, b: &str| c.name(a).or_else(|| c.name(b)).map(|m| m.as_str());
        let kind = TorchDistKind::FailureDetected {
            seq: field("seq", "seq2")?.parse().ok()?,
            last_enqueued: field("enq", "enq2")?.parse().ok()?,
            last_completed: field("done", "done2")?.parse().ok()?,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn watchdog_of(text: &str) -> (TorchDistKind, Option<u32>) {
        let d = detect(text).expect("a c10d report");
        (d.kind, d.rank)
    }

    /// The sentence lives in its catalog row: the reader finds the row and
    /// reads its wording's head; a row renamed or a wording without its
    /// `<*>` would leave the reader blind, and this says so.
    #[test]
    fn the_watchdog_sentence_is_read_through_its_row() {
        assert!(crate::catalogs::catalogs().row(WATCHDOG_ROW).is_some());
        assert!(
            WATCHDOG_HEAD.is_some(),
            "the row's wording has a head before `<*>`"
        );
        // The row's second sample (vllm-project/vllm#1957), whole.
        let (kind, rank) = watchdog_of(
            "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800762 milliseconds before timing out.",
        );
        assert_eq!(rank, Some(1));
        assert_eq!(
            kind,
            TorchDistKind::WatchdogTimeout {
                seq: 1,
                op: "ALLREDUCE".to_owned(),
                numel_in: Some(1),
                numel_out: Some(1),
                timeout_ms: Some(1_800_000),
                ran_for_ms: Some(1_800_762),
            }
        );
    }

    /// Before PyTorch 2.0 WorkNCCL printed no NumelIn/NumelOut; a paste cut
    /// after the op still names the SeqNum and the op, not the timeout.
    #[test]
    fn older_and_cut_watchdog_lines() {
        let (kind, rank) = watchdog_of(
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800531 milliseconds before timing out.",
        );
        assert_eq!(rank, Some(0));
        assert!(matches!(
            kind,
            TorchDistKind::WatchdogTimeout { seq: 7, ref op, numel_in: None, timeout_ms: Some(1_800_000), ran_for_ms: Some(1_800_531), .. } if op == "BROADCAST"
        ));
        let (kind, _) = watchdog_of(
            "[Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4476, OpType=_ALLGATHER_BASE, NumelIn=4096, NumelOut=32768, Timeout(ms)",
        );
        assert!(matches!(
            kind,
            TorchDistKind::WatchdogTimeout { seq: 4476, ref op, numel_in: Some(4096), numel_out: Some(32768), timeout_ms: None, ran_for_ms: None } if op == "_ALLGATHER_BASE"
        ));
    }
}
