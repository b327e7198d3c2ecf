//! `stale-serving-process`: model-server worker processes that outlived
//! their server: re-parented to PID 1, left behind by systemd, or stuck.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Gpu, GpuProcess, Incident, UnitEventKind};
use crate::model::{GpuUuid, Pid, StartTime, UnitName};
use crate::rules::support::{confidence, mib};
use crate::rules::{
    Action, ActionKind, Category, ExpectedCmdline, Finding, GpuHold, GpuRef, ProcessIdentity, Rule,
    RuleMeta, Safety, Severity,
};
use crate::source::Span;

mod duplicates;
use duplicates::duplicates;

pub static RULE: StaleServingProcess = StaleServingProcess;

pub struct StaleServingProcess;

/// Titles of worker processes: they always have a server as their parent.
const WORKER_TITLES: &[&str] = &[
    "sglang::scheduler",
    "sglang::detokenizer",
    "sglang::data_parallel_controller",
    "VLLM::EngineCore",
    "VLLM::Worker",
    "VLLM::DPCoordinator",
    "ray::RayWorkerWrapper",
];

static META: RuleMeta = RuleMeta {
    id: "stale-serving-process",
    category: Category::StaleServingInstance,
    severity: Severity::Error,
    summary: "worker processes of a model server outlived their server and still hold resources",
    // PID 1's lines are the catalog rows `systemd.process-remains` and
    // `systemd.left-over-process`.
    anchors: &["[nvidia_uvm]", "[nvidia]", "/stack"],
    doc: r#"
## What it means
A worker of a model server (`sglang::scheduler_TP3`, `VLLM::EngineCore`,
`VLLM::Worker_TP1`) is still alive although its server is gone: `ps` shows it
re-parented to PID 1, or systemd logged `Unit process N remains running
after unit stopped` / `Found left-over process N`. It keeps its GPU memory
and ports, so the next start of a server fails.

## Why it happens
`KillMode=process` (or `none`) in the unit, a server started by hand with
`nohup` and killed without its process group, or a worker stuck in the
driver (`D` state) after a GPU fault, which no signal can end.

## How to confirm
`ps -eo pid,ppid,lstart,stat,cmd`: PPID 1, a start time older than the
current server, state `D` when stuck (`cat /proc/PID/stack` shows where).
nvidia-smi lists the PID with memory; its siblings (same title, nearby PIDs)
belong to the same orphaned server.

## How to fix
Terminate the leftover after checking it still is the process the report
names; wait until its GPU memory is released. A process in `D` state, or one
whose kernel stack (`/proc/PID/stack`) is inside the NVIDIA driver
(`[nvidia_uvm]`), cannot be killed: SIGKILL waits until the driver call
returns. Find the GPU fault (`dmesg`: Xid, UVM errors), then reset the GPU or
reboot, and upgrade the driver.

Python `multiprocessing` workers (`spawn_main … --multiprocessing-fork`)
re-parented to PID 1 beside a GPU with memory in use and no process table
are reported as likely holders, at a lower confidence: the process table
(`nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv`)
settles it. Inside a container whose PID 1 is the server itself, PPID 1 is
normal and proves nothing. Use `KillMode=control-group` (the
default) so that stopping the unit ends every process of the server.

Copies of one serving command on one GPU (nvtop's rows, or a process
table with full command lines), each holding a model's worth of memory, are
leftovers too: one server runs one copy of each. Which copy is current the
rows do not say, so the finding is a warning that names the command that
settles it (`ps -o pid,ppid,lstart,etimes,cmd`) and scripts no signal.

## Safety
Terminating needs confirmation; the script re-checks the PID's command line
and unit before any signal and escalates to SIGKILL only after SIGTERM and a
grace period.
"#,
};

/// A Python `multiprocessing` child: a server's spawned worker (vLLM,
/// Dynamo, SGLang's data-parallel ranks) or its resource tracker. Re-parented
/// to PID 1 its parent, the server, is gone.
const SPAWN_MARKS: &[&str] = &[
    "from multiprocessing.spawn import spawn_main",
    "--multiprocessing-fork",
    "from multiprocessing.resource_tracker import main",
];

