//! `process-died`: every death in the inputs is explained. A unit's main
//! process killed by a signal or dumping core, once (a loop is
//! `systemd-crash-loop`'s), or a job the shell reports killed, with how it
//! died, when, and its last words: the last error lines it printed before.
//! Also a core dump `coredumpctl info` shows, and a worker torchrun reports
//! failed (`records.rs`); two accounts of one death are one. And a
//! container `docker inspect` records dead (`containers.rs`).
//! The fallback for the deaths no other rule explains: `rules::diagnose`
//! drops it where another finding cites the same death, and folds it into
//! the finding that cites its last words.

mod containers;
mod records;
mod seccomp;
mod units;
mod watchdog;

use crate::correlate::{Incident, exit_meaning, last_words};
use crate::model::ServerEventKind;
use crate::rules::support::{confidence, when};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: ProcessDied = ProcessDied;

pub struct ProcessDied;

pub static META: RuleMeta = RuleMeta {
    id: super::PROCESS_DIED,
    category: Category::ServerException,
    severity: Severity::Error,
    summary: "a server process died of a signal or dumped core, once: how, when, and the last error lines it printed",
    anchors: &[
        "code=killed",
        "code=dumped",
        "Result: core-dump",
        "Result: signal",
        "with result 'core-dump'",
        "with result 'signal'",
    ],
    doc: r#"
## What it means
A process died, and no more specific finding explains it: a unit's main
process killed by a signal (`Main process exited, code=killed,
status=6/ABRT`), dumping core (`code=dumped, status=11/SEGV`, `Active:
failed (Result: core-dump)`), a job the shell reports killed (`line 22:
103525 Killed python -m …`), or a child a server reports lost to a signal
(Ollama's `llama runner process has terminated: signal: segmentation fault
(core dumped)`), a core dump `coredumpctl info` shows (`PID: 3776
(ollama_llama_se)`, `Signal: 6 (ABRT)`, `Unit: ollama.service`), or a
worker torchrun reports failed (`failed (exitcode: -9) local_rank: 1 (pid:
1168) of binary: …`, with the workers it stopped after it), or a container
`docker inspect` records dead: exited with a non-zero `ExitCode` (128 + N
read as signal N: 139 is SIGSEGV), `Dead`, or with the daemon's
`State.Error`, with its `FinishedAt` and `StartedAt` lines. A container
death a catalog row reads on the record's own lines is that row's
(`"OOMKilled": true`: the memory cgroup's kill; `"ExitCode": 137` alone:
`container-killed-137`; an `"Error"` line a row knows); an error the rows
know only once its JSON string is decoded gives the finding the row's
category and fix. Two accounts of one death (Ollama's and coredumpctl's)
are one finding. It says how the
process died, when, and its last words: the last error lines the same unit
or PID printed before, what the server quotes of them, or, for a process
with no unit, the last error line before the death that a catalog knows.
Where another finding cites those last words, that finding explains the
death: the death becomes its evidence instead (a rank's NCCL error, then
torchrun's report that the rank failed). A unit's death that systemd
records (its main process's, or a control process's: a forking daemon's
start command) with no last words at all is the unit's failure (category
`unit-crash-loop`, once); with last words, the program's exception
(`server-exception`).

## Why it happens
A crash in native code (SIGSEGV, SIGBUS), a failed assertion or an uncaught
C++ exception (SIGABRT), a kill from outside (SIGKILL: an operator, a
supervisor, the OOM killer when its own lines are not in the inputs).

## How to confirm
`coredumpctl info PID` for a core dump (and `coredumpctl gdb PID` for its
backtrace); `journalctl -u UNIT -n 200` for the lines before the death
(`docker logs --tail 200 CONTAINER` for a container's);
`journalctl -k` around the time for a kernel kill.

## How to fix
What the last words and the backtrace say; a known bug of the server's
version is fixed by upgrading it.

## Safety
Advice only.
"#,
};

/// One death: where it is recorded, how, and whose.
struct Death {
    span: Span,
    how: String,
    unit: Option<String>,
    pid: Option<u32>,
    /// A signal or a core dump, or a worker's exit its launcher reports
    /// (not a unit's exit code, which another rule reads).
    signalled: bool,
    /// The signal's number, where the account names it: two accounts of
    /// one death (Ollama's and coredumpctl's) agree on it.
    signal: Option<u32>,
    /// Other lines of the same account (coredumpctl's `Signal:` and
    /// `Unit:`, the workers torchrun stopped after it), each with its note
    /// and the PID it names.
    records: Vec<(Span, String, Option<u32>)>,
    /// Its last words where no unit gathers them: the last error line a
    /// catalog knows before the death in the same input.
    last_words: Vec<(Span, String)>,
    /// The process crashed by itself (SIGSEGV, SIGABRT, SIGBUS, SIGILL,
    /// SIGFPE, a core dump), rather than being killed from outside
    /// (SIGKILL, SIGTERM: the killer, not the process, is the story, and
    /// its lines may be elsewhere).
    crashed: bool,
    /// systemd's own verdict on the same death (`Failed with result
    /// 'core-dump'`, a status block's `Active: failed (Result: …)`), cited
    /// so that the catalog's row for that line is not said twice.
    verdicts: Vec<Span>,
    /// What the process said as it died, printed on the death's own line
    /// (Ollama appends the runner's last error: `signal: aborted (core
    /// dumped) CUDA error: …`).
    said: Option<String>,
    /// Who died, where the server that lost it names it (`Ollama's model
    /// runner`); else it is said from the unit and PID.
    who: Option<String>,
    /// The catalog row its stated reason is, where no line of the inputs
    /// is that row's already (a container's `State.Error`, decoded): the
    /// finding takes its category and fix.
    cause: Option<&'static crate::catalogs::Row>,
    /// systemd recorded it as its unit's failure (`Main process exited,
    /// code=dumped`, `Failed with result 'signal'`, `Active: failed
    /// (Result: core-dump)`): where nothing the program printed explains
    /// it, the unit's failure is the finding (see [`category`]).
    unit_failed: bool,
}

/// The catalog row that reports a process's death and how it ended: a
/// server's own account of a child it lost. Each wording across versions
/// is the row's; what this rule needs is the capture that says how.
const OLLAMA_RUNNER: &str = "stacks-ollama.runner-terminated";

/// Linux signal numbers by the names Go's `os.ProcessState` prints them
/// (`signal: segmentation fault (core dumped)`, syscall's signal table) and
/// by their abbreviations.
const SIGNALS: &[(&str, &str, u32)] = &[
    ("hangup", "HUP", 1),
    ("interrupt", "INT", 2),
    ("quit", "QUIT", 3),
    ("illegal instruction", "ILL", 4),
    ("trace/breakpoint trap", "TRAP", 5),
    ("aborted", "ABRT", 6),
    ("bus error", "BUS", 7),
    ("floating point exception", "FPE", 8),
    ("killed", "KILL", 9),
    ("segmentation fault", "SEGV", 11),
    ("terminated", "TERM", 15),
];

/// A signal number as systemd's `status=N/NAME` reads, for [`exit_meaning`].
fn status_of(number: u32) -> String {
    SIGNALS
        .iter()
        .find(|(_, _, n)| *n == number)
        .map_or(number.to_string(), |(_, abbr, n)| format!("{n}/{abbr}"))
}

/// The signals a stop sends (systemd's, a shell's Ctrl-C, a hang-up): a
/// process that dies of one was asked to stop, which is no death to explain.
fn is_stop(signal: &str) -> bool {
    const STOPS: &[&str] = &["TERM", "INT", "HUP", "Terminated", "Interrupt", "Hangup"];
    STOPS.iter().any(|s| signal.contains(s))
}

/// Whether a signal, as systemd (`11/SEGV`, `SEGV`) or a shell
/// (`Segmentation fault (core dumped)`, `Killed`) words it, is a crash of
/// the process itself. An abbreviation counts as a whole word (`KILL`
/// holds `ILL` and is no crash).
fn is_crash(signal: &str) -> bool {
    const ABBREVIATIONS: &[&str] = &["SEGV", "ABRT", "BUS", "ILL", "FPE", "TRAP", "SYS"];
    const WORDS: &[&str] = &[
        "Segmentation fault",
        "Aborted",
        "Bus error",
        "Illegal instruction",
        "Floating point exception",
        "Trace/breakpoint trap",
        "core dumped",
    ];
    signal
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(|w| w.strip_prefix("SIG").unwrap_or(w))
        .any(|w| ABBREVIATIONS.contains(&w))
        || WORDS.iter().any(|w| signal.contains(w))
}

impl Rule for ProcessDied {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let deaths = units::unit_deaths(incident)
            .into_iter()
            .chain(shell_deaths(incident))
            .chain(row_deaths(incident))
            .chain(records::core_dumps(incident))
            .chain(records::torch_workers(incident))
            .chain(containers::container_deaths(incident));
        for death in records::join(incident, deaths) {
            if death.signalled {
                out.push(finding(incident, &death));
            }
        }
    }
}

