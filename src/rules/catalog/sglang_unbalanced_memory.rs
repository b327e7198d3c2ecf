//! `sglang-unbalanced-memory`: SGLang's TP memory balance check failed at
//! start-up, and why: another process, a stale server, mixed GPU sizes, or a
//! holder nvidia-smi cannot show.

use crate::rules::support::server::cite_target;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Gpu, Incident, OwnerBasis, UnitEventKind};
use crate::model::{
    Framework, MemoryImbalance, ProcessListingKind, ServerArgs, ServerEvent, ServerEventKind,
};
use crate::rules::support::holders::{Holder, Holders, phrase};
use crate::rules::support::mib;
use crate::rules::support::server::server_unit;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: SglangUnbalancedMemory = SglangUnbalancedMemory;

pub struct SglangUnbalancedMemory;

static META: RuleMeta = RuleMeta {
    id: "sglang-unbalanced-memory",
    category: Category::GpuMemoryHeldByOtherProcess,
    severity: Severity::Critical,
    anchors: &[
        "The memory capacity is unbalanced",
        "speculative/",
        "eagle_worker",
        "draft_worker",
        "speculative_algorithm",
    ],
    summary: "SGLang refused to start: the GPUs of its tensor-parallel group have unequal free memory",
    doc: DOC,
};

const DOC: &str = r#"
## What it means
At start-up every SGLang tensor-parallel (TP) rank measures the free memory of
its GPU and all-reduces the minimum. If the smallest free memory in the group
(`pre_model_load_memory`, older releases `min_per_gpu_memory`) is below 90 % of
a rank's own free memory (`local_gpu_memory`), that rank raises
`The memory capacity is unbalanced. Some GPUs may be occupied by other processes.`
(`ValueError` up to 0.5.6, `RuntimeError` from 0.5.7) and the server kills its
own process tree, so systemd sees the main process die by SIGKILL.

The rank on the short GPU does not raise (its own free memory *is* the
minimum): the silent rank points at the GPU at fault.

## Why it happens
1. Another process holds memory on one GPU of the group (a forgotten service,
   a notebook, an evaluation job).
2. A stale instance of a serving server (the previous run of this service, or
   another SGLang/vLLM) survived and still holds its GPU.
3. The group mixes GPUs of different capacity (say 40 GB and 80 GB cards):
   no process is to blame and the error repeats on every restart.
4. A holder nvidia-smi cannot show: inside a container, processes of other
   containers or the host are not listed, yet their memory is counted.

## How to confirm
The deficit `local_gpu_memory - pre_model_load_memory` (GiB) should match the
memory of the holder on the short GPU (nvidia-smi MiB / 1024), within about
1.5 GiB of CUDA context. The holder's unit comes from `systemctl status`
(CGroup tree, Main PID) or the journal (`_SYSTEMD_UNIT`). For mixed GPUs,
`memory.total` differs between the GPUs of the group.

## How to fix
1. and 2.: stop the unit that owns the holder (never kill a process of someone
   else's service without confirming it), make sure the PID is gone, wait
   until the GPU's memory is really released, then restart the server and
   verify it comes up. A leftover server whose processes were re-parented or
   left in its unit's cgroup (`KillMode=process`) has siblings the capture
   may not show: end the processes of its group (`sglang::*`) left in the
   stopped unit. A leftover server of another unit should also be disabled,
   so it does not come back at boot; a workload of its own (the seed's
   `ddtree-qwen.service`, which served requests until minutes before) is
   only advised about: whether it may go is its owner's call.
3.: run each TP group on GPUs of one model (`CUDA_VISIBLE_DEVICES`).
4.: find the holder from the host (`nvidia-smi` outside the container).

Disabling the check (`SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0`) is not a
fix: the KV cache of every rank is then sized by the smallest GPU.

## Safety
Stopping or disabling a unit and signalling a process need confirmation: the
script checks, before each signal, that the PID still exists and still has
the start time, command line and unit the report recorded, and it never sends
SIGKILL before SIGTERM and a grace period. It checks the GPU's UUID before
waiting for its memory, and refuses to sweep a unit's processes while the
unit is active.
"#;

/// A traceback frame in SGLang's speculative-decoding draft worker.
static DRAFT_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"File "[^"]*sglang/srt/speculative/[^"]*"|EAGLEWorker|draft_worker|eagle_worker\.py"#,
    )
    .expect("draft regex")
});
static SPEC_ALGORITHM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"speculative_algorithm='([A-Z0-9_]+)'").expect("algorithm regex"));

/// Ray actors of RL trainers that host the rollout engine next to the
/// trainer's own model on the same GPUs: veRL's fused worker class
/// (verl/single_controller/ray/base.py, `create_colocated_worker_cls`).
const TRAINER_ACTORS: &[&str] = &["WorkerDict"];

/// A holder's memory matches the deficit when within this much (GiB): the
/// difference is the failing server's own CUDA context.
const RECONCILE_TOLERANCE_GIB: f64 = 1.5;
/// GPUs whose capacities differ by more than this fraction are "mixed".
const CAPACITY_SPREAD: f64 = 0.03;
const MIB_PER_GIB: f64 = 1024.0;

impl Rule for SglangUnbalancedMemory {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let events: Vec<(&ServerEvent, &MemoryImbalance)> = incident
            .facts
            .server_events
            .iter()
            .filter_map(|e| match &e.kind {
                ServerEventKind::MemoryImbalance(m) => Some((e, m)),
                _ => None,
            })
            .collect();
        if events.is_empty() {
            return;
        }
        let env_gpus = env_gpus(incident);
        out.push(Analysis::new(incident, &events, &env_gpus).finding());
    }
}

