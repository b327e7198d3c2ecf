//! A unit restarted whose stop "succeeded" while its server kept running:
//! `systemctl status` lists the unit's `ExecStop=` (or `ExecReload=`)
//! process as exited `status=0/SUCCESS`, then the `ExecStart=` that ran
//! after it failing, and the failed bind's line is that start's own (the
//! journal's `nginx[20640]:` is the ExecStart's PID). The unit was running
//! (it had something to stop or reload), the stop reported success, yet
//! the port the server serves was still held: the stop did not reach the
//! running instance (an init script that signals the PID in a pid file the
//! server no longer writes, a master started outside the unit), which
//! keeps the port.

use super::{Earlier, Seen};
use crate::correlate::Incident;
use crate::model::{Message, UnitProcess, UnitStatus};

/// The settings whose success says the unit had a running instance.
const STOPPED: &[&str] = &["ExecStop", "ExecReload"];

/// What a unit's stop that missed its server tells of the earlier
/// instance, when a failed bind in `binds` is the failed start's.
pub(super) fn stopped_unit(incident: &Incident, binds: &[&Message]) -> Option<Earlier> {
    let writers: Vec<u32> = binds
        .iter()
        .filter_map(|m| m.pid.or_else(|| incident.journal_writer(m.span)))
        .collect();
    incident.facts.unit_statuses.iter().find_map(|s| {
        let start = failed_start(s)?;
        if !writers.contains(&start.pid) {
            return None;
        }
        // Ran before the start (a lower PID on the same boot) and succeeded.
        let stops: Vec<&UnitProcess> = s
            .processes
            .iter()
            .filter(|p| {
                p.setting.as_deref().is_some_and(|x| STOPPED.contains(&x))
                    && p.pid < start.pid
                    && p.exit.as_deref().is_some_and(|e| e.contains("status=0/"))
            })
            .collect();
        if !stops.iter().any(|p| p.setting.as_deref() == Some("ExecStop")) {
            return None;
        }
        let lines = stops
            .iter()
            .map(|p| {
                let what = p.setting.as_deref().unwrap_or("ExecStop");
                (
                    p.span,
                    format!("{}'s {what}= ran and exited with success before the start: the unit had a running instance and believed it stopped", s.unit),
                )
            })
            .chain(std::iter::once((
                start.span,
                format!("then its ExecStart= (PID {}) failed: the start that could not bind", start.pid),
            )))
            .collect();
        Some(Earlier {
            lines,
            seen: Seen::Stopped,
            shows: "the paste shows the unit's stop exiting with success right before the start that could not bind, so the stop did not reach the running server (an init script signalling a PID file the server no longer writes, or a server started outside the unit)",
            stop: Some(
                "find the old server's master by the port or `pgrep -af`, stop it through its own PID (`kill -QUIT` for nginx, `kill -TERM` otherwise), start the unit once, and make the unit's PIDFile= (or its init script's) match the pid file the server writes",
            ),
            pids: Vec::new(),
        })
    })
}

/// The unit's `ExecStart=` process that failed, when the block lists one.
fn failed_start(s: &UnitStatus) -> Option<&UnitProcess> {
    s.processes.iter().find(|p| {
        p.setting.as_deref() == Some("ExecStart")
            && p.exit.as_deref().is_some_and(|e| !e.contains("status=0/"))
    })
}
