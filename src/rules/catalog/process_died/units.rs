//! A unit's death as systemd records it: its main process's (or a control
//! process's) `code=killed`/`code=dumped`, its `Failed with result
//! 'signal'/'core-dump'`, a status block's `Result: core-dump`; and what
//! such a death is when nothing the program printed explains it: the
//! unit's failure.

use super::{Death, META, exit_meaning, is_crash, is_stop, seccomp, watchdog};
use crate::correlate::{Incident, UnitEventKind};
use crate::rules::Category;
use crate::source::Span;

/// A unit's death, once: PID 1's `Main process exited` by a signal, else
/// its `Failed with result 'core-dump'/'signal'`, else a status block's.
pub(super) fn unit_deaths(incident: &Incident) -> Vec<Death> {
    let mut out = Vec::new();
    for (unit, facts) in &incident.units {
        // Deaths repeated by restarts are a loop, another rule's.
        if facts.restarts() >= 2 {
            continue;
        }
        let exit = process_exit(facts);
        let control = exit.as_ref().is_some_and(|e| e.control);
        let result = facts.events.iter().find_map(|e| match &e.kind {
            UnitEventKind::FailedWithResult(r) if r == "core-dump" || r == "signal" => {
                Some((e.span, r.clone()))
            }
            _ => None,
        });
        let status = facts
            .status
            .and_then(|i| incident.facts.unit_statuses.get(i))
            .filter(|s| {
                s.result
                    .as_deref()
                    .is_some_and(|r| r == "core-dump" || r == "signal")
            });
        let pid = status.and_then(|s| s.main_pid);
        let death = if let Some(SignalExit {
            span,
            code,
            status: status_text,
            ..
        }) = exit
        {
            if code != "dumped" && is_stop(&status_text) {
                continue;
            }
            let how = exit_meaning(&code, &status_text)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("code={code}, status={status_text}"));
            let dumped = if code == "dumped" {
                ", and dumped core"
            } else {
                ""
            };
            let crashed = code == "dumped" || is_crash(&status_text);
            Some((
                span,
                format!("{how}{dumped} (status={status_text})"),
                crashed,
            ))
        } else if let Some((span, r)) = &result {
            Some((
                *span,
                format!("systemd's verdict: result '{r}'"),
                r == "core-dump",
            ))
        } else {
            status.map(|s| {
                let exit = s.main_exit.as_deref().unwrap_or("");
                let result = s.result.as_deref().unwrap_or_default();
                (
                    s.main_pid_span.or(s.active_span).unwrap_or(s.span),
                    format!("result '{result}' {exit}").trim().to_owned(),
                    result == "core-dump" || is_crash(exit),
                )
            })
        };
        let death = death.map(|d| watchdog::recast(incident, unit, facts, d));
        if let Some((span, how, crashed, kill_line)) = death {
            let verdicts = result
                .as_ref()
                .map(|(s, _)| *s)
                .into_iter()
                .chain(status.and_then(|s| s.active_span))
                .filter(|s| *s != span)
                .collect();
            out.push(Death {
                span,
                how,
                unit: Some(unit.clone()),
                pid,
                signalled: true,
                crashed,
                verdicts,
                said: None,
                who: control.then(|| format!("{unit}'s control process (a start or stop command)")),
                signal: None,
                records: kill_line
                    .map(|l| (l, "systemd's kill that ended it".to_owned(), pid))
                    .into_iter()
                    .collect(),
                last_words: Vec::new(),
                cause: None,
                unit_failed: true,
            });
        }
    }
    out
}

/// A unit's process killed by a signal or dumping core: PID 1's line, its
/// `code=` (`killed`, `dumped`) and `status=`, and whose process it was.
struct SignalExit {
    span: Span,
    code: String,
    status: String,
    /// A control process (a forking daemon's start command, an
    /// ExecStartPre=), not the main process: either fails the unit.
    control: bool,
}

/// The unit's process killed by a signal or dumping core: its main
/// process's, else a control process's.
fn process_exit(facts: &crate::correlate::UnitFacts) -> Option<SignalExit> {
    let died = |control: bool| {
        facts.events.iter().find_map(move |e| match &e.kind {
            UnitEventKind::MainProcessExited { code, status }
            | UnitEventKind::ControlProcessExited { code, status }
                if (code == "killed" || code == "dumped")
                    && control == matches!(e.kind, UnitEventKind::ControlProcessExited { .. }) =>
            {
                Some(SignalExit {
                    span: e.span,
                    code: code.clone(),
                    status: status.clone(),
                    control,
                })
            }
            _ => None,
        })
    };
    died(false).or_else(|| died(true))
}

