//! `torch-cuda-oom`: PyTorch's caching allocator ran out of GPU memory;
//! separates another job's processes from the server's own (the per-process
//! list against the server's PIDs and units) and says which filled the GPU.

use std::collections::BTreeSet;

use crate::correlate::{GpuProcess, Incident};
use crate::model::{CudaOom, Framework, OomSource, ServerEvent, ServerEventKind};
use crate::rules::support::confidence;
use crate::rules::support::holders::{Holder, Holders};
use crate::rules::support::server::{
    fraction, gib, in_graph_capture, launch_args, run_pids, target,
};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

mod allowed;
mod explain;
mod fraction;
mod weights;

pub static RULE: TorchCudaOom = TorchCudaOom;

pub struct TorchCudaOom;

/// Other processes' memory counts as "a large share" from this much on, or
/// from [`FOREIGN_MIN_OF_CARD`] of a smaller card: a quarter of a 4 GiB
/// laptop card is another process's as surely as 2 GiB of an 80 GiB one.
const FOREIGN_MIN_GIB: f64 = 2.0;
const FOREIGN_MIN_OF_CARD: f64 = 0.25;
const FOREIGN_SHARE: f64 = 0.2;
const GIB_BYTES: u64 = 1 << 30;
/// What a process holds outside PyTorch's allocator: its CUDA context,
/// cuBLAS/NCCL workspaces. A listed process whose total exceeds PyTorch's
/// reservation by at most this is the writer itself.
const CONTEXT_SLACK: u64 = 2 * GIB_BYTES;
/// The writer's own CUDA context, counted in the old message's
/// `total - reserved - free`.
const OWN_CONTEXT: u64 = GIB_BYTES;
/// A process this small is a bare CUDA context (plus a few tensors): what a
/// rank leaves on a GPU it never meant to use.
const CONTEXT_MAX: u64 = 3 * GIB_BYTES;

