//! The RFC 3339 time a log viewer puts before each line — `docker logs -t`,
//! `kubectl logs --timestamps`, the CRI's files (`2026-11-27T09:38:52.123456789Z
//! stderr F `), a web viewer's copy — read by position: in those framings
//! every line starts with it, and the regexes' captures cost a bounded
//! backtracker's pass over the whole line (issue 23: 45% of a Docker
//! json-file log's instructions went to it), nom's combinators still 7% of
//! a CRI log's.

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
/// the whole of a line with no line break in it. By position, not with
/// nom's combinators: every line of a Docker or CRI log is asked this
/// first, and the byte tests cost a tenth of the combinators' (issue 23).
pub(crate) fn viewer_head(text: &str) -> Option<ViewerHead<'_>> {
    let b = text.as_bytes();
    let digits_at = |at: usize, n: usize| {
        b.get(at..at + n)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let shape = digits_at(0, 4)
        && b.get(4) == Some(&b'-')
        && digits_at(5, 2)
        && b.get(7) == Some(&b'-')
        && digits_at(8, 2)
        && b.get(10) == Some(&b'T')
        && digits_at(11, 2)
        && b.get(13) == Some(&b':')
        && digits_at(14, 2)
        && b.get(16) == Some(&b':')
        && digits_at(17, 2);
    if !shape {
        return None;
    }
    let mut at = 19;
    let frac = match b.get(at) {
        Some(b'.') => {
            let n = b[at + 1..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            if n == 0 {
                return None;
            }
            // More than nine digits: the zone must follow the ninth.
            let n = n.min(9);
            let frac = &text[at + 1..at + 1 + n];
            at += 1 + n;
            Some(frac)
        }
        _ => None,
    };
    let offset = match b.get(at) {
        Some(b'Z') => {
            at += 1;
            None
        }
        Some(&sign @ (b'+' | b'-'))
            if digits_at(at + 1, 2) && b.get(at + 3) == Some(&b':') && digits_at(at + 4, 2) =>
        {
            let offset = (
                char::from(sign),
                &text[at + 1..at + 3],
                &text[at + 4..at + 6],
            );
            at += 6;
            Some(offset)
        }
        _ => return None,
    };
    let after = &text[at..];
    if memchr::memchr(b'\n', after.as_bytes()).is_some() {
        return None;
    }
    let rest = match after.strip_prefix(' ') {
        Some(rest) => Some(cri_tag(rest).unwrap_or(rest)),
        None if after.is_empty() => None,
        None => return None,
    };
    Some(ViewerHead {
        date: &text[..10],
        hms: &text[11..19],
        frac,
        offset,
        rest,
    })
}

/// What follows the CRI's stream and tag (`stderr F `), where `text`
/// starts with them.
fn cri_tag(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let stream = b.starts_with(b"stdout ") || b.starts_with(b"stderr ");
    (stream && matches!(b.get(7), Some(b'F' | b'P')) && b.get(8) == Some(&b' ')).then(|| &text[9..])
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
