//! SGLang's own lines: `[YYYY-MM-DD HH:MM:SS(.mmm) DPn PPn ATTN_CPn MOE_DPn
//! TPn EPn] message` (docs/formats/servers.md): launch arguments, start-up landmarks,
//! the failure path (`… hit an exception:`, sigquit, dead scheduler) and the
//! TP memory-balance check.

use std::sync::LazyLock;

use chrono::{NaiveDate, NaiveDateTime};
use regex::Regex;

use super::args::parse_server_args;
use super::imbalance::{IMBALANCE_TEXT, parse_imbalance};
use super::sizes::gib_bytes;
use super::{Cx, title, uvicorn};
use crate::model::{Framework, Landmark, RankTag, ServerEventKind, Timestamp};

static PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\[
        (?:(?P<ts>[0-9]{4}-[0-9][0-9]-[0-9][0-9]\x20[0-9][0-9]:[0-9][0-9]:[0-9][0-9])|[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?:\.(?P<ms>[0-9]{3}))?
        (?P<ranks>(?:\x20(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)[0-9]+)*)
        \]\x20(?P<msg>.*)$",
    )
    .expect("sglang prefix regex")
});

/// [`PREFIX`] without the message: the same lines (no line holds a
/// newline, so `.*$` matches whatever follows), found without reading them
/// to the end.
static PREFIX_HEAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\[
        (?:[0-9]{4}-[0-9][0-9]-[0-9][0-9]\x20[0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]{3})?
        (?:\x20(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)[0-9]+)*
        |[0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\x20(?:DP|PP|TP|EP)[0-9]+)+)
        \]\x20",
    )
    .expect("sglang prefix head regex")
});

static CHILD_EXCEPTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<who>[0-9A-Za-z_]+) hit an exception:(?:\x20|$)")
        .expect("child exception regex")
});

static SCHEDULER_DEAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Rank (?P<rank>[0-9]+) scheduler is dead\.").expect("scheduler dead regex")
});

static WATCHDOG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)watchdog timeout \(self\.watchdog_timeout=(?P<secs>[0-9.]+)")
        .expect("watchdog regex")
});

static NCCL_VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^sglang is using nccl==(?P<v>\S+)").expect("nccl version regex"));

/// `name=12.34 GB` / `name: 12.34 GB` and plain `name=123` fields of the
/// landmark lines, wherever they sit in the message.
static GB_FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<key>avail mem|mem usage|available_gpu_mem|\bK size|\bV size|\bKV size)[=:]\x20?(?P<n>[0-9]+(?:\.[0-9]+)?)\x20?GB",
    )
    .expect("GB field regex")
});
static NUM_FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<key>elapsed|Time elapsed|#tokens|max_total_num_tokens|max_prefill_tokens|max_running_requests|context_len)[=:]\x20?(?P<n>-?[0-9]+(?:\.[0-9]+)?)",
    )
    .expect("number field regex")
});
static TYPE_FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?P<key>type|dtype)=(?P<v>[0-9A-Za-z_.]+)").expect("type field regex")
});

pub(super) struct SglangLine<'t> {
    pub time: Option<Timestamp>,
    pub rank: Option<RankTag>,
    pub message: &'t str,
}

/// SGLang's prefix: `[2026-11-27 09:38:52 TP1] `, and before 0.4 (about
/// 2024-10) the time of day alone, `[15:58:39 TP0] ` (the main process
/// printing `[15:57:49] `, which only its own messages are taken in: dmlc
/// stamps its lines the same way). A time of day alone times nothing.
pub(super) fn parse_prefix(text: &str) -> Option<SglangLine<'_>> {
    let c = PREFIX.captures(text)?;
    let message = c.name("msg").map_or("", |m| m.as_str());
    let ranks = &c["ranks"];
    let time = match c.name("ts") {
        Some(ts) => parse_time(ts.as_str(), c.name("ms").map(|m| m.as_str())),
        None if ranks.is_empty() && !is_own_message(message) => return None,
        None => None,
    };
    Some(SglangLine {
        time,
        rank: parse_ranks(ranks),
        message,
    })
}

/// Whether `text` starts with SGLang's prefix and, if so, the time
/// [`parse_prefix`] would read: the prefilter's cheap test, which reads the
/// common timestamp by its fixed positions.
pub(super) fn prefix_time(text: &str) -> Option<Option<Timestamp>> {
    if !is_prefixed(text) {
        return None;
    }
    Some(match fixed_time(text) {
        Some(time) => Some(time),
        None => parse_prefix(text).and_then(|l| l.time),
    })
}