static META: RuleMeta = RuleMeta {
    id: "torch-cuda-oom",
    category: Category::CudaOom,
    severity: Severity::Critical,
    summary: "PyTorch ran out of GPU memory: another process's share, or the server's own",
    anchors: &[
        "CUDA out of memory",
        "Out of memory. Tried to allocate",
        "reserved in total by PyTorch",
    ],
    doc: r#"
## What it means
PyTorch's caching allocator could not get memory from CUDA even after freeing
its cache: `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate
2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free.
Process 12345 has 40.12 GiB memory in use. …` (PyTorch ≤ 2.0 prints `(GPU
0; 79.15 GiB total capacity; … already allocated; … free; … reserved in total
by PyTorch)` and no process list).

## Why it happens
1. Other processes hold the memory: the `Process N has … memory in use` list
   names PIDs that are not the server's own ranks. The old message names no
   process, but its numbers tell: `total - reserved in total by PyTorch -
   free` is held outside this process (less its own CUDA context); the
   oldest form's `… free; 9.10 MiB cached)` (PyTorch 1.0) counts the unused
   cache on top of `already allocated`. A share counts as large from 2 GiB,
   or from a quarter of a smaller card (a 4 GiB laptop GPU); at a vLLM
   engine's start-up (`Engine core initialization failed`), from any
   amount that covers the shortfall (`Tried to allocate` less the free
   memory): the engine sizes itself as a share of the whole card and
   counts on the rest being free. A message pasted split at its sentences
   (`GPU 0 has a total capacity …`, `Process N has … memory in use` on
   lines of their own under the exception) is read as one.
   Inside a container PyTorch lists its own process under its host PID: the
   entry whose memory matches what PyTorch reserved (plus a CUDA context) is
   the writer, not another process.
   The other message, `Allocation on device 0 would exceed allowed memory`,
   prints `Currently allocated`, `Requested`, `Device limit` and `Free
   (according to CUDA)`: with no memory fraction set, allocated plus
   requested below the limit and less free than requested, `limit -
   allocated - free` is held outside this process's tensors, and past its
   own context (about 1 GiB), enough for the request, another process's.
2. Sibling ranks of the same job: several processes with consecutive PIDs and
   the same small amount (a CUDA context, about 0.3-1.5 GiB each) on GPU 0,
   because the ranks touched CUDA before selecting their own device. They are
   the job itself: killing them kills the job.
3. The server itself needs more: a static fraction (SGLang
   `--mem-fraction-static`, vLLM `--gpu-memory-utilization`) that reserves
   too much up front, too large batches or contexts.
4. Fragmentation: much memory is reserved by PyTorch but unallocated.
5. One huge request (a very long prompt), or prompt logprobs over a large
   vocabulary.

## How to confirm
Compare the listed PIDs with the server's own (its log lines' PIDs, its
unit's processes, `sglang::`/`VLLM::` titles) and with nvidia-smi; reserved
but unallocated memory against the request size.

## How to fix
1.: stop the other process's unit after confirming whose it is, or move the
server to free GPUs; an unnamed holder is found from the host with
`nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv`.
Static fractions (`--gpu-memory-utilization`, `--mem-fraction-static`) are
shares of the *total* memory: lower them below what is really free.
2.: select each rank's device before any CUDA call
(`torch.cuda.set_device(local_rank)`, or `CUDA_VISIBLE_DEVICES` per rank);
never kill the siblings. 3.: lower the static fraction, the batch size or the
context length. 4.: `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.
5.: limit request sizes and `prompt_logprobs`.

## Safety
Stopping a unit and signalling a process need confirmation and are re-checked
(start time, command line, unit) before they run; flag changes are only
shown.
"#,
};

impl Rule for TorchCudaOom {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let ooms: Vec<(&ServerEvent, &CudaOom)> = incident
            .facts
            .server_events
            .iter()
            .filter_map(|e| match &e.kind {
                ServerEventKind::CudaOom(o) if o.source == OomSource::Allocator => Some((e, o)),
                _ => None,
            })
            .collect();
        // One failure per GPU and request: the copy with the most detail.
        let mut seen: Vec<(Option<u32>, Option<u64>)> = Vec::new();
        let mut best: Vec<(&ServerEvent, &CudaOom, usize)> = Vec::new();
        for (e, o) in &ooms {
            let key = (o.gpu, o.tried_bytes);
            match seen.iter().position(|k| *k == key) {
                Some(i) => {
                    best[i].2 += 1;
                    if o.processes.len() > best[i].1.processes.len() {
                        best[i].0 = e;
                        best[i].1 = o;
                    }
                }
                None => {
                    seen.push(key);
                    best.push((e, o, 1));
                }
            }
        }
        for (event, oom, count) in best {
            let text = incident
                .facts
                .messages
                .iter()
                .find(|m| m.span == event.span)
                .map_or("", |m| m.text.as_str());
            let analysis = Analysis::new(incident, event, oom);
            // SGLang's graph-capture rule reports an OOM while capturing,
            // unless another process is to blame.
            if in_graph_capture(incident, event.span, text) && analysis.foreign_large().is_none() {
                continue;
            }
            // So does vLLM's graph-capture rule.
            if analysis.foreign_large().is_none()
                && crate::rules::support::vllm::graph_capture(incident, event).is_some()
            {
                continue;
            }
            let mut f = analysis.finding();
            f.occurrences = count as u32;
            out.push(f);
        }
        allowed::findings(incident, out);
    }
}

struct Analysis<'a> {
    incident: &'a Incident,
    event: &'a ServerEvent,
    oom: &'a CudaOom,
    holders: Holders<'a>,
    /// The listed PIDs that are not the server's, with their bytes.
    foreign: Vec<(u32, u64)>,
    /// The listed PID that is the writer itself by its numbers (no `this
    /// process` line: a container's host PID), with its bytes.
    writer: Option<(u32, u64)>,
}

/// Several listed processes of one job on the GPU: consecutive PIDs, the
/// same small amount each.
struct Siblings {
    pids: Vec<u32>,
    each: u64,
    sum: u64,
}

/// A size as PyTorch's allocator prints its own (`format_size` in
/// c10/cuda/CUDACachingAllocator.cpp: two decimals, MiB up to a GiB, GiB
/// above), so that a figure the error printed reads the same in the report
/// (`14.75 MiB`, `20.00 MiB`, `27.93 GiB`) and a reader searching for it
/// finds it.
fn size(bytes: u64) -> String {
    if bytes <= GIB_BYTES {
        format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
    } else {
        format!("{:.2} GiB", gib(bytes))
    }
}

