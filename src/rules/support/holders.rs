//! GPU memory held by someone other than the failing server: who holds it
//! (unit, command line), whether it is a leftover serving process, and the
//! guarded steps that free the GPU. Shared by every rule that finds a GPU
//! held by another process.

use std::collections::BTreeSet;

use crate::correlate::{GpuProcess, Incident, OwnerBasis, UnitEventKind};
use crate::model::CgroupOwner;
use crate::model::{EmbeddedBlock, Framework, ServerEvent, ServerEventKind, Uvicorn};
use crate::rules::support::mib;
use crate::rules::{Action, Finding};
use crate::source::Span;

mod steps;

/// A process on a GPU the failing server needed that is not the server.
pub struct Holder<'a> {
    pub process: GpuProcess,
    /// Its unit, and how the inputs tie the process to it.
    pub unit: Option<UnitLink<'a>>,
    pub cmdline: Option<(&'a str, Span)>,
    /// Why it looks like a leftover serving process, if it does.
    pub stale_reason: Option<String>,
    /// Why it is another serving instance that the inputs show alive, and
    /// the line that shows it: a second server sharing the GPU, not a
    /// leftover (never set with `stale_reason`).
    pub serving: Option<(String, Span)>,
}

/// A process's link to its unit: the unit's name, how the link was made
/// (strongest first, `OwnerBasis`), the line that makes it, and for an
/// inferred link the `Started` line the inference rests on.
#[derive(Debug, Clone, Copy)]
pub struct UnitLink<'a> {
    pub name: &'a str,
    pub basis: OwnerBasis,
    pub span: Span,
    pub via: Option<Span>,
}

impl UnitLink<'_> {
    /// Cites the link for process `pid`: the line that ties it to the unit
    /// (its PID underlined when `mark`) and the `Started` line an inferred
    /// link rests on; the unit joins the finding's units.
    pub fn cite(&self, f: &mut Finding, pid: u32, mark: bool) {
        let unit = self.name;
        f.entities.units.insert(unit.to_owned());
        let note = format!("PID {pid} belongs to {unit}: {}", self.basis.describe());
        if mark {
            f.evidence_marked(self.span, note, pid.to_string());
        } else {
            f.evidence(self.span, note);
        }
        if let Some(via) = self.via {
            f.evidence(via, format!("systemd started {unit} here"));
        }
    }
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
        let unit = incident.owner(p.pid).map(|o| UnitLink {
            name: o.unit.as_str(),
            basis: o.basis,
            span: o.span,
            via: o.via,
        });
        let cmdline = incident
            .cmdlines
            .get(&p.pid)
            .map(|c| (c.text.as_str(), c.span));
        let mut serving = None;
        let stale_reason =
            self.stale_reason(&p, unit.map(|u| u.name), cmdline.map(|c| c.0), &mut serving);
        Holder {
            process: p,
            unit,
            cmdline,
            stale_reason,
            serving,
        }
    }

    /// Why a holder looks like a leftover serving process, if it does.
    ///
    /// The rule of thumb: a holder is a leftover (`stale-serving-instance`)
    /// when the inputs show it left over: systemd found it left over from
    /// an earlier run, it belongs to the failing server's own unit, or it
    /// is a model server re-parented to PID 1 (orphaned), or a model server
    /// the inputs show nothing more of. A model server the inputs show
    /// alive and serving is a second instance sharing the GPU
    /// (`gpu-memory-held-by-other-process`, `serving` says why): its own
    /// unit `active`, its own `Uvicorn running on` / `Application startup
    /// complete` with no `Finished server process` after, or a command
    /// line that serves another port or model than the failing server's.
    /// Two live servers on one GPU are fixed by sharing it (lower
    /// `--gpu-memory-utilization` / `--mem-fraction-static` of both) or by
    /// moving one, not by ending a leftover.
    fn stale_reason(
        &self,
        p: &GpuProcess,
        unit: Option<&str>,
        cmdline: Option<&str>,
        live: &mut Option<(String, Span)>,
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
        if !orphan {
            *live = self.serving_now(p.pid, unit, cmdline);
            if live.is_some() {
                return None;
            }
        }
        Some(format!(
            "it is a model server process (`{}`){}",
            serving.trim_end_matches("::"),
            if orphan { ", re-parented to PID 1" } else { "" }
        ))
    }
}

