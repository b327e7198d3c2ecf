//! One frame for every time of an incident: a zone-less local time (SGLang,
//! `-o short`, nvidia-smi's date line) gets the bundle's zone, a year-less
//! one (`-o short`, syslog) the capture's year. The bundle's manifest
//! decides, never the analysing machine's clock or zone.

use chrono::{DateTime, Datelike, Duration, FixedOffset, NaiveDateTime, Offset, TimeZone};
use chrono_tz::Tz;

use crate::context::Context;
use crate::model::{Facts, Timestamp};

/// What the manifest says about time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Clock {
    pub zone: Option<Tz>,
    pub captured_at: Option<DateTime<FixedOffset>>,
}

/// Where the year of year-less times came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum YearBasis {
    /// Every time carried its year.
    #[default]
    NotNeeded,
    /// The manifest's capture time.
    Capture,
    /// No capture time: the latest line that carried a year.
    LatestDatedLine,
    /// Nothing to date them by: they keep a placeholder year.
    Unknown,
}

/// How the times of one incident were read, so a reader knows what was
/// assumed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TimeFrame {
    /// The zone of zone-less times; `None`: they were read as UTC.
    pub zone: Option<Tz>,
    /// Some input time carried no zone.
    pub zoneless: bool,
    pub year: YearBasis,
    /// The capture time in the frame, when the manifest gave one.
    pub captured_at: Option<Timestamp>,
}

impl Clock {
    pub fn from_context(context: &Context) -> Clock {
        Clock {
            zone: context.zone,
            captured_at: context.captured_at,
        }
    }

    /// The capture time as the host's wall clock showed it.
    fn capture_local(&self) -> Option<NaiveDateTime> {
        let at = self.captured_at?;
        Some(match self.zone {
            Some(zone) => at.with_timezone(&zone).naive_local(),
            None => at.naive_local(),
        })
    }

    /// The capture time as a resolved timestamp.
    fn capture_stamp(&self) -> Option<Timestamp> {
        let at = self.captured_at?;
        Some(Timestamp {
            local: at.naive_local(),
            offset_secs: Some(at.offset().local_minus_utc()),
            year_known: true,
        })
    }

    /// The time in the frame: a year from `reference` when it had none, an
    /// offset from the zone when it had none.
    pub fn resolve(&self, t: Timestamp, reference: Option<NaiveDateTime>) -> Timestamp {
        let mut t = t;
        if !t.year_known {
            if let Some(local) = reference.and_then(|r| with_year(t.local, r)) {
                t.local = local;
                t.year_known = true;
            }
        }
        if t.offset_secs.is_none() {
            if let Some(zone) = self.zone {
                t.offset_secs = Some(offset_at(zone, t.local));
            }
        }
        t
    }
}

/// Resolves every time in `facts` in place and says how.
pub fn normalise(facts: &mut Facts, clock: &Clock) -> TimeFrame {
    let mut times: Vec<&mut Timestamp> = Vec::new();
    times.extend(facts.journal.iter_mut().filter_map(|e| e.time.as_mut()));
    times.extend(
        facts
            .server_events
            .iter_mut()
            .filter_map(|e| e.time.as_mut()),
    );
    times.extend(facts.smi_headers.iter_mut().filter_map(|h| h.time.as_mut()));
    times.extend(facts.line_times.iter_mut().map(|(_, t)| t));
    times.extend(
        facts
            .kernel_events
            .iter_mut()
            .filter_map(|e| e.time.wall.as_mut()),
    );

    let zoneless = times.iter().any(|t| t.offset_secs.is_none());
    let yearless = times.iter().any(|t| !t.year_known);
    let (reference, year) = if !yearless {
        (None, YearBasis::NotNeeded)
    } else if let Some(r) = clock.capture_local() {
        (Some(r), YearBasis::Capture)
    } else {
        let latest = times
            .iter()
            .filter(|t| t.year_known)
            .max_by_key(|t| t.utc_seconds())
            .map(|t| t.local);
        match latest {
            Some(r) => (Some(r), YearBasis::LatestDatedLine),
            None => (None, YearBasis::Unknown),
        }
    };
    for t in times {
        *t = clock.resolve(*t, reference);
    }
    TimeFrame {
        zone: clock.zone,
        zoneless,
        year,
        captured_at: clock.capture_stamp(),
    }
}

/// The year that puts `local` at or before `reference` (a day of slack for
/// clocks that disagree): `Dec 31` read on `Jan 2` is last year.
fn with_year(local: NaiveDateTime, reference: NaiveDateTime) -> Option<NaiveDateTime> {
    let year = reference.year();
    match local.with_year(year) {
        Some(t) if t <= reference + Duration::days(1) => Some(t),
        _ => local.with_year(year - 1),
    }
}

