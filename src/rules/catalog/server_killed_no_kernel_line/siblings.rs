//! Several background jobs of one command reported `Killed` together: the
//! shell's job reports (`script.sh: line 24: 423467 Killed  python3 -m
//! metaseq.scripts.reshard_mp …`) for two or more PIDs of the same
//! command line in one input, with no error before them. Copies of one
//! program run in parallel each take their share of the host's memory;
//! SIGKILL for several of them at once, with no traceback, is the OOM
//! killer's signature more than an operator's (who would stop them all,
//! by one command the paste would show). Read only where no kill of the
//! group made a finding of its own.

use std::collections::BTreeMap;

use crate::correlate::Incident;
use crate::model::ServerEventKind;
use crate::rules::{Action, Finding};
use crate::source::{SourceId, Span};

use super::{META, failed_before, person};

/// The fewest workers of one command that make a group.
const AT_LEAST: usize = 2;

/// The groups of shell job reports `Killed` that share an input and a
/// command, each as its command and its kills (span, PID), in input
/// order; only groups of [`AT_LEAST`] distinct PIDs.
fn groups(incident: &Incident) -> Vec<(&str, Vec<(Span, u32)>)> {
    let mut by: BTreeMap<(SourceId, &str), Vec<(Span, u32)>> = BTreeMap::new();
    for e in &incident.facts.server_events {
        if let ServerEventKind::ShellJobSignaled {
            pid,
            signal,
            command,
        } = &e.kind
            && signal == "Killed"
            && !command.trim().is_empty()
        {
            let kills = by.entry((e.span.source, command.trim())).or_default();
            if kills.iter().all(|(_, p)| p != pid) {
                kills.push((e.span, *pid));
            }
        }
    }
    by.into_iter()
        .filter(|(_, kills)| kills.len() >= AT_LEAST)
        .map(|((_, command), mut kills)| {
            kills.sort();
            (command, kills)
        })
        .collect()
}

/// One finding per group none of whose kills made a finding of its own
/// (`made`: the kills that did), when nothing failed before its first
/// kill and no kill was typed.
pub(super) fn findings(incident: &Incident, made: &[Span], out: &mut Vec<Finding>) {
    for (command, kills) in groups(incident) {
        let Some(&(first, _)) = kills.first() else {
            continue;
        };
        if kills.iter().any(|(s, _)| made.contains(s))
            || failed_before(incident, first)
            || person::typed_kill(incident, first)
        {
            continue;
        }
        out.push(finding(command, &kills));
    }
}

fn finding(command: &str, kills: &[(Span, u32)]) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let n = kills.len();
    let pids: Vec<String> = kills.iter().map(|(_, p)| p.to_string()).collect();
    let pids = pids.join(", ");
    for (span, pid) in kills {
        f.evidence(
            *span,
            format!("the shell reports PID {pid} Killed (SIGKILL) with no traceback: one of {n} workers of the same command"),
        );
        f.entities.pids.insert(*pid);
    }
    let program = program(command);
    f.condition(
        format!("{n} background jobs of the same command were Killed (SIGKILL)"),
        true,
    );
    f.condition("no error, exception or failure before the kills", true);
    f.condition(
        "a kernel line names the OOM killer (journalctl -k, dmesg)",
        false,
    );
    f.title = format!(
        "{n} parallel workers of `{program}` were Killed (SIGKILL): most likely the host's OOM killer"
    );
    f.headline = format!(
        "The shell reports {n} background jobs of the same command Killed (PIDs {pids}: `{program}`) with no traceback: SIGKILL from outside, not an error of their own. Copies of one program run side by side each take their share of the host's RAM; several killed together is the kernel's OOM killer's signature. Its own lines are not in the inputs."
    );
    f.chain.push(format!("{n} workers (PIDs {pids}) ended"));
    f.chain
        .push("the shell reports each Killed: SIGKILL, no traceback".to_owned());
    f.chain.push(
        "most likely the host ran out of memory with all the copies running, and the OOM killer picked them".to_owned(),
    );
    f.explanation = "A process the kernel's OOM killer picks gets SIGKILL: it prints nothing, and the shell that ran it reports `Killed`. Launchers that start one copy of a program per part (resharding, conversion, preprocessing) multiply its memory by the number of parts; when the host's RAM runs out, the largest copies are killed while the others finish.".to_owned();
    f.actions.push(Action::advice(
        "confirm in the kernel's log that the OOM killer killed these PIDs",
        Some("journalctl -k | grep -i -e oom -e 'killed process'   # or: dmesg -T | grep -i oom"),
    ));
    f.actions.push(Action::advice(
        "run fewer copies at once (or one at a time), or give the host more RAM or swap, then rerun the parts that were killed",
        Some("free -h"),
    ));
    f.confidence = 0.5;
    f
}

/// The program a command runs: `python3 -m metaseq.scripts.reshard_mp`
/// (the interpreter and its module or script), else the first word.
fn program(command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    match words.as_slice() {
        [py, "-m", module, ..] if py.starts_with("python") => format!("{py} -m {module}"),
        [py, script, ..] if py.starts_with("python") && !script.starts_with('-') => {
            format!("{py} {script}")
        }
        [first, ..] => (*first).to_owned(),
        [] => String::new(),
    }
}
