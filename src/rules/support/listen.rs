//! The wordings of a failed `bind()` that are not Python's `[Errno 98]`:
//! Go's `net.Listen`, Node's `listen EADDRINUSE`, Rust's `os error 98`,
//! macOS (errno 48) and Windows (WSAEADDRINUSE, 10048). Kept apart from the
//! port rule so that new wordings are added here, as a list.
//!
//! Real lines (each seen in public threads):
//! - `Error: listen tcp 127.0.0.1:11434: bind: address already in use`
//!   (ollama/ollama#10311)
//! - `Error: listen tcp 127.0.0.1:11434: bind: Only one usage of each socket
//!   address (protocol/network address/port) is normally permitted.`
//!   (ollama/ollama#2540)
//! - `Error: listen EADDRINUSE: address already in use :::3000` (Node)
//! - `[Errno 48] error while attempting to bind on address ('0.0.0.0', 8000):
//!   address already in use` (uvicorn on macOS)
//! - `bind: Address already in use`: the C library's words after the call
//!   that failed, as `perror("bind")` prints them (coturn's
//!   `bind: Address already in use`, coturn/coturn#1660) and as a C++
//!   `std::system_error`'s `what()` carries them into another runtime's
//!   error (guile's `ERROR: Throw to key … with args` line around
//!   `("c-start-cogserver" "bind: Address already in use")`,
//!   opencog/opencog#2414): no port is printed, the failed bind is the news

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::matches;

/// One alternative per wording; each names its own host and port groups.
static WORDINGS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?xi)
        listen\x20(?:tcp|tcp4|tcp6|udp)\x20(?P<go_host>\[[^\]]*\]|[^\s\[\]]*?):(?P<go_port>[0-9]{1,5}):\x20bind:\x20(?:address\x20already\x20in\x20use|only\x20one\x20usage\x20of\x20each\x20socket\x20address)
        | listen\x20EADDRINUSE(?::\x20address\x20already\x20in\x20use)?\x20(?P<node_host>\S*?):(?P<node_port>[0-9]{1,5})\b
        | \[(?:Errno|WinError)\x20(?:48|10048)\]\x20(?:error\x20while\x20attempting\x20to\x20bind\x20on\x20address\x20\('(?P<py_host>[^']*)',\x20(?P<py_port>[0-9]{1,5})\))?
        | address\x20already\x20in\x20use\x20\(os\x20error\x20(?:98|48)\)
        | \bbind:\x20address\x20already\x20in\x20use
        | only\x20one\x20usage\x20of\x20each\x20socket\x20address",
    )
    .expect("listen regex")
});

/// Go's `net.Listen` error cut before its reason (`failed to listen: listen
/// tcp4 0.0.`, fixtures/real/678, a LocalAI launch whose paste ends there):
/// the line ends inside the address. It says a listen failed, not why; the
/// port rule counts it only beside a socket listing that names a listener.
static CUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\blisten\x20tcp[46]?\x20[0-9A-Za-z.:\[\]*%-]*$").expect("cut listen regex")
});

/// Catalog rows of a program that reports a failed listen on a port and
/// never why (Responder's bare `except:`, `stacks-bind.responder-*`):
/// taken or forbidden, the line cannot tell.
const UNSAID: &[&str] = &["stacks-bind.responder-server-start-failed"];

/// A failed bind in one of these wordings, with the port when printed.
pub struct ListenFailure<'a> {
    pub message: &'a Message,
    pub port: Option<String>,
    /// The line ends before the reason (and the port) it would print.
    pub cut: bool,
    /// The program prints no reason at all ([`UNSAID`]).
    pub unsaid: bool,
}

impl ListenFailure<'_> {
    /// The line says a listen failed, not why: it counts only beside a
    /// listing that names the port's holder.
    pub fn reasonless(&self) -> bool {
        self.cut || self.unsaid
    }
}

