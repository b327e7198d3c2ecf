//! The finding for one family of leftover workers: their ps rows, the
//! GPU memory they hold, their kernel stacks, and the guarded steps that
//! end them.

use std::fmt::Write as _;

use super::*;
use crate::correlate::{Gpu, GpuProcess, Ownership};
use crate::model::{GpuUuid, Pid, StartTime, UnitName};
use crate::rules::support::{confidence, mib};
use crate::rules::{Action, ActionKind, ExpectedCmdline, GpuHold, GpuRef, ProcessIdentity, Safety};

/// The driver stack of leftover `pid`. A stack whose PID the capture did
/// not print belongs to the only leftover there is.
fn stack_of<'s>(
    stacks: &'s [DriverStack],
    members: &[Leftover<'_>],
    pid: u32,
) -> Option<&'s DriverStack> {
    stacks.iter().find(|s| {
        s.pid == Some(pid) || (s.pid.is_none() && members.len() == 1 && stacks.len() == 1)
    })
}

/// Whether ps shows the leftover in uninterruptible sleep (state D).
fn stuck_state(m: &Leftover<'_>) -> bool {
    m.stat.is_some_and(|s| s.starts_with('D'))
}

/// GPU `index` with its UUID when the inputs have it.
fn gpu_ref(incident: &Incident, index: u32) -> GpuRef {
    GpuRef {
        index,
        uuid: incident
            .gpu(index)
            .and_then(|g| g.uuid.as_deref())
            .and_then(|u| GpuUuid::new(u).ok()),
    }
}