impl Holders<'_> {
    /// Why model-server holder `pid` is a live second instance, with the
    /// line that shows it (see `stale_reason`): its unit, other than the
    /// failing server's, is `active`; its uvicorn came up (`Uvicorn running
    /// on`, `Application startup complete`, written by it or after its
    /// `Started server process [pid]`) and did not finish; or its command
    /// line serves another `--port` or `--model` than the failing server.
    fn serving_now(
        &self,
        pid: u32,
        unit: Option<&str>,
        cmdline: Option<&str>,
    ) -> Option<(String, Span)> {
        let incident = self.incident;
        let target = self.target.as_ref().map(|t| t.0.as_str());
        if let Some(u) = unit.filter(|u| Some(*u) != target) {
            let active = incident
                .facts
                .unit_statuses
                .iter()
                .find(|s| s.unit == u && s.active_state.as_deref() == Some("active"));
            if let Some(s) = active {
                return Some((
                    format!("its unit {u} is active, another server"),
                    s.active_span.unwrap_or(s.span),
                ));
            }
        }
        if let Some(span) = self.uvicorn_up(pid) {
            return Some((
                "its own server came up and has not finished".to_owned(),
                span,
            ));
        }
        if let Some((launcher, span)) = self.launcher_alive(pid) {
            return Some((
                format!(
                    "its launcher, PID {launcher}, still has the GPU open: a server running, not a leftover"
                ),
                span,
            ));
        }
        let cmdline = cmdline?;
        let span = incident.cmdlines.get(&pid)?.span;
        let (own, _) = super::server::launch_args(incident, self.framework)?;
        let port = flag_value(cmdline, "port").and_then(|v| v.parse::<u32>().ok());
        if let (Some(theirs), Some(ours)) = (port, own.port)
            && theirs != ours
        {
            return Some((
                format!("it serves port {theirs}, the failing server port {ours}"),
                span,
            ));
        }
        let model = flag_value(cmdline, "model").or_else(|| flag_value(cmdline, "model-path"));
        if let (Some(theirs), Some(ours)) = (model, own.model_path.as_deref())
            && theirs != ours
        {
            return Some((
                format!("it serves {theirs}, the failing server {ours}"),
                span,
            ));
        }
        None
    }

    /// The launcher of engine `pid` (vLLM's `vllm serve`, which spawns
    /// `VLLM::EngineCore`; SGLang's `sglang.launch_server`) alive beside it:
    /// `fuser -v /dev/nvidia*` lists, as the engine's user, a process whose
    /// command is the server's own (`vllm`, `sglang`) on the same device
    /// files, or `ps` shows the engine's parent is such a process. An
    /// engine whose launcher is gone is the leftover (a stop that killed
    /// the parent only); one whose launcher is alive is a running server.
    fn launcher_alive(&self, pid: u32) -> Option<(u32, Span)> {
        let facts = &self.incident.facts;
        let is_launcher = |cmd: &str| {
            let first = cmd.split_whitespace().next().unwrap_or("");
            let name = first.rsplit('/').next().unwrap_or(first);
            matches!(name, "vllm" | "sglang")
                || cmd.contains("vllm serve")
                || cmd.contains("vllm.entrypoints")
                || cmd.contains("sglang.launch_server")
        };
        let engine = facts.device_holders.iter().find(|h| h.pid == pid);
        if let Some(engine) = engine {
            let beside = facts.device_holders.iter().find(|h| {
                h.pid != pid
                    && h.pid != 1
                    && h.user == engine.user
                    && h.file == engine.file
                    && is_launcher(&h.command)
            });
            if let Some(h) = beside {
                return Some((h.pid, h.span));
            }
        }
        let parent = facts.ps.iter().find(|r| r.pid == pid)?.ppid?;
        let row = facts
            .ps
            .iter()
            .find(|r| r.pid == parent && parent != 1 && is_launcher(&r.cmd))?;
        Some((row.pid, row.span))
    }

    /// The line that shows `pid`'s uvicorn up and serving, unless a later
    /// line shows it finished.
    fn uvicorn_up(&self, pid: u32) -> Option<Span> {
        let mut started = false;
        let mut up = None;
        for e in &self.incident.facts.server_events {
            let ServerEventKind::Uvicorn(u) = &e.kind else {
                continue;
            };
            let by = e.pid == Some(pid);
            match u {
                Uvicorn::StartedProcess { pid: p } => started = *p == pid,
                Uvicorn::Running { .. } | Uvicorn::StartupComplete if by || started => {
                    up = Some(e.span);
                }
                Uvicorn::FinishedProcess { pid: p } if *p == pid => up = None,
                Uvicorn::ShuttingDown if by || started => up = None,
                _ => {}
            }
        }
        up
    }
}