/// A kernel stack frame in the NVIDIA driver (`/proc/PID/stack`).
static DRIVER_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*\[<[0-9a-fx]+>\]\s+(?P<fn>[0-9A-Za-z_.]+)\+0x[0-9a-f]+/0x[0-9a-f]+\s+\[(?P<module>nvidia(?:_uvm|_modeset|_drm)?)\]")
        .expect("stack frame regex")
});
static PROC_STACK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"/proc/(?P<pid>[0-9]+)/stack").expect("proc stack regex"));

/// Lines of a kernel stack that follow their `cat /proc/PID/stack`.
const STACK_REACH: u32 = 40;

/// One leftover process and why it is one.
struct Leftover<'a> {
    pid: u32,
    cmd: &'a str,
    span: Span,
    ppid: Option<u32>,
    stat: Option<&'a str>,
    started: Option<&'a str>,
    /// Only nvidia-smi lists it: a sibling (same title, nearby PID) of a
    /// proven leftover.
    sibling_of: Option<u32>,
}

/// Which kind of worker a command line is: its title, or the
/// multiprocessing marker.
fn family(cmd: &str) -> Option<&'static str> {
    if let Some(t) = WORKER_TITLES.iter().find(|t| cmd.starts_with(*t)) {
        return Some(t);
    }
    SPAWN_MARKS
        .iter()
        .any(|m| cmd.contains(m))
        .then_some("python multiprocessing")
}

impl Rule for StaleServingProcess {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let left_over_by_systemd = |pid: u32| {
            incident.units.values().flat_map(|u| &u.events).find(|e| {
                matches!(e.kind, UnitEventKind::RemainsRunning { pid: p } | UnitEventKind::LeftOverProcess { pid: p } if p == pid)
            })
        };
        // Inside a container PID 1 may be the server itself: then PPID 1 is
        // its children's normal parent, not a sign of an orphan.
        let pid1_is_server = incident.facts.ps.iter().any(|p| {
            p.pid == 1
                && ["python", "vllm", "sglang", "dynamo", "ray"]
                    .iter()
                    .any(|m| p.cmd.contains(m))
        });
        let stacks = driver_stacks(incident);
        let mut families: BTreeMap<&'static str, Vec<Leftover<'_>>> = BTreeMap::new();
        for p in &incident.facts.ps {
            let Some(fam) = family(&p.cmd) else { continue };
            let orphan = p.ppid == Some(1) && !pid1_is_server;
            let stuck = p.stat.as_deref().is_some_and(|s| s.starts_with('D'))
                || stacks.iter().any(|s| s.pid == Some(p.pid));
            if orphan || left_over_by_systemd(p.pid).is_some() || stuck {
                families.entry(fam).or_default().push(Leftover {
                    pid: p.pid,
                    cmd: &p.cmd,
                    span: p.span,
                    ppid: p.ppid,
                    stat: p.stat.as_deref(),
                    started: p.started.as_deref(),
                    sibling_of: None,
                });
            }
        }
        // Workers nvidia-smi lists with the same title as a proven leftover,
        // PIDs close to it, and no ps row that gives them a live parent:
        // the rest of the same orphaned server.
        for (fam, members) in families.iter_mut() {
            let Some(anchor) = members.first().map(|m| m.pid) else {
                continue;
            };
            if !WORKER_TITLES.contains(fam) {
                continue;
            }
            let known: BTreeSet<u32> = members.iter().map(|m| m.pid).collect();
            for g in &incident.gpu_processes {
                let near = g.pid.abs_diff(anchor) <= 64;
                let in_ps = incident.facts.ps.iter().any(|r| r.pid == g.pid);
                if near && !in_ps && !known.contains(&g.pid) && g.name.starts_with(*fam) {
                    if let Some(span) = g.spans.first() {
                        members.push(Leftover {
                            pid: g.pid,
                            cmd: &g.name,
                            span: *span,
                            ppid: None,
                            stat: None,
                            started: None,
                            sibling_of: Some(anchor),
                        });
                    }
                }
            }
            members.sort_by_key(|m| m.pid);
            members.dedup_by_key(|m| m.pid);
        }
        let mut named: BTreeSet<u32> = BTreeSet::new();
        for (fam, members) in families {
            if !members.is_empty() {
                named.extend(members.iter().map(|m| m.pid));
                out.push(finding(incident, fam, &members, &stacks));
            }
        }
        out.extend(duplicates(incident, &named));
    }
}