/// The listed entry that must be the writer by the accounting: the list
/// covers all the memory in use (`total - free`), so the writer is in it,
/// and only one entry is large enough to hold what PyTorch allocated. A
/// container's host PID, with no `this process` line, reconciled this way.
pub(super) fn listed_writer(o: &CudaOom) -> Option<(u32, u64)> {
    if o.this_process_bytes.is_some() || o.processes.is_empty() {
        return None;
    }
    let allocated = o.allocated_bytes.or(o.reserved_bytes)?;
    if allocated < GIB_BYTES {
        return None;
    }
    let used = o.total_bytes?.checked_sub(o.free_bytes?)?;
    let listed: u64 = o.processes.iter().map(|p| p.bytes).sum();
    let slack = (used / 100).max(256 << 20);
    if listed.abs_diff(used) > slack {
        return None;
    }
    let mut big = o.processes.iter().filter(|p| p.bytes >= allocated);
    let only = big.next()?;
    big.next().is_none().then_some((only.pid, only.bytes))
}

/// Where the memory this process holds comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Own {
    /// `this process has X memory in use`, believed.
    Figure,
    /// What PyTorch reserved, when no per-process figure is printed.
    Reserved,
    /// What PyTorch reserved, because the printed figure is smaller than it.
    FigureTooSmall(u64),
}

/// What this process holds on the GPU. `this process has X memory in use`
/// is the driver's per-process figure and includes PyTorch's own memory; when
/// it is smaller than what PyTorch allocated and reserved in this very
/// process, the driver could not see the process (NVML in a container's PID
/// namespace prints 0 bytes) and PyTorch's own numbers are believed instead.
fn own_bytes(o: &CudaOom) -> Option<(u64, Own)> {
    let pytorch = pytorch_reserved(o);
    match (o.this_process_bytes, pytorch) {
        (Some(this), Some(p)) if this < p => Some((p, Own::FigureTooSmall(this))),
        (Some(this), _) => Some((this, Own::Figure)),
        (None, p) => Some((p?, Own::Reserved)),
    }
}

/// The least memory, in GiB, that counts as another process's large share
/// of a card of `total` bytes.
fn foreign_floor(total: Option<u64>) -> f64 {
    total.map_or(FOREIGN_MIN_GIB, |t| {
        FOREIGN_MIN_GIB.min(gib(t) * FOREIGN_MIN_OF_CARD)
    })
}

/// What PyTorch itself holds: `reserved in total` (old message), or
/// allocated plus reserved-but-unallocated (2.1+).
fn pytorch_reserved(o: &CudaOom) -> Option<u64> {
    o.reserved_bytes
        .or_else(|| Some(o.allocated_bytes? + o.reserved_unallocated_bytes.unwrap_or(0)))
}

impl<'a> Analysis<'a> {
    fn new(incident: &'a Incident, event: &'a ServerEvent, oom: &'a CudaOom) -> Self {
        let framework = event.framework;
        let tgt = target(incident, Some(event), framework);
        let mut own: BTreeSet<u32> = run_pids(incident, event);
        // A listed PID with this process's own total is the writer itself
        // (inside a container its host PID differs from the log's).
        if let Some(this) = oom.this_process_bytes {
            for p in &oom.processes {
                if (p.bytes as f64 - this as f64).abs() <= this as f64 * 0.01 {
                    own.insert(p.pid);
                }
            }
        }
        // Without that line, the numbers say which entry is the writer: the
        // one holding what PyTorch reserved plus at most a CUDA context.
        let mut writer = None;
        if oom.this_process_bytes.is_none() {
            if let Some(reserved) = pytorch_reserved(oom).filter(|r| *r >= GIB_BYTES) {
                writer = oom
                    .processes
                    .iter()
                    .filter(|p| {
                        p.bytes as f64 >= reserved as f64 * 0.99
                            && p.bytes <= reserved + CONTEXT_SLACK
                    })
                    .min_by_key(|p| (p.bytes.abs_diff(reserved), p.pid))
                    .map(|p| (p.pid, p.bytes));
                if let Some((pid, _)) = writer {
                    own.insert(pid);
                }
            }
            if writer.is_none() {
                writer = listed_writer(oom);
                if let Some((pid, _)) = writer {
                    own.insert(pid);
                }
            }
        }
        let holders = Holders {
            incident,
            own_pids: own,
            target: tgt,
            framework,
        };
        let foreign = oom
            .processes
            .iter()
            .filter(|p| !holders.own_pids.contains(&p.pid))
            .filter(|p| !is_own_rank(&holders, p.pid, p.bytes))
            .map(|p| (p.pid, p.bytes))
            .collect();
        Analysis {
            incident,
            event,
            oom,
            holders,
            foreign,
            writer,
        }
    }