/// The value of `--flag V` or `--flag=V` (`_` for `-` as both frameworks
/// accept) in a command line.
fn flag_value<'c>(cmdline: &'c str, flag: &str) -> Option<&'c str> {
    let mut tokens = cmdline.split_whitespace();
    while let Some(t) = tokens.next() {
        let Some(name) = t.strip_prefix("--") else {
            continue;
        };
        let (name, value) = match name.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (name, None),
        };
        if name.replace('_', "-") == flag {
            return value.or_else(|| tokens.next());
        }
    }
    None
}

/// `PID 20629 (ddtree-qwen.service)`; a process title such as
/// `sglang::scheduler_TP3` is worth naming too, a bare interpreter path is not.
pub fn phrase(h: &Holder<'_>) -> String {
    let p = &h.process;
    let title = (!p.name.is_empty() && !p.name.contains('/')).then_some(p.name.as_str());
    match (h.unit, title) {
        (
            Some(UnitLink {
                name: unit, basis, ..
            }),
            title,
        ) => {
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
            if let Some(link) = &h.unit {
                link.cite(f, p.pid, false);
            }
            if let Some((_, span)) = h.cmdline {
                f.evidence(span, format!("command line of PID {}", p.pid));
            }
            if let Some((why, span)) = &h.serving {
                f.evidence(
                    *span,
                    format!("PID {} is another serving instance: {why}", p.pid),
                );
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
        // Named first: the holder with the most memory (a display's few
        // MiB listed before a second server's 20 GiB is not the holder).
        let first = list
            .iter()
            .enumerate()
            .max_by_key(|(i, h)| (h.process.used_mib.unwrap_or(0), std::cmp::Reverse(*i)))
            .map_or(&list[0], |(_, h)| h);
        let main = phrase(first);
        let more = if list.len() > 1 {
            format!(" and {} other process(es)", list.len() - 1)
        } else {
            String::new()
        };
        let live = list
            .iter()
            .find_map(|h| Some((h.process.pid, h.serving.as_ref()?)));
        f.chain.push(format!(
            "{main}{more} holds {} = {:.2} GiB on GPU {gpu}{}",
            mib(Some(held)),
            held as f64 / 1024.0,
            match (stale, live) {
                (Some(s), _) => format!("; {s}"),
                (None, Some((_, (why, _)))) => format!("; a second serving instance, alive: {why}"),
                (None, None) => String::new(),
            }
        ));
        if let Some((pid, _)) = live {
            f.actions.push(Action::advice(
                format!(
                    "two servers share GPU {gpu}: give each its share (lower --gpu-memory-utilization for vLLM or --mem-fraction-static for SGLang on both, so that the shares add up to less than 1), or move one of them to another GPU; PID {pid} is alive and serving, not a leftover"
                ),
                Some(&format!(
                    "nvidia-smi --query-compute-apps=pid,used_memory --format=csv; ps -o pid,lstart,args -p {pid}"
                )),
            ));
        }
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
                .all(|h| h.unit.is_some_and(|u| u.basis != OwnerBasis::InferredFromJournalOrder)),
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

#[cfg(test)]
mod flag_tests {
    /// 504's first `vllm serve` command line, verbatim
    /// (gpustack/gpustack#2595): both spellings of a flag, and `_` for `-`.
    #[test]
    fn a_command_lines_flags_are_read_in_both_spellings() {
        let cmd = "/usr/bin/python3 /root/.local/share/pipx/venvs/gpustack/bin/vllm serve /data/models/modelscope/Qwen/Qwen3-Embedding-8B --max-model-len 8192 --task=embed --enforce-eager --host 0.0.0.0 --port 40047 --served-model-name Qwen/Qwen3-Embedding-8B";
        assert_eq!(super::flag_value(cmd, "port"), Some("40047"));
        assert_eq!(super::flag_value(cmd, "task"), Some("embed"));
        let snake = cmd.replace("--max-model-len", "--max_model_len");
        assert_eq!(super::flag_value(&snake, "max-model-len"), Some("8192"));
        assert_eq!(super::flag_value(cmd, "model"), None);
    }
}
