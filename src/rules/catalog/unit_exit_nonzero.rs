//! `unit-exit-nonzero`: a unit's main process exited with a failure status.
//! The generic fallback: the reason is in the service's own lines.

mod exec;
mod failure;
mod goroutine;
mod job;
mod reasons;
mod steps;
mod stop;
use reasons::Reasons;

use crate::correlate::{
    Incident, UnitEventKind, UnitFacts, bare_last_words, exit_meaning, last_words, states_reason,
};
use crate::model::ServerEventKind;
use crate::rules::support::confidence;
use crate::rules::support::fabric_manager::fabric_manager_irrelevant;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: UnitExitNonzero = UnitExitNonzero;

pub struct UnitExitNonzero;

static META: RuleMeta = RuleMeta {
    id: "unit-exit-nonzero",
    category: Category::Unknown,
    severity: Severity::Error,
    summary: "a unit's main process exited by itself with a failure status",
    // The words a failing server ends with, so that its last lines reach
    // the rule even when they say no "error" (systemd's own line is the
    // catalog row `systemd.main-process-exited`).
    anchors: &[
        "denied",
        "not permitted",
        "no such file",
        "not found",
        "could not",
        "couldn't",
        "cannot",
        "unable to",
        "panic",
        // A Go goroutine dump's header, its frames' calls (arguments in
        // hex words) and places (`goroutine::of`).
        "[running]:",
        "(0x",
        ".go:",
    ],
    doc: r#"
## What it means
`Main process exited, code=exited, status=1/FAILURE` (`main process exited`
before systemd 220): the server ended by itself with a non-zero status
(`137/n/a` or `139/n/a` when a wrapper shell reports a child killed by
signal 9 or 11; `127` when the command, its interpreter or a library was
not found; `203/EXEC` when systemd could not execute it). Without that
journal line, `systemctl status`'s block of a unit that is not running
says the same: `Main PID: N (code=exited, status=1/FAILURE)`, or the
`Process: N ExecStart=… (code=exited, …)` line when systemctl leaves the
`Main PID:` out (src/systemctl/systemctl-show.c, print_status_info()).

`Control process exited, code=exited, status=1/FAILURE` says the same of
the unit's control process: the start command of a `Type=forking` daemon
(nvidia-persistenced, a start script) or an `ExecStartPre=`/`ExecStop=`
command. A failure status there fails the start by itself, even when the
paste ends before systemd's `Failed with result` (unless the unit starts
after it); the daemon's own lines before it (by its PID or identifier) are
its stated reason.

When the unit's own processes wrote error lines just before the exit (same
PID or unit: `Error: could not create directory mkdir /var/lib/ollama:
permission denied`), or raised an exception (`RuntimeError: Could not
determine home directory.` by the unit's PID), those last words are the stated reason and the finding
is a unit failure (category `unit-crash-loop`, the supervisor layer: any
more specific finding still comes first). So is an exit with no exception
before it that systemd itself reports as a failure: `Failed to start X.`,
`Unit entered failed state.` (≤ v23x), `Failed with result 'exit-code'.`,
a block `inactive (dead) (Result: exit-code)`, or a restart below the start
limit (`Service hold-off time over, scheduling restart.` (v220–v238),
`Scheduled restart job, restart counter is at N.`): the loop in progress,
before `systemd-crash-loop` or the start limit names it. The drop-ins
listed under `Drop-In:` are cited: a changed `ExecStart=` is the usual
cause of a start command that fails. Otherwise the finding stays a generic
fallback.

Where the inputs hold nothing else of the unit (no line of PID 1's, no
status block), systemctl's own answer where it was run (a shell, Ansible's `msg`: `Job for X failed
because the control process exited with error code.`, result `exit-code`)
is the unit's failure all the same (category `unit-crash-loop`), with the
hosts Ansible names (`fatal: [host]: FAILED!`); the unit's journal says
why, and the finding asks for it. Beside an exit, that answer makes the
exit a failure systemd reports, as `Failed to start X.` does.