/// Every kept line that reports a failed bind in one of these wordings,
/// then the lines cut before their reason ([`CUT`]), then those of the
/// programs that print none ([`UNSAID`]).
pub fn failures(incident: &Incident) -> Vec<ListenFailure<'_>> {
    let cut = matches(incident, &CUT)
        .filter(|(m, _)| !WORDINGS.is_match(&m.text))
        .map(|(m, _)| ListenFailure {
            message: m,
            port: None,
            cut: true,
            unsaid: false,
        });
    let unsaid = UNSAID.iter().flat_map(|id| {
        incident.known(id).map(|(m, c)| ListenFailure {
            message: m,
            port: c.get("port").map(str::to_owned),
            cut: false,
            unsaid: true,
        })
    });
    matches(incident, &WORDINGS)
        .map(|(m, c)| {
            let pick = |names: [&str; 3]| {
                names
                    .iter()
                    .find_map(|n| c.name(n))
                    .map(|v| v.as_str().to_owned())
            };
            ListenFailure {
                message: m,
                port: pick(["go_port", "node_port", "py_port"]),
                cut: false,
                unsaid: false,
            }
        })
        .chain(cut)
        .chain(unsaid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::WORDINGS;

    fn port(line: &str) -> Option<String> {
        let c = WORDINGS.captures(line)?;
        ["go_port", "node_port", "py_port"]
            .iter()
            .find_map(|n| c.name(n))
            .map(|m| m.as_str().to_owned())
            .or(Some(String::new()))
    }

    #[test]
    fn reads_the_port_of_every_wording() {
        let cases = [
            (
                "Error: listen tcp 127.0.0.1:11434: bind: address already in use",
                "11434",
            ),
            (
                "Error: listen tcp 127.0.0.1:11434: bind: Only one usage of each socket address (protocol/network address/port) is normally permitted.",
                "11434",
            ),
            ("listen tcp :8080: bind: address already in use", "8080"),
            ("listen tcp [::]:8000: bind: address already in use", "8000"),
            (
                "Error: listen EADDRINUSE: address already in use :::3000",
                "3000",
            ),
            (
                "ERROR:    [Errno 48] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
                "8000",
            ),
            ("Error: Address already in use (os error 98)", ""),
            // perror("bind") (coturn/coturn#1660).
            ("bind: Address already in use", ""),
            // A C++ exception's what() in guile's Throw (opencog/opencog#2414).
            (
                "ERROR: Throw to key `C++-EXCEPTION' with args`(\"c-start-cogserver\" \"bind: Address already in use\")'.",
                "",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(port(line).as_deref(), Some(want), "{line}");
        }
    }

    /// The prefilter must keep these lines for the port rule to see them.
    #[test]
    fn the_port_rule_anchors_every_wording() {
        let rule = crate::rules::RULES
            .iter()
            .find(|r| r.meta().id == "address-already-in-use")
            .expect("port rule");
        for line in [
            "Error: listen tcp 127.0.0.1:11434: bind: address already in use",
            "Error: listen tcp 127.0.0.1:11434: bind: Only one usage of each socket address (protocol/network address/port) is normally permitted.",
            "Error: listen EADDRINUSE: address already in use :::3000",
            "[Errno 48] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
            "OSError: [WinError 10048] Only one usage of each socket address",
            "3:00PM FTL Error running the application error=\"failed to listen: listen tcp4 0.0.",
            "bind: Address already in use",
        ] {
            let lower = line.to_ascii_lowercase();
            assert!(
                rule.meta()
                    .anchors
                    .iter()
                    .any(|a| lower.contains(&a.to_ascii_lowercase())),
                "{line}"
            );
        }
    }

    /// fixtures/real/678's LocalAI line, cut inside the address, and the
    /// variant ollama would print cut inside its port; a complete line
    /// with a reason, or a line that goes on after the address, is not cut.
    #[test]
    fn a_listen_error_cut_before_its_reason() {
        for line in [
            "3:00PM FTL Error running the application error=\"failed to listen: listen tcp4 0.0.",
            "Error: listen tcp 127.0.0.1:1143",
        ] {
            assert!(super::CUT.is_match(line), "{line}");
        }
        for line in [
            "Error: listen tcp 127.0.0.1:11434: bind: permission denied",
            "listen tcp 127.0.0.1:11434: ok",
            "we listen tcp traffic on port 80 and more",
        ] {
            assert!(!super::CUT.is_match(line), "{line}");
        }
    }

    #[test]
    fn a_port_mentioned_in_passing_is_no_failure() {
        for line in [
            "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
            "listen tcp 127.0.0.1:11434: ok",
            "time=2025-04-17 level=INFO msg=\"Listening on 127.0.0.1:11434 (version 0.6.5)\"",
        ] {
            assert!(port(line).is_none(), "{line}");
        }
    }
}
