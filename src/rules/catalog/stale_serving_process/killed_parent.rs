//! A server killed by its PID at the prompt (`kill 1816382`) while a
//! process tree of the paste (`pstree -p`, `ps -ef`'s PPID column) shows a
//! child of it that holds the GPU: a signal to one PID reaches that process
//! only, so the child (vLLM's `VLLM::EngineCore`, a worker that mapped the
//! GPU's device node) outlives its parent with the GPU memory. A kill of the
//! process group (`kill -- -PGID`) or of the child's own PID reaches it.
//! A child bearing a serving engine's title holds the GPU by what it is.
//! A parent usually ends its children on its way out, so the finding is a
//! warning unless the paste asks about the child again after the kill
//! (`ps -fp CHILD`); it scripts no signal.

use std::collections::BTreeSet;

use super::META;
use super::titles::{ENGINES, Role, Spelling, classify};
use crate::correlate::Incident;
use crate::model::{PsRecord, TypedCommand};
use crate::rules::support::{COMPUTE_APPS, confidence};
use crate::rules::{Action, Finding, Severity};
use crate::source::Span;

/// The PIDs a typed `kill` signals, one by one: `kill 123`, `kill -9 123
/// 124`, `sudo kill -s TERM 123`. A negative number (a process group:
/// `kill -- -123`) or a job (`%1`) makes it no kill of single PIDs.
fn killed_pids(command: &str) -> Option<Vec<u32>> {
    let words: Vec<&str> = command
        .split_whitespace()
        .take_while(|w| !w.starts_with('#') && !matches!(*w, "|" | ";" | "&&" | "||"))
        .collect();
    let at = words.iter().position(|w| *w == "kill")?;
    if !words[..at].iter().all(|w| *w == "sudo") {
        return None;
    }
    let mut pids = Vec::new();
    let mut args = words[at + 1..].iter();
    let mut options = true;
    while let Some(w) = args.next() {
        if options && (*w == "-s" || *w == "-n") {
            args.next();
        } else if options && *w == "--" {
            options = false;
        } else if options && w.starts_with('-') && !w[1..].starts_with(|c: char| c.is_ascii_digit())
        {
            // A signal by name: `-9` is a number, below.
        } else if options
            && w.starts_with('-')
            && pids.is_empty()
            && w[1..].parse::<u32>().is_ok()
            && w.len() <= 3
        {
            // `-9`, `-15`: a signal number before the PIDs.
        } else {
            pids.push(w.parse::<u32>().ok()?);
        }
    }
    (!pids.is_empty()).then_some(pids)
}

/// The stack whose engine process `cmd` is: a known engine title
/// (`VLLM::EngineCore`), or a title of a stack's family (`VLLM::…`: every
/// process vLLM and its derivatives rename, vLLM-Omni's
/// `VLLM::StageEngineCoreProc_DP0`).
fn engine_stack(cmd: &str) -> Option<&'static str> {
    if let Some((e, _)) = classify(cmd) {
        return (e.role == Role::Engine).then_some(e.stack);
    }
    ENGINES
        .iter()
        .filter(|e| !e.process && e.spelling == Spelling::Title)
        .find(|e| cmd.split_whitespace().any(|w| w.starts_with(e.text)))
        .map(|e| e.stack)
}

/// One child of a killed parent, and what shows it holds the GPU.
struct Child<'a> {
    row: &'a PsRecord,
    /// Its rows that show it holding the GPU: fuser's mapped device node,
    /// a GPU process table's row.
    gpu_rows: Vec<(Span, String)>,
    gpus: BTreeSet<u32>,
    /// The stack whose engine title it bears, if any.
    title: Option<&'static str>,
    /// Later prompts of the paste that ask about it.
    after: Vec<Span>,
}

