//! A container's published port taken by the container an earlier
//! `docker run` of the same paste started: the same host port published
//! (`-p 8080:80`) by a detached run (`-d`) typed before the run whose
//! publish failed (`Bind for 0.0.0.0:8080 failed: port is already
//! allocated`). A detached container keeps running, and keeps its port,
//! after its `docker run` returns: the later run of the same command is a
//! second copy.

use std::sync::LazyLock;

use regex::Regex;

use super::{Earlier, Seen};
use crate::correlate::Incident;
use crate::model::TypedCommand;
use crate::source::Span;

/// A publish flag and its host port: `-p 8080:80`, `-p8080:80`,
/// `-p 0.0.0.0:8080:80/tcp`, `--publish=8080:80`.
static PUBLISH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:^|\s)(?:-p\s*|--publish[=\s]\s*)(?:[0-9.]+:|\[[0-9A-Fa-f:]*\]:)?(?P<host>[0-9]{1,5}):[0-9]{1,5}",
    )
    .expect("publish regex")
});

/// Whether a command runs a container (`docker run`, `sudo docker run`,
/// `podman run`, `docker container run`).
fn runs_container(cmd: &str) -> bool {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    words.windows(2).any(|w| {
        matches!(w[0], "docker" | "podman" | "nvidia-docker" | "container") && w[1] == "run"
    })
}

/// Whether a run is detached: `-d`, `--detach`, or `d` among combined
/// short flags (`-itd`).
fn detached(cmd: &str) -> bool {
    cmd.split_whitespace().any(|w| {
        w == "--detach"
            || (w.starts_with('-')
                && !w.starts_with("--")
                && w.len() <= 5
                && w[1..].bytes().all(|b| b.is_ascii_alphabetic())
                && w.contains('d'))
    })
}

fn publishes(cmd: &str, port: u16) -> bool {
    PUBLISH
        .captures_iter(cmd)
        .any(|c| c["host"].parse() == Ok(port))
}

/// An earlier detached run publishing `port`, before the run that failed
/// (the last run publishing it before the failed bind at `first`).
pub(super) fn earlier_run(incident: &Incident, port: u16, first: Span) -> Option<Earlier> {
    let runs: Vec<&TypedCommand> = incident
        .facts
        .typed_commands
        .iter()
        .filter(|t| t.span.source == first.source && t.span < first)
        .filter(|t| runs_container(&t.command) && publishes(&t.command, port))
        .collect();
    let (_, earlier) = runs.split_last()?;
    let holder = earlier.iter().rev().find(|t| detached(&t.command))?;
    Some(Earlier {
        lines: vec![(
            holder.span,
            format!(
                "an earlier detached run published host port {port}: its container keeps running, and keeps the port"
            ),
        )],
        seen: Seen::Published,
        shows: "the paste shows an earlier detached `docker run` publishing the same host port, whose container still runs",
        stop: Some(
            "`docker ps` names the container that publishes the port; `docker stop` (or `docker rm -f`) it before running again, or use it",
        ),
        pids: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn publish_flags_and_detached_runs() {
        assert!(super::publishes(
            "sudo docker run -i -t -d -p 8080:80 img",
            8080
        ));
        assert!(super::publishes(
            "docker run --publish=0.0.0.0:8080:80/tcp img",
            8080
        ));
        assert!(!super::publishes("docker run -p 18080:80 img", 8080));
        assert!(super::detached("docker run -itd img"));
        assert!(!super::detached("docker run -it --rm img"));
        assert!(super::runs_container("sudo docker run -d img"));
        assert!(!super::runs_container("docker ps"));
    }
}
