//! `vllm-profile-charged-other-memory`: vLLM V1's memory profile charged
//! to its own "non-torch" memory tens of GiB that only another process on
//! the GPU can have taken, and sized its KV cache down by as much.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{COMPUTE_APPS, confidence};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: VllmProfileChargedOtherMemory = VllmProfileChargedOtherMemory;

pub struct VllmProfileChargedOtherMemory;

/// V1's profile in figures (catalogs/stacks-vllm.toml).
const BREAKDOWN: &str = "stacks-vllm.v1-memory-breakdown";
/// `Available KV cache memory: N GiB`, one wording of the memory-profiling row.
const PROFILE: &str = "stacks-vllm.memory-profiling";

/// Non-torch memory is NCCL's buffers, cuBLAS and attention workspaces:
/// vllm#21429's four-GPU profile shows 2.04 GiB, vllm#10511's two-GPU one
/// 3.58 GiB. From this much (GiB) it is more than a worker's own.
const MIN_FOREIGN_GIB: f64 = 8.0;

static META: RuleMeta = RuleMeta {
    id: "vllm-profile-charged-other-memory",
    category: Category::GpuMemoryHeldByOtherProcess,
    severity: Severity::Error,
    summary: "vLLM's memory profile counted tens of GiB another process took on the GPU as its own non-torch memory, and shrank its KV cache by as much",
    anchors: &[],
    doc: r#"
## What it means
vLLM V1 prints its start-up memory profile at debug level: `Memory
profiling takes 13.16 seconds. Total non KV cache memory: 33.68GiB; torch
peak memory increase: 0.34GiB; non-torch forward increase memory: 32.4GiB;
weights memory: 0.93GiB.` Non-torch memory is what the device lost during
profiling that PyTorch did not allocate: NCCL buffers and cuBLAS or
attention workspaces, a few GiB at most. The figure is read from the
whole device's free memory (`torch.cuda.mem_get_info`), so memory another
process takes while this one profiles is charged to it. A non-torch figure
of 8 GiB or more that is also larger than the weights is not this
worker's: the KV cache (`Available KV cache memory`) is smaller by as much.

## Why it happens
1. Two vLLM instances start or wake on one GPU at the same time (sleep-mode
   swapping, a second server started beside a loading one): each charges
   the other's loading to itself (vllm#55827, vllm#18854).
2. Another job (a training step, a notebook) allocates on the GPU during
   the server's profiling.

## How to confirm
`nvidia-smi --query-compute-apps=pid,used_memory --format=csv` while the
server starts; the other instance's log lines (another `EngineCore pid=`)
at the same time; `Initial free memory` against `Free memory after
profiling`.

## How to fix
Start (or wake) instances on one GPU one after the other, give each its own
GPU, or pin the KV cache with `--kv-cache-memory` so profiling does not
size it; restart the affected instance once the GPU is quiet.

## Safety
Advice only: the other process is usually a working server.
"#,
};

/// One profile's figures (GiB) and its line.
struct Breakdown<'a> {
    msg: &'a Message,
    nontorch: f64,
    weights: f64,
    torch: f64,
    nontorch_text: String,
}

fn breakdowns(incident: &Incident) -> Vec<Breakdown<'_>> {
    incident
        .known(BREAKDOWN)
        .filter_map(|(msg, hit)| {
            let num = |k: &str| hit.get(k).and_then(|v| v.parse::<f64>().ok());
            Some(Breakdown {
                msg,
                nontorch: num("nontorch")?,
                weights: num("weights")?,
                torch: num("torch").unwrap_or(0.0),
                nontorch_text: hit.get("nontorch")?.to_owned(),
            })
        })
        .collect()
}

/// Whether the non-torch figure is more than a worker's own: at least
/// [`MIN_FOREIGN_GIB`] and more than the weights and the torch peak.
fn foreign(b: &Breakdown<'_>) -> bool {
    b.nontorch >= MIN_FOREIGN_GIB && b.nontorch > b.weights + b.torch
}

