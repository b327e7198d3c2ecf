//! `stale-serving-process`: model-server worker processes that outlived
//! their server: re-parented to PID 1, left behind by systemd, or stuck.

use crate::correlate::{Incident, UnitEventKind};
use crate::model::{GpuUuid, Pid, PsRecord, StartTime, UnitName};
use crate::rules::support::{confidence, mib};
use crate::rules::{
    Action, ActionKind, Category, ExpectedCmdline, Finding, GpuRef, ProcessIdentity, Rule,
    RuleMeta, Safety, Severity,
};

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
    anchors: &[
        "remains running after unit stopped",
        "Found left-over process",
    ],
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
current server, state `D` when stuck. nvidia-smi lists the PID with memory.

## How to fix
Terminate the leftover after checking it still is the process the report
names; wait until its GPU memory is released. A process in `D` state cannot
be killed: reset the GPU or reboot. Use `KillMode=control-group` (the
default) so that stopping the unit ends every process of the server.

## Safety
Terminating needs confirmation; the script re-checks the PID's command line
and unit before any signal and escalates to SIGKILL only after SIGTERM and a
grace period.
"#,
};

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
        let stale: Vec<&PsRecord> = incident
            .facts
            .ps
            .iter()
            .filter(|p| WORKER_TITLES.iter().any(|t| p.cmd.starts_with(t)))
            .filter(|p| {
                p.ppid == Some(1)
                    || left_over_by_systemd(p.pid).is_some()
                    || p.stat.as_deref().is_some_and(|s| s.starts_with('D'))
            })
            .collect();
        for p in stale {
            let stuck = p.stat.as_deref().is_some_and(|s| s.starts_with('D'));
            let on_gpu: Vec<_> = incident
                .gpu_processes
                .iter()
                .filter(|g| g.pid == p.pid)
                .collect();
            let severity = if on_gpu.is_empty() && !stuck {
                Severity::Warning
            } else {
                META.severity
            };
            let mut f = Finding::new(META.id, META.category, severity);
            f.entities.pids.insert(p.pid);
            f.evidence(
                p.span,
                format!(
                    "PID {} `{}`{}{}",
                    p.pid,
                    p.cmd,
                    p.ppid.map_or(String::new(), |x| format!(" has PPID {x}")),
                    if stuck { ", state D" } else { "" }
                ),
            );
            if let Some(e) = left_over_by_systemd(p.pid) {
                f.evidence(e.span, format!("systemd left PID {} behind", p.pid));
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
                            "it holds {} on GPU {}",
                            mib(g.used_mib),
                            g.gpu.map_or("?".to_owned(), |x| x.to_string())
                        ),
                    );
                }
            }
            let owner = incident.owner(p.pid);
            if let Some(o) = owner {
                f.entities.units.insert(o.unit.clone());
            }
            f.condition("it is a worker process of a model server", true);
            f.condition(
                "its server is gone (PPID 1 or left behind by systemd)",
                true,
            );
            f.condition("it holds GPU memory", !on_gpu.is_empty());
            let gpus: Vec<String> = f.entities.gpus.iter().map(|g| format!("GPU {g}")).collect();
            f.title = format!(
                "leftover server worker PID {} ({})",
                p.pid,
                first_word(&p.cmd)
            );
            f.headline = if on_gpu.is_empty() {
                format!(
                    "A worker of an earlier model server, PID {} ({}), is still running.",
                    p.pid,
                    first_word(&p.cmd)
                )
            } else {
                format!(
                    "A worker of an earlier model server, PID {} ({}), still holds {} on {}.",
                    p.pid,
                    first_word(&p.cmd),
                    mib(Some(held)),
                    gpus.join(", ")
                )
            };
            f.chain.push(format!("PID {} outlived its server", p.pid));
            if stuck {
                f.chain
                    .push("it is stuck in the kernel (D state): no signal can end it".to_owned());
            }
            f.explanation = "A worker's parent is its server; a worker whose parent is PID 1 was orphaned when the server died without taking its process group along.".to_owned();
            if stuck {
                f.actions.push(Action::advice(
                    "the process is in D state: find the GPU fault and reset the GPU or reboot",
                    Some("dmesg -T | grep -E 'NVRM: Xid|fallen off the bus'"),
                ));
            } else if let Ok(pid) = Pid::new(p.pid) {
                let unit = owner.and_then(|o| UnitName::new(&o.unit).ok());
                let cmdline = ExpectedCmdline::new(&p.cmd).ok();
                // ps -o lstart guards against PID reuse when the bundle has it.
                let start = p.started.as_deref().and_then(|s| StartTime::new(s).ok());
                if cmdline.is_some() || unit.is_some() {
                    f.actions.push(
                        Action::new(
                            ActionKind::TerminateProcess {
                                process: ProcessIdentity {
                                    pid,
                                    unit,
                                    cmdline,
                                    start,
                                },
                                grace_secs: 30,
                            },
                            Safety::NeedsConfirmation,
                            format!("PID {} is a leftover worker", p.pid),
                        )
                        .with_evidence([p.span]),
                    );
                }
                let gpus: Vec<GpuRef> = f
                    .entities
                    .gpus
                    .iter()
                    .map(|&index| GpuRef {
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
            f.confidence = confidence(&f, 0.6, 0.95);
            out.push(f);
        }
    }
}

fn first_word(cmd: &str) -> &str {
    cmd.split_whitespace().next().unwrap_or(cmd)
}
