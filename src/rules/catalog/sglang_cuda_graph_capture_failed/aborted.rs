//! A process that aborts while SGLang's capture progress bar is its last
//! stage: `Capturing batches (bs=512 avail_mem=19.45 GB):   0%|…` then a
//! C++ `terminate called after throwing an instance of '…'` (even glued to
//! the bar on one line) or `Fatal Python error: Aborted`, and no `Capture
//! cuda graph end`. The capture failed inside a kernel's code, not for
//! memory: the bar's `avail_mem` says what was still free.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, matches, server::shorten};
use crate::rules::{Action, Category, Finding, Severity};

/// SGLang's capture progress bar (`bs=` since 0.4; before, `avail_mem` only).
static BAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Capturing batches \((?:bs=(?P<bs>[0-9]+) )?avail_mem=(?P<mem>[0-9.]+) GB\)")
        .expect("capture bar regex")
});
/// SGLang's own line when every batch size is captured.
static END: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Capture cuda graph end").expect("capture end regex"));
/// The C++ runtime's abort and CPython's.
static ABORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"terminate called after throwing an instance of '(?P<ty>[^']+)'|Fatal Python error: Aborted")
        .expect("abort regex")
});
static WHAT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*what\(\):\s+(?P<what>.+)").expect("what regex"));
/// The first Python module an exception's text names (`<cutlass._mlir…`).
static MODULE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"<(?P<m>[a-z_][a-z0-9_]*)\.[a-z_]").expect("module regex"));

