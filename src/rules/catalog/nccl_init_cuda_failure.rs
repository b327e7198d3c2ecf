//! `nccl-init-cuda-failure`: NCCL's communicator initialisation failed on a
//! CUDA call (`init.cc:416 NCCL WARN Cuda failure 'operation not
//! supported'`, then `NCCL INFO init.cc:1437 -> 1` back up the stack): the
//! CUDA error is the reason, the failed NCCL initialisation is what stopped
//! the job. The CUDA catalog reads the error; this rule places it.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::catalogs::Via;
use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, distinct};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: NcclInitCudaFailure = NcclInitCudaFailure;

pub struct NcclInitCudaFailure;

/// The CUDA catalog's wrappers for NCCL's `NCCL WARN Cuda failure …`
/// (catalogs/cuda.toml): CUDACHECK's runtime string, CUCHECK's driver code.
const WRAPPERS: &[&str] = &[
    "cuda.wrapper.nccl-cuda-failure",
    "cuda.wrapper.nccl-cuda-failure-numbered",
];

/// NCCL's trace of a failed call back up through its initialisation,
/// `NCCL INFO init.cc:1437 -> 1`, and the WARN's own place when it is in
/// init.cc, or in misc/cudawrap.cc: the driver checks NCCL makes once per
/// process from `ncclCudaLibraryInit` when its first communicator is made
/// (2.19 – 2.20: `ncclIsCuMemSupported`'s `cuDeviceGet`, printed as
/// `misc/cudawrap.cc:36 NCCL WARN Cuda failure 3 'initialization error'`),
/// and at no later time.
static INIT_TRACE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"NCCL INFO init\.cc:[0-9]+ -> [0-9]+").expect("trace regex"));
static IN_INIT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b(?:init|cudawrap)\.cc:[0-9]+ NCCL WARN").expect("init regex"));
/// NCCL's own prefix, `host:pid:tid [cudaDev]`.
static PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:^|[\s:>\]])[A-Za-z0-9][0-9A-Za-z_.-]*:(?P<pid>[0-9]+):[0-9]+ \[(?P<dev>[0-9]+)\]",
    )
    .expect("prefix")
});

