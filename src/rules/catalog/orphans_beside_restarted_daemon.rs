//! `orphans-beside-restarted-daemon`: a process listing shows a daemon's
//! live tree (a PPID-1 process whose children run its own command line)
//! and, beside it, older PPID-1 copies of the same command that belong to
//! no tree: the children of an earlier instance of the daemon, re-parented
//! to init when it was killed, still running beside the new one.

use std::collections::BTreeMap;

use crate::correlate::Incident;
use crate::model::PsRecord;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: OrphansBesideRestartedDaemon = OrphansBesideRestartedDaemon;

pub struct OrphansBesideRestartedDaemon;

static META: RuleMeta = RuleMeta {
    id: "orphans-beside-restarted-daemon",
    category: Category::StaleServingInstance,
    severity: Severity::Error,
    summary: "older PPID-1 copies of a daemon's command beside its live tree: an earlier instance's children, orphaned when it was killed",
    anchors: &[],
    doc: r#"
## What it means
A process listing with parents (`ps -ef`, `ps -eo pid,ppid,start,args`)
shows one daemon's tree: a process whose parent is PID 1 (init) with
children that run the same command line (a Python daemon's forked
workers). Beside it stand more PPID-1 processes with exactly that command,
started before the daemon, with no children and no parent of their own
kind. Nothing started them as they are: they are the children of an
earlier instance of the daemon, re-parented to init when that instance
was killed (`kill -9`, a crash, a stop that ended only the main process).
They keep running its old work, its sockets and locks, beside the new
instance.

## Why it happens
1. The daemon's main process was killed alone (`kill PID`, a stop that
   signals only the main PID, `KillMode=process`) and its children did
   not exit with it.
2. The daemon crashed and its children ignore the parent's death.

## How to confirm
`ps -o pid,ppid,lstart,args -p PIDS` for the orphans; `ss -ltnp` and
`lsof -p PID` for the ports and files they still hold.

## How to fix
End the orphaned processes (after checking they are the old instance's),
then restart the daemon so that it owns its resources alone; stop it in
future through its service manager, which ends the whole process group.

## Safety
Advice only: no process is signalled by the report.
"#,
};

/// A start time from `ps` as minutes of the day (`23:01`), or `None` for
/// a day or year (`Mar24`, `2024`: older than a day) or anything else.
fn minutes(started: &str) -> Option<u32> {
    let (h, m) = started.trim().split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    Some(h.parse::<u32>().ok()? * 60 + m.parse::<u32>().ok()?)
}

/// Whether `old` started before `new`, as far as `ps` says: both times of
/// today and earlier, or `old` a date (older than a day) beside a time.
fn started_before(old: &str, new: &str) -> bool {
    match (minutes(old), minutes(new)) {
        (Some(o), Some(n)) => o < n,
        (None, Some(_)) => {
            let o = old.trim();
            o.len() >= 4 && o.chars().any(|c| c.is_ascii_digit()) && !o.contains(':')
        }
        _ => false,
    }
}

/// One daemon's processes in one listing: the live root and the orphans.
struct Orphans<'a> {
    root: &'a PsRecord,
    orphans: Vec<&'a PsRecord>,
}

fn orphan_groups(ps: &[PsRecord]) -> Vec<Orphans<'_>> {
    // One command line in one input: a listing's own processes.
    let mut groups: BTreeMap<(crate::source::SourceId, &str), Vec<&PsRecord>> = BTreeMap::new();
    for p in ps {
        let cmd = p.cmd.trim();
        if p.ppid.is_none() || cmd.is_empty() || p.pid <= 1 {
            continue;
        }
        groups.entry((p.span.source, cmd)).or_default().push(p);
    }
    let mut out = Vec::new();
    for rows in groups.values() {
        let has_children = |p: &PsRecord| rows.iter().any(|c| c.ppid == Some(p.pid));
        let at_init: Vec<&PsRecord> = rows.iter().copied().filter(|p| p.ppid == Some(1)).collect();
        let roots: Vec<&PsRecord> = at_init
            .iter()
            .copied()
            .filter(|p| has_children(p))
            .collect();
        let [root] = roots.as_slice() else { continue };
        let Some(root_start) = root.started.as_deref() else {
            continue;
        };
        let orphans: Vec<&PsRecord> = at_init
            .iter()
            .copied()
            .filter(|p| !has_children(p))
            .filter(|p| {
                p.started
                    .as_deref()
                    .is_some_and(|s| started_before(s, root_start))
            })
            .collect();
        if !orphans.is_empty() {
            out.push(Orphans { root, orphans });
        }
    }
    out
}

impl Rule for OrphansBesideRestartedDaemon {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for g in orphan_groups(&incident.facts.ps) {
            out.push(finding(&g));
        }
    }
}

