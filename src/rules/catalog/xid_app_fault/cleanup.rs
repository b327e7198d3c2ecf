//! Xid 45, the driver's cleanup after a process was aborted: what each
//! one follows (another Xid, a kill, a stop, a peer GPU's fault), one
//! finding per cause, never a root cause by itself.

use super::*;
use crate::correlate::UnitEventKind;
use crate::model::KernelEventKind;
use crate::source::Span;

/// An Xid with the event that carries its line and time.
type XidAt<'a> = (&'a KernelEvent, &'a Xid);

/// What an Xid 45 follows, when the captures show it.
struct Cause {
    span: Span,
    what: String,
    /// The GPU of the Xid it follows, when that is another GPU's fault.
    gpu: Option<u32>,
}

/// The event an Xid 45 follows: another Xid on its GPU, the OOM kill or
/// systemd's kill of its process, a stop of its unit, or a fatal Xid on a
/// peer GPU shortly before (a tensor-parallel peer's process aborts when
/// the GPU it talks to fails).
fn cause_of(incident: &Incident, e: &KernelEvent, x: &Xid) -> Option<Cause> {
    let who = xid::owner_of(x);
    let on_gpu = |y: &Xid| y.code != 45 && same_bus(y.bus_id.as_deref(), x.bus_id.as_deref());
    let same_gpu = incident
        .xids()
        .find(|(_, y)| on_gpu(y) && y.pid.is_some() && y.pid == x.pid)
        .or_else(|| incident.xids().find(|(_, y)| on_gpu(y)));
    if let Some((k, y)) = same_gpu {
        return Some(Cause {
            span: k.span,
            what: format!("{} on the same GPU", xid::describe(y.code)),
            gpu: None,
        });
    }
    if let Some(k) = x.pid.and_then(|pid| {
        incident.facts.kernel_events.iter().find(|k| match &k.kind {
            KernelEventKind::OomKill(o) => o.pid == Some(pid),
            _ => false,
        })
    }) {
        return Some(Cause {
            span: k.span,
            what: format!("the OOM killer killed {who}"),
            gpu: None,
        });
    }
    if let Some(ev) = x.pid.and_then(|pid| {
        incident
            .units
            .values()
            .flat_map(|u| &u.events)
            .find(|ev| matches!(ev.kind, UnitEventKind::KillingProcess { pid: p } if p == pid))
    }) {
        return Some(Cause {
            span: ev.span,
            what: format!("systemd killed {who}"),
            gpu: None,
        });
    }
    let at = kernel_time(incident, e);
    let peer = incident
        .xids()
        .filter(|(_, y)| FATAL.contains(&y.code))
        .find(|(k, _)| match (at, kernel_time(incident, k)) {
            (Some(a), Some(b)) => (0..=PEER_WINDOW_SECS).contains(&seconds_between(b, a)),
            _ => false,
        })
        .map(|(k, y)| {
            let peer = xid::gpu_at(incident, y.bus_id.as_deref());
            Cause {
                span: k.span,
                what: format!("{} on {}, a peer GPU", xid::describe(y.code), peer.short()),
                gpu: peer.index,
            }
        });
    peer.or_else(|| {
        stopped_unit(incident, e, x).map(|(span, unit)| Cause {
            span,
            what: format!("{unit} was stopped"),
            gpu: None,
        })
    })
}

/// The Xid 45s no fault of their own process explains, one finding per
/// cause: low severity, never a root cause.
pub(super) fn cleanups(incident: &Incident, xids: &[(&KernelEvent, &Xid)], out: &mut Vec<Finding>) {
    for (cause, members) in by_cause(incident, xids) {
        out.push(cleanup(incident, cause.as_ref(), &members));
    }
}

/// The Xid 45s grouped by what they follow ([`cause_of`]; those it finds
/// nothing for together), in order of first appearance.
fn by_cause<'a>(incident: &Incident, xids: &[XidAt<'a>]) -> Vec<(Option<Cause>, Vec<XidAt<'a>>)> {
    let mut groups: Vec<(Option<Cause>, Vec<XidAt>)> = Vec::new();
    for &(e, x) in xids {
        let cause = cause_of(incident, e, x);
        let key = cause.as_ref().map(|c| c.span);
        match groups
            .iter_mut()
            .find(|(c, _)| c.as_ref().map(|c| c.span) == key)
        {
            Some((_, members)) => members.push((e, x)),
            None => groups.push((cause, vec![(e, x)])),
        }
    }
    groups
}