/// Jobs the shell reports killed by a signal.
fn shell_deaths(incident: &Incident) -> Vec<Death> {
    incident
        .facts
        .server_events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::ShellJobSignaled {
                pid,
                signal,
                command,
            } if !is_stop(signal) => Some(Death {
                span: e.span,
                how: format!("the shell reports `{signal}` for `{command}`"),
                unit: incident.unit_of_event(e).map(|(u, _, _)| u),
                pid: Some(*pid),
                signalled: true,
                crashed: is_crash(signal),
                verdicts: Vec::new(),
                said: None,
                who: None,
                signal: None,
                records: Vec::new(),
                last_words: Vec::new(),
                cause: None,
                unit_failed: false,
            }),
            _ => None,
        })
        .collect()
}

/// Deaths a server reports of a child it started: Ollama's runner ended by
/// a signal (`signal: segmentation fault (core dumped)`, what Go's
/// `os.ProcessState` prints). A stop signal is no death. (vLLM V0's
/// `Worker … died, exit code: -N` is `vllm-engine-core-failed`'s.)
fn row_deaths(incident: &Incident) -> Vec<Death> {
    let mut out = Vec::new();
    for (m, hit) in incident.known(OLLAMA_RUNNER) {
        if explained_elsewhere(incident, m, OLLAMA_RUNNER) {
            continue;
        }
        let Some(why) = hit
            .get("why")
            .and_then(|w| w.trim().strip_prefix("signal: "))
        else {
            continue;
        };
        let Some((name, _, number)) = SIGNALS
            .iter()
            .filter(|(name, _, _)| why.starts_with(name))
            .max_by_key(|(name, _, _)| name.len())
        else {
            continue;
        };
        let after = why[name.len()..].trim_start();
        let (dumped, rest) = match after.strip_prefix("(core dumped)") {
            Some(rest) => (true, rest.trim()),
            None => (false, after.trim()),
        };
        if let Some(d) = signal_death(incident, m, *number, dumped, "Ollama's model runner") {
            out.push(Death {
                said: (!rest.is_empty()).then(|| rest.to_owned()),
                ..d
            });
        }
    }
    out
}

