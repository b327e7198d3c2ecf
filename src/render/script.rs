//! The remediation script: bash generated from the root cause's typed
//! actions. Dry run unless `--apply`; every destructive step re-checks at run
//! time that the world still is what the logs showed, and stops otherwise.
//!
//! Values from logs reach the script only as single-quoted literals built by
//! [`quote`], and only after the rules validated them ([`crate::model::Pid`],
//! [`crate::model::UnitName`]); free text goes only into `log` arguments and
//! comments, both sanitised.

use std::fmt::Write as _;

use super::Report;
use crate::rules::{Action, ActionKind, Finding, Safety};

/// Exit code of a failed step: this plus the step's number.
const STEP_EXIT_BASE: usize = 10;

/// The fixed part of every script: argument parsing, logging, guards and one
/// function per action type. Only the call sites below it vary.
const PRELUDE: &str = r#"set -euo pipefail

APPLY=0
ASSUME_YES=0
for arg in "$@"; do
  case "$arg" in
    --apply) APPLY=1 ;;
    --yes) ASSUME_YES=1 ;;
    -h|--help) sed -n '2,/^set -euo pipefail$/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) printf 'unknown argument: %s (try --help)\n' "$arg" >&2; exit 2 ;;
  esac
done

log() { printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }
fail() { local code=$1; shift; log "FAILED: $*"; exit "$code"; }

# Asks before a needs-confirmation step; declining stops the script (exit 3).
confirm() {
  if [ "$ASSUME_YES" -eq 1 ]; then return 0; fi
  local answer=""
  if [ -r /dev/tty ]; then read -r -p "$1 [y/N] " answer </dev/tty || answer=""; fi
  case "$answer" in
    y|Y|yes|YES) return 0 ;;
    *) log "declined: $1 (run with --yes to skip questions)"; exit 3 ;;
  esac
}

pid_alive() { [ -d "/proc/$1" ] && kill -0 "$1" 2>/dev/null; }

# Succeeds when PID $1 still is the process the report names: owned by unit
# $2 (its cgroup) and/or running command line $3. Prints why not otherwise.
pid_is_expected() {
  local pid=$1 unit=$2 cmd=$3 actual line path found
  if [ "$pid" -le 1 ] || [ "$pid" -eq "$$" ] || [ "$pid" -eq "$PPID" ]; then
    echo "PID $pid is init, this script or its parent"; return 1
  fi
  actual=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || actual=""
  actual=${actual% }
  if [ -z "$actual" ]; then echo "PID $pid is a kernel thread or a zombie"; return 1; fi
  if [ -n "$unit" ]; then
    found=0
    while IFS= read -r line; do
      path=${line#*:}; path=${path#*:}
      case "$path" in *"/$unit"|*"/$unit/"*) found=1 ;; esac
    done <"/proc/$pid/cgroup"
    if [ "$found" -ne 1 ]; then echo "PID $pid is not in the cgroup of $unit"; return 1; fi
  fi
  if [ -n "$cmd" ] && [ "$actual" != "$cmd" ] && [[ "$actual" != "$cmd "* ]]; then
    echo "PID $pid now runs: $actual"; return 1
  fi
  return 0
}

stop_unit() { # step unit
  local step=$1 unit=$2
  if [ "$APPLY" -ne 1 ]; then log "dry run: would run: systemctl stop -- $unit"; return 0; fi
  confirm "Stop $unit?"
  log "running: systemctl stop -- $unit"
  systemctl stop -- "$unit" || fail "$step" "systemctl stop $unit failed"
  if systemctl is-active --quiet -- "$unit"; then fail "$step" "$unit is still active after stop"; fi
  log "$unit is stopped"
}