/// Whether `text` starts with SGLang's prefix.
pub(super) fn is_prefixed(text: &str) -> bool {
    text.starts_with('[') && !text.contains('\n') && PREFIX_HEAD.is_match(text)
}

/// `[YYYY-MM-DD HH:MM:SS(.mmm)` of a line [`PREFIX`] matched, read by
/// position; `None` when anything is unusual (chrono then decides).
fn fixed_time(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    let digit = |i: usize| -> Option<u32> {
        let c = *b.get(i)?;
        c.is_ascii_digit().then(|| u32::from(c - b'0'))
    };
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    let year = two(1)? * 100 + two(3)?;
    let (month, day) = (two(6)?, two(9)?);
    let (hour, minute, second) = (two(12)?, two(15)?, two(18)?);
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut local =
        NaiveDate::from_ymd_opt(year as i32, month, day)?.and_hms_opt(hour, minute, second)?;
    if b.get(20) == Some(&b'.') {
        let ms = digit(21)? * 100 + digit(22)? * 10 + digit(23)?;
        local += chrono::Duration::milliseconds(i64::from(ms));
    }
    Some(Timestamp {
        local,
        offset_secs: None,
        year_known: true,
    })
}

impl Cx<'_> {
    pub(super) fn sglang(&mut self, line: SglangLine<'_>) {
        let SglangLine {
            time,
            rank,
            message: msg,
        } = line;
        let time = time.or(self.writer.time);
        let rank = rank.or(self.writer.rank);
        let sglang = Some(Framework::Sglang);
        let push = |cx: &mut Cx<'_>, kind| cx.push(kind, sglang, rank, time);
        if let Some(args) = msg.strip_prefix("server_args=") {
            push(self, ServerEventKind::Args(parse_server_args(args)));
        } else if let Some(c) = CHILD_EXCEPTION.captures(msg) {
            let component = c["who"].to_owned();
            push(self, ServerEventKind::ChildException { component });
            if msg.contains("Traceback (most recent call last):") {
                self.open_traceback(rank, time);
            }
        } else if msg.starts_with("Received sigquit from a child process")
            || msg.starts_with("SIGQUIT received.")
        {
            push(self, ServerEventKind::SigquitFromChild);
        } else if msg.starts_with("The server is fired up and ready to roll!") {
            push(self, ServerEventKind::Ready);
        } else if msg.contains(IMBALANCE_TEXT) {
            // Logged as a warning when the check is disabled; exception lines
            // normally arrive unprefixed, but accept them here too.
            let exception = super::traceback::exception_line(msg).map(|(name, _)| name.to_owned());
            push(
                self,
                ServerEventKind::MemoryImbalance(parse_imbalance(msg, exception)),
            );
        } else if msg.starts_with("Traceback (most recent call last):") {
            self.open_traceback(rank, time);
        } else if let Some(c) = SCHEDULER_DEAD.captures(msg) {
            if let Ok(rank) = c["rank"].parse() {
                push(self, ServerEventKind::SchedulerDead { rank });
            }
        } else if let Some(c) = WATCHDOG.captures(msg) {
            let timeout_secs = c["secs"].parse().ok();
            push(self, ServerEventKind::WatchdogTimeout { timeout_secs });
        } else if let Some(c) = NCCL_VERSION.captures(msg) {
            let version = c["v"].to_owned();
            let component = "NCCL".to_owned();
            push(self, ServerEventKind::Version { component, version });
        } else if let Some(landmark) = landmark(msg) {
            push(self, ServerEventKind::Landmark(landmark));
        } else if let Some(event) = uvicorn::parse(msg) {
            if let Some(event) = event {
                push(self, ServerEventKind::Uvicorn(event));
            }
        } else {
            self.detect(msg, None, rank, time);
        }
    }
}

/// Whether `msg`, pasted without SGLang's prefix, is one of SGLang's own
/// messages: a start-up landmark, a child's exception, the sigquit, the
/// ready line, a dead scheduler.
pub(super) fn is_own_message(msg: &str) -> bool {
    msg.starts_with("Received sigquit from a child process")
        || msg.starts_with("The server is fired up and ready to roll!")
        || CHILD_EXCEPTION.is_match(msg)
        || SCHEDULER_DEAD.is_match(msg)
        || landmark(msg).is_some()
}

