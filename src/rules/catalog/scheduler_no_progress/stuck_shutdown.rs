//! The engine's status lines stop while a request runs with the KV cache
//! nearly full, and the server's own shutdown then never finishes: the
//! front-end waits for the request the engine no longer advances (vLLM
//! 0.2.x at KV exhaustion, https://github.com/vllm-project/vllm/issues/1879:
//! `GPU KV cache usage` climbing to 97.3%, then silence; Ctrl-C reaches
//! uvicorn's `Waiting for background tasks to complete.` and no further).

use super::{META, Status, state};
use crate::correlate::Incident;
use crate::model::{ServerEventKind, Uvicorn};
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding};
use crate::source::Span;

/// KV cache usage, in percent, from which a running request is about to
/// need preemption (the engine swaps or recomputes to go on).
const NEAR_FULL_KV_PCT: f64 = 95.0;

/// The finding, when the last status line of `lines` (one input, in order)
/// has a request running at `NEAR_FULL_KV_PCT` or more, no status line
/// follows it, and the input's last shutdown line after it is uvicorn's
/// wait for the requests in flight.
pub(super) fn finding(incident: &Incident, lines: &[&Status]) -> Option<Finding> {
    let last = lines.last()?;
    let kv = last.kv_pct?;
    if last.running == 0 || kv < NEAR_FULL_KV_PCT {
        return None;
    }
    let source = last.m.span.source;
    let after = |span: Span| span.source == source && span > last.m.span;
    // uvicorn's shutdown lines after the last status line: the last wait
    // for the requests in flight, and nothing of a shutdown getting past it.
    let shutdown = || {
        incident
            .facts
            .server_events
            .iter()
            .filter_map(|e| match &e.kind {
                ServerEventKind::Uvicorn(u) if after(e.span) => Some((e.span, u)),
                _ => None,
            })
    };
    let wait = shutdown()
        .filter(|(_, u)| matches!(u, Uvicorn::WaitingForRequests))
        .map(|(span, _)| span)
        .next_back()?;
    if shutdown().any(|(span, u)| {
        span > wait
            && matches!(
                u,
                Uvicorn::ShutdownProceeding | Uvicorn::FinishedProcess { .. }
            )
    }) {
        return None;
    }
    let mut f = Finding::new(META.id, Category::ServerHang, META.severity);
    let rising: Vec<&&Status> = lines.iter().rev().take_while(|s| s.running > 0).collect();
    if let Some(first) = rising.last().filter(|s| s.m.span != last.m.span) {
        f.evidence(
            first.m.span,
            format!("a request running, the KV cache filling: {}", state(first)),
        );
    }
    f.evidence(
        last.m.span,
        format!(
            "the engine's last status line: a request still running with the GPU KV cache at {kv:.1}%; none follows"
        ),
    );
    f.evidence(
        wait,
        "asked to stop, the server waits for the request in flight and never finishes shutting down",
    );
    f.condition(
        format!("the last status line has a request running with the KV cache at {NEAR_FULL_KV_PCT}% or more"),
        true,
    );
    f.condition(
        "no status line follows it: the engine stopped reporting",
        true,
    );
    f.condition(
        "the server's shutdown stops at waiting for its requests in flight",
        true,
    );
    f.title =
        format!("the engine stopped with the KV cache at {kv:.1}% and the server cannot shut down");
    f.headline = format!(
        "The engine hung as the GPU KV cache filled: its last status line shows a request running with the cache at {kv:.1}% ({}), then it logs nothing more, and when asked to stop the server waits for that request forever. Nothing failed or died: the engine stopped making progress where the request needed more KV blocks than were free.",
        state(last)
    );
    f.chain
        .push("a long generation filled the GPU KV cache".to_owned());
    f.chain.push(
        "the engine stopped advancing where it had to preempt (swap or recompute) the request"
            .to_owned(),
    );
    f.chain.push(
        "the request never finishes, so the server's graceful shutdown waits on it".to_owned(),
    );
    f.explanation = "vLLM logs its scheduler's state every few seconds while it has work; the lines stop while a request runs. A healthy engine near a full KV cache preempts the request (swaps it to the CPU KV cache or recomputes it later) and goes on; this one made no further progress, and uvicorn's graceful shutdown then waits for that request's task without end. Early vLLM (0.2.x) hung this way at KV exhaustion, on one GPU and with tensor parallelism.".to_owned();
    f.actions.push(Action::advice(
        "while it is stuck, dump the engine's stacks to see where it waits; then stop it for good (Ctrl-C again, or kill -9 the server and its workers): the graceful stop will not finish",
        Some("py-spy dump --pid PID"),
    ));
    f.actions.push(Action::advice(
        "upgrade vLLM; until then avoid the swap path (--swap-space 0, the workaround posted for this hang) and keep requests within the cache: a lower --max-model-len or --max-num-seqs, a higher --gpu-memory-utilization",
        None,
    ));
    f.confidence = confidence(&f, 0.4, 0.6);
    Some(f)
}
