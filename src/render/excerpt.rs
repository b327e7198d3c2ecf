//! Evidence as annotated source excerpts: which part of a cited line is the
//! key value (the rule's needle, or else the first value the note names),
//! and how to show a long line around it in a given width.

use std::ops::Range;

use crate::rules::Evidence;

/// The byte range of the key value in `line`: the evidence's needle, else
/// the first value named in its note that the line holds.
/// A needle the line does not hold marks nothing: the rule meant that
/// value, and another one would mislead.
pub fn key_range(line: &str, e: &Evidence) -> Option<Range<usize>> {
    match &e.highlight {
        Some(needle) => locate(line, needle),
        None => note_values(&e.note).find_map(|v| locate(line, &v)),
    }
}

/// Where `needle` stands in `line` as a whole value (not inside a longer
/// word or number). A needle written as people read it (`55,286 MiB`) also
/// finds the log's spelling (`55286MiB`, `55286 MiB`). A bare number takes
/// the unit that follows it on the line (`55286` → `55286MiB`).
pub fn locate(line: &str, needle: &str) -> Option<Range<usize>> {
    let mut spellings = vec![needle.to_owned()];
    for s in [
        needle.replace(',', ""),
        needle.replace(' ', ""),
        needle.replace([',', ' '], ""),
    ] {
        if !spellings.contains(&s) {
            spellings.push(s);
        }
    }
    let range = spellings
        .iter()
        .filter(|s| !s.is_empty())
        .find_map(|s| find_whole(line, s))?;
    Some(with_unit(line, range))
}

/// The first occurrence of `needle` not glued to a letter or digit.
fn find_whole(line: &str, needle: &str) -> Option<Range<usize>> {
    let glued_start = needle.starts_with(|c: char| c.is_alphanumeric());
    let glued_end = needle.ends_with(|c: char| c.is_alphanumeric());
    let mut from = 0;
    while let Some(i) = line[from..].find(needle) {
        let start = from + i;
        let end = start + needle.len();
        let before = line[..start].chars().next_back();
        let after = line[end..].chars().next();
        let free = |c: Option<char>, glued: bool| {
            !glued || !c.is_some_and(|c| c.is_alphanumeric() || c == '_')
        };
        // `0` in `00.0` or `9` in `1.9`: a decimal point glues numbers too.
        let decimal = |c: Option<char>, near: Option<char>| {
            c == Some('.') && near.is_some_and(|n| n.is_ascii_digit())
        };
        let before2 = line[..start].chars().rev().nth(1);
        let after2 = line[end..].chars().nth(1);
        if free(before, glued_start)
            && free(after, glued_end)
            && !(needle.starts_with(|c: char| c.is_ascii_digit()) && decimal(before, before2))
            && !(needle.ends_with(|c: char| c.is_ascii_digit()) && decimal(after, after2))
        {
            return Some(start..end);
        }
        from = start + line[start..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

const UNITS: [&str; 8] = ["MiB", "GiB", "KiB", "MB", "GB", "KB", "W", "%"];

/// Extends a numeric match over the unit written right after it.
fn with_unit(line: &str, r: Range<usize>) -> Range<usize> {
    if !line[r.clone()].ends_with(|c: char| c.is_ascii_digit()) {
        return r;
    }
    let rest = &line[r.end..];
    let (gap, rest) = match rest.strip_prefix(' ') {
        Some(after) => (1, after),
        None => (0, rest),
    };
    for u in UNITS {
        if let Some(after) = rest.strip_prefix(u) {
            if !after.starts_with(|c: char| c.is_alphanumeric()) {
                return r.start..r.end + gap + u.len();
            }
        }
    }
    r
}

/// Values a note names, in order: numbers of two digits or more (commas
/// dropped), `key=value` pairs, unit names and quoted words.
fn note_values(note: &str) -> impl Iterator<Item = String> + '_ {
    note.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ';' | '`'))
        .filter_map(|w| {
            let w = w.trim_end_matches([',', ':', '.']);
            let w = w.strip_suffix("'s").unwrap_or(w);
            if let Some(q) = w.strip_prefix('\'').and_then(|w| w.strip_suffix('\'')) {
                return (!q.is_empty()).then(|| w.to_owned());
            }
            let numeric = w.replace(',', "");
            if numeric.len() >= 2 && numeric.chars().all(|c| c.is_ascii_digit()) {
                return Some(numeric);
            }
            let named = w.contains('=')
                || [".service", ".socket", ".scope", ".slice"]
                    .iter()
                    .any(|s| w.ends_with(s))
                || (w.len() >= 3 && w.chars().any(|c| c.is_ascii_digit()));
            named.then(|| w.to_owned())
        })
}

