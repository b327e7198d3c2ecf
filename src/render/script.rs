//! The remediation script: bash generated from the root cause's typed
//! actions. Dry run unless `--apply`; every destructive step re-checks at run
//! time that the world still is what the logs showed, and stops otherwise.
//!
//! Values from logs reach the script only as single-quoted literals built by
//! [`quote`], and only after the rules validated them ([`crate::model::Pid`],
//! [`crate::model::UnitName`], …); free text goes only into `log`/`advice`
//! arguments and comments, both reduced to printable ASCII by [`text`].

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::Report;
use super::script_prelude::PRELUDE;
use crate::rules::{
    Action, ActionKind, CONTAINER_SCOPES, Finding, GpuHold, GpuRef, PROTECTED_UNITS,
    ProcessIdentity,
};

/// Exit code of a failed step: this plus the step's number.
const STEP_EXIT_BASE: usize = 10;

pub fn render(report: &Report<'_>) -> String {
    let mut out = String::from("#!/usr/bin/env bash\n");
    let Some(f) = report.root_cause() else {
        out.push_str("# rootcause remediation script\n#\n# The report found no root cause: there is nothing to do.\n");
        out.push_str("set -euo pipefail\necho 'rootcause: nothing to remediate'\n");
        return out;
    };
    header(&mut out, report, f);
    out.push_str(&prelude());
    let mode = "$([ \"$APPLY\" -eq 1 ] && echo apply || echo dry-run)";
    let _ = writeln!(
        out,
        "\nlog \"rootcause remediation for {} ({}), mode: {mode}\"",
        text(&f.id),
        f.rule
    );
    let total = f.actions.len();
    for (i, a) in f.actions.iter().enumerate() {
        let n = i + 1;
        let _ = writeln!(out, "\n# Step {n}: {}", text(&a.describe()));
        if !a.why.is_empty() {
            let _ = writeln!(out, "# Why: {}", text(&a.why));
        }
        if !a.evidence.is_empty() {
            let cited: Vec<String> = a.evidence.iter().map(|s| report.cite(*s)).collect();
            let _ = writeln!(out, "# Evidence: {}", text(&cited.join(", ")));
        }
        for note in guard_notes(a) {
            let _ = writeln!(out, "# {note}");
        }
        let lines = [
            format!(
                "begin_step {n} {total} {} {}",
                a.safety.name(),
                quote(&text(&a.describe()))
            ),
            call(a),
        ];
        for line in lines {
            // Only a literal from a log can hold `$` or a backtick here.
            if line.contains(['$', '`']) {
                out.push_str(
                    "# shellcheck disable=SC2016 # text from a log, kept literal on purpose\n",
                );
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out.push_str("\nlog \"all steps done\"\n");
    out
}

fn header(out: &mut String, report: &Report<'_>, f: &Finding) {
    let _ = writeln!(
        out,
        "# rootcause remediation script (rootcause {})",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(out, "#");
    let inputs: BTreeSet<&str> = report
        .inputs
        .iter()
        .map(|i| report.sources.get(i.segment.source).name.as_str())
        .collect();
    if !inputs.is_empty() {
        let _ = writeln!(
            out,
            "# From the report over: {}",
            text(&inputs.into_iter().collect::<Vec<_>>().join(", "))
        );
    }
    let _ = writeln!(
        out,
        "# Finding {} ({}, confidence {:.2}):",
        text(&f.id),
        f.rule,
        f.confidence
    );
    let _ = writeln!(out, "#   {}", text(&f.headline));
    if let Some(first) = f.evidence.first() {
        let _ = writeln!(
            out,
            "#   first evidence: {}",
            text(&report.cite(first.span))
        );
    }
    let _ = writeln!(out, "#\n# What it does, step by step:");
    if f.actions.is_empty() {
        let _ = writeln!(
            out,
            "#   (no steps: this finding has no remediation to script)"
        );
    }
    for (i, a) in f.actions.iter().enumerate() {
        let _ = writeln!(
            out,
            "#   {}. [{}] {}",
            i + 1,
            a.safety.name(),
            text(&a.describe())
        );
    }
    out.push_str(
        "#\n# Usage:\n\
         #   bash SCRIPT                dry run: prints every step, changes nothing\n\
         #   bash SCRIPT --apply        runs the steps; asks before needs-confirmation steps\n\
         #   bash SCRIPT --apply --yes  runs the steps without asking\n\
         # Advisory steps are only printed, never executed. Before each destructive\n\
         # step the script checks again that the PID, unit and GPU still are the ones\n\
         # the report names (start time, command line, cgroup, GPU UUID) and that\n\
         # nvidia-smi shows the PID holding that GPU now; it acts on nothing else,\n\
         # and stops at the first mismatch. Running it twice is safe.\n\
         #\n# Exit codes:\n\
         #   0   every step succeeded (dry run: every step was printed)\n\
         #   1   an unexpected error outside any step\n\
         #   2   unknown argument\n\
         #   3   a confirmation was declined\n",
    );
    for (i, a) in f.actions.iter().enumerate() {
        if a.is_scripted() {
            let _ = writeln!(
                out,
                "#   {:<3} step {} failed: {}",
                STEP_EXIT_BASE + i + 1,
                i + 1,
                text(&a.describe())
            );
        }
    }
    out.push_str("#\n");
}

/// The guards a step cannot apply because the report lacks what they check.
fn guard_notes(a: &Action) -> Vec<String> {
    if !a.is_scripted() {
        return Vec::new();
    }
    let mut notes = Vec::new();
    let process = match &a.kind {
        ActionKind::TerminateProcess { process, .. }
        | ActionKind::WaitProcessExit { process, .. } => Some(process),
        ActionKind::FreePort { listener, .. } => listener.as_ref(),
        _ => None,
    };
    let held = match &a.kind {
        ActionKind::StopUnit {
            holder: Some((pid, hold)),
            ..
        } => Some((*pid, hold)),
        _ => process.map(|p| (p.pid, &p.gpu)),
    };
    if let Some((pid, GpuHold::On(g))) = held {
        if g.uuid.is_none() {
            notes.push(format!(
                "Guard weaker: the report has no UUID for GPU {}, so the script checks that PID {pid} holds memory on any GPU.",
                g.index
            ));
        }
    }
    if let Some(p) = process {
        if p.start.is_none() {
            notes.push(format!(
                "Guard not available: the report has no start time for PID {} (no `ps -o lstart` row), so PID reuse is checked by command line and cgroup only.",
                p.pid
            ));
        }
    }
    if let ActionKind::WaitGpuMemoryFree { gpus, .. } = &a.kind {
        for g in gpus.iter().filter(|g| g.uuid.is_none()) {
            notes.push(format!(
                "Guard not available: the report has no UUID for GPU {}, so a changed index cannot be detected.",
                g.index
            ));
        }
    }
    notes
}

/// The call of one action's shell function; every argument is a quoted
/// literal or a number. Advisory steps, whatever their kind, only print.
fn call(a: &Action) -> String {
    if !a.is_scripted() {
        return advice_call(a);
    }
    match &a.kind {
        ActionKind::StopUnit { unit, holder } => match holder {
            Some((pid, hold)) => format!(
                "stop_unit {} {pid} {}",
                quote(unit.as_str()),
                gpu_hold(hold)
            ),
            None => format!("stop_unit {} '' ''", quote(unit.as_str())),
        },
        ActionKind::DisableUnit { unit } => format!("disable_unit {}", quote(unit.as_str())),
        ActionKind::TerminateProcess {
            process,
            grace_secs,
        } => format!("terminate_process {} {grace_secs}", identity(process)),
        ActionKind::WaitProcessExit {
            process,
            timeout_secs,
        } => format!(
            "wait_process_exit {} {} {timeout_secs}",
            process.pid,
            quote(process.start.as_ref().map_or("", |s| s.as_str()))
        ),
        ActionKind::WaitGpuMemoryFree {
            gpus,
            max_used_mib,
            timeout_secs,
        } => format!(
            "wait_gpu_memory_free {max_used_mib} {timeout_secs} {}",
            gpus.iter().map(gpu_spec).collect::<Vec<_>>().join(" ")
        ),
        ActionKind::RestartUnit { unit } => format!("restart_unit {}", quote(unit.as_str())),
        ActionKind::VerifyUnitActive { unit, timeout_secs } => {
            format!("verify_unit_active {} {timeout_secs}", quote(unit.as_str()))
        }
        ActionKind::KillOrphans {
            unit,
            name,
            grace_secs,
        } => format!(
            "kill_orphans {} {} {grace_secs}",
            quote(unit.as_str()),
            quote(name.as_str())
        ),
        ActionKind::FreePort {
            port,
            listener,
            grace_secs,
        } => format!(
            "free_port {port} {} {grace_secs}",
            listener
                .as_ref()
                .map_or_else(|| "'' '' '' '' ''".to_owned(), identity)
        ),
        ActionKind::ResetGpu { gpu, uuid } => {
            format!("reset_gpu {gpu} {}", quote(uuid.as_str()))
        }
        // Never scripted (`Action::is_scripted` is false for them).
        ActionKind::SetServerFlag { .. }
        | ActionKind::Drain { .. }
        | ActionKind::Reboot { .. }
        | ActionKind::Advice { .. } => advice_call(a),
    }
}

/// The fixed functions, with the units no script touches as `case`
/// patterns: the same list the rules refuse ([`crate::rules::unit_refusal`]).
fn prelude() -> String {
    PRELUDE
        .replace("@PROTECTED_UNITS@", &PROTECTED_UNITS.join("|"))
        .replace("@CONTAINER_SCOPES@", &CONTAINER_SCOPES.join("|"))
}

/// `advice 'what' 'command' 'detail'…`: printed, never run.
fn advice_call(a: &Action) -> String {
    let mut args = vec![
        quote(&text(&a.describe())),
        quote(&a.command().as_deref().map(text).unwrap_or_default()),
    ];
    args.extend(a.details().iter().map(|d| quote(&text(d))));
    format!("advice {}", args.join(" "))
}

/// `PID 'unit' 'cmdline' 'start' 'gpu'`, the guard arguments of a process.
fn identity(p: &ProcessIdentity) -> String {
    format!(
        "{} {} {} {} {}",
        p.pid,
        quote(p.unit.as_ref().map_or("", |u| u.as_str())),
        quote(p.cmdline.as_ref().map_or("", |c| c.as_str())),
        quote(p.start.as_ref().map_or("", |s| s.as_str())),
        gpu_hold(&p.gpu)
    )
}

/// Where a process must hold GPU memory at run time: `'0:GPU-…'` (an index
/// and the UUID the bundle recorded for it, maybe none), `'*'` for any GPU,
/// `''` for no check.
fn gpu_hold(hold: &GpuHold) -> String {
    match hold {
        GpuHold::On(g) => gpu_spec(g),
        GpuHold::AnyGpu => quote("*"),
        GpuHold::NotChecked => quote(""),
    }
}

/// `'0:GPU-…'`: the index and the UUID the script checks it against.
fn gpu_spec(g: &GpuRef) -> String {
    quote(&format!(
        "{}:{}",
        g.index,
        g.uuid.as_ref().map_or("", |u| u.as_str())
    ))
}

/// A bash single-quoted literal: nothing inside is expanded; a `'` is closed,
/// escaped and reopened.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// Text for a comment or a log line: printable ASCII only. A newline from a
/// log must not end a comment, an escape must not reach the terminal, and a
/// look-alike letter (Cyrillic `ѕ` for `s`) or a bidi control must not pass
/// for something it is not, so anything else is shown as `\u{…}`.
fn text(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            ' ' => out.push(' '),
            c if c.is_ascii_graphic() => out.push(c),
            c if c.is_control() => out.push('?'),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GpuUuid, Hostname, Pid, ServerFlag, StartTime, UnitName};
    use crate::rules::{ExpectedCmdline, Safety};

    #[test]
    fn quoting_neutralises_shell_syntax() {
        assert_eq!(quote("a'b"), r"'a'\''b'");
        assert_eq!(quote("$(reboot)"), "'$(reboot)'");
        assert_eq!(text("x\nreboot"), "x?reboot");
        assert_eq!(text("\x1b[31mred"), "?[31mred");
        assert_eq!(text("ѕglang"), "\\u{455}glang");
        assert_eq!(text("a\u{202e}b"), "a\\u{202e}b");
    }

    #[test]
    fn advisory_steps_are_printed_whatever_their_kind() {
        let unit = UnitName::new("a.service").unwrap();
        let stop = Action::new(
            ActionKind::StopUnit {
                unit: unit.clone(),
                holder: Some((Pid::new(4242).unwrap(), GpuHold::AnyGpu)),
            },
            Safety::AdvisoryOnly,
            "",
        );
        assert_eq!(
            call(&stop),
            "advice 'stop a.service' 'systemctl stop a.service'"
        );
        let flag = Action::new(
            ActionKind::SetServerFlag {
                unit,
                flag: ServerFlag::new("--mem-fraction-static", "0.80").unwrap(),
                current: ExpectedCmdline::new("python3 -m sglang.launch_server --tp 2").ok(),
            },
            Safety::Safe,
            "",
        );
        assert!(call(&flag).starts_with("advice "), "{}", call(&flag));
        assert!(call(&flag).contains(
            "'+ExecStart=python3 -m sglang.launch_server --tp 2 --mem-fraction-static 0.80'"
        ));
        let reboot = Action::new(
            ActionKind::Reboot {
                host: Hostname::new("ct200").ok(),
            },
            Safety::NeedsConfirmation,
            "",
        );
        assert_eq!(
            call(&reboot),
            "advice 'reboot ct200 once its workloads are drained' 'systemctl reboot'"
        );
    }

    #[test]
    fn calls_pass_guards_as_literals() {
        let mut p = ProcessIdentity::new(Pid::new(20629).unwrap());
        p.cmdline = ExpectedCmdline::new("python3 it's").ok();
        let t = |p: &ProcessIdentity| {
            Action::new(
                ActionKind::TerminateProcess {
                    process: p.clone(),
                    grace_secs: 30,
                },
                Safety::NeedsConfirmation,
                "",
            )
        };
        // No start time: not an identity a signal may rest on.
        assert!(call(&t(&p)).starts_with("advice "), "{}", call(&t(&p)));
        p.start = StartTime::new("Tue Nov 24 14:02:17 2026").ok();
        p.gpu = GpuHold::On(GpuRef {
            index: 0,
            uuid: None,
        });
        assert_eq!(
            call(&t(&p)),
            r"terminate_process 20629 '' 'python3 it'\''s' 'Tue Nov 24 14:02:17 2026' '0:' 30"
        );
        assert_eq!(guard_notes(&t(&p)).len(), 1, "{:?}", guard_notes(&t(&p)));
        let w = Action::new(
            ActionKind::WaitGpuMemoryFree {
                gpus: vec![
                    GpuRef {
                        index: 0,
                        uuid: GpuUuid::new("GPU-5a5b4eef-ee9c-40f5-977e-2242f48837be").ok(),
                    },
                    GpuRef {
                        index: 1,
                        uuid: None,
                    },
                ],
                max_used_mib: 1024,
                timeout_secs: 120,
            },
            Safety::Safe,
            "",
        );
        assert_eq!(
            call(&w),
            "wait_gpu_memory_free 1024 120 '0:GPU-5a5b4eef-ee9c-40f5-977e-2242f48837be' '1:'"
        );
        assert_eq!(guard_notes(&w).len(), 1);
    }

    #[test]
    fn protected_units_and_stops_without_a_holder_are_only_advice() {
        let holder = Some((Pid::new(812).unwrap(), GpuHold::AnyGpu));
        for name in [
            "ssh.service",
            "sshd.service",
            "sysinit.target",
            "multi-user.target",
            "init.scope",
            "session-3.scope",
            "user@0.service",
            "systemd-journald.service",
            "dbus.socket",
            "dbus.service",
            "getty@tty1.service",
        ] {
            let stop = Action::new(
                ActionKind::StopUnit {
                    unit: UnitName::new(name).unwrap(),
                    holder: holder.clone(),
                },
                Safety::NeedsConfirmation,
                "",
            );
            assert!(
                call(&stop).starts_with("advice "),
                "{name}: {}",
                call(&stop)
            );
        }
        for name in ["ddtree-qwen.service", "docker-0123abcd.scope"] {
            let unit = UnitName::new(name).unwrap();
            let stop = |holder| {
                Action::new(
                    ActionKind::StopUnit {
                        unit: unit.clone(),
                        holder,
                    },
                    Safety::NeedsConfirmation,
                    "",
                )
            };
            assert!(
                call(&stop(holder.clone())).starts_with("stop_unit "),
                "{name}"
            );
            assert!(call(&stop(None)).starts_with("advice "), "{name}");
        }
    }

    /// The script's `case` patterns are the rules' globs: both sides refuse
    /// the same units.
    #[test]
    fn the_script_refuses_the_units_the_rules_refuse() {
        let script = prelude();
        assert!(!script.contains("@PROTECTED_UNITS@") && !script.contains("@CONTAINER_SCOPES@"));
        assert!(script.contains(&format!("    {}) return 1 ;;", PROTECTED_UNITS.join("|"))));
        assert!(script.contains(&format!(
            "    *.service|{}) return 0 ;;",
            CONTAINER_SCOPES.join("|")
        )));
    }
}
