//! A daemon still running the release it was started from after an
//! upgrade: a running process's executable lies in a versioned install
//! directory (Homebrew's `/opt/homebrew/Cellar/orch/0.73.13/bin/orch`, in
//! an `lsof` row's `txt` file or a `ps` row's command line), while the
//! program's own version command typed in the same paste (`orch version`,
//! `ollama -v`, `vllm --version`) answers a newer release. The upgrade
//! installed the new release beside the old one and the restart that
//! should have followed did not reach the running instance: it keeps
//! serving the old release (clients and health checks see the old
//! version), and a tool that tracks its service by a PID file may call it
//! dead while it runs.

use super::META;
use crate::correlate::Incident;
use crate::model::{Message, TypedCommand};
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};
use crate::source::Span;

/// The versioned install directories read: Homebrew's keg.
pub(super) const CELLAR: &str = "/Cellar/";

/// A release as numbers: `0.73.13` → [0, 73, 13].
fn release(text: &str) -> Option<Vec<u64>> {
    let text = text.trim_start_matches('v');
    let parts: Option<Vec<u64>> = text.split('.').map(|p| p.parse().ok()).collect();
    parts.filter(|p| p.len() >= 2)
}

/// The program and release of a keg path in `text`, with the PID of the
/// row: an `lsof` row (`COMMAND PID USER FD …`) or a `ps` row.
fn keg(incident: &Incident, m: &Message) -> Option<(u32, String, String)> {
    let at = m.text.find(CELLAR)?;
    let mut parts = m.text[at + CELLAR.len()..].split('/');
    let (name, version) = (parts.next()?, parts.next()?);
    release(version)?;
    let words: Vec<&str> = m.text.split_whitespace().collect();
    let lsof = words
        .get(1)
        .and_then(|w| w.parse::<u32>().ok())
        .filter(|_| words.get(3).is_some_and(|fd| *fd == "txt"));
    let pid = lsof.or_else(|| {
        incident
            .facts
            .ps
            .iter()
            .find(|p| p.span == m.span)
            .map(|p| p.pid)
    })?;
    Some((pid, name.to_owned(), version.to_owned()))
}

/// The release the program's version command typed in the paste answered,
/// with the command: its first output line's first release-shaped word.
fn reported<'a>(incident: &'a Incident, name: &str) -> Option<(&'a TypedCommand, String)> {
    incident.facts.typed_commands.iter().find_map(|c| {
        let mut words = c.command.split_whitespace();
        let program = words.next()?;
        let asks = matches!(words.next(), Some("version" | "--version" | "-v" | "-V"));
        if program.rsplit('/').next() != Some(name) || !asks {
            return None;
        }
        let first = c.first_output.as_deref()?;
        let version = first
            .split_whitespace()
            .find(|w| release(w.trim_end_matches(',')).is_some())?;
        Some((c, version.trim_end_matches(',').to_owned()))
    })
}

/// Findings for the processes running an older keg than the version their
/// program reports.
pub(super) fn upgraded(incident: &Incident) -> Vec<Finding> {
    let mut out = Vec::new();
    for m in incident
        .facts
        .messages
        .iter()
        .filter(|m| m.text.contains(CELLAR))
    {
        let Some((pid, name, running)) = keg(incident, m) else {
            continue;
        };
        let Some((asked, current)) = reported(incident, &name) else {
            continue;
        };
        if release(&running) >= release(&current) {
            continue;
        }
        out.push(finding(m.span, pid, &name, &running, asked, &current));
    }
    out
}

fn finding(
    row: Span,
    pid: u32,
    name: &str,
    running: &str,
    asked: &TypedCommand,
    current: &str,
) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.pids.insert(pid);
    f.evidence(
        row,
        format!("PID {pid} runs `{name}` from its {running} install (Cellar/{name}/{running})"),
    );
    f.evidence(
        asked.span,
        format!(
            "`{}` answers {current}: the installed release",
            asked.command
        ),
    );
    f.condition(
        format!("PID {pid}'s executable is {name} {running}, older than the {current} installed"),
        true,
    );
    f.condition(
        "what the running instance answers on its port or socket (missing: its health or version endpoint)",
        false,
    );
    f.title = format!("PID {pid} still runs {name} {running}, not the installed {current}");
    f.headline = format!(
        "PID {pid} runs `{name}` from the {running} release (Cellar/{name}/{running}) while `{}` answers {current}: the instance was started before the upgrade and the restart missed it, so it still serves the old release.",
        asked.command
    );
    f.chain
        .push(format!("clients and checks reach {name} {running}"));
    f.chain
        .push(format!("PID {pid} outlived the upgrade to {current}"));
    f.explanation = "An upgrade installs the new release beside the old one; a process started from the old release keeps running it until it is stopped. A service tool that tracks its daemon by a PID file may call the service dead while this older instance runs.".to_owned();
    f.actions.push(Action::advice(
        format!("stop PID {pid} (and any other `{name}` instance), then start the service again so that the {current} release serves"),
        Some(&format!("ps -o pid,ppid,lstart,args -p {pid}")),
    ));
    f.confidence = confidence(&f, 0.5, 0.85);
    f
}

#[cfg(test)]
mod tests {
    /// A reduction of batch Z's 1794 (orch, Homebrew), cited as such: the
    /// version command and the running process's `txt` row.
    const ORCH: &str = "$ orch version
CLI:     0.73.18

$ lsof -p 2102 | grep 'txt.*Cellar/orch'
orch  2102  gb  txt  REG  ...  /opt/homebrew/Cellar/orch/0.73.13/bin/orch
";

    #[test]
    fn an_older_keg_than_the_version_answered() {
        let f = crate::testing::findings_of(super::META.id, ORCH);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.pids.contains(&2102));
        crate::testing::cites_line(&f[0], 5);
        // The same release running: nothing.
        let same = ORCH.replace("0.73.13", "0.73.18");
        assert!(crate::testing::findings_of(super::META.id, &same).is_empty());
    }
}
