//! The RFC 3339 time a log viewer puts before each line — `docker logs -t`,
//! `kubectl logs --timestamps`, the CRI's files (`2026-11-27T09:38:52.123456789Z
//! stderr F `), a web viewer's copy — as a grammar: in those framings every
//! line starts with it, and the regexes' captures cost a bounded
//! backtracker's pass over the whole line (issue 23: 45% of a Docker
//! json-file log's instructions went to it).

use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_while_m_n};
use nom::character::complete::{char, one_of};
use nom::combinator::{opt, recognize};
use nom::sequence::preceded;

/// A viewer's time and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ViewerHead<'t> {
    /// `2026-11-27`.
    pub date: &'t str,
    /// `09:38:52`.
    pub hms: &'t str,
    /// The fraction's digits, without the dot.
    pub frac: Option<&'t str>,
    /// The zone: `None` for `Z`, else the sign (`+`/`-`), hours and minutes.
    pub offset: Option<(char, &'t str, &'t str)>,
    /// After one space and the CRI's stream and tag (`stdout F `), when
    /// they are there: the line the time stamps. `None` when nothing
    /// follows the time (a web viewer's time on a line of its own).
    pub rest: Option<&'t str>,
}

/// Splits `YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM)[ [stdout|stderr F|P ]rest]`,
/// the whole of a line with no line break in it.
pub(crate) fn viewer_head(text: &str) -> Option<ViewerHead<'_>> {
    let digits = |n: usize| take_while_m_n(n, n, |c: char| c.is_ascii_digit());
    let parsed: nom::IResult<&str, _, ()> = (
        recognize((digits(4), char('-'), digits(2), char('-'), digits(2))),
        char('T'),
        recognize((digits(2), char(':'), digits(2), char(':'), digits(2))),
        opt(preceded(
            char('.'),
            take_while_m_n(1, 9, |c: char| c.is_ascii_digit()),
        )),
        alt((
            char('Z').map(|_| None),
            (one_of("+-"), digits(2), char(':'), digits(2)).map(|(s, h, _, m)| Some((s, h, m))),
        )),
    )
        .parse(text);
    let (after, (date, _, hms, frac, offset)) = parsed.ok()?;
    if after.contains('\n') {
        return None;
    }
    let rest = match after.strip_prefix(' ') {
        Some(rest) => Some(cri_tag(rest).unwrap_or(rest)),
        None if after.is_empty() => None,
        None => return None,
    };
    Some(ViewerHead {
        date,
        hms,
        frac,
        offset,
        rest,
    })
}

/// What follows the CRI's stream and tag (`stderr F `), where `text`
/// starts with them.
fn cri_tag(text: &str) -> Option<&str> {
    let parsed: nom::IResult<&str, _, ()> = (
        alt((tag("stdout"), tag("stderr"))),
        char(' '),
        one_of("FP"),
        char(' '),
    )
        .parse(text);
    parsed.ok().map(|(rest, _)| rest)
}

#[cfg(test)]
mod tests {
    use std::sync::LazyLock;

    use regex::Regex;

    use super::*;
    use crate::ingest::real_lines::real_lines;

    /// The regex the grammar replaced (`server::layers`'s `VIEWER_TIME`),
    /// kept as its oracle.
    static ORACLE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?x)^(?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9])T(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?:\.(?P<frac>[0-9]{1,9}))?
            (?P<tz>Z|(?P<sign>[+-])(?P<oh>[0-9][0-9]):(?P<om>[0-9][0-9]))
            (?:\x20(?:(?:stdout|stderr)\x20[FP]\x20)?(?P<rest>.*))?$",
        )
        .expect("oracle")
    });

    fn oracle(text: &str) -> Option<ViewerHead<'_>> {
        let c = ORACLE.captures(text)?;
        let s = |name: &str| c.name(name).map(|m| m.as_str());
        Some(ViewerHead {
            date: s("date")?,
            hms: s("hms")?,
            frac: s("frac"),
            offset: s("sign").map(|sign| {
                (
                    sign.chars().next().unwrap_or('+'),
                    s("oh").unwrap_or(""),
                    s("om").unwrap_or(""),
                )
            }),
            rest: s("rest"),
        })
    }

    #[test]
    fn the_grammar_splits_every_line_as_the_regex_did() {
        let mut lines = real_lines();
        let edges = [
            "2026-11-27T09:38:52.123456789Z stderr F Traceback (most recent call last):",
            "2026-11-27T09:38:52.123456789Z stdout P partial",
            "2026-11-27T09:38:52.123456789Z stdout F ",
            "2026-11-27T09:38:52.123456789Z stdout F",
            "2026-11-27T09:38:52.123456789Z stdout X text",
            "2026-11-27T09:38:52.123456789Z stderr  F text",
            "2026-11-27T09:38:52.1234567890Z text",
            "2026-11-27T09:38:52.Z text",
            "2026-11-27T09:38:52Z",
            "2026-11-27T09:38:52Z ",
            "2026-11-27T09:38:52Zx",
            "2026-11-27T09:38:52+08:00 INFO:     Started server process [60858]",
            "2026-11-27T09:38:52-0800 text",
            "2026-11-27T09:38:52+8:00 text",
            "2026-11-27 09:38:52Z text",
            "2026-1-27T09:38:52Z text",
            "12026-11-27T09:38:52Z text",
            "2026-11-27T09:38:52Z line\nbreak",
            "2026-11-27T09:38:52Z\ttab",
            "2026-11-27T09:38:52Z ünïcode ✓",
            "２０２６-11-27T09:38:52Z text",
        ];
        lines.extend(edges.iter().map(|l| l.to_string()));
        let heads: Vec<String> = lines
            .iter()
            .filter(|l| oracle(l).is_some())
            .cloned()
            .collect();
        for line in &heads {
            for cut in (0..=line.len().min(60)).filter(|&i| line.is_char_boundary(i)) {
                lines.push(line[..cut].to_owned());
            }
        }
        let mut agreed = 0;
        for line in &lines {
            assert_eq!(viewer_head(line), oracle(line), "{line:?}");
            agreed += usize::from(oracle(line).is_some());
        }
        assert!(agreed > 100, "only {agreed} viewer times among the lines");
    }
}