fn finding(g: &Orphans<'_>) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let pids: Vec<String> = g.orphans.iter().map(|p| p.pid.to_string()).collect();
    let pids = pids.join(", ");
    let root = g.root;
    let root_start = root.started.as_deref().unwrap_or("?");
    for p in &g.orphans {
        let start = p.started.as_deref().unwrap_or("?");
        f.evidence_marked(
            p.span,
            format!(
                "PID {} runs the daemon's command with parent PID 1, started {start}, before the live daemon, and has no children: an orphan of an earlier instance",
                p.pid
            ),
            p.pid.to_string(),
        );
        f.entities.pids.insert(p.pid);
    }
    f.evidence_marked(
        root.span,
        format!(
            "PID {} is the live daemon (started {root_start}), whose children run the same command",
            root.pid
        ),
        root.pid.to_string(),
    );
    f.condition(
        "a PPID-1 daemon with children that run its own command",
        true,
    );
    f.condition(
        "other PPID-1 copies of the command, without children, started before it",
        true,
    );
    f.occurrences = u32::try_from(g.orphans.len()).unwrap_or(u32::MAX);
    f.title = format!("processes {pids} are left over from an earlier instance of the daemon");
    f.headline = format!(
        "Processes {pids} run the same command as the live daemon PID {} but were started before it, under PID 1 and with no children: children of an earlier instance, orphaned when it was killed, still running beside the new one.",
        root.pid
    );
    f.chain.push(format!(
        "PIDs {pids} still run beside the new daemon PID {}",
        root.pid
    ));
    f.chain.push(
        "the earlier instance's main process was killed or crashed, and its children were re-parented to init instead of exiting".to_owned(),
    );
    f.explanation = "A daemon's children re-parented to PID 1 that run its exact command and are older than the daemon now running cannot be the new instance's: they are what the previous one left.".to_owned();
    let check = format!(
        "ps -o pid,ppid,lstart,args -p {}; ss -ltnp",
        g.orphans
            .iter()
            .map(|p| p.pid.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    f.actions.push(Action::advice(
        "check what the orphaned processes still hold (ports, files, GPU memory)",
        Some(&check),
    ));
    f.actions.push(Action::advice(
        "end the orphaned processes once they are confirmed to be the old instance's, then restart the daemon through its service manager so that its whole process group is stopped next time",
        None,
    ));
    f.confidence = 0.6;
    f
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// wazuh/wazuh#12783: `wazuh-clusterd` killed, two of its children
    /// left under init beside the new daemon's tree.
    const WAZUH: &str = "\
wazuh     527299       1  0 23:01 ?        SN     0:00 /var/ossec/framework/python/bin/python3 /var/ossec/framework/scripts/wazuh-clusterd.py
wazuh     527302       1  0 23:01 ?        SN     0:00 /var/ossec/framework/python/bin/python3 /var/ossec/framework/scripts/wazuh-clusterd.py
wazuh     549266       1  5 23:09 ?        SNl    0:00 /var/ossec/framework/python/bin/python3 /var/ossec/framework/scripts/wazuh-clusterd.py
wazuh     549279  549266  0 23:09 ?        SN     0:00 /var/ossec/framework/python/bin/python3 /var/ossec/framework/scripts/wazuh-clusterd.py
wazuh     549282  549266  0 23:09 ?        SN     0:00 /var/ossec/framework/python/bin/python3 /var/ossec/framework/scripts/wazuh-clusterd.py
";

    #[test]
    fn older_ppid1_copies_beside_the_live_tree_are_orphans() {
        let f = findings_of(super::META.id, WAZUH);
        assert_eq!(f.len(), 1, "{f:?}");
        // The orphans, and the live daemon whose row the finding cites.
        let pids: Vec<u32> = f[0].entities.pids.iter().copied().collect();
        assert_eq!(pids, vec![527299, 527302, 549266]);
        assert!(f[0].title.contains("527299, 527302") && !f[0].title.contains("549266"));
    }

    #[test]
    fn the_live_tree_alone_or_younger_copies_are_not() {
        // The same listing without the two older rows: one daemon, its children.
        let live = WAZUH.lines().skip(2).collect::<Vec<_>>().join("\n");
        assert!(findings_of(super::META.id, &live).is_empty());
        // Copies started after the daemon: not an earlier instance's.
        let younger = WAZUH.replace(" 23:01 ", " 23:10 ");
        assert!(findings_of(super::META.id, &younger).is_empty());
    }

    #[test]
    fn start_times_compare() {
        assert!(super::started_before("23:01", "23:09"));
        assert!(!super::started_before("23:09", "23:09"));
        assert!(super::started_before("Mar24", "10:21"));
        assert!(!super::started_before("10:21", "Mar24"));
    }
}
