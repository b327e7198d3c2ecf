//! A web server's master outside the process manager that runs it: a
//! `gunicorn` (or `uvicorn`, `hypercorn`, `daphne`, `uwsgi`, `waitress-serve`)
//! re-parented to PID 1 in a listing where supervisord (or circus, PM2's
//! daemon) runs as a process of its own. A program the manager runs is its
//! child; one whose parent is PID 1 beside a running manager was left behind
//! when the manager stopped its program (supervisord signals only the
//! process it started unless `stopasgroup`/`killasgroup` are set), or was
//! started by hand beside it: either way an instance nobody manages, which
//! keeps its port and its workers (fixtures batch S's 1168, Cloudify's REST
//! service, https://github.com/cloudify-cosmo/cloudify-manager-install).
//! A process tree (`pstree -p`) pasted before and after the stop shows the
//! same: the master (its title `gunicorn: maste`) under supervisord, then
//! under init (batch V's 1383, apache/airflow#852).
//! Inside a container whose PID 1 is the manager, PPID 1 is its normal
//! parent and nothing is reported; a master that daemonised itself
//! (`--daemon`, `-D`) is not the manager's to run.

use std::collections::BTreeSet;

use super::META;
use crate::correlate::Incident;
use crate::model::PsRecord;
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};

/// WSGI/ASGI servers and the name their command line runs them by: the
/// program's basename (`/opt/env/bin/gunicorn`), or a module run by Python
/// (`python -m uvicorn`).
const SERVERS: &[&str] = &[
    "gunicorn",
    "uvicorn",
    "hypercorn",
    "daphne",
    "uwsgi",
    "waitress-serve",
];

/// Process managers that run servers as their children: supervisord,
/// circus (`circusd`), PM2 (its daemon's title `PM2 vX.Y.Z: God Daemon`).
const MANAGERS: &[&str] = &["supervisord", "circusd"];

/// The server a command line runs, by the first of its words (after an
/// interpreter and its options) whose basename is one of [`SERVERS`].
pub(super) fn server_of(cmd: &str) -> Option<&'static str> {
    let mut words = cmd.split_whitespace();
    let mut word = words.next()?;
    let base = |w: &str| w.rsplit('/').next().unwrap_or(w).to_owned();
    // macOS's framework interpreter is `…/MacOS/Python`.
    if base(word).to_ascii_lowercase().starts_with("python") {
        // `python3 [-Es] /opt/env/bin/gunicorn …`, `python -m uvicorn …`.
        loop {
            word = words.next()?;
            if word == "-m" {
                word = words.next()?;
                break;
            }
            if !word.starts_with('-') {
                break;
            }
        }
    }
    // A process title (`gunicorn: master [app]`, pstree's `gunicorn:
    // maste`) names the server before its colon.
    let b = base(word);
    let b = b.strip_suffix(':').unwrap_or(&b);
    SERVERS.iter().copied().find(|s| b == *s)
}

fn manager_of(cmd: &str) -> Option<String> {
    if cmd.starts_with("PM2 ") && cmd.contains("God Daemon") {
        return Some("PM2".to_owned());
    }
    cmd.split_whitespace()
        .take(3)
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .find(|b| MANAGERS.contains(b))
        .map(str::to_owned)
}

/// Findings for the server masters that run outside the manager listed
/// beside them; `named` are PIDs another part of the rule reported.
pub(super) fn managed(incident: &Incident, named: &BTreeSet<u32>) -> Vec<Finding> {
    let ps = &incident.facts.ps;
    let mut out = Vec::new();
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    for p in ps {
        if p.ppid != Some(1) || named.contains(&p.pid) || !seen.insert(p.pid) {
            continue;
        }
        let Some(server) = server_of(&p.cmd) else {
            continue;
        };
        let daemonised = p
            .cmd
            .split_whitespace()
            .any(|w| w == "--daemon" || w == "-D");
        if daemonised {
            continue;
        }
        // The manager, in the same listing, not PID 1 itself.
        let Some((manager, name)) = ps.iter().find_map(|m| {
            (m.span.source == p.span.source && m.pid != 1 && m.pid != p.pid)
                .then(|| manager_of(&m.cmd).map(|n| (m, n)))
                .flatten()
        }) else {
            continue;
        };
        // The same process under another parent in an earlier listing of
        // the same input (a `pstree` before the stop).
        let before = ps.iter().find(|r| {
            r.pid == p.pid && r.span.source == p.span.source && r.span < p.span && r.ppid != Some(1)
        });
        let mut f = finding(p, server, manager, &name);
        if let Some(b) = before {
            let note = format!(
                "earlier in the same paste PID {} ran under PID {}: it moved to PID 1 when that parent exited",
                b.pid,
                b.ppid.map_or_else(|| "?".to_owned(), |x| x.to_string())
            );
            // The manager's row may be the same line (one tree): say both.
            match f.evidence.iter_mut().find(|e| e.span == b.span) {
                Some(e) => e.note = format!("{}; {note}", e.note),
                None => f.evidence(b.span, note),
            }
        }
        out.push(f);
    }
    out
}

