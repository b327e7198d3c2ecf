//! `ss -ltnp` (and `ss -ltnp` with `-a`'s `Netid` column): one listening
//! socket per line, `LISTEN 0 4096 127.0.0.1:11434 0.0.0.0:*
//! users:(("ollama",pid=2013311,fd=3))`. Each socket with a process becomes
//! a [`Listener`] per owning PID: who holds a port, for the port rules and
//! the inventory.

use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{Facts, Listener};

/// A listening row: optional `tcp`/`udp` netid, `LISTEN` (or `UNCONN` for
/// UDP), the queues, the local `address:port`, the peer, the process field.
pub(crate) static ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:(?:tcp|udp|tcp6|udp6)\s+)?(?:LISTEN|UNCONN)\s+[0-9]+\s+[0-9]+\s+(?P<addr>\S+?):(?P<port>[0-9]{1,5}|\*)\s+\S+(?:\s+(?P<procs>users:\(.*\)))?.*$",
    )
    .expect("ss row regex")
});

/// `("ollama",pid=2013311,fd=3)`; iproute2 before 4.x printed
/// `("sshd",1234,3)`.
static USER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\("(?P<name>[^"]*)",(?:pid=)?(?P<pid>[0-9]+),(?:fd=)?[0-9]+\)"#)
        .expect("ss user regex")
});

/// `State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process`, with
/// `Netid` first under `-a`.
static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:Netid\s+)?State\s+Recv-Q\s+Send-Q\s+Local Address:Port\s+Peer Address:Port")
        .expect("ss header regex")
});

/// Whether `line` is a header or listening row of `ss`.
pub(crate) fn is_ss_line(line: &str) -> bool {
    let t = line.trim_start();
    (t.starts_with("LISTEN")
        || t.starts_with("tcp")
        || t.starts_with("udp")
        || t.starts_with("UNCONN")
        || t.starts_with("State")
        || t.starts_with("Netid"))
        && (HEADER.is_match(t) || ROW.is_match(t))
}

/// The number of lines [`read`] did not recognise.
#[cfg(test)]
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    read(lines, facts).len() as u32
}

/// Parses one segment; returns the lines it did not recognise (their
/// indices), which go on to the line-level recognisers (a prompt's output
/// under the listing, another tool's lines).
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut unrecognized = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let text = line.text.trim();
        if text.is_empty() || HEADER.is_match(text) {
            continue;
        }
        let Some(c) = ROW.captures(text) else {
            unrecognized.push(i);
            continue;
        };
        let Ok(port) = c["port"].parse::<u16>() else {
            continue;
        };
        let address = c["addr"]
            .trim_matches(|ch| ch == '[' || ch == ']')
            .to_owned();
        let Some(procs) = c.name("procs") else {
            facts.listeners.push(Listener {
                pid: None,
                process: None,
                address,
                port,
                container: None,
                span: line.span,
            });
            continue;
        };
        let mut seen = Vec::new();
        for u in USER.captures_iter(procs.as_str()) {
            let Ok(pid) = u["pid"].parse::<u32>() else {
                continue;
            };
            if seen.contains(&pid) {
                continue;
            }
            seen.push(pid);
            facts.listeners.push(Listener {
                pid: Some(pid),
                process: Some(u["name"].to_owned()),
                address: address.clone(),
                port,
                container: None,
                span: line.span,
            });
        }
    }
    unrecognized
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(input: &str) -> (Facts, u32) {
        let mut facts = Facts::default();
        let n = parse(&Line::numbered(input), &mut facts);
        (facts, n)
    }

    /// https://github.com/kunchenguid/firstmate/pull/1644 (real case 096).
    #[test]
    fn a_listening_row_names_its_port_and_pid() {
        let (facts, missed) = read(
            "LISTEN 0      4096   127.0.0.1:11434 0.0.0.0:* users:((\"ollama\",pid=2013311,fd=3))\n",
        );
        assert_eq!(missed, 0);
        assert_eq!(facts.listeners.len(), 1);
        let l = &facts.listeners[0];
        assert_eq!((l.pid, l.port), (Some(2013311), 11434));
        assert_eq!(l.process.as_deref(), Some("ollama"));
        assert_eq!(l.address, "127.0.0.1");
        assert_eq!(l.span.line, 1);
    }

    #[test]
    fn other_lines_are_counted_and_a_header_is_not() {
        let (facts, missed) = read(
            "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\nLISTEN nonsense\n",
        );
        assert_eq!(missed, 1);
        assert!(facts.listeners.is_empty());
    }
}
