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
`ollama`, …), the process of a cgroup whose own limit was hit, or a victim
of 4 GiB or more, unless another unit failed apart from the kill (then
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

fn report(incident: &Incident, kills: &[Kill<'_>], out: &mut Vec<Finding>) {
    let first = &kills[0];
    let kill = first.oom;
    let event = first.events[0];
    let time = first.events.iter().find_map(|e| kernel_time(incident, e));
    let victim = first.victim();
    let unit = first.unit.clone();
    let owner = kill.pid.and_then(|p| incident.owner(p));
    let is_server = kills.iter().any(|k| {
        k.oom
            .comm
            .as_deref()
            .is_some_and(|c| SERVER_COMMS.iter().any(|s| c.starts_with(s)))
    });
    // The kill ended a workload, and so is the failure to explain, when the
    // victim is a unit's or a server's process, a job by its name, the
    // process of a cgroup whose own limit was hit (the limit was set for
    // that workload), or the host's biggest process. A small bystander
    // killed on a global OOM stays a warning: something else used the RAM.
    let workload = kills.iter().any(|k| {
        k.oom.cgroup_limit
            || k.oom.comm.as_deref().is_some_and(|c| {
                WORKLOAD_COMMS
                    .iter()
                    .any(|w| c.to_ascii_lowercase().starts_with(w))
            })
            || resident_kb(k.oom).is_some_and(|kb| kb >= BIG_VICTIM_KB)
    });
    // A unit of its own that failed away from the kill (not seconds after
    // it) is another story: the victim was a bystander of that one.
    let kill_time = time;
    let elsewhere = incident.units.iter().any(|(name, u)| {
        Some(name) != unit.as_ref()
            && u.events.iter().any(|ev| {
                let failed = match &ev.kind {
                    UnitEventKind::FailedWithResult(r) => r != "oom-kill",
                    UnitEventKind::MainProcessExited { code, status } => {
                        !(code == "exited" && status.starts_with("0/"))
                    }
                    _ => false,
                };
                let near = kill_time
                    .zip(incident.time_of(ev.span))
                    .is_some_and(|(a, b)| UNIT_WINDOW.contains(&seconds_between(a, b)));
                failed && !near
            })
    });
    let workload = workload && !elsewhere;
    let severity = if unit.is_some() || is_server || workload {
        META.severity
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(META.id, META.category, severity);
    f.occurrences = kills.len() as u32;
    if let Some(u) = &unit {
        f.entities.units.insert(u.clone());
    }
    for k in kills {
        if let Some(p) = k.oom.pid {
            f.entities.pids.insert(p);
            for g in incident.gpu_processes.iter().filter(|g| g.pid == p) {
                f.entities.gpus.extend(g.gpu);
            }
        }
    }
    let size = resident_kb(kill).map(gib).unwrap_or_default();
    for k in kills {
        let size = resident_kb(k.oom).map(gib).unwrap_or_default();
        for e in &k.events {
            f.evidence_once(
                e.span,
                format!(
                    "the kernel killed {}{} ({})",
                    k.victim(),
                    if size.is_empty() {
                        String::new()
                    } else {
                        format!(", {size} resident")
                    },
                    if k.oom.cgroup_limit {
                        "a cgroup's memory limit was hit"
                    } else {
                        "the host ran out of memory"
                    }
                ),
            );
        }
    }
    if let Some(span) = related_line(incident, event, "invoked oom-killer") {
        f.evidence(
            span,
            format!(
                "{} asked for memory the kernel could not find",
                kill.invoked_by.as_deref().unwrap_or("a process")
            ),
        );
    }
    // Kernels before 5.0 name the victim first (`Out of memory: Kill
    // process N (comm) score S or sacrifice child`).
    if let Some(span) = related_line(incident, event, "or sacrifice child") {
        f.evidence(span, format!("the kernel chose {victim} to kill"));
    }
    if let Some(span) = related_line(incident, event, "oom-kill:constraint=") {
        f.evidence(
            span,
            match (&kill.task_memcg, &unit) {
                (Some(cg), Some(u)) => format!("the victim's cgroup {cg} is {u}"),
                (Some(cg), None) => format!("the victim's cgroup is {cg}"),
                _ => "the kernel's summary of the kill".to_owned(),
            },
        );
    }
    if let (Some(usage), Some(limit)) = (kill.memcg_usage_kb, kill.memcg_limit_kb) {
        if let Some(span) = related_line(incident, event, "memory: usage") {
            f.evidence(
                span,
                format!("the cgroup used {} of its {} limit", gib(usage), gib(limit)),
            );
        }
    }
    // The biggest processes of the report: who held the memory.
    let mut tasks: Vec<_> = kill.tasks.iter().collect();
    tasks.sort_by_key(|t| std::cmp::Reverse(t.rss_pages));
    // Pages are 4 KiB: 262144 pages are 1 GiB.
    let big = |t: &&&OomTask| t.rss_pages >= 262_144;
    for t in tasks
        .iter()
        .filter(|t| Some(t.pid) != kill.pid)
        .filter(big)
        .take(2)
    {
        f.evidence(
            t.span,
            format!(
                "also resident at the time: PID {} ({}), {}",
                t.pid,
                t.name,
                gib(t.rss_pages * 4)
            ),
        );
    }
    if let Some(o) = owner {
        f.evidence(
            o.span,
            format!(
                "PID {} belongs to {}: {}",
                kill.pid.unwrap_or(0),
                o.unit,
                o.basis.describe()
            ),
        );
    }
    // What the server saw of it.
    for (m, c) in matches(incident, &SGLANG_CHILD).chain(matches(incident, &VLLM_WORKER)) {
        if let Some(k) = kills
            .iter()
            .find(|k| c["pid"].parse::<u32>().ok() == k.oom.pid)
        {
            f.evidence(
                m.span,
                format!(
                    "the server saw {} die (exit code {})",
                    k.victim(),
                    &c["code"]
                ),
            );
        }
    }
    // The surviving ranks' errors: their peer vanished from a collective.
    if is_server {
        let gone: Vec<_> = matches(incident, &PEER_GONE)
            .map(|(m, _)| m)
            .filter(|m| {
                kills.iter().any(|k| {
                    let at = k.events.iter().find_map(|e| kernel_time(incident, e));
                    at.zip(incident.time_of(m.span))
                        .is_some_and(|(a, b)| PEER_WINDOW.contains(&seconds_between(a, b)))
                })
            })
            .collect();
        for (m, n) in distinct(gone.into_iter()).into_iter().take(2) {
            f.evidence(
                m.span,
                format!("the other ranks lost their peer in a collective ({n}x)"),
            );
        }
    }
    let mut attributed = 0;
    let mut notice = false;
    if let Some(u) = &unit {
        for k in kills {
            let at = k.events.iter().find_map(|e| kernel_time(incident, e));
            let basis = k.oom.pid.and_then(|p| incident.owner(p)).map(|o| o.basis);
            let mut exit_done = false;
            for ev in incident.units.get(u).into_iter().flat_map(|x| &x.events) {
                let dt = at
                    .zip(incident.time_of(ev.span))
                    .map(|(a, b)| seconds_between(a, b));
                let near = dt.is_none_or(|d| NOTICE_WINDOW.contains(&d));
                match &ev.kind {
                    UnitEventKind::OomKilled if near => {
                        f.evidence(
                            ev.span,
                            format!("systemd: a process of {u} was killed by the OOM killer"),
                        );
                        notice = true;
                    }
                    UnitEventKind::FailedWithResult(r) if r == "oom-kill" && near => {
                        f.evidence(
                            ev.span,
                            format!("systemd stopped {u} for it: result 'oom-kill'"),
                        );
                        notice = true;
                    }
                    UnitEventKind::MainProcessExited { code, status }
                        if code == "killed" && status.starts_with("9/") && !exit_done =>
                    {
                        if let Some(why) = attribute(k.oom, basis, u, dt) {
                            f.evidence(
                                ev.span,
                                format!("{u}'s main process died of SIGKILL: {why}"),
                            );
                            attributed += 1;
                            exit_done = true;
                        }
                    }
                    _ => {}
                }
            }
        }
        for p in incident
            .facts
            .unit_properties
            .iter()
            .filter(|p| p.unit.as_deref() == Some(u.as_str()))
        {
            if p.result.as_deref() == Some("oom-kill") {
                if let Some(span) = p.span_of("Result") {
                    f.evidence(
                        span,
                        format!("systemctl show: {u} ended with Result=oom-kill"),
                    );
                    notice = true;
                }
            }
            // Why a SIGKILL and not systemd's stop: the unit lets the
            // server handle the loss of a process itself.
            if let Some((policy, span)) = p.properties.get("OOMPolicy") {
                if policy == "continue" {
                    f.evidence(
                        *span,
                        format!("OOMPolicy=continue: systemd leaves {u} running after an OOM kill, so the server ends itself"),
                    );
                }
            }
        }
    }
    f.condition("the kernel's report names the victim", kill.pid.is_some());
    f.condition(
        "the victim belongs to a unit or is a server process",
        unit.is_some() || is_server,
    );
    f.condition(
        "systemd or the server confirm the kill",
        notice || attributed > 0 || f.evidence.len() > first.events.len() + 1,
    );
    let scope = if kill.cgroup_limit {
        match &unit {
            Some(u) => format!("{u} hit its memory limit"),
            None => "a cgroup hit its memory limit".to_owned(),
        }
    } else {
        "the host ran out of memory".to_owned()
    };
    let of_unit = unit
        .as_ref()
        .map(|u| format!(" of {u}"))
        .unwrap_or_default();
    f.title = if kills.len() > 1 {
        format!("the OOM killer killed {} processes{of_unit}", kills.len())
    } else {
        format!("the OOM killer killed {victim}{of_unit}")
    };
    let when = time.map(crate::rules::support::when);
    f.headline = format!(
        "{}: the kernel's OOM killer killed {victim}{of_unit}{}{}{}.",
        crate::rules::support::capitalise(&scope),
        if size.is_empty() {
            String::new()
        } else {
            format!(" ({size} resident)")
        },
        when.map(|w| format!(" at {w}")).unwrap_or_default(),
        match kills.len() {
            1 => String::new(),
            2 => ", and one more of its processes after the next start".to_owned(),
            n => format!(", and {} more of its processes after later starts", n - 1),
        }
    );
    if let (Some(u), true) = (&unit, attributed > 0) {
        f.chain.push(format!(
            "{u}'s main process died of SIGKILL (status=9/KILL): a consequence, not the cause"
        ));
    }
    let peers = kill
        .tasks
        .iter()
        .any(|t| Some(t.pid) != kill.pid && SERVER_COMMS.iter().any(|s| t.name.starts_with(s)))
        || matches(incident, &SGLANG_CHILD).next().is_some();
    if is_server && peers && kill.pid != owner_main(incident, &unit) {
        f.chain.push(
            "the other ranks of the server failed, since a peer of their collectives was gone"
                .to_owned(),
        );
    }
    f.chain
        .push(format!("the OOM killer killed {victim}{of_unit}"));
    f.chain.push(scope.clone());
    f.explanation = format!(
        "{} The victim gets no chance to log anything; the server's other processes fail after it, and SGLang's main process then kills itself with SIGKILL. A SIGKILL exit is attributed to the OOM killer only with a kernel kill of that PID or its unit's cgroup within seconds.{}",
        if kill.cgroup_limit {
            "A memory cgroup out of memory means a limit (MemoryMax=, a container limit) was hit, not the host's RAM."
        } else {
            "A global OOM means the host's RAM (and swap) was exhausted."
        },
        if kills.len() > 1 {
            " It happened again after each restart: the same start-up needs more memory than the host has."
        } else {
            ""
        }
    );
    if let (Some(u), true) = (&unit, kills.len() > 1) {
        f.actions.push(Action::advice(
            format!(
                "stop {u} while its memory use is changed: every restart runs out of memory again"
            ),
            Some(&format!("systemctl stop {u}")),
        ));
    }
    if let Some(u) = &unit {
        f.actions.push(Action::advice(
            format!("look at {u}'s memory use and limit, and at the host's memory"),
            Some(&format!(
                "systemctl show -p MemoryMax -p MemoryPeak -p MemoryCurrent -p OOMPolicy {u}; free -g"
            )),
        ));
    } else if let Some(cg) = kill
        .oom_memcg
        .as_deref()
        .filter(|c| kill.cgroup_limit && SAFE_PATH.is_match(c))
    {
        f.actions.push(Action::advice(
            "look at the cgroup's (container's) memory limit and peak",
            Some(&format!(
                "cat /sys/fs/cgroup{cg}/memory.max /sys/fs/cgroup{cg}/memory.peak"
            )),
        ));
    } else {
        f.actions.push(Action::advice(
            "look at the host's memory and at who uses it",
            Some("free -g; ps -eo pid,rss,cmd --sort=-rss | head"),
        ));
    }
    f.actions.push(Action::advice(
        "reduce the server's host-memory demand: fewer ranks loading weights at once, smaller CPU offload, swap space or host KV cache, less /dev/shm; stop other workloads competing for RAM",
        None,
    ));
    f.actions.push(Action::advice(
        if kill.cgroup_limit {
            "if the host has free RAM, raise the cgroup's limit (MemoryMax= of the unit, or the container's limit); do not disable the OOM killer"
        } else {
            "add RAM or move workloads off the host; do not disable the OOM killer"
        },
        None,
    ));
    f.confidence = confidence(&f, 0.7, 0.97);
    out.push(f);
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
mod tests {
    use super::*;

    #[test]
    fn the_unit_of_a_cgroup() {
        let cases = [
            ("/system.slice/sglang.service", Some("sglang.service")),
            (
                "/system.slice/sglang.service/init.scope",
                Some("sglang.service"),
            ),
            ("/system.slice/docker-7c1e9a0b.scope", None),
            ("/user.slice/user-1001.slice/session-12.scope", None),
            (
                "/user.slice/user-21417.slice/user@21417.service",
                Some("user@21417.service"),
            ),
            (
                "/user.slice/user-1001.slice/user@1001.service/app.slice/job.service",
                Some("user@1001.service"),
            ),
            ("/user.slice/user-1001.slice/user@1002.service", None),
            (
                "/kubepods.slice/kubepods-burstable.slice/cri-containerd-1.scope",
                None,
            ),
            ("/system.slice/.service", None),
            ("/", None),
        ];
        for (path, unit) in cases {
            assert_eq!(unit_of_cgroup(path).as_deref(), unit, "{path}");
        }
    }

    #[test]
    fn a_sigkill_exit_is_attributed_only_with_kernel_evidence_in_time() {
        let kill = OomKill {
            pid: Some(91234),
            ..OomKill::default()
        };
        let main = Some(OwnerBasis::MainPid);
        let child = Some(OwnerBasis::CgroupTree);
        // (owner basis of the victim, seconds from the kill to the exit, attributed)
        let cases = [
            (main, Some(0), true),
            (main, Some(-4), true),
            // Still a process of the unit's cgroup.
            (main, Some(9), true),
            (main, Some(12), false),
            (main, None, true),
            (child, Some(4), true),
            (child, Some(-3), true),
            (child, Some(11), false),
            (child, Some(-20), false),
            (child, None, false),
            (None, Some(2), true),
            (None, None, false),
        ];
        for (basis, dt, expected) in cases {
            assert_eq!(
                attribute(&kill, basis, "sglang.service", dt).is_some(),
                expected,
                "{basis:?} {dt:?}"
            );
        }
    }
}
