//! How times are written: for people in the bundle's zone with its offset
//! (`2025-06-14 03:12:01 +02:00`, one width for every line), for machines in
//! RFC 3339 UTC.

use chrono::{Duration, NaiveDateTime, SecondsFormat, TimeZone, Utc};

use crate::correlate::{TimeFrame, YearBasis};
use crate::model::Timestamp;

fn utc(t: &Timestamp) -> NaiveDateTime {
    t.local - Duration::seconds(i64::from(t.offset_secs.unwrap_or(0)))
}

/// The time in the frame's zone (UTC without one). A year that could not be
/// known is shown as `????`.
pub fn display_time(t: &Timestamp, frame: &TimeFrame) -> String {
    let utc = utc(t);
    let text = match frame.zone {
        Some(zone) => zone
            .from_utc_datetime(&utc)
            .format("%Y-%m-%d %H:%M:%S %:z")
            .to_string(),
        None => format!("{} +00:00", utc.format("%Y-%m-%d %H:%M:%S")),
    };
    if t.year_known {
        text
    } else {
        format!("????{}", text.get(4..).unwrap_or(""))
    }
}

/// `2026-11-27T09:38:52Z`, with the fraction when there is one; `None` when
/// the year is unknown.
pub fn rfc3339(t: &Timestamp) -> Option<String> {
    t.year_known.then(|| {
        Utc.from_utc_datetime(&utc(t))
            .to_rfc3339_opts(SecondsFormat::AutoSi, true)
    })
}

/// One sentence on how the times were read: the zone and where years came
/// from.
pub fn describe_frame(frame: &TimeFrame) -> String {
    let zone = match (frame.zone, frame.zoneless) {
        (Some(z), _) => format!("Times are in {} (the bundle's zone).", z.name()),
        (None, true) => {
            "Times are in UTC; no zone was known, so times without one were read as UTC.".to_owned()
        }
        (None, false) => "Times are in UTC.".to_owned(),
    };
    let year = match frame.year {
        YearBasis::NotNeeded => "",
        YearBasis::Capture => " Lines without a year are dated by the capture time.",
        YearBasis::LatestDatedLine => {
            " Lines without a year are dated by the latest line that has one."
        }
        YearBasis::Unknown => " Lines without a year could not be dated (shown as ????).",
    };
    format!("{zone}{year}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(local: &str, offset: Option<i32>, year_known: bool) -> Timestamp {
        Timestamp {
            local: NaiveDateTime::parse_from_str(local, "%Y-%m-%d %H:%M:%S%.f").expect("time"),
            offset_secs: offset,
            year_known,
        }
    }

    #[test]
    fn people_see_the_bundle_zone_machines_see_utc() {
        let berlin = TimeFrame {
            zone: Some(chrono_tz::Europe::Berlin),
            ..TimeFrame::default()
        };
        let utc_frame = TimeFrame::default();
        let cases = [
            (
                t("2025-06-14 01:12:01", Some(0), true),
                &berlin,
                "2025-06-14 03:12:01 +02:00",
                Some("2025-06-14T01:12:01Z"),
            ),
            (
                t("2025-06-14 03:12:01.250", Some(7200), true),
                &utc_frame,
                "2025-06-14 01:12:01 +00:00",
                Some("2025-06-14T01:12:01.250Z"),
            ),
            (
                t("2000-11-27 09:38:52", None, false),
                &utc_frame,
                "????-11-27 09:38:52 +00:00",
                None,
            ),
        ];
        for (time, frame, shown, machine) in cases {
            assert_eq!(display_time(&time, frame), shown);
            assert_eq!(rfc3339(&time).as_deref(), machine);
        }
    }
}
