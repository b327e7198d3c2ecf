//! An error of the dead process's own, wherever the paste put it.

use crate::correlate::Incident;
use crate::model::ServerEventKind;
use crate::source::Span;

/// Whether the same input as `kill` shows a process's own failure on
/// another line, before or after it: a CUDA out-of-memory error or a C++
/// abort, which only the failing process prints (vLLM's `Engine core
/// initialization failed` is its wrapper; the engine's own lines may be
/// pasted under it).
pub(super) fn anywhere(incident: &Incident, kill: Span) -> bool {
    incident.facts.server_events.iter().any(|e| {
        e.span.source == kill.source
            && e.span != kill
            && matches!(
                e.kind,
                ServerEventKind::CudaOom(_) | ServerEventKind::CppAbort(_)
            )
    })
}
