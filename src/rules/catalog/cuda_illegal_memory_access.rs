//! `cuda-illegal-memory-access`: a GPU kernel faulted (illegal memory
//! access, unspecified launch failure, misaligned address, illegal
//! instruction: the CUDA catalog's sticky-fault rows); pairs it with the kernel's Xid 13/31 for the same process and
//! notes a hardware Xid that would make the GPU the cause.

use crate::correlate::{Incident, OwnerBasis};
use crate::model::{Framework, KernelEvent, Timestamp, Xid};
use crate::rules::support::server::{events_at, in_graph_capture, run_pids, target};
use crate::rules::support::{confidence, distinct};
use crate::rules::{Action, ActionKind, Category, Finding, Rule, RuleMeta, Safety, Severity};
use crate::source::Span;
use std::collections::BTreeSet;

pub static RULE: CudaIllegalMemoryAccess = CudaIllegalMemoryAccess;

pub struct CudaIllegalMemoryAccess;

/// The sticky kernel faults, as catalog rows: each is read in every wrapper
/// the CUDA catalog knows (`CUDA error: …`, NCCL's `Cuda failure '…'`,
/// `cudaErrorIllegalAddress`, `CUDA_ERROR_LAUNCH_FAILED`, THC's old numbers).
/// A device-side assert (710) is the input's or a kernel's bug, not a
/// fault: its row says so by itself.
const FAULTS: &[&str] = &[
    "cuda.illegal-address",
    "cuda.launch-failure",
    "cuda.misaligned-address",
    "cuda.illegal-instruction",
];

/// Xids the kernel logs for a faulting kernel of one process.
const APP_XIDS: &[u32] = &[13, 31, 43];
/// Xids that mean the GPU or its memory failed: then the GPU is the cause.
const HARDWARE_XIDS: &[u32] = &[48, 62, 63, 64, 74, 79, 92, 94, 95, 109, 119, 120, 140, 154];
/// Seconds between a fault and an Xid for them to be one event.
const PAIR_SECS: i64 = 300;

static META: RuleMeta = RuleMeta {
    id: "cuda-illegal-memory-access",
    category: Category::CudaIllegalMemoryAccess,
    severity: Severity::Critical,
    summary: "a GPU kernel faulted (illegal memory access or another sticky CUDA error)",
    // The catalog rows' anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
A kernel on the GPU faulted and the CUDA context is unusable:
`CUDA error: an illegal memory access was encountered` (also `unspecified
launch failure`, `misaligned address`, `an illegal instruction was
encountered`, NCCL's `Cuda failure 'an illegal memory access was
encountered'`, `cudaErrorIllegalAddress`, `CUDA_ERROR_LAUNCH_FAILED`: the
CUDA catalog's rows 700, 715, 716 and 719 in any wrapper). The process must exit; the
reported stack is often wrong because kernels run asynchronously.

## Why it happens
1. A bug in a kernel (attention backend, custom all-reduce, a quantised GEMM,
   a model-specific op): the kernel log has Xid 13 or 31 for the same PID and
   nothing hardware-like. (A device-side assert, error 710, is the CUDA
   catalog's own finding: usually a bad index from the input.)
2. The GPU or driver failed: Xid 48, 63/64, 79, 94/95, 119 at the same time,
   or the fault follows one GPU across unrelated workloads. The hardware
   finding is then the root cause.
3. A peer rank failed first and a collective read its memory.

## How to confirm
`journalctl -k` around the time: `NVRM: Xid (PCI:…): 13, pid=<the server's
PID>` or `31 … MMU Fault` pairs with this error; a hardware Xid overrides it.

## How to fix
Restart once. If it recurs with Xid 13/31 and the same request, treat it as
software: switch the attention backend, disable custom all-reduce or CUDA
graphs to find the kernel, upgrade. With hardware Xids follow those (drain,
reset, RMA).

## Safety
A restart is safe; everything else is advice.
"#,
};

/// The source site a wrapper names on the error's line (TurboMind's `…
/// was encountered /lmdeploy/src/turbomind/utils/allocator.h:231`,
/// TensorRT-LLM's `(…/tllmBuffers.h:112)`, PyTorch's `(Triggered internally
/// at …/CUDAFunctions.cpp:109)`), as the file's name and line: where to
/// look first when it recurs.
static SITE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"(?:^|[\s(/])(?P<file>[A-Za-z0-9_.-]+\.(?:h|hpp|hh|c|cc|cpp|cu|cuh)):(?P<line>[0-9]+)\b",
    )
    .expect("regex")
});

fn raised_at(text: &str) -> Option<String> {
    SITE.captures_iter(text)
        .last()
        .map(|c| format!("{}:{}", &c["file"], &c["line"]))
}