static META: RuleMeta = RuleMeta {
    id: "nccl-init-cuda-failure",
    category: Category::NcclInitFailure,
    severity: Severity::Critical,
    summary: "NCCL could not initialise its communicator: a CUDA call it makes at init failed (the CUDA error says which)",
    anchors: &["init.cc:"],
    doc: r#"
## What it means
While building its communicator (`ncclCommInitRank`, under vLLM's or
PyTorch's process group), NCCL made a CUDA call that failed and printed it:
`init.cc:416 NCCL WARN Cuda failure 'operation not supported'`, followed by
its trace of the failure back up through its initialisation (`NCCL INFO
init.cc:1437 -> 1`, 1 = ncclUnhandledCudaError). The framework then reports
`NCCL error: unhandled cuda error` and its workers exit. The CUDA error is
the reason; where it happened (NCCL's init, not a kernel of the model) is
what to fix.

## Why it happens
By the CUDA error: `operation not supported` from the memory-pool or
cuMem calls NCCL 2.19+ makes at init, on GPUs or drivers that lack them (a
virtual GPU with UVM disabled, some MIG or WSL set-ups, old drivers);
`initialization error` or `invalid device ordinal` from a process that sees
the wrong devices; a driver that does not match the CUDA runtime.

## How to confirm
Rerun with `NCCL_DEBUG=INFO`: the WARN's file and line say which step of the
init failed; `nvidia-smi -q` shows virtualisation and MIG mode; a plain CUDA
sample (or `torch.cuda` alone) on the same GPU shows whether CUDA works
outside NCCL.

## How to fix
Give NCCL what its init needs or avoid it: on a vGPU enable UVM or use an
NCCL version that does not need the failing call; try `NCCL_CUMEM_ENABLE=0`;
match the driver to the CUDA runtime; make each rank see its own GPU.

## Safety
Advice only: nothing is stopped or changed.
"#,
};

impl Rule for NcclInitCudaFailure {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let warns: Vec<(&Message, String)> = incident
            .known
            .iter()
            .filter(|k| matches!(k.hit.via, Via::Wrapper(w) if WRAPPERS.contains(&w.id.as_str())))
            // Out of memory at NCCL's init is a memory story: the OOM rules.
            .filter(|k| k.hit.row.and_then(|r| r.category) != Some(Category::CudaOom))
            .map(|k| {
                let msg = k
                    .hit
                    .get("msg")
                    .map(str::to_owned)
                    .or_else(|| k.hit.row.map(|r| r.title.clone()))
                    .unwrap_or_default();
                (&incident.facts.messages[k.message], msg)
            })
            .collect();
        let Some((_, what)) = warns.first() else {
            return;
        };
        // The failure traced back through NCCL's init, in the same input,
        // by the same process when its prefix says which.
        let pid_of = |m: &Message| {
            PREFIX
                .captures(&m.text)
                .and_then(|c| c["pid"].parse::<u32>().ok())
        };
        let traces: Vec<&Message> = crate::rules::support::matches(incident, &INIT_TRACE)
            .map(|(m, _)| m)
            .filter(|m| {
                warns.iter().any(|(w, _)| {
                    w.span.source == m.span.source
                        && m.span > w.span
                        && (pid_of(w).is_none() || pid_of(w) == pid_of(m))
                })
            })
            .collect();
        let in_init = warns.iter().any(|(w, _)| IN_INIT.is_match(&w.text));
        // PyTorch's report of the NCCL error carries NCCL's last warning
        // under it: the CUDA failure is that error's detail.
        let reported = warns
            .iter()
            .find_map(|(w, _)| nccl_error_above(incident, w));
        if traces.is_empty() && !in_init && reported.is_none() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = u32::try_from(warns.len()).unwrap_or(u32::MAX);
        for (m, n) in distinct(warns.iter().map(|(m, _)| *m)).into_iter().take(3) {
            let times = if n > 1 {
                format!(" ({n}x)")
            } else {
                String::new()
            };
            f.evidence(
                m.span,
                format!("a CUDA call NCCL made failed: {what}{times}"),
            );
        }
        cite_trace(incident, &mut f, warns[0].0, &traces);
        if let Some(m) = reported {
            cite_report(incident, &mut f, m, warns[0].0.span);
        }
        writers(&warns, &mut f);
        f.condition(
            "NCCL printed a CUDA failure (`NCCL WARN Cuda failure`)",
            true,
        );
        f.condition(
            "the failure is in NCCL's initialisation (init.cc, traced back through it, or NCCL's last warning under the framework's unhandled-cuda-error report)",
            true,
        );
        f.condition(
            "NCCL traced the failed call back (`init.cc:N -> code`)",
            !traces.is_empty(),
        );
        f.chain
            .push("the job's NCCL communicator was never built, so its ranks stopped".to_owned());
        f.chain.push(format!(
            "a CUDA call NCCL makes at initialisation failed: {what}"
        ));
        f.title = format!("NCCL's initialisation failed on a CUDA call: {what}");
        f.headline = format!(
            "NCCL could not initialise its communicator: a CUDA call it makes at init failed ({what}); the CUDA error says what this GPU or driver lacks."
        );
        f.explanation = "NCCL makes CUDA calls of its own while it builds a communicator (memory pools, cuMem allocations, peer access). One of them failed, so the communicator was never built and the framework's ranks exited with an NCCL error. The CUDA error names the missing capability: a virtual GPU or driver without the feature, the wrong devices visible, a driver that does not match the runtime.".to_owned();
        f.actions.extend(actions());
        f.confidence = confidence(&f, 0.75, 0.9);
        out.push(f);
    }
}

/// The last init.cc frame of the first WARN's thread: the init step that
/// returned the error, as printed (`init.cc:1462 -> 1`); else the first
/// init.cc frame of any writer.
fn cite_trace(incident: &Incident, f: &mut Finding, warn: &Message, traces: &[&Message]) {
    let last = crate::rules::support::nccl_trace::last_init_frame(incident, warn);
    match last.and_then(|m| Some((m, crate::rules::support::nccl_trace::frame_text(m)?))) {
        Some((m, text)) => f.evidence_marked(
            m.span,
            format!("NCCL traces the failure back up through its initialisation: {text} is the init step that returned it"),
            text,
        ),
        None => {
            if let Some(t) = traces.first() {
                f.evidence(
                    t.span,
                    "NCCL traces the failure back up through its initialisation (init.cc)",
                );
            }
        }
    }
}

/// What to do: see which step of NCCL's init fails, then avoid the call.
fn actions() -> Vec<Action> {
    vec![
        Action::advice(
            "rerun with NCCL_DEBUG=INFO to see which step of NCCL's init fails, and check the GPU's mode (virtual GPU, MIG) and driver against what that step needs",
            Some("nvidia-smi -q | grep -i -e 'Virtualization' -e 'MIG' -e 'Driver Version'"),
        ),
        Action::advice(
            "avoid the failing call: NCCL_CUMEM_ENABLE=0, another NCCL version, or enable the feature (UVM on a vGPU); make each rank see its own GPU",
            None,
        ),
    ]
}

/// Cites PyTorch's report `m` of the NCCL error and its interpretation of
/// the code (`ncclUnhandledCudaError: Call to CUDA function failed.`) on
/// the lines after it, up to NCCL's last warning at `warn`.
fn cite_report(incident: &Incident, f: &mut Finding, m: &Message, warn: crate::source::Span) {
    f.evidence(
        m.span,
        "the framework's NCCL error: unhandled cuda error, with NCCL's last warning under it",
    );
    for (n, _) in incident
        .known(UNHANDLED_CUDA)
        .filter(|(n, _)| n.span.source == m.span.source && n.span > m.span && n.span < warn)
    {
        f.evidence_once(
            n.span,
            "ncclUnhandledCudaError: a CUDA call inside NCCL failed",
        );
    }
}

/// PyTorch's `NCCL error in: …, unhandled cuda error` (the `nccl` catalog's
/// row) a few lines above the CUDA failure `w`, with `Last error:` right
/// before it: since PyTorch 1.13 (NCCL ≥ 2.13) `getNcclErrorDetailStr`
/// appends NCCL's last warning to the error it raises
/// (`ncclUnhandledCudaError: Call to CUDA function failed.` / `Last
/// error:` / `Cuda failure 'initialization error'`), so the CUDA failure
/// is what the NCCL error was. An illegal address under it is a kernel's
/// fault in a collective, not the communicator's build: the CUDA rules'.
fn nccl_error_above<'a>(incident: &'a Incident, w: &Message) -> Option<&'a Message> {
    let source = w.span.source;
    let line_before = w.span.line.checked_sub(1)?;
    let label = incident
        .facts
        .messages
        .iter()
        .find(|m| m.span.source == source && m.span.line == line_before)?;
    if !label.text.trim_end().ends_with("Last error:") {
        return None;
    }
    let illegal = incident.known.iter().any(|k| {
        incident.facts.messages[k.message].span == w.span
            && k.hit.row.and_then(|r| r.category) == Some(Category::CudaIllegalMemoryAccess)
    });
    if illegal {
        return None;
    }
    incident
        .known(UNHANDLED_CUDA)
        .map(|(m, _)| m)
        .filter(|m| {
            m.span.source == source && m.span < w.span && m.span.line + ABOVE >= w.span.line
        })
        .min_by_key(|m| m.span)
}