/// A kernel stack with frames in the NVIDIA driver, and whose it is.
struct DriverStack {
    /// From the `/proc/PID/stack` line above it; `None` when not shown.
    pid: Option<u32>,
    frames: Vec<Span>,
    modules: BTreeSet<String>,
}

fn driver_stacks(incident: &Incident) -> Vec<DriverStack> {
    let messages = &incident.facts.messages;
    // The `cat /proc/PID/stack` lines, once: few, in input order.
    let headers: Vec<(Span, u32)> = messages
        .iter()
        .filter_map(|h| Some((h.span, PROC_STACK.captures(&h.text)?["pid"].parse().ok()?)))
        .collect();
    let mut out: Vec<DriverStack> = Vec::new();
    for m in messages {
        let Some(c) = DRIVER_FRAME.captures(&m.text) else {
            continue;
        };
        let pid = headers
            .iter()
            .rev()
            .find(|(h, _)| {
                h.source == m.span.source
                    && h.line < m.span.line
                    && m.span.line - h.line <= STACK_REACH
            })
            .map(|(_, pid)| *pid);
        match out.iter_mut().find(|s| {
            s.pid == pid
                && s.frames
                    .last()
                    .is_some_and(|l| l.source == m.span.source && m.span.line - l.line <= 2)
        }) {
            Some(s) => {
                s.frames.push(m.span);
                s.modules.insert(c["module"].to_owned());
            }
            None => out.push(DriverStack {
                pid,
                frames: vec![m.span],
                modules: BTreeSet::from([c["module"].to_owned()]),
            }),
        }
    }
    out
}

