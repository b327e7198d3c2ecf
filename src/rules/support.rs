//! Small helpers every rule file uses: finding lines by signature and
//! describing units, so that rule files hold only their own logic.

pub mod entities;
pub mod fabric_manager;
pub mod holders;
pub mod listen;
pub mod nccl_trace;
pub mod ps;
pub mod scope;
pub mod server;
pub mod vllm;

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use regex::{Captures, Regex};

use crate::correlate::{Incident, UnitEventKind};
use crate::model::{KernelEvent, KernelEventKind, Message, Timestamp};
use crate::source::Span;

/// Every kept line matching `re`, with its captures, in input order.
/// Most lines match none of a rule's patterns: each is asked `is_match`
/// first, which allocates no captures (a big input keeps sixteen thousand
/// lines, and three dozen rules each ask every one).
pub fn matches<'a>(
    incident: &'a Incident,
    re: &'a Regex,
) -> impl Iterator<Item = (&'a Message, Captures<'a>)> + 'a {
    incident
        .facts
        .messages
        .iter()
        .filter(move |m| re.is_match(&m.text))
        .filter_map(move |m| re.captures(&m.text).map(|c| (m, c)))
}

/// The lines a catalog row reads as a warning that proves nothing by
/// itself (category none, severity warning: Triton's `failed to allocate
/// pinned system memory: CUDA driver version is insufficient for CUDA
/// runtime version`, the reason CUDA gave for a pool the server goes on
/// without). A CUDA code such a line quotes is the warning's reason, not a
/// failure of its own.
pub fn warning_lines(incident: &Incident) -> std::collections::BTreeSet<Span> {
    incident
        .known
        .iter()
        .filter(|k| {
            k.hit.row.is_some_and(|r| {
                r.category.is_none() && r.severity == crate::rules::Severity::Warning
            })
        })
        .map(|k| incident.facts.messages[k.message].span)
        .collect()
}

/// Whether the kernel's log shows the OOM killer killing a process: the
/// kernel's own account, which explains a SIGKILL better than any guess.
pub fn kernel_oom_killed(incident: &Incident) -> bool {
    incident
        .facts
        .kernel_events
        .iter()
        .any(|e| matches!(e.kind, KernelEventKind::OomKill(_)))
}

/// Whether the kernel's log says a GPU was lost: `fallen off the bus`,
/// `NV_ERR_GPU_IS_LOST`, or Xid 79. The rules that read nvidia-smi's or a
/// probe's view of a lost GPU leave it to the kernel's account then.
pub fn kernel_lost_a_gpu(incident: &Incident) -> bool {
    incident.facts.kernel_events.iter().any(|e| {
        matches!(
            e.kind,
            KernelEventKind::FellOffBus { .. } | KernelEventKind::GpuLost { .. }
        )
    }) || incident.xids().any(|(_, x)| x.code == 79)
}

/// Less GPU memory in use than this (MiB) is a CUDA context, a display or
/// a persistence daemon, never a loaded model.
pub const MIN_HELD_MIB: u64 = 1024;

/// More GPU memory in use than an idle GPU of any generation shows with no
/// context on it (MiB): a K40m's `74MiB` (fixtures/real/646), a V100's
/// `10MiB` (fixtures/real/501), a GTX 1080's `1MiB` (fixtures/real/647).
/// Above it, on a GPU that lists no process, a CUDA context is held.
pub const IDLE_GPU_MAX_MIB: u64 = 128;

/// Whether `used` of a card's `total` MiB is a real working set held: at
/// least [`MIN_HELD_MIB`] and `share` of the card. The share is the
/// caller's: a finding from a table alone asks for more than one beside a
/// failure that the memory explains.
pub fn holds_working_set(used: u64, total: u64, share: f64) -> bool {
    used >= MIN_HELD_MIB && used as f64 >= share * total as f64
}

