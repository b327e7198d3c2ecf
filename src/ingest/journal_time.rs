//! The timestamp that starts a line of every journalctl text mode
//! (docs/formats/journal.md), and `__REALTIME_TIMESTAMP`.
//!
//! Each form says how much it knows: `short` has no year and no zone,
//! `short-full` and `verbose` name the zone by abbreviation, `short-iso` and
//! `short-unix` pin the instant, and the monotonic forms (`short-monotonic`,
//! `short-delta`) count seconds since boot, which is no wall time at all.

use std::sync::LazyLock;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use regex::Regex;

use crate::model::Timestamp;

/// `short` / `short-precise`: `Nov 27 09:38:40` / `Nov 27 09:38:40.123456`.
/// journalctl pads the day with `0`; syslog files pad it with a space. The
/// month is `%b` in the reader's locale (`дек 30`, `4月 26`, `mar 07`,
/// `déc. 30`): [`month_number`] decides which names are months.
static SHORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^
        (?P<mon>[A-Z][a-z]{2}|\p{L}{3,5}\.?|[\x201]?[0-9](?:月|월))\x20(?P<day>[\x200-3][0-9])\x20(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])
        (?:\.(?P<frac>[0-9]{1,9}))?
        \x20(?P<rest>.*)$",
    )
    .expect("short timestamp regex")
});

/// `short-iso` / `short-iso-precise`: `2026-11-27T09:38:40+0000`.
static ISO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^
        (?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9])T(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])
        (?:\.(?P<frac>[0-9]{1,9}))?
        (?P<sign>[+-])(?P<oh>[0-9][0-9]):?(?P<om>[0-9][0-9])
        \x20(?P<rest>.*)$",
    )
    .expect("iso timestamp regex")
});

/// A `short-iso` timestamp by [`ISO`] and chrono.
fn iso_slow(text: &str) -> Option<(Timestamp, &str)> {
    let c = ISO.captures(text)?;
    let local = date_time(&c["date"], &c["hms"], c.name("frac"))?;
    let hours: i32 = c["oh"].parse().ok()?;
    let minutes: i32 = c["om"].parse().ok()?;
    let sign = if &c["sign"] == "-" { -1 } else { 1 };
    let time = Timestamp {
        local,
        offset_secs: Some(sign * (hours * 3600 + minutes * 60)),
        year_known: true,
    };
    Some((time, c.name("rest")?.as_str()))
}

/// The common `short-iso` line (`2026-11-27T09:38:40+0000 rest`) read
/// byte by byte: what [`ISO`] and chrono make of it, at a fraction of the
/// cost, on the path every line of a big journal takes. `None` for anything
/// else, even what [`ISO`] would read (a leap second, a bad date), which
/// then goes the slow way.
fn iso_fast(text: &str) -> Option<(Timestamp, &str)> {
    let b = text.as_bytes();
    let digit = |i: usize| -> Option<u32> {
        let c = *b.get(i)?;
        c.is_ascii_digit().then(|| u32::from(c - b'0'))
    };
    let two = |i: usize| Some(digit(i)? * 10 + digit(i + 1)?);
    let year = two(0)? * 100 + two(2)?;
    let punctuation = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if !punctuation.iter().all(|&(i, c)| b.get(i) == Some(&c)) {
        return None;
    }
    let (month, day) = (two(5)?, two(8)?);
    let (hour, minute, second) = (two(11)?, two(14)?, two(17)?);
    let mut i = 19;
    let mut nanos = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) && i - start < 9 {
            nanos = nanos * 10 + digit(i)?;
            i += 1;
        }
        let len = i - start;
        if len == 0 || b.get(i).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        nanos *= 10u32.pow(9 - len as u32);
    }
    let sign = match b.get(i)? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let hours = two(i + 1)?;
    i += 3;
    if b.get(i) == Some(&b':') {
        i += 1;
    }
    let minutes = two(i)?;
    i += 2;
    if b.get(i) != Some(&b' ') || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(year as i32, month, day)?;
    let time = NaiveTime::from_hms_nano_opt(hour, minute, second, nanos)?;
    let offset = (hours * 3600 + minutes * 60) as i32;
    Some((
        Timestamp {
            local: date.and_time(time),
            offset_secs: Some(sign * offset),
            year_known: true,
        },
        text.get(i + 1..)?,
    ))
}

