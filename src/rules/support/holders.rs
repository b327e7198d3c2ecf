//! GPU memory held by someone other than the failing server: who holds it
//! (unit, command line), whether it is a leftover serving process, and the
//! guarded steps that free the GPU. Shared by every rule that finds a GPU
//! held by another process.

use std::collections::BTreeSet;

use crate::correlate::{GpuProcess, Incident, OwnerBasis, UnitEventKind};
use crate::model::CgroupOwner;
use crate::model::{
    EmbeddedBlock, Framework, GpuUuid, Pid, ProcessName, ServerEvent, StartTime, UnitName,
};
use crate::rules::support::mib;
use crate::rules::{
    Action, ActionKind, ExpectedCmdline, Finding, GpuHold, GpuRef, ProcessIdentity, Safety,
    unit_refusal,
};
use crate::source::Span;

/// A process on a GPU the failing server needed that is not the server.
pub struct Holder<'a> {
    pub process: GpuProcess,
    /// Its unit: name, how the link was made, the line, and for inferred
    /// links the `Started` line the inference rests on.
    pub unit: Option<(&'a str, OwnerBasis, Span, Option<Span>)>,
    pub cmdline: Option<(&'a str, Span)>,
    /// Why it looks like a leftover serving process, if it does.
    pub stale_reason: Option<String>,
}

/// What is known about the failing server, to tell its processes from
/// holders and to restart it.
pub struct Holders<'a> {
    pub incident: &'a Incident,
    /// PIDs of the failing server itself: never holders.
    pub own_pids: BTreeSet<u32>,
    /// The unit that runs the failing server.
    pub target: Option<(String, OwnerBasis, Span)>,
    pub framework: Framework,
}

impl<'a> Holders<'a> {
    /// The context of the run that wrote `failure` (none known: no own PIDs).
    pub fn of_run(
        incident: &'a Incident,
        failure: Option<&'a ServerEvent>,
        framework: Framework,
    ) -> Self {
        Holders {
            incident,
            own_pids: failure
                .map(|e| super::server::run_pids(incident, e))
                .unwrap_or_default(),
            target: super::server::target(incident, failure, framework),
            framework,
        }
    }