/// The first line per distinct masked text: the same message from eight
/// ranks or two captures is cited once, with a count. Linear: each
/// template is looked up in an index, not searched for among the others
/// (2 million distinct lines would otherwise take hours).
pub fn distinct<'a>(hits: impl Iterator<Item = &'a Message>) -> Vec<(&'a Message, usize)> {
    let mut out: Vec<(&Message, usize)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for m in hits {
        match index.entry(super::unknown::template(&m.text)) {
            Entry::Occupied(at) => out[*at.get()].1 += 1,
            Entry::Vacant(slot) => {
                slot.insert(out.len());
                out.push((m, 1));
            }
        }
    }
    out
}

/// The span of the first event of `kind` for `unit`, if PID 1 logged one.
pub fn unit_event(
    incident: &Incident,
    unit: &str,
    pred: impl Fn(&UnitEventKind) -> bool,
) -> Option<Span> {
    incident
        .units
        .get(unit)?
        .events
        .iter()
        .find(|e| pred(&e.kind))
        .map(|e| e.span)
}

/// Rounds a confidence to two decimals so reports stay stable.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A confidence from the met conditions: `base` with none, `top` with all.
pub fn confidence(f: &super::Finding, base: f64, top: f64) -> f64 {
    let total = f.conditions.len().max(1) as f64;
    let met = f.conditions.iter().filter(|c| c.met).count() as f64;
    round2(base + (top - base) * met / total)
}

/// Ranks as compact ranges, each number behind `prefix`: `TP0-TP3, TP5`
/// (`prefix` `TP`), `0, 1, 4-7` (none); empty for no ranks.
pub fn rank_ranges(ranks: &std::collections::BTreeSet<u32>, prefix: &str) -> String {
    let v: Vec<u32> = ranks.iter().copied().collect();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("{prefix}{}-{prefix}{}", v[i], v[j])
        } else if j == i + 1 {
            format!("{prefix}{}, {prefix}{}", v[i], v[j])
        } else {
            format!("{prefix}{}", v[i])
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// `55,286 MiB`; `unknown MiB` for absent values.
pub fn mib(value: Option<u64>) -> String {
    match value {
        Some(v) => {
            let digits = v.to_string();
            let mut out = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i) % 3 == 0 {
                    out.push(',');
                }
                out.push(c);
            }
            format!("{out} MiB")
        }
        None => "an unknown amount of memory".to_owned(),
    }
}

/// Adds to the finding's units the unit that owns each of its PIDs, where
/// the captures say which.
pub fn add_owner_units(f: &mut super::Finding, incident: &Incident) {
    let pids: Vec<u32> = f.entities.pids.iter().copied().collect();
    for pid in pids {
        if let Some(o) = incident.owner(pid) {
            f.entities.units.insert(o.unit.clone());
        }
    }
}

/// The command that lists every process holding GPU memory, with its
/// share: what a finding about held or freed memory asks the user to run.
pub const COMPUTE_APPS: &str =
    "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv";

/// Cites a GPU's first line with its memory in use (`GPU 0: 55,286 MiB of
/// 81,559 MiB used`), the figure rules put beside a memory shortfall.
pub fn cite_gpu_memory(f: &mut super::Finding, g: &crate::correlate::Gpu) {
    if let Some(span) = g.spans.first() {
        f.evidence(
            *span,
            format!(
                "GPU {}: {} of {} used",
                g.index,
                mib(g.memory_used_mib),
                mib(g.memory_total_mib)
            ),
        );
    }
}

/// `the driver …` → `The driver …`, for headlines built from titles.
pub fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|first| first.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// When a kernel message was logged: its wrapper's wall time, or the
/// journal's time of the line that carried it. `None` for bare uptimes.
pub fn kernel_time(incident: &Incident, event: &KernelEvent) -> Option<Timestamp> {
    event.time.wall.or_else(|| incident.time_of(event.span))
}

/// A timestamp as a person reads it: `2025-11-26 09:41:07`, or `Jul 23
/// 03:12:55` when the format printed no year (the placeholder is not shown).
pub fn when(t: Timestamp) -> String {
    if t.year_known {
        t.local.format("%Y-%m-%d %H:%M:%S").to_string()
    } else {
        t.local.format("%b %d %H:%M:%S").to_string()
    }
}

