//! `kernel-oom-killer`: the kernel's OOM killer killed a process: whose it
//! was, how big, whether the host or a cgroup limit ran out, and which
//! SIGKILL exits of units it explains. A `status=9/KILL` is attributed to it
//! only with kernel evidence for that PID or its unit's cgroup within
//! seconds: SGLang kills itself with SIGKILL after any child failure.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Incident, OwnerBasis, UnitEventKind};
use crate::model::{KernelEvent, KernelEventKind, OomKill, OomTask};
use crate::rules::support::{confidence, distinct, kernel_time, matches, seconds_between};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod report;
mod subject;
use report::*;

pub static RULE: KernelOomKiller = KernelOomKiller;

pub struct KernelOomKiller;

/// A unit's main process dying of SIGKILL this long after the kill of
/// another of its processes is the kill's consequence. The clocks of dmesg
/// and the journal may differ by a second or two.
const UNIT_WINDOW: std::ops::RangeInclusive<i64> = -3..=10;
/// The kill of the main process itself: the same instant, give or take skew.
const SAME_PID_WINDOW: std::ops::RangeInclusive<i64> = -5..=5;
/// systemd's own notice follows the kill within milliseconds.
const NOTICE_WINDOW: std::ops::RangeInclusive<i64> = -5..=60;

/// SGLang's SIGCHLD handler: `Child process unexpectedly failed with
/// exitcode=9. pid=91234`.
static SGLANG_CHILD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Child process unexpectedly failed with exitcode=(?P<code>-?[0-9]+)\. pid=(?P<pid>[0-9]+)",
    )
    .expect("regex")
});

/// vLLM v0: `Worker VllmWorkerProcess pid 4243 died, exit code: -9`.
static VLLM_WORKER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"pid (?P<pid>[0-9]+) died, exit code: (?P<code>-?[0-9]+)").expect("regex")
});

/// A cgroup path that may be shown inside a suggested command.
static SAFE_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^/[0-9A-Za-z_./@:-]{1,200}$").expect("regex"));

/// A peer process gone from a collective: what the surviving ranks say.
static PEER_GONE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Connection closed by peer|Connection reset by peer|remote process exited")
        .expect("regex")
});

/// How long after a rank's kill its peers' errors may come.
const PEER_WINDOW: std::ops::RangeInclusive<i64> = 0..=120;

/// Process titles of model servers: a victim with one is a server process.
const SERVER_COMMS: &[&str] = &["sglang::", "VLLM::", "ray::", "pt_main_thread"];

/// Kernel `comm`s (15 bytes) of processes that are a serving or training
/// job themselves, not bystanders: Python (every SGLang/vLLM/PyTorch
/// process before it renames itself), Triton, Ollama and llama.cpp's server.
const WORKLOAD_COMMS: &[&str] = &[
    "python",
    "tritonserver",
    "ollama",
    "llama-server",
    "text-generation",
    "torchrun",
    "vllm",
    "sglang",
];

/// A victim this big was the workload that ran out of memory, not a
/// bystander: 4 GiB resident, in KiB.
const BIG_VICTIM_KB: u64 = 4 * 1024 * 1024;