/// The zone's offset at a wall time. An hour that occurs twice (autumn)
/// takes its first occurrence; one that never occurs (spring) the offset
/// in force before the jump.
fn offset_at(zone: Tz, local: NaiveDateTime) -> i32 {
    let offset = match zone.offset_from_local_datetime(&local) {
        chrono::LocalResult::Single(o) => o,
        chrono::LocalResult::Ambiguous(first, _) => first,
        chrono::LocalResult::None => zone
            .offset_from_local_datetime(&(local - Duration::hours(1)))
            .earliest()
            .unwrap_or_else(|| zone.offset_from_utc_datetime(&local)),
    };
    offset.fix().local_minus_utc()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JournalEntry;
    use crate::source::{SourceId, Span};

    fn local(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").expect("time")
    }

    fn stamp(text: &str, offset: Option<i32>, year_known: bool) -> Timestamp {
        Timestamp {
            local: local(text),
            offset_secs: offset,
            year_known,
        }
    }

    fn entry(time: Timestamp) -> JournalEntry {
        JournalEntry {
            time: Some(time),
            host: None,
            identifier: "x".into(),
            pid: None,
            unit: None,
            cmdline: None,
            message: String::new(),
            span: Span {
                source: SourceId(0),
                line: 1,
            },
        }
    }

    fn clock(zone: Option<Tz>, at: Option<&str>) -> Clock {
        Clock {
            zone,
            captured_at: at.map(|a| DateTime::parse_from_rfc3339(a).expect("rfc3339")),
        }
    }

    #[test]
    fn zone_and_capture_year_resolve_each_kind_of_time() {
        let berlin = clock(
            Some(chrono_tz::Europe::Berlin),
            Some("2025-06-14T03:19:40+02:00"),
        );
        let cases = [
            // (input, expected) — summer: +02:00.
            (
                stamp("2000-06-14 03:12:01", None, false),
                stamp("2025-06-14 03:12:01", Some(7200), true),
            ),
            // Winter in the same zone: +01:00.
            (
                stamp("2025-01-10 08:00:00", None, true),
                stamp("2025-01-10 08:00:00", Some(3600), true),
            ),
            // A time that carries its offset keeps it.
            (
                stamp("2025-06-14 01:00:00", Some(0), true),
                stamp("2025-06-14 01:00:00", Some(0), true),
            ),
            // Dec 31 in a June capture: still this year (it is before June).
            (
                stamp("2000-12-31 23:59:59", None, false),
                stamp("2024-12-31 23:59:59", Some(3600), true),
            ),
        ];
        for (input, expected) in cases {
            let mut facts = Facts::default();
            facts.journal.push(entry(input));
            let frame = normalise(&mut facts, &berlin);
            assert_eq!(facts.journal[0].time, Some(expected), "{input:?}");
            assert!(frame.zone.is_some());
        }
    }

    #[test]
    fn a_new_year_capture_dates_december_lines_to_last_year() {
        let c = clock(Some(chrono_tz::UTC), Some("2026-01-02T00:10:00+00:00"));
        let mut facts = Facts::default();
        facts
            .journal
            .push(entry(stamp("2000-12-31 23:50:00", None, false)));
        facts
            .journal
            .push(entry(stamp("2000-01-01 00:05:00", None, false)));
        let frame = normalise(&mut facts, &c);
        assert_eq!(frame.year, YearBasis::Capture);
        let years: Vec<i32> = facts
            .journal
            .iter()
            .map(|e| e.time.expect("time").local.year())
            .collect();
        assert_eq!(years, [2025, 2026]);
    }

    #[test]
    fn without_a_manifest_the_latest_dated_line_gives_the_year_and_utc_is_assumed() {
        let mut facts = Facts::default();
        facts
            .journal
            .push(entry(stamp("2000-11-27 09:38:52", None, false)));
        facts.line_times.push((
            Span {
                source: SourceId(1),
                line: 1,
            },
            stamp("2026-11-27 09:41:12", None, true),
        ));
        let frame = normalise(&mut facts, &Clock::default());
        assert_eq!(frame.year, YearBasis::LatestDatedLine);
        assert_eq!((frame.zone, frame.zoneless), (None, true));
        assert_eq!(
            facts.journal[0].time,
            Some(stamp("2026-11-27 09:38:52", None, true))
        );

        let mut alone = Facts::default();
        alone
            .journal
            .push(entry(stamp("2000-11-27 09:38:52", None, false)));
        assert_eq!(
            normalise(&mut alone, &Clock::default()).year,
            YearBasis::Unknown
        );
        assert!(!alone.journal[0].time.expect("time").year_known);
    }

    #[test]
    fn daylight_saving_edges_take_a_defined_offset() {
        let z = chrono_tz::Europe::Berlin;
        // 02:30 on 2025-10-26 happens twice: the first (summer, +2).
        assert_eq!(offset_at(z, local("2025-10-26 02:30:00")), 7200);
        // 02:30 on 2025-03-30 never happens: the offset before the jump (+1).
        assert_eq!(offset_at(z, local("2025-03-30 02:30:00")), 3600);
    }
}