/// A line cut to fit `width` columns around its key value: the visible
/// text, and the key value's column and length in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub text: String,
    pub mark: Option<(usize, usize)>,
}

/// Context kept to the left of the key value when the line must be cut
/// on both sides.
const LEFT_CONTEXT: usize = 32;

/// `parts` are the line before, at and after the key value, already made
/// printable; the line is cut with `…` to fit `width` characters, keeping
/// the key value in view.
pub fn window(before: &str, key: &str, after: &str, width: usize) -> Window {
    let width = width.max(20);
    let (nb, nk, na) = (
        before.chars().count(),
        key.chars().count(),
        after.chars().count(),
    );
    if nb + nk + na <= width {
        return Window {
            text: format!("{before}{key}{after}"),
            mark: (nk > 0).then_some((nb, nk)),
        };
    }
    if nk == 0 {
        let mut text: String = format!("{before}{after}").chars().take(width - 1).collect();
        text.push('…');
        return Window { text, mark: None };
    }
    let skip = skip_for(nb, nk, nb + nk + na, width);
    let mut chars: Vec<char> = Vec::with_capacity(width + 1);
    if skip > 0 {
        chars.push('…');
    }
    chars.extend(before.chars().skip(skip));
    let col = chars.len();
    chars.extend(key.chars());
    chars.extend(after.chars());
    let mut visible = chars.len();
    if chars.len() > width {
        chars.truncate(width - 1);
        chars.push('…');
        visible = width - 1;
    }
    let shown = nk.min(visible.saturating_sub(col));
    Window {
        text: chars.into_iter().collect(),
        mark: (shown > 0).then_some((col, shown)),
    }
}

/// How many characters to drop on the left so that the `nk` characters
/// after the first `nb` stay in view: none when they are near the start,
/// else the line's end when they are near that, else the span with some
/// context on its left.
fn skip_for(nb: usize, nk: usize, total: usize, width: usize) -> usize {
    if nb + nk < width {
        return 0;
    }
    let to_end = total - (width - 1);
    let context = LEFT_CONTEXT
        .min(width / 3)
        .min((width - 2).saturating_sub(nk));
    if to_end <= nb {
        to_end
    } else {
        nb.saturating_sub(context)
    }
}

/// A long line with no key value, cut to `width` so that the part a
/// catalog row recognised (`message`, after the line's own `prefix`:
/// timestamp, host, unit) is in view from its start, as much of it as fits.
pub fn window_on(prefix: &str, message: &str, width: usize) -> Window {
    let width = width.max(20);
    let (np, nm) = (prefix.chars().count(), message.chars().count());
    if np + nm <= width {
        return Window {
            text: format!("{prefix}{message}"),
            mark: None,
        };
    }
    let skip = skip_for(np, nm.min(width - 2), np + nm, width);
    let mut chars: Vec<char> = Vec::with_capacity(width + 1);
    if skip > 0 {
        chars.push('…');
    }
    chars.extend(prefix.chars().skip(skip));
    chars.extend(message.chars());
    if chars.len() > width {
        chars.truncate(width - 1);
        chars.push('…');
    }
    Window {
        text: chars.into_iter().collect(),
        mark: None,
    }
}

