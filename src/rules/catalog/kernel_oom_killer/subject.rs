//! Whether the inputs are about the victim of a kill: the failures they
//! show besides the kernel's are the victim's absence (a FUSE mount whose
//! daemon is gone answers `Transport endpoint is not connected`) or lines
//! that name it, and nothing else failed. A small victim is then the
//! workload whose death the paste reports, not a bystander.

use std::collections::BTreeSet;

use super::Kill;
use crate::correlate::Incident;
use crate::model::Framework;
use crate::rules::unknown::ERRORISH;
use crate::source::Span;

/// A FUSE mount's accesses failing once its daemon is gone
/// (catalogs/kernel.toml).
pub(super) const FUSE_GONE: &str = "kernel.fuse-endpoint-not-connected";

/// The lines, other than the kernel's, that show the victim gone: its
/// mount's failed accesses, or lines naming it (its `comm`). Empty when
/// the inputs are not about it: nothing shows it, a model server's lines
/// are there (a server that lived through the kill), or a line fails for
/// another reason.
pub(super) fn victims_absence(incident: &Incident, kills: &[Kill<'_>]) -> Vec<Span> {
    let comms: Vec<&str> = kills
        .iter()
        .filter_map(|k| k.oom.comm.as_deref())
        .filter(|c| c.len() >= 3)
        .collect();
    let kernel: BTreeSet<Span> = incident
        .facts
        .kernel_events
        .iter()
        .map(|e| e.span)
        .chain(
            incident
                .known
                .iter()
                .filter(|k| k.hit.row.is_some_and(|r| r.id.starts_with("kernel.")))
                .filter(|k| k.hit.row.is_some_and(|r| r.id != FUSE_GONE))
                .map(|k| incident.facts.messages[k.message].span),
        )
        .collect();
    let gone: BTreeSet<Span> = incident.known(FUSE_GONE).map(|(m, _)| m.span).collect();
    if incident
        .facts
        .server_events
        .iter()
        .any(|e| e.framework != Framework::Unknown)
    {
        return Vec::new();
    }
    let mut about = Vec::new();
    for m in &incident.facts.messages {
        // The kernel's own report, in lines no reader took for it (a
        // summary cut by the paste: `oom-kill: ... task=llama-server`).
        let lower = m.text.to_ascii_lowercase();
        if kernel.contains(&m.span) || lower.contains("oom") || lower.contains("killed process") {
            continue;
        }
        let named = comms.iter().any(|c| m.text.contains(c));
        if gone.contains(&m.span) || named {
            about.push(m.span);
        } else if ERRORISH.is_match(&m.text) {
            return Vec::new();
        }
    }
    about
}

/// Cites the lines that show the victim gone (two at most, distinct
/// texts), and puts its absence at the head of the chain.
pub(super) fn cite(
    f: &mut crate::rules::Finding,
    incident: &Incident,
    absence: &[Span],
    victim: &str,
) {
    let gone: BTreeSet<Span> = incident.known(FUSE_GONE).map(|(m, _)| m.span).collect();
    let mut texts = BTreeSet::new();
    for s in absence {
        let Ok(i) = incident.facts.messages.binary_search_by_key(s, |m| m.span) else {
            continue;
        };
        if texts.len() >= 2 || !texts.insert(incident.facts.messages[i].text.as_str()) {
            continue;
        }
        f.evidence(
            *s,
            if gone.contains(s) {
                format!("the mount's accesses fail with ENOTCONN (`Transport endpoint is not connected`): the FUSE daemon serving it is gone, killed as {victim}")
            } else {
                format!("the inputs' own line about the victim, {victim}")
            },
        );
    }
    if !gone.is_empty() {
        f.chain.insert(
            0,
            "accesses to the FUSE mount fail: Transport endpoint is not connected (its daemon is gone)"
                .to_owned(),
        );
    }
}
