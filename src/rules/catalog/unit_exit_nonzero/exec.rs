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
use crate::correlate::SystemdStep;
use crate::rules::{Action, Finding};
use crate::source::Span;

/// The catalog row of systemd's failure to set up or execute a command.
pub(super) const FAILED_AT_STEP: &str = "systemd.failed-at-step";

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
    /// The unit the line names when it is another instance of the same
    /// template (`x@a.service` for `x@b.service`'s exit).
    pub sibling: Option<&'a str>,
    /// The forked child that wrote the line (`(cprofile)[148247]:`).
    pub pid: Option<u32>,
    /// systemd's line on why the step failed (`Changing to the requested
    /// working directory failed: …` before `Failed at step CHDIR`, `Failed
    /// to set up mount namespacing: …` before `Failed at step NAMESPACE`).
    reason: Option<(Span, &'a str)>,
}

/// The catalog row of systemd's failure to change to WorkingDirectory=.
const CHDIR_FAILED: &str = "systemd.exec-chdir-failed";

/// The catalog row of systemd's failure to set up the unit's mount
/// namespace.
const NAMESPACE_FAILED: &str = "systemd.exec-namespace-failed";

/// The row of systemd's line on why step `step` failed, for the steps
/// whose reason it prints on a line of its own before `Failed at step`,
/// and how the finding tells it and marks it.
fn reason_row(step: &str) -> Option<(&'static str, &'static str, &'static str)> {
    if step.eq_ignore_ascii_case("CHDIR") {
        Some((
            CHDIR_FAILED,
            "systemd could not change to the unit's WorkingDirectory=",
            "Changing to the requested working directory failed",
        ))
    } else if step.eq_ignore_ascii_case("NAMESPACE") {
        Some((
            NAMESPACE_FAILED,
            "systemd could not set up the mount namespace the unit's sandboxing and path settings ask for",
            "Failed to set up mount namespacing",
        ))
    } else {
        None
    }
}

