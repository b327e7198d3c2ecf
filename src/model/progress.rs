//! vLLM's engine moving again after a wait for its workers.

use crate::source::Span;

/// In one input, the first line that shows the engine making progress (a
/// throughput record, `Application startup complete`, a `POST /v1/…` answered
/// 200) after the last shared-memory broadcast wait (`No available … block
/// found in 60 seconds`). Ingest follows every line for it at constant cost,
/// so that the chatty progress lines need not be kept as messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resumed {
    /// The last wait of the input.
    pub wait: Span,
    /// The first progress line below it.
    pub progress: Span,
}
