//! A second copy of a unit's daemon running outside the unit: `systemctl
//! status` shows the unit active with its Main PID and its whole control
//! group (`CGroup:` tree), and a process listing of the same paste shows
//! another process of the same program, re-parented to PID 1, that is in
//! no unit's control group the paste shows. A daemon the unit started is in
//! its control group; one outside it was started by hand (or by a script)
//! beside the unit: systemd does not track it, stopping or restarting the
//! unit leaves it running, and both do the daemon's work (two schedulers
//! run every job twice, two servers contend for one port or device).
//! Template units (`getty@tty1`) run one copy per instance, each in its own
//! control group, and are not read; nor are interpreters (`python`,
//! `bash`), which name no daemon.

use std::collections::BTreeSet;

use super::META;
use crate::correlate::Incident;
use crate::model::{PsRecord, UnitStatus};
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};

/// Programs that run many different things: their name is no daemon's.
const GENERIC: &[&str] = &[
    "python", "python2", "python3", "node", "java", "bash", "sh", "perl", "ruby", "env", "sudo",
];

fn program(cmd: &str) -> Option<&str> {
    let first = cmd.split_whitespace().next()?;
    let base = first.rsplit('/').next().unwrap_or(first);
    let base = base.trim_end_matches(':');
    let generic = GENERIC.iter().any(|g| {
        base.strip_prefix(g)
            .is_some_and(|v| v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    });
    (!generic && !base.is_empty()).then_some(base)
}

/// Findings for the copies of each active unit's daemon outside it;
/// `reported` are PIDs another part of the rule named.
pub(super) fn beside_units(incident: &Incident, reported: &BTreeSet<u32>) -> Vec<Finding> {
    let statuses = &incident.facts.unit_statuses;
    // Every PID some shown control group holds.
    let grouped: BTreeSet<u32> = statuses
        .iter()
        .flat_map(|s| s.cgroup.iter().map(|m| m.pid))
        .collect();
    let mut out = Vec::new();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for st in statuses {
        let Some(main) = st.main_pid else { continue };
        let Some(own) = st.cgroup.iter().find(|m| m.pid == main) else {
            continue;
        };
        let active = st.active_state.as_deref() == Some("active");
        if !active || st.unit.contains('@') || !done.insert(st.unit.as_str()) {
            continue;
        }
        let Some(name) = program(&own.cmdline) else {
            continue;
        };
        let mut extra: Vec<&PsRecord> = Vec::new();
        for p in &incident.facts.ps {
            let outside = p.ppid == Some(1) && !grouped.contains(&p.pid) && p.pid != main;
            if outside
                && program(&p.cmd) == Some(name)
                && !reported.contains(&p.pid)
                && !extra.iter().any(|e| e.pid == p.pid)
            {
                extra.push(p);
            }
        }
        if !extra.is_empty() {
            out.push(finding(incident, st, own.span, name, &extra));
        }
    }
    out
}

fn finding(
    incident: &Incident,
    st: &UnitStatus,
    own: crate::source::Span,
    name: &str,
    extra: &[&PsRecord],
) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let unit = st.unit.as_str();
    let main = st.main_pid.unwrap_or_default();
    f.entities.units.insert(unit.to_owned());
    let pids: Vec<String> = extra.iter().map(|p| p.pid.to_string()).collect();
    super::cite_rows(&mut f, extra, |p, since| {
        format!(
            "PID {} runs `{name}` with PPID 1{since}, outside {unit}'s control group: a second instance",
            p.pid
        )
    });
    f.evidence(
        own,
        format!("{unit}'s control group holds its Main PID {main} and no other copy of `{name}`"),
    );
    // The unit's own row in the listing: the instance systemd tracks.
    if let Some(row) = incident.facts.ps.iter().find(|p| p.pid == main) {
        f.evidence(row.span, format!("PID {main} is {unit}'s own instance"));
    }
    f.condition(
        format!("{unit} is active with Main PID {main} and its control group shown"),
        true,
    );
    f.condition(
        format!("another `{name}` runs under PID 1 outside every control group shown"),
        true,
    );
    f.condition(
        "its control group settles who started it (missing: cat /proc/PID/cgroup)",
        false,
    );
    let (plural, runs) = if extra.len() == 1 {
        ("PID", "runs")
    } else {
        ("PIDs", "run")
    };
    f.title = format!(
        "second `{name}` beside {unit}: {plural} {} outside the unit",
        pids.join(", ")
    );
    f.headline = format!(
        "{unit} runs `{name}` as its Main PID {main}, and {plural} {} {runs} the same program under PID 1 outside the unit's control group: a second instance started beside the unit (by hand or by a script), which systemd does not track, so stopping or restarting {unit} leaves it running while both do the daemon's work.",
        pids.join(", ")
    );
    f.chain
        .push(format!("two instances of `{name}` run at once"));
    f.chain.push(format!(
        "{plural} {} {} started outside {unit}",
        pids.join(", "),
        if extra.len() == 1 { "was" } else { "were" }
    ));
    f.explanation = "A daemon a unit starts lives in the unit's control group, which `systemctl status` lists. A process of the same program re-parented to PID 1 outside it was started some other way; systemd neither stops nor restarts it, and it runs beside the unit's own instance.".to_owned();
    f.actions.push(Action::advice(
        "check that the extra process is outside the unit before ending it",
        Some(&format!(
            "cat /proc/{}/cgroup; systemctl status {unit}",
            extra[0].pid
        )),
    ));
    f.actions.push(Action::advice(
        format!(
            "end the extra instance (not Main PID {main}), and run `{name}` only through {unit}"
        ),
        None,
    ));
    f.confidence = confidence(&f, 0.5, 0.85);
    f
}

#[cfg(test)]
mod tests {
    /// A reduction of batch Z's 1810 (cronie/SLES, `systemctl status
    /// cron` then `ps -ef` after `cron` was typed at the prompt), cited as
    /// such: the unit's own daemon and a second one under init.
    const CRON: &str = "# systemctl status cron
● cron.service - Command Scheduler
   Loaded: loaded (/usr/lib/systemd/system/cron.service; enabled; vendor preset: enabled)
   Active: active (running) since Tue 2019-04-23 13:54:00 CEST; 4s ago
 Main PID: 3564 (cron)
    Tasks: 1 (limit: 512)
   CGroup: /system.slice/cron.service
           └─3564 /usr/sbin/cron -n

$ ps -ef |grep cron
root      3564     1  0 13:53 ?        00:00:00 /usr/sbin/cron -n
root      3572     1  0 13:54 ?        00:00:00 cron
";

    #[test]
    fn a_second_daemon_outside_the_unit() {
        let f = crate::testing::findings_of(super::META.id, CRON);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.pids.contains(&3572));
        assert!(f[0].entities.units.contains("cron.service"));
        crate::testing::cites_line(&f[0], 12);
    }

    #[test]
    fn the_units_own_daemon_alone_is_no_finding() {
        let alone = CRON.replace("root      3572     1  0 13:54 ?        00:00:00 cron\n", "");
        assert!(crate::testing::findings_of(super::META.id, &alone).is_empty());
        // A template unit's other instances are in their own groups.
        let template = CRON.replace("cron.service", "cron@a.service");
        assert!(crate::testing::findings_of(super::META.id, &template).is_empty());
    }
}