An exit after PID 1's `Stopping X...` answers a stop that was asked for:
programs that exit 1 or 143 on SIGTERM leave systemd's `Failed with result
'exit-code'` though nothing broke. With no error of its own before it, it
is an info finding naming the stop and `SuccessExitStatus=`.

## Why it happens
Any unhandled error. This rule is the fallback: a more specific finding of
the same report, when there is one, names the cause; otherwise the last
exception before the exit is the place to start.

## How to confirm
`journalctl -u UNIT` just before the exit line.

## How to fix
Fix what the last exception says; then restart the unit.

## Safety
Advice only.
"#,
};

impl Rule for UnitExitNonzero {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for (unit, facts) in &incident.units {
            let exits = exits_of(incident, unit, facts);
            // No exit in the inputs: systemctl's answer to a failed job
            // may be all they hold of the unit.
            if exits.is_empty() {
                out.extend(job::finding(incident, unit, facts));
                continue;
            }
            // An exit that answers a requested stop is said only when
            // no other exit of the unit is in the inputs.
            let Some(exit) = exits
                .iter()
                .find(|e| e.control || stop::requested(facts, e.span).is_none())
                .or(exits.first())
            else {
                continue;
            };
            // Not if: the Fabric Manager failing on a host without NVSwitch
            // is expected (fabric-manager-no-nvswitch says so).
            if unit == "nvidia-fabricmanager.service"
                && fabric_manager_irrelevant(incident).is_some()
            {
                continue;
            }
            out.push(finding(incident, unit, facts, exit, exits.len()));
        }
    }
}

/// One exit of a unit's main process with a failure status: the status
/// (`1/FAILURE`), the line that says it, and the PID when that line names it.
struct Exit<'a> {
    status: std::borrow::Cow<'a, str>,
    span: Span,
    pid: Option<u32>,
    /// The control process (a forking daemon's start command, an
    /// ExecStartPre=/ExecStop= command), not the main process.
    control: bool,
    /// No line says the process exited: systemd's `Failed at step USER
    /// spawning …` alone, whose step gives the status (`217/USER`).
    step_only: bool,
}

/// The unit's exits with a failure status: PID 1's `Main process exited,
/// code=exited, status=N/NAME` lines; without one, the `systemctl status`
/// block of a unit that is not running: `Main PID: N (code=exited,
/// status=N/NAME)`, else the `Process: N ExecStart=… (code=exited, …)`
/// line (systemctl prints no `Main PID:` when it would repeat it).
fn exits_of<'a>(incident: &'a Incident, unit: &str, facts: &'a UnitFacts) -> Vec<Exit<'a>> {
    let journal: Vec<Exit<'a>> = facts
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            UnitEventKind::MainProcessExited { code, status }
                if code == "exited" && !status.starts_with("0/") =>
            {
                Some(Exit {
                    status: status.as_str().into(),
                    span: e.span,
                    pid: None,
                    control: false,
                    step_only: false,
                })
            }
            // A control process that failed fails the start (or the stop)
            // by itself, before any `Failed with result` (a paste may end
            // there): unless the unit started after it.
            UnitEventKind::ControlProcessExited { code, status }
                if code == "exited"
                    && !status.starts_with("0/")
                    && status != "0"
                    && !started_after(facts, e.span) =>
            {
                Some(Exit {
                    status: status.as_str().into(),
                    span: e.span,
                    pid: None,
                    control: true,
                    step_only: false,
                })
            }
            _ => None,
        })
        .collect();
    if !journal.is_empty() {
        return journal;
    }
    let Some(st) = facts
        .status
        .and_then(|i| incident.facts.unit_statuses.get(i))
    else {
        return steps::step_failures(incident, unit);
    };
    if matches!(st.active_state.as_deref(), Some("active" | "reloading")) {
        return Vec::new();
    }
    st.main_process_exit()
        .and_then(|(e, span, pid)| {
            let status = e.strip_prefix("code=exited, status=")?;
            (!status.starts_with("0/") && status != "0").then_some(Exit {
                status: status.into(),
                span,
                pid,
                control: false,
                step_only: false,
            })
        })
        .into_iter()
        .collect()
}