/// Whether `a` and `b` are two instances of one template unit
/// (`resticprofile-backup@profile-laptop.service`,
/// `resticprofile-backup@profile-default.service`).
fn siblings(a: &str, b: &str) -> bool {
    fn template(u: &str) -> Option<&str> {
        u.split_once('@').map(|(t, _)| t)
    }
    a != b && template(a).is_some() && template(a) == template(b)
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

/// systemd's own exit status `status` (`200/CHDIR`), from its table
/// (`correlate::units::SYSTEMD_STEPS`): the number, and the name where
/// the line prints one, must be the table's.
pub(super) fn systemd_step(status: &str) -> Option<&'static SystemdStep> {
    let (code, name) = status.split_once('/').unwrap_or((status, ""));
    let step = crate::correlate::systemd_step(code.parse().ok()?)?;
    (name.is_empty() || name == step.name).then_some(step)
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
    // The unit's own line first; else one of another instance of its
    // template (a paste that mixes two instances failing the same way).
    incident
        .known(FAILED_AT_STEP)
        .filter(|(m, _)| m.span.source == exit.source)
        .filter(|(_, h)| h.get("step").unwrap_or("EXEC").eq_ignore_ascii_case(name))
        .filter(|(_, h)| {
            h.get("unit")
                .map_or(only_unit, |u| u == unit || siblings(u, unit))
        })
        .min_by_key(|(m, h)| {
            (
                h.get("unit").is_some_and(|u| u != unit),
                h.get("path").is_none(),
                m.span.line.abs_diff(exit.line),
            )
        })
        .map(|(m, h)| {
            let named = h.get("unit").unwrap_or(unit);
            ExecFailure {
                span: m.span,
                path: h.get("path"),
                errno: h.get("msg").unwrap_or("").trim(),
                step: h.get("step").unwrap_or("EXEC"),
                credentials: credentials(incident, unit, name, exit, only_unit),
                sibling: h.get("unit").filter(|u| *u != unit),
                pid: incident
                    .facts
                    .journal
                    .iter()
                    .find(|e| e.span == m.span)
                    .and_then(|e| e.pid)
                    .filter(|&p| p != 1),
                reason: reason_row(name).and_then(|(row, _, _)| {
                    incident
                        .known(row)
                        .filter(|(r, _)| r.span.source == exit.source)
                        .filter(|(_, rh)| rh.get("unit").is_none_or(|u| u == named))
                        .min_by_key(|(r, _)| r.span.line.abs_diff(m.span.line))
                        .map(|(r, rh)| (r.span, rh.get("msg").unwrap_or("").trim()))
                }),
            }
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
        if self.is_setup() {
            return format!(
                "systemd failed at step {} before running {}: {}",
                self.step,
                self.command(),
                self.errno
            );
        }
        format!(
            "systemd could not execute {}: {}",
            self.command(),
            self.errno
        )
    }

    /// Whether the step is one of setting up the process, not executing
    /// it (nor the account steps, explained on their own). The NAMESPACE
    /// step is one: the command's path on its line is not what is wrong;
    /// the settings the step sets up are (`cite_sandboxing` names them
    /// where the inputs show them).
    fn is_setup(&self) -> bool {
        !["EXEC", "USER", "GROUP"]
            .iter()
            .any(|s| self.step.eq_ignore_ascii_case(s))
    }

    /// Cites the line, sets the headline and adds the advice.
    pub(super) fn explain(&self, f: &mut Finding, unit: &str, status: &str) {
        if let Some(c) = &self.credentials {
            self.explain_credentials(c, f, unit, status);
            return;
        }
        if self.is_setup() {
            self.explain_setup(f, unit, status);
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
    /// A step of setting up the process other than executing it
    /// (`Failed at step CHDIR spawning …`): the command never ran, and the
    /// path on the line is not what is missing; the step's setting is.
    fn explain_setup(&self, f: &mut Finding, unit: &str, status: &str) {
        f.entities.pids.extend(self.pid);
        if let Some(other) = self.sibling {
            f.entities.units.insert(other.to_owned());
        }
        let command = self.command();
        let step = self.step;
        let meaning = crate::correlate::exit_meaning("exited", status)
            .unwrap_or("systemd failed to set up the process");
        if let (Some((span, errno)), Some((_, told, marked))) = (self.reason, reason_row(step)) {
            f.evidence_marked(span, format!("{told}: {errno}"), marked);
        }
        let whose = match self.sibling {
            Some(other) => format!(
                " (the line is {other}'s, another instance of the same template failing the same way)"
            ),
            None => String::new(),
        };
        f.evidence_marked(
            self.span,
            format!(
                "systemd failed at step {step} and never ran {command}: {}{whose}",
                self.errno
            ),
            format!("Failed at step {step}"),
        );
        f.headline = format!(
            "{unit} exited with status {status} before {command} ran: {meaning} ({}); the program itself is not what is missing.",
            self.errno
        );
        let advice = if step.eq_ignore_ascii_case("CHDIR") {
            format!(
                "check {unit}'s WorkingDirectory= (`systemctl cat {unit}`): create that directory, or point it at one that exists and that the unit's User= can enter, then `systemctl daemon-reload` and restart"
            )
        } else {
            format!(
                "check the setting systemd's {step} step sets up in {unit}'s unit file and drop-ins (`systemctl cat {unit}`), then `systemctl daemon-reload` and restart"
            )
        };
        f.actions.push(Action::advice(
            advice,
            Some(&format!(
                "systemctl cat {unit}; systemctl show -p WorkingDirectory -p User {unit}"
            )),
        ));
    }

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

/// A unit whose exit at `span` a user manager wrote (`systemd[1762]:`, a
/// `systemd --user`), not PID 1: the NAMESPACE step's reason under a user
/// manager, and the flag its units' journal and state are read with
/// (` --user`; empty under PID 1).
fn user_manager(
    f: &mut Finding,
    incident: &Incident,
    span: Span,
    unit: &str,
    status: &str,
) -> &'static str {
    let manager = incident
        .facts
        .journal
        .iter()
        .find(|e| e.span == span && e.is_manager() && !e.is_pid1())
        .and_then(|e| e.pid);
    match manager {
        Some(pid) => {
            user_namespace(f, unit, status, pid);
            " --user"
        }
        None => "",
    }
}

/// A user manager's unit that failed at the NAMESPACE step: systemd.exec(5)
/// says a per-user service's path and sandboxing settings (BindPaths=,
/// ReadOnlyPaths=, PrivateTmp= …) imply PrivateUsers=, a user namespace of
/// its own, which needs unprivileged user namespaces from the kernel; where
/// they are refused, the mount namespace cannot be set up (`Operation not
/// supported`) and the command never runs.
fn user_namespace(f: &mut Finding, unit: &str, status: &str, manager: u32) {
    let (code, name) = status.split_once('/').unwrap_or((status, ""));
    if code != "226" && name != "NAMESPACE" {
        return;
    }
    f.condition(
        format!(
            "{unit} is a user manager's unit (systemd[{manager}]): it sets up a mount namespace only inside a user namespace of its own"
        ),
        true,
    );
    f.actions.push(Action::advice(
        format!(
            "{unit} runs under a user manager (systemd[{manager}]), whose path and sandboxing settings (BindPaths=, ReadOnlyPaths=, PrivateTmp= …) need a user namespace (PrivateUsers=, implied for user units): enable unprivileged user namespaces, run the unit under the system manager (with User=), or drop those settings"
        ),
        Some(&format!(
            "systemctl --user cat {unit}; sysctl kernel.unprivileged_userns_clone user.max_user_namespaces; journalctl --user -u {unit} -b --no-pager"
        )),
    ));
}

/// A unit that failed at systemd's NAMESPACE step: its settings where the
/// inputs show them (`cite_settings`), and under a user manager what that
/// manager needs for them (`user_manager`). Returns the flag the unit's
/// journal and state are read with (` --user` for a user manager's unit).
pub(super) fn cite_sandboxing(
    f: &mut Finding,
    incident: &Incident,
    unit: &str,
    status: &str,
    span: Span,
) -> &'static str {
    let flag = user_manager(f, incident, span, unit, status);
    cite_settings(f, incident, unit, status);
    flag
}

/// A unit that failed at systemd's NAMESPACE step (`226/NAMESPACE`) whose
/// settings the inputs show (`systemctl cat`, a unit file, `systemctl
/// show`): its sandboxing settings are what that step sets up. Cites them
/// and names them in the headline and the advice.
fn cite_settings(f: &mut Finding, incident: &Incident, unit: &str, status: &str) {
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