enum Cause<'a> {
    /// (a) and (b): holders found on the short GPU(s).
    Held {
        gpus: Vec<u32>,
        holders: Vec<Holder<'a>>,
        reconciled: Option<bool>,
    },
    /// (c) GPUs of different capacity.
    Heterogeneous {
        small: Vec<&'a Gpu>,
        large: Vec<&'a Gpu>,
    },
    /// (e) SGLang's own speculative-decoding draft worker ran the check
    /// after the target model had loaded (releases before 0.4.10).
    DraftWorker {
        frame: Span,
        algorithm: Option<(String, Span)>,
    },
    /// (f) the SGLang engine runs inside an RL trainer's Ray actor (veRL's
    /// `WorkerDict`), which shares each GPU with the trainer's own state:
    /// the ranks differ by what the trainer placed, not by a foreign process.
    CoLocated { actor: Span, name: String },
    /// (d) memory used on a GPU with no process to show for it.
    Invisible { gpus: Vec<&'a Gpu> },
    /// No snapshot, or the holder is gone by the time of the snapshot.
    Undetermined { reason: String },
}

struct Analysis<'a> {
    incident: &'a Incident,
    events: &'a [(&'a ServerEvent, &'a MemoryImbalance)],
    numbers: Option<(&'a MemoryImbalance, Span)>,
    args: Option<(&'a ServerArgs, Span)>,
    failing_ranks: BTreeSet<u32>,
    /// GPU index of each rank of the group, when the group is known.
    rank_gpus: BTreeMap<u32, u32>,
    holders: Holders<'a>,
    /// GPUs known only from `sglang.check_env` (no nvidia-smi): model names,
    /// with the models' nominal capacities.
    env_gpus: &'a [Gpu],
}

impl<'a> Analysis<'a> {
    fn new(
        incident: &'a Incident,
        events: &'a [(&'a ServerEvent, &'a MemoryImbalance)],
        env_gpus: &'a [Gpu],
    ) -> Self {
        let numbers = events
            .iter()
            .find(|(_, m)| m.min_gib.is_some() && m.local_gib.is_some())
            .map(|(e, m)| (*m, e.span));
        let args = incident
            .facts
            .server_events
            .iter()
            .rev()
            .find_map(|e| match &e.kind {
                ServerEventKind::Args(a) => Some((a, e.span)),
                _ => None,
            });
        let failing_ranks: BTreeSet<u32> = events.iter().filter_map(|(e, _)| e.rank?.tp).collect();
        let known = if incident.gpus.is_empty() {
            env_gpus.len()
        } else {
            incident.gpus.len()
        };
        let rank_gpus = group_gpus(known, args.map(|a| a.0), &failing_ranks);
        // PIDs of the failing run only: an earlier SGLang server in the same
        // journal (another unit, or this unit's previous run) is a candidate
        // holder, not the failing server.
        let own_pids =
            crate::rules::support::server::runs_pids(incident, events.iter().map(|(e, _)| *e));
        let target = server_unit(incident, events.iter().map(|(e, _)| *e), "sglang");
        Analysis {
            incident,
            events,
            numbers,
            args,
            failing_ranks,
            rank_gpus,
            holders: Holders {
                incident,
                own_pids,
                target,
                framework: Framework::Sglang,
            },
            env_gpus,
        }
    }

    /// The GPUs of the inputs: nvidia-smi's, else check_env's names.
    fn known_gpus(&self) -> &'a [Gpu] {
        if self.incident.gpus.is_empty() {
            self.env_gpus
        } else {
            &self.incident.gpus
        }
    }

    /// `local - min` in GiB: how much less free memory the short GPU had.
    fn deficit_gib(&self) -> Option<f64> {
        let (m, _) = self.numbers?;
        Some(m.local_gib? - m.min_gib?)
    }

    fn group(&self) -> Vec<&'a Gpu> {
        if self.rank_gpus.is_empty() {
            return self.known_gpus().iter().collect();
        }
        let wanted: BTreeSet<u32> = self.rank_gpus.values().copied().collect();
        self.known_gpus()
            .iter()
            .filter(|g| wanted.contains(&g.index))
            .collect()
    }

    /// GPUs of ranks that did not raise: the short ones.
    fn silent_gpus(&self) -> BTreeSet<u32> {
        if self.failing_ranks.is_empty() {
            return BTreeSet::new();
        }
        self.rank_gpus
            .iter()
            .filter(|(rank, _)| !self.failing_ranks.contains(rank))
            .map(|(_, gpu)| *gpu)
            .collect()
    }

    fn cause(&self) -> Cause<'a> {
        if let Some(draft) = self.draft_worker() {
            return draft;
        }
        if let Some(colocated) = self.colocated_actor() {
            return colocated;
        }
        let group = self.group();
        if group.is_empty() {
            return Cause::Undetermined {
                reason: "no nvidia-smi snapshot of the GPUs was given".to_owned(),
            };
        }
        let silent = self.silent_gpus();
        let deficit = self.deficit_gib();

        // GPUs with foreign processes, the silent ranks' GPUs first.
        let mut held: Vec<(u32, Vec<Holder<'a>>)> = group
            .iter()
            .map(|g| (g.index, self.holders.on(g.index)))
            .filter(|(_, h)| !h.is_empty())
            .collect();
        held.sort_by_key(|(gpu, h)| {
            let mib: u64 = h.iter().filter_map(|h| h.process.used_mib).sum();
            (!silent.contains(gpu), std::cmp::Reverse(mib), *gpu)
        });
        let reconciles = |mib: u64| {
            deficit.map(|d| (mib as f64 / MIB_PER_GIB - d).abs() <= RECONCILE_TOLERANCE_GIB)
        };
        if let Some((gpu, holders)) = held.into_iter().next() {
            let mib: u64 = holders.iter().filter_map(|h| h.process.used_mib).sum();
            let reconciled = reconciles(mib);
            if reconciled != Some(false) || !self.heterogeneous(&group) {
                return Cause::Held {
                    gpus: vec![gpu],
                    holders,
                    reconciled,
                };
            }
        }
        if self.heterogeneous(&group) {
            let max = group
                .iter()
                .filter_map(|g| g.memory_total_mib)
                .max()
                .unwrap_or(0);
            let (large, small): (Vec<&Gpu>, Vec<&Gpu>) = group.iter().partition(|g| {
                g.memory_total_mib
                    .is_some_and(|t| t as f64 >= max as f64 * (1.0 - CAPACITY_SPREAD))
            });
            return Cause::Heterogeneous { small, large };
        }
        // Memory in use that no listed process accounts for.
        let unexplained = |g: &&Gpu| {
            let listed: u64 = self
                .incident
                .processes_on(g.index)
                .filter_map(|p| p.used_mib)
                .sum();
            let used = g.memory_used_mib.unwrap_or(0).saturating_sub(listed);
            match deficit {
                Some(d) => used as f64 / MIB_PER_GIB >= d - RECONCILE_TOLERANCE_GIB,
                None => used >= 2048,
            }
        };
        let invisible: Vec<&Gpu> = group.iter().copied().filter(unexplained).collect();
        if !invisible.is_empty() {
            return Cause::Invisible { gpus: invisible };
        }
        Cause::Undetermined {
            reason: "the nvidia-smi snapshot shows no process and no unexplained memory on the GPUs of the group: \
                     the holder may have exited before the snapshot was taken"
                .to_owned(),
        }
    }

    /// The check raised inside the draft worker: a traceback frame of
    /// SGLang's speculative decoding just above an imbalance error.
    fn draft_worker(&self) -> Option<Cause<'a>> {
        let messages = &self.incident.facts.messages;
        // The few draft-worker frames first, then the events near them: a
        // scan of every message per event would be quadratic on big logs.
        let frames: Vec<Span> = messages
            .iter()
            .filter(|m| DRAFT_FRAME.is_match(&m.text))
            .map(|m| m.span)
            .collect();
        let frame = self.events.iter().find_map(|(e, _)| {
            frames.iter().copied().find(|f| {
                f.source == e.span.source && f.line < e.span.line && e.span.line - f.line <= 40
            })
        })?;
        let algorithm = messages.iter().find_map(|m| {
            let c = SPEC_ALGORITHM.captures(&m.text)?;
            Some((c[1].to_owned(), m.span))
        });
        Some(Cause::DraftWorker { frame, algorithm })
    }

    /// The failing engine's lines carry an RL trainer's Ray actor prefix
    /// (`(WorkerDict pid=2782, ip=…) [… TP1] Scheduler hit an exception`):
    /// the rollout engine shares its GPUs with the trainer's own actors.
    fn colocated_actor(&self) -> Option<Cause<'a>> {
        let sources: BTreeSet<_> = self.events.iter().map(|(e, _)| e.span.source).collect();
        self.incident
            .facts
            .server_events
            .iter()
            .filter(|e| sources.contains(&e.span.source))
            .find_map(|e| {
                let name = e.process.as_deref()?;
                TRAINER_ACTORS.contains(&name).then(|| Cause::CoLocated {
                    actor: e.span,
                    name: name.to_owned(),
                })
            })
    }

    fn heterogeneous(&self, group: &[&Gpu]) -> bool {
        let totals: Vec<u64> = group.iter().filter_map(|g| g.memory_total_mib).collect();
        match (totals.iter().min(), totals.iter().max()) {
            (Some(&lo), Some(&hi)) => (hi - lo) as f64 > hi as f64 * CAPACITY_SPREAD,
            _ => false,
        }
    }

    fn finding(&self) -> Finding {
        let cause = self.cause();
        let category = match &cause {
            Cause::Held { holders, .. } if holders.iter().any(|h| h.stale_reason.is_some()) => {
                Category::StaleServingInstance
            }
            Cause::Held { .. } | Cause::Invisible { .. } | Cause::Undetermined { .. } => {
                Category::GpuMemoryHeldByOtherProcess
            }
            Cause::Heterogeneous { .. } => Category::HeterogeneousGpuMemory,
            Cause::DraftWorker { .. } | Cause::CoLocated { .. } => {
                Category::ImbalanceCheckFalsePositive
            }
        };
        let fatal = self.events.iter().any(|(_, m)| m.exception.is_some());
        let severity = if fatal {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let mut f = Finding::new(META.id, category, severity);
        // The same failure in two captures (log file and journal) is once.
        let any_ranked = self.events.iter().any(|(e, _)| e.rank.is_some());
        let distinct: BTreeSet<_> = self
            .events
            .iter()
            .filter(|(e, _)| e.rank.is_some() || !any_ranked)
            .map(|(e, _)| (e.rank, e.time))
            .collect();
        f.occurrences = distinct.len() as u32;
        self.common_evidence(&mut f);
        match &cause {
            Cause::Held {
                gpus,
                holders,
                reconciled,
            } => self.explain_held(&mut f, gpus, holders, *reconciled),
            Cause::Heterogeneous { small, large } => {
                self.explain_heterogeneous(&mut f, small, large)
            }
            Cause::Invisible { gpus } => self.explain_invisible(&mut f, gpus),
            Cause::DraftWorker { frame, algorithm } => {
                self.explain_draft_worker(&mut f, *frame, algorithm.as_ref())
            }
            Cause::CoLocated { actor, name } => self.explain_colocated(&mut f, *actor, name),
            Cause::Undetermined { reason } => self.explain_undetermined(&mut f, reason),
        }
        let met = f.conditions.iter().filter(|c| c.met).count() as f64;
        let total = f.conditions.len().max(1) as f64;
        let base = match &cause {
            Cause::Held { .. } | Cause::Heterogeneous { .. } | Cause::DraftWorker { .. } => 0.55,
            Cause::Invisible { .. } | Cause::CoLocated { .. } => 0.45,
            Cause::Undetermined { .. } => 0.25,
        };
        let owner_trust = match &cause {
            Cause::Held { holders, .. } => holders
                .iter()
                .filter_map(|h| h.unit.map(|u| u.1.confidence()))
                .fold(1.0_f64, f64::min),
            _ => 1.0,
        };
        f.confidence = round2((base + (0.99 - base) * met / total) * owner_trust);
        f
    }

    fn target_name(&self) -> String {
        match &self.holders.target {
            Some((unit, _, _)) => unit.clone(),
            None => "the SGLang server".to_owned(),
        }
    }

    /// Evidence and chain links every cause shares: the failing ranks, the
    /// launch arguments and how the unit died.
    fn common_evidence(&self, f: &mut Finding) {
        let incident = self.incident;
        // The symptom: how the unit died, once per distinct message.
        if let Some(unit) = &cite_target(f, &self.holders.target) {
            for e in incident.units.get(unit).map_or(&[][..], |u| &u.events) {
                match &e.kind {
                    UnitEventKind::MainProcessExited { code, status } => f.evidence_once_marked(
                        e.span,
                        format!("{unit}'s main process exited, code={code}, status={status}"),
                        format!("status={status}"),
                    ),
                    UnitEventKind::FailedWithResult(r) => f.evidence_once_marked(
                        e.span,
                        format!("{unit} failed with result '{r}'"),
                        format!("'{r}'"),
                    ),
                    _ => {}
                }
            }
        }
        // One line per failing rank, in rank order. A rank-less copy (a
        // journal tail that starts mid-traceback) adds nothing when the
        // ranks' own lines are there.
        let mut events: Vec<_> = self.events.to_vec();
        events.sort_by_key(|(e, _)| (e.rank.and_then(|r| r.tp), e.span));
        let any_ranked = events.iter().any(|(e, _)| e.rank.is_some());
        for (e, m) in events {
            if e.rank.is_none() && any_ranked {
                continue;
            }
            let who = e
                .rank
                .map_or_else(|| "SGLang".to_owned(), |r| r.to_string());
            let what = match &m.exception {
                Some(x) => format!("{who} raised {x}: the memory capacity is unbalanced"),
                None => format!("{who} warned that the memory capacity is unbalanced"),
            };
            // The key value: the smallest free memory of the group, as logged.
            let needle = match (&m.min_label, m.min_gib) {
                (Some(label), Some(min)) => format!("{label}={min}"),
                _ => "memory capacity is unbalanced".to_owned(),
            };
            f.evidence_once_marked(e.span, what, needle);
        }
        if let Some((args, span)) = self.args {
            let mut note = String::from("launch arguments");
            match args.tp_size {
                Some(tp) => {
                    let _ = write!(note, ": tp_size={tp}");
                    f.evidence_marked(span, note, format!("tp_size={tp}"));
                }
                None => f.evidence(span, note),
            }
        }
        // Symptom first.
        if let Some((unit, _, _)) = &self.holders.target {
            let failed = incident.units.get(unit).is_some_and(|u| u.failed())
                || incident
                    .facts
                    .unit_statuses
                    .iter()
                    .any(|s| &s.unit == unit && s.active_state.as_deref() == Some("failed"));
            if failed {
                let killed = incident.units.get(unit).is_some_and(|u| {
                    u.events.iter().any(|e| matches!(&e.kind, UnitEventKind::MainProcessExited { status, .. } if status.contains("KILL")))
                });
                f.chain.push(if killed {
                    format!("{unit} failed: its main process died by SIGKILL, which SGLang sends its own process tree when a rank fails")
                } else {
                    format!("{unit} failed at start-up")
                });
            }
        }
        let ranks = rank_list(&self.failing_ranks);
        let numbers = match self.numbers {
            Some((m, _)) => format!(
                " ({}={:.2} GiB < 0.9 x local_gpu_memory={:.2} GiB = {:.2} GiB)",
                m.min_label.as_deref().unwrap_or("min"),
                m.min_gib.unwrap_or_default(),
                m.local_gib.unwrap_or_default(),
                m.threshold_gib
                    .unwrap_or_else(|| m.local_gib.unwrap_or_default() * 0.9),
            ),
            None => String::new(),
        };
        let ranks = if ranks.is_empty() {
            "SGLang".to_owned()
        } else {
            ranks
        };
        f.chain.push(format!(
            "{ranks} failed the TP memory balance check{numbers}"
        ));
        f.condition(
            format!(
                "the balance check failed on {} rank(s)",
                self.failing_ranks.len().max(1)
            ),
            true,
        );
        f.condition(
            "the error carries the measured numbers",
            self.numbers.is_some(),
        );
    }

    fn explain_held(
        &self,
        f: &mut Finding,
        gpus: &[u32],
        holders: &[Holder<'_>],
        reconciled: Option<bool>,
    ) {
        let incident = self.incident;
        let gpu = gpus[0];
        let target = self.target_name();
        let held_mib: u64 = holders.iter().filter_map(|h| h.process.used_mib).sum();
        if let Some(g) = incident.gpu(gpu) {
            self.gpu_evidence(f, g);
        }
        // One idle GPU of the group for contrast.
        if let Some(other) = self
            .group()
            .into_iter()
            .find(|g| g.index != gpu && incident.processes_on(g.index).next().is_none())
        {
            self.gpu_evidence(f, other);
        }
        let silent = self.silent_gpus();
        f.entities.gpus.insert(gpu);
        for h in holders {
            let p = &h.process;
            f.entities.pids.insert(p.pid);
            for span in &p.spans {
                let note = format!("PID {} holds {} on GPU {gpu}", p.pid, mib(p.used_mib));
                match p.used_mib {
                    Some(used) => f.evidence_marked(*span, note, format!("{used} MiB")),
                    None => f.evidence_marked(*span, note, p.pid.to_string()),
                }
            }
            if let Some((unit, basis, span, via)) = h.unit {
                f.entities.units.insert(unit.to_owned());
                f.evidence_marked(
                    span,
                    format!("PID {} belongs to {unit}: {}", p.pid, basis.describe()),
                    p.pid.to_string(),
                );
                if let Some(via) = via {
                    f.evidence(via, format!("systemd started {unit} here"));
                }
            }
            if let Some((cmd, span)) = h.cmdline {
                let _ = cmd;
                f.evidence_marked(
                    span,
                    format!("command line of PID {}", p.pid),
                    p.pid.to_string(),
                );
            }
        }
        let deficit = self.deficit_gib();
        let main = &holders[0];
        let who = phrase(main);
        let more = if holders.len() > 1 {
            format!(" and {} other process(es)", holders.len() - 1)
        } else {
            String::new()
        };
        let stale = holders.iter().find_map(|h| h.stale_reason.as_deref());

        f.chain.push(match deficit {
            Some(d) => format!(
                "GPU {gpu} had {d:.2} GiB less free memory than the other GPUs of the group"
            ),
            None => format!("GPU {gpu} had less free memory than the other GPUs of the group"),
        });
        f.chain.push(format!(
            "{who}{more} holds {} = {:.2} GiB on GPU {gpu}{}",
            mib(Some(held_mib)),
            held_mib as f64 / MIB_PER_GIB,
            stale.map(|s| format!("; {s}")).unwrap_or_default()
        ));

        let reconcile_text = match deficit {
            Some(d) => format!(
                "the deficit local - min = {d:.2} GiB matches the holder's {} = {:.2} GiB (within {RECONCILE_TOLERANCE_GIB} GiB)",
                mib(Some(held_mib)),
                held_mib as f64 / MIB_PER_GIB
            ),
            None => "the deficit can be compared with the holder's memory".to_owned(),
        };
        f.condition(
            format!("a process other than the failing server holds memory on GPU {gpu}"),
            true,
        );
        f.condition(reconcile_text, reconciled == Some(true));
        // Only the rank on the short GPU stays silent; with a partial log
        // more ranks look silent, which is consistent but proves nothing.
        let only_silent = silent.len() == 1 && silent.contains(&gpu);
        // A rank that raised had more free memory than the minimum, so its
        // GPU is not the short one. When the rank-N-on-GPU-N convention puts
        // a raising rank on the GPU the numbers name, the numbers win.
        let raised_here: Vec<String> = self
            .failing_ranks
            .iter()
            .filter(|r| self.rank_gpus.get(r) == Some(&gpu))
            .map(|r| format!("TP{r}"))
            .collect();
        if reconciled == Some(true) && !raised_here.is_empty() {
            f.condition(
                format!("the numbers identify GPU {gpu} as the short GPU: the holder's memory matches the deficit"),
                true,
            );
            f.chain.push(format!(
                "the numbers win over the rank label: {} raised, so its own GPU had more free memory than the minimum; by the convention rank N on GPU N it would run on GPU {gpu}, but the deficit matches the holder on GPU {gpu}, so the ranks are not on GPUs in index order (CUDA_VISIBLE_DEVICES or base_gpu_id) or the label is another rank's",
                raised_here.join(", ")
            ));
        } else if only_silent {
            f.condition(
                format!("the only rank that did not raise runs on GPU {gpu}"),
                true,
            );
        } else if !silent.is_empty() {
            f.condition(
                format!(
                    "the only rank that did not raise runs on GPU {gpu} (ranks on {} GPUs did not raise: the log may be partial)",
                    silent.len()
                ),
                false,
            );
        }
        f.condition(
            "the holder's unit is proven (CGroup tree, Main PID, journal field or systemd message), not inferred",
            holders
                .iter()
                .all(|h| h.unit.is_some_and(|u| u.1 != OwnerBasis::InferredFromJournalOrder)),
        );

        let held_by = match stale {
            Some(_) => format!(
                "a leftover serving process, {who}{more} with {}",
                mib(Some(held_mib))
            ),
            None => format!("{who}{more} with {}", mib(Some(held_mib))),
        };
        f.title = format!("GPU {gpu} is held by {held_by}");
        f.headline = format!(
            "GPU {gpu} is held by {held_by}, so {target} failed SGLang's tensor-parallel memory balance check at start-up."
        );
        f.explanation = match deficit {
            Some(d) => format!(
                "SGLang measured {:.2} GiB free on the fullest GPU against {:.2} GiB on the others: a deficit of {d:.2} GiB. \
                 GPU {gpu} is the short one{}, and {who} holds {} = {:.2} GiB there{}.",
                d_min(self.numbers),
                d_local(self.numbers),
                if only_silent {
                    " (its rank is the one that did not raise)"
                } else {
                    ""
                },
                mib(Some(held_mib)),
                held_mib as f64 / MIB_PER_GIB,
                match reconciled {
                    Some(true) => ", which accounts for the deficit",
                    Some(false) =>
                        ", which does not fully account for the deficit: look for more holders",
                    None => "",
                }
            ),
            None => format!(
                "{who} holds {} on GPU {gpu}; this SGLang release printed no numbers to reconcile.",
                mib(Some(held_mib))
            ),
        };
        if stale.is_some() {
            f.explanation
                .push_str(" It is a leftover serving process, not a workload of its own.");
        }

        let baseline = self
            .group()
            .iter()
            .filter(|g| g.index != gpu)
            .filter_map(|g| g.memory_used_mib)
            .max()
            .unwrap_or(0);
        self.holders.actions(f, gpu, holders, baseline);
    }

    fn explain_heterogeneous(&self, f: &mut Finding, small: &[&Gpu], large: &[&Gpu]) {
        let nominal = self.incident.gpus.is_empty();
        for g in small.iter().chain(large) {
            f.entities.gpus.insert(g.index);
            if nominal {
                // Only the model names are known: cite the listing once per
                // model with its nominal size.
                if let Some(span) = g.spans.first() {
                    f.evidence_once(
                        *span,
                        format!(
                            "sglang.check_env lists the GPUs' models: {}",
                            models(small.iter().chain(large).copied())
                        ),
                    );
                }
            } else {
                self.gpu_evidence(f, g);
            }
        }
        let describe = |gs: &[&Gpu]| {
            gs.iter()
                .map(|g| {
                    format!(
                        "GPU {} ({}, {})",
                        g.index,
                        g.name.as_deref().unwrap_or("unknown model"),
                        mib(g.memory_total_mib)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let small_total = small
            .iter()
            .filter_map(|g| g.memory_total_mib)
            .min()
            .unwrap_or(0);
        let large_total = large
            .iter()
            .filter_map(|g| g.memory_total_mib)
            .max()
            .unwrap_or(0);
        let gap = large_total.saturating_sub(small_total) as f64 / MIB_PER_GIB;
        f.chain.push(format!(
            "the group mixes GPUs of different capacity: {} vs {}",
            describe(small),
            describe(large)
        ));
        let target = self.target_name();
        let matches = self
            .deficit_gib()
            .map(|d| (d - gap).abs() <= RECONCILE_TOLERANCE_GIB + 0.02 * gap);
        f.condition(
            if nominal {
                "the GPUs of the group are different models (sglang.check_env), of different nominal capacity"
            } else {
                "the GPUs of the group differ in memory.total"
            },
            true,
        );
        if nominal {
            f.condition("nvidia-smi confirms the capacities (missing: nvidia-smi --query-gpu=index,name,memory.total --format=csv)", false);
        }
        f.condition(
            match self.deficit_gib() {
                Some(d) => format!("the deficit {d:.2} GiB matches the capacity gap {gap:.2} GiB"),
                None => "the deficit can be compared with the capacity gap".to_owned(),
            },
            matches == Some(true),
        );
        f.condition(
            "no other process holds memory on the group's GPUs",
            self.group()
                .iter()
                .all(|g| self.holders.on(g.index).is_empty()),
        );
        let small_ranks: Vec<u32> = self
            .rank_gpus
            .iter()
            .filter(|(_, g)| small.iter().any(|s| s.index == **g))
            .map(|(r, _)| *r)
            .collect();
        if !small_ranks.is_empty() && !self.failing_ranks.is_empty() {
            f.condition(
                "only the ranks on the larger GPUs raised",
                small_ranks.iter().all(|r| !self.failing_ranks.contains(r)),
            );
        }
        f.title = "the tensor-parallel group mixes GPUs of different capacity".to_owned();
        f.headline = format!(
            "{target} failed SGLang's memory balance check because its tensor-parallel group mixes GPUs of different capacity ({:.0} GiB vs {:.0} GiB); no process is to blame.",
            small_total as f64 / MIB_PER_GIB,
            large_total as f64 / MIB_PER_GIB
        );
        f.explanation = format!(
            "Every rank sizes its KV cache by the smallest GPU, so SGLang refuses a group whose free memory differs by more than 10 %. \
             The capacity gap between the models is {gap:.2} GiB. Killing processes will not help: the error repeats on every restart."
        );
        let by_model = models(small.iter().chain(large).copied());
        f.actions.push(Action::advice(
            format!(
                "run each tensor-parallel group on GPUs of one model ({by_model}), e.g. restrict the server with CUDA_VISIBLE_DEVICES and set --tp to the number of identical GPUs"
            ),
            Some("nvidia-smi --query-gpu=index,name,memory.total --format=csv"),
        ));
    }

    fn explain_draft_worker(
        &self,
        f: &mut Finding,
        frame: Span,
        algorithm: Option<&(String, Span)>,
    ) {
        let target = self.target_name();
        f.evidence(
            frame,
            "the check ran inside SGLang's speculative-decoding draft worker",
        );
        if let Some((name, span)) = algorithm {
            f.evidence(
                *span,
                format!("speculative decoding is on: speculative_algorithm='{name}'"),
            );
        }
        f.chain.push("the check ran in the draft worker, after the target model had already taken memory on the GPUs".to_owned());
        f.condition(
            "the failing traceback runs through the speculative-decoding draft worker",
            true,
        );
        f.condition(
            "the launch arguments enable speculative decoding",
            algorithm.is_some(),
        );
        f.title =
            "the balance check misfired in SGLang's speculative-decoding draft worker".to_owned();
        f.headline = format!(
            "{target} failed SGLang's memory balance check inside its own speculative-decoding draft worker: a known false positive of SGLang releases before 0.4.10, not another process."
        );
        f.explanation = "The draft worker measures free memory after the target model's weights and KV cache are already on the GPUs, so ranks differ by design. SGLang 0.4.10 and later skip the check in draft workers.".to_owned();
        f.actions.push(Action::advice(
            "upgrade SGLang to 0.4.10 or later, where draft workers skip the balance check",
            Some("python3 -m pip show sglang"),
        ));
        f.actions.push(Action::advice(
            "until then, run without speculative decoding to confirm it is the trigger",
            None,
        ));
    }

    fn explain_colocated(&self, f: &mut Finding, actor: Span, name: &str) {
        let target = self.target_name();
        f.evidence(
            actor,
            format!("SGLang runs inside the trainer's Ray actor {name}, which shares its GPUs"),
        );
        f.chain.push(format!(
            "the rollout engine shares each GPU with the trainer's own {name} actor, which placed unequal memory on the ranks"
        ));
        f.condition(
            format!("the failing engine runs inside an RL trainer's Ray actor ({name})"),
            true,
        );
        f.title = format!(
            "the balance check fired inside the trainer's {name} actor: the trainer's own memory, not another process"
        );
        f.headline = format!(
            "{target} failed SGLang's memory balance check inside an RL trainer's Ray actor ({name}): the GPUs are unbalanced by the trainer's own co-located state, not by a foreign process."
        );
        f.explanation = "In a co-located RL setup (veRL) the rollout engine starts on GPUs that already hold the training actors' weights and optimizer state, and those differ per rank; the check, meant to catch foreign processes, fires on them. Disable the check for co-located engines, or offload/balance the actor's memory before building the rollout.".to_owned();
        f.actions.push(Action::advice(
            "disable the imbalance check for the co-located rollout engine: set SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=True in the trainer's environment",
            None,
        ));
        f.actions.push(Action::advice(
            "or offload the actor's parameters and optimizer state before the rollout engine starts, so every rank starts equal",
            None,
        ));
    }

    fn explain_invisible(&self, f: &mut Finding, gpus: &[&Gpu]) {
        let list = gpus
            .iter()
            .map(|g| format!("GPU {}", g.index))
            .collect::<Vec<_>>()
            .join(", ");
        for g in gpus {
            self.gpu_evidence(f, g);
            f.entities.gpus.insert(g.index);
        }
        for l in &self.incident.facts.process_listings {
            let note = match l.kind {
                ProcessListingKind::EmptyBlock => {
                    "the process list is empty although memory is in use: NVML could not resolve the PIDs"
                }
                ProcessListingKind::NoneFound => "no process is listed",
                ProcessListingKind::Rows => continue,
            };
            f.evidence(l.span, note);
        }
        let target = self.target_name();
        let used: u64 = gpus.iter().filter_map(|g| g.memory_used_mib).sum();
        f.chain.push(format!(
            "{list} has {} in use that no listed process accounts for",
            mib(Some(used))
        ));
        f.chain.push("the holder is invisible from where nvidia-smi ran (typically another container or the host)".to_owned());
        f.condition(format!("memory is in use on {list}"), true);
        if let Some(d) = self.deficit_gib() {
            f.condition(
                format!(
                    "the unexplained {:.2} GiB matches the deficit {d:.2} GiB",
                    used as f64 / MIB_PER_GIB
                ),
                (used as f64 / MIB_PER_GIB - d).abs() <= RECONCILE_TOLERANCE_GIB,
            );
        }
        f.condition(
            "the process list shows no holder",
            self.incident.process_listing() != Some(ProcessListingKind::Rows)
                || gpus
                    .iter()
                    .all(|g| self.incident.processes_on(g.index).next().is_none()),
        );
        f.title = format!("{list} is held by a process nvidia-smi cannot show");
        f.headline = format!(
            "{list} has {} in use by a process invisible from here (another container or the host), so {target} failed SGLang's memory balance check.",
            mib(Some(used))
        );
        f.explanation = "Inside a container NVML counts the memory of every process on the GPU but lists only processes of its own PID namespace. \
                         The holder has to be found from the host."
            .to_owned();
        f.actions.push(Action::advice(
            format!("on the host (outside any container), list the processes on {list} with their GPU UUID"),
            Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
        ));
        f.actions.push(Action::advice(
            "map the holder's PID to its container or unit",
            Some("cat /proc/PID/cgroup"),
        ));
        f.actions.push(Action::advice(
            format!("once the holder is stopped, restart {target}"),
            None,
        ));
    }

    fn explain_undetermined(&self, f: &mut Finding, reason: &str) {
        let target = self.target_name();
        f.chain
            .push(format!("the short GPU could not be identified: {reason}"));
        f.condition(
            "an nvidia-smi snapshot of the group's GPUs",
            !self.incident.gpus.is_empty(),
        );
        f.title =
            "SGLang's memory balance check failed; the holder is not in the inputs".to_owned();
        f.headline = format!(
            "{target} failed SGLang's memory balance check: one GPU had less free memory, but the inputs do not show what held it."
        );
        f.explanation = format!(
            "{reason}. Capture the GPU state while the failure happens to name the holder."
        );
        f.actions.push(Action::advice(
            "capture the GPUs and their processes right after the failure",
            Some("nvidia-smi; nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
        ));
    }

    fn gpu_evidence(&self, f: &mut Finding, g: &Gpu) {
        if let Some(span) = g.spans.first() {
            let note = format!(
                "GPU {}: {} of {} used{}",
                g.index,
                mib(g.memory_used_mib),
                mib(g.memory_total_mib),
                g.name
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            );
            match g.memory_used_mib {
                Some(used) => f.evidence_marked(*span, note, format!("{used} MiB")),
                None => f.evidence(*span, note),
            }
        }
    }
}

/// Maps ranks to GPU indices: `base_gpu_id + tp_rank * gpu_id_step`
/// (docs/formats/servers.md), over `tp_size` ranks when the launch arguments are
/// known, otherwise over the GPUs of the snapshot.
fn group_gpus(
    known_gpus: usize,
    args: Option<&ServerArgs>,
    failing: &BTreeSet<u32>,
) -> BTreeMap<u32, u32> {
    let base = args.and_then(|a| a.base_gpu_id).unwrap_or(0);
    let step = args.and_then(|a| a.gpu_id_step).unwrap_or(1);
    let tp = args
        .and_then(|a| a.tp_size)
        .or_else(|| (known_gpus > 0).then_some(known_gpus as u32))
        .or_else(|| failing.iter().max().map(|m| m + 1))
        .unwrap_or(0);
    (0..tp).map(|r| (r, base + r * step)).collect()
}

/// GPUs named by `sglang.check_env` (`GPU 0,1,3,4: NVIDIA GeForce RTX
/// 3090`), when nvidia-smi gave none: index, model and the model's nominal
/// capacity, cited at the listing.
fn env_gpus(incident: &Incident) -> Vec<Gpu> {
    if !incident.gpus.is_empty() {
        return Vec::new();
    }
    let mut out: BTreeMap<u32, Gpu> = BTreeMap::new();
    for r in &incident.facts.env_reports {
        for g in &r.gpus {
            out.entry(g.index).or_insert_with(|| Gpu {
                index: g.index,
                name: Some(g.name.clone()),
                memory_total_mib: nominal_mib(&g.name),
                spans: vec![r.span],
                ..Gpu::default()
            });
        }
    }
    out.into_values().collect()
}

/// A GPU model's memory (MiB) from its name: the size it states (`H100
/// 80GB HBM3`, `A100-SXM4-40GB`), else the model's only size. `None` for
/// models sold with several sizes or unknown here.
fn nominal_mib(name: &str) -> Option<u64> {
    static STATED: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?i)\b([0-9]{1,3})\s*GB\b").expect("stated size regex"));
    if let Some(c) = STATED.captures(name) {
        return c[1].parse::<u64>().ok().map(|gb| gb * 1024);
    }
    // Most specific first: `RTX 3080 Ti` before `RTX 3080`, `L40S` before `L4`.
    const MODELS: &[(&str, u64)] = &[
        ("RTX 5090", 32),
        ("RTX 5080", 16),
        ("RTX 4090", 24),
        ("RTX 4080", 16),
        ("RTX 3090", 24),
        ("RTX 3080 Ti", 12),
        ("RTX A6000", 48),
        ("RTX 6000 Ada", 48),
        ("H200", 141),
        ("H100", 80),
        ("H800", 80),
        ("L40S", 48),
        ("L40", 48),
        ("L4", 24),
        ("A10G", 24),
        ("A40", 48),
        ("A30", 24),
        ("T4", 16),
    ];
    let words: Vec<&str> = name.split_whitespace().collect();
    MODELS
        .iter()
        .find(|(model, _)| {
            let parts: Vec<&str> = model.split(' ').collect();
            words.windows(parts.len()).any(|w| w == parts.as_slice())
        })
        .map(|(_, gb)| gb * 1024)
}

fn models<'g>(gpus: impl Iterator<Item = &'g Gpu>) -> String {
    let mut by_name: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for g in gpus {
        by_name
            .entry(g.name.as_deref().unwrap_or("unknown"))
            .or_default()
            .push(g.index);
    }
    by_name
        .iter()
        .map(|(name, idx)| {
            format!(
                "{name}: GPU {}",
                idx.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn rank_list(ranks: &BTreeSet<u32>) -> String {
    let v: Vec<u32> = ranks.iter().copied().collect();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("TP{}-TP{}", v[i], v[j])
        } else if j == i + 1 {
            format!("TP{}, TP{}", v[i], v[j])
        } else {
            format!("TP{}", v[i])
        });
        i = j + 1;
    }
    parts.join(", ")
}

fn d_min(n: Option<(&MemoryImbalance, Span)>) -> f64 {
    n.and_then(|(m, _)| m.min_gib).unwrap_or_default()
}

fn d_local(n: Option<(&MemoryImbalance, Span)>) -> f64 {
    n.and_then(|(m, _)| m.local_gib).unwrap_or_default()
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_lists_are_compact() {
        let r = |v: &[u32]| rank_list(&v.iter().copied().collect());
        assert_eq!(r(&[1, 2, 3, 4, 5, 6, 7]), "TP1-TP7");
        assert_eq!(r(&[0, 1, 3]), "TP0, TP1, TP3");
        assert_eq!(r(&[1]), "TP1");
    }

    #[test]
    fn nominal_capacities_come_from_the_name() {
        assert_eq!(nominal_mib("NVIDIA GeForce RTX 3090"), Some(24 * 1024));
        assert_eq!(nominal_mib("NVIDIA GeForce RTX 5090"), Some(32 * 1024));
        assert_eq!(nominal_mib("NVIDIA GeForce RTX 3090 Ti"), Some(24 * 1024));
        assert_eq!(nominal_mib("NVIDIA H100 80GB HBM3"), Some(80 * 1024));
        assert_eq!(nominal_mib("NVIDIA A100-SXM4-40GB"), Some(40 * 1024));
        assert_eq!(nominal_mib("NVIDIA L40S"), Some(48 * 1024));
        assert_eq!(nominal_mib("NVIDIA L4"), Some(24 * 1024));
        // Sold in several sizes, and not stated: unknown.
        assert_eq!(nominal_mib("NVIDIA A100"), None);
        assert_eq!(nominal_mib("Tesla V100-PCIE"), None);
    }

    #[test]
    fn mib_has_thousands_separators() {
        assert_eq!(mib(Some(55286)), "55,286 MiB");
        assert_eq!(mib(Some(512)), "512 MiB");
        assert_eq!(mib(Some(143771)), "143,771 MiB");
    }
}

#[cfg(test)]
mod mixed_models {
    use crate::rules::Category;
    use crate::source::{Source, SourceMap};

    const ERROR: &str = "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=23.16046142578125, local_gpu_memory=30.41015625, local_gpu_memory * 0.9=27.369140625";
    const CHECK_ENV: &str = "Python: 3.10.12 (main, Feb  4 2025, 14:57:36) [GCC 11.4.0]\nCUDA available: True\nGPU 0,1,3,4: NVIDIA GeForce RTX 3090\nGPU 2: NVIDIA GeForce RTX 5090\nsglang: 0.4.6.post2\n";

    fn root(text: &str) -> (Category, usize) {
        let mut sources = SourceMap::default();
        sources.add(Source::new("paste", text.as_bytes()));
        let a = crate::analyze(sources);
        let report = a.report();
        let f = report.root_cause().expect("a root cause");
        let steps = f
            .actions
            .iter()
            .filter(|x| !matches!(x.kind, crate::rules::ActionKind::Advice { .. }))
            .count();
        (f.category, steps)
    }

    #[test]
    fn check_env_model_names_explain_the_imbalance_with_advice_only() {
        let text = format!(
            "[2025-04-13 10:02:11 TP0] Scheduler hit an exception: Traceback (most recent call last):\n  File \"/s/python/sglang/srt/model_executor/model_runner.py\", line 230, in init_torch_distributed\n    raise ValueError(\n{ERROR}\n\n{CHECK_ENV}"
        );
        assert_eq!(root(&text), (Category::HeterogeneousGpuMemory, 0));
    }

    #[test]
    #[ignore = "waits on ingest-lines: the error line pasted alone above check_env must reach the server parser"]
    fn the_bare_error_line_answers_the_same() {
        assert_eq!(
            root(&format!("{ERROR}\n\n{CHECK_ENV}")),
            (Category::HeterogeneousGpuMemory, 0)
        );
    }
}