/// Whether another catalog row reads the death's own line as a cause
/// (Ollama's `signal: killed` while loading is a host OOM kill; a quoted
/// `cudaMalloc failed: out of memory` is CUDA's): the catalog then says
/// more than a bare death.
fn explained_elsewhere(incident: &Incident, m: &crate::model::Message, row: &str) -> bool {
    incident.known.iter().any(|k| {
        k.hit
            .row
            .is_some_and(|r| r.id != row && r.category.is_some())
            && incident.facts.messages[k.message].span == m.span
    })
}

/// One death by signal `number` recorded on message `m`; `None` for a stop.
fn signal_death(
    incident: &Incident,
    m: &crate::model::Message,
    number: u32,
    dumped: bool,
    what: &str,
) -> Option<Death> {
    let status = status_of(number);
    if is_stop(&status) {
        return None;
    }
    let code = if dumped { "dumped" } else { "killed" };
    let how = exit_meaning(code, &status)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("signal {status}"));
    let dumped_text = if dumped { ", and dumped core" } else { "" };
    let pid = m.pid;
    let unit = pid.and_then(|p| incident.owner(p)).map(|o| o.unit.clone());
    let who = match pid {
        Some(p) => format!("{what} (PID {p})"),
        None => what.to_owned(),
    };
    Some(Death {
        span: m.span,
        how: format!("{how}{dumped_text} (signal {status})"),
        unit,
        pid,
        signalled: true,
        crashed: dumped || is_crash(&status),
        verdicts: Vec::new(),
        said: None,
        who: Some(who),
        signal: Some(number),
        records: Vec::new(),
        last_words: Vec::new(),
        cause: None,
        unit_failed: false,
    })
}