    /// `SGLang`, `vLLM`, or `the model server` when the log did not say.
    fn server_name(&self) -> &'static str {
        match self.framework {
            Framework::Sglang => "SGLang",
            Framework::Vllm => "vLLM",
            Framework::Unknown => "model",
        }
    }

    /// The processes on GPU `gpu` that are not the failing server itself.
    pub fn on(&self, gpu: u32) -> Vec<Holder<'a>> {
        self.incident
            .processes_on(gpu)
            .filter(|p| !self.own_pids.contains(&p.pid))
            .map(|p| self.holder(p.clone()))
            .collect()
    }

    /// A holder from a process row (nvidia-smi's, or one a rule built from
    /// PyTorch's per-process list), with its unit, command line and whether
    /// it is a leftover server.
    pub fn holder(&self, p: GpuProcess) -> Holder<'a> {
        let incident = self.incident;
        let unit = incident
            .owner(p.pid)
            .map(|o| (o.unit.as_str(), o.basis, o.span, o.via));
        let cmdline = incident
            .cmdlines
            .get(&p.pid)
            .map(|c| (c.text.as_str(), c.span));
        let stale_reason = self.stale_reason(&p, unit.map(|u| u.0), cmdline.map(|c| c.0));
        Holder {
            process: p,
            unit,
            cmdline,
            stale_reason,
        }
    }

    /// Why a holder looks like a leftover serving process, if it does.
    pub fn stale_reason(
        &self,
        p: &GpuProcess,
        unit: Option<&str>,
        cmdline: Option<&str>,
    ) -> Option<String> {
        let incident = self.incident;
        if let Some(u) = unit.and_then(|u| incident.units.get(u)) {
            let left = u.events.iter().any(|e| {
                matches!(e.kind, UnitEventKind::RemainsRunning { pid } | UnitEventKind::LeftOverProcess { pid } if pid == p.pid)
            });
            if left {
                return Some(format!(
                    "systemd reported PID {} as left over from an earlier run of {}",
                    p.pid, unit?
                ));
            }
        }
        if let (Some(u), Some((target, _, _))) = (unit, &self.target) {
            if u == target {
                return Some(format!(
                    "it belongs to {target} itself, whose new run failed"
                ));
            }
        }
        let text = cmdline.unwrap_or(&p.name);
        let serving = [
            "sglang::",
            "sglang.launch_server",
            "sglang serve",
            "VLLM::",
            "vllm serve",
            "vllm.entrypoints",
        ]
        .iter()
        .find(|m| text.contains(*m) || p.name.contains(*m))?;
        let orphan = incident
            .facts
            .ps
            .iter()
            .any(|r| r.pid == p.pid && r.ppid == Some(1));
        Some(format!(
            "it is a model server process (`{}`){}",
            serving.trim_end_matches("::"),
            if orphan { ", re-parented to PID 1" } else { "" }
        ))
    }

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
        let incident = self.incident;
        let (uuid, gpu_spans) = match incident.gpu(gpu) {
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
        let mut stopped: BTreeSet<String> = BTreeSet::new();
        let mut terminations = Vec::new();
        let mut sweeps = Vec::new();
        let mut leftovers = Vec::new();
        for h in holders {
            let p = &h.process;
            let pid = match Pid::new(p.pid) {
                Ok(pid) => pid,
                Err(e) => {
                    f.refused.push(e.to_string());
                    continue;
                }
            };
            if let Some(block) = embedded_only(incident, &p.spans) {
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
                continue;
            }
            let unit = match h.unit.map(|u| UnitName::new(u.0)) {
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
                continue;
            }
            // The unit is stopped only when its link to the PID stands in
            // an input of its own.
            let unit_inside = h.unit.and_then(|u| embedded_at(incident, u.2));
            if let (Some(u), Some(block)) = (&unit, unit_inside) {
                f.refused.push(format!(
                    "{u}: linked to PID {} only by {} lines inside a {} input, so no script stops it",
                    p.pid, block.format, block.inside
                ));
            }
            let stoppable = unit.as_ref().filter(|_| unit_inside.is_none());
            if let Some(u) = stoppable {
                if stopped.insert(u.to_string()) {
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
                        .with_evidence(h.unit.map(|u| u.2)),
                    );
                    if let Some(reason) = &h.stale_reason {
                        if target.as_ref().is_none_or(|(t, _)| t != u) {
                            leftovers.push(
                                Action::new(
                                    ActionKind::DisableUnit { unit: u.clone() },
                                    Safety::NeedsConfirmation,
                                    format!(
                                        "{u} is a leftover serving instance ({reason}); enabled, it comes back at the next boot"
                                    ),
                                )
                                .with_evidence(h.unit.map(|u| u.2)),
                            );
                        }
                    }
                }
            }
            let ps = incident.facts.ps.iter().find(|r| r.pid == p.pid);
            // The guards: the PID must still be this process when the script
            // runs. Only a full command line identifies it: one `systemctl
            // status` elided (`…`) cannot be compared, and the executable
            // nvidia-smi names (`python3`) is any interpreter's.
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
            // Only `ps -o lstart` (five fields) dates a process; `09:38` or
            // an elapsed time cannot guard against PID reuse.
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
            let identity = ProcessIdentity {
                pid,
                unit: unit.clone(),
                cmdline,
                start,
                gpu: hold.clone(),
            };
            if !identity.is_strong() {
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
                continue;
            }
            let why = if h.stale_reason.is_some() {
                format!(
                    "PID {} outlived an earlier stop once; stopping the unit may not end it",
                    p.pid
                )
            } else if stoppable.is_some() {
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
            };
            let mut evidence: Vec<Span> = p.spans.clone();
            evidence.extend(h.cmdline.map(|c| c.1));
            evidence.extend(ps.map(|r| r.span));
            if let Some(u) = stoppable {
                if let Some(sweep) = self.orphan_sweep(u, h, ps.map(|r| r.ppid == Some(1))) {
                    if !sweeps.contains(&sweep) {
                        sweeps.push(sweep);
                    }
                }
            }
            terminations.push(Action::terminate(identity, why).with_evidence(evidence));
        }
        // Waiting and restarting only make sense once something was stopped.
        let freeing = !stopped.is_empty() || !terminations.is_empty() || !sweeps.is_empty();
        f.actions.extend(terminations);
        f.actions.extend(sweeps);
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
        // Advice names only units that validated: a suggested command is
        // still a command someone may paste.
        let target_name = self.target.as_ref().map(|t| t.0.as_str());
        if let Some(u) = holders
            .iter()
            .filter_map(|h| h.unit)
            .filter(|u| Some(u.0) == target_name)
            .find_map(|u| UnitName::new(u.0).ok())
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
            .and_then(|u| UnitName::new(u.0).ok())
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