/// `short-full`, `with-unit` and the `verbose` header:
/// `Sat 2024-06-01 12:00:04 UTC` / `Sat 2024-06-01 12:00:04.000100 CEST`.
/// The zone is what `strftime("%Z")` prints: an abbreviation, or a numeric
/// offset such as `+08` or `+0545` for zones without one.
static FULL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^
        (?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\x20
        (?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9])\x20(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])
        (?:\.(?P<frac>[0-9]{1,9}))?
        \x20(?P<zone>[A-Z][A-Za-z]{1,5}|[+-][0-9][0-9](?::?[0-9][0-9])?)
        \x20(?P<rest>.*)$",
    )
    .expect("full timestamp regex")
});

/// `short-unix`: `1717243204.000100`, seconds since the epoch.
static UNIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<secs>[0-9]{1,12})\.(?P<micros>[0-9]{6}) (?P<rest>.*)$").expect("unix regex")
});

/// `short-monotonic` `[    9.000100]` and `short-delta`
/// `[    9.500000 <    0.499900 >]`: seconds since that entry's boot. The
/// first `short-delta` line pads the missing delta with spaces, and `*`
/// marks a delta across a boot.
static MONOTONIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\[\x20*[0-9]+\.[0-9]{6}
        (?:\x20<\x20*[0-9]+\.[0-9]{6}[\x20*]>|\x20+)?
        \]\x20(?P<rest>.*)$",
    )
    .expect("monotonic regex")
});

/// Splits the timestamp off a journal line: the time it names (`None` for
/// the monotonic modes, which name no wall time) and the text after it.
/// `None` when no journal timestamp starts the line, or when one that looks
/// right names no real date: refused, never guessed.
pub(super) fn split_stamp(text: &str) -> Option<(Option<Timestamp>, &str)> {
    let first = text.bytes().next()?;
    if first == b'[' {
        let c = MONOTONIC.captures(text)?;
        return Some((None, c.name("rest")?.as_str()));
    }
    if first.is_ascii_digit() {
        if let Some((time, rest)) = iso_fast(text) {
            return Some((Some(time), rest));
        }
        if ISO.is_match(text) {
            let (time, rest) = iso_slow(text)?;
            return Some((Some(time), rest));
        }
        if let Some(c) = UNIX.captures(text) {
            let micros = c["secs"]
                .parse::<i64>()
                .ok()?
                .checked_mul(1_000_000)?
                .checked_add(c["micros"].parse().ok()?)?;
            return Some((Some(utc_from_micros(micros)?), c.name("rest")?.as_str()));
        }
        // `4月 26 19:39:33`: a CJK locale's month starts with its number.
        if !text.chars().take(4).any(|c| c == '月' || c == '월') {
            return None;
        }
    }
    if let Some((time, rest)) = split_full(text) {
        return Some((Some(time), rest));
    }
    let c = SHORT.captures(text)?;
    let month = month_number(&c["mon"])?;
    let day: u32 = c["day"].trim().parse().ok()?;
    // No year in the line: 2000 is a placeholder (a leap year, so Feb 29
    // survives) that the bundle manifest's date replaces later.
    let date = NaiveDate::from_ymd_opt(2000, month, day)?;
    let local: NaiveDateTime = date.and_time(time_of_day(&c["hms"], c.name("frac"))?);
    let time = Timestamp {
        local,
        offset_secs: None,
        year_known: false,
    };
    Some((Some(time), c.name("rest")?.as_str()))
}