impl Rule for VllmProfileChargedOtherMemory {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let list = breakdowns(incident);
        let Some(b) = list.iter().find(|b| foreign(b)) else {
            return;
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.evidence_marked(
            b.msg.span,
            format!(
                "vLLM's profile: {} GiB of non-torch memory beside {:.2} GiB of weights and a {:.2} GiB torch peak",
                b.nontorch_text, b.weights, b.torch
            ),
            format!("non-torch forward increase memory: {}", b.nontorch_text),
        );
        let own = b.msg.pid;
        if let Some(pid) = own {
            f.entities.pids.insert(pid);
        }
        let same_writer = |m: &Message| own.is_none() || m.pid == own;
        // The free-memory figures around it: the other wordings of the row.
        for (m, hit) in incident.known(BREAKDOWN) {
            if m.span == b.msg.span || !same_writer(m) {
                continue;
            }
            if let Some(free) = hit.get("free").filter(|_| hit.get("within").is_some()) {
                f.evidence(
                    m.span,
                    format!("{free} GiB of the GPU was free after profiling"),
                );
            } else if let Some(initial) = hit.get("initial") {
                f.evidence(
                    m.span,
                    format!("{initial} GiB of the GPU was free when the worker started"),
                );
            }
        }
        if let Some((m, hit)) = incident
            .known(PROFILE)
            .find(|(m, h)| same_writer(m) && h.matched.contains("Available KV cache memory"))
        {
            let kv = hit.get("gib").unwrap_or("?");
            f.evidence(
                m.span,
                format!("the KV cache got {kv} GiB, less what the other process took"),
            );
        }
        let others = other_instances(incident, own);
        for m in &others {
            if let Some(pid) = m.pid {
                f.entities.pids.insert(pid);
                f.evidence_once(
                    m.span,
                    format!("another vLLM engine (PID {pid}) in the same inputs"),
                );
            }
        }
        explain(&mut f, b, !others.is_empty());
        f.confidence = confidence(&f, 0.6, 0.9);
        out.push(f);
    }
}

/// The lines of other vLLM engine processes (another `pid=` in the prefix)
/// in the inputs: the first line of each.
fn other_instances(incident: &Incident, own: Option<u32>) -> Vec<&Message> {
    let own = match own {
        Some(p) => p,
        None => return Vec::new(),
    };
    let mut seen = std::collections::BTreeSet::new();
    incident
        .facts
        .messages
        .iter()
        .filter(|m| {
            m.pid.is_some_and(|p| p != own)
                && (m.text.contains("(EngineCore") || m.text.contains("(VllmWorker"))
        })
        .filter(|m| m.pid.is_some_and(|p| seen.insert(p)))
        .map(|first| {
            // Of that engine's lines, one that states memory (`sleep freed
            // 65.28 GiB`) says most about what it holds.
            incident
                .facts
                .messages
                .iter()
                .find(|m| m.pid == first.pid && m.text.contains("GiB"))
                .unwrap_or(first)
        })
        .collect()
}

fn explain(f: &mut Finding, b: &Breakdown<'_>, other_seen: bool) {
    let taken = b.nontorch;
    f.condition(
        format!(
            "the non-torch figure ({taken:.2} GiB) is at least {MIN_FOREIGN_GIB:.0} GiB and larger than the weights and torch peak ({:.2} GiB): more than NCCL and workspaces take",
            b.weights + b.torch
        ),
        true,
    );
    f.condition(
        "another vLLM engine's lines are in the inputs (a second instance on the GPU)",
        other_seen,
    );
    f.chain.push(
        "vLLM sized its KV cache from what was left after profiling: smaller by what another process took meanwhile"
            .to_owned(),
    );
    f.chain.push(format!(
        "while vLLM profiled, the GPU's free memory fell by {taken:.2} GiB more than PyTorch allocated; vLLM reads free memory for the whole device, so it counted that as its own non-torch memory"
    ));
    f.title = format!(
        "another process took about {taken:.0} GiB of vLLM's GPU during its memory profiling"
    );
    f.headline = format!(
        "vLLM counted {} GiB of 'non-torch' memory beside {:.2} GiB of weights: another process (such as a second vLLM instance waking or loading on the same GPU) took that memory while it profiled, and its KV cache shrank by as much.",
        b.nontorch_text, b.weights
    );
    f.explanation = "vLLM V1 measures its non-torch memory as the whole device's free-memory drop minus what PyTorch allocated; a co-tenant's allocations during that window are charged to this instance (vllm#18854, vllm#55827).".to_owned();
    f.actions.push(Action::advice(
        "list the GPU's processes while the server starts: a second instance or job allocating at the same time",
        Some(COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "start or wake instances that share a GPU one after the other (or give each its own GPU, or set --kv-cache-memory), then restart this one on a quiet GPU",
        None,
    ));
}
