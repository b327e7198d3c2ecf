//! What a bundle says about its own capture, typed: the host, when it was
//! captured and in which zone (which date and place every zone-less or
//! year-less log time), and what the capture could not collect (gaps).
//!
//! Built from the `manifest.json` DTO ([`Manifest`], in [`manifest`]); pure, so
//! the analysing machine's clock and zone never enter a report.

mod manifest;

use chrono::{DateTime, FixedOffset};
use chrono_tz::Tz;

use crate::source::{MAX_LINE, SourceMap};

pub use manifest::{CommandRecord, CommandStatus, Manifest, parse_manifest};

/// Everything known about the capture of one analysis. Empty for a paste or
/// loose files: their times are then read as UTC.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    pub host: Option<String>,
    pub captured_at: Option<DateTime<FixedOffset>>,
    /// The manifest's IANA zone.
    pub zone: Option<Tz>,
    /// Commands of the capture that produced nothing usable, in capture order.
    pub gaps: Vec<Gap>,
    /// Problems with the manifest itself (unreadable, unknown zone, bad time).
    pub notes: Vec<String>,
    /// The bundle's name (a folder or tar file name, never a path), for
    /// outputs that name their source (`--output ndjson`). Not in reports.
    pub bundle: Option<String>,
}

/// A source the capture meant to collect and could not.
#[derive(Debug, Clone, PartialEq)]
pub struct Gap {
    /// The bundle member it would have written, or did write in part.
    pub file: Option<String>,
    pub command: String,
    pub status: CommandStatus,
    pub exit_code: Option<i32>,
    pub detail: Option<String>,
    /// The output was cut at the capture's size limit.
    pub truncated: bool,
}

impl Gap {
    /// `nvidia-smi -q -x: missing (nvidia-smi: command not found)`.
    pub fn describe(&self) -> String {
        let status = if self.truncated && self.status == CommandStatus::Ok {
            "truncated"
        } else {
            self.status.name()
        };
        let mut s = format!("{}: {status}", self.command);
        if let (CommandStatus::Failed, Some(code)) = (self.status, self.exit_code) {
            s.push_str(&format!(" with exit status {code}"));
        }
        if let Some(d) = self.detail.as_deref().filter(|d| !d.is_empty()) {
            s.push_str(&format!(" ({})", one_line(d)));
        }
        s
    }
}

impl Context {
    pub fn from_manifest(m: &Manifest) -> Context {
        let mut notes: Vec<String> = m.problem.iter().cloned().collect();
        let captured_at = m.captured_at.as_deref().and_then(|t| {
            let parsed = DateTime::parse_from_rfc3339(t);
            if parsed.is_err() {
                notes.push(format!(
                    "manifest.json: captured_at `{t}` is not an RFC 3339 time; year-less times are dated from the logs"
                ));
            }
            parsed.ok()
        });
        let zone = match m.timezone.as_deref() {
            Some(name) => {
                let zone = name.parse::<Tz>().ok();
                if zone.is_none() {
                    notes.push(format!(
                        "manifest.json: unknown time zone `{name}`; times without a zone are read as UTC"
                    ));
                }
                zone
            }
            None if m.problem.is_none() => {
                notes.push(
                    "manifest.json names no timezone; times without a zone are read as UTC"
                        .to_owned(),
                );
                None
            }
            None => None,
        };
        let gaps = m
            .commands
            .iter()
            .filter(|c| c.status != CommandStatus::Ok || c.truncated)
            .map(|c| Gap {
                file: c.file.clone(),
                command: c.command.clone(),
                status: c.status,
                exit_code: c.exit_code,
                detail: c.detail.clone(),
                truncated: c.truncated,
            })
            .collect();
        Context {
            host: m.host.clone(),
            captured_at,
            zone,
            gaps,
            notes,
            bundle: None,
        }
    }
}