/// `Sat 2024-06-01 12:00:04 UTC rest`: the `short-full` / `with-unit` /
/// `verbose` form. The offset is known only when the zone says it
/// unambiguously (see [`zone_offset`]).
pub(super) fn split_full(text: &str) -> Option<(Timestamp, &str)> {
    let c = FULL.captures(text)?;
    let time = Timestamp {
        local: date_time(&c["date"], &c["hms"], c.name("frac"))?,
        offset_secs: zone_offset(&c["zone"]),
        year_known: true,
    };
    Some((time, c.name("rest")?.as_str()))
}

/// `__REALTIME_TIMESTAMP` and `short-unix`: microseconds since the epoch, UTC.
pub(super) fn utc_from_micros(micros: i64) -> Option<Timestamp> {
    let utc = DateTime::from_timestamp_micros(micros)?;
    Some(Timestamp {
        local: utc.naive_utc(),
        offset_secs: Some(0),
        year_known: true,
    })
}

/// Seconds east of UTC for a zone as `%Z` prints it. Numeric forms are
/// exact; abbreviations only when they name one offset world-wide (`CST`,
/// `IST`, `BST`, `AST` and `MST` name several, so they stay unknown and the
/// bundle's manifest decides).
fn zone_offset(zone: &str) -> Option<i32> {
    let sign = match zone.as_bytes().first() {
        Some(b'+') => Some(1),
        Some(b'-') => Some(-1),
        _ => None,
    };
    if let Some(sign) = sign {
        let digits: String = zone[1..].chars().filter(char::is_ascii_digit).collect();
        let hours: i32 = digits.get(..2)?.parse().ok()?;
        let minutes: i32 = digits.get(2..4).map_or(Some(0), |m| m.parse().ok())?;
        return Some(sign * (hours * 3600 + minutes * 60));
    }
    const HOUR: i32 = 3600;
    Some(match zone {
        "UTC" | "GMT" | "UCT" | "Z" | "WET" => 0,
        "CET" | "WEST" | "MET" => HOUR,
        "CEST" | "EET" | "MEST" | "SAST" => 2 * HOUR,
        "EEST" | "MSK" => 3 * HOUR,
        "PKT" => 5 * HOUR,
        "HKT" | "AWST" => 8 * HOUR,
        "JST" | "KST" => 9 * HOUR,
        "AEST" => 10 * HOUR,
        "AEDT" => 11 * HOUR,
        "NZST" => 12 * HOUR,
        "NZDT" => 13 * HOUR,
        "EDT" => -4 * HOUR,
        "EST" | "CDT" => -5 * HOUR,
        "MDT" => -6 * HOUR,
        "PDT" => -7 * HOUR,
        "PST" | "AKDT" => -8 * HOUR,
        "AKST" => -9 * HOUR,
        "HST" => -10 * HOUR,
        _ => return None,
    })
}

fn date_time(date: &str, hms: &str, frac: Option<regex::Match<'_>>) -> Option<NaiveDateTime> {
    let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    Some(date.and_time(time_of_day(hms, frac)?))
}

fn time_of_day(hms: &str, frac: Option<regex::Match<'_>>) -> Option<NaiveTime> {
    let time = NaiveTime::parse_from_str(hms, "%H:%M:%S").ok()?;
    let Some(frac) = frac else {
        return Some(time);
    };
    // Right-pad to nanoseconds: `.000100` is 100 µs, `.5` is half a second.
    let digits = frac.as_str();
    let nanos: u32 = format!("{digits:0<9}").get(..9)?.parse().ok()?;
    time.with_nanosecond(nanos)
}