/// Whether `unit` started (`Started X.`) after the line at `span`.
fn started_after(facts: &UnitFacts, span: Span) -> bool {
    facts.events.iter().any(|e| {
        matches!(e.kind, UnitEventKind::Started)
            && e.span.source == span.source
            && e.span.line > span.line
    })
}

/// The finding for `unit`'s first failed exit.
fn finding(
    incident: &Incident,
    unit: &str,
    facts: &UnitFacts,
    exit: &Exit<'_>,
    n: usize,
) -> Finding {
    let (status, span) = (&*exit.status, exit.span);
    let Reasons {
        words,
        bare,
        last_exception,
        stated,
        exec,
        own_exception,
        go,
    } = Reasons::of(incident, unit, status, span);
    let failed = failure::Failed::of(incident, facts);
    // One of systemd's own statuses: it failed at a step of setting up the
    // process, and the command never ran (a unit failure whatever else
    // the inputs say).
    let setup = exec::systemd_step(status).is_some();
    // The main process's answer to a stop that was asked for, with no
    // error of its own: its status is all that is wrong.
    let quiet = stated.is_none() && last_exception.is_none() && exec.is_none() && !setup;
    let stopping = (quiet && !exit.control)
        .then(|| stop::requested(facts, span))
        .flatten();
    // systemd's own account of a failed start or of a restart below the
    // start limit makes the exit a unit failure even when the unit's
    // own lines are not in the inputs.
    let by_systemd =
        stated.is_none() && last_exception.is_none() && stopping.is_none() && failed.is_failure();
    // Its own exception states the reason as its last words do.
    let failure = stated.is_some() || own_exception || by_systemd || exec.is_some() || setup;
    let mut f = Finding::new(
        META.id,
        [META.category, Category::UnitCrashLoop][usize::from(failure)],
        [META.severity, Severity::Info][usize::from(stopping.is_some())],
    );
    f.entities.units.insert(unit.to_owned());
    f.entities.pids.extend(words.pids.iter().copied());
    f.entities.pids.extend(exit.pid);
    f.occurrences = n as u32;
    let first = cite_last_words(&mut f, unit, &words, &bare, &stated);
    go.iter().for_each(|g| g.cite(&mut f, unit));
    let meaning = cite_exit(incident, &mut f, unit, exit);
    cite_systemd(incident, &mut f, unit, &failed, by_systemd);
    if let Some((espan, name, _)) = last_exception {
        f.evidence(espan, format!("the last exception before the exit: {name}"));
    }
    f.condition(
        format!("{unit} exited by itself with a failure status"),
        true,
    );
    f.condition(
        "the log shows the exception or error that ended it",
        last_exception.is_some() || stated.is_some() || exec.is_some(),
    );
    // Whose exit: the unit's, or its control process's (the start failed).
    let who = if exit.control {
        format!("{unit}'s control process")
    } else {
        unit.to_owned()
    };
    f.title = format!("{who} exited with status {status}");
    f.headline = headline(&who, status, meaning, last_exception, &stated);
    name_first(&mut f.headline, first);
    // It says more than the status's meaning or the unit's last words.
    if let Some(x) = &exec {
        x.explain(&mut f, unit, status);
    }
    if by_systemd {
        failed.extend_headline(&mut f.headline);
    }
    let flag = exec::cite_sandboxing(&mut f, incident, unit, status, span);
    f.chain.push(format!("{who} exited with status {status}"));
    f.chain
        .extend(because(exec.as_ref(), last_exception, &stated, first));
    f.explanation = "The generic finding for a server that ended by itself; a more specific finding, when present, names the cause.".to_owned();
    f.actions.push(Action::advice(
        format!("read {unit}'s lines just before the exit"),
        Some(&format!("journalctl{flag} -u {unit} -n 100 --no-pager")),
    ));
    if by_systemd {
        failed.push_actions(&mut f, unit);
    }
    advise_refused(&mut f, unit, &stated);
    advise_missing(
        &mut f,
        unit,
        first.into_iter().chain(words.lines.iter().copied()),
    );
    f.confidence = confidence(&f, 0.3, 0.5);
    if let Some(stopping) = stopping {
        stop::explain(&mut f, unit, status, stopping);
    }
    f
}

