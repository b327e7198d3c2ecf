//! systemd's word that it could not execute a unit's command (`Failed at
//! step EXEC spawning /usr/bin/ollama: No such file or directory`, `Failed
//! to locate executable PATH: …`), joined to the unit's exit with one of
//! systemd's own statuses (`203/EXEC`, `200/CHDIR`, `226/NAMESPACE`)
//! whatever the order of the lines (`journalctl --reverse` prints the
//! newest first): the path and the errno are the reason.

use crate::correlate::Incident;
use crate::rules::{Action, Finding};
use crate::source::Span;

/// The catalog row of systemd's failure to set up or execute a command.
const FAILED_AT_STEP: &str = "systemd.failed-at-step";

/// systemd's line about the unit's command that failed.
pub(super) struct ExecFailure<'a> {
    pub span: Span,
    /// The command's path, when the line names it.
    pub path: Option<&'a str>,
    /// The error as systemd printed it (`No such file or directory`).
    pub errno: &'a str,
}

/// Whether `status` is one of systemd's own exit statuses (200–243): it
/// failed to set up or execute the command, which never ran.
pub(super) fn is_systemds(status: &str) -> bool {
    let code = status.split_once('/').map_or(status, |(c, _)| c);
    code.parse::<u32>().is_ok_and(|c| (200..=243).contains(&c))
}

/// systemd's line about `unit`'s command for its exit at `exit` with
/// `status`, in the same input, before or after it: a line that names the
/// unit, or, where the line names none (older systemd, `journalctl -o
/// cat`), when `unit` is the only unit that exited with one of systemd's
/// statuses. Its step must be the status's (`EXEC` for `203/EXEC`); a
/// line without a step is about executing. The nearest such line that
/// names the path, else the nearest.
pub(super) fn of<'a>(
    incident: &'a Incident,
    unit: &str,
    status: &str,
    exit: Span,
    only_unit: bool,
) -> Option<ExecFailure<'a>> {
    if !is_systemds(status) {
        return None;
    }
    let name = status.split_once('/').map_or("", |(_, n)| n);
    incident
        .known(FAILED_AT_STEP)
        .filter(|(m, _)| m.span.source == exit.source)
        .filter(|(_, h)| h.get("step").unwrap_or("EXEC").eq_ignore_ascii_case(name))
        .filter(|(_, h)| h.get("unit").map_or(only_unit, |u| u == unit))
        .min_by_key(|(m, h)| (h.get("path").is_none(), m.span.line.abs_diff(exit.line)))
        .map(|(m, h)| ExecFailure {
            span: m.span,
            path: h.get("path"),
            errno: h.get("msg").unwrap_or("").trim(),
        })
}

impl ExecFailure<'_> {
    /// What the errno says of the command, for the headline.
    fn meaning(&self) -> Option<&'static str> {
        let e = self.errno.to_ascii_lowercase();
        if e.contains("no such file") {
            Some("ExecStart= names a path that does not exist on this host")
        } else if e.contains("permission denied") {
            Some(
                "the file is not executable for the unit's user, or its file system is mounted noexec",
            )
        } else if e.contains("exec format error") {
            Some("the file is not a program for this machine, or a script without its #! line")
        } else {
            None
        }
    }

    fn command(&self) -> String {
        self.path
            .map_or_else(|| "its command".to_owned(), str::to_owned)
    }

    /// The cause, for the finding's chain.
    pub(super) fn because(&self) -> String {
        format!(
            "systemd could not execute {}: {}",
            self.command(),
            self.errno
        )
    }

    /// Cites the line, sets the headline and adds the advice.
    pub(super) fn explain(&self, f: &mut Finding, unit: &str, status: &str) {
        let command = self.command();
        f.evidence_marked(
            self.span,
            format!("systemd could not execute {command}: {}", self.errno),
            self.path.unwrap_or(self.errno),
        );
        let meaning = self.meaning().map(|m| format!(": {m}")).unwrap_or_default();
        f.headline = format!(
            "{unit} exited with status {status}: systemd could not execute {command} ({}){meaning}.",
            self.errno
        );
        let path = self.path.unwrap_or("PATH");
        let e = self.errno.to_ascii_lowercase();
        if e.contains("no such file") {
            let name = path.rsplit('/').next().unwrap_or(path);
            f.actions.push(Action::advice(
                format!("point {unit}'s ExecStart= at the program's real path (`command -v {name}` shows where it is installed), then `systemctl daemon-reload` and restart; `systemctl cat {unit}` shows the unit file and drop-ins systemd actually loaded (a drop-in or a copy under /etc overrides /usr/lib)"),
                Some(&format!("systemctl cat {unit}; ls -l {path}; command -v {name}")),
            ));
        } else if e.contains("permission denied") {
            f.actions.push(Action::advice(
                format!("make {path} executable for {unit}'s User= (`chmod +x`, and every directory above it searchable), or move it off a file system mounted noexec; SELinux or AppArmor may also refuse it (`ausearch -m avc`)"),
                Some(&format!("ls -l {path}; findmnt -T {path} -o TARGET,OPTIONS; systemctl cat {unit}")),
            ));
        } else {
            f.actions.push(Action::advice(
                format!("check that {path} is a program this host can run, for {unit}'s User="),
                Some(&format!("ls -l {path}; file {path}; systemctl cat {unit}")),
            ));
        }
    }
}