fn finding(incident: &Incident, death: &Death) -> Finding {
    // A kill from outside names no cause by itself: a warning, never a root
    // cause over what the killer's own lines (elsewhere) would say.
    let severity = if death.crashed {
        META.severity
    } else {
        Severity::Warning
    };
    let words = death
        .unit
        .as_deref()
        .map(|u| last_words(incident, u, death.span));
    let mut f = Finding::new(
        META.id,
        units::category(incident, death, words.as_ref()),
        severity,
    );
    let who = match (&death.unit, death.pid) {
        _ if death.who.is_some() => death.who.clone().unwrap_or_default(),
        (Some(u), Some(p)) => format!("{u}'s main process (PID {p})"),
        (Some(u), None) => format!("{u}'s main process"),
        (None, Some(p)) => format!("process {p}"),
        (None, None) => "a process".to_owned(),
    };
    if let Some(u) = &death.unit {
        f.entities.units.insert(u.clone());
    }
    if let Some(p) = death.pid {
        f.entities.pids.insert(p);
    }
    // Its time, or the time another record of it gives (coredumpctl's).
    let at = incident
        .time_of(death.span)
        .or_else(|| {
            death
                .records
                .iter()
                .find_map(|(s, _, _)| incident.time_of(*s))
        })
        .map(|t| format!(" at {}", when(t)))
        .unwrap_or_default();
    f.evidence(death.span, format!("{who} died{at}: {}", death.how));
    for span in &death.verdicts {
        f.evidence(*span, "systemd's verdict on the same death");
    }
    for (span, note, pid) in &death.records {
        f.evidence(*span, note.clone());
        f.entities.pids.extend(*pid);
    }
    let reason = words.as_ref().and_then(|w| w.reason());
    let said = death
        .said
        .as_deref()
        .or(reason.map(|r| r.message.trim()))
        .or(death.last_words.last().map(|(_, t)| t.as_str()));
    if let Some(w) = &words {
        f.entities.pids.extend(w.pids.iter().copied());
        for line in &w.lines {
            f.evidence(line.span, "its last words before it died");
            f.last_words.push(line.span);
        }
    }
    for (span, _) in &death.last_words {
        f.evidence(*span, "its last words before it died");
        f.last_words.push(*span);
    }
    f.condition("the inputs record the death and how it happened", true);
    f.condition(
        "the process's last error lines before it are in the inputs",
        said.is_some(),
    );
    f.condition("it died once (not a restart loop)", true);
    f.condition(
        "it crashed by itself (not killed from outside)",
        death.crashed,
    );
    f.confidence = confidence(&f, 0.5, 0.7);
    f.title = format!("{who} died: {}", death.how);
    f.headline = match said {
        Some(r) => format!("{who} died{at}: {}. Its last words: {r}", death.how),
        None => format!("{who} died{at}: {}.", death.how),
    };
    units::say_failed(&mut f, death);
    f.chain.push(format!("{who} is gone"));
    f.chain.push(format!("it died: {}", death.how));
    if let Some(r) = said {
        f.chain.push(format!("after it printed: {r}"));
    }
    seccomp::advise(incident, &mut f, death);
    advise(&mut f, death);
    f
}

