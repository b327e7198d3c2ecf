//! uvicorn, the HTTP server of SGLang and vLLM: `INFO:     message` (the
//! level padded to 9 columns), bare or under a server's own prefix.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::Uvicorn;

/// uvicorn pads `LEVEL:` to nine columns and adds a space, so every message
/// starts at column 10; `ERROR: x` is someone else's line.
const PREFIXES: [&str; 6] = [
    "INFO:     ",
    "WARNING:  ",
    "ERROR:    ",
    "DEBUG:    ",
    "CRITICAL: ",
    "TRACE:    ",
];

static PROCESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<what>Started|Finished) server process \[(?P<pid>[0-9]+)\]")
        .expect("uvicorn process regex")
});

static RUNNING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Uvicorn running on (?P<url>\S+?(?::(?P<port>[0-9]+))?)(?:\s|$)")
        .expect("uvicorn running regex")
});

static BIND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\[Errno (?P<errno>[0-9]+)\] error while attempting to bind on address \('(?P<host>[^']*)', (?P<port>[0-9]+)\): (?P<reason>.*)$",
    )
    .expect("uvicorn bind regex")
});

/// `None` when the line is not uvicorn's; `Some(None)` for a uvicorn line
/// with nothing to keep (access log lines, lifespan chatter).
pub(super) fn parse(text: &str) -> Option<Option<Uvicorn>> {
    // Indented as a paste quotes it (` INFO:     Waiting for …`).
    let text = text.trim_start_matches([' ', '\t']);
    let msg = PREFIXES.iter().find_map(|p| text.strip_prefix(p))?;
    let event = if let Some(c) = PROCESS.captures(msg) {
        let pid = c["pid"].parse().ok()?;
        Some(match &c["what"] {
            "Started" => Uvicorn::StartedProcess { pid },
            _ => Uvicorn::FinishedProcess { pid },
        })
    } else if let Some(c) = RUNNING.captures(msg) {
        Some(Uvicorn::Running {
            url: c["url"].to_owned(),
            port: c.name("port").and_then(|p| p.as_str().parse().ok()),
        })
    } else if msg.starts_with("Application startup complete") {
        Some(Uvicorn::StartupComplete)
    } else if msg.starts_with("Shutting down") {
        Some(Uvicorn::ShuttingDown)
    } else if msg.starts_with("Waiting for background tasks to complete")
        || msg.starts_with("Waiting for connections to close")
    {
        Some(Uvicorn::WaitingForRequests)
    } else if msg.starts_with("Waiting for application shutdown")
        || msg.starts_with("Application shutdown complete")
    {
        Some(Uvicorn::ShutdownProceeding)
    } else if let Some(c) = BIND.captures(msg) {
        Some(Uvicorn::BindFailed {
            host: c["host"].to_owned(),
            port: c["port"].parse().ok()?,
            errno: c["errno"].parse().ok()?,
            reason: c["reason"].to_owned(),
        })
    } else {
        None
    };
    Some(event)
}

#[cfg(test)]
mod shutdown_tests {
    use super::parse;
    use crate::model::Uvicorn;

    /// A graceful shutdown's wait for the requests in flight, and the lines
    /// that say it got past them (vllm-project/vllm#1879, a vLLM
    /// APIServer's `INFO:     Application shutdown complete.`).
    #[test]
    fn the_shutdowns_wait_and_its_end_are_read() {
        for (line, want) in [
            (
                "INFO:     Waiting for background tasks to complete. (CTRL+C to force quit)",
                Uvicorn::WaitingForRequests,
            ),
            (
                "INFO:     Waiting for connections to close. (CTRL+C to force quit)",
                Uvicorn::WaitingForRequests,
            ),
            (
                "INFO:     Waiting for application shutdown.",
                Uvicorn::ShutdownProceeding,
            ),
            (
                "INFO:     Application shutdown complete.",
                Uvicorn::ShutdownProceeding,
            ),
        ] {
            assert_eq!(parse(line), Some(Some(want)), "{line}");
        }
        // Another program's words at another column are not uvicorn's.
        assert_eq!(
            parse("INFO: Waiting for background tasks to complete."),
            None
        );
    }
}
