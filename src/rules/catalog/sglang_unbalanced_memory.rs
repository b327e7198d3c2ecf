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
use crate::rules::support::server::server_unit;
use crate::rules::support::{mib, rank_ranges};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

mod capacity;
mod evidence;
mod held;

use crate::source::Span;
use capacity::nominal_mib;

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
                .filter_map(|h| h.unit.map(|u| u.basis.confidence()))
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
mod tests;