/// The children a kill of their parent by PID left holding the GPU.
pub(super) fn killed_parents(incident: &Incident, named: &BTreeSet<u32>) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    for kill in &incident.facts.typed_commands {
        let Some(pids) = killed_pids(&kill.command) else {
            continue;
        };
        for parent in &pids {
            let mut children: Vec<Child<'_>> = Vec::new();
            for row in &incident.facts.ps {
                let before = row.span.source == kill.span.source && row.span < kill.span;
                if row.ppid != Some(*parent)
                    || !before
                    || pids.contains(&row.pid)
                    || named.contains(&row.pid)
                    || seen.contains(&row.pid)
                {
                    continue;
                }
                let c = child(incident, kill, row);
                if c.title.is_some() || !c.gpu_rows.is_empty() {
                    seen.insert(row.pid);
                    children.push(c);
                }
            }
            if !children.is_empty() {
                out.push(finding(kill, *parent, &children));
            }
        }
    }
    out
}

fn child<'a>(incident: &'a Incident, kill: &TypedCommand, row: &'a PsRecord) -> Child<'a> {
    let mut gpu_rows = Vec::new();
    let mut gpus = BTreeSet::new();
    for h in &incident.facts.device_holders {
        if h.pid == row.pid && h.access.ends_with('m') && h.span < kill.span {
            gpus.extend(h.gpu);
            gpu_rows.push((
                h.span,
                format!(
                    "PID {} has {} mapped (`{}`): it holds the GPU",
                    h.pid, h.file, h.access
                ),
            ));
        }
    }
    for g in &incident.gpu_processes {
        if g.pid == row.pid {
            gpus.extend(g.gpu);
            if let Some(span) = g.spans.first() {
                let held = g.used_mib.map_or(String::new(), |m| format!(" {m}MiB of"));
                gpu_rows.push((*span, format!("PID {} holds{held} GPU memory", g.pid)));
            }
        }
    }
    let pid = row.pid.to_string();
    let after = incident
        .facts
        .typed_commands
        .iter()
        .filter(|c| c.span.source == kill.span.source && c.span > kill.span)
        .filter(|c| c.command.split_whitespace().any(|w| w == pid))
        .map(|c| c.span)
        .collect();
    Child {
        row,
        gpu_rows,
        gpus,
        title: engine_stack(&row.cmd),
        after,
    }
}

