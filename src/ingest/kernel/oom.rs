//! Linux OOM-killer reports (docs/formats/kernel.md, docs/rules/kernel-oom-killer.md), grouped
//! into one [`OomKill`] per kill: the `invoked oom-killer` line opens a
//! report, the task table, `oom-kill:` summary and memcg usage fill it, the
//! `Killed process` line completes it, and the reaper's line, which may come
//! later, marks the victim's memory as given back.
//!
//! Old kernels print `Out of memory: Kill process N (comm) score S or
//! sacrifice child` before `Killed process …`; kernels from 5.0 prefix the
//! kill line with the reason; every group after `file-rss` is optional.

use std::sync::LazyLock;

use regex::Regex;

use super::push;
use crate::model::{Facts, KernelEventKind, KernelTime, OomKill, OomTask};
use crate::source::Span;

static INVOKED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<comm>.+?) invoked oom-killer: gfp_mask=").expect("invoked regex")
});

static KILLED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:(?P<reason>Out\x20of\x20memory|Memory\x20cgroup\x20out\x20of\x20memory)
          (?:\x20\(oom_kill_allocating_task\))?:\x20)?
        Killed\x20process\x20(?P<pid>[0-9]+)\x20\((?P<comm>.*?)\)
        (?:,?\x20total-vm:(?P<vm>[0-9]+)kB,\x20anon-rss:(?P<anon>[0-9]+)kB,\x20file-rss:(?P<file>[0-9]+)kB
          (?:,\x20shmem-rss:(?P<shmem>[0-9]+)kB)?
          (?:,\x20UID:(?P<uid>[0-9]+)\x20pgtables:[0-9]+kB\x20oom_score_adj:(?P<adj>-?[0-9]+))?
        )?",
    )
    .expect("killed regex")
});

/// The pre-5.0 announcement before the kill line.
static KILL_CHOSEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<reason>Out of memory|Memory cgroup out of memory): Kill process (?P<pid>[0-9]+) \((?P<comm>.*?)\) score [0-9]+ or sacrifice child",
    )
    .expect("kill-chosen regex")
});

static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^oom-kill:constraint=(?P<constraint>CONSTRAINT_[0-9A-Za-z_]+)
        (?:,nodemask=[^,]*)?(?:,cpuset=[^,]*)?(?:,mems_allowed=[^,]*)?
        (?:,oom_memcg=(?P<oom_memcg>[^,]*))?
        (?P<global>,global_oom)?
        (?:,task_memcg=(?P<task_memcg>[^,]*))?
        (?:,task=(?P<task>[^,]*))?
        (?:,pid=(?P<pid>[0-9]+))?
        (?:,uid=(?P<uid>[0-9]+))?",
    )
    .expect("oom summary regex")
});

static REAPED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^oom_reaper: reaped process (?P<pid>[0-9]+) \(").expect("reaper regex")
});

static MEMCG_USAGE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^memory: usage (?P<usage>[0-9]+)kB, limit (?P<limit>[0-9]+)kB")
        .expect("memcg regex")
});

/// `[   4242]     0  4242 103086419 46913580 377262080        0             0 python3`
static TASK_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\[\x20*(?P<pid>[0-9]+)\]\x20+(?P<uid>[0-9]+)\x20+(?P<tgid>[0-9]+)\x20+(?P<vm>[0-9]+)\x20+(?P<rss>[0-9]+)
        (?:\x20+[0-9]+)*\x20+(?P<adj>-?[0-9]+)\x20+(?P<name>\S.*)$",
    )
    .expect("task row regex")
});

/// Lines of a report that carry nothing the event keeps.
const REPORT_LINES: [&str; 5] = [
    "Tasks state (memory values in pages):",
    "[  pid  ]",
    "[ pid ]",
    "Memory cgroup stats for ",
    "Mem-Info:",
];

/// A report whose kill line has not been read yet.
struct Pending {
    kill: OomKill,
    time: KernelTime,
    first: Span,
    lines: Vec<Span>,
    summary: Option<Span>,
}

#[derive(Default)]
pub(super) struct OomReports {
    pending: Option<Pending>,
    /// The last kill pushed and its victim, for the reaper's line.
    last_kill: Option<(usize, u32)>,
}

