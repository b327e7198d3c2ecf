//! Go's `log/slog` text records (Ollama, the NVIDIA container toolkit),
//! `time=2024-05-01T10:00:00.000Z level=WARN source=sched.go:646
//! msg="gpu VRAM usage didn't recover within timeout" seconds=5.2`, as a
//! grammar: the record layer of `server::layers` peels it from every line
//! of an Ollama log, in every framing, so it is read once per line.

use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_till1};
use nom::character::complete::{char, digit1, one_of};
use nom::combinator::opt;
use nom::sequence::preceded;

/// A record's head, in the parts the reader uses.
#[derive(Debug, PartialEq)]
pub(crate) struct Record<'t> {
    /// The `time=` value as printed (RFC 3339), absent where a paste
    /// starts at `level=`.
    pub time: Option<&'t str>,
    /// The `msg` value: inside its quotes (escapes left as printed), or
    /// the bare word.
    pub message: &'t str,
}

/// Splits a slog text record: `[time=T ]level=L[±N][ source=S] msg=M[ …]`.
/// A grammar, not a regex: an Ollama log is such records line after line,
/// and the regex's captures cost a bounded backtracker's pass over each.
pub(crate) fn record(text: &str) -> Option<Record<'_>> {
    let value = || take_till1(char::is_whitespace);
    let parsed: nom::IResult<&str, _, ()> = (
        opt((tag("time="), value(), char(' '))),
        tag("level="),
        alt((tag("DEBUG"), tag("INFO"), tag("WARN"), tag("ERROR"))),
        opt((one_of("+-"), digit1)),
        opt(preceded(tag(" source="), value())),
        tag(" msg="),
    )
        .parse(text);
    let (rest, (time, ..)) = parsed.ok()?;
    let (message, after) = match rest.strip_prefix('"') {
        Some(quoted) => {
            let end = closing_quote(quoted)?;
            (&quoted[..end], &quoted[end + 1..])
        }
        None => {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        }
    };
    if message.is_empty() && !rest.starts_with('"') {
        return None;
    }
    // Then the end, or a space and the other attributes, on one line.
    if !(after.is_empty() || (after.starts_with(' ') && !after.contains('\n'))) {
        return None;
    }
    Some(Record {
        time: time.map(|(_, t, _)| t),
        message,
    })
}

/// Where the quoted value that `quoted` starts (after its `"`) ends: the
/// first `"` no backslash escapes. A backslash escapes any character but a
/// line break.
fn closing_quote(quoted: &str) -> Option<usize> {
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some(i),
            '\\' => match chars.next() {
                Some((_, '\n')) | None => return None,
                Some(_) => {}
            },
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::LazyLock;

    use regex::Regex;

    use super::*;
    use crate::ingest::real_lines::real_lines;

    /// The regex the grammar replaced, kept as its oracle.
    static ORACLE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r#"(?x)^(?:time=(?P<time>\S+)\x20)?level=(?:DEBUG|INFO|WARN|ERROR)(?:[+-][0-9]+)?
            (?:\x20source=\S+)?\x20msg=(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s"]\S*))(?:\x20.*)?$"#,
        )
        .expect("oracle")
    });

    fn oracle(text: &str) -> Option<Record<'_>> {
        let c = ORACLE.captures(text)?;
        Some(Record {
            time: c.name("time").map(|m| m.as_str()),
            message: c
                .name("quoted")
                .or_else(|| c.name("bare"))
                .map_or("", |m| m.as_str()),
        })
    }

    #[test]
    fn the_grammar_splits_every_line_as_the_regex_did() {
        let mut lines = real_lines();
        // Real heads, and their bytes cut or changed where the grammar
        // decides: the time, the level and its offset, the source, the
        // quotes and escapes, what follows the message.
        let edges = [
            r#"time=2024-12-05T10:34:30.066+08:00 level=WARN source=sched.go:646 msg="gpu VRAM usage didn't recover within timeout" seconds=5.032960268"#,
            r#"time=2025-07-30T13:57:36.458+08:00 level=INFO source=gpu_windows.go:214 msg="" package=0 cores=8"#,
            "time=2025-05-22T17:59:04.662-07:00 level=INFO source=server.go:168 msg=offload library=cuda",
            "level=INFO source=types.go:130 msg=offload",
            "level=INFO msg=offload",
            "level=DEBUG+2 msg=x",
            "level=WARN-4 source=a.go:1 msg=x y=z",
            "level=WARNING msg=x",
            "level=INFO+ msg=x",
            "level=INFO msg=",
            r#"level=INFO msg="""#,
            r#"level=INFO msg="a\"b" c=d"#,
            r#"level=INFO msg="a\"b"c"#,
            r#"level=INFO msg="a\\" c"#,
            r#"level=INFO msg="unterminated"#,
            r#"level=INFO msg="ends in a backslash\"#,
            "level=INFO msg=\"a\\\nb\"",
            "level=INFO msg=x\ty",
            "level=INFO msg=x\n y",
            "level=INFO  msg=x",
            "level=INFO source= msg=x",
            "level=INFO source=a\tb msg=x",
            "time= level=INFO msg=x",
            "time=T\tlevel=INFO msg=x",
            "time=T level=INFO msg=x\u{a0}y",
            "time=T level=INFO msg=ünïcode ✓",
            r#"msg="no level" level=INFO"#,
        ];
        lines.extend(edges.iter().map(|l| l.to_string()));
        let slog: Vec<String> = lines
            .iter()
            .filter(|l| oracle(l).is_some())
            .cloned()
            .collect();
        for line in &slog {
            for cut in (0..=line.len()).filter(|&i| line.is_char_boundary(i)) {
                lines.push(line[..cut].to_owned());
            }
        }
        let mut agreed = 0;
        for line in &lines {
            assert_eq!(record(line), oracle(line), "{line:?}");
            agreed += usize::from(oracle(line).is_some());
        }
        assert!(agreed > 1000, "only {agreed} slog records among the lines");
    }
}