/// `PID 20629 (ddtree-qwen.service)`; a process title such as
/// `sglang::scheduler_TP3` is worth naming too, a bare interpreter path is not.
pub fn phrase(h: &Holder<'_>) -> String {
    let p = &h.process;
    let title = (!p.name.is_empty() && !p.name.contains('/')).then_some(p.name.as_str());
    match (h.unit, title) {
        (Some((unit, basis, ..)), title) => {
            let inferred = if basis == OwnerBasis::InferredFromJournalOrder {
                ", inferred"
            } else {
                ""
            };
            match title {
                Some(title) => format!("PID {} ({title}, {unit}{inferred})", p.pid),
                None => format!("PID {} ({unit}{inferred})", p.pid),
            }
        }
        (None, Some(title)) => format!("PID {} ({title})", p.pid),
        (None, None) if p.name.is_empty() => format!("PID {}", p.pid),
        (None, None) => format!("PID {} ({})", p.pid, p.name),
    }
}

impl Holders<'_> {
    /// Where a PID without a unit runs, when its `/proc/PID/cgroup` says: a
    /// login session, a user's own unit, a container or a pod.
    fn not_a_unit(&self, pid: u32) -> Option<(Span, String)> {
        let c = self
            .incident
            .facts
            .proc_cgroups
            .iter()
            .find(|c| c.pid == Some(pid))?;
        let uid = |u: &Option<u32>| u.map_or(String::new(), |u| format!(" of UID {u}"));
        let whose = match &c.owner {
            CgroupOwner::Session { uid: u, scope } => {
                format!(
                    "in login session {scope}{} (someone's interactive work)",
                    uid(u)
                )
            }
            CgroupOwner::UserUnit { uid: u, unit } => format!("as {unit}, a user unit{}", uid(u)),
            CgroupOwner::Container { runtime, id } => {
                format!(
                    "in {runtime} container {}",
                    id.chars().take(12).collect::<String>()
                )
            }
            CgroupOwner::KubernetesPod { pod_uid, .. } => format!("in Kubernetes pod {pod_uid}"),
            _ => return None,
        };
        Some((c.span, whose))
    }
}

