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

pub static RULE: TorchCudaOom = TorchCudaOom;

pub struct TorchCudaOom;

/// Other processes' memory counts as "a large share" from this much on.
const FOREIGN_MIN_GIB: f64 = 2.0;
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
   free` is held outside this process (less its own CUDA context).
   Inside a container PyTorch lists its own process under its host PID: the
   entry whose memory matches what PyTorch reserved (plus a CUDA context) is
   the writer, not another process.
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

/// A size for people: `86 MiB` under a GiB, `27.93 GiB` above.
fn size(bytes: u64) -> String {
    if bytes < GIB_BYTES {
        format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
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
            .filter(|p| !is_own_rank(&holders, p.pid))
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
        let mine = own_bytes(o)?.0;
        let others = total.saturating_sub(free).saturating_sub(mine);
        let beyond_context = others.saturating_sub(OWN_CONTEXT);
        let fits_without = o.tried_bytes.is_some_and(|t| free + beyond_context >= t);
        let share = beyond_context as f64 >= total as f64 * FOREIGN_SHARE;
        (gib(beyond_context) >= FOREIGN_MIN_GIB && (fits_without || share)).then_some(others)
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
        (gib(sum) >= FOREIGN_MIN_GIB && (fits_without || share)).then_some(sum)
    }

    fn finding(&self) -> Finding {
        let o = self.oom;
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.evidence(self.event.span, "CUDA out of memory");
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
        let top = match self.foreign_large() {
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

    fn explain_foreign(&self, f: &mut Finding, sum: u64, who: &str) {
        let incident = self.incident;
        // The holders as nvidia-smi lists them; a PID only PyTorch listed
        // becomes a row of its own, cited at the OOM line.
        let mut gpu = None;
        let mut list: Vec<Holder<'_>> = Vec::new();
        for &(pid, bytes) in &self.foreign {
            let row = incident.gpu_processes.iter().find(|p| p.pid == pid);
            gpu = gpu.or(row.and_then(|r| r.gpu));
            let process = row.cloned().unwrap_or_else(|| {
                let name: String = incident
                    .cmdlines
                    .get(&pid)
                    .map(|c| c.text.split_whitespace().next().unwrap_or("").to_owned())
                    .unwrap_or_default();
                GpuProcess {
                    gpu: None,
                    pid,
                    // An unknown name cannot guard a signal.
                    name_truncated: name.is_empty(),
                    name,
                    used_mib: Some(bytes / (1024 * 1024)),
                    spans: vec![self.event.span],
                }
            });
            list.push(self.holders.holder(process));
        }
        list.sort_by_key(|h| std::cmp::Reverse(h.process.used_mib));
        let gpu = gpu.or(self.oom.gpu).unwrap_or(0);
        let sum_gib = gib(sum);
        f.condition(
            format!(
                "processes that are not the server's own hold {sum_gib:.2} GiB, enough that the allocation would have fit without them"
            ),
            true,
        );
        let group: Vec<u32> = incident.gpus.iter().map(|g| g.index).collect();
        let name = self.holders.report(f, gpu, &list, &group);
        f.title = format!("another process holds {sum_gib:.2} GiB on GPU {gpu}: {name}");
        f.headline = format!(
            "{who} ran out of GPU memory because {name} holds {sum_gib:.2} GiB on GPU {gpu}; the OOM is the symptom, not the cause."
        );
        f.explanation = format!(
            "PyTorch's list of the processes on the GPU shows {} that is not part of the server (not one of its PIDs, ranks or its unit). Without it, the allocation would have fit.",
            if self.foreign.len() == 1 {
                "a process"
            } else {
                "processes"
            }
        );
    }

    fn explain_own(&self, f: &mut Finding, who: &str) {
        let o = self.oom;
        let tried = o.tried_bytes.map(gib);
        let total = o.total_bytes.map(gib);
        let unallocated = o.reserved_unallocated_bytes.map(gib);
        f.condition("no other process holds a large share of the GPU", true);
        let fragmented = matches!((unallocated, tried), (Some(u), Some(t)) if u >= t && u >= 1.0);
        let huge = matches!((tried, total), (Some(t), Some(tot)) if t >= tot * 0.25);
        let gpu_text = o.gpu.map_or("the GPU".to_owned(), |g| format!("GPU {g}"));
        if let (Some((pid, bytes)), Some(reserved)) = (self.writer, pytorch_reserved(o)) {
            f.chain.push(format!(
                "PID {pid}, listed with {:.2} GiB, is the server's own process: PyTorch reserved {:.2} GiB of it, the rest is its CUDA context",
                gib(bytes),
                gib(reserved)
            ));
            f.condition(
                format!(
                    "the largest listed process, PID {pid} with {:.2} GiB, matches PyTorch's own reservation of {:.2} GiB plus a CUDA context",
                    gib(bytes),
                    gib(reserved)
                ),
                true,
            );
        }
        // The figures that rule out another process, quoted as printed.
        if let (Some(total), Some(free)) = (o.total_bytes, o.free_bytes) {
            if let Some((pytorch, Own::FigureTooSmall(this))) = own_bytes(o) {
                // As PyTorch prints it.
                let this_text = if this == 0 {
                    "0 bytes".to_owned()
                } else {
                    size(this)
                };
                f.chain.push(format!(
                    "the error says this process has {} in use, less than the {} PyTorch itself allocated and reserved in it: that figure is wrong (the driver cannot see a process in a container's PID namespace), so the {} in use of the GPU's {} ({} free) is this process's own",
                    this_text,
                    size(pytorch),
                    size(total.saturating_sub(free)),
                    size(total),
                    size(free)
                ));
                f.condition(
                    format!(
                        "PyTorch's own {} reconciles with the {} in use; the per-process figure of {} does not and was not believed",
                        size(pytorch),
                        size(total.saturating_sub(free)),
                        this_text
                    ),
                    true,
                );
            } else if let Some(this) = o.this_process_bytes {
                f.chain.push(format!(
                    "this process holds {} of the GPU's {} ({} free): the memory in use is its own",
                    size(this),
                    size(total),
                    size(free)
                ));
            } else if let (Some(reserved), true) = (
                o.reserved_bytes,
                o.processes.is_empty() && self.writer.is_none(),
            ) {
                let gap = total.saturating_sub(reserved).saturating_sub(free);
                f.chain.push(format!(
                    "{} total - {} reserved by PyTorch - {} free leaves {} outside PyTorch's allocator: this process's CUDA context (and a display), not another process",
                    size(total),
                    size(reserved),
                    size(free),
                    size(gap)
                ));
            }
        }
        let logprobs = crate::rules::support::server::exception_at(self.incident, self.event.span)
            .is_some_and(|(_, x)| {
                x.frames.iter().any(|fr| {
                    fr.function
                        .as_deref()
                        .is_some_and(|n| n.contains("logprobs"))
                })
            });
        if logprobs {
            f.chain.push(
                "the allocation was made computing prompt logprobs: one row of vocabulary-sized logits per prompt token"
                    .to_owned(),
            );
            f.actions.push(Action::advice(
                "limit prompt_logprobs in requests (or reject them): over a large vocabulary they need prompt length x vocabulary floats at once",
                None,
            ));
        }
        if fragmented {
            f.chain.push(format!(
                "{:.2} GiB was reserved by PyTorch but unallocated: the memory is fragmented",
                unallocated.unwrap_or_default()
            ));
            f.title = format!("CUDA out of memory on {gpu_text}: fragmented allocator cache");
            f.headline = format!(
                "{who} ran out of GPU memory although PyTorch held {:.2} GiB reserved but unallocated: fragmentation.",
                unallocated.unwrap_or_default()
            );
            f.actions.push(Action::advice(
                "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the server's environment",
                Some("systemctl edit UNIT   # [Service] Environment=PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
            ));
        } else if huge {
            f.chain.push(format!(
                "a single allocation of {:.2} GiB, a quarter of the GPU or more: a pathological request",
                tried.unwrap_or_default()
            ));
            f.title = format!("CUDA out of memory on {gpu_text}: one huge allocation");
            f.headline = format!(
                "{who} ran out of GPU memory on a single {:.2} GiB allocation: one oversized request (a very long prompt or batch).",
                tried.unwrap_or_default()
            );
            f.actions.push(Action::advice(
                "limit request sizes (max prompt length, --max-model-len, max batch tokens)",
                None,
            ));
        } else {
            f.chain.push(
                "the server's own allocations filled the GPU: its static reservation left too little for activations"
                    .to_owned(),
            );
            f.title = format!("CUDA out of memory on {gpu_text}: the server's own allocations");
            f.headline = format!(
                "{who} ran out of GPU memory with no other process to blame: its static memory reservation or batch size is too large for this GPU."
            );
        }
        f.explanation = "A server reserves its KV cache up front (SGLang --mem-fraction-static, vLLM --gpu-memory-utilization); an OOM while serving means what is left for activations and graphs is too small for the batches it runs.".to_owned();
        self.server_advice(f);
    }

    fn explain_siblings(&self, f: &mut Finding, s: &Siblings, sum: u64, who: &str) {
        let o = self.oom;
        let gpu_text = o.gpu.map_or("the GPU".to_owned(), |g| format!("GPU {g}"));
        let n = s.pids.len();
        let first = s.pids[0];
        let last = s.pids[n - 1];
        f.condition(
            format!(
                "{n} listed processes have consecutive PIDs {first}-{last} and the same {} each: ranks of one job",
                size(s.each)
            ),
            true,
        );
        f.condition(
            "the other processes together hold enough that the allocation would have fit without them",
            true,
        );
        f.chain.push(format!(
            "{n} other processes, PIDs {first}-{last}, each hold {} on {gpu_text} ({:.2} GiB together)",
            size(s.each),
            gib(s.sum)
        ));
        f.chain.push(format!(
            "they are sibling ranks of the same job: each opened a CUDA context on {gpu_text} before selecting its own device"
        ));
        if let Some(this) = o.this_process_bytes {
            f.chain.push(format!(
                "with this process's own {} the GPU is full",
                size(this)
            ));
        }
        f.title = format!(
            "CUDA out of memory on {gpu_text}: {n} sibling ranks each hold {} there",
            size(s.each)
        );
        f.headline = format!(
            "{who} ran out of memory on {gpu_text} because {n} sibling processes of the same job (PIDs {first}-{last}, {} each, {:.2} GiB in all) also put a CUDA context on {gpu_text}; they are the job's own ranks, not another tenant.",
            size(s.each),
            gib(sum)
        );
        f.explanation = "Every process that touches CUDA before choosing a device (a tensor created without one, torch.cuda calls at import time, a library initialising on the default device) creates a context on GPU 0. With N ranks, GPU 0 carries N contexts besides rank 0's own work. Killing them would kill the job itself.".to_owned();
        f.actions.push(Action::advice(
            "select each rank's GPU before any CUDA call: torch.cuda.set_device(local_rank) first thing in every rank, or CUDA_VISIBLE_DEVICES per rank so each sees only its own GPU",
            None,
        ));
        f.actions.push(Action::advice(
            "find what touches GPU 0 early: map_location for torch.load, device= on every tensor, no torch.cuda call at import time",
            Some("nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv"),
        ));
    }

    fn explain_implied(&self, f: &mut Finding, others: u64, who: &str) {
        let o = self.oom;
        let incident = self.incident;
        let gpu_text = o.gpu.map_or("the GPU".to_owned(), |g| format!("GPU {g}"));
        let total = o.total_bytes.unwrap_or(0);
        let free = o.free_bytes.unwrap_or(0);
        let (mine, mine_label) = match own_bytes(o) {
            Some((b, Own::Figure)) => (b, "held by this process"),
            Some((b, _)) => (b, "reserved by PyTorch"),
            None => (0, "held by this process"),
        };
        f.category = Category::GpuMemoryHeldByOtherProcess;
        let arithmetic = format!(
            "{} total - {} {mine_label} - {} free = {} held outside this process",
            size(total),
            size(mine),
            size(free),
            size(others)
        );
        f.chain.push(format!(
            "{arithmetic} (less about 1 GiB of its own CUDA context)"
        ));
        f.condition(
            format!("the numbers show memory held by another process: {arithmetic}"),
            true,
        );
        // nvidia-smi may show the holder: match it by the numbers.
        let gpu = o.gpu.unwrap_or(0);
        let listed: Vec<Holder<'_>> = self.holders.on(gpu);
        let listed_mib: u64 = listed.iter().filter_map(|h| h.process.used_mib).sum();
        let reconciles = !listed.is_empty()
            && (listed_mib as f64 / 1024.0 - gib(others)).abs() <= gib(CONTEXT_SLACK);
        f.condition(
            "a capture of the GPU's processes names the holder",
            reconciles,
        );
        let name = if reconciles {
            let group: Vec<u32> = incident.gpus.iter().map(|g| g.index).collect();
            self.holders.report(f, gpu, &listed, &group)
        } else {
            f.actions.push(Action::advice(
                format!(
                    "find the other process on {gpu_text} from the host (PyTorch's old message names none; inside a container nvidia-smi may not show it either)"
                ),
                Some("nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv; sudo fuser -v /dev/nvidia*"),
            ));
            "another process".to_owned()
        };
        f.title = format!("another process holds about {} on {gpu_text}", size(others));
        f.headline = format!(
            "{who} ran out of GPU memory because {name} holds about {} of {gpu_text} ({arithmetic}); the OOM is the symptom, not the cause.",
            size(others)
        );
        f.explanation = format!(
            "PyTorch's message counts only what this process holds; the rest of the {} GPU is used by another process (an orphaned or zombie process of an earlier job, another tenant, or another container).              Reducing the batch or model size will not help. Static memory fractions (vLLM gpu_memory_utilization, SGLang mem_fraction_static) are shares of the total memory: with another process on the GPU they must be lowered, or the other process stopped.{}",
            size(total),
            if reconciles {
                ""
            } else {
                " The inputs do not name the holder: capture the GPU's processes to settle it."
            }
        );
    }

    /// Lower the server's static reservation, by flag when it is known.
    fn server_advice(&self, f: &mut Finding) {
        let unit = self.holders.target.as_ref().map(|t| t.0.clone());
        match self.event.framework {
            Framework::Sglang => {
                if let Some((v, span)) = launch_args(self.incident, Framework::Sglang)
                    .and_then(|(a, s)| Some((a.mem_fraction_static?, s)))
                {
                    let action = crate::rules::support::server::flag_action(
                        self.incident,
                        f,
                        unit.as_deref(),
                        "--mem-fraction-static",
                        &fraction(v - 0.05),
                        format!(
                            "mem_fraction_static={} leaves too little for activations",
                            fraction(v)
                        ),
                        [span, self.event.span],
                    );
                    f.actions.push(action);
                }
                f.actions.push(Action::advice(
                    "or lower --max-running-requests / --chunked-prefill-size",
                    None,
                ));
            }
            Framework::Vllm => {
                if let Some((v, span)) = launch_args(self.incident, Framework::Vllm)
                    .and_then(|(a, s)| Some((a.gpu_memory_utilization?, s)))
                {
                    let action = crate::rules::support::server::flag_action(
                        self.incident,
                        f,
                        unit.as_deref(),
                        "--gpu-memory-utilization",
                        &fraction(v - 0.05),
                        format!(
                            "gpu_memory_utilization={} leaves too little for activations",
                            fraction(v)
                        ),
                        [span, self.event.span],
                    );
                    f.actions.push(action);
                }
                f.actions.push(Action::advice(
                    "or lower --max-num-seqs / --max-num-batched-tokens / --max-model-len",
                    None,
                ));
            }
            Framework::Unknown => f.actions.push(Action::advice(
                "reduce the batch size or sequence length, or use GPUs with more memory",
                None,
            )),
        }
    }
}

/// A PID in the list that is a rank of the failing server: one of its
/// unit's processes, or a server process title that is not a leftover.
fn is_own_rank(holders: &Holders<'_>, pid: u32) -> bool {
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
    unit.is_none() && title.is_some_and(|t| t.starts_with("sglang::") || t.starts_with("VLLM::"))
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;
    use crate::source::{Source, SourceMap};

    /// The root cause's category and entities for a paste.
    fn root(text: &str) -> (Category, Vec<u32>, Vec<u32>, usize) {
        let mut sources = SourceMap::default();
        sources.add(Source::new("paste", text.as_bytes()));
        let a = crate::analyze(sources);
        let report = a.report();
        let f = report.root_cause().expect("a root cause");
        let kills = f
            .actions
            .iter()
            .filter(|x| x.kind.name().contains("terminate") || x.kind.name().contains("stop"))
            .count();
        (
            f.category,
            f.entities.pids.iter().copied().collect(),
            f.entities.gpus.iter().copied().collect(),
            kills,
        )
    }

    const SIBLINGS: &str = "OutOfMemoryError: CUDA out of memory. Tried to allocate 52.00 MiB. GPU 0 has a total capacty of 31.74 GiB of which 39.62 MiB is free. Process 101553 has 1.19 GiB memory in use. Process 101552 has 1.19 GiB memory in use. Process 101551 has 1.19 GiB memory in use. Process 101550 has 1.19 GiB memory in use. Including non-PyTorch memory, this process has 13.82 GiB memory in use. Of the allocated memory 11.54 GiB is allocated by PyTorch, and 677.26 MiB is reserved by PyTorch but unallocated.";
    const OLD_FORM: &str = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.63 GiB (GPU 0; 44.56 GiB total capacity; 27.91 GiB already allocated; 565.31 MiB free; 27.93 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.";
    const CUT: &str = "Tried to allocate 216.00 MiB (GPU 0; 7.92 GiB total capacity; 69.17 MiB already allocated; 24.56 MiB free; 86.00 MiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.";
    const PREFIX: &str = "[2026-11-27 09:38:52 TP0] ";

    #[test]
    fn the_one_entry_that_can_hold_pytorch_s_allocation_is_the_writer() {
        use crate::model::{CudaOom, OomSource, ProcessMemory};
        const G: u64 = 1 << 30;
        let mut o = CudaOom::new(OomSource::Allocator);
        o.total_bytes = Some(44 * G);
        o.free_bytes = Some(G / 20);
        o.allocated_bytes = Some(37 * G);
        o.processes = vec![ProcessMemory {
            pid: 3663367,
            bytes: 44 * G - G / 20,
        }];
        assert_eq!(super::listed_writer(&o), Some((3663367, 44 * G - G / 20)));
        // Two entries large enough: either could be the writer.
        o.processes = vec![
            ProcessMemory {
                pid: 1,
                bytes: 38 * G,
            },
            ProcessMemory {
                pid: 2,
                bytes: 38 * G,
            },
        ];
        o.total_bytes = Some(76 * G + G / 20);
        assert_eq!(super::listed_writer(&o), None);
        // A list that does not cover the memory in use may lack the writer.
        o.processes = vec![ProcessMemory {
            pid: 1,
            bytes: 38 * G,
        }];
        assert_eq!(super::listed_writer(&o), None);
    }

    #[test]
    fn sibling_ranks_are_the_job_itself_never_killed() {
        let (category, pids, gpus, kills) = root(&format!("{PREFIX}{SIBLINGS}\n"));
        assert_eq!(category, Category::CudaOom);
        assert_eq!(pids, vec![101550, 101551, 101552, 101553]);
        assert_eq!(gpus, vec![0]);
        assert_eq!(kills, 0);
    }

    #[test]
    fn the_old_message_s_arithmetic_shows_another_process() {
        for line in [OLD_FORM, CUT] {
            let (category, _, gpus, _) = root(&format!("{PREFIX}{line}\n"));
            assert_eq!(category, Category::GpuMemoryHeldByOtherProcess, "{line}");
            assert_eq!(gpus, vec![0]);
        }
    }

    /// https://github.com/rhymes-ai/Aria/issues/24: vLLM in a container;
    /// the driver's per-process figure is 0 bytes while PyTorch allocated
    /// 19.02 GiB in the same process.
    const ZERO_FIGURE: &str = "(VllmWorkerProcess pid=2421) ERROR 10-14 12:32:47 multiproc_worker_utils.py:233] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.88 GiB. GPU 3 has a total capacity of 21.96 GiB of which 1.29 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory in use. Of the allocated memory 19.02 GiB is allocated by PyTorch, and 1.32 GiB is reserved by PyTorch but unallocated.";
    /// fixtures/rules/torch-cuda-oom/pos-2.5-foreign-pid.log: the figure is
    /// honest (47.95 GiB >= 45.10 + 1.14) and PID 9911 holds the rest.
    const HONEST_FIGURE: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.21 GiB is free. Process 9911 has 30.02 GiB memory in use. Including non-PyTorch memory, this process has 47.95 GiB memory in use. Of the allocated memory 45.10 GiB is allocated by PyTorch, and 1.14 GiB is reserved by PyTorch but unallocated.";

    #[test]
    fn a_per_process_figure_below_pytorch_s_own_is_not_believed() {
        let (category, pids, gpus, kills) = root(&format!("{ZERO_FIGURE}\n"));
        assert_eq!(category, Category::CudaOom);
        assert_eq!(pids, vec![2421]);
        assert_eq!(gpus, vec![3]);
        assert_eq!(kills, 0);
        let mut sources = SourceMap::default();
        sources.add(Source::new("paste", format!("{ZERO_FIGURE}\n").as_bytes()));
        let analysis = crate::analyze(sources);
        let report = analysis.report();
        let f = report.root_cause().expect("a root cause");
        assert!(
            f.chain
                .iter()
                .any(|c| c.contains("0 bytes") && c.contains("wrong")),
            "{:?}",
            f.chain
        );
        // Near miss: an honest figure and a listed holder stay another process's.
        let (category, pids, ..) = root(&format!("{HONEST_FIGURE}\n"));
        assert_eq!(category, Category::GpuMemoryHeldByOtherProcess);
        assert_eq!(pids, vec![9911]);
    }

    #[test]
    #[ignore = "waits on ingest-lines: a bare one-line paste must reach the server parser"]
    fn bare_lines_answer_the_same() {
        assert_eq!(root(SIBLINGS).0, Category::CudaOom);
        assert_eq!(root(OLD_FORM).0, Category::GpuMemoryHeldByOtherProcess);
        assert_eq!(root(CUT).0, Category::GpuMemoryHeldByOtherProcess);
    }
}