/// A month's `%b` abbreviation in the C locale or one of the common ones
/// (glibc's `abmon`, and `ab_alt_mon` where it differs: de, fr, es, it, pt,
/// nl, pl, ru, uk), case aside, with or without its dot; or `N月` / `N월`
/// (zh, ja, ko).
pub(super) fn month_number(abbr: &str) -> Option<u32> {
    const MONTHS: [&[&str]; 12] = [
        &["jan", "janv", "ene", "gen", "sty", "янв", "січ"],
        &["feb", "févr", "fev", "lut", "фев", "лют"],
        &["mar", "mär", "mars", "mrt", "мар", "бер"],
        &["apr", "avr", "abr", "kwi", "апр", "кві"],
        &["may", "mai", "mag", "mei", "maj", "мая", "май", "тра"],
        &["jun", "juin", "giu", "cze", "июн", "чер"],
        &["jul", "juil", "lug", "lip", "июл", "лип"],
        &["aug", "août", "ago", "sie", "авг", "сер"],
        &["sep", "sept", "set", "wrz", "сен", "вер"],
        &["oct", "okt", "ott", "out", "paź", "окт", "жов"],
        &["nov", "lis", "ноя", "лис"],
        &["dec", "dez", "déc", "dic", "gru", "дек", "гру"],
    ];
    let cjk = abbr
        .trim_start()
        .strip_suffix('月')
        .or_else(|| abbr.trim_start().strip_suffix('월'));
    if let Some(n) = cjk {
        return n.parse().ok().filter(|m| (1..=12).contains(m));
    }
    let name = abbr.strip_suffix('.').unwrap_or(abbr).to_lowercase();
    MONTHS
        .iter()
        .position(|names| names.contains(&name.as_str()))
        .map(|i| i as u32 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, micros: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, mo, d)
            .and_then(|d| d.and_hms_micro_opt(h, mi, s, micros))
            .expect("valid test date")
    }

    fn ts(local: NaiveDateTime, offset_secs: Option<i32>, year_known: bool) -> Timestamp {
        Timestamp {
            local,
            offset_secs,
            year_known,
        }
    }

    #[test]
    fn the_fast_iso_reading_agrees_with_the_regex() {
        let cases = [
            "2026-11-27T09:38:40+0000 h x: m",
            "2026-11-27T09:38:40+00:00 h x: m",
            "2026-11-27T09:38:40.5-0130 h x: m",
            "2026-11-27T09:38:40.123456789+0545 h x: m",
            "2026-11-27T09:38:40.1234567890+0000 h x: m",
            "2026-11-27T09:38:40.+0000 h x: m",
            "2026-11-27T09:38:40+00:0000 h x: m",
            "2026-11-27T09:38:40+0000",
            "2026-11-27T09:38:40+0000 ",
            "2026-02-29T09:38:40+0000 h x: m",
            "2024-02-29T09:38:40+0000 h x: m",
            "2026-13-27T09:38:40+0000 h x: m",
            "2026-11-27T24:00:00+0000 h x: m",
            "2026-11-27T23:59:60+0000 h x: m",
            "2026-11-27T09:60:40+0000 h x: m",
            "2026-11-27 09:38:40+0000 h x: m",
            "2026-11-27T09:38:40Z h x: m",
            "2026-11-27T09:38:40+0000\th x: m",
            "٢٠٢٦-11-27T09:38:40+0000 h x: m",
            "0000-01-01T00:00:00-9999 h x: m",
        ];
        for text in cases {
            if let Some(fast) = iso_fast(text) {
                assert_eq!(Some(fast), iso_slow(text), "{text}");
            }
            let slow = ISO.is_match(text).then(|| iso_slow(text)).flatten();
            let got = split_stamp(text).and_then(|(t, rest)| Some((t?, rest)));
            if ISO.is_match(text) {
                assert_eq!(got, slow, "{text}");
            }
        }
    }

    #[test]
    fn every_mode_s_timestamp() {
        let june = |micros| at(2024, 6, 1, 12, 0, 4, micros);
        let cases: Vec<(&str, Option<Timestamp>)> = vec![
            (
                "Jun 01 12:00:04 h x: m",
                Some(ts(at(2000, 6, 1, 12, 0, 4, 0), None, false)),
            ),
            (
                "Jun  1 12:00:04.000100 h x: m",
                Some(ts(at(2000, 6, 1, 12, 0, 4, 100), None, false)),
            ),
            (
                "2024-06-01T12:00:04+0000 h x: m",
                Some(ts(june(0), Some(0), true)),
            ),
            (
                "2024-06-01T12:00:04.000100-0130 h x: m",
                Some(ts(june(100), Some(-5400), true)),
            ),
            (
                "1717243204.000100 h x: m",
                Some(ts(june(100), Some(0), true)),
            ),
            (
                "Sat 2024-06-01 12:00:04 UTC h x: m",
                Some(ts(june(0), Some(0), true)),
            ),
            (
                "Sat 2024-06-01 12:00:04.000100 CEST h x: m",
                Some(ts(june(100), Some(7200), true)),
            ),
            (
                "Sat 2024-06-01 12:00:04 +08 h x: m",
                Some(ts(june(0), Some(8 * 3600), true)),
            ),
            (
                "Sat 2024-06-01 12:00:04 +0545 h x: m",
                Some(ts(june(0), Some(5 * 3600 + 45 * 60), true)),
            ),
            // Ambiguous abbreviations: the year is known, the zone is not.
            (
                "Sat 2024-06-01 17:30:04 IST h x: m",
                Some(ts(at(2024, 6, 1, 17, 30, 4, 0), None, true)),
            ),
            ("[    9.000100] h x: m", None),
            ("[    9.500000 <    0.499900 >] h x: m", None),
            ("[    7.500000                ] h x: m", None),
            ("[    2.100000 <   54.000000*>] h x: m", None),
        ];
        for (line, want) in cases {
            let (time, rest) = split_stamp(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!((time, rest), (want, "h x: m"), "{line}");
        }
    }

    #[test]
    /// journalctl's `%b` in other locales: ru_RU (case 109), zh_CN/ja_JP
    /// (`4月 26 19:39:33`), es/it (`mar 07`), fr (`déc.`); a word that is no
    /// month is refused.
    fn locale_month_names() {
        use chrono::Datelike;
        for (line, month, day) in [
            ("дек 30 02:17:31 mj ollama[1322]: x", 12, 30),
            ("4月 26 19:39:33 host systemd[1]: x", 4, 26),
            ("12月 01 19:39:33 host systemd[1]: x", 12, 1),
            ("mar 07 10:00:00 host kernel: x", 3, 7),
            ("déc. 30 02:17:31 host kernel: x", 12, 30),
            ("Okt 03 02:17:31 host kernel: x", 10, 3),
        ] {
            let (time, rest) = split_stamp(line).unwrap_or_else(|| panic!("{line}"));
            let t = time.unwrap().local;
            assert_eq!((t.month(), t.day()), (month, day), "{line}");
            assert!(rest.ends_with(": x"), "{line}");
        }
        for line in [
            "foo 30 02:17:31 host kernel: x",
            "13月 01 19:39:33 h s[1]: x",
        ] {
            assert!(split_stamp(line).is_none(), "{line}");
        }
    }

    #[test]
    fn near_misses_are_refused() {
        for line in [
            "Foo 27 09:38:40 h x: m",
            "Feb 30 09:38:40 h x: m",
            "2024-13-01T12:00:04+0000 h x: m",
            "1717243204 h x: m",
            "1717243204.0001 h x: m",
            "99999999999999.000000 h x: m",
            "Sat 2024-06-01 12:00:04 h x: m",
            "Sat 2024-02-30 12:00:04 UTC h x: m",
            "[ 9.0001] h x: m",
            "[    9.000100 <    0.4 >] h x: m",
            "[2024-06-01 12:00:04] m",
            "",
        ] {
            assert_eq!(split_stamp(line), None, "{line}");
        }
    }
}
