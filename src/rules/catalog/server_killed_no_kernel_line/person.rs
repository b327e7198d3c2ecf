//! A `Killed` the person caused: a command typed at a prompt before it
//! that kills or limits a process itself (`kill -9 PID`, `pkill`,
//! `killall`, a run under `timeout -s KILL`). The shell's report then
//! says what the person did, not what the kernel did.

use crate::correlate::Incident;
use crate::source::Span;

/// Whether a command typed at a prompt before the kill at `kill`, in the
/// same input, kills or limits a process.
pub(super) fn typed_kill(incident: &Incident, kill: Span) -> bool {
    incident
        .facts
        .typed_commands
        .iter()
        .filter(|c| c.span.source == kill.source && c.span < kill)
        .any(|c| kills(&c.command))
}

fn kills(command: &str) -> bool {
    let mut words = command.split_whitespace();
    let mut first = words.next();
    if first == Some("sudo") {
        first = words.next();
    }
    let program = first.map(|w| w.rsplit('/').next().unwrap_or(w));
    matches!(
        program,
        Some("kill" | "pkill" | "killall" | "timeout" | "gtimeout")
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_typed_kill_or_timeout_is_the_persons() {
        for c in [
            "kill -9 4242",
            "sudo pkill -9 python",
            "killall python3",
            "timeout 60 python infer.py",
            "/usr/bin/timeout 5s ./main -m model.gguf",
        ] {
            assert!(super::kills(c), "{c}");
        }
        for c in [
            "python predict.py",
            "trtllm-build --checkpoint_dir ckpt",
            "echo kill",
        ] {
            assert!(!super::kills(c), "{c}");
        }
    }
}
