//! The capture's own facts (host, time, zone) and its `manifest.json`: the
//! only place rootcause reads the clock and the host's zone, which the
//! analysis later reads from the manifest instead.

use std::fs;
use std::path::Path;
use std::time::SystemTime;

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;

use crate::context::{CommandRecord, Manifest};

/// Where and when the capture runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    pub name: Option<String>,
    /// IANA name; `None` when the host's zone could not be told.
    pub zone: Option<Tz>,
    pub now: DateTime<Utc>,
}

impl Host {
    pub fn detect(proc_root: &Path) -> Host {
        Host {
            name: hostname(proc_root),
            zone: zone(),
            now: DateTime::<Utc>::from(SystemTime::now()),
        }
    }

    /// RFC 3339 in the host's zone: `2026-11-27T09:41:12+00:00`.
    pub fn captured_at(&self) -> String {
        match self.zone {
            Some(z) => self
                .now
                .with_timezone(&z)
                .to_rfc3339_opts(SecondsFormat::Secs, false),
            None => self.now.to_rfc3339_opts(SecondsFormat::Secs, false),
        }
    }
}

fn hostname(proc_root: &Path) -> Option<String> {
    [
        proc_root.join("sys/kernel/hostname"),
        "/etc/hostname".into(),
    ]
    .iter()
    .filter_map(|p| fs::read_to_string(p).ok())
    .map(|s| s.trim().to_owned())
    .find(|s| !s.is_empty())
}

/// The zone of the host's wall clock, as the logs were written in it: `TZ`
/// when it names an IANA zone, else the `/etc/localtime` link, else
/// `/etc/timezone`.
fn zone() -> Option<Tz> {
    let from_env = std::env::var("TZ")
        .ok()
        .map(|tz| tz.trim_start_matches(':').to_owned());
    let from_link = fs::read_link("/etc/localtime").ok().and_then(|p| {
        let p = p.to_string_lossy().into_owned();
        p.split_once("zoneinfo/").map(|(_, z)| z.to_owned())
    });
    let from_file = fs::read_to_string("/etc/timezone")
        .ok()
        .map(|s| s.trim().to_owned());
    [from_env, from_link, from_file]
        .into_iter()
        .flatten()
        .find_map(|name| name.parse::<Tz>().ok())
}

/// The manifest of a capture: who, when, where, and every command's outcome.
pub fn build(
    host: &Host,
    units: &[String],
    since: &str,
    description: Option<&str>,
    redacted: bool,
    commands: Vec<CommandRecord>,
) -> Manifest {
    Manifest {
        host: host.name.clone(),
        captured_at: Some(host.captured_at()),
        timezone: host.zone.map(|z| z.name().to_owned()),
        description: description.map(str::to_owned),
        rootcause_version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        units: units.to_vec(),
        since: Some(since.to_owned()),
        redacted,
        commands,
        problem: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capture_time_is_written_in_the_hosts_zone() {
        let host = Host {
            name: Some("h".into()),
            zone: Some(chrono_tz::Europe::Berlin),
            now: DateTime::parse_from_rfc3339("2025-06-14T01:19:40Z")
                .expect("time")
                .with_timezone(&Utc),
        };
        assert_eq!(host.captured_at(), "2025-06-14T03:19:40+02:00");
        let utc = Host { zone: None, ..host };
        assert_eq!(utc.captured_at(), "2025-06-14T01:19:40+00:00");
    }
}