/// The death's advice: its cause's row's fix, who killed it, and where its
/// last lines are (a container's, a unit's, a process's).
fn advise(f: &mut Finding, death: &Death) {
    if let Some(row) = death.cause {
        f.chain.push(row.meaning.clone());
        if let Some(fix) = &row.fix {
            f.actions
                .push(Action::advice(fix.clone(), row.confirm.as_deref()));
        }
    }
    if !death.crashed {
        f.actions.push(Action::advice(
            "Find what killed it: the kernel's OOM killer, a supervisor's timeout, an operator",
            Some("journalctl -k | grep -iE 'killed process|oom'; journalctl -u UNIT"),
        ));
    }
    if death.who.as_deref().is_some_and(containers::is_container) {
        f.actions.push(Action::advice(
            "Read the container's last lines and its state; a crash in a known version is fixed by upgrading the image",
            Some("docker logs --tail 200 CONTAINER; docker inspect -f '{{json .State}}' CONTAINER; journalctl -k --since TIME"),
        ));
        return;
    }
    f.actions.push(Action::advice(
        "Read the process's last lines and, for a core dump, its backtrace; a crash in a known version is fixed by upgrading the server",
        Some(match &death.unit {
            Some(_) => "coredumpctl info PID; journalctl -u UNIT -n 200",
            None => "coredumpctl info PID; journalctl -k --since TIME",
        }),
    ));
}

#[cfg(test)]
mod tests {
    use crate::rules::{Category, Severity};

    /// The findings of this rule alone on `text`; the submodules' tests
    /// ask it too.
    pub(super) fn deaths(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    #[test]
    fn a_servers_account_of_a_child_killed_by_a_signal_is_one_death() {
        // Ollama's wording before and after 0.30 (llama-server as the
        // runner), each signal as Go's os.ProcessState prints it.
        let f = deaths(
            "Error: llama runner process has terminated: signal: segmentation fault (core dumped)\n",
        );
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            (f[0].category, f[0].severity),
            (Category::ServerException, Severity::Error)
        );
        assert!(f[0].title.contains("SIGSEGV"), "{}", f[0].title);
        let f = deaths(
            "Error: 500 Internal Server Error: llama-server process has terminated: signal: bus error (core dumped)\n",
        );
        assert!(f.len() == 1 && f[0].title.contains("SIGBUS"), "{f:?}");
        // What Ollama quotes after the signal is the runner's last words
        // (https://github.com/ollama/ollama/issues/5295).
        let f = deaths(
            "Error: llama runner process has terminated: signal: aborted (core dumped) CUDA error: CUBLAS_STATUS_EXECUTION_FAILED\n",
        );
        assert!(
            f.len() == 1 && f[0].headline.contains("CUBLAS_STATUS_EXECUTION_FAILED"),
            "{f:?}"
        );
        // Words a catalog row reads as a cause say more than the death.
        assert!(deaths("Error: llama runner process has terminated: signal: aborted (core dumped) CUDA error: an illegal memory access was encountered\n").is_empty());
        // A kill from outside is a warning; a stop is no death.
        let f = deaths("Error: llama runner process has terminated: signal: killed\n");
        assert!(f.iter().all(|f| f.severity == Severity::Warning), "{f:?}");
        assert!(
            deaths("Error: llama runner process has terminated: signal: terminated\n").is_empty()
        );
        assert!(deaths("Error: llama runner process has terminated: exit status 2\n").is_empty());
    }
}
