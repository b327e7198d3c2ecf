//! `unit-exit-nonzero`: a unit's main process exited with a failure status.
//! The generic fallback: the reason is in the service's own lines.

use crate::correlate::{Incident, UnitEventKind};
use crate::model::ServerEventKind;
use crate::rules::support::{confidence, fabric_manager_irrelevant};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: UnitExitNonzero = UnitExitNonzero;

pub struct UnitExitNonzero;

static META: RuleMeta = RuleMeta {
    id: "unit-exit-nonzero",
    category: Category::Unknown,
    severity: Severity::Error,
    summary: "a unit's main process exited by itself with a failure status",
    anchors: &["Main process exited, code=exited"],
    doc: r#"
## What it means
`Main process exited, code=exited, status=1/FAILURE`: the server ended by
itself with a non-zero status (`137/n/a` or `139/n/a` when a wrapper shell
reports a child killed by signal 9 or 11).

## Why it happens
Any unhandled error. This rule is the fallback: a more specific finding of
the same report, when there is one, names the cause; otherwise the last
exception before the exit is the place to start.

## How to confirm
`journalctl -u UNIT` just before the exit line.

## How to fix
Fix what the last exception says; then restart the unit.

## Safety
Advice only.
"#,
};

impl Rule for UnitExitNonzero {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for (unit, facts) in &incident.units {
            let exits: Vec<_> = facts
                .events
                .iter()
                .filter_map(|e| match &e.kind {
                    UnitEventKind::MainProcessExited { code, status }
                        if code == "exited" && !status.starts_with("0/") =>
                    {
                        Some((status.as_str(), e.span))
                    }
                    _ => None,
                })
                .collect();
            let Some(&(status, span)) = exits.first() else {
                continue;
            };
            // Not if: the Fabric Manager failing on a host without NVSwitch
            // is expected (fabric-manager-no-nvswitch says so).
            if unit == "nvidia-fabricmanager.service"
                && fabric_manager_irrelevant(incident).is_some()
            {
                continue;
            }
            let mut f = Finding::new(META.id, META.category, META.severity);
            f.entities.units.insert(unit.clone());
            f.occurrences = exits.len() as u32;
            f.evidence(span, format!("{unit} exited with status {status}"));
            if let Some(result) = crate::rules::support::unit_event(incident, unit, |k| {
                matches!(k, UnitEventKind::FailedWithResult(_))
            }) {
                f.evidence(result, "systemd marked the unit failed");
            }
            // The last exception written before the exit, if the log has one.
            let last_exception = incident
                .facts
                .server_events
                .iter()
                .rev()
                .filter(|e| e.span.source != span.source || e.span.line < span.line)
                .find_map(|e| match &e.kind {
                    ServerEventKind::Exception(x) => Some((e.span, &x.name, &x.message)),
                    _ => None,
                });
            if let Some((espan, name, _)) = last_exception {
                f.evidence(espan, format!("the last exception before the exit: {name}"));
            }
            f.condition(
                format!("{unit} exited by itself with a failure status"),
                true,
            );
            f.condition(
                "the log shows the exception that ended it",
                last_exception.is_some(),
            );
            f.title = format!("{unit} exited with status {status}");
            f.headline = match last_exception {
                Some((_, name, message)) => format!(
                    "{unit} exited with status {status} after {name}: {}",
                    shorten(message)
                ),
                None => format!("{unit} exited with status {status}; its log does not say why."),
            };
            f.chain.push(format!("{unit} exited with status {status}"));
            if let Some((_, name, message)) = last_exception {
                f.chain.push(format!("{name}: {}", shorten(message)));
            }
            f.explanation = "The generic finding for a server that ended by itself; a more specific finding, when present, names the cause.".to_owned();
            f.actions.push(Action::advice(
                format!("read {unit}'s lines just before the exit"),
                Some(&format!("journalctl -u {unit} -n 100 --no-pager")),
            ));
            f.confidence = confidence(&f, 0.3, 0.5);
            out.push(f);
        }
    }
}

/// The first line of a message, cut to fit a headline.
fn shorten(text: &str) -> String {
    let text = text.lines().next().unwrap_or("");
    match text.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}
