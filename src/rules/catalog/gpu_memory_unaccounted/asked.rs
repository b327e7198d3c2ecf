//! A question about one PID typed twice at a prompt (`ps aux | grep PID`,
//! `ps -p PID -o …`), answered first with the process's row and later with
//! none (only the `grep` itself): the process exited between the two. A
//! GPU table after the later answer that still shows the memory taken with
//! no process listed is memory that outlived its process. wandb/wandb#1247
//! (batch P 1033): a sweep trial's `python -m nmt.train`, PID 2559215, in
//! state `Dl+` in the first answer, gone from the second, "but the memory
//! is being used as if the process was still running".

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{PsRecord, TypedCommand};

use super::Ended;

/// `ps … | grep [-w…] PID` or `ps … -p PID …`: the PID asked about.
static ASKED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*(?:sudo\s+)?ps\b(?:[^|]*\|\s*grep(?:\s+-\S+)*\s+(?P<grep>[0-9]+)\s*$|[^|]*\s(?:-p\s*|--pid[ =])(?P<p>[0-9]+)\b[^|]*$)",
    )
    .expect("regex")
});

/// The PID a typed command asks `ps` about.
fn asked(command: &str) -> Option<u32> {
    let c = ASKED.captures(command)?;
    c.name("grep").or(c.name("p"))?.as_str().parse().ok()
}

/// The `ps` rows `command` printed (between its prompt and the next one).
fn answer<'a>(
    incident: &'a Incident,
    command: &TypedCommand,
    next: Option<u32>,
) -> Vec<&'a PsRecord> {
    incident
        .facts
        .ps
        .iter()
        .filter(|p| p.span.source == command.span.source && command.prints_line(p.span.line, next))
        .collect()
}

/// The last process the inputs show exiting between two answers to the
/// same question: its row in the earlier answer, and the later prompt.
pub(super) fn gone(incident: &Incident) -> Option<Ended> {
    let commands = &incident.facts.typed_commands;
    let mut seen: Vec<(u32, &PsRecord)> = Vec::new();
    let mut ended = None;
    for (i, c) in commands.iter().enumerate() {
        let Some(pid) = asked(&c.command) else {
            continue;
        };
        let next = commands
            .get(i + 1)
            .filter(|n| n.span.source == c.span.source)
            .map(|n| n.span.line);
        let rows = answer(incident, c, next);
        if let Some(row) = rows.iter().find(|r| r.pid == pid) {
            seen.push((pid, row));
            continue;
        }
        // Answered, but not by the process: only the grep, or nothing.
        let Some((_, before)) = seen.iter().rev().find(|(p, _)| *p == pid) else {
            continue;
        };
        let state = match before.stat.as_deref() {
            Some(s) if s.starts_with('D') => {
                format!(", in uninterruptible sleep (`{s}`) when listed before,")
            }
            _ => String::new(),
        };
        ended = Some(Ended {
            what: format!(
                "PID {pid} ({}){state} exited: the later `{}` lists no such process",
                short(&before.cmd),
                c.command.trim()
            ),
            pid: Some(pid),
            span: c.span,
        });
    }
    ended
}

/// A command line cut to its first words, for a sentence.
fn short(cmd: &str) -> String {
    let words: Vec<&str> = cmd.split_whitespace().take(4).collect();
    let more = if cmd.split_whitespace().count() > 4 {
        " …"
    } else {
        ""
    };
    format!("{}{more}", words.join(" "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pid_a_ps_question_asks_about() {
        assert_eq!(super::asked("ps aux | grep 2559215"), Some(2559215));
        assert_eq!(super::asked("ps -ef | grep -w 4242"), Some(4242));
        assert_eq!(super::asked("ps -p 1234 -o stat,cmd"), Some(1234));
        assert_eq!(super::asked("ps aux | grep python"), None);
        assert_eq!(super::asked("kill -9 1234"), None);
    }
}