fn finding(kill: &TypedCommand, parent: u32, children: &[Child<'_>]) -> Finding {
    let asked = children.iter().any(|c| !c.after.is_empty());
    // A parent usually ends its children on its way out (vLLM's API server
    // its engine): the paste asking about a child again after the kill is
    // what makes it an error.
    let severity = if asked {
        META.severity
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(META.id, META.category, severity);
    f.entities.pids.insert(parent);
    let typed = kill.command.split('#').next().unwrap_or_default().trim();
    let pids: Vec<String> = children.iter().map(|c| c.row.pid.to_string()).collect();
    let gpus = cite(&mut f, kill, typed, parent, children, &pids);
    let first = &children[0];
    let what = match first.title {
        Some(stack) => format!("{stack}'s engine process `{}`", first.row.cmd.trim()),
        None => format!("`{}`", first.row.cmd.trim()),
    };
    let one = children.len() == 1;
    let who = if one {
        format!("its child PID {}, {what}", pids[0])
    } else {
        format!(
            "its {} children (PIDs {}; {what} …)",
            children.len(),
            pids.join(", ")
        )
    };
    let (plural, is, it, outlives, keeps) = if one {
        ("PID", "is", "it", "outlives", "keeps")
    } else {
        ("PIDs", "are", "them", "outlive", "keep")
    };
    let gpu_list: Vec<String> = gpus.iter().map(|g| g.to_string()).collect();
    let on = match gpu_list.len() {
        0 => String::new(),
        1 => format!(" on GPU {}", gpu_list[0]),
        _ => format!(" on GPUs {}", gpu_list.join(", ")),
    };
    f.condition(
        format!(
            "PIDs {} are children of the PID the kill names ({parent})",
            pids.join(", ")
        ),
        true,
    );
    f.condition(
        "they hold the GPU (a mapped device node, a GPU process row), not only bear an engine's title",
        children.iter().any(|c| !c.gpu_rows.is_empty()),
    );
    f.condition("the paste asks about a child again after the kill", asked);
    f.condition(
        "a listing after the kill shows them still running (missing: ps -o pid,ppid,stat,args -p PIDS)",
        false,
    );
    f.title = format!(
        "{plural} {} {outlives} the kill of {} parent {parent}{on}",
        pids.join(", "),
        if one { "its" } else { "their" }
    );
    let shown = if asked {
        let whom = if one { "it" } else { "one of them" };
        format!("the paste asks about {whom} again after the kill but does not list {it}")
    } else {
        format!("the paste does not list {it} after the kill")
    };
    let they = if one { "it" } else { "they" };
    f.headline = format!(
        "`{typed}` ends PID {parent} only; {who}{on}, {is} not signalled, so unless the parent ends {it} on its way out {they} {outlives} the server, re-parented, and {keeps} the GPU memory, and the next start finds the GPU taken (inferred: {shown})."
    );
    f.chain.push(format!("GPU memory stays in use{on}"));
    f.chain.push(format!(
        "{plural} {} outlived {} parent {parent}",
        pids.join(", "),
        if one { "its" } else { "their" }
    ));
    f.chain
        .push(format!("`{typed}` signalled PID {parent} alone"));
    push_actions(&mut f, &pids);
    f.confidence = confidence(&f, 0.45, 0.85);
    f
}

/// Cites the children's rows, their GPU rows, the kill and the prompts that
/// ask about them after it; returns their GPUs.
fn cite(
    f: &mut Finding,
    kill: &TypedCommand,
    typed: &str,
    parent: u32,
    children: &[Child<'_>],
    pids: &[String],
) -> BTreeSet<u32> {
    let mut gpus: BTreeSet<u32> = BTreeSet::new();
    for c in children {
        let pid = c.row.pid;
        f.entities.pids.insert(pid);
        gpus.extend(c.gpus.iter().copied());
        f.evidence(
            c.row.span,
            format!(
                "PID {pid} (`{}`) is a child of PID {parent}",
                c.row.cmd.trim()
            ),
        );
        for (span, note) in &c.gpu_rows {
            f.evidence(*span, note.clone());
        }
    }
    f.entities.gpus.extend(gpus.iter().copied());
    f.evidence(
        kill.span,
        format!(
            "`{typed}` signals PID {parent} alone: not its children ({})",
            pids.join(", ")
        ),
    );
    for c in children {
        for span in &c.after {
            f.evidence(
                *span,
                format!("PID {} is asked about again after the kill", c.row.pid),
            );
        }
    }
    gpus
}

/// The explanation and the steps: check the children, end them by PID,
/// stop the server by its process group.
fn push_actions(f: &mut Finding, pids: &[String]) {
    f.explanation = "A signal sent to one PID reaches that process only. A model server that runs its engine in a child process (vLLM's `VLLM::EngineCore`, SGLang's schedulers, a worker pool) holds the GPU in the child: killing the parent by its PID leaves the child running, re-parented, with its CUDA context, so the memory stays taken until the child itself ends.".to_owned();
    f.actions.push(Action::advice(
        "check that the children still run and hold the GPU",
        Some(&format!(
            "ps -o pid,ppid,stat,lstart,args -p {}",
            pids.join(",")
        )),
    ));
    f.actions.push(Action::advice(
        "then end them by their PIDs (SIGTERM, then SIGKILL) and check that their memory is freed",
        Some(COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "stop the server by its process group (`kill -- -PGID`, a process manager's group kill, a unit with KillMode=control-group), not by the parent's PID",
        None,
    ));
}

#[cfg(test)]
mod tests {
    use super::killed_pids;

    #[test]
    fn kills_of_single_pids() {
        assert_eq!(
            killed_pids("kill 1816382           # Kills parent only"),
            Some(vec![1816382])
        );
        assert_eq!(killed_pids("sudo kill -9 10 11"), Some(vec![10, 11]));
        assert_eq!(killed_pids("kill -s TERM 42"), Some(vec![42]));
        assert_eq!(killed_pids("kill -TERM 42"), Some(vec![42]));
        assert_eq!(killed_pids("kill -- -42"), None);
        assert_eq!(killed_pids("kill %1"), None);
        assert_eq!(killed_pids("pkill -f vllm"), None);
        assert_eq!(killed_pids("kill -l"), None);
    }
}
