//! Timestamps as the inputs print them: a local wall time, with the zone only
//! when the format carries one.

use chrono::NaiveDateTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    pub local: NaiveDateTime,
    /// Seconds east of UTC. `None` for zone-less formats (SGLang,
    /// `-o short`); the bundle's manifest supplies the zone later.
    pub offset_secs: Option<i32>,
    /// False when the format has no year (`-o short`, vLLM) and one was assumed.
    pub year_known: bool,
}

impl Timestamp {
    /// Seconds since the epoch, in UTC when the zone is known and in the
    /// printed local time otherwise: comparable within one host's inputs.
    pub fn utc_seconds(&self) -> i64 {
        self.local.and_utc().timestamp() - i64::from(self.offset_secs.unwrap_or(0))
    }

    /// Seconds from this time to `later`, a local wall clock printed with
    /// its year (systemctl's `since Tue 2020-12-01 10:18:15 UTC`). When
    /// this time's format had no year (`-o short`), `later` is read in the
    /// year assumed for it, so that both are on the same calendar.
    pub fn secs_to(&self, later: chrono::NaiveDateTime) -> Option<i64> {
        use chrono::Datelike;
        let later = if self.year_known {
            later
        } else {
            later.with_year(self.local.year())?
        };
        Some((later - self.local).num_seconds())
    }
}
