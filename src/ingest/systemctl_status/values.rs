//! The grammar of a `systemctl status` block's field values, as systemctl
//! prints them (src/systemctl/systemctl-show.c, `print_status_info()`):
//! the `Active:` state, the `Main PID:` and `Process:` lines with their exit,
//! a time span (`format_timespan()`, src/basic/time-util.c) and a line of the
//! `CGroup:` tree. Each is a `nom` grammar over the value's text; the block
//! structure around them is in the parent module.

use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_till, take_till1, take_while, take_while1};
use nom::character::complete::{char, digit1};
use nom::combinator::{all_consuming, eof, opt, recognize, rest as nom_rest};
use nom::multi::many0;
use nom::sequence::{delimited, preceded};

type Parsed<'a, T> = nom::IResult<&'a str, T>;

/// `failed (Result: signal) since …` → state `failed`, no sub-state,
/// result `signal`; `activating (auto-restart) (Result: exit-code) since …`;
/// `inactive (dead)`. Only the start of the value is read.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Active<'a> {
    pub state: &'a str,
    pub sub: Option<&'a str>,
    pub result: Option<&'a str>,
}

/// A state's name: `active`, `auto-restart`, `exit-code`.
fn state_word(i: &str) -> Parsed<'_, &str> {
    take_while1(|c: char| c.is_ascii_lowercase() || c == '-').parse(i)
}

pub(super) fn active(value: &str) -> Option<Active<'_>> {
    let read: Parsed<'_, _> = (
        state_word,
        opt(delimited(tag(" ("), state_word, char(')'))),
        opt(delimited(tag(" (Result: "), state_word, char(')'))),
    )
        .parse(value);
    let (_, (state, sub, result)) = read.ok()?;
    Some(Active { state, sub, result })
}

/// `4242 (python3)` → the PID's digits and `python3`; `5120 (code=killed,
/// signal=KILL)` → its exit. The closing parenthesis may be cut off.
pub(super) fn main_pid(value: &str) -> Option<(&str, Option<&str>)> {
    let read: Parsed<'_, _> =
        (digit1, opt(preceded(tag(" ("), take_till(|c| c == ')')))).parse(value);
    read.ok().map(|(_, pid_and_paren)| pid_and_paren)
}

/// `25885 ExecStart=/usr/bin/dockerd -H fd:// (code=exited, status=1/FAILURE)`
/// → the PID's digits, the setting (`ExecStart`) and the exit in the last
/// parentheses that hold one (`code=exited, status=1/FAILURE`, or
/// `code=killed, signal=ABRT`).
#[derive(Debug)]
pub(super) struct Process<'a> {
    pub pid: &'a str,
    pub setting: Option<&'a str>,
    pub exit: Option<&'a str>,
}

pub(super) fn process(value: &str) -> Option<Process<'_>> {
    let read: Parsed<'_, _> = (
        digit1,
        opt(delimited(
            char(' '),
            take_while1(|c: char| c.is_ascii_alphabetic()),
            char('='),
        )),
    )
        .parse(value);
    let (rest, (pid, setting)) = read.ok()?;
    // The command line before the exit may hold parentheses of its own: the
    // exit is the last `(code=…, …)` that closes.
    let exit = rest
        .rmatch_indices("(code=")
        .find_map(|(at, _)| exit_in_parentheses(&rest[at..]).ok())
        .map(|(_, exit)| exit);
    Some(Process { pid, setting, exit })
}

/// `(code=exited, status=1/FAILURE)` → `code=exited, status=1/FAILURE`.
fn exit_in_parentheses(i: &str) -> Parsed<'_, &str> {
    delimited(
        char('('),
        recognize((
            tag("code="),
            take_while1(|c: char| c.is_ascii_lowercase()),
            tag(", "),
            take_till(|c| c == ')'),
        )),
        char(')'),
    )
    .parse(i)
}

