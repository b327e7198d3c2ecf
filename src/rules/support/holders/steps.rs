//! The guarded steps that free a GPU of its holders and bring the failing
//! server back ([`Holders::actions`]), one holder at a time: what the
//! inputs prove about it decides between a stop, a signal and advice.

use std::collections::BTreeSet;

use super::{Holder, Holders, UnitLink, embedded_at, embedded_only};
use crate::correlate::UnitEventKind;
use crate::model::{GpuUuid, Pid, ProcessName, PsRecord, StartTime, UnitName};
use crate::rules::support::mib;
use crate::rules::{
    Action, ActionKind, ExpectedCmdline, Finding, GpuHold, GpuRef, ProcessIdentity, Safety,
    unit_refusal,
};
use crate::source::Span;

/// The steps the holders of one GPU add up to, kept apart until all are
/// known: they are written in this order after every holder's own.
#[derive(Default)]
struct Plan {
    /// Units already stopped (a unit with two holders is stopped once).
    stopped: BTreeSet<String>,
    terminations: Vec<Action>,
    sweeps: Vec<Action>,
    leftovers: Vec<Action>,
}

impl Holders<'_> {
    /// The guarded steps that free GPU `gpu` of `holders` and bring the
    /// server back: stop each holder's unit, end the PIDs that may survive
    /// it, sweep a leftover server's siblings, wait until the memory is
    /// released (at most `baseline` MiB, the other GPUs' idle use, plus
    /// slack), restart and verify the server's unit.
    ///
    /// Only what the inputs prove is acted on: a holder named only by a
    /// block inside another format's input (a table printed into a server
    /// log), a unit linked to it only there, a protected unit (`ssh.service`,
    /// a target, a session), or a process without a strong identity (start
    /// time and full command line) gets advice instead, and the refusal is
    /// listed. The script re-checks everything else on the live host.
    pub fn actions(&self, f: &mut Finding, gpu: u32, holders: &[Holder<'_>], baseline: u64) {
        let (uuid, gpu_spans) = match self.incident.gpu(gpu) {
            Some(g) => (g.uuid.as_deref(), g.spans.first().copied()),
            None => (None, None),
        };
        let uuid = match uuid.map(GpuUuid::new) {
            Some(Ok(u)) => Some(u),
            Some(Err(e)) => {
                f.refused.push(e.to_string());
                None
            }
            None => None,
        };
        let hold = GpuHold::On(GpuRef {
            index: gpu,
            uuid: uuid.clone(),
        });
        let target = self.scripted_target(f);
        let mut plan = Plan::default();
        for h in holders {
            self.holder_steps(f, gpu, h, &hold, target.as_ref(), &mut plan);
        }
        // Waiting and restarting only make sense once something was stopped.
        let freeing =
            !plan.stopped.is_empty() || !plan.terminations.is_empty() || !plan.sweeps.is_empty();
        f.actions.extend(plan.terminations);
        f.actions.extend(plan.sweeps);
        if !freeing {
            return;
        }
        f.actions.push(
            Action::new(
                ActionKind::WaitGpuMemoryFree {
                    gpus: vec![GpuRef { index: gpu, uuid }],
                    max_used_mib: baseline.max(512) + 512,
                    timeout_secs: 120,
                },
                Safety::Safe,
                format!(
                    "GPU {gpu}'s memory must really be released before {} measures it again",
                    self.server_name()
                ),
            )
            .with_evidence(gpu_spans),
        );
        self.restart_steps(f, target);
        self.unit_advice(f, holders, plan.leftovers);
    }

    /// One holder's steps: refused (with advice) when the inputs do not
    /// prove enough, else a stop of its unit and a guarded termination of
    /// the PID in case it survives.
    fn holder_steps(
        &self,
        f: &mut Finding,
        gpu: u32,
        h: &Holder<'_>,
        hold: &GpuHold,
        target: Option<&(UnitName, Span)>,
        plan: &mut Plan,
    ) {
        let p = &h.process;
        let pid = match Pid::new(p.pid) {
            Ok(pid) => pid,
            Err(e) => {
                f.refused.push(e.to_string());
                return;
            }
        };
        if self.refuse_embedded(f, gpu, h) {
            return;
        }
        let unit = match h.unit.map(|u| UnitName::new(u.name)) {
            Some(Ok(u)) => Some(u),
            Some(Err(e)) => {
                f.refused.push(e.to_string());
                None
            }
            None => None,
        };
        if let Some(why) = unit.as_ref().and_then(unit_refusal) {
            f.refused.push(why);
            f.actions.push(Action::advice(
                format!(
                    "PID {} runs under a unit no script touches: find out what it is before ending it",
                    p.pid
                ),
                Some(&format!("ps -o pid,user,lstart,args -p {0}; cat /proc/{0}/cgroup", p.pid)),
            ));
            return;
        }
        // The unit is stopped only when its link to the PID stands in
        // an input of its own.
        let unit_inside = h.unit.and_then(|u| embedded_at(self.incident, u.span));
        if let (Some(u), Some(block)) = (&unit, unit_inside) {
            f.refused.push(format!(
                "{u}: linked to PID {} only by {} lines inside a {} input, so no script stops it",
                p.pid, block.format, block.inside
            ));
        }
        let stoppable = unit.as_ref().filter(|_| unit_inside.is_none());
        if let Some(u) = stoppable {
            stop_unit(f, gpu, h, u, (pid, hold), target, plan);
        }
        let ps = self.incident.facts.ps.iter().find(|r| r.pid == p.pid);
        let identity = identity(f, h, ps, pid, unit.clone(), hold);
        if !identity.is_strong() {
            weak_identity(f, gpu, h, &identity, stoppable);
            return;
        }
        let why = termination_why(gpu, h, stoppable.is_some());
        let mut evidence: Vec<Span> = p.spans.clone();
        evidence.extend(h.cmdline.map(|c| c.1));
        evidence.extend(ps.map(|r| r.span));
        if let Some(u) = stoppable {
            if let Some(sweep) = self.orphan_sweep(u, h, ps.map(|r| r.ppid == Some(1))) {
                if !plan.sweeps.contains(&sweep) {
                    plan.sweeps.push(sweep);
                }
            }
        }
        plan.terminations
            .push(Action::terminate(identity, why).with_evidence(evidence));
    }

    /// A holder named only by lines inside another format's input (a table
    /// printed into a server log): advice to check, never a step.
    fn refuse_embedded(&self, f: &mut Finding, gpu: u32, h: &Holder<'_>) -> bool {
        let p = &h.process;
        let Some(block) = embedded_only(self.incident, &p.spans) else {
            return false;
        };
        f.refused.push(format!(
            "PID {}: named only by {} lines that stand inside a {} input, so no script stops or signals it",
            p.pid, block.format, block.inside
        ));
        f.actions.push(
            Action::advice(
                format!(
                    "check that PID {} really holds GPU {gpu} before stopping anything: only {} lines inside a {} input name it, and a process can print such lines",
                    p.pid, block.format, block.inside
                ),
                Some("nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv"),
            )
            .with_evidence([block.first]),
        );
        true
    }

    /// Restart and verify the server's unit, or advise a restart when no
    /// script may name it.
    fn restart_steps(&self, f: &mut Finding, target: Option<(UnitName, Span)>) {
        match target {
            Some((unit, span)) => {
                f.actions.push(
                    Action::new(
                        ActionKind::RestartUnit { unit: unit.clone() },
                        Safety::Safe,
                        format!("start {unit} again on the freed GPUs"),
                    )
                    .with_evidence([span]),
                );
                f.actions.push(
                    Action::new(
                        ActionKind::VerifyUnitActive {
                            unit,
                            timeout_secs: 120,
                        },
                        Safety::Safe,
                        "the unit must come up and stay up",
                    )
                    .with_evidence([span]),
                );
            }
            None => f.actions.push(Action::advice(
                format!(
                    "restart the {} server once the GPU is free",
                    self.server_name()
                ),
                None,
            )),
        }
    }

    /// After the restart: how to make a stop end every process of the
    /// server, the leftovers to disable, and advice for a unit the evidence
    /// does not show to be a leftover.
    fn unit_advice(&self, f: &mut Finding, holders: &[Holder<'_>], leftovers: Vec<Action>) {
        // Advice names only units that validated: a suggested command is
        // still a command someone may paste.
        let target_name = self.target.as_ref().map(|t| t.0.as_str());
        if let Some(u) = holders
            .iter()
            .filter_map(|h| h.unit)
            .filter(|u| Some(u.name) == target_name)
            .find_map(|u| UnitName::new(u.name).ok())
        {
            f.actions.push(Action::advice(
                format!("make a stop of {u} end every process of the server: KillMode=control-group (the default) in its unit file"),
                Some(&format!("systemctl show -p KillMode {u}")),
            ));
        }
        f.actions.extend(leftovers);
        // A unit the evidence does not show to be a leftover (a workload of
        // its own, maybe someone else's) is not disabled by a script.
        if let Some(u) = holders
            .iter()
            .find(|h| h.stale_reason.is_none())
            .and_then(|h| h.unit)
            .and_then(|u| UnitName::new(u.name).ok())
            .filter(|u| unit_refusal(u).is_none())
        {
            f.actions.push(Action::advice(
                format!("if {u} is a leftover from an earlier experiment, disable it so it does not come back at boot"),
                Some(&format!("systemctl disable {u}")),
            ));
        }
    }

    /// The failing server's unit, when a script may restart it: a valid
    /// name, a workload's unit, and named by an input of its own.
    fn scripted_target(&self, f: &mut Finding) -> Option<(UnitName, Span)> {
        let (u, _, span) = self.target.as_ref()?;
        let unit = match UnitName::new(u) {
            Ok(u) => u,
            Err(e) => {
                f.refused.push(e.to_string());
                return None;
            }
        };
        if let Some(why) = unit_refusal(&unit) {
            f.refused.push(why);
            return None;
        }
        if let Some(block) = embedded_at(self.incident, *span) {
            f.refused.push(format!(
                "{unit}: named as the server's unit only by {} lines inside a {} input, so no script restarts it",
                block.format, block.inside
            ));
            return None;
        }
        Some((unit, *span))
    }

    /// Ending the other processes of a leftover server: when the holder is
    /// a server process title (`sglang::scheduler_TP3`) orphaned from its
    /// parent, its siblings are likely left in the unit's cgroup as well.
    fn orphan_sweep(
        &self,
        unit: &UnitName,
        h: &Holder<'_>,
        ppid_is_init: Option<bool>,
    ) -> Option<Action> {
        const TITLES: [&str; 2] = ["sglang::", "VLLM::"];
        let p = &h.process;
        let text = h.cmdline.map_or(p.name.as_str(), |c| c.0);
        let title = TITLES
            .iter()
            .find(|t| text.starts_with(*t) || p.name.starts_with(*t))?;
        let left_behind = self.incident.units.get(unit.as_str()).is_some_and(|u| {
            u.events.iter().any(|e| {
                matches!(e.kind, UnitEventKind::RemainsRunning { pid } | UnitEventKind::LeftOverProcess { pid } if pid == p.pid)
            })
        });
        if !left_behind && ppid_is_init != Some(true) {
            return None;
        }
        let name = ProcessName::new(title).ok()?;
        let evidence: Vec<Span> = self
            .incident
            .units
            .get(unit.as_str())
            .map(|u| {
                u.events
                    .iter()
                    .filter(|e| {
                        matches!(
                            e.kind,
                            UnitEventKind::RemainsRunning { .. }
                                | UnitEventKind::LeftOverProcess { .. }
                        )
                    })
                    .map(|e| e.span)
                    .collect()
            })
            .unwrap_or_default();
        Some(
            Action::new(
                ActionKind::KillOrphans {
                    unit: unit.clone(),
                    name,
                    grace_secs: 30,
                },
                Safety::NeedsConfirmation,
                format!(
                    "PID {} ({}) was left behind by {unit}; other {title}* processes of the old run may be too",
                    p.pid,
                    text
                ),
            )
            .with_evidence(evidence),
        )
    }
}

/// Stops `u` (once, however many of its processes hold the GPU) and, when
/// the holder is a leftover server and not the server to restart, plans to
/// disable it.
fn stop_unit(
    f: &mut Finding,
    gpu: u32,
    h: &Holder<'_>,
    u: &UnitName,
    (pid, hold): (Pid, &GpuHold),
    target: Option<&(UnitName, Span)>,
    plan: &mut Plan,
) {
    if !plan.stopped.insert(u.to_string()) {
        return;
    }
    let p = &h.process;
    let link = h.unit.map(|u: UnitLink<'_>| u.span);
    let why = format!(
        "{u} owns PID {} which holds {} on GPU {gpu}",
        p.pid,
        mib(p.used_mib)
    );
    f.actions.push(
        Action::new(
            ActionKind::StopUnit {
                unit: u.clone(),
                holder: Some((pid, hold.clone())),
            },
            Safety::NeedsConfirmation,
            why,
        )
        .with_evidence(link),
    );
    if let Some(reason) = &h.stale_reason {
        if target.is_none_or(|(t, _)| t != u) {
            plan.leftovers.push(
                Action::new(
                    ActionKind::DisableUnit { unit: u.clone() },
                    Safety::NeedsConfirmation,
                    format!(
                        "{u} is a leftover serving instance ({reason}); enabled, it comes back at the next boot"
                    ),
                )
                .with_evidence(link),
            );
        }
    }
}

/// What the script re-checks before it signals the PID: it must still be
/// this process when the script runs. Only a full command line identifies
/// it (one `systemctl status` elided with `…` cannot be compared, and the
/// executable nvidia-smi names, `python3`, is any interpreter's), and only
/// `ps -o lstart` (five fields) dates it: `09:38` or an elapsed time cannot
/// guard against PID reuse.
fn identity(
    f: &mut Finding,
    h: &Holder<'_>,
    ps: Option<&PsRecord>,
    pid: Pid,
    unit: Option<UnitName>,
    hold: &GpuHold,
) -> ProcessIdentity {
    let cmdline = match h.cmdline.map(|c| c.0).filter(|c| !c.ends_with('…')) {
        Some(c) => match ExpectedCmdline::new(c) {
            Ok(c) => Some(c),
            Err(e) => {
                f.refused.push(e.to_string());
                None
            }
        },
        None => None,
    };
    let start = match ps.and_then(|r| r.started.as_deref()) {
        Some(s) if s.split_whitespace().count() == 5 => match StartTime::new(s) {
            Ok(t) => Some(t),
            Err(e) => {
                f.refused.push(e.to_string());
                None
            }
        },
        _ => None,
    };
    ProcessIdentity {
        pid,
        unit,
        cmdline,
        start,
        gpu: hold.clone(),
    }
}

/// A PID the inputs do not identify strongly: refused, with advice to end
/// it by hand (after the unit's stop) or to find its owner.
fn weak_identity(
    f: &mut Finding,
    gpu: u32,
    h: &Holder<'_>,
    identity: &ProcessIdentity,
    stoppable: Option<&UnitName>,
) {
    let p = &h.process;
    let lacking = match (&identity.start, &identity.cmdline) {
        (None, None) => "its start time (ps -o lstart) and full command line",
        (None, Some(_)) => "its start time (ps -o lstart)",
        _ => "its full command line",
    };
    f.refused.push(format!(
        "PID {}: the inputs lack {lacking}, so no script signals it",
        p.pid
    ));
    let text = match stoppable {
        Some(u) => format!(
            "if PID {} survives the stop of {u}, end it by hand once ps shows it still is the process on GPU {gpu}: the inputs lack {lacking}, so the script does not signal it",
            p.pid
        ),
        None => format!(
            "find out who owns PID {} before touching it; if it is not yours, move the server to free GPUs (CUDA_VISIBLE_DEVICES, --base-gpu-id) instead",
            p.pid
        ),
    };
    f.actions.push(Action::advice(
        text,
        Some(&format!(
            "ps -o pid,user,lstart,args -p {0}; cat /proc/{0}/cgroup",
            p.pid
        )),
    ));
}

/// Why the script ends the PID.
fn termination_why(gpu: u32, h: &Holder<'_>, stoppable: bool) -> String {
    let p = &h.process;
    if h.stale_reason.is_some() {
        format!(
            "PID {} outlived an earlier stop once; stopping the unit may not end it",
            p.pid
        )
    } else if stoppable {
        format!("in case PID {} survives the stop", p.pid)
    } else if h.unit.is_some() {
        format!(
            "PID {} holds {} on GPU {gpu}; the script cannot stop its unit",
            p.pid,
            mib(p.used_mib)
        )
    } else {
        format!(
            "PID {} holds {} on GPU {gpu} and belongs to no known unit",
            p.pid,
            mib(p.used_mib)
        )
    }
}
