//! A unit's exit read from systemd's own `Failed at step X spawning …`
//! line when no line of the exit is in the inputs (a paste that stops before
//! PID 1's `Main process exited, … status=217/USER`).

use super::{Exit, exec};
use crate::correlate::{Incident, UnitEventKind};

/// Without any line of the exit, systemd's own line that it failed at a
/// step of setting up `unit`'s command (`ntpd-rs.service: Failed at
/// step USER spawning /usr/local/bin/ntp-daemon: No such process`, a paste
/// that stops before PID 1's `Main process exited, code=exited,
/// status=217/USER`): the forked child exits with the step's own status
/// (systemd's exit-status table), so the step is the exit.
pub(super) fn step_failures<'a>(incident: &'a Incident, unit: &str) -> Vec<Exit<'a>> {
    incident
        .known(exec::FAILED_AT_STEP)
        .filter(|(_, h)| h.get("unit") == Some(unit))
        .filter_map(|(m, h)| {
            let name = h.get("step")?;
            let step = crate::correlate::SYSTEMD_STEPS
                .iter()
                .find(|s| s.name.eq_ignore_ascii_case(name))?;
            let status = format!("{}/{}", step.code, step.name);
            (!sibling_exited_with(incident, unit, &status)).then(|| Exit {
                status: status.into(),
                span: m.span,
                pid: None,
                control: false,
                step_only: true,
            })
        })
        .take(1)
        .collect()
}

/// Whether another instance of `unit`'s template (`name@a.service` beside
/// `name@b.service`) exited with `status`: a step line of one instance
/// beside the other's exit is that exit's cause (resticprofile's instances
/// share a working directory), not a failure of its own.
fn sibling_exited_with(incident: &Incident, unit: &str, status: &str) -> bool {
    let Some((template, _)) = unit.split_once('@') else {
        return false;
    };
    incident.units.iter().any(|(name, facts)| {
        name != unit
            && name.split_once('@').is_some_and(|(t, _)| t == template)
            && facts.events.iter().any(|e| {
                matches!(&e.kind, UnitEventKind::MainProcessExited { code, status: s }
                    if code == "exited" && s == status)
            })
    })
}
