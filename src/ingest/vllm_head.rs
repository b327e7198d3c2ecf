//! vLLM's logger head, `LEVEL MM-DD HH:MM[:SS][.frac] [file.py:N] message`,
//! as a grammar: one definition for the server reader (`server::vllm`,
//! which times and classifies the record) and the skim test
//! (`chatter::vllm_record`, which only asks whether a line is one).

use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_till1, take_while_m_n};
use nom::character::complete::char;
use nom::combinator::{opt, recognize};
use nom::sequence::preceded;

/// The logger's head, in its parts: `LEVEL MM-DD HH:MM[:SS][.frac]
/// [file.py:N] message`, the opening bracket absent before 0.8, the seconds
/// absent where a viewer cut them (`ERROR 02-13 18:05 [x.py:852]`).
pub(crate) struct Head<'t> {
    /// Everything before the message: equal on every line of one record.
    pub prefix: &'t str,
    pub month: &'t str,
    pub day: &'t str,
    /// `HH:MM:SS` or `HH:MM`.
    pub hms: &'t str,
    /// Up to six digits of the second (`.123456`).
    pub frac: Option<&'t str>,
    /// After one space; empty when the line ends at the bracket.
    pub message: &'t str,
}

/// Splits a vLLM record's head. A grammar, not a regex: this runs on every
/// vLLM line a search anchors, and a regex with six groups over a whole
/// line took its bounded backtracker about 9,000 instructions a line.
pub(crate) fn head(text: &str) -> Option<Head<'_>> {
    let level = alt((
        tag("DEBUG"),
        tag("INFO"),
        tag("WARNING"),
        tag("ERROR"),
        tag("CRITICAL"),
    ));
    let two = || take_while_m_n(2, 2, |c: char| c.is_ascii_digit());
    let hms = recognize((two(), char(':'), two(), opt((char(':'), two()))));
    let frac = opt(preceded(
        char('.'),
        take_while_m_n(1, 6, |c: char| c.is_ascii_digit()),
    ));
    // `()` for errors: a line that is no record needs no reason why.
    let parsed: nom::IResult<&str, _, ()> = (
        level,
        char(' '),
        two(),
        char('-'),
        two(),
        char(' '),
        hms,
        frac,
        char(' '),
        opt(char('[')),
    )
        .parse(text);
    let (rest, (_, _, month, _, day, _, hms, frac, _, bracket)) = parsed.ok()?;
    // `file.py:123]`: no `]` or space inside, digits after its last colon.
    let (after, source) =
        take_till1::<_, _, ()>(|c: char| c == ']' || c.is_whitespace())(rest).ok()?;
    let after = after.strip_prefix(']')?;
    let (file, line) = source.rsplit_once(':')?;
    // An empty file name stands only behind a bracket, which is then read as
    // the name's first character (`[:12]`).
    if (file.is_empty() && bracket.is_none())
        || line.is_empty()
        || !line.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    // Then the end, or a space and the message, on one line.
    let message = match after.strip_prefix(' ') {
        Some(message) if !message.contains('\n') => message,
        None if after.is_empty() => "",
        _ => return None,
    };
    Some(Head {
        prefix: &text[..text.len() - after.len()],
        month,
        day,
        hms,
        frac,
        message,
    })
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
            r"(?x)^(?P<prefix>(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\x20
            (?P<mon>[0-9][0-9])-(?P<day>[0-9][0-9])\x20(?P<hms>[0-9][0-9]:[0-9][0-9](?::[0-9][0-9])?)(?:\.(?P<frac>[0-9]{1,6}))?\x20
            \[?(?P<source>[^\]\s]+:[0-9]+)\])(?:\x20(?P<msg>.*))?$",
        )
        .expect("oracle")
    });

    fn oracle(text: &str) -> Option<[Option<&str>; 6]> {
        let c = ORACLE.captures(text)?;
        let group = |name| c.name(name).map(|m| m.as_str());
        Some([
            group("prefix"),
            group("mon"),
            group("day"),
            group("hms"),
            group("frac"),
            Some(group("msg").unwrap_or("")),
        ])
    }

    fn parts(text: &str) -> Option<[Option<&str>; 6]> {
        let h = head(text)?;
        Some([
            Some(h.prefix),
            Some(h.month),
            Some(h.day),
            Some(h.hms),
            h.frac,
            Some(h.message),
        ])
    }

    #[test]
    fn the_grammar_splits_every_line_as_the_regex_did() {
        let mut lines = real_lines();
        // Each real vLLM head, and its bytes cut or changed where the
        // grammar decides: the level, the date, the seconds, the fraction,
        // the bracket, the source, the space before the message.
        let edges = [
            "INFO 11-14 03:12:09 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s",
            "INFO 05-12 09:41:09.123456 [logger.py:43] Received request chatcmpl-1",
            "INFO 05-12 09:41:09.1234567 [logger.py:43] x",
            "INFO 05-12 09:41:09. [logger.py:43] x",
            "WARNING 01-02 03:04:05 engine.py:75] x",
            "ERROR 02-13 18:05 [x.py:852] cut seconds",
            "ERROR 02-13 18:5 [x.py:852] x",
            "DEBUG 01-02 03:04:05 [core.py:9]",
            "DEBUG 01-02 03:04:05 [core.py:9] ",
            "DEBUG 01-02 03:04:05 [core.py:9]x",
            "CRITICAL 01-02 03:04:05 [a:b:9] x",
            "INFO 01-02 03:04:05 [:12] x",
            "INFO 01-02 03:04:05 :12] x",
            "INFO 01-02 03:04:05 [a.py:] x",
            "INFO 01-02 03:04:05 [a.py:1x] x",
            "INFO 01-02 03:04:05 [a b.py:1] x",
            "INFO 01-02 03:04:05 [a\u{a0}b.py:1] x",
            "INFO 01-02 03:04:05 [a.py:1] two\nlines",
            "INFO 01-02 03:04:05 [[a.py:1] x",
            "INFO 01-02 03:04:05  [a.py:1] x",
            "INFOS 01-02 03:04:05 [a.py:1] x",
            "info 01-02 03:04:05 [a.py:1] x",
            "INFO 1-02 03:04:05 [a.py:1] x",
            "INFO 01-02 03:04:05 [a.py:1] ünïcode ✓",
            "INFO:     10.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK",
        ];
        lines.extend(edges.iter().map(|l| l.to_string()));
        let vllm: Vec<String> = lines
            .iter()
            .filter(|l| oracle(l).is_some())
            .cloned()
            .collect();
        for line in &vllm {
            for cut in (0..=line.len()).filter(|&i| line.is_char_boundary(i)) {
                lines.push(line[..cut].to_owned());
            }
        }
        let mut agreed = 0;
        for line in &lines {
            assert_eq!(parts(line), oracle(line), "{line:?}");
            agreed += usize::from(oracle(line).is_some());
        }
        assert!(agreed > 1000, "only {agreed} vLLM heads among the lines");
    }
}