/// Seconds from `a` to `b`, positive when `b` is later. In UTC when both
/// zones are known; otherwise the printed local times, which on one host are
/// the same clock (`dmesg -T` and `-o short` print local time). A missing
/// year takes the other timestamp's year.
pub fn seconds_between(a: Timestamp, b: Timestamp) -> i64 {
    use chrono::Datelike;
    let with_year = |t: Timestamp, other: Timestamp| {
        if t.year_known || !other.year_known {
            return t.local;
        }
        t.local.with_year(other.local.year()).unwrap_or(t.local)
    };
    let (la, lb) = (with_year(a, b), with_year(b, a));
    match (a.offset_secs, b.offset_secs) {
        (Some(oa), Some(ob)) => {
            (lb.and_utc().timestamp() - i64::from(ob)) - (la.and_utc().timestamp() - i64::from(oa))
        }
        _ => lb.and_utc().timestamp() - la.and_utc().timestamp(),
    }
}

/// A report of the kernel's hung-task watchdog (kernel/hung_task.c
/// check_hung_task(): `INFO: task %s:%d blocked for more than %ld
/// seconds.`, the catalog row `kernel.hung-task`): its line and what it
/// names.
pub struct HungTask<'a> {
    pub message: &'a Message,
    pub pid: u32,
    pub comm: &'a str,
    pub secs: &'a str,
}

/// The inputs' hung-task reports, in order, the one reader of them for
/// every rule that asks (a GPU fallen off the bus cites them; a trace in
/// the driver is its own finding).
pub fn hung_tasks(incident: &Incident) -> Vec<HungTask<'_>> {
    incident
        .known("kernel.hung-task")
        .filter_map(|(message, c)| {
            Some(HungTask {
                message,
                pid: c.get("pid")?.parse().ok()?,
                comm: c.get("comm").unwrap_or_default(),
                secs: c.get("secs").unwrap_or_default(),
            })
        })
        .collect()
}

/// Tasks the kernel shows in D state by their state line alone
/// (`task:nv_open_q state:D stack:0 pid:1014 …`, the catalog row
/// `kernel.task-blocked-state`) with no hung-task report just above it: a
/// paste cut below the report, or SysRq-w's dump of blocked tasks. Their
/// `secs` is empty: how long they were blocked is not in the inputs.
pub fn blocked_tasks_unreported(incident: &Incident) -> Vec<HungTask<'_>> {
    let reports = hung_tasks(incident);
    incident
        .known("kernel.task-blocked-state")
        .filter(|(m, _)| {
            !reports.iter().any(|r| {
                r.message.span.source == m.span.source
                    && r.message.span.line < m.span.line
                    && m.span.line - r.message.span.line <= 4
            })
        })
        .filter_map(|(message, c)| {
            Some(HungTask {
                message,
                pid: c.get("pid")?.parse().ok()?,
                comm: c.get("comm").unwrap_or_default(),
                secs: "",
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn at(y: i32, h: u32, m: u32, s: u32, offset: Option<i32>, year_known: bool) -> Timestamp {
        Timestamp {
            local: NaiveDate::from_ymd_opt(y, 6, 1)
                .and_then(|d| d.and_hms_opt(h, m, s))
                .expect("valid test time"),
            offset_secs: offset,
            year_known,
        }
    }

    #[test]
    fn seconds_between_timestamps_of_one_host() {
        let cases = [
            // Both zones known: compared in UTC.
            (
                at(2024, 12, 0, 0, Some(0), true),
                at(2024, 14, 0, 5, Some(7200), true),
                5,
            ),
            // One zone unknown (dmesg -T): the local clocks are compared.
            (
                at(2024, 12, 0, 0, None, true),
                at(2024, 12, 0, 7, Some(7200), true),
                7,
            ),
            // A line without a year (-o short) takes the other's year.
            (
                at(2000, 12, 0, 9, None, false),
                at(2024, 12, 0, 0, None, true),
                -9,
            ),
            (
                at(2024, 12, 0, 0, Some(0), true),
                at(2000, 12, 1, 0, None, false),
                60,
            ),
        ];
        for (a, b, expected) in cases {
            assert_eq!(seconds_between(a, b), expected, "{a:?} → {b:?}");
        }
    }
}
