//! A finding's entities from its evidence: every PID and GPU that a cited
//! line states as a fact (a GPU process row, a `ps` row), so that no rule
//! has to list them by hand and none forgets one.

use std::collections::BTreeSet;

use crate::correlate::Incident;
use crate::rules::Finding;
use crate::source::Span;

/// Adds to `f.entities` the PIDs (and their GPUs) of the process rows its
/// evidence cites. GPU rows cited for contrast (an idle GPU of the group)
/// add nothing: a GPU is the finding's only through a process on it or the
/// rule's own say.
pub fn from_evidence(incident: &Incident, f: &mut Finding) {
    let cited: BTreeSet<Span> = f.evidence.iter().map(|e| e.span).collect();
    if cited.is_empty() {
        return;
    }
    for p in &incident.gpu_processes {
        if p.spans.iter().any(|s| cited.contains(s)) {
            f.entities.pids.insert(p.pid);
            if let Some(g) = p.gpu {
                f.entities.gpus.insert(g);
            }
        }
    }
    for r in &incident.facts.ps {
        if cited.contains(&r.span) {
            f.entities.pids.insert(r.pid);
        }
    }
}