impl OomReports {
    /// Reads one message; returns whether it belongs to an OOM report.
    pub fn feed(&mut self, text: &str, span: Span, time: KernelTime, facts: &mut Facts) -> bool {
        if let Some(c) = INVOKED.captures(text) {
            self.finish(facts);
            self.pending = Some(Pending {
                kill: OomKill {
                    invoked_by: Some(c["comm"].to_owned()),
                    ..OomKill::default()
                },
                time,
                first: span,
                lines: vec![span],
                summary: None,
            });
            return true;
        }
        if let Some(c) = KILLED.captures(text) {
            let pid: Option<u32> = c["pid"].parse().ok();
            // The summary names the victim the kill line will name (the
            // pre-5.0 announcement may name a parent whose child dies
            // instead): another victim means another kill.
            let other_victim = self
                .pending
                .as_ref()
                .is_some_and(|p| p.summary.is_some() && p.kill.pid != pid);
            if other_victim {
                self.finish(facts);
            }
            let mut report = self.pending.take().unwrap_or_else(|| Pending {
                kill: OomKill::default(),
                time,
                first: span,
                lines: Vec::new(),
                summary: None,
            });
            let kill = &mut report.kill;
            let kb = |name: &str| c.name(name).and_then(|m| m.as_str().parse::<u64>().ok());
            kill.pid = pid.or(kill.pid);
            kill.comm = Some(c["comm"].to_owned());
            kill.cgroup_limit |= c
                .name("reason")
                .is_some_and(|r| r.as_str().starts_with("Memory cgroup"));
            kill.total_vm_kb = kb("vm");
            kill.anon_rss_kb = kb("anon");
            kill.file_rss_kb = kb("file");
            kill.shmem_rss_kb = kb("shmem");
            kill.uid = c
                .name("uid")
                .and_then(|m| m.as_str().parse().ok())
                .or(kill.uid);
            kill.oom_score_adj = c.name("adj").and_then(|m| m.as_str().parse().ok());
            let index = emit(report, span, time, facts);
            self.last_kill = pid.map(|p| (index, p));
            return true;
        }
        if let Some(c) = REAPED.captures(text) {
            let pid: Option<u32> = c["pid"].parse().ok();
            if let Some((index, victim)) = self.last_kill {
                if pid == Some(victim) {
                    if let Some(event) = facts.kernel_events.get_mut(index) {
                        if let KernelEventKind::OomKill(kill) = &mut event.kind {
                            kill.reaped = true;
                        }
                        event.related.push(span);
                    }
                }
            }
            return true;
        }
        if let Some(c) = SUMMARY.captures(text) {
            let report = self.pending.get_or_insert_with(|| Pending {
                kill: OomKill::default(),
                time,
                first: span,
                lines: Vec::new(),
                summary: None,
            });
            let kill = &mut report.kill;
            let text_of = |name: &str| c.name(name).map(|m| m.as_str().to_owned());
            kill.constraint = text_of("constraint");
            kill.oom_memcg = text_of("oom_memcg");
            kill.global_oom = c.name("global").is_some();
            kill.task_memcg = text_of("task_memcg");
            kill.pid = c.name("pid").and_then(|m| m.as_str().parse().ok());
            kill.comm = text_of("task");
            kill.uid = c.name("uid").and_then(|m| m.as_str().parse().ok());
            kill.cgroup_limit |= kill.oom_memcg.is_some();
            report.lines.push(span);
            report.summary = Some(span);
            return true;
        }
        let Some(report) = &mut self.pending else {
            return false;
        };
        if let Some(c) = KILL_CHOSEN.captures(text) {
            report.kill.pid = c["pid"].parse().ok();
            report.kill.comm = Some(c["comm"].to_owned());
            report.kill.cgroup_limit |= c["reason"].starts_with("Memory cgroup");
            report.lines.push(span);
            return true;
        }
        if let Some(c) = MEMCG_USAGE.captures(text) {
            report.kill.memcg_usage_kb = c["usage"].parse().ok();
            report.kill.memcg_limit_kb = c["limit"].parse().ok();
            report.lines.push(span);
            return true;
        }
        if let Some(task) = task_row(text, span) {
            report.kill.tasks.push(task);
            return true;
        }
        REPORT_LINES.iter().any(|l| text.starts_with(l))
    }

    /// Whether a report is open: its lines need no anchor (task rows).
    pub fn busy(&self) -> bool {
        self.pending.is_some()
    }

    /// Pushes a report the input cut before its kill line.
    pub fn finish(&mut self, facts: &mut Facts) {
        if let Some(report) = self.pending.take() {
            let span = report.summary.unwrap_or(report.first);
            let time = report.time;
            emit(report, span, time, facts);
        }
    }
}

/// Pushes a report as one event stated by `span`; returns its index.
fn emit(report: Pending, span: Span, time: KernelTime, facts: &mut Facts) -> usize {
    let index = push(facts, KernelEventKind::OomKill(report.kill), time, span);
    let mut related = report.lines;
    related.retain(|s| *s != span);
    if let Some(event) = facts.kernel_events.get_mut(index) {
        event.related = related;
    }
    index
}

fn task_row(text: &str, span: Span) -> Option<OomTask> {
    let c = TASK_ROW.captures(text)?;
    Some(OomTask {
        pid: c["pid"].parse().ok()?,
        uid: c["uid"].parse().ok()?,
        tgid: c["tgid"].parse().ok()?,
        total_vm_pages: c["vm"].parse().ok()?,
        rss_pages: c["rss"].parse().ok()?,
        oom_score_adj: c["adj"].parse().ok()?,
        name: c["name"].to_owned(),
        span,
    })
}