static META: RuleMeta = RuleMeta {
    id: "kernel-oom-killer",
    category: Category::HostOomKiller,
    severity: Severity::Error,
    summary: "the kernel's OOM killer killed a process (host RAM or a cgroup limit exhausted)",
    anchors: &[
        "Child process unexpectedly failed",
        "died, exit code",
        // `invoked oom-killer` and `oom-kill:constraint=` are the catalog
        // rows `kernel.oom-invoked` and `kernel.oom-summary`.
        "memory: usage",
        "closed by peer",
        "reset by peer",
        "remote process exited",
    ],
    doc: r#"
## What it means
`Out of memory: Killed process 91234 (sglang::schedul) total-vm:…kB,
anon-rss:…kB, …` (or `Memory cgroup out of memory: …`): the host's RAM, or
the memory limit of the victim's cgroup (`MemoryMax=`, a container limit),
was exhausted and the kernel killed the process it scored worst. The
`oom-kill:` summary line names the victim's cgroup (`task_memcg=`), i.e.
its unit; systemd logs `A process of this unit has been killed by the OOM
killer.` and, when it stops the unit for it, `Failed with result
'oom-kill'`. The victim dies without a Python traceback; its peers then fail
(a tensor-parallel rank's death breaks every collective) and the server's
main process ends by SIGKILL.

A unit's `status=9/KILL` alone is **not** evidence of the OOM killer:
SGLang kills its whole process tree and itself with SIGKILL after any child
failure. This rule attributes a SIGKILL exit to the OOM killer only when the
kernel killed that PID, or a process of that unit's cgroup, seconds before.

The kill is an error, and can be the root cause, when its victim was the
workload: a unit's or server's process (a user's jobs count under their
`user@UID.service`), a job by its name (`python`, `tritonserver`,
`ollama`, …), the process of a cgroup whose own limit was hit, a victim
of 4 GiB or more, or a victim the inputs are about (a FUSE daemon such as
`mount-s3` whose mount's accesses then fail with `Transport endpoint is
not connected`, or one their other lines name) when nothing else in them
failed and no model server's lines are there, unless another unit failed apart from the kill (then
the victim was a bystander of that failure). A small bystander killed on a
global OOM stays a warning: something else used the memory.

## Why it happens
Tensor-parallel ranks loading weights at the same time (each reads its
shards into host memory), CPU offload, hierarchical KV cache or swap space
sized too large, shared memory (`/dev/shm`, counted as `shmem-rss`), a leak
over a long uptime, or other workloads on the host.

## How to confirm
`journalctl -k | grep -iE 'invoked oom-killer|Killed process|oom-kill:'`;
the task table of the report shows who held the memory;
`systemctl show -p MemoryMax -p MemoryPeak UNIT` for a cgroup limit.

## How to fix
Reduce the server's host-memory demand (fewer concurrent loaders, smaller
offload/swap/host cache sizes), raise `MemoryMax=` or the container limit
if the host has room, or add RAM; stop other workloads competing for it.
Do not disable the OOM killer.

## Safety
Advice only: the fix is a configuration or capacity change.
"#,
};

impl Rule for KernelOomKiller {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // One kill seen by two captures (dmesg and the journal) is one.
        let mut kills: Vec<Kill> = Vec::new();
        for e in &incident.facts.kernel_events {
            let KernelEventKind::OomKill(k) = &e.kind else {
                continue;
            };
            // A report cut after `invoked oom-killer` names no victim and
            // has no summary (printed only once a victim is chosen): the
            // kernel was asked to kill, and nothing says it did.
            if k.pid.is_none() && k.comm.is_none() && k.constraint.is_none() {
                continue;
            }
            match kills
                .iter_mut()
                .find(|x| x.oom.pid.is_some() && x.oom.pid == k.pid && x.oom.comm == k.comm)
            {
                Some(x) => x.events.push(e),
                None => {
                    let unit = k.task_memcg.as_deref().and_then(unit_of_cgroup);
                    let owner = k.pid.and_then(|p| incident.owner(p));
                    kills.push(Kill {
                        oom: k,
                        events: vec![e],
                        unit: unit.or_else(|| owner.map(|o| o.unit.clone())),
                    });
                }
            }
        }
        // The kills of one unit's processes are one failure repeating (a
        // crash loop that runs out of memory at every start): one finding.
        let mut groups: Vec<Vec<Kill>> = Vec::new();
        for k in kills {
            match groups.iter_mut().find(|g| {
                k.unit.is_some()
                    && g[0].unit == k.unit
                    && g[0].oom.cgroup_limit == k.oom.cgroup_limit
            }) {
                Some(g) => g.push(k),
                None => groups.push(vec![k]),
            }
        }
        for g in &groups {
            report(incident, g, out);
        }
    }
}

/// One OOM kill, with the events (captures) that report it.
struct Kill<'a> {
    oom: &'a OomKill,
    events: Vec<&'a KernelEvent>,
    /// The victim's unit: its cgroup, or the owner of its PID.
    unit: Option<String>,
}

impl Kill<'_> {
    fn victim(&self) -> String {
        match (self.oom.pid, &self.oom.comm) {
            (Some(p), Some(c)) => format!("PID {p} ({c})"),
            (Some(p), None) => format!("PID {p}"),
            (None, Some(c)) => c.clone(),
            (None, None) => "a process".to_owned(),
        }
    }
}

/// Why a unit's SIGKILL exit is the OOM kill's doing, or `None` when the
/// kernel evidence does not reach it. `dt` is seconds from the kill to the
/// exit, when both are timed.
fn attribute(
    kill: &OomKill,
    basis: Option<OwnerBasis>,
    unit: &str,
    dt: Option<i64>,
) -> Option<String> {
    // The unit's main process: systemd's Main PID, or the process whose
    // output the unit's journal lines carry.
    let main = basis.is_some_and(|b| {
        matches!(
            b,
            OwnerBasis::MainPid
                | OwnerBasis::ShowMainPid
                | OwnerBasis::JournalField
                | OwnerBasis::InferredFromJournalOrder
        )
    });
    match dt {
        Some(d) if main && SAME_PID_WINDOW.contains(&d) => Some(format!(
            "the kernel killed this very process {}",
            seconds(d)
        )),
        None if main => Some("the kernel killed this very process".to_owned()),
        Some(d) if UNIT_WINDOW.contains(&d) => Some(format!(
            "the kernel killed a process of {unit}'s cgroup{} {}, and the server's main process ended after it",
            kill.pid.map(|p| format!(" (PID {p})")).unwrap_or_default(),
            seconds(d)
        )),
        _ => None,
    }
}

fn seconds(d: i64) -> String {
    match d {
        0 => "at the same second".to_owned(),
        d if d > 0 => format!("{d} s before"),
        d => format!("{} s after (clock skew)", -d),
    }
}

/// The main PID systemd knows for a unit.
fn owner_main(incident: &Incident, unit: &Option<String>) -> Option<u32> {
    let u = unit.as_deref()?;
    incident
        .owners
        .iter()
        .find(|(_, o)| {
            o.unit == u && matches!(o.basis, OwnerBasis::MainPid | OwnerBasis::ShowMainPid)
        })
        .map(|(p, _)| *p)
}

/// `/system.slice/sglang.service` → `sglang.service`; a user's processes
/// under their manager, `/user.slice/user-1001.slice/user@1001.service/…`,
/// → `user@1001.service` (the system unit that holds them). A session scope
/// or a container is not a system unit.
fn unit_of_cgroup(path: &str) -> Option<String> {
    let unit = if let Some(rest) = path.strip_prefix("/system.slice/") {
        rest.split('/').next()?
    } else {
        let rest = path.strip_prefix("/user.slice/")?;
        let mut parts = rest.split('/');
        let slice = parts.next()?;
        let uid = slice.strip_prefix("user-")?.strip_suffix(".slice")?;
        let unit = parts.next()?;
        if unit != format!("user@{uid}.service") {
            return None;
        }
        unit
    };
    (unit.ends_with(".service") && unit.len() > ".service".len()).then(|| unit.to_owned())
}

/// anon + file + shmem resident memory, in KiB.
fn resident_kb(kill: &OomKill) -> Option<u64> {
    let parts = [kill.anon_rss_kb, kill.file_rss_kb, kill.shmem_rss_kb];
    if parts.iter().all(Option::is_none) {
        let pid = kill.pid?;
        return kill
            .tasks
            .iter()
            .find(|t| t.pid == pid)
            .map(|t| t.rss_pages * 4);
    }
    Some(parts.iter().flatten().sum())
}

/// `187.4 GiB`.
fn gib(kb: u64) -> String {
    format!("{:.1} GiB", kb as f64 / (1024.0 * 1024.0))
}

/// The line of the kill's report that contains `needle` (one of the
/// rule's anchors, so the prefilter kept it).
fn related_line(incident: &Incident, event: &KernelEvent, needle: &str) -> Option<Span> {
    incident
        .facts
        .messages
        .iter()
        .find(|m| event.related.contains(&m.span) && m.text.contains(needle))
        .map(|m| m.span)
}

#[cfg(test)]
mod tests;