impl Rule for CudaIllegalMemoryAccess {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // SGLang's graph-capture rule reports the faults that broke a capture.
        let mut hits: Vec<_> = FAULTS
            .iter()
            .flat_map(|id| incident.known(id))
            .filter(|(m, _)| !in_graph_capture(incident, m.span, &m.text))
            .collect();
        hits.sort_by_key(|(m, _)| m.span);
        hits.dedup_by_key(|(m, _)| m.span);
        let Some((first, hit)) = hits.first() else {
            return;
        };
        // The fault's message as CUDA words it today.
        let error = hit
            .row
            .and_then(|r| r.strings.last())
            .map_or("an illegal memory access was encountered", |s| {
                s.text.as_str()
            })
            .to_owned();
        let event = events_at(incident, first.span).next();
        let framework = event.map_or(Framework::Unknown, |e| e.framework);
        let tgt = target(incident, event, framework);
        let mut pids: BTreeSet<u32> = event.map(|e| run_pids(incident, e)).unwrap_or_default();
        if let Some((u, _, _)) = &tgt {
            pids.extend(
                incident
                    .owners
                    .iter()
                    .filter(|(_, o)| &o.unit == u)
                    .map(|(p, _)| *p),
            );
        }
        let when = incident.time_of(first.span).or(event.and_then(|e| e.time));
        let near = |t: Option<Timestamp>, secs: i64| match (when, t) {
            (Some(w), Some(t)) => (t.utc_seconds() - w.utc_seconds()).abs() <= secs,
            _ => false,
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = hits.len() as u32;
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(3) {
            let at = raised_at(&m.text).map_or(String::new(), |s| format!(", raised at {s}"));
            f.evidence(m.span, format!("a kernel faulted: {error} ({n}x{at})"));
        }
        cite_ggml_call(incident, first.span, &mut f);
        if let Some((u, _, _)) = &tgt {
            f.entities.units.insert(u.clone());
        }
        if let Some(p) = event.and_then(|e| e.pid) {
            f.entities.pids.insert(p);
        }
        let who = tgt
            .as_ref()
            .map_or("the server", |t| t.0.as_str())
            .to_owned();
        f.chain.push(format!("{who} failed: CUDA error: {error}"));
        f.condition("CUDA reported a sticky kernel fault", true);
        // The kernel's own report of the fault: same PID, or same time.
        let app = incident.xids().find(|(e, x)| {
            APP_XIDS.contains(&x.code)
                && (x.pid.is_some_and(|p| pids.contains(&p)) || near(e.time.wall, PAIR_SECS))
        });
        let hardware: Vec<_> = incident
            .xids()
            .filter(|(e, x)| {
                HARDWARE_XIDS.contains(&x.code) && (near(e.time.wall, 3600) || when.is_none())
            })
            .collect();
        if let Some((e, x)) = app {
            cite_app_xid(&mut f, incident, e, x, &pids);
        }
        f.condition(
            "the kernel log pairs it with Xid 13/31 for the process",
            app.is_some(),
        );
        let hw_text = hardware
            .iter()
            .map(|(_, x)| x.code.to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
            .join(", ");
        f.condition(
            "no hardware Xid points at the GPU instead",
            hardware.is_empty(),
        );
        for (e, x) in hardware.iter().take(2) {
            f.evidence(
                e.span,
                format!("hardware Xid {}: the GPU itself failed", x.code),
            );
        }
        f.title = format!("a GPU kernel faulted: {error}");
        f.headline = headline(&who, &error, &hw_text, app.is_some());
        f.explanation = "A kernel fault poisons the CUDA context; the reported Python stack is often not where it happened. Without hardware Xids it is a software bug in a kernel (attention backend, custom all-reduce, quantised GEMM) or a bad input.".to_owned();
        f.actions
            .extend(actions(tgt.as_ref(), hardware.is_empty(), first.span));
        f.confidence = confidence(&f, 0.6, 0.95);
        out.push(f);
    }
}

/// ggml's line under its CUDA error (catalogs/cuda.toml): the device and
/// the function whose CUDA call failed.
const GGML_CALL: &str = "cuda.ggml-current-device";

/// ggml's `current device: 0, in function ggml_cuda_op_mul_mat at …` right
/// under the fault at `fault`, cited with the function it names: which of
/// ggml's operations faulted (a matrix multiplication, a buffer clear).
fn cite_ggml_call(incident: &Incident, fault: Span, f: &mut Finding) {
    let Some((m, hit)) = incident.known(GGML_CALL).find(|(m, _)| {
        m.span.source == fault.source && m.span > fault && m.span.line <= fault.line + 2
    }) else {
        return;
    };
    if let Some(name) = hit.get("name") {
        f.evidence(
            m.span,
            format!("ggml's call that faulted: in function {name}"),
        );
    }
}

/// Cites on `f` the kernel's Xid 13/31 `x` (line `e`) paired with the
/// fault, names its PID and GPU, and adds it to the chain: for the server's
/// own process when its PID is one of `pids`, else at the same time.
fn cite_app_xid(
    f: &mut Finding,
    incident: &Incident,
    e: &KernelEvent,
    x: &Xid,
    pids: &BTreeSet<u32>,
) {
    f.entities.xid.insert(x.code);
    if let Some(p) = x.pid {
        f.entities.pids.insert(p);
    }
    if let Some(g) = x.bus_id.as_deref().and_then(|b| incident.gpu_by_bus_id(b)) {
        f.entities.gpus.insert(g.index);
    }
    let same_pid = x.pid.is_some_and(|p| pids.contains(&p));
    f.evidence(
        e.span,
        format!(
            "the kernel's Xid {} for {}: the faulting kernel",
            x.code,
            x.pid
                .map_or("the same time".to_owned(), |p| format!("PID {p}"))
        ),
    );
    f.chain.push(format!(
        "the driver logged Xid {} ({}){}",
        x.code,
        if x.code == 31 {
            "a GPU memory page fault"
        } else {
            "a graphics engine exception"
        },
        if same_pid {
            " for the server's own process"
        } else {
            " at the same time"
        }
    ));
}

/// The headline: `who` died of CUDA's `error`; the hardware Xids `hw_text`
/// (empty when none) make the GPU the likelier cause, else the driver's
/// Xid confirms the fault when `xid_confirms`.
fn headline(who: &str, error: &str, hw_text: &str, xid_confirms: bool) -> String {
    if !hw_text.is_empty() {
        format!(
            "{who} died of `CUDA error: {error}`, and the GPU reported hardware Xid {hw_text}: the GPU fault is the likelier cause."
        )
    } else {
        format!(
            "{who} died of `CUDA error: {error}`: a GPU kernel faulted{}.",
            if xid_confirms {
                " (the driver's Xid confirms it)"
            } else {
                ""
            }
        )
    }
}

/// What to do: check the kernel log; without hardware Xids (`no_hardware`)
/// restart the target unit once and verify it (citing the fault's `span`)
/// and bisect the kernel if it recurs, else follow the hardware finding.
fn actions(tgt: Option<&(String, OwnerBasis, Span)>, no_hardware: bool, span: Span) -> Vec<Action> {
    let mut actions = vec![Action::advice(
        "check the kernel log around the time for Xids (13/31: a faulting kernel; 48/79/95: the GPU)",
        Some("journalctl -k --since '-2h' | grep -E 'NVRM: Xid'"),
    )];
    if no_hardware {
        if let Some(u) = tgt.and_then(|t| crate::model::UnitName::new(&t.0).ok()) {
            actions.push(
                Action::new(
                    ActionKind::RestartUnit { unit: u.clone() },
                    Safety::Safe,
                    format!("a kernel fault is often transient: restart {u} once"),
                )
                .with_evidence([span]),
            );
            actions.push(
                Action::new(
                    ActionKind::VerifyUnitActive {
                        unit: u,
                        timeout_secs: 300,
                    },
                    Safety::Safe,
                    "the unit must come up and stay up",
                )
                .with_evidence([span]),
            );
        }
        actions.push(Action::advice(
            "if it recurs with the same request, bisect the kernel: another attention backend, --disable-custom-all-reduce, --disable-cuda-graph (SGLang) / --enforce-eager (vLLM); rerun with CUDA_LAUNCH_BLOCKING=1 for the real stack",
            None,
        ));
    } else {
        actions.push(Action::advice(
            "follow the hardware Xid finding (drain the node, reset or replace the GPU) before restarting",
            None,
        ));
    }
    actions
}

#[cfg(test)]
mod site_tests {
    /// InternLM/lmdeploy#1289's TurboMind line names its site;
    /// TensorRT-LLM's `(…:112)` form (catalogs/cuda.toml's sample) too; a
    /// line without one names none.
    #[test]
    fn the_site_a_wrapper_names_is_read() {
        assert_eq!(
            super::raised_at("  what():  [TM][ERROR] CUDA runtime error: an illegal memory access was encountered /lmdeploy/src/turbomind/utils/allocator.h:231 ").as_deref(),
            Some("allocator.h:231")
        );
        assert_eq!(
            super::raised_at("[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)").as_deref(),
            Some("tllmBuffers.h:112")
        );
        assert_eq!(
            super::raised_at("RuntimeError: CUDA error: an illegal memory access was encountered"),
            None
        );
    }
}