/// The finding for one family of leftover workers: what they hold on
/// which GPUs, whether they are stuck, and the guarded steps that end them.
pub(super) fn finding(
    incident: &Incident,
    fam: &str,
    members: &[Leftover<'_>],
    stacks: &[DriverStack],
) -> Finding {
    let stuck: Vec<&Leftover<'_>> = members
        .iter()
        .filter(|m| stuck_state(m) || stack_of(stacks, members, m.pid).is_some())
        .collect();
    let on_gpu: Vec<&GpuProcess> = incident
        .gpu_processes
        .iter()
        .filter(|g| members.iter().any(|m| m.pid == g.pid))
        .collect();
    let busy = busy_gpus(incident, &on_gpu);
    let (exit, env, orphaned_server_piece) = gone_signals(incident, fam, members);
    let severity =
        if on_gpu.is_empty() && stuck.is_empty() && busy.is_empty() && !orphaned_server_piece {
            Severity::Warning
        } else {
            META.severity
        };
    let mut f = Finding::new(META.id, META.category, severity);
    let first = &members[0];
    cite_members(&mut f, incident, members, stacks);
    let held = cite_gpus(&mut f, members, &on_gpu, &busy);
    let owner = members.iter().find_map(|m| incident.owner(m.pid));
    if let Some(o) = owner {
        f.entities.units.insert(o.unit.clone());
    }
    let what = what(fam, members);
    let any_stuck_stack = stuck
        .iter()
        .any(|m| stack_of(stacks, members, m.pid).is_some());
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
    if orphaned_server_piece {
        cite_gone(&mut f, exit, env);
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
    f.headline = headline(
        members,
        &what,
        held,
        &gpus,
        !on_gpu.is_empty(),
        !busy.is_empty(),
    );
    if orphaned_server_piece {
        gone_headline(&mut f, exit, env);
    }
    if any_stuck_stack {
        f.headline.push_str(
            " It is stuck inside the NVIDIA driver (nvidia_uvm): SIGKILL is not delivered until the driver call returns, so only a GPU reset or a reboot frees it.",
        );
    }
    push_chain(
        &mut f,
        members,
        !stuck.is_empty(),
        any_stuck_stack,
        &busy,
        &gpus,
    );
    explain(&mut f, !busy.is_empty());
    push_stuck_actions(&mut f, any_stuck_stack, !stuck.is_empty());
    push_kills(&mut f, incident, members, &stuck, &on_gpu);
    push_stop_advice(&mut f, owner, !stuck.is_empty());
    // An inference from a busy GPU is weaker than a process table's row.
    let (base, top) = if busy.is_empty() {
        (0.6, 0.95)
    } else {
        (0.45, 0.75)
    };
    f.confidence = confidence(&f, base, top);
    f
}

/// The leftovers in words: `PID 123 (cmd)`, or `PIDs 1, 2 (family)`.
fn what(fam: &str, members: &[Leftover<'_>]) -> String {
    let first = &members[0];
    let pids: Vec<String> = members.iter().map(|m| m.pid.to_string()).collect();
    let pid_list = pids.join(", ");
    if members.len() == 1 {
        format!("PID {} ({})", first.pid, first_word(first.cmd))
    } else {
        format!("PIDs {pid_list} ({fam})")
    }
}

/// The GPUs with memory in use when the inputs have no process table at
/// all and none of the leftovers is on a GPU: the leftovers are the likely
/// holders, an inference the report states as one. Empty otherwise.
fn busy_gpus<'a>(incident: &'a Incident, on_gpu: &[&GpuProcess]) -> Vec<&'a Gpu> {
    if incident.gpu_processes.is_empty() && on_gpu.is_empty() {
        incident
            .gpus
            .iter()
            .filter(|g| g.memory_used_mib.is_some_and(|u| u >= 1024))
            .collect()
    } else {
        Vec::new()
    }
}

/// Cites each leftover: its ps row (PPID, state), systemd leaving it
/// behind, and its kernel stack inside the NVIDIA driver.
fn cite_members(
    f: &mut Finding,
    incident: &Incident,
    members: &[Leftover<'_>],
    stacks: &[DriverStack],
) {
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
        for span in m.again.iter().take(2) {
            f.evidence(
                *span,
                format!("PID {} is listed again later: still running", m.pid),
            );
        }
        if let Some(e) = left_over_by_systemd(incident, m.pid) {
            f.evidence(e.span, format!("systemd left PID {} behind", m.pid));
        }
        if let Some(s) = stack_of(stacks, members, m.pid) {
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
}

/// What shows the orphans' server gone beyond PPID 1: its logged exit, the
/// serving product whose environment they run from, and whether either (or
/// a serving framework's worker title) makes them a server's piece left
/// behind rather than a curiosity of a process table.
fn gone_signals<'a>(
    incident: &Incident,
    fam: &str,
    members: &[Leftover<'a>],
) -> (Option<(u32, Span)>, Option<&'a str>, bool) {
    let exit = gone::server_exit(incident, members[0].pid);
    let env = members.iter().find_map(|m| gone::serving_env(m.cmd));
    let piece = members.iter().any(|m| m.ppid == Some(1))
        && (exit.is_some() || env.is_some() || titles::is_worker_title(fam));
    (exit, env, piece)
}

/// Adds to the headline what shows the server gone.
fn gone_headline(f: &mut Finding, exit: Option<(u32, Span)>, env: Option<&str>) {
    if let Some((pid, _)) = exit {
        let _ = write!(
            f.headline,
            " Their server, PID {pid}, logged its exit; they did not go with it."
        );
    } else if let Some(env) = env {
        let _ = write!(
            f.headline,
            " They run from {env}'s own environment: what stopped or removed {env} left them running."
        );
    }
}

/// Cites what shows the orphans' server gone: its logged exit, or the
/// serving product whose environment they run from.
fn cite_gone(f: &mut Finding, exit: Option<(u32, Span)>, env: Option<&str>) {
    if let Some((pid, span)) = exit {
        f.entities.pids.insert(pid);
        f.evidence(
            span,
            format!("the server, PID {pid}, finished: its workers should have ended with it"),
        );
        f.chain.push(format!(
            "their server (PID {pid}) exited without taking its process group along"
        ));
    }
    if let Some(env) = env {
        f.condition(
            format!("they run from a serving product's own environment ({env})"),
            true,
        );
    }
}

/// Cites the GPU memory the leftovers hold, or the busy GPUs with no
/// process listed; returns the MiB the leftovers hold in all.
fn cite_gpus(
    f: &mut Finding,
    members: &[Leftover<'_>],
    on_gpu: &[&GpuProcess],
    busy: &[&Gpu],
) -> u64 {
    let mut held = 0;
    for g in on_gpu {
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
    for g in busy {
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
    held
}

/// The headline: who is left over (`what`), and the memory they hold on
/// `gpus` (`on_gpu`) or probably hold there (`busy`).
fn headline(
    members: &[Leftover<'_>],
    what: &str,
    held: u64,
    gpus: &[String],
    on_gpu: bool,
    busy: bool,
) -> String {
    let is_are = if members.len() == 1 { "is" } else { "are" };
    if on_gpu {
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
    } else if busy {
        format!(
            "Orphaned workers of an earlier model server, {what}, {is_are} still running (re-parented to PID 1) and probably hold {}, which has memory in use with no process listed (inferred: the inputs have no GPU process table).",
            gpus.join(", ")
        )
    } else if members.len() == 1 {
        format!("A worker of an earlier model server, {what}, is still running.")
    } else {
        format!("Workers of an earlier model server, {what}, are still running.")
    }
}

/// Adds the chain: each leftover outlived its server, is stuck (`stuck`,
/// in the driver when `any_stuck_stack`), and the busy GPUs they likely
/// hold.
fn push_chain(
    f: &mut Finding,
    members: &[Leftover<'_>],
    stuck: bool,
    any_stuck_stack: bool,
    busy: &[&Gpu],
    gpus: &[String],
) {
    for m in members {
        f.chain.push(format!("PID {} outlived its server", m.pid));
    }
    if stuck {
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
}

/// Sets the explanation: how a worker is orphaned, and for `busy` GPUs (no
/// process table) that which GPU each PID holds is inferred, with the step
/// that settles it.
fn explain(f: &mut Finding, busy: bool) {
    f.explanation = "A worker's parent is its server; a worker whose parent is PID 1 was orphaned when the server died without taking its process group along.".to_owned();
    if busy {
        f.explanation.push_str(
            " The inputs have no GPU process table, so which GPU each PID holds is inferred; `nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv` settles it.",
        );
        f.actions.push(Action::advice(
            "confirm which GPU each leftover PID holds",
            Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
        ));
    }
}

/// Adds the steps for a stuck leftover: in the driver (`any_stuck_stack`)
/// find the GPU fault and reset the GPU or reboot; in D state (`stuck`)
/// the same.
fn push_stuck_actions(f: &mut Finding, any_stuck_stack: bool, stuck: bool) {
    if any_stuck_stack {
        f.actions.push(Action::advice(
            "the process is stuck in the NVIDIA driver: a kill signal waits until the driver call returns. Look for the GPU fault (Xid, UVM errors), then reset the GPU or reboot the host; a driver upgrade fixes known UVM hangs",
            Some("dmesg -T | grep -E 'NVRM: Xid|nvidia-uvm|fallen off the bus'"),
        ));
        f.actions.push(Action::advice(
            "if no other process uses the GPU, reset it; otherwise reboot",
            Some("nvidia-smi --gpu-reset -i GPU_INDEX"),
        ));
    } else if stuck {
        f.actions.push(Action::advice(
            "the process is in D state: find the GPU fault and reset the GPU or reboot",
            Some("dmesg -T | grep -E 'NVRM: Xid|fallen off the bus'"),
        ));
    }
}

/// Adds a guarded terminate action for each leftover that is not stuck
/// (by PID, unit, command line, start time and the GPU it holds), and,
/// when none is stuck, a wait for their GPUs' memory to be freed.
fn push_kills(
    f: &mut Finding,
    incident: &Incident,
    members: &[Leftover<'_>],
    stuck: &[&Leftover<'_>],
    on_gpu: &[&GpuProcess],
) {
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
            Some(index) => GpuHold::On(gpu_ref(incident, index)),
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
            .map(|index| gpu_ref(incident, index))
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
}

/// Adds the advice that keeps workers from outliving their server: the
/// `owner` unit's KillMode, or (no unit, none `stuck`) stopping the server
/// by its process group.
fn push_stop_advice(f: &mut Finding, owner: Option<&Ownership>, stuck: bool) {
    f.actions.push(Action::advice(
        "make a stop of the server's unit end all its processes: KillMode=control-group (the default)",
        owner.map(|o| format!("systemctl show -p KillMode {}", o.unit)).as_deref(),
    ));
    if owner.is_none() && !stuck {
        f.actions.push(Action::advice(
            "started outside systemd (a shell, Slurm, a container): stop the server by its process group, so its workers go with it",
            Some("ps -o pid,pgid,ppid,stat,lstart,cmd -p PID"),
        ));
    }
}