/// What the holders on one GPU hold, in MiB.
pub fn held_mib(h: &[Holder<'_>]) -> u64 {
    h.iter().filter_map(|h| h.process.used_mib).sum()
}

impl<'a> Holders<'a> {
    /// The GPU among `gpus` whose holders hold the most (at least
    /// `min_mib`), with them.
    pub fn most_held(
        &self,
        gpus: impl IntoIterator<Item = u32>,
        min_mib: u64,
    ) -> Option<(u32, Vec<Holder<'a>>)> {
        gpus.into_iter()
            .map(|g| (g, self.on(g)))
            .filter(|(_, h)| held_mib(h) >= min_mib)
            .max_by_key(|(g, h)| (held_mib(h), std::cmp::Reverse(*g)))
    }

    /// Reports `list`, the holders of GPU `gpu`: sets the category (a
    /// leftover server, or another process), cites their rows and units,
    /// adds them to the entities and the chain, and adds the guarded steps
    /// that free the GPU. `group` are the server's GPUs: an idle one gives
    /// the level to wait for. Returns the phrase naming the holders.
    pub fn report(&self, f: &mut Finding, gpu: u32, list: &[Holder<'_>], group: &[u32]) -> String {
        let stale = list.iter().find_map(|h| h.stale_reason.as_deref());
        f.category = if stale.is_some() {
            crate::rules::Category::StaleServingInstance
        } else {
            crate::rules::Category::GpuMemoryHeldByOtherProcess
        };
        let held = held_mib(list);
        f.entities.gpus.insert(gpu);
        for h in list {
            let p = &h.process;
            f.entities.pids.insert(p.pid);
            for span in p.spans.iter().take(2) {
                f.evidence(
                    *span,
                    format!("PID {} holds {} on GPU {gpu}", p.pid, mib(p.used_mib)),
                );
            }
            if let Some((u, basis, span, via)) = h.unit {
                f.entities.units.insert(u.to_owned());
                f.evidence(
                    span,
                    format!("PID {} belongs to {u}: {}", p.pid, basis.describe()),
                );
                if let Some(via) = via {
                    f.evidence(via, format!("systemd started {u} here"));
                }
            }
            if let Some((_, span)) = h.cmdline {
                f.evidence(span, format!("command line of PID {}", p.pid));
            }
            if h.unit.is_none() {
                if let Some((span, whose)) = self.not_a_unit(p.pid) {
                    f.evidence(
                        span,
                        format!("PID {} runs {whose}, not under a service", p.pid),
                    );
                }
            }
        }
        let main = phrase(&list[0]);
        let more = if list.len() > 1 {
            format!(" and {} other process(es)", list.len() - 1)
        } else {
            String::new()
        };
        f.chain.push(format!(
            "{main}{more} holds {} = {:.2} GiB on GPU {gpu}{}",
            mib(Some(held)),
            held as f64 / 1024.0,
            stale.map(|s| format!("; {s}")).unwrap_or_default()
        ));
        // A table printed into a log is weaker evidence than one of its own:
        // only then is it a condition, so other reports keep their confidence.
        if list
            .iter()
            .any(|h| embedded_only(self.incident, &h.process.spans).is_some())
        {
            f.condition(
                "the holder's GPU row stands in an input of its own, not inside another format's (a log can print any table)",
                false,
            );
        }
        f.condition(
            "the holder's unit is proven (CGroup tree, Main PID, journal field or systemd message), not inferred",
            list.iter()
                .all(|h| h.unit.is_some_and(|u| u.1 != OwnerBasis::InferredFromJournalOrder)),
        );
        let baseline = group
            .iter()
            .filter(|g| **g != gpu && self.on(**g).is_empty())
            .filter_map(|g| self.incident.gpu(*g)?.memory_used_mib)
            .max()
            .unwrap_or(0);
        self.actions(f, gpu, list, baseline);
        format!("{main}{more}")
    }
}

/// The block of host output inside another format's input that holds the
/// line at `span`, if one does.
pub fn embedded_at(incident: &Incident, span: Span) -> Option<&EmbeddedBlock> {
    incident.facts.embedded.iter().find(|b| b.contains(span))
}

/// The block the first of `spans` stands in, when every one of them stands
/// inside another format's input: a fact nothing else corroborates.
pub fn embedded_only<'i>(incident: &'i Incident, spans: &[Span]) -> Option<&'i EmbeddedBlock> {
    let first = embedded_at(incident, *spans.first()?)?;
    spans
        .iter()
        .all(|s| embedded_at(incident, *s).is_some())
        .then_some(first)
}