pub(super) fn check(incident: &Incident, out: &mut Vec<Finding>, id: &'static str) {
    let Some((bar, caps)) = matches(incident, &BAR).last() else {
        return;
    };
    let after = |m: &&Message| m.span.source == bar.span.source && m.span >= bar.span;
    let ended = matches(incident, &END).any(|(m, _)| after(&m));
    let aborts: Vec<(&Message, Option<String>)> = matches(incident, &ABORT)
        .filter(|(m, _)| after(m))
        .map(|(m, c)| (m, c.name("ty").map(|t| t.as_str().to_owned())))
        .collect();
    if aborts.is_empty() || ended {
        return;
    }
    let ty = aborts.iter().find_map(|(_, t)| t.clone());
    let what = incident
        .facts
        .messages
        .iter()
        .filter(|m| after(m))
        .find_map(|m| WHAT.captures(&m.text).map(|c| (m, c["what"].to_owned())));
    let module = what
        .as_ref()
        .and_then(|(_, w)| MODULE.captures(w).map(|c| c["m"].to_owned()));

    let mut f = Finding::new(id, Category::CudaGraphCaptureFailure, Severity::Critical);
    let mem = &caps["mem"];
    let bs = caps
        .name("bs")
        .map(|b| format!("bs={}, ", b.as_str()))
        .unwrap_or_default();
    f.evidence_marked(
        bar.span,
        format!("SGLang was capturing CUDA graphs ({bs}{mem} GB free) and never finished"),
        format!("avail_mem={mem} GB"),
    );
    for (m, t) in aborts.iter().take(2) {
        let note = match t {
            Some(t) => format!("the process aborted on an uncaught C++ exception ({t})"),
            None => "CPython aborted".to_owned(),
        };
        if !f.evidence.iter().any(|e| e.span == m.span) {
            f.evidence(m.span, note);
        } else {
            f.evidence(m.span, format!("{note}, on the progress bar's line"));
        }
    }
    if let Some((m, w)) = &what {
        f.evidence(m.span, format!("the exception says: {}", shorten(w)));
    }
    let from = module
        .as_deref()
        .map(|m| format!(" in `{m}`'s code"))
        .or_else(|| ty.as_deref().map(|t| format!(" ({t})")))
        .unwrap_or_default();
    f.condition(
        "the process aborted after SGLang began capturing CUDA graphs",
        true,
    );
    f.condition("no `Capture cuda graph end` follows", true);
    f.condition(
        format!("{mem} GB was still free at the capture: not an out-of-memory failure"),
        true,
    );
    f.chain
        .push("the SGLang server died at start-up".to_owned());
    f.chain.push(format!(
        "a kernel failed while its CUDA graph was captured{from}"
    ));
    f.title = "CUDA graph capture aborted".to_owned();
    f.headline = format!(
        "SGLang aborted while capturing its CUDA graphs{from}; {mem} GB was free, so memory was not the cause."
    );
    f.explanation = "SGLang runs each decode batch size once under CUDA-graph capture before it serves. A kernel library that throws while being traced or captured (a JIT DSL whose compiled bindings do not match its Python package, a kernel built for another CUDA) takes the process down with a C++ abort; the progress bar is the last stage printed.".to_owned();
    f.actions.push(Action::advice(
        "start once with --disable-cuda-graph to confirm the capture is the trigger",
        None,
    ));
    f.actions.push(Action::advice(
        match &module {
            Some(m) => format!(
                "reinstall `{m}`'s packages at the versions this SGLang release pins (pip check; pip install --force-reinstall), then start again"
            ),
            None => "reinstall the kernel packages (sgl-kernel, flashinfer) at the versions this SGLang release pins, then start again".to_owned(),
        },
        Some("pip check; pip list 2>/dev/null | grep -i -E 'sglang|sgl-kernel|flashinfer|cutlass|torch'"),
    ));
    f.confidence = confidence(&f, 0.6, 0.85);
    out.push(f);
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    /// https://github.com/sgl-project/sglang/issues/28232: the abort glued
    /// to the first batch's bar, CUTLASS DSL's exception under it.
    const ABORTED: &str = "\
Capturing batches (bs=512 avail_mem=19.45 GB):   0%|          | 0/52 [00:00<?, ?it/s]terminate called after throwing an instance of 'nanobind::builtin_exception'
  what():  Expected an MLIR object (got [<cutlass._mlir._mlir_libs._cutlass_ir._mlir.ir.OpResult object at 0x7f72f4382db0>, <cutlass._mlir._mlir_libs._cutlass_ir._mlir.ir.OpResult object at 0x7f72f43825b0>]).
Fatal Python error: Aborted
";

    #[test]
    fn an_abort_under_the_capture_bar_is_a_capture_failure_not_memory() {
        let f = crate::testing::findings_of(super::super::META.id, ABORTED);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].category, Category::CudaGraphCaptureFailure);
        assert!(f[0].headline.contains("`cutlass`"), "{}", f[0].headline);
        assert!(
            f[0].headline.contains("19.45 GB was free"),
            "{}",
            f[0].headline
        );
        let cited: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
        assert_eq!(cited, [1, 3, 2]);
    }

    /// https://github.com/sgl-project/sglang/pull/4826: the bar counting
    /// to 100% with no abort is a healthy start; and the same abort lines
    /// put before the bar (reordered from the paste above, not copied) did
    /// not happen during a capture.
    #[test]
    fn a_bar_without_an_abort_after_it_is_no_finding() {
        let healthy = "\
Capturing batches (avail_mem=12.55 GB):   0%|                                                                                                                       | 0/23 [00:00<?, ?it/s]2025-03-27 21:33:31,890 - INFO - flashinfer.jit: Loading JIT ops: batch_decode_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_qk_256_head_dim_vo_256_posenc_0_use_swa_False_use_logits_cap_False
Capturing batches (avail_mem=9.72 GB): 100%|███████████████████████████████████████████████████████████████████████████████████████████████████████████████| 23/23 [00:08<00:00,  2.59it/s]
";
        assert!(crate::testing::findings_of(super::super::META.id, healthy).is_empty());
        let lines: Vec<&str> = ABORTED.lines().collect();
        let before = format!("{}\n{}\n{}", lines[1], lines[2], healthy);
        assert!(crate::testing::findings_of(super::super::META.id, &before).is_empty());
    }
}