/// What could not be read of the inputs themselves, as gaps after the
/// capture's: a file not read (a link out of the bundle, a dangling link, an
/// unreadable file, a device), a read that stopped early (a truncated
/// `.gz`: what came before it is analysed), lines cut at [`MAX_LINE`].
pub fn input_gaps(sources: &SourceMap) -> Vec<Gap> {
    let gap = |name: &str, status, detail: String, truncated| Gap {
        file: Some(name.to_owned()),
        command: format!("read {name}"),
        status,
        exit_code: None,
        detail: Some(detail),
        truncated,
    };
    let mut gaps: Vec<Gap> = sources
        .skipped()
        .iter()
        .map(|(name, why)| gap(name, CommandStatus::Error, why.clone(), false))
        .collect();
    for (_, s) in sources.iter() {
        let Some(read) = s.read_summary() else {
            continue;
        };
        if let Some(e) = &read.error {
            gaps.push(gap(
                &s.name,
                CommandStatus::Error,
                format!("stopped after line {}: {e}", read.lines),
                false,
            ));
        }
        if read.cut_lines > 0 {
            gaps.push(gap(
                &s.name,
                CommandStatus::Ok,
                format!(
                    "{} line{} longer than {} MiB cut to it; {} bytes not read",
                    read.cut_lines,
                    if read.cut_lines == 1 { "" } else { "s" },
                    MAX_LINE >> 20,
                    read.cut_bytes
                ),
                true,
            ));
        }
    }
    gaps
}

/// Tool output may span lines; a gap is shown on one.
fn one_line(text: &str) -> String {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let first = first.trim();
    match first.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &first[..cut]),
        None => first.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_manifest;
    use super::*;

    #[test]
    fn zone_time_and_gaps_are_typed_and_problems_become_notes() {
        let m = parse_manifest(
            br#"{"host":"h","captured_at":"2025-06-14T03:19:40+02:00","timezone":"Europe/Berlin",
               "commands":[{"file":"nvidia-smi.txt","command":"nvidia-smi","status":"ok","exit_code":0,"duration_ms":3,"bytes":10},
                           {"file":null,"command":"nvidia-smi -q -x","status":"timeout","exit_code":null,"duration_ms":10000,"bytes":0,"detail":"timed out after 10 s"},
                           {"file":"x","command":"y","status":"brand-new","exit_code":null,"duration_ms":0,"bytes":0}]}"#,
        );
        let c = Context::from_manifest(&m);
        assert_eq!(c.zone, Some(chrono_tz::Europe::Berlin));
        assert_eq!(
            c.captured_at.map(|t| t.to_rfc3339()),
            Some("2025-06-14T03:19:40+02:00".to_owned())
        );
        assert!(c.notes.is_empty(), "{:?}", c.notes);
        let gaps: Vec<String> = c.gaps.iter().map(Gap::describe).collect();
        assert_eq!(
            gaps,
            [
                "nvidia-smi -q -x: timeout (timed out after 10 s)",
                "y: unknown"
            ]
        );

        let bad = Context::from_manifest(&parse_manifest(
            br#"{"timezone":"Mars/Olympus","captured_at":"yesterday"}"#,
        ));
        assert_eq!((bad.zone, bad.captured_at), (None, None));
        assert_eq!(bad.notes.len(), 2, "{:?}", bad.notes);
        let broken = Context::from_manifest(&parse_manifest(b"{not json"));
        assert_eq!(broken.notes.len(), 1);
        assert!(broken.notes[0].starts_with("manifest.json is not valid"));
    }

    #[test]
    fn a_failed_command_names_its_exit_status_and_first_line() {
        let gap = Gap {
            file: Some("systemctl-status-x.service.txt".into()),
            command: "systemctl status x.service".into(),
            status: CommandStatus::Failed,
            exit_code: Some(4),
            detail: Some("\nUnit x.service could not be found.\nmore".into()),
            truncated: false,
        };
        assert_eq!(
            gap.describe(),
            "systemctl status x.service: failed with exit status 4 (Unit x.service could not be found.)"
        );
    }
}