fn finding(
    incident: &Incident,
    fam: &str,
    members: &[Leftover<'_>],
    stacks: &[DriverStack],
) -> Finding {
    let left_over_by_systemd = |pid: u32| {
        incident.units.values().flat_map(|u| &u.events).find(|e| {
            matches!(e.kind, UnitEventKind::RemainsRunning { pid: p } | UnitEventKind::LeftOverProcess { pid: p } if p == pid)
        })
    };
    // A stack whose PID the capture did not print belongs to the only
    // leftover there is.
    let stack_of = |pid: u32| {
        stacks.iter().find(|s| {
            s.pid == Some(pid) || (s.pid.is_none() && members.len() == 1 && stacks.len() == 1)
        })
    };
    let stuck_state = |m: &Leftover<'_>| m.stat.is_some_and(|s| s.starts_with('D'));
    let stuck: Vec<&Leftover<'_>> = members
        .iter()
        .filter(|m| stuck_state(m) || stack_of(m.pid).is_some())
        .collect();
    let on_gpu: Vec<&GpuProcess> = incident
        .gpu_processes
        .iter()
        .filter(|g| members.iter().any(|m| m.pid == g.pid))
        .collect();
    // No process table at all, but a GPU with memory in use: the leftovers
    // are the likely holders, an inference the report states as one.
    let busy: Vec<&Gpu> = if incident.gpu_processes.is_empty() && on_gpu.is_empty() {
        incident
            .gpus
            .iter()
            .filter(|g| g.memory_used_mib.is_some_and(|u| u >= 1024))
            .collect()
    } else {
        Vec::new()
    };
    let severity = if on_gpu.is_empty() && stuck.is_empty() && busy.is_empty() {
        Severity::Warning
    } else {
        META.severity
    };
    let mut f = Finding::new(META.id, META.category, severity);
    let first = &members[0];
    for m in members {
        f.entities.pids.insert(m.pid);
        let mut note = format!(
            "PID {} `{}`{}{}",
            m.pid,
            m.cmd,
            m.ppid.map_or(String::new(), |x| format!(" has PPID {x}")),
            if stuck_state(m) { ", state D" } else { "" }
        );
        if let Some(anchor) = m.sibling_of {
            let _ = write!(
                note,
                " (not in ps: a worker of the same server as PID {anchor}, by its title and PID; inferred)"
            );
        }
        f.evidence(m.span, note);
        if let Some(e) = left_over_by_systemd(m.pid) {
            f.evidence(e.span, format!("systemd left PID {} behind", m.pid));
        }
        if let Some(s) = stack_of(m.pid) {
            for span in s.frames.iter().take(3) {
                f.evidence(
                    *span,
                    format!(
                        "PID {}'s kernel stack is inside the NVIDIA driver ({})",
                        m.pid,
                        s.modules.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                );
            }
        }
    }
    let mut held = 0;
    for g in &on_gpu {
        held += g.used_mib.unwrap_or(0);
        if let Some(gpu) = g.gpu {
            f.entities.gpus.insert(gpu);
        }
        for s in g.spans.iter().take(1) {
            f.evidence(
                *s,
                format!(
                    "{} holds {} on GPU {}",
                    if members.len() == 1 {
                        "it".to_owned()
                    } else {
                        format!("PID {}", g.pid)
                    },
                    mib(g.used_mib),
                    g.gpu.map_or("?".to_owned(), |x| x.to_string())
                ),
            );
        }
    }
    for g in &busy {
        f.entities.gpus.insert(g.index);
        if let Some(span) = g.spans.first() {
            f.evidence(
                *span,
                format!(
                    "GPU {} has {} of {} in use and the inputs list no process for it",
                    g.index,
                    mib(g.memory_used_mib),
                    mib(g.memory_total_mib)
                ),
            );
        }
    }
    let owner = members.iter().find_map(|m| incident.owner(m.pid));
    if let Some(o) = owner {
        f.entities.units.insert(o.unit.clone());
    }
    let pids: Vec<String> = members.iter().map(|m| m.pid.to_string()).collect();
    let pid_list = pids.join(", ");
    let what = if members.len() == 1 {
        format!("PID {} ({})", first.pid, first_word(first.cmd))
    } else {
        format!("PIDs {pid_list} ({fam})")
    };
    let any_stuck_stack = stuck.iter().any(|m| stack_of(m.pid).is_some());
    f.condition("it is a worker process of a model server", true);
    f.condition(
        "its server is gone (PPID 1 or left behind by systemd)",
        true,
    );
    f.condition("it holds GPU memory", !on_gpu.is_empty());
    if !busy.is_empty() {
        f.condition(
            "a process table links the PIDs to the busy GPU (missing: nvidia-smi --query-compute-apps)",
            false,
        );
    }
    let gpus: Vec<String> = f.entities.gpus.iter().map(|g| format!("GPU {g}")).collect();
    f.title = if members.len() == 1 {
        format!(
            "leftover server worker PID {} ({})",
            first.pid,
            first_word(first.cmd)
        )
    } else {
        format!("leftover server workers {what}")
    };
    let is_are = if members.len() == 1 { "is" } else { "are" };
    f.headline = if !on_gpu.is_empty() {
        format!(
            "{} of an earlier model server, {what}, still hold{} {} on {}.",
            if members.len() == 1 {
                "A worker"
            } else {
                "Workers"
            },
            if members.len() == 1 { "s" } else { "" },
            mib(Some(held)),
            gpus.join(", ")
        )
    } else if !busy.is_empty() {
        format!(
            "Orphaned workers of an earlier model server, {what}, {is_are} still running (re-parented to PID 1) and probably hold {}, which has memory in use with no process listed (inferred: the inputs have no GPU process table).",
            gpus.join(", ")
        )
    } else if members.len() == 1 {
        format!("A worker of an earlier model server, {what}, is still running.")
    } else {
        format!("Workers of an earlier model server, {what}, are still running.")
    };
    if any_stuck_stack {
        f.headline.push_str(
            " It is stuck inside the NVIDIA driver (nvidia_uvm): SIGKILL is not delivered until the driver call returns, so only a GPU reset or a reboot frees it.",
        );
    }
    for m in members {
        f.chain.push(format!("PID {} outlived its server", m.pid));
    }
    if !stuck.is_empty() {
        f.chain.push(if any_stuck_stack {
            "it is stuck in a call into the NVIDIA driver (its kernel stack is in nvidia_uvm/nvidia): no signal ends it until that call returns".to_owned()
        } else {
            "it is stuck in the kernel (D state): no signal can end it".to_owned()
        });
    }
    if !busy.is_empty() {
        f.chain.push(format!(
            "{} has memory in use that no listed process accounts for; the orphaned workers are the likely holders (inferred)",
            gpus.join(", ")
        ));
    }
    f.explanation = "A worker's parent is its server; a worker whose parent is PID 1 was orphaned when the server died without taking its process group along.".to_owned();
    if !busy.is_empty() {
        f.explanation.push_str(
            " The inputs have no GPU process table, so which GPU each PID holds is inferred; `nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv` settles it.",
        );
        f.actions.push(Action::advice(
            "confirm which GPU each leftover PID holds",
            Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
        ));
    }
    if any_stuck_stack {
        f.actions.push(Action::advice(
            "the process is stuck in the NVIDIA driver: a kill signal waits until the driver call returns. Look for the GPU fault (Xid, UVM errors), then reset the GPU or reboot the host; a driver upgrade fixes known UVM hangs",
            Some("dmesg -T | grep -E 'NVRM: Xid|nvidia-uvm|fallen off the bus'"),
        ));
        f.actions.push(Action::advice(
            "if no other process uses the GPU, reset it; otherwise reboot",
            Some("nvidia-smi --gpu-reset -i GPU_INDEX"),
        ));
    } else if !stuck.is_empty() {
        f.actions.push(Action::advice(
            "the process is in D state: find the GPU fault and reset the GPU or reboot",
            Some("dmesg -T | grep -E 'NVRM: Xid|fallen off the bus'"),
        ));
    }
    let killable: Vec<&Leftover<'_>> = members
        .iter()
        .filter(|m| !stuck.iter().any(|s| s.pid == m.pid))
        .collect();
    for m in &killable {
        let Ok(pid) = Pid::new(m.pid) else { continue };
        let unit = incident
            .owner(m.pid)
            .and_then(|o| UnitName::new(&o.unit).ok());
        let cmdline = ExpectedCmdline::new(m.cmd).ok();
        // ps -o lstart guards against PID reuse when the bundle has it.
        let start = m.started.and_then(|s| StartTime::new(s).ok());
        // At run time it must still hold memory where nvidia-smi saw it.
        let gpu = match on_gpu.iter().find(|g| g.pid == m.pid).and_then(|g| g.gpu) {
            Some(index) => GpuHold::On(GpuRef {
                index,
                uuid: incident
                    .gpu(index)
                    .and_then(|g| g.uuid.as_deref())
                    .and_then(|u| GpuUuid::new(u).ok()),
            }),
            None => GpuHold::AnyGpu,
        };
        if cmdline.is_some() || unit.is_some() {
            f.actions.push(
                Action::terminate(
                    ProcessIdentity {
                        pid,
                        unit,
                        cmdline,
                        start,
                        gpu,
                    },
                    format!("PID {} is a leftover worker", m.pid),
                )
                .with_evidence([m.span]),
            );
        }
    }
    if !killable.is_empty() && stuck.is_empty() {
        let gpus: Vec<GpuRef> = on_gpu
            .iter()
            .filter_map(|g| g.gpu)
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .map(|index| GpuRef {
                index,
                uuid: incident
                    .gpu(index)
                    .and_then(|g| g.uuid.as_deref())
                    .and_then(|u| GpuUuid::new(u).ok()),
            })
            .collect();
        if !gpus.is_empty() {
            f.actions.push(Action::new(
                ActionKind::WaitGpuMemoryFree {
                    gpus,
                    max_used_mib: 1024,
                    timeout_secs: 120,
                },
                Safety::Safe,
                "its GPU memory must be released before a server starts again",
            ));
        }
    }
    f.actions.push(Action::advice(
        "make a stop of the server's unit end all its processes: KillMode=control-group (the default)",
        owner.map(|o| format!("systemctl show -p KillMode {}", o.unit)).as_deref(),
    ));
    if owner.is_none() && stuck.is_empty() {
        f.actions.push(Action::advice(
            "started outside systemd (a shell, Slurm, a container): stop the server by its process group, so its workers go with it",
            Some("ps -o pid,pgid,ppid,stat,lstart,cmd -p PID"),
        ));
    }
    // An inference from a busy GPU is weaker than a process table's row.
    let (base, top) = if busy.is_empty() {
        (0.6, 0.95)
    } else {
        (0.45, 0.75)
    };
    f.confidence = confidence(&f, base, top);
    f
}

pub(super) fn first_word(cmd: &str) -> &str {
    cmd.split_whitespace().next().unwrap_or(cmd)
}