/// Cites the exit itself (whose process, its PID, what the status means)
/// and gives the status's meaning for the headline.
fn cite_exit(
    incident: &Incident,
    f: &mut Finding,
    unit: &str,
    exit: &Exit<'_>,
) -> Option<&'static str> {
    let status = &*exit.status;
    let meaning = exit_meaning("exited", status);
    if exit.step_only {
        let step = status.split_once('/').map_or(status, |(_, n)| n);
        f.evidence(
            exit.span,
            match meaning {
                Some(m) => format!("systemd failed at step {step} before running {unit}'s command, whose process exits with status {status}: {m}"),
                None => format!("systemd failed at step {step} before running {unit}'s command, whose process exits with status {status}"),
            },
        );
        return meaning;
    }
    let pid = exit.pid.map(|p| format!(" (PID {p})")).unwrap_or_default();
    let process = if exit.control {
        "control process (a forking daemon's start command, or an ExecStartPre=/ExecStop= command)"
    } else {
        "main process"
    };
    let note = match meaning {
        Some(m) => format!("{unit}'s {process}{pid} exited with status {status}: {m}"),
        None => format!("{unit}'s {process}{pid} exited with status {status}"),
    };
    // The status as systemd printed it (`status=1/FAILURE`), underlined
    // so that the excerpt shows it, where the line holds it.
    let printed = format!("status={status}");
    if line_holds(incident, exit.span, &printed) {
        f.evidence_marked(exit.span, note, printed);
    } else {
        f.evidence(exit.span, note);
    }
    meaning
}

/// Whether the kept line at `span` holds `text`.
fn line_holds(incident: &Incident, span: Span, text: &str) -> bool {
    incident
        .facts
        .messages
        .iter()
        .find(|m| m.span == span)
        .is_some_and(|m| m.text.contains(text))
}

/// Cites systemd's account of the failure: its result line, and the failed
/// start or the restarts (`failure::Failed`) when they make the exit a
/// unit failure, else the start alone.
fn cite_systemd(
    incident: &Incident,
    f: &mut Finding,
    unit: &str,
    failed: &failure::Failed,
    by_systemd: bool,
) {
    if let Some(result) = crate::rules::support::unit_event(incident, unit, |k| {
        matches!(k, UnitEventKind::FailedWithResult(_))
    }) {
        f.evidence(result, "systemd marked the unit failed");
    }
    if by_systemd {
        failed.cite(f, unit);
    } else {
        failed.cite_start(f);
    }
}

/// The chain's causes under the exit: systemd's word on the command it
/// could not execute, else the last exception, else the unit's stated
/// last words (and its first error in that run).
fn because(
    exec: Option<&exec::ExecFailure<'_>>,
    last_exception: Option<(Span, &String, &String)>,
    stated: &Option<(Span, String)>,
    first: Option<&crate::model::JournalEntry>,
) -> Vec<String> {
    if let Some(x) = exec {
        return vec![x.because()];
    }
    if let Some((_, name, message)) = last_exception {
        return vec![format!("{name}: {}", shorten(message))];
    }
    let Some((_, words)) = stated else {
        return Vec::new();
    };
    let mut out = vec![format!("it said: {}", shorten(words))];
    if let Some(e) = first {
        out.push(format!("it first said: {}", shorten(&e.message)));
    }
    out
}

/// Cites the unit's last words when they state the reason, and the run's
/// first error when later lines followed it (what they often follow
/// from), which it returns.
fn cite_last_words<'a>(
    f: &mut Finding,
    unit: &str,
    words: &crate::correlate::LastWords<'a>,
    bare: &[&crate::model::Message],
    stated: &Option<(Span, String)>,
) -> Option<&'a crate::model::JournalEntry> {
    if stated.is_some() {
        for e in &words.lines {
            f.evidence(e.span, format!("{unit}'s last words before the exit"));
        }
        for m in bare {
            f.evidence(
                m.span,
                format!("{unit}'s last words before the exit (its output, pasted without the journal's prefix)"),
            );
        }
    }
    let first = words
        .first
        .filter(|e| stated.as_ref().is_some_and(|(s, _)| *s != e.span));
    if let Some(e) = first {
        f.evidence(
            e.span,
            format!("{unit}'s first error in that run: the lines after it may follow from it"),
        );
    }
    first
}