/// The start-up milestones of docs/formats/servers.md, by their fixed lead-ins.
fn landmark(msg: &str) -> Option<Landmark> {
    let gb = |key: &str| {
        GB_FIELD
            .captures_iter(msg)
            .find(|c| &c["key"] == key)
            .and_then(|c| gib_bytes(&c["n"]))
    };
    let num = |key: &str| {
        NUM_FIELD
            .captures_iter(msg)
            .find(|c| &c["key"] == key)
            .map(|c| c["n"].to_owned())
    };
    let secs = |key: &str| num(key).and_then(|n| n.parse::<f64>().ok());
    let int = |key: &str| num(key).and_then(|n| n.parse::<u64>().ok());
    let word = |key: &str| {
        TYPE_FIELD
            .captures_iter(msg)
            .find(|c| &c["key"] == key)
            .map(|c| c["v"].to_owned())
    };
    let landmark = if msg.starts_with("Init torch distributed begin") {
        Landmark::InitDistributedBegin
    } else if msg.starts_with("Init torch distributed ends")
        || msg.starts_with("Init parallel ends")
    {
        Landmark::InitDistributedEnd {
            elapsed_secs: secs("elapsed"),
            mem_usage_bytes: gb("mem usage"),
        }
    } else if msg.starts_with("Memory baseline taken") {
        Landmark::MemoryBaseline {
            mem_usage_bytes: gb("mem usage"),
        }
    } else if msg.starts_with("Load weight begin") {
        Landmark::LoadWeightBegin {
            avail_bytes: gb("avail mem"),
        }
    } else if msg.starts_with("Load weight end") {
        Landmark::LoadWeightEnd {
            elapsed_secs: secs("elapsed"),
            model_type: word("type"),
            dtype: word("dtype"),
            avail_bytes: gb("avail mem"),
            mem_usage_bytes: gb("mem usage"),
        }
    } else if msg.starts_with("KV Cache is allocated") {
        Landmark::KvCacheAllocated {
            tokens: int("#tokens"),
            k_bytes: gb("K size"),
            v_bytes: gb("V size"),
            kv_bytes: gb("KV size"),
        }
    } else if msg.starts_with("Memory pool end") {
        Landmark::MemoryPoolEnd {
            avail_bytes: gb("avail mem"),
        }
    } else if msg.starts_with("Capture cuda graph begin") {
        Landmark::CaptureCudaGraphBegin {
            avail_bytes: gb("avail mem"),
        }
    } else if msg.starts_with("Capture cuda graph end") {
        Landmark::CaptureCudaGraphEnd {
            elapsed_secs: secs("Time elapsed"),
            mem_usage_bytes: gb("mem usage"),
            avail_bytes: gb("avail mem"),
        }
    } else if msg.starts_with("max_total_num_tokens=") {
        Landmark::MaxTotalTokens {
            max_total_num_tokens: int("max_total_num_tokens")?,
            max_prefill_tokens: int("max_prefill_tokens"),
            max_running_requests: int("max_running_requests"),
            context_len: int("context_len"),
            available_gpu_mem_bytes: gb("available_gpu_mem"),
        }
    } else {
        return None;
    };
    Some(landmark)
}

fn parse_time(ts: &str, ms: Option<&str>) -> Option<Timestamp> {
    let mut local = NaiveDateTime::parse_from_str(ts, "%Y-%m-%d %H:%M:%S").ok()?;
    if let Some(ms) = ms.and_then(|m| m.parse::<i64>().ok()) {
        local += chrono::Duration::milliseconds(ms);
    }
    Some(Timestamp {
        local,
        offset_secs: None,
        year_known: true,
    })
}

fn parse_ranks(ranks: &str) -> Option<RankTag> {
    if ranks.trim().is_empty() {
        return None;
    }
    let mut tag = RankTag::default();
    title::apply_tags(ranks, &mut tag);
    Some(tag)
}

#[cfg(test)]
mod early_prefix_tests {
    use super::*;

    /// SGLang's prefix before its date was added: the time of day and the
    /// rank (written to the older logger's `[%H:%M:%S TPn] ` shape, not
    /// copied); the main process's `[HH:MM:SS] ` only before its own
    /// messages, as dmlc stamps lines the same way.
    #[test]
    fn the_time_of_day_prefix_is_sglangs_with_a_rank_or_its_own_message() {
        let line =
            parse_prefix("[15:58:51 TP0] Decode batch. #running-req: 1, #token: 43").unwrap();
        assert_eq!(line.rank.and_then(|r| r.tp), Some(0));
        assert!(line.time.is_none());
        assert!(parse_prefix("[15:57:49] The server is fired up and ready to roll!").is_some());
        assert!(parse_prefix("[12:44:34] src/storage/x.h:84: cudaMalloc failed").is_none());
        assert!(is_prefixed(
            "[17:43:27 TP1] Load weight end. type=X, dtype=torch.bfloat16, avail mem=20.62 GB"
        ));
    }
}