/// Where, in bytes, the part of `line` that a catalog row recognises
/// starts (0 when none does): the message inside a journal or container
/// line, past its timestamp and host. Where several rows read one line (an
/// error wrapped in the errors that carried it: docker's `OCI runtime
/// create failed: … caused: … nvml error: driver/library version
/// mismatch`), the most severe row's part, the first of equals.
pub fn recognised_at(line: &str) -> usize {
    let severity =
        |h: &crate::catalogs::Hit<'_>| h.row.map_or(crate::rules::Severity::Info, |r| r.severity);
    crate::catalogs::catalogs()
        .hits(line)
        .iter()
        .filter(|h| !h.matched.is_empty())
        .filter_map(|h| Some((severity(h), line.find(h.matched.as_str())?)))
        .min()
        .map_or(0, |(_, at)| at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{SourceId, Span};

    fn ev(note: &str, needle: Option<&str>) -> Evidence {
        let span = Span {
            source: SourceId(0),
            line: 1,
        };
        match needle {
            Some(n) => Evidence::marked(span, note, n),
            None => Evidence::new(span, note),
        }
    }

    fn key<'a>(line: &'a str, note: &str, needle: Option<&str>) -> Option<&'a str> {
        key_range(line, &ev(note, needle)).map(|r| &line[r])
    }

    #[test]
    fn the_key_value_is_found_in_the_logs_spelling() {
        let table = "|    0   N/A  N/A           20629      C   /opt/ddtree/venv/bin/python3          55286MiB |";
        let csv = "0, GPU-5a5b, NVIDIA RTX PRO 6000, 00000000:16:00.0, 0 MiB, 97887 MiB";
        let cases = [
            (
                table,
                "PID 20629 holds 55,286 MiB on GPU 0",
                Some("55286 MiB"),
                Some("55286MiB"),
            ),
            (
                table,
                "PID 20629 holds 55,286 MiB on GPU 0",
                None,
                Some("20629"),
            ),
            (
                csv,
                "GPU 0: 0 MiB of 97,887 MiB used",
                Some("0 MiB"),
                Some("0 MiB"),
            ),
            (
                csv,
                "GPU 0: 0 MiB of 97,887 MiB used",
                None,
                Some("97887 MiB"),
            ),
            (
                "└─20629 /opt/ddtree/venv/bin/python3",
                "PID 20629 belongs to x",
                Some("20629"),
                Some("20629"),
            ),
            (
                "a.service: Main process exited, code=killed, status=9/KILL",
                "a.service's main process exited, code=killed, status=9/KILL",
                Some("status=9/KILL"),
                Some("status=9/KILL"),
            ),
            (
                "a.service: Failed with result 'signal'.",
                "a.service failed with result 'signal'",
                None,
                Some("a.service"),
            ),
            (
                "a.service: Failed with result 'signal'.",
                "x failed with result 'signal'",
                None,
                Some("'signal'"),
            ),
            // A needle the line does not hold marks nothing.
            ("x 123456 y", "value 123456", Some("nothere"), None),
            ("nothing to see", "GPU 0 is fine", None, None),
            // Not inside a longer number, nor a decimal.
            ("1205 20.5 205", "PID 205", None, Some("205")),
        ];
        for (line, note, needle, want) in cases {
            assert_eq!(
                key(line, note, needle),
                want,
                "{line} / {note} / {needle:?}"
            );
        }
    }

    #[test]
    fn a_line_with_no_key_is_shown_from_the_message_a_catalog_row_knows() {
        // systemd's start-limit line behind a journal prefix (the sample of
        // catalogs/systemd.toml's row), with a longer host and unit name.
        let line = "2026-12-05T10:00:00.123456+00:00 gpu-node-17.cluster.internal systemd[1]: \
                    sglang-router-blue.service: Start request repeated too quickly.";
        let at = recognised_at(line);
        assert!(at > 0 && line[..at].contains("systemd[1]"), "{at}");
        let w = window_on(&line[..at], &line[at..], 70);
        assert_eq!(w.text.chars().count(), 70, "{}", w.text);
        assert!(w.text.starts_with('…'), "{}", w.text);
        assert!(
            w.text.contains("Start request repeated too quickly."),
            "{}",
            w.text
        );
        assert_eq!(w.mark, None);
        // A line no row knows keeps its start; one that fits is whole.
        assert_eq!(recognised_at("nothing a catalog row knows here"), 0);
        let w = window_on("short: ", "message", 70);
        assert_eq!(w.text, "short: message");
    }

    #[test]
    fn long_lines_are_cut_around_the_key_value() {
        let before = "a".repeat(100);
        let after = "b".repeat(100);
        let w = window(&before, "KEY", &after, 60);
        assert_eq!(w.text.chars().count(), 60, "{}", w.text);
        assert!(
            w.text.starts_with('…') && w.text.ends_with('…'),
            "{}",
            w.text
        );
        let (col, len) = w.mark.unwrap();
        assert_eq!(
            w.text.chars().skip(col).take(len).collect::<String>(),
            "KEY"
        );

        let w = window("short ", "KEY", &after, 60);
        assert!(w.text.starts_with("short KEY"), "{}", w.text);
        assert_eq!(w.mark, Some((6, 3)));

        let w = window("fits ", "KEY", " here", 60);
        assert_eq!(w.text, "fits KEY here");
        // A key longer than the room left is shown from its start.
        let w = window(&before, &"K".repeat(80), &after, 60);
        assert_eq!(w.text.chars().count(), 60, "{}", w.text);
        assert_eq!(w.mark, Some((1, 58)));
        let w = window("no key here", "", "", 60);
        assert_eq!(w.mark, None);
        let w = window(&before, "", "", 60);
        assert_eq!(w.text.chars().count(), 60);
        assert!(w.text.ends_with('…'));
    }
}