/// A time span as systemd prints one (`format_timespan`): `2.102s`,
/// `1min 50s`, `2h 3min`, `3 days 4h`, `1 weeks 2 days`, `450ms`, `1y
/// 2month`; each number with its unit glued on or as the next word.
pub(super) fn span_secs(text: &str) -> Option<f64> {
    let space = |i| take_while(char::is_whitespace).parse(i);
    let number = take_while(|c: char| c.is_ascii_digit() || c == '.');
    let unit = take_till1(char::is_whitespace);
    let term = delimited(space, (number, space, unit), space);
    let read: Parsed<'_, Vec<_>> = many0(term).parse(text);
    let (rest, terms) = read.ok()?;
    if !rest.is_empty() || terms.is_empty() {
        return None;
    }
    let mut total = 0.0;
    for (number, _, unit) in terms {
        let n: f64 = number.parse().ok()?;
        let scale = match unit {
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" | "sec" => 1.0,
            "min" | "m" => 60.0,
            "h" | "hr" => 3600.0,
            "d" | "day" | "days" => 86_400.0,
            "w" | "week" | "weeks" => 604_800.0,
            "month" | "months" => 2_629_800.0,
            "y" | "year" | "years" => 31_557_600.0,
            _ => return None,
        };
        total += n * scale;
    }
    Some(total)
}

/// One line of the `CGroup:` tree.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TreeLine<'a> {
    /// `├─4318 sglang::scheduler_TP0`
    Member { pid: u32, cmdline: &'a str },
    /// A nested cgroup: `├─init.scope`, `└─docker-<id>.scope`.
    Branch,
}