    /// The largest set of foreign entries that look like ranks of one job:
    /// at least two, the same small size (within 1 %), consecutive PIDs.
    fn siblings(&self) -> Option<Siblings> {
        let mut small: Vec<(u32, u64)> = self
            .foreign
            .iter()
            .copied()
            .filter(|(_, b)| *b <= CONTEXT_MAX)
            // A PID the inputs place in a unit of its own, or as an orphan,
            // is not a rank of this job.
            .filter(|(pid, _)| {
                self.incident.owner(*pid).is_none()
                    && !self
                        .incident
                        .facts
                        .ps
                        .iter()
                        .any(|r| r.pid == *pid && r.ppid == Some(1))
            })
            .collect();
        small.sort_by_key(|(pid, b)| (*b, *pid));
        let mut best: Option<Vec<(u32, u64)>> = None;
        let mut i = 0;
        while i < small.len() {
            let base = small[i].1;
            let mut j = i;
            while j + 1 < small.len() && small[j + 1].1.abs_diff(base) <= base / 100 {
                j += 1;
            }
            let group = small[i..=j].to_vec();
            if group.len() > best.as_ref().map_or(1, Vec::len) {
                best = Some(group);
            }
            i = j + 1;
        }
        let group = best?;
        let mut pids: Vec<u32> = group.iter().map(|(p, _)| *p).collect();
        pids.sort_unstable();
        let n = pids.len() as u32;
        let spread = pids[pids.len() - 1] - pids[0];
        // Ranks are started together: their PIDs are (nearly) consecutive.
        if spread > 2 * (n - 1) + 2 {
            return None;
        }
        let sum: u64 = group.iter().map(|(_, b)| b).sum();
        Some(Siblings {
            pids,
            each: group[0].1,
            sum,
        })
    }

    /// Old message (no process list): `total - free - what this process
    /// holds`, less its own CUDA context, when that is a large share.
    fn implied_others(&self) -> Option<u64> {
        let o = self.oom;
        if !o.processes.is_empty() || o.allowed_bytes.is_some() {
            return None;
        }
        let total = o.total_bytes?;
        let free = o.free_bytes?;
        let (mine, how) = own_bytes(o)?;
        let others = total.saturating_sub(free).saturating_sub(mine);
        // `this process has X memory in use` counts its CUDA context
        // already ("Including non-PyTorch memory"); PyTorch's reservation
        // does not.
        let context = if how == Own::Figure { 0 } else { OWN_CONTEXT };
        let beyond_context = others.saturating_sub(context);
        let fits_without = o.tried_bytes.is_some_and(|t| free + beyond_context >= t);
        let share = beyond_context as f64 >= total as f64 * FOREIGN_SHARE;
        (gib(beyond_context) >= foreign_floor(Some(total)) && (fits_without || share))
            .then_some(others)
    }

    /// The foreign PIDs when together they hold a large share: enough that
    /// the allocation would have fit without them, or a fifth of the GPU.
    fn foreign_large(&self) -> Option<u64> {
        let sum: u64 = self.foreign.iter().map(|(_, b)| b).sum();
        let free = self.oom.free_bytes.unwrap_or(0);
        let fits_without = self.oom.tried_bytes.is_some_and(|t| free + sum >= t);
        let share = self
            .oom
            .total_bytes
            .is_some_and(|t| sum as f64 >= t as f64 * FOREIGN_SHARE);
        let large = gib(sum) >= foreign_floor(self.oom.total_bytes) && (fits_without || share);
        (large || (sum > 0 && fits_without && self.budgeted())).then_some(sum)
    }

    /// The OOM ended a vLLM engine's start-up (`Engine core initialization
    /// failed`, a worker that failed to start): at start-up the engine
    /// sizes its memory as a share of the whole card
    /// (`--gpu-memory-utilization`) and counts on the rest being free, so
    /// another process whose memory covers the shortfall, however small (a
    /// trainer's CUDA context beside a colocated engine), is what broke
    /// its budget. A request's OOM while serving is the request's.
    fn budgeted(&self) -> bool {
        use crate::model::VllmFailure as V;
        self.incident.facts.server_events.iter().any(|e| {
            e.span.source == self.event.span.source
                && matches!(
                    &e.kind,
                    ServerEventKind::VllmFailure(
                        V::EngineInitFailed { .. }
                            | V::EngineCoreFailedToStart
                            | V::WorkerProcFailedToStart
                            | V::WorkerProcInitFailed
                    )
                )
        })
    }

