//! The process prefix vLLM and Ray put before what a child process prints —
//! `(EngineCore_DP0 pid=4201) `, `(VllmWorker rank=1 pid=4243) `,
//! `(WorkerDict pid=3490362, ip=10.0.0.3) `, `(pid=123) ` — as a grammar:
//! in a raw vLLM log most lines start with it, and the regexes' captures
//! cost a bounded backtracker's pass over the whole line, twice (the
//! segmenter's sniffer and the server parser's layers). Issue 23: 35% of a
//! raw vLLM log's instructions went to those captures.

use nom::Parser;
use nom::bytes::complete::{tag, take_while1};
use nom::character::complete::char;
use nom::combinator::{opt, recognize};
use nom::sequence::{preceded, terminated};

/// A process prefix and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessHead<'t> {
    /// The process's name (`EngineCore_DP0`, `WorkerDict`), when printed.
    pub name: Option<&'t str>,
    /// vLLM's `rank=N`, its digits.
    pub rank: Option<&'t str>,
    /// The PID's digits.
    pub pid: &'t str,
    /// Ray's `, ip=…` address.
    pub ip: Option<&'t str>,
    /// After one space: the line the prefix tags. `None` when nothing
    /// follows the closing parenthesis.
    pub rest: Option<&'t str>,
}

/// Splits `(name )?(rank=N )?pid=N(, ip=ADDR)?)( rest)?`, the whole of a
/// line with no line break in it; `name` is `[A-Za-z_][0-9A-Za-z_.:-]*`.
pub(crate) fn process_head(text: &str) -> Option<ProcessHead<'_>> {
    let digits = || take_while1(|c: char| c.is_ascii_digit());
    let name = recognize((
        take_while1(|c: char| c.is_ascii_alphabetic() || c == '_').map(|_| ()),
        opt(take_while1(|c: char| {
            c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
        })),
    ));
    let parsed: nom::IResult<&str, _, ()> = (
        char('('),
        opt(terminated(name, char(' '))),
        opt(terminated(preceded(tag("rank="), digits()), char(' '))),
        preceded(tag("pid="), digits()),
        opt(preceded(
            tag(", ip="),
            take_while1(|c: char| c.is_ascii_hexdigit() || matches!(c, '.' | ':')),
        )),
        char(')'),
    )
        .parse(text);
    let (after, (_, name, rank, pid, ip, _)) = parsed.ok()?;
    if after.contains('\n') {
        return None;
    }
    let rest = match after.strip_prefix(' ') {
        Some(rest) => Some(rest),
        None if after.is_empty() => None,
        None => return None,
    };
    Some(ProcessHead {
        name,
        rank,
        pid,
        ip,
        rest,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::LazyLock;

    use regex::Regex;

    use super::*;
    use crate::ingest::real_lines::real_lines;

    /// The regex the grammar replaced (`server::layers`'s and the
    /// segmenter's `PROCESS`), kept as its oracle.
    static ORACLE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?x)^\((?:(?P<name>[A-Za-z_][0-9A-Za-z_.:-]*)\x20)?(?:rank=(?P<rank>[0-9]+)\x20)?pid=(?P<pid>[0-9]+)
            (?:,\x20ip=(?P<ip>[0-9A-Fa-f.:]+))?\)(?:\x20(?P<rest>.*))?$",
        )
        .expect("oracle")
    });

    fn oracle(text: &str) -> Option<ProcessHead<'_>> {
        let c = ORACLE.captures(text)?;
        let s = |name: &str| c.name(name).map(|m| m.as_str());
        Some(ProcessHead {
            name: s("name"),
            rank: s("rank"),
            pid: s("pid")?,
            ip: s("ip"),
            rest: s("rest"),
        })
    }

    #[test]
    fn the_grammar_splits_every_line_as_the_regex_did() {
        let mut lines = real_lines();
        let edges = [
            "(EngineCore_DP0 pid=4201) INFO 06-01 12:01:10 [core.py:1] hi",
            "(VllmWorker rank=1 pid=4243) ",
            "(VllmWorker rank=1 pid=4243)",
            "(VllmWorker rank=1 pid=4243)x",
            "(WorkerDict pid=3490362, ip=10.0.0.3) [rank0]: x",
            "(WorkerDict pid=3490362, ip=fe80::1) x",
            "(WorkerDict pid=3490362, ip=) x",
            "(WorkerDict pid=3490362,ip=10.0.0.3) x",
            "(pid=123) text",
            "(rank=0 pid=5) text",
            "(rank=0 pid=) text",
            "(pid pid=5) text",
            "(pid=5 pid=6) text",
            "(rank=x pid=5) text",
            "(_ pid=5) x",
            "(9name pid=5) x",
            "(a.b:c-d pid=5) x",
            "(name  pid=5) x",
            "(name rank=1  pid=5) x",
            "(name pid=5)  two spaces",
            "(name pid=5) line\nbreak",
            "(name pid=5) ünïcode ✓",
            "(nämé pid=5) x",
            "(name pid=５) x",
            "(raylet) x",
            "(name pid=5",
            "(",
            "",
        ];
        lines.extend(edges.iter().map(|l| l.to_string()));
        let heads: Vec<&String> = lines.iter().filter(|l| oracle(l).is_some()).collect();
        assert!(
            heads.len() > edges.len(),
            "the real lines hold process prefixes"
        );
        for line in &lines {
            assert_eq!(process_head(line), oracle(line), "{line:?}");
        }
    }
}