fn finding(p: &PsRecord, server: &str, manager: &PsRecord, name: &str) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let pid = p.pid;
    f.entities.pids.insert(pid);
    f.evidence(
        p.span,
        format!("{server} master PID {pid} runs with parent PID 1: no process manages it"),
    );
    f.evidence(
        manager.span,
        format!(
            "{name} (PID {}) runs beside it: a program it runs would be its child",
            manager.pid
        ),
    );
    f.condition(format!("{server} PID {pid} has PPID 1"), true);
    f.condition(
        format!(
            "{name} runs as PID {}, so PPID 1 is not its child's parent",
            manager.pid
        ),
        true,
    );
    f.condition(
        "it was not started as a daemon of its own (no --daemon)",
        true,
    );
    f.title = format!("{server} PID {pid} is left outside {name}: an instance nobody manages");
    f.headline = format!(
        "{server} master PID {pid} runs with parent PID 1 while {name} (PID {}) runs beside it: the instance was left behind when {name} stopped its program (it signals only the process it started), or was started by hand. It keeps its port and workers, so the managed instance cannot bind or serves beside a stale one.",
        manager.pid
    );
    f.chain.push(format!(
        "{server} PID {pid} still runs, with no manager to stop or restart it"
    ));
    f.chain.push(format!(
        "its parent is PID 1: its own parent ({name}'s earlier child or a shell) is gone"
    ));
    f.explanation = format!(
        "A process manager runs each program as its child and stops it by signalling that process. A {server} master whose parent is PID 1 while {name} runs was re-parented when the process that started it exited: {name} stopped the program without its process group (supervisord's stopasgroup/killasgroup are off by default), or someone started it outside {name}. {name} no longer knows it, and a new start of the program collides with it."
    );
    f.actions.push(Action::advice(
        format!("check what PID {pid} listens on and which program of {name} it is"),
        Some(&format!(
            "ps -o pid,ppid,lstart,args -p {pid}; ss -ltnp | grep 'pid={pid},'; supervisorctl status"
        )),
    ));
    f.actions.push(Action::advice(
        format!("stop the stray instance (kill {pid}, SIGTERM first) once it is confirmed stale, then start the program again from {name}"),
        None,
    ));
    f.actions.push(Action::advice(
        "make the manager stop the whole program: stopasgroup=true and killasgroup=true in the supervisord program section (or the manager's equivalent)",
        None,
    ));
    f.confidence = confidence(&f, 0.5, 0.75);
    f
}

#[cfg(test)]
mod tests {
    use super::{manager_of, server_of};
    use crate::testing::findings_of;

    #[test]
    fn servers_and_managers_by_their_command_lines() {
        assert_eq!(
            server_of(
                "/opt/manager/env/bin/python3 /opt/manager/env/bin/gunicorn -u cfyuser --bind 127.0.0.1:8100 manager_rest.wsgi:app"
            ),
            Some("gunicorn")
        );
        assert_eq!(
            server_of("python -m uvicorn app:app --port 8000"),
            Some("uvicorn")
        );
        assert_eq!(server_of("/usr/bin/python3 train.py --gunicorn"), None);
        assert_eq!(server_of("gunicorn: maste"), Some("gunicorn"));
        assert_eq!(
            server_of("gunicorn: master [airflow-webserver]"),
            Some("gunicorn")
        );
        assert_eq!(
            manager_of("/opt/cloudify/cfy_manager/bin/python3 /usr/bin/supervisord -n -c /etc/supervisord.conf").as_deref(),
            Some("supervisord")
        );
        assert_eq!(manager_of("/usr/sbin/tuned -l -P"), None);
    }

    /// Batch S's 1168 (Cloudify, `ps -ef | grep python`, verbatim): the
    /// gunicorn master under PID 1 beside supervisord. The same master as
    /// supervisord's child, or with supervisord as PID 1 (a container), is
    /// no finding.
    #[test]
    fn a_master_left_outside_supervisord() {
        let listing = "\
[cloud-user@cloudify-3 ~]$ ps -ef | grep \"python\"
root      1004     1  0 03:29 ?        00:00:00 /usr/bin/python2 -Es /usr/sbin/tuned -l -P
root      2165     1  1 03:33 ?        00:00:43 /opt/cloudify/cfy_manager/bin/python3 /usr/bin/supervisord -n -c /etc/supervisord.conf
cfyuser   7227     1 45 03:45 ?        00:19:56 /opt/manager/env/bin/python3 /opt/manager/env/bin/gunicorn -u cfyuser -g cfyuser --pid /run/cloudify-restservice/pid --chdir / --workers 5 --bind 127.0.0.1:8100 manager_rest.wsgi:app
";
        let f = findings_of(super::META.id, listing);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.pids.contains(&7227));
        let child = listing.replace("cfyuser   7227     1", "cfyuser   7227  2165");
        assert!(findings_of(super::META.id, &child).is_empty());
        let container = listing.replace("root      2165     1", "root         1     0");
        assert!(findings_of(super::META.id, &container).is_empty());
    }
}
