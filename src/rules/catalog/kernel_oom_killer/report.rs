//! The findings of a run of kills: who was killed and who held the
//! memory, the unit and the server the victim belonged to, whether the
//! cgroup's limit or the host's memory ran out, what the kill ended, and
//! the steps that fit.

use super::*;
use crate::model::Timestamp;

pub(super) fn report(incident: &Incident, kills: &[Kill<'_>], out: &mut Vec<Finding>) {
    let first = &kills[0];
    let kill = first.oom;
    let time = first.events.iter().find_map(|e| kernel_time(incident, e));
    let victim = first.victim();
    let unit = first.unit.clone();
    let is_server = kills.iter().any(|k| {
        k.oom
            .comm
            .as_deref()
            .is_some_and(|c| SERVER_COMMS.iter().any(|s| c.starts_with(s)))
    });
    let absence = subject::victims_absence(incident, kills);
    let workload = ended_workload(incident, kills, unit.as_deref(), time, !absence.is_empty());
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
    cite_kills(&mut f, kills);
    cite_report(&mut f, incident, first, unit.as_deref());
    cite_server(&mut f, incident, kills, is_server);
    subject::cite(&mut f, incident, &absence, &victim);
    let (attributed, notice) = match &unit {
        Some(u) => cite_unit(&mut f, incident, kills, u),
        None => (0, false),
    };
    f.condition("the kernel's report names the victim", kill.pid.is_some());
    f.condition(
        "the victim belongs to a unit or is a server process",
        unit.is_some() || is_server,
    );
    f.condition(
        "systemd or the server confirm the kill",
        notice || attributed > 0 || f.evidence.len() > first.events.len() + 1,
    );
    let scope = scope(kill, unit.as_deref());
    let of_unit = unit
        .as_ref()
        .map(|u| format!(" of {u}"))
        .unwrap_or_default();
    f.title = if kills.len() > 1 {
        format!("the OOM killer killed {} processes{of_unit}", kills.len())
    } else {
        format!("the OOM killer killed {victim}{of_unit}")
    };
    f.headline = headline(&scope, &victim, &of_unit, &size, time, kills.len());
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
    f.explanation = explanation(kill, kills.len());
    push_actions(&mut f, kill, unit.as_deref(), kills.len());
    f.confidence = confidence(&f, 0.7, 0.97);
    out.push(f);
}

/// Whether the kills ended a workload, and so are the failure to explain:
/// a victim was the workload itself, and no unit other than `unit` failed
/// away from the kill.
fn ended_workload(
    incident: &Incident,
    kills: &[Kill<'_>],
    unit: Option<&str>,
    time: Option<Timestamp>,
    about_it: bool,
) -> bool {
    // The kill ended a workload, and so is the failure to explain, when the
    // victim is a unit's or a server's process, a job by its name, the
    // process of a cgroup whose own limit was hit (the limit was set for
    // that workload), or the host's biggest process. A small bystander
    // killed on a global OOM stays a warning: something else used the RAM,
    // unless the inputs are about it (`about_it`: its mount failing, its
    // name) and show no other failure.
    let workload = about_it
        || kills.iter().any(|k| {
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
        Some(name.as_str()) != unit
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
    workload && !elsewhere
}

/// Cites each kill's kernel lines: the victim, its resident size, and
/// whether a cgroup's limit or the host's memory ran out.
fn cite_kills(f: &mut Finding, kills: &[Kill<'_>]) {
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
}

/// Cites the rest of the first kill's report: who asked for memory, the
/// victim's cgroup and its use, the biggest other processes, and the unit
/// that owns the victim's PID.
fn cite_report(f: &mut Finding, incident: &Incident, first: &Kill<'_>, unit: Option<&str>) {
    let kill = first.oom;
    let event = first.events[0];
    let victim = first.victim();
    let owner = kill.pid.and_then(|p| incident.owner(p));
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
            match (&kill.task_memcg, unit) {
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
}

/// Cites what the server saw of the kills: a child's death, and (for a
/// server's victim) the other ranks losing their peer soon after.
fn cite_server(f: &mut Finding, incident: &Incident, kills: &[Kill<'_>], is_server: bool) {
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
}

/// Cites what systemd said of the kills in unit `u`; returns how many of
/// the unit's SIGKILL exits the kills explain, and whether systemd noticed
/// the kill itself (its OOM notice or an `oom-kill` result).
fn cite_unit(f: &mut Finding, incident: &Incident, kills: &[Kill<'_>], u: &str) -> (u32, bool) {
    let mut attributed = 0;
    let mut notice = false;
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
        .filter(|p| p.unit.as_deref() == Some(u))
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
    (attributed, notice)
}

/// What ran out: the unit's or a cgroup's memory limit, or the host's
/// memory.
fn scope(kill: &OomKill, unit: Option<&str>) -> String {
    if kill.cgroup_limit {
        match unit {
            Some(u) => format!("{u} hit its memory limit"),
            None => "a cgroup hit its memory limit".to_owned(),
        }
    } else {
        "the host ran out of memory".to_owned()
    }
}

/// The headline: what ran out, the victim, its size, when, and how many
/// more kills followed.
fn headline(
    scope: &str,
    victim: &str,
    of_unit: &str,
    size: &str,
    time: Option<Timestamp>,
    kills: usize,
) -> String {
    let when = time.map(crate::rules::support::when);
    format!(
        "{}: the kernel's OOM killer killed {victim}{of_unit}{}{}{}.",
        crate::rules::support::capitalise(scope),
        if size.is_empty() {
            String::new()
        } else {
            format!(" ({size} resident)")
        },
        when.map(|w| format!(" at {w}")).unwrap_or_default(),
        match kills {
            1 => String::new(),
            2 => ", and one more of its processes after the next start".to_owned(),
            n => format!(", and {} more of its processes after later starts", n - 1),
        }
    )
}

/// The explanation: what a cgroup's or the host's OOM means, how the
/// server fails after it, and (for `kills` over one) that it repeats.
fn explanation(kill: &OomKill, kills: usize) -> String {
    format!(
        "{} The victim gets no chance to log anything; the server's other processes fail after it, and SGLang's main process then kills itself with SIGKILL. A SIGKILL exit is attributed to the OOM killer only with a kernel kill of that PID or its unit's cgroup within seconds.{}",
        if kill.cgroup_limit {
            "A memory cgroup out of memory means a limit (MemoryMax=, a container limit) was hit, not the host's RAM."
        } else {
            "A global OOM means the host's RAM (and swap) was exhausted."
        },
        if kills > 1 {
            " It happened again after each restart: the same start-up needs more memory than the host has."
        } else {
            ""
        }
    )
}

/// Adds the steps: stop a unit that runs out at every start, look at the
/// unit's, the cgroup's or the host's memory, reduce the demand, and raise
/// the limit or add RAM.
fn push_actions(f: &mut Finding, kill: &OomKill, unit: Option<&str>, kills: usize) {
    if let (Some(u), true) = (unit, kills > 1) {
        f.actions.push(Action::advice(
            format!(
                "stop {u} while its memory use is changed: every restart runs out of memory again"
            ),
            Some(&format!("systemctl stop {u}")),
        ));
    }
    if let Some(u) = unit {
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
}
