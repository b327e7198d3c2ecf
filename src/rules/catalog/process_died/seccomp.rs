//! A unit killed by SIGSYS: seccomp's kill for a system call outside the
//! unit's SystemCallFilter=, a unit failure (its own settings stop it),
//! with the advice that finds the call and allows it.

use super::Death;
use crate::correlate::{Incident, UnitEventKind};
use crate::rules::{Action, Category, Finding};

/// Whether `status` as systemd prints it (`31/SYS`) is SIGSYS: the
/// kernel's kill for a system call a seccomp filter forbids (31 on x86 and
/// Arm, the platforms systemd's units run these servers on).
fn is_sigsys(status: &str) -> bool {
    let (number, name) = status.split_once('/').unwrap_or((status, ""));
    name == "SYS" || (name.is_empty() && number == "31")
}

/// A unit's main process killed by SIGSYS (`Main process exited,
/// code=killed, status=31/SYS`, or `code=dumped`; coredumpctl's `Signal: 31
/// (SYS)` of a unit's core): seccomp killed it for a system call outside
/// the unit's SystemCallFilter= (systemd.exec(5): `SystemCallErrorNumber=`
/// unset, a forbidden call kills the process with SIGSYS).
fn killed(incident: &Incident, death: &Death) -> bool {
    let Some(unit) = death.unit.as_deref() else {
        return false;
    };
    if death.signal == Some(31) {
        return true;
    }
    incident.units.get(unit).is_some_and(|u| {
        u.events.iter().any(|e| {
            e.span == death.span
                && matches!(&e.kind, UnitEventKind::MainProcessExited { code, status }
                    if (code == "killed" || code == "dumped") && is_sigsys(status))
        })
    })
}

/// The category of a unit seccomp killed: its own settings stop it, a
/// unit failure; `None` for any other death.
pub(super) fn category(incident: &Incident, death: &Death) -> Option<Category> {
    killed(incident, death).then_some(Category::UnitCrashLoop)
}

/// The advice for a unit seccomp killed: the call is in the audit log (its
/// `syscall=` number) or at the top of the core's stack; allow it, or its
/// group, in a drop-in, or take the unit file of a release that allows it.
pub(super) fn advise(incident: &Incident, f: &mut Finding, death: &Death) {
    let Some(unit) = death.unit.as_deref().filter(|_| killed(incident, death)) else {
        return;
    };
    f.chain.push(format!(
        "SIGSYS is seccomp's kill: {unit}'s process made a system call its SystemCallFilter= does not allow"
    ));
    f.condition(
        format!("{unit} was killed by SIGSYS: a system call outside its SystemCallFilter="),
        true,
    );
    f.actions.push(Action::advice(
        format!(
            "find the system call seccomp refused (the audit log's SECCOMP record names it by number, the core's stack by name), then allow it or its group in {unit}'s SystemCallFilter= with a drop-in (`systemctl edit {unit}`), or install the unit file of a release that allows it"
        ),
        Some(&format!(
            "ausearch -m SECCOMP -ts today; coredumpctl info _SYSTEMD_UNIT={unit}; systemctl cat {unit} | grep -i SystemCallFilter"
        )),
    ));
}
