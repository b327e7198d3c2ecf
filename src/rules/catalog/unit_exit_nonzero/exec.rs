//! systemd's word that it could not execute a unit's command (`Failed at
//! step EXEC spawning /usr/bin/ollama: No such file or directory`, `Failed
//! to locate executable PATH: …`), joined to the unit's exit with one of
//! systemd's own statuses (`203/EXEC`, `200/CHDIR`, `226/NAMESPACE`)
//! whatever the order of the lines (`journalctl --reverse` prints the
//! newest first): the path and the errno are the reason. Before a USER or
//! GROUP step (`217/USER`, `216/GROUP`) systemd says which lookup failed
//! (`Failed to determine user credentials: No such process`): the unit's
//! User= or Group= does not resolve, and that line is the reason.

use crate::correlate::Incident;
use crate::rules::{Action, Finding};
use crate::source::Span;

/// The catalog row of systemd's failure to set up or execute a command.
const FAILED_AT_STEP: &str = "systemd.failed-at-step";

/// The catalog row of systemd's failure to look up the unit's User= or
/// Group= before a USER or GROUP step.
const CREDENTIALS: &str = "systemd.exec-credentials";

/// systemd's line about the unit's command that failed.
pub(super) struct ExecFailure<'a> {
    pub span: Span,
    /// The command's path, when the line names it.
    pub path: Option<&'a str>,
    /// The error as systemd printed it (`No such file or directory`).
    pub errno: &'a str,
    /// The step systemd failed at (`EXEC`, `USER`).
    step: &'a str,
    /// systemd's line on the lookup of User=/Group= that failed first.
    credentials: Option<Credentials<'a>>,
}

/// `Failed to determine user credentials: No such process`.
struct Credentials<'a> {
    span: Span,
    /// `user` or `group`.
    what: &'a str,
    errno: &'a str,
}

impl Credentials<'_> {
    /// The unit setting that names the account: `User` or `Group`.
    fn setting(&self) -> &'static str {
        if self.what.eq_ignore_ascii_case("group") {
            "Group"
        } else {
            "User"
        }
    }

    /// systemd's words, as it printed them.
    fn quoted(&self) -> String {
        format!(
            "Failed to determine {} credentials: {}",
            self.what, self.errno
        )
    }
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
            step: h.get("step").unwrap_or("EXEC"),
            credentials: credentials(incident, unit, name, exit, only_unit),
        })
}