/// Reads one line of the `CGroup:` tree, box-drawing or ASCII (`|-`, `` `- ``):
/// the tree's glyphs, at least one of them a branch, then a member's PID and
/// command line or a nested cgroup's name.
pub(super) fn tree_line(text: &str) -> Option<TreeLine<'_>> {
    let branch = alt((tag("├─"), tag("└─"), tag("|-"), tag("`-")));
    let glyph = alt((
        branch.map(|_| true),
        alt((tag("│"), tag("|"), tag(" "))).map(|_| false),
    ));
    let read: Parsed<'_, Vec<bool>> = many0(glyph).parse(text.trim_start());
    let (rest, drawn) = read.ok()?;
    if !drawn.contains(&true) || rest.is_empty() {
        return None;
    }
    // `4318 sglang::scheduler_TP0`, or a PID alone; anything else after
    // the glyphs is a nested cgroup's name.
    let mut member = all_consuming((digit1, alt((preceded(char(' '), nom_rest), eof))));
    let read: Parsed<'_, (&str, &str)> = member.parse(rest);
    if let Ok((_, (pid, cmdline))) = read {
        if let Ok(pid) = pid.parse() {
            return Some(TreeLine::Member { pid, cmdline });
        }
    }
    Some(TreeLine::Branch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    /// The value texts the oracle test runs: each variant systemctl prints,
    /// cut and odd ones, and every `Active:`, `Main PID:`, `Process:` and
    /// tree line of the real cases in fixtures/.
    fn values() -> Vec<String> {
        let mut out: Vec<String> = [
            "failed (Result: signal) since Fri 2026-11-27 09:38:53 UTC; 2min 19s ago",
            "activating (auto-restart) (Result: exit-code) since Thu; 3s ago",
            "inactive (dead)",
            "active (running) since Mon",
            "deactivating (stop-sigterm) since x",
            "failed (Result: start-limit-hit)",
            "Failed (Result: x)",
            "active (Running)",
            "active (running",
            "4242 (python3)",
            "5120 (code=killed, signal=KILL)",
            "5120 (code=exited, status=0/SUCCESS",
            "5120 ()",
            "5120 (",
            "5120",
            "99999999999 (x)",
            "25885 ExecStart=/usr/bin/dockerd -H fd:// (code=exited, status=1/FAILURE)",
            "6221 ExecStart=/usr/bin/snap run x (code=killed, signal=ABRT)",
            "7 ExecStartPre=/bin/sh -c (echo (code=x, y)) (code=exited, status=2)",
            "7 ExecStart=/bin/a (code=exited, status=1) (code=killed, signal=KILL)",
            "7 ExecStart=/bin/a (code=Exited, status=1)",
            "7 ExecStart=/bin/a (code=exited,status=1)",
            "7 (code=exited, status=1",
            "7 Exec-Start=/bin/a",
            "",
            "x",
            "├─4318 sglang::scheduler_TP0",
            "└─4318",
            "│ └─4319 python3 -m vllm",
            "|-12 /usr/bin/x",
            "`-12",
            "├─init.scope",
            "├─12abc",
            "│ 12",
            "├─99999999999 x",
            "  ├─ 12 x",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/real");
        for case in std::fs::read_dir(root).into_iter().flatten().flatten() {
            let Ok(text) = std::fs::read_to_string(case.path().join("input.log")) else {
                continue;
            };
            for line in text.lines() {
                let t = line.trim_start();
                for label in ["Active: ", "Main PID: ", "Process: "] {
                    if let Some(v) = t.strip_prefix(label) {
                        out.push(v.to_owned());
                    }
                }
                if t.starts_with(['├', '└', '│', '|', '`']) {
                    out.push(line.to_owned());
                }
            }
        }
        out
    }

    /// The regular expressions these grammars replaced, kept as the oracle:
    /// every value reads as it did.
    #[test]
    fn grammars_read_what_the_old_expressions_read() {
        let active_re = Regex::new(
            r"^(?P<state>[a-z-]+)(?:\x20\((?P<sub>[a-z-]+)\))?(?:\x20\(Result:\x20(?P<result>[a-z-]+)\))?",
        )
        .unwrap();
        let main_pid_re = Regex::new(r"^(?P<pid>[0-9]+)(?:\x20\((?P<paren>[^)]*)\)?)?").unwrap();
        let process_re = Regex::new(
            r"^(?P<pid>[0-9]+)(?:\x20(?P<setting>[A-Za-z]+)=)?(?:.*\((?P<exit>code=[a-z]+,\x20[^)]*)\))?",
        )
        .unwrap();
        let values = values();
        assert!(values.len() > 100, "fixtures not found: {}", values.len());
        for v in &values {
            let old = active_re.captures(v).map(|c| {
                (
                    c.name("state").unwrap().as_str(),
                    c.name("sub").map(|m| m.as_str()),
                    c.name("result").map(|m| m.as_str()),
                )
            });
            let new = active(v).map(|a| (a.state, a.sub, a.result));
            assert_eq!(old, new, "Active: {v}");
            let old = main_pid_re.captures(v).map(|c| {
                (
                    c.name("pid").unwrap().as_str(),
                    c.name("paren").map(|m| m.as_str()),
                )
            });
            assert_eq!(old, main_pid(v), "Main PID: {v}");
            let old = process_re.captures(v).map(|c| {
                (
                    c.name("pid").unwrap().as_str(),
                    c.name("setting").map(|m| m.as_str()),
                    c.name("exit").map(|m| m.as_str()),
                )
            });
            let new = process(v).map(|p| (p.pid, p.setting, p.exit));
            assert_eq!(old, new, "Process: {v}");
        }
    }

    #[test]
    fn tree_lines() {
        use TreeLine::*;
        for (text, want) in [
            (
                "├─4318 sglang::scheduler_TP0",
                Some(Member {
                    pid: 4318,
                    cmdline: "sglang::scheduler_TP0",
                }),
            ),
            (
                "             │ └─4319 python3 -m vllm",
                Some(Member {
                    pid: 4319,
                    cmdline: "python3 -m vllm",
                }),
            ),
            (
                "`-12",
                Some(Member {
                    pid: 12,
                    cmdline: "",
                }),
            ),
            ("├─init.scope", Some(Branch)),
            ("├─12abc", Some(Branch)),
            ("├─99999999999 x", Some(Branch)),
            ("│ 12", None),
            ("├─", None),
            ("12 x", None),
        ] {
            assert_eq!(tree_line(text), want, "{text}");
        }
    }
}