terminate_process() { # step pid unit cmdline grace-seconds
  local step=$1 pid=$2 unit=$3 cmd=$4 grace=$5 why waited
  if ! pid_alive "$pid"; then log "PID $pid is gone: nothing to terminate"; return 0; fi
  if ! why=$(pid_is_expected "$pid" "$unit" "$cmd"); then
    fail "$step" "refusing to signal PID $pid: it is not the process the report names ($why)"
  fi
  if [ "$APPLY" -ne 1 ]; then
    log "dry run: would send SIGTERM to PID $pid, then SIGKILL after ${grace}s if it survives"; return 0
  fi
  confirm "Send SIGTERM to PID $pid?"
  log "sending SIGTERM to PID $pid"
  kill -TERM "$pid" 2>/dev/null || true
  waited=0
  while pid_alive "$pid" && [ "$waited" -lt "$grace" ]; do sleep 1; waited=$((waited + 1)); done
  if pid_alive "$pid"; then
    if ! why=$(pid_is_expected "$pid" "$unit" "$cmd"); then
      fail "$step" "PID $pid changed identity during the grace period ($why); not sending SIGKILL"
    fi
    log "PID $pid survived SIGTERM for ${grace}s: sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    waited=0
    while pid_alive "$pid" && [ "$waited" -lt 10 ]; do sleep 1; waited=$((waited + 1)); done
    if pid_alive "$pid"; then
      fail "$step" "PID $pid survived SIGKILL: it is stuck in the kernel (D state); a GPU reset or reboot is needed"
    fi
  fi
  log "PID $pid is gone"
}

wait_gpu_memory_free() { # step max-used-mib timeout-seconds gpu...
  local step=$1 max=$2 timeout=$3 deadline out gpu used busy
  shift 3
  if [ "$APPLY" -ne 1 ]; then
    log "dry run: would poll nvidia-smi until GPU $* use at most $max MiB (timeout ${timeout}s)"; return 0
  fi
  deadline=$((SECONDS + timeout))
  while :; do
    out=$(nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits) \
      || fail "$step" "nvidia-smi --query-gpu failed"
    busy=""
    for gpu in "$@"; do
      used=$(awk -F', *' -v g="$gpu" '$1 == g { print $2 }' <<<"$out")
      if ! [[ "$used" =~ ^[0-9]+$ ]]; then fail "$step" "nvidia-smi reports no memory value for GPU $gpu"; fi
      if [ "$used" -gt "$max" ]; then busy="$busy GPU $gpu: $used MiB;"; fi
    done
    if [ -z "$busy" ]; then log "GPU $* memory released (at most $max MiB used)"; return 0; fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail "$step" "memory still in use after ${timeout}s:$busy not continuing"
    fi
    sleep 2
  done
}

restart_unit() { # step unit
  local step=$1 unit=$2
  if [ "$APPLY" -ne 1 ]; then log "dry run: would run: systemctl restart -- $unit"; return 0; fi
  log "running: systemctl restart -- $unit"
  systemctl restart -- "$unit" || fail "$step" "systemctl restart $unit failed"
}

verify_unit_active() { # step unit timeout-seconds
  local step=$1 unit=$2 timeout=$3 deadline state
  if [ "$APPLY" -ne 1 ]; then log "dry run: would wait up to ${timeout}s for $unit to be active"; return 0; fi
  deadline=$((SECONDS + timeout))
  while :; do
    state=$(systemctl is-active -- "$unit" 2>/dev/null) || true
    case "$state" in
      active) log "$unit is active"; return 0 ;;
      failed) fail "$step" "$unit failed again: see journalctl -u $unit" ;;
    esac
    if [ "$SECONDS" -ge "$deadline" ]; then fail "$step" "$unit is '$state', not active, after ${timeout}s"; fi
    sleep 2
  done
}

advice() { # text [command]
  log "advice (not executed): $1"
  if [ -n "${2:-}" ]; then log "  suggested command: $2"; fi
}
"#;

