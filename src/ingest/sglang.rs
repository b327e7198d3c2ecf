//! SGLang server logs: `[YYYY-MM-DD HH:MM:SS(.mmm) DPn PPn TPn EPn] message`,
//! plus the unprefixed traceback lines that several ranks interleave
//! (formats.md §8). The same parser reads SGLang lines wrapped in journal
//! entries: the journal parser feeds it each message with its outer metadata.

use std::collections::VecDeque;
use std::sync::LazyLock;

use chrono::NaiveDateTime;
use regex::Regex;

use super::Line;
use crate::model::{
    Facts, Framework, MemoryImbalance, RankTag, ServerArgs, ServerEvent, ServerEventKind, Timestamp,
};
use crate::source::Span;

static PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\[
        (?P<ts>\d{4}-\d\d-\d\d\x20\d\d:\d\d:\d\d)(?:\.(?P<ms>\d{3}))?
        (?P<ranks>(?:\x20(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)
        \]\x20(?P<msg>.*)$",
    )
    .expect("sglang prefix regex")
});

static RANK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)").expect("rank regex"));

static IMBALANCE_NUMBERS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<label>min_per_gpu_memory|pre_model_load_memory)=(?P<min>[0-9.eE+-]+), local_gpu_memory=(?P<local>[0-9.eE+-]+), local_gpu_memory \* 0\.9=(?P<thr>[0-9.eE+-]+)",
    )
    .expect("imbalance regex")
});

static EXCEPTION_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<name>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?:: (?P<msg>.*))?$",
    )
    .expect("exception regex")
});

static CHILD_EXCEPTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<who>\w+) hit an exception: ").expect("child exception regex")
});

/// `key=value` in the dataclass repr or `'key': value` in the dict repr.
static ARG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:[(,{ ])'?(?P<key>[a-z_]+)'?(?:=|: )(?P<value>'[^']*'|[^,)}]+)")
        .expect("arg regex")
});

const IMBALANCE_TEXT: &str =
    "The memory capacity is unbalanced. Some GPUs may be occupied by other processes.";

/// Metadata an outer layer (a journal entry) knows about a server line.
#[derive(Debug, Default, Clone)]
pub(crate) struct Outer {
    pub pid: Option<u32>,
    pub unit: Option<String>,
    pub time: Option<Timestamp>,
}

/// A streaming reader of one server log stream. Keeps only what traceback
/// attribution needs: the ranks whose tracebacks are still open.
#[derive(Debug, Default)]
pub(crate) struct ServerLogParser {
    /// Ranks that announced a traceback (`Scheduler hit an exception:`) whose
    /// exception line has not been read yet, oldest first (formats.md §8.4).
    open: VecDeque<(Option<RankTag>, Option<Timestamp>)>,
    /// The traceback whose exception line was read last, in case a chained
    /// traceback (`During handling of …`) continues it.
    last_closed: Option<(Option<RankTag>, Option<Timestamp>)>,
    in_traceback: bool,
}

/// Parses a plain SGLang log segment.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut parser = ServerLogParser::default();
    let outer = Outer::default();
    lines
        .iter()
        .filter(|l| !parser.feed(l.text, l.span, &outer, facts))
        .count() as u32
}

impl ServerLogParser {
    /// Reads one line; returns whether it was recognised as server output.
    pub fn feed(&mut self, text: &str, span: Span, outer: &Outer, facts: &mut Facts) -> bool {
        if let Some(c) = PREFIX.captures(text) {
            let own = parse_time(&c["ts"], c.name("ms").map(|m| m.as_str()));
            // Inside a journal entry the journal's time is the line's time.
            if let (Some(t), None) = (own, outer.time) {
                facts.line_times.push((span, t));
            }
            let time = own.or(outer.time);
            let rank = parse_ranks(&c["ranks"]);
            self.prefixed(&c["msg"], rank, time, span, outer, facts);
            return true;
        }
        self.unprefixed(text, span, outer, facts)
    }