/// systemd's line on the User=/Group= lookup of `unit` that failed before
/// its `step` (USER or GROUP), nearest the exit in the same input.
fn credentials<'a>(
    incident: &'a Incident,
    unit: &str,
    step: &str,
    exit: Span,
    only_unit: bool,
) -> Option<Credentials<'a>> {
    if !(step.eq_ignore_ascii_case("USER") || step.eq_ignore_ascii_case("GROUP")) {
        return None;
    }
    incident
        .known(CREDENTIALS)
        .filter(|(m, _)| m.span.source == exit.source)
        .filter(|(_, h)| h.get("what").is_some_and(|w| w.eq_ignore_ascii_case(step)))
        .filter(|(_, h)| h.get("unit").map_or(only_unit, |u| u == unit))
        .min_by_key(|(m, _)| m.span.line.abs_diff(exit.line))
        .map(|(m, h)| Credentials {
            span: m.span,
            what: h.get("what").unwrap_or("user"),
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
        if let Some(c) = &self.credentials {
            return format!(
                "systemd could not look up the unit's {}= before running {}: {}",
                c.setting(),
                self.command(),
                c.quoted()
            );
        }
        format!(
            "systemd could not execute {}: {}",
            self.command(),
            self.errno
        )
    }

    /// Cites the line, sets the headline and adds the advice.
    pub(super) fn explain(&self, f: &mut Finding, unit: &str, status: &str) {
        if let Some(c) = &self.credentials {
            self.explain_credentials(c, f, unit, status);
            return;
        }
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

impl ExecFailure<'_> {
    /// A USER or GROUP step after a failed lookup: the account named by
    /// User=/Group= does not resolve where the unit runs.
    fn explain_credentials(&self, c: &Credentials<'_>, f: &mut Finding, unit: &str, status: &str) {
        let command = self.command();
        let setting = c.setting();
        f.evidence_marked(
            c.span,
            format!("systemd could not look up {unit}'s {setting}=: {}", c.errno),
            format!("Failed to determine {} credentials", c.what),
        );
        f.evidence_marked(
            self.span,
            format!(
                "so systemd failed at step {} and never ran {command}",
                self.step
            ),
            format!("Failed at step {}", self.step),
        );
        f.headline = format!(
            "{unit} exited with status {status} before {command} ran: systemd could not look up the account its {setting}= names ({}).",
            c.quoted()
        );
        let (db, file) = if setting == "Group" {
            ("group", "/etc/group")
        } else {
            ("passwd", "/etc/passwd")
        };
        let lookup = format!("getent {db} \"$(systemctl show -p {setting} --value {unit})\"");
        f.actions.push(Action::advice(
            format!("check the account {unit}'s {setting}= names exists where the unit runs (`{lookup}`): in a container its {file} may lack it, or NSS may not reach the directory that has it; create it, name an account that exists, or let systemd allocate one with DynamicUser=yes, then `systemctl daemon-reload` and restart"),
            Some(&format!("systemctl show -p User -p Group -p DynamicUser {unit}; {lookup}")),
        ));
    }
}

/// The unit settings whose set-up is systemd's NAMESPACE step
/// (systemd.exec(5), "Sandboxing" and "Paths"): a mount namespace is
/// built only when one of them is set.
const NAMESPACE_SETTINGS: &[&str] = &[
    "PrivateTmp",
    "PrivateDevices",
    "PrivateMounts",
    "PrivateNetwork",
    "PrivateIPC",
    "ProtectSystem",
    "ProtectHome",
    "ProtectKernelTunables",
    "ProtectKernelModules",
    "ProtectKernelLogs",
    "ProtectControlGroups",
    "ProtectProc",
    "ProtectHostname",
    "ReadWritePaths",
    "ReadOnlyPaths",
    "InaccessiblePaths",
    "ExecPaths",
    "NoExecPaths",
    "TemporaryFileSystem",
    "BindPaths",
    "BindReadOnlyPaths",
    "RootDirectory",
    "RootImage",
    "MountAPIVFS",
];

/// A unit that failed at systemd's NAMESPACE step (`226/NAMESPACE`) whose
/// settings the inputs show (`systemctl cat`, a unit file, `systemctl
/// show`): its sandboxing settings are what that step sets up. Cites them
/// and names them in the headline and the advice.
pub(super) fn cite_sandboxing(f: &mut Finding, incident: &Incident, unit: &str, status: &str) {
    let (code, name) = status.split_once('/').unwrap_or((status, ""));
    if code != "226" && name != "NAMESPACE" {
        return;
    }
    let mut set: Vec<(String, Span)> = Vec::new();
    for props in incident
        .facts
        .unit_properties
        .iter()
        .filter(|p| p.unit.as_deref() == Some(unit))
    {
        for key in NAMESPACE_SETTINGS {
            if let Some((value, span)) = props.properties.get(*key)
                && !set.iter().any(|(s, _)| s.starts_with(&format!("{key}=")))
            {
                set.push((format!("{key}={value}"), *span));
            }
        }
    }
    if set.is_empty() {
        return;
    }
    for (setting, span) in &set {
        f.evidence(
            *span,
            format!("{setting}: a sandboxing setting systemd's NAMESPACE step sets up"),
        );
    }
    let named: Vec<&str> = set.iter().map(|(s, _)| s.as_str()).collect();
    let named = named.join(", ");
    f.headline = format!(
        "{} The unit's sandboxing, which that step sets up: {named}.",
        f.headline.trim_end()
    );
    f.actions.push(Action::advice(
        format!(
            "read systemd's reason for the namespace (`Failed to set up mount namespacing`), then drop or relax {named} in a drop-in where this environment cannot provide it (a container, an emulator, a kernel without mount namespaces)"
        ),
        Some(&format!(
            "journalctl -u {unit} -b --no-pager | grep -i namespac; systemctl edit {unit}"
        )),
    ));
}
