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
}
