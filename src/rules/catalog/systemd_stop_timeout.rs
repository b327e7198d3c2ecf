//! `systemd-stop-timeout`: a unit did not stop in time and some of its
//! processes survived SIGKILL, stuck in the kernel.

mod own_lines;

use crate::correlate::{Incident, UnitEventKind, UnitFacts};
use crate::rules::support::{confidence, scope};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: SystemdStopTimeout = SystemdStopTimeout;

pub struct SystemdStopTimeout;

static META: RuleMeta = RuleMeta {
    id: "systemd-stop-timeout",
    category: Category::StaleServingInstance,
    severity: Severity::Critical,
    summary: "a unit did not stop in time: SIGKILL ended it (the old instance may outlive the stop), or its processes survived SIGKILL, stuck in the kernel (a hang)",
    // The catalog rows `systemd.stop-timed-out`, `systemd.still-around-after-sigkill`.
    anchors: &[],
    doc: r#"
## What it means
The unit did not stop within `TimeoutStopSec`: `State 'stop-sigterm' timed
out. Killing.`. A stop that ends in SIGKILL (`Killing process N … with
signal SIGKILL`, `Failed with result 'timeout'`) cut the server short: its
port, GPU memory or half-written files may outlive the stop, and a start
right after it can fail on them. When processes survive even SIGKILL (`Processes still
around after SIGKILL`, or systemd sending SIGKILL to the same PID again),
they are in uninterruptible sleep (`D` state): for a GPU server almost always
blocked inside the NVIDIA driver after a GPU fault. That is reported as a hang
(`server-hang`): no restart cures it. A stop that SIGKILL did end is reported
as a stale instance when the unit is a model server (or the inputs show GPU
serving): what the old server held (its port, its GPU memory) may outlive
it. A unit that serves no GPU (a CI agent, a host daemon) that SIGKILL had
to end simply did not exit on SIGTERM: a hang in its stop (`server-hang`).

## Why it happens
A GPU fault (Xid 79, 109, 119) leaves driver calls that never return; the
process cannot die until the GPU is reset. Its GPU memory stays allocated,
so the next start of the server fails for lack of memory.

## How to confirm
`ps -eo pid,stat,cmd` shows the PIDs in state `D`; the kernel log has an
Xid shortly before, or nvidia-modeset's `Error while waiting for GPU
progress` every 5 s; nvidia-smi hangs or reports errors.

A unit that `systemctl status` shows `deactivating (stop-sigterm)` (or
`final-sigterm`, `stop-sigkill`) for more than a few seconds, its main
process still listed, is the same failure caught while it happens: the
server does not exit on SIGTERM. That is reported as a hang of the server
(`server-hang`), with what settles what it waits on (`py-spy dump`, its
kernel stack, its children).

## How to fix
Do not loop restarts. Follow the GPU fault's recovery action: reset the GPU
(`nvidia-smi -r -i N`) when nothing else uses it, otherwise reboot.

## Safety
Advice only: signals cannot end a process in `D` state, and a GPU reset or
reboot takes down everything on the GPU or host.
"#,
};

impl Rule for SystemdStopTimeout {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for (unit, facts) in &incident.units {
            if let Some(f) = stop_timed_out(incident, unit, facts) {
                out.push(f);
            }
        }
        for s in &incident.facts.unit_statuses {
            let told = incident.units.get(&s.unit).is_some_and(|u| {
                u.events
                    .iter()
                    .any(|e| matches!(e.kind, UnitEventKind::StopTimedOut { .. }))
            });
            if !told {
                if let Some(f) = stuck_stopping(incident, s) {
                    out.push(f);
                }
            }
        }
    }
}

/// systemd's own account of a stop that timed out (`State 'stop-sigterm'
/// timed out. Killing.`): a hang when processes survived SIGKILL, else a
/// stale instance, or only a slow stop when nothing was killed.
fn stop_timed_out(incident: &Incident, unit: &str, facts: &UnitFacts) -> Option<Finding> {
    let timed_out: Vec<_> = facts
        .events
        .iter()
        .filter(|e| matches!(e.kind, UnitEventKind::StopTimedOut { .. }))
        .collect();
    if timed_out.is_empty() {
        return None;
    }
    let stuck: Vec<_> = facts
        .events
        .iter()
        .filter(|e| matches!(e.kind, UnitEventKind::StillAroundAfterSigkill))
        .collect();
    let killed: Vec<u32> = facts
        .events
        .iter()
        .filter_map(|e| match e.kind {
            UnitEventKind::KillingProcess { pid } => Some(pid),
            _ => None,
        })
        .collect();
    let failed = facts
        .events
        .iter()
        .any(|e| matches!(&e.kind, UnitEventKind::FailedWithResult(r) if r == "timeout"));
    let killed_again = survivors(incident, unit, facts, &killed);
    let spans: Vec<_> = timed_out.iter().map(|e| e.span).collect();
    let survived = !stuck.is_empty() || !killed_again.is_empty();
    // The processes could not die: the server hangs in the kernel,
    // which no restart cures (a hang). A stop that SIGKILL ended
    // leaves what the old instance of a model server held (its port, its
    // GPU memory: a stale instance); a unit that holds neither (a CI
    // agent, a host daemon) simply did not exit on SIGTERM: a hang in
    // its stop.
    let serving = scope::serves_gpus(incident, unit) || scope::shows_gpu_serving(incident);
    let category = if survived || !serving {
        Category::ServerHang
    } else {
        META.category
    };
    // A stop that ended in SIGKILL, or left the unit failed, cut the
    // server short: whatever it held (its port, its GPU memory, a
    // file half written) may outlive the stop. A timeout that still
    // ended cleanly is only slow.
    let severity = if survived {
        META.severity
    } else if !killed.is_empty() || failed || own_lines::says_killing(incident, &spans) {
        Severity::Error
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(META.id, category, severity);
    f.entities.units.insert(unit.to_owned());
    for e in timed_out.iter().take(2) {
        if let UnitEventKind::StopTimedOut { state } = &e.kind {
            f.evidence(
                e.span,
                format!("{unit} did not stop in time (state '{state}')"),
            );
        }
    }
    cite_kills(&mut f, unit, facts);
    own_lines::cite(&mut f, incident, unit, timed_out[0].span);
    for e in &stuck {
        f.evidence(
            e.span,
            "processes survived SIGKILL: uninterruptible sleep inside the kernel",
        );
    }
    let in_d = cite_in_d_state(&mut f, incident, &killed);
    // What the GPU did meanwhile: the kernel's lines of a GPU that
    // makes no progress are why the processes cannot die.
    let gpu_stalls = cite_gpu_stalls(&mut f, incident);
    f.condition("systemd's stop timed out", true);
    f.condition("processes survived SIGKILL", survived);
    f.condition("ps shows the killed PIDs in D state", in_d);
    f.title = if !survived {
        format!("{unit} did not stop within its timeout")
    } else {
        format!("processes of {unit} survived SIGKILL (stuck in the driver)")
    };
    f.headline = headline(unit, !stuck.is_empty(), &killed, &killed_again, gpu_stalls);
    f.chain
        .push(format!("{unit} did not stop within TimeoutStopSec"));
    if survived {
        f.chain.push(
            "some of its processes cannot die: they sleep uninterruptibly inside the driver"
                .to_owned(),
        );
    }
    f.explanation = "A process that survives SIGKILL is blocked in a driver call; for GPU servers that follows a GPU fault, and only a GPU reset or a reboot ends it.".to_owned();
    if survived {
        survivor_actions(&mut f);
    }
    f.confidence = confidence(&f, 0.6, 0.95);
    Some(f)
}

/// The PIDs that outlived a SIGKILL: killed again by this stop
/// ([`killed_again`]) or by a later one ([`killed_elsewhere_later`]).
fn survivors(incident: &Incident, unit: &str, facts: &UnitFacts, killed: &[u32]) -> Vec<u32> {
    let mut again = killed_again(killed);
    for pid in killed_elsewhere_later(incident, unit, facts) {
        if !again.contains(&pid) {
            again.push(pid);
        }
    }
    again
}

/// Returns the PIDs systemd had to SIGKILL again: each outlived the first
/// SIGKILL, as sure a sign of a process stuck in the kernel as systemd's own
/// `Processes still around after SIGKILL`.
fn killed_again(killed: &[u32]) -> Vec<u32> {
    let mut killed_again: Vec<u32> = Vec::new();
    for (i, pid) in killed.iter().enumerate() {
        if killed[..i].contains(pid) && !killed_again.contains(pid) {
            killed_again.push(*pid);
        }
    }
    killed_again
}

/// The PIDs `unit`'s stop SIGKILLed that another unit's stop SIGKILLs again
/// later in the same input (a user manager's scope, then PID 1 stopping
/// the user manager itself): each outlived the first SIGKILL too.
fn killed_elsewhere_later(incident: &Incident, unit: &str, facts: &UnitFacts) -> Vec<u32> {
    let mut out = Vec::new();
    for e in &facts.events {
        let UnitEventKind::KillingProcess { pid } = e.kind else {
            continue;
        };
        let later = incident
            .units
            .iter()
            .filter(|(other, _)| other.as_str() != unit)
            .flat_map(|(_, o)| &o.events)
            .any(|o| {
                matches!(o.kind, UnitEventKind::KillingProcess { pid: p } if p == pid)
                    && o.span.source == e.span.source
                    && o.span > e.span
            });
        if later && !out.contains(&pid) {
            out.push(pid);
        }
    }
    out
}

/// Cites systemd's SIGKILLs (each PID's first two) and the
/// unit's `Failed with result 'timeout'`.
fn cite_kills(f: &mut Finding, unit: &str, facts: &UnitFacts) {
    let mut sent: Vec<u32> = Vec::new();
    for e in &facts.events {
        if let UnitEventKind::KillingProcess { pid } = e.kind {
            let again = sent.contains(&pid);
            sent.push(pid);
            if again && sent.iter().filter(|p| **p == pid).count() > 2 {
                continue;
            }
            f.evidence(
                e.span,
                if again {
                    format!("systemd sent SIGKILL to PID {pid} again: it survived the first")
                } else {
                    format!("systemd sent SIGKILL to PID {pid}")
                },
            );
            f.entities.pids.insert(pid);
        }
    }
    for e in &facts.events {
        if matches!(&e.kind, UnitEventKind::FailedWithResult(r) if r == "timeout") {
            f.evidence(e.span, format!("{unit} failed with result 'timeout'"));
        }
    }
}

/// Cites the killed processes that would not die, as ps saw them (state
/// D); whether any.
fn cite_in_d_state(f: &mut Finding, incident: &Incident, killed: &[u32]) -> bool {
    let in_d: Vec<_> = incident
        .facts
        .ps
        .iter()
        .filter(|p| {
            killed.contains(&p.pid) && p.stat.as_deref().is_some_and(|s| s.starts_with('D'))
        })
        .collect();
    for p in &in_d {
        f.evidence(p.span, format!("PID {} is in D state", p.pid));
    }
    !in_d.is_empty()
}

/// Returns the headline: systemd said processes survived SIGKILL
/// (`stuck`), or had to SIGKILL `killed_again` again (`gpu_stalls`: the
/// kernel reports the GPU making no progress), or `killed` ended the stop.
fn headline(
    unit: &str,
    stuck: bool,
    killed: &[u32],
    killed_again: &[u32],
    gpu_stalls: bool,
) -> String {
    let survived = stuck || !killed_again.is_empty();
    let survivors: Vec<String> = killed_again.iter().map(u32::to_string).collect();
    if survived && !stuck {
        format!(
            "{unit} did not stop in time and PID {} survived SIGKILL: a process that outlives SIGKILL is stuck in the kernel, usually in the GPU driver{}.",
            survivors.join(", "),
            if gpu_stalls {
                ", and the kernel reports the GPU making no progress"
            } else {
                ""
            }
        )
    } else if !stuck {
        let pids: Vec<String> = killed.iter().map(u32::to_string).collect();
        match pids.as_slice() {
            [] => format!("{unit} took longer than TimeoutStopSec to stop and was killed."),
            _ => format!(
                "{unit} took longer than TimeoutStopSec to stop: systemd killed PID {} with SIGKILL.",
                pids.join(", ")
            ),
        }
    } else {
        format!(
            "Processes of {unit} are stuck in the kernel and survived SIGKILL: their GPU memory stays held until the GPU is reset."
        )
    }
}

/// Pushes the advice for processes that survived SIGKILL: find the GPU
/// fault and follow its recovery action; list the processes in D state.
fn survivor_actions(f: &mut Finding) {
    f.actions.push(Action::advice(
        "check which GPU fault left the processes stuck, and follow its recovery action (GPU reset when nothing else uses the GPU, otherwise reboot)",
        Some("dmesg -T | grep -E 'NVRM: Xid|fallen off the bus'"),
    ));
    f.actions.push(Action::advice(
        "list the processes in D state",
        Some("ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /^D/'"),
    ));
}

/// The kernel's lines of a GPU that makes no progress (the display
/// driver's `Error while waiting for GPU progress`), the catalog row
/// `kernel.nvidia-modeset-gpu-progress`: cited, at most two; whether any.
fn cite_gpu_stalls(f: &mut Finding, incident: &Incident) -> bool {
    let mut any = false;
    for (m, c) in incident.known(GPU_PROGRESS).take(2) {
        let gpu = c.get("gpu").unwrap_or("?");
        if let Ok(n) = gpu.parse::<u32>() {
            f.entities.gpus.insert(n);
        }
        f.evidence(
            m.span,
            format!("the kernel: GPU:{gpu} is making no progress (nvidia-modeset)"),
        );
        any = true;
    }
    any
}

const GPU_PROGRESS: &str = "kernel.nvidia-modeset-gpu-progress";

/// A stop this long is no longer a server finishing its requests.
const SLOW_STOP_SECS: f64 = 5.0;

/// What systemd is doing in each sub-state of `deactivating`
/// (src/core/service.c `service_state_table`).
fn stop_step(sub: &str) -> &'static str {
    match sub {
        "stop" => "its ExecStop= command is running",
        "stop-sigterm" => "systemd sent SIGTERM and waits for the main process to exit",
        "stop-sigkill" => "systemd already sent SIGKILL and the processes are still there",
        "stop-post" => "its ExecStopPost= command is running",
        "final-sigterm" => "systemd sent SIGTERM to the processes left in the unit's cgroup",
        "final-sigkill" => {
            "systemd already sent SIGKILL to the processes left in the unit's cgroup and they are still there"
        }
        "stop-watchdog" => "its watchdog fired and systemd is aborting it",
        _ => "systemd is stopping it",
    }
}

/// `systemctl status` caught a unit in the middle of a stop that does not
/// end: `Active: deactivating (stop-sigterm) since …; 12s ago`, its main
/// process still listed. The server does not finish on SIGTERM (a request
/// or a child it waits for, a handler that blocks); at `TimeoutStopSec`
/// systemd will SIGKILL it. Sub-states past SIGKILL mean a process stuck in
/// the kernel.
fn stuck_stopping(
    incident: &crate::correlate::Incident,
    s: &crate::model::UnitStatus,
) -> Option<Finding> {
    if s.active_state.as_deref() != Some("deactivating") {
        return None;
    }
    let sub = s.sub_state.as_deref().unwrap_or("deactivating");
    // A stop that just began is a server finishing its work.
    if s.in_state_secs.is_some_and(|t| t < SLOW_STOP_SECS) {
        return None;
    }
    let unit = &s.unit;
    let past_kill = sub.ends_with("sigkill");
    let mut f = Finding::new(META.id, Category::ServerHang, Severity::Error);
    f.entities.units.insert(unit.clone());
    let how_long = s
        .in_state_secs
        .map_or(String::new(), |t| format!(" for {t} s"));
    if let Some(span) = s.active_span {
        f.evidence(
            span,
            format!(
                "{unit} has been stopping{how_long} ({sub}): {}",
                stop_step(sub)
            ),
        );
    }
    let main = s.main_pid.filter(|_| s.main_exit.is_none());
    if let (Some(pid), Some(span)) = (main, s.main_pid_span) {
        f.entities.pids.insert(pid);
        f.evidence(span, format!("its main process {pid} is still running"));
    }
    for m in s.cgroup.iter().take(4) {
        f.entities.pids.insert(m.pid);
        f.evidence(
            m.span,
            format!("PID {} is still in the unit's cgroup", m.pid),
        );
    }
    let in_d = ps_evidence(&mut f, incident, s, main);
    f.condition(format!("{unit} is stopping ({sub})"), true);
    f.condition(
        format!("the stop has lasted longer than a clean shutdown takes ({SLOW_STOP_SECS} s)"),
        s.in_state_secs.is_some(),
    );
    f.condition(
        "its processes are still there",
        main.is_some() || !s.cgroup.is_empty(),
    );
    f.condition(
        "what they wait on is known (missing: their stacks: py-spy dump, /proc/PID/stack)",
        !in_d.is_empty(),
    );
    let who = main.map_or(String::new(), |p| format!(" (main PID {p})"));
    f.title = format!("{unit} is stuck stopping ({sub}){how_long}");
    f.headline = if past_kill || !in_d.is_empty() {
        format!(
            "{unit}{who} does not stop: {}{how_long}. A process that outlives SIGKILL is blocked in the kernel, usually in the GPU driver after a fault.",
            stop_step(sub)
        )
    } else {
        format!(
            "{unit}{who} does not stop: {}, and it has not exited{how_long}. The server hangs in its shutdown (waiting on a request, a child process or a lock); at TimeoutStopSec systemd will SIGKILL it, and whatever it holds (its port, GPU memory, child processes) may outlive the stop.",
            stop_step(sub)
        )
    };
    f.chain.push(format!("{unit} is stuck in '{sub}'"));
    f.chain.push(if past_kill {
        "its processes survive SIGKILL: they sleep uninterruptibly inside the kernel".to_owned()
    } else {
        "its main process does not exit on SIGTERM".to_owned()
    });
    f.explanation = "`deactivating (stop-sigterm)` is systemd waiting for the service to exit after SIGTERM; a server that handles SIGTERM by draining requests or waiting for its workers stays there until TimeoutStopSec (90 s by default), then is killed. Its children (model runners, workers) may survive the kill when KillMode is not control-group.".to_owned();
    stuck_actions(&mut f, unit, main);
    f.confidence = confidence(&f, 0.4, 0.8);
    Some(f)
}

/// The ps rows of a stuck unit's processes as evidence; the PIDs among them
/// in uninterruptible sleep (state D).
fn ps_evidence(
    f: &mut Finding,
    incident: &crate::correlate::Incident,
    s: &crate::model::UnitStatus,
    main: Option<u32>,
) -> Vec<u32> {
    let listed: Vec<&crate::model::PsRecord> = incident
        .facts
        .ps
        .iter()
        .filter(|p| Some(p.pid) == main || s.cgroup.iter().any(|m| m.pid == p.pid))
        .collect();
    let in_d: Vec<u32> = listed
        .iter()
        .filter(|p| p.stat.as_deref().is_some_and(|st| st.starts_with('D')))
        .map(|p| p.pid)
        .collect();
    for p in listed.iter().take(4) {
        f.evidence(
            p.span,
            format!(
                "ps lists PID {}{}",
                p.pid,
                p.stat
                    .as_deref()
                    .map_or(String::new(), |st| format!(" in state {st}"))
            ),
        );
    }
    in_d
}

/// What to run about a unit stuck stopping.
fn stuck_actions(f: &mut Finding, unit: &str, main: Option<u32>) {
    let pid_arg = main.map_or("PID".to_owned(), |p| p.to_string());
    f.actions.push(Action::advice(
        "see what the main process waits on (its Python stack, its kernel stack) and which children it still has",
        Some(&format!(
            "py-spy dump --pid {pid_arg}; cat /proc/{pid_arg}/stack; ps -o pid,ppid,stat,wchan:32,etimes,cmd --ppid {pid_arg} -p {pid_arg}"
        )),
    ));
    f.actions.push(Action::advice(
        format!("check how long systemd waits and how it kills {unit}"),
        Some(&format!(
            "systemctl show -p TimeoutStopUSec -p KillMode -p ExecStop {unit}"
        )),
    ));
    f.actions.push(Action::advice(
        "after the stop, check that no process of the server still holds its ports or GPU memory before starting it again",
        Some(&format!(
            "systemctl status {unit}; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
        )),
    ));
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn stop(text: &str) -> Option<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
            .into_iter()
            .next()
    }

    // https://github.com/nokyan/resources/issues/472: systemd had to SIGKILL
    // PID 5736 twice.
    const TIMED_OUT: &str = "Mar 25 16:26:21 omen systemd[1]: user@1000.service: State 'stop-sigterm' timed out. Killing.\n\
        Mar 25 16:26:21 omen systemd[1]: user@1000.service: Killing process 1591 (systemd) with signal SIGKILL.\n\
        Mar 25 16:26:21 omen systemd[1]: user@1000.service: Killing process 5736 (resources:cs0) with signal SIGKILL.\n";
    const AGAIN: &str = "Mar 25 16:26:21 omen systemd[1]: user@1000.service: Killing process 5736 (resources:cs0) with signal SIGKILL.\n";

    #[test]
    fn a_pid_killed_again_survived_sigkill_and_hangs_in_the_kernel() {
        // A host unit SIGKILL ended did not exit on SIGTERM: a hang in its
        // stop; a model server's old instance may outlive it (its port, its
        // GPU memory): a stale instance.
        let once = stop(TIMED_OUT).expect("a stop timeout");
        assert_eq!(once.category, Category::ServerHang, "{once:?}");
        let server = TIMED_OUT.replace("user@1000.service", "ollama.service");
        let served = stop(&server).expect("a stop timeout");
        assert_eq!(
            served.category,
            Category::StaleServingInstance,
            "{served:?}"
        );
        let twice = stop(&format!("{TIMED_OUT}{AGAIN}")).expect("a stop timeout");
        assert_eq!(twice.category, Category::ServerHang, "{twice:?}");
        assert!(
            twice.headline.contains("PID 5736 survived SIGKILL"),
            "{}",
            twice.headline
        );
        // systemd's own word for it, with no PID repeated.
        let still = format!(
            "{TIMED_OUT}Mar 25 16:27:51 omen systemd[1]: user@1000.service: Processes still around after SIGKILL. Ignoring.\n"
        );
        assert_eq!(
            stop(&still).expect("a stop timeout").category,
            Category::ServerHang
        );
    }
}
