//! Copies of a live web server's command line re-parented to PID 1 beside
//! it: a listing with PPIDs (`ps -ef`) where one `gunicorn` (or `uvicorn`,
//! `uwsgi` …) master is the parent of workers running the same command
//! line, and other processes with that very command line have PPID 1 and
//! no children of their own. A server's workers are its master's children
//! and a master has workers: a childless copy under init is neither, but
//! what an earlier instance left (its master gone, a worker orphaned) or an
//! extra instance started beside the service (benoitc/gunicorn#1633: extra
//! instances share the port through SO_REUSEPORT). A listing without
//! PPIDs (`ps aux`) says nothing of this, and a master under init with its
//! own workers is a daemon, not a leftover.

use std::collections::BTreeSet;

use super::META;
use super::managed::server_of;
use crate::correlate::Incident;
use crate::model::PsRecord;
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};

/// Findings for the childless PPID-1 copies of each live master's command
/// line; `reported` are PIDs another part of the rule named.
pub(super) fn copies(incident: &Incident, reported: &BTreeSet<u32>) -> Vec<Finding> {
    let ps = &incident.facts.ps;
    // Inside a container PID 1 may be the server: PPID 1 is then normal.
    if ps.iter().any(|p| p.pid == 1 && server_of(&p.cmd).is_some()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut done: BTreeSet<u32> = BTreeSet::new();
    for master in ps {
        let Some(server) = server_of(&master.cmd) else {
            continue;
        };
        let same = |p: &&PsRecord| {
            p.span.source == master.span.source && p.cmd.trim() == master.cmd.trim()
        };
        let workers: Vec<&PsRecord> = ps
            .iter()
            .filter(same)
            .filter(|p| p.ppid == Some(master.pid) && p.pid != master.pid)
            .collect();
        if workers.is_empty() || done.contains(&master.pid) {
            continue;
        }
        let parents: BTreeSet<u32> = ps.iter().filter_map(|p| p.ppid).collect();
        let mut left: Vec<&PsRecord> = Vec::new();
        for p in ps.iter().filter(same) {
            let orphan = p.ppid == Some(1) && p.pid != master.pid && !parents.contains(&p.pid);
            if orphan && !reported.contains(&p.pid) && !left.iter().any(|l| l.pid == p.pid) {
                left.push(p);
            }
        }
        done.insert(master.pid);
        if !left.is_empty() {
            out.push(finding(master, server, &workers, &left));
        }
    }
    out
}

fn finding(master: &PsRecord, server: &str, workers: &[&PsRecord], left: &[&PsRecord]) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let pids: Vec<String> = left.iter().map(|p| p.pid.to_string()).collect();
    super::cite_rows(&mut f, left, |p, since| {
        format!(
            "PID {} runs the same `{server}` command line with PPID 1 and no child in the listing{since}: not part of the live instance",
            p.pid
        )
    });
    let since = crate::rules::support::ps::started(master);
    f.evidence(
        master.span,
        format!(
            "PID {} is the live master: {} worker(s) of the same command line are its children{since}",
            master.pid,
            workers.len()
        ),
    );
    if let Some(w) = workers.first() {
        f.evidence(
            w.span,
            format!("PID {} is a worker of PID {}", w.pid, master.pid),
        );
    }
    f.condition(
        format!(
            "PID {} runs the command line with workers of its own",
            master.pid
        ),
        true,
    );
    f.condition(
        "other processes with the same command line have PPID 1 and no children",
        true,
    );
    f.condition(
        "their start times and ports tell an extra instance from an orphaned worker (missing: ps -o pid,ppid,lstart,args; ss -ltnp)",
        false,
    );
    let (n, plural, run) = if left.len() == 1 {
        ("one other process".to_owned(), "PID", "runs")
    } else {
        (format!("{} other processes", left.len()), "PIDs", "run")
    };
    f.title = format!(
        "leftover `{server}` {plural} {} beside the live master {}",
        pids.join(", "),
        master.pid
    );
    f.headline = format!(
        "PID {} is the live `{server}` master with its workers; {n} with the same command line ({plural} {}) {run} under PID 1 with no worker of its own: left over from an earlier instance (its master gone) or started beside the service, keeping its memory and able to share the port (inferred: start times and ports settle which).",
        master.pid,
        pids.join(", ")
    );
    f.chain.push(format!(
        "more `{server}` processes run than the service's master and workers"
    ));
    f.chain.push(format!(
        "{plural} {} outlived the instance that started {}, or {} started beside it",
        pids.join(", "),
        if left.len() == 1 { "it" } else { "them" },
        if left.len() == 1 { "was" } else { "were" }
    ));
    f.explanation = format!(
        "A `{server}` master forks its workers, so each worker's parent is the master and a master has workers. A process with the same command line whose parent is PID 1 and that has no child is neither: its master exited without it, or it is a second instance (a start by hand, a restart that did not stop the old one); with SO_REUSEPORT both instances accept on the same port."
    );
    f.actions.push(Action::advice(
        "tell the leftovers from the live instance by their parents, start times and listening sockets",
        Some(&format!(
            "ps -o pid,ppid,lstart,etimes,args -p {},{}; ss -ltnp",
            master.pid,
            pids.join(",")
        )),
    ));
    f.actions.push(Action::advice(
        "end the leftover processes (not the live master or its workers), then restart the service from its manager so that one instance runs",
        None,
    ));
    f.confidence = confidence(&f, 0.45, 0.8);
    f
}