/// Adds the run's first error to the headline.
fn name_first(headline: &mut String, first: Option<&crate::model::JournalEntry>) {
    if let Some(e) = first {
        if !headline.ends_with('.') {
            headline.push('.');
        }
        headline.push_str(&format!(" Its first error: {}", shorten(&e.message)));
    }
}

/// Advice on the unit's sandboxing when its last words say a path was
/// refused.
fn advise_refused(f: &mut Finding, unit: &str, stated: &Option<(Span, String)>) {
    if let Some((_, words)) = stated
        && DENIED.is_match(words)
    {
        f.actions.push(Action::advice(
            format!("{unit} was refused a path it needs: check the unit's User=, its sandboxing (ProtectHome=, ProtectSystem=, ReadWritePaths=, PrivateTmp=), WorkingDirectory= and the paths its Environment= sets (HOME, a models directory, relative paths resolve against the working directory)"),
            Some(&format!("systemctl cat {unit}")),
        ));
    }
}

/// Advice on the unit's ordering when one of its error lines says a
/// device or kernel path it opened was not there (`Error opening
/// /sys/…/hwmon: 2`, errno 2 printed as a number; `No such file or
/// directory`; `ENOENT`): at boot, a unit started before the driver or
/// device that creates the path fails once, and starts fine later.
fn advise_missing<'a>(
    f: &mut Finding,
    unit: &str,
    lines: impl Iterator<Item = &'a crate::model::JournalEntry>,
) {
    let Some(path) = lines.into_iter().find_map(|e| {
        let c = MISSING.captures(&e.message)?;
        Some(c.name("path").or(c.name("after"))?.as_str().to_owned())
    }) else {
        return;
    };
    f.actions.push(Action::advice(
        format!("{path} was not there when {unit} ran (errno 2, ENOENT): a device or driver node not created yet that early in boot. Start {unit} after what creates it (After= and Requires= on its device unit or driver service) or let it retry (Restart=on-failure with RestartSec=)"),
        Some(&format!("systemctl cat {unit}; ls -l {path}")),
    ));
}

/// An error line naming a `/sys`, `/dev` or `/proc` path that was not
/// there: the path, then errno 2 as a number at the line's end (`: 2`,
/// `(2)`), `No such file or directory` or `ENOENT`.
static MISSING: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)(?:(?P<path>/(?:sys|dev|proc)/[^\s:'`\x22]+)['`\x22]?(?::\s*2|\s*\(2\)|.*\b(?:no such file or directory|enoent)\b)\s*\.?\s*$|\b(?:no such file or directory|enoent)\b\W*(?P<after>/(?:sys|dev|proc)/[^\s:'`\x22]+))",
    )
    .expect("missing path regex")
});

/// Last words that say a path was refused: a permission error, a
/// read-only file system (what `ProtectSystem=`/`ProtectHome=` give).
static DENIED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)\b(?:permission denied|read-only file system|operation not permitted)\b",
    )
    .expect("denied regex")
});

/// The finding's headline: the exit with the exception that ended it, or
/// the unit's stated last words, or the exit status's meaning alone.
fn headline(
    unit: &str,
    status: &str,
    meaning: Option<&str>,
    last_exception: Option<(Span, &String, &String)>,
    stated: &Option<(Span, String)>,
) -> String {
    match (last_exception, stated) {
        (Some((_, name, message)), _) => format!(
            "{unit} exited with status {status} after {name}: {}",
            shorten(message)
        ),
        (None, Some((_, words))) => format!(
            "{unit} exited with status {status}; its last words: {}",
            shorten(words)
        ),
        (None, None) => match meaning {
            Some(m) => {
                format!("{unit} exited with status {status} ({m}); its log does not say more.")
            }
            None => {
                format!("{unit} exited with status {status}; its log does not say why.")
            }
        },
    }
}

/// The first line of a message, cut to fit a headline.
fn shorten(text: &str) -> String {
    let text = text.lines().next().unwrap_or("");
    match text.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