/// The finding for the Xid 45s `members` that follow `cause` (unknown when
/// `None`), an error when a task hung in D state after them.
fn cleanup(incident: &Incident, cause: Option<&Cause>, members: &[XidAt]) -> Finding {
    // A task stuck in D state after the cleanup: the driver is wedged.
    // The kernel's hung-task reports, read once for every rule (their
    // task's name may hold colons: `nvc:[driver]:5403`).
    let hung = crate::rules::support::hung_tasks(incident)
        .into_iter()
        .find(|t| {
            members
                .iter()
                .any(|(e, _)| e.span.source == t.message.span.source && e.span < t.message.span)
        });
    let severity = if hung.is_some() {
        Severity::Error
    } else if cause.is_some() {
        Severity::Info
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(META.id, META.category, severity);
    f.entities.xid.insert(45);
    let (whos, on) = cite_members(&mut f, incident, members);
    if let Some(c) = cause {
        f.evidence(c.span, format!("what it follows: {}", c.what));
        // The peer GPU's fault is what this finding is about, too.
        f.entities.gpus.extend(c.gpu);
    }
    f.occurrences = members.len() as u32;
    f.condition("the driver cleaned up a process's GPU work", true);
    f.condition("the captures show what ended the process", cause.is_some());
    let subject = match whos.as_slice() {
        [one] => format!("{one} on {on}"),
        many => format!("{} processes on {on}", many.len()),
    };
    f.title = match cause {
        Some(c) => format!("Xid 45 for {subject}: cleanup after {}", c.what),
        None => format!("Xid 45 for {subject}: cleanup after the process ended"),
    };
    f.headline = format!(
        "The driver cleaned up the GPU work of {subject} (Xid 45); this follows the end of the process and is not a cause by itself."
    );
    if let Some(t) = &hung {
        note_hung(&mut f, t, &subject);
    }
    f.chain.push(format!(
        "the driver removed the GPU work of {subject} (Xid 45)"
    ));
    if let Some(c) = cause {
        f.chain.push(c.what.clone());
    }
    f.explanation = "Xid 45 (preemptive cleanup) is logged when a process with GPU work ends abnormally: Ctrl-C, SIGKILL, the OOM killer, a reset, or another Xid. Look at what ended the process.".to_owned();
    if hung.is_some() {
        f.chain.insert(
            0,
            "a task blocks in the driver (D state): the driver is wedged".to_owned(),
        );
        f.actions.push(Action::advice(
            "do not kill the blocked task (a D-state task ignores SIGKILL); drain the GPU's workloads and reboot the host in a maintenance window",
            None,
        ));
    }
    if cause.is_none() {
        f.actions.push(Action::advice(
            "find what ended the process (a kill, the OOM killer, a crash) around the time of the Xid",
            Some("journalctl -k -b --no-pager | grep -E 'Xid|Killed process'"),
        ));
    }
    f.confidence = confidence(&f, 0.5, 0.8);
    f
}

/// Cites each Xid 45 of `members` once and names its GPU and PID in the
/// finding; returns the processes (`PID 4318 (…)`, each once) and the GPUs
/// they were on (`GPUs 0, 1` when every one has an index, else their short
/// names).
fn cite_members(f: &mut Finding, incident: &Incident, members: &[XidAt]) -> (Vec<String>, String) {
    let mut whos: Vec<String> = Vec::new();
    let mut gpus: Vec<String> = Vec::new();
    let mut indices: Vec<u32> = Vec::new();
    for (e, x) in members {
        let gpu = xid::gpu_at(incident, x.bus_id.as_deref());
        xid::name_gpu(f, &gpu, x.bus_id.as_deref());
        if let Some(i) = gpu.index {
            indices.push(i);
        }
        if let Some(pid) = x.pid {
            f.entities.pids.insert(pid);
        }
        let who = xid::owner_of(x);
        f.evidence_once(
            e.span,
            format!(
                "Xid 45 on {}: the driver removed the GPU work of {who}",
                gpu.short()
            ),
        );
        if !whos.contains(&who) {
            whos.push(who);
        }
        if !gpus.contains(&gpu.short()) {
            gpus.push(gpu.short());
        }
    }
    let on = if indices.len() == gpus.len() && indices.len() > 1 {
        indices.sort_unstable();
        indices.dedup();
        format!(
            "GPUs {}",
            indices
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        gpus.join(", ")
    };
    (whos, on)
}

/// Cites the kernel's hung-task report `t` after the cleanup of `subject`
/// and words the finding as a wedged driver.
fn note_hung(f: &mut Finding, t: &crate::rules::support::HungTask<'_>, subject: &str) {
    f.evidence(
        t.message.span,
        format!(
            "then the kernel: task {}[{}] blocked for more than {} seconds (D state)",
            t.comm, t.pid, t.secs
        ),
    );
    f.condition("a task hung in D state after the cleanup", true);
    f.title = format!(
        "{}; then a task hung in D state: the driver is wedged",
        f.title
    );
    f.headline = format!(
        "The driver cleaned up the GPU work of {subject} (Xid 45) and a task then blocked for more than {} seconds in D state: the driver is wedged. kill -9 cannot end a D-state task and nvidia-smi may hang; the GPU needs a reset or the host a reboot.",
        t.secs
    );
}

/// A unit stopped around the Xid that the process belongs to (or, when its
/// owner is unknown, a unit stopped while a server process was cleaned up).
fn stopped_unit(incident: &Incident, e: &KernelEvent, x: &Xid) -> Option<(Span, String)> {
    let at = kernel_time(incident, e)?;
    let owner = x
        .pid
        .and_then(|p| incident.owner(p))
        .map(|o| o.unit.as_str());
    let server = x
        .name
        .as_deref()
        .is_some_and(|n| SERVER_NAMES.iter().any(|s| n.starts_with(s)));
    incident.units.iter().find_map(|(unit, facts)| {
        if owner.is_some_and(|o| o != unit) || (owner.is_none() && !server) {
            return None;
        }
        facts.events.iter().find_map(|ev| {
            // `Deactivated successfully` alone is the process ending by
            // itself; only a stop job is a stop.
            let ended = matches!(ev.kind, UnitEventKind::Stopped);
            let dt = seconds_between(at, incident.time_of(ev.span)?);
            (ended && (-10..=120).contains(&dt)).then(|| (ev.span, unit.clone()))
        })
    })
}