    fn prefixed(
        &mut self,
        msg: &str,
        rank: Option<RankTag>,
        time: Option<Timestamp>,
        span: Span,
        outer: &Outer,
        facts: &mut Facts,
    ) {
        let mut push = |kind| {
            facts
                .server_events
                .push(event(kind, rank, time, span, outer))
        };
        if let Some(args) = msg.strip_prefix("server_args=") {
            push(ServerEventKind::Args(parse_server_args(args)));
        } else if let Some(c) = CHILD_EXCEPTION.captures(msg) {
            push(ServerEventKind::ChildException {
                component: c["who"].to_owned(),
            });
            if msg.contains("Traceback (most recent call last):") {
                self.open.push_back((rank, time));
                self.in_traceback = true;
            }
        } else if msg.starts_with("Received sigquit from a child process")
            || msg.starts_with("SIGQUIT received.")
        {
            push(ServerEventKind::SigquitFromChild);
        } else if msg.starts_with("The server is fired up and ready to roll!") {
            push(ServerEventKind::Ready);
        } else if msg.contains(IMBALANCE_TEXT) {
            // Logged as a warning when the check is disabled; exception lines
            // normally arrive unprefixed, but accept them here too.
            let exception = EXCEPTION_LINE.captures(msg).map(|c| c["name"].to_owned());
            push(ServerEventKind::MemoryImbalance(parse_imbalance(
                msg, exception,
            )));
        } else if msg.starts_with("Traceback (most recent call last):") {
            self.open.push_back((rank, time));
            self.in_traceback = true;
        }
    }

    fn unprefixed(&mut self, text: &str, span: Span, outer: &Outer, facts: &mut Facts) -> bool {
        if text.trim().is_empty() {
            return true;
        }
        if text.starts_with("Traceback (most recent call last):") {
            self.open.push_back((None, outer.time));
            self.in_traceback = true;
            return true;
        }
        if text.starts_with("During handling of the above exception")
            || text.starts_with("The above exception was the direct cause")
        {
            // The chain continues the traceback that just closed.
            if let Some(reopened) = self.last_closed.take() {
                self.open.push_front(reopened);
            }
            self.in_traceback = true;
            return true;
        }
        if text.starts_with("  File \"") || text.starts_with("    ") || is_caret_line(text) {
            return self.in_traceback || !self.open.is_empty();
        }
        if let Some(c) = EXCEPTION_LINE.captures(text) {
            // Outside a traceback an exception line is only trusted when its
            // text is unmistakable (a log tail may start mid-traceback).
            let distinctive = text.contains(IMBALANCE_TEXT);
            if !self.in_traceback && self.open.is_empty() && !distinctive {
                return false;
            }
            let (rank, time) = self.open.pop_front().unwrap_or((None, outer.time));
            self.last_closed = Some((rank, time));
            self.in_traceback = !self.open.is_empty();
            let name = c["name"].to_owned();
            let message = c.name("msg").map_or("", |m| m.as_str()).to_owned();
            let kind = if message.contains(IMBALANCE_TEXT) {
                ServerEventKind::MemoryImbalance(parse_imbalance(&message, Some(name)))
            } else {
                ServerEventKind::Exception { name, message }
            };
            facts
                .server_events
                .push(event(kind, rank, time, span, outer));
            return true;
        }
        // uvicorn before SGLang wrapped it in its own prefix.
        text.starts_with("INFO:     ")
            || text.starts_with("WARNING:  ")
            || text.starts_with("ERROR:    ")
    }
}

fn event(
    kind: ServerEventKind,
    rank: Option<RankTag>,
    time: Option<Timestamp>,
    span: Span,
    outer: &Outer,
) -> ServerEvent {
    ServerEvent {
        framework: Framework::Sglang,
        kind,
        rank,
        time,
        pid: outer.pid,
        unit: outer.unit.clone(),
        span,
    }
}

fn is_caret_line(text: &str) -> bool {
    let t = text.trim();
    !t.is_empty() && t.chars().all(|c| matches!(c, '^' | '~'))
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
    for c in RANK.captures_iter(ranks) {
        let n = c[2].parse().ok();
        match &c[1] {
            "DP" => tag.dp = n,
            "PP" => tag.pp = n,
            "TP" => tag.tp = n,
            "EP" => tag.ep = n,
            _ => {}
        }
    }
    Some(tag)
}

fn parse_imbalance(message: &str, exception: Option<String>) -> MemoryImbalance {
    let numbers = IMBALANCE_NUMBERS.captures(message);
    let num = |name| {
        numbers
            .as_ref()
            .and_then(|c| c.name(name))
            .and_then(|m| m.as_str().parse::<f64>().ok())
    };
    MemoryImbalance {
        exception,
        min_label: numbers.as_ref().map(|c| c["label"].to_owned()),
        min_gib: num("min"),
        local_gib: num("local"),
        threshold_gib: num("thr"),
    }
}