/// The `nccl` catalog's row for NCCL's `unhandled cuda error`.
const UNHANDLED_CUDA: &str = "nccl.unhandled-cuda-error";

/// How far above NCCL's last warning the framework's error may be: the
/// error line, `ncclUnhandledCudaError: …`, `Last error:`.
const ABOVE: u32 = 4;

/// The PIDs and CUDA devices of the ranks that printed the failures, from
/// NCCL's `host:pid:tid [dev]` prefix.
fn writers(warns: &[(&Message, String)], f: &mut Finding) {
    let mut pids = BTreeSet::new();
    let mut devs = BTreeSet::new();
    for (m, _) in warns {
        if let Some(c) = PREFIX.captures(&m.text) {
            pids.extend(c["pid"].parse::<u32>().ok());
            devs.extend(c["dev"].parse::<u32>().ok());
        }
    }
    f.entities.pids.extend(pids);
    f.entities.gpus.extend(devs);
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    #[test]
    fn a_cuda_failure_traced_back_through_init_is_an_nccl_init_failure() {
        // meta-pytorch/torchtune#2556 (CI, NCCL's memory-pool creation).
        let text = "2025-04-04T16:57:57.7153695Z [2025-04-04 16:57:39] ip-10-0-9-191:95209:95228 [0] init.cc:416 NCCL WARN Cuda failure 'operation not supported'\n2025-04-04T16:57:57.7153889Z ip-10-0-9-191:95209:95228 [0] NCCL INFO init.cc:1397 -> 1\n";
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::NcclInitFailure);
        assert!(f[0].entities.pids.contains(&95209), "{:?}", f[0].entities);
    }

    #[test]
    fn nccls_last_warning_under_pytorchs_report_is_the_init_failure() {
        // batch T 1273 (hiyouga/LLaMA-Factory, a pdsh-launched worker): the
        // CUDA failure comes as the `Last error:` of PyTorch's report, with
        // no NCCL prefix and no init.cc trace.
        let text = "w1: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1197, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.3\nw1: ncclUnhandledCudaError: Call to CUDA function failed.\nw1: Last error:\nw1: Cuda failure 'initialization error'\n";
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::NcclInitFailure);
        assert!(f[0].evidence.len() >= 3, "{:?}", f[0].evidence);
        // The same CUDA failure without PyTorch's report above it is not
        // placed in NCCL's init.
        assert!(findings("w1: Last error:\nw1: Cuda failure 'initialization error'\n").is_empty());
    }

    /// vllm-project/vllm#9369 (NCCL 2.20.5, driver 12.1): each rank's first
    /// CUDA driver check in cudawrap.cc fails with `initialization error`,
    /// before any init.cc trace: NCCL's CUDA set-up for its first
    /// communicator, so its initialisation, by the rank that printed it.
    #[test]
    fn a_cuda_failure_in_nccls_cuda_library_set_up_is_init() {
        let text = "kmaker-54-033138205093:44710:44710 [0] NCCL INFO cudaDriverVersion 12010
kmaker-54-033138205093:44710:44710 [0] misc/cudawrap.cc:36 NCCL WARN Cuda failure 3 'initialization error'
";
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::NcclInitFailure);
        assert!(f[0].entities.pids.contains(&44710), "{:?}", f[0].entities);
        assert!(f[0].entities.gpus.contains(&0), "{:?}", f[0].entities);
    }

    #[test]
    fn a_cuda_failure_in_a_collective_is_not_init() {
        // NVIDIA/TensorRT-LLM#1670: enqueue.cc, during a collective.
        let text = "VM-0-16-ubuntu:392:494 [2] enqueue.cc:54 NCCL WARN Cuda failure 'invalid resource handle'\n";
        assert!(findings(text).is_empty());
    }

    #[test]
    fn out_of_memory_at_init_is_left_to_the_memory_rules() {
        let text = "h:1:2 [0] init.cc:416 NCCL WARN Cuda failure 'out of memory'\nh:1:2 [0] NCCL INFO init.cc:1397 -> 1\n";
        assert!(findings(text).is_empty());
    }
}