    fn finding(&self) -> Finding {
        let o = self.oom;
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.evidence(self.event.span, "CUDA out of memory");
        for line in &o.continued {
            f.evidence(*line, "the same out-of-memory message, continued");
        }
        if let Some(p) = self.event.pid {
            f.entities.pids.insert(p);
        }
        // Everything the message names is an entity of the finding.
        f.entities.pids.extend(o.processes.iter().map(|p| p.pid));
        if let Some(g) = o.gpu {
            f.entities.gpus.insert(g);
        }
        if let Some((u, _, _)) = &self.holders.target {
            f.entities.units.insert(u.clone());
        }
        let who = self.holders.target.as_ref().map_or_else(
            || match self.event.framework {
                Framework::Sglang => "the SGLang server".to_owned(),
                Framework::Vllm => "the vLLM server".to_owned(),
                Framework::Unknown => "the process".to_owned(),
            },
            |t| t.0.clone(),
        );
        let gpu_text = o.gpu.map_or("the GPU".to_owned(), |g| format!("GPU {g}"));
        f.chain
            .push(match (o.tried_bytes, o.free_bytes, o.total_bytes) {
                (Some(t), Some(fr), Some(tot)) => format!(
                    "{who} ran out of memory on {gpu_text}: it asked for {} with {} of {} free",
                    size(t),
                    size(fr),
                    size(tot)
                ),
                _ => format!("{who} ran out of memory on {gpu_text}"),
            });
        f.condition("PyTorch reported CUDA out of memory", true);
        f.condition(
            "the error lists the processes on the GPU",
            !o.processes.is_empty(),
        );
        // A holder named by PyTorch's own list is as sure as a memory
        // check's arithmetic.
        let siblings = self.siblings();
        let sibling_sum = siblings.as_ref().map_or(0, |s| s.sum);
        // Numbers before blame: weights larger than the card itself are
        // not made to fit by freeing the other processes.
        let weights = weights::too_big(self.incident, o);
        let top = match self.foreign_large() {
            Some(sum) if weights.is_some() => {
                self.explain_weights(&mut f, weights.as_ref().expect("checked"), sum, &who);
                0.9
            }
            // The job's own ranks, not someone else's: most of the foreign
            // memory is theirs.
            Some(sum) if siblings.is_some() && sibling_sum * 2 >= sum => {
                self.explain_siblings(&mut f, siblings.as_ref().expect("checked"), sum, &who);
                0.9
            }
            Some(sum) => {
                self.explain_foreign(&mut f, sum, &who);
                0.97
            }
            None => match self.implied_others() {
                Some(others) => {
                    self.explain_implied(&mut f, others, &who);
                    0.85
                }
                None => {
                    self.explain_own(&mut f, &who);
                    0.95
                }
            },
        };
        f.confidence = confidence(&f, 0.6, top);
        f
    }
}

/// A PID in the list that is a rank of the failing server: one of its
/// unit's processes, or a server process title that is not a leftover.
fn is_own_rank(holders: &Holders<'_>, pid: u32, bytes: u64) -> bool {
    let incident = holders.incident;
    let unit = incident.owner(pid).map(|o| o.unit.as_str());
    let orphan = incident
        .facts
        .ps
        .iter()
        .any(|r| r.pid == pid && r.ppid == Some(1));
    let left_over = incident.units.values().flat_map(|u| &u.events).any(|e| {
        matches!(e.kind, crate::correlate::UnitEventKind::RemainsRunning { pid: p } | crate::correlate::UnitEventKind::LeftOverProcess { pid: p } if p == pid)
    });
    if orphan || left_over {
        return false;
    }
    if let (Some(u), Some((t, _, _))) = (unit, &holders.target) {
        return u == t;
    }
    let title = incident
        .gpu_processes
        .iter()
        .find(|p| p.pid == pid)
        .map(|p| p.name.as_str())
        .or(incident.cmdlines.get(&pid).map(|c| c.text.as_str()));
    // A server's titled process is a rank of the failing job where the job
    // is that server; for a writer no server line names (a training
    // script), only while it holds no more than a CUDA context: ranks take
    // a GPU each, so a titled process holding a large share of the
    // writer's own GPU is another job's engine (a colleague's vLLM).
    let stack = match title {
        Some(t) if t.starts_with("sglang::") => Framework::Sglang,
        Some(t) if t.starts_with("VLLM::") => Framework::Vllm,
        _ => return false,
    };
    unit.is_none() && (holders.framework == stack || bytes <= CONTEXT_MAX)
}

#[cfg(test)]
mod tests;