/// What a death is: a catalog row's reason is that row's category; a
/// seccomp kill, a unit's failure. A server that printed errors before it
/// died raised them in its own code (`server-exception`, the taxonomy's
/// runtime failure). A unit systemd records failing by its process's
/// death, with nothing the program printed to say why, is a unit failure
/// (`unit-crash-loop`: a unit failing by its process's signal or core
/// dump, once or in a loop; docs/report-schema.md).
pub(super) fn category(
    incident: &Incident,
    death: &Death,
    words: Option<&crate::correlate::LastWords>,
) -> Category {
    if let Some(c) = death.cause.and_then(|row| row.category) {
        return c;
    }
    if let Some(c) = seccomp::category(incident, death) {
        return c;
    }
    let silent = death.said.is_none()
        && death.last_words.is_empty()
        && words.is_none_or(|w| w.lines.is_empty());
    if death.unit_failed && silent {
        Category::UnitCrashLoop
    } else {
        META.category
    }
}

/// Where `f`, the finding of `death`, is a unit's silent failure (see
/// [`category`]), its headline says first that the unit failed.
pub(super) fn say_failed(f: &mut crate::rules::Finding, death: &Death) {
    let Some(unit) = death.unit.as_deref() else {
        return;
    };
    if death.unit_failed && f.category == Category::UnitCrashLoop && f.last_words.is_empty() {
        f.headline = format!(
            "{unit} failed once, by its process's death, with no error printed before it: {}",
            f.headline
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::{Category, Severity};

    use super::super::tests::deaths;

    /// A unit whose process dies once with nothing printed before it is
    /// the unit's failure; the same death after the program's own error
    /// lines is the program's exception (the last words say why).
    #[test]
    fn a_silent_unit_death_is_the_units_failure_and_a_spoken_one_the_servers() {
        // A control process's death: systemd's own test of a crashing
        // ExecStop= (test/TEST-07, systemd/systemd#2691) prints it so.
        let control = "\
Oct 08 21:16:11 box systemd[1]: Starting X File Server...
Oct 08 21:16:11 box systemd[1]: x-serve.service: Control process exited, code=dumped, status=11/SEGV
Oct 08 21:16:11 box systemd[1]: x-serve.service: Failed with result 'core-dump'.
Oct 08 21:16:11 box systemd[1]: Failed to start X File Server.
";
        let f = deaths(control);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            (f[0].category, f[0].severity),
            (Category::UnitCrashLoop, Severity::Error),
            "{f:?}"
        );
        assert!(f[0].title.contains("control process"), "{}", f[0].title);
        assert!(
            f[0].headline.starts_with("x-serve.service failed once"),
            "{}",
            f[0].headline
        );
        assert_eq!(f[0].evidence[0].span.line, 2, "{f:?}");
        // The same unit's main process, after two error lines of its own.
        let spoken = "\
Dec 04 01:59:28 k llama-server[10778]: llama_decode: failed to decode, ret = 1
Dec 04 01:59:28 k llama-server[10778]: llama_get_logits_ith: invalid logits id 0, reason: no logits
Dec 04 01:59:28 k systemd[1]: llama.service: Main process exited, code=dumped, status=11/SEGV
Dec 04 01:59:28 k systemd[1]: llama.service: Failed with result 'core-dump'.
";
        let f = deaths(spoken);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::ServerException, "{f:?}");
        assert!(!f[0].headline.contains("failed once"), "{}", f[0].headline);
        let silent: String = spoken.lines().skip(2).map(|l| format!("{l}\n")).collect();
        assert_eq!(deaths(&silent)[0].category, Category::UnitCrashLoop);
        // A stop is no death, of a control process either.
        assert!(deaths("Oct 08 21:16:11 box systemd[1]: x.service: Control process exited, code=killed, status=15/TERM\n").is_empty());
    }

    /// A socket-activated service's status pasted beside its socket's is
    /// about that one service: its core dump stays an error on a host that
    /// shows no GPU (the socket unit is the service's, not another unit).
    #[test]
    fn a_service_beside_its_own_socket_is_one_unit() {
        let status = "\
● x-daemon.socket - X Activation Socket
     Loaded: loaded (/usr/lib/systemd/system/x-daemon.socket; enabled; vendor preset: enabled)
     Active: active (listening) since Sat 2022-10-01 02:37:24 PDT; 3 days ago
● x-daemon.service - X Stack
     Loaded: loaded (/usr/lib/systemd/system/x-daemon.service; enabled; vendor preset: enabled)
     Active: failed (Result: core-dump) since Tue 2022-10-04 12:59:47 PDT; 1min 8s ago
   Main PID: 1023 (code=dumped, signal=SEGV)
";
        let findings = crate::testing::analyze_paste(status).diagnosis.findings;
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(
            (findings[0].category, findings[0].severity),
            (Category::UnitCrashLoop, Severity::Error),
            "{findings:?}"
        );
        assert!(findings[0].entities.pids.contains(&1023), "{findings:?}");
        // Another unit beside it is another unit: the failure is a host's,
        // outside GPU serving, and a warning.
        let other = status.replace("x-daemon.socket", "y-other.socket");
        let findings = crate::testing::analyze_paste(&other).diagnosis.findings;
        assert_eq!(findings[0].severity, Severity::Warning, "{findings:?}");
    }
}
