//! The container runtime's own account of the kill: docker compose's
//! `<service> exited with code 137` after the shell's `Killed` in the same
//! input (its row in catalogs/stacks-containers.toml). Cited with the
//! kill, it is the same death told twice; the row's own finding then says
//! less than this one and folds into it (`rules::drop_restated`: a
//! fallback whose first line a stronger finding cites goes).

use crate::correlate::Incident;
use crate::rules::Finding;
use crate::source::Span;

/// docker compose's report of a container ended by SIGKILL.
const EXIT_137: &str = "stacks-containers.compose-exit-137";

/// Cites the first such report after the kill, in its input.
pub(super) fn cite(incident: &Incident, kill: Span, f: &mut Finding) {
    let after = incident
        .known(EXIT_137)
        .find(|(m, _)| m.span.source == kill.source && m.span > kill);
    if let Some((m, hit)) = after {
        let service = hit.get("service").unwrap_or("the container");
        f.evidence(
            m.span,
            format!("{service} exited with code 137 (128 + SIGKILL): the same kill, as the container runtime then reports it"),
        );
    }
}