/// Picks the keys the rules need out of `ServerArgs(k=v, …)` or `{'k': v, …}`.
/// Values are Python literals; only numbers and plain strings are needed.
fn parse_server_args(repr: &str) -> ServerArgs {
    let mut args = ServerArgs::default();
    for c in ARG.captures_iter(repr) {
        let raw = c["value"].trim();
        let text = raw.trim_matches('\'');
        let int = || text.parse::<u32>().ok();
        match &c["key"] {
            "model_path" => args.model_path = (raw.starts_with('\'')).then(|| text.to_owned()),
            "tp_size" => args.tp_size = int(),
            "pp_size" => args.pp_size = int(),
            "dp_size" => args.dp_size = int(),
            "base_gpu_id" => args.base_gpu_id = int(),
            "gpu_id_step" => args.gpu_id_step = int(),
            "port" => args.port = int(),
            "mem_fraction_static" => args.mem_fraction_static = text.parse().ok(),
            _ => {}
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceId;

    fn run(text: &str) -> (Vec<ServerEvent>, u32) {
        let lines: Vec<Line<'_>> = text
            .lines()
            .enumerate()
            .map(|(i, t)| Line {
                span: Span {
                    source: SourceId(0),
                    line: i as u32 + 1,
                },
                text: t,
            })
            .collect();
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        (facts.server_events, unrecognized)
    }

    fn imbalances(events: &[ServerEvent]) -> Vec<(Option<u32>, u32, MemoryImbalance)> {
        events
            .iter()
            .filter_map(|e| match &e.kind {
                ServerEventKind::MemoryImbalance(m) => {
                    Some((e.rank.and_then(|r| r.tp), e.span.line, m.clone()))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn interleaved_tracebacks_are_attributed_to_their_ranks_in_order() {
        let log = "\
[2026-11-27 09:38:52 TP1] Scheduler hit an exception: Traceback (most recent call last):
[2026-11-27 09:38:52 TP2] Scheduler hit an exception: Traceback (most recent call last):
  File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process
  File \"/opt/sglang/scheduler.py\", line 2887, in run_scheduler_process
    raise RuntimeError(
RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875
    raise RuntimeError(
RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875

[2026-11-27 09:38:53] Received sigquit from a child process. It usually means the child failed.";
        let (events, unrecognized) = run(log);
        assert_eq!(unrecognized, 0);
        let found = imbalances(&events);
        assert_eq!(
            found.iter().map(|f| (f.0, f.1)).collect::<Vec<_>>(),
            vec![(Some(1), 6), (Some(2), 8)]
        );
        let m = &found[0].2;
        assert_eq!(m.exception.as_deref(), Some("RuntimeError"));
        assert_eq!(m.min_label.as_deref(), Some("pre_model_load_memory"));
        assert_eq!(m.min_gib, Some(39.74761962890625));
        assert_eq!(m.local_gib, Some(93.7274169921875));
        assert_eq!(m.threshold_gib, Some(84.35467529296875));
        assert!(
            events
                .iter()
                .any(|e| e.kind == ServerEventKind::SigquitFromChild)
        );
    }

    #[test]
    fn old_value_error_variant_and_number_less_variant() {
        let (events, _) = run("\
[2025-09-02 10:00:11 TP1] Scheduler hit an exception: Traceback (most recent call last):
ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=39.5, local_gpu_memory=79.5, local_gpu_memory * 0.9=71.55
[2024-01-02 10:00:11 TP0] Traceback (most recent call last):
ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.");
        let found = imbalances(&events);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].2.min_label.as_deref(), Some("min_per_gpu_memory"));
        assert_eq!(found[0].2.exception.as_deref(), Some("ValueError"));
        assert_eq!(found[1].0, Some(0));
        assert_eq!(found[1].2.min_gib, None);
    }

    #[test]
    fn server_args_in_both_reprs() {
        let (events, _) = run("\
[2026-11-27 09:38:41] server_args=ServerArgs(model_path='/models/Kimi-K2-Instruct', tp_size=8, mem_fraction_static=0.85, port=30000, base_gpu_id=0, gpu_id_step=1)
[2026-11-27 09:38:41] server_args={'model_path': '/models/x', 'tp_size': 4, 'base_gpu_id': 2}");
        let args: Vec<&ServerArgs> = events
            .iter()
            .filter_map(|e| match &e.kind {
                ServerEventKind::Args(a) => Some(a),
                _ => None,
            })
            .collect();
        assert_eq!(args[0].tp_size, Some(8));
        assert_eq!(
            args[0].model_path.as_deref(),
            Some("/models/Kimi-K2-Instruct")
        );
        assert_eq!(args[0].mem_fraction_static, Some(0.85));
        assert_eq!(args[1].tp_size, Some(4));
        assert_eq!(args[1].base_gpu_id, Some(2));
    }

    #[test]
    fn unprefixed_noise_outside_a_traceback_is_unrecognised() {
        let (_, unrecognized) = run(
            "[2026-11-27 09:38:41] ok\nLoading safetensors checkpoint shards:  50% Completed\nValueError: stray",
        );
        assert_eq!(unrecognized, 2);
    }
}