pub fn render(report: &Report<'_>) -> String {
    let mut out = String::from("#!/usr/bin/env bash\n");
    let Some(f) = report.root_cause() else {
        out.push_str("# rootcause remediation script\n#\n# The report found no root cause: there is nothing to do.\n");
        out.push_str("set -euo pipefail\necho 'rootcause: nothing to remediate'\n");
        return out;
    };
    header(&mut out, report, f);
    out.push_str(PRELUDE);
    let mode = "$([ \"$APPLY\" -eq 1 ] && echo apply || echo dry-run)";
    let _ = writeln!(
        out,
        "\nlog \"rootcause remediation for {} ({}), mode: {mode}\"",
        f.id, f.rule
    );
    let total = f.actions.len();
    for (i, a) in f.actions.iter().enumerate() {
        let n = i + 1;
        let code = STEP_EXIT_BASE + n;
        let _ = writeln!(out, "\n# Step {n}: {}", comment(&a.describe()));
        if !a.why.is_empty() {
            let _ = writeln!(out, "# Why: {}", comment(&a.why));
        }
        let _ = writeln!(
            out,
            "log {}",
            quote(&format!("step {n}/{total}: {}", a.describe()))
        );
        out.push_str(&call(a, code));
        out.push('\n');
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
    let _ = writeln!(
        out,
        "# Finding {} ({}, confidence {:.2}):",
        f.id, f.rule, f.confidence
    );
    let _ = writeln!(out, "#   {}", comment(&f.headline));
    if let Some(first) = f.evidence.first() {
        let _ = writeln!(
            out,
            "#   first evidence: {}",
            comment(&report.cite(first.span))
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
            comment(&a.describe())
        );
    }
    out.push_str(
        "#\n# Usage:\n\
         #   bash SCRIPT                dry run: prints every step, changes nothing\n\
         #   bash SCRIPT --apply        runs the steps; asks before needs-confirmation steps\n\
         #   bash SCRIPT --apply --yes  runs the steps without asking\n\
         # Advisory steps are only printed, never executed.\n\
         #\n# Exit codes:\n\
         #   0   every step succeeded (dry run: every step was printed)\n\
         #   2   unknown argument\n\
         #   3   a confirmation was declined\n",
    );
    for (i, a) in f.actions.iter().enumerate() {
        if a.safety != Safety::AdvisoryOnly {
            let _ = writeln!(
                out,
                "#   {:<3} step {} failed: {}",
                STEP_EXIT_BASE + i + 1,
                i + 1,
                comment(&a.describe())
            );
        }
    }
    out.push_str("#\n");
}

/// The call of one action's shell function; every argument is a quoted literal.
fn call(a: &Action, code: usize) -> String {
    let step = code.to_string();
    match &a.kind {
        ActionKind::StopUnit { unit } => format!("stop_unit {step} {}", quote(unit.as_str())),
        ActionKind::TerminateProcess {
            pid,
            expected_unit,
            expected_cmdline,
            grace_secs,
        } => format!(
            "terminate_process {step} {} {} {} {}",
            pid.get(),
            quote(expected_unit.as_ref().map_or("", |u| u.as_str())),
            quote(expected_cmdline.as_ref().map_or("", |c| c.as_str())),
            grace_secs
        ),
        ActionKind::WaitGpuMemoryFree {
            gpus,
            max_used_mib,
            timeout_secs,
        } => format!(
            "wait_gpu_memory_free {step} {max_used_mib} {timeout_secs} {}",
            gpus.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        ),
        ActionKind::RestartUnit { unit } => format!("restart_unit {step} {}", quote(unit.as_str())),
        ActionKind::VerifyUnitActive { unit, timeout_secs } => {
            format!(
                "verify_unit_active {step} {} {timeout_secs}",
                quote(unit.as_str())
            )
        }
        ActionKind::Advice { text, command } => format!(
            "advice {} {}",
            quote(&printable(text)),
            quote(&command.as_deref().map(printable).unwrap_or_default())
        ),
    }
}

/// A bash single-quoted literal: nothing inside is expanded; a `'` is closed,
/// escaped and reopened.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// Text safe for a `#` comment: a newline in log-derived text must not end
/// the comment and become a command.
fn comment(text: &str) -> String {
    printable(text)
}

fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_neutralises_shell_syntax() {
        assert_eq!(quote("a'b"), r"'a'\''b'");
        assert_eq!(quote("$(reboot)"), "'$(reboot)'");
        assert_eq!(comment("x\nreboot"), "x?reboot");
    }
}
