//! `manifest.json`, the DTO: what `rootcause capture` writes beside its
//! outputs ([`Manifest`], one [`CommandRecord`] per command) and what
//! `bundle` reads back ([`parse_manifest`]). Here, below both, so the
//! typed context ([`super::Context`]) is built from it without naming the
//! module that reads files.

use serde::{Deserialize, Serialize};

/// `manifest.json` of a bundle: optional metadata about the capture, read
/// here and written by `rootcause capture` (docs/capture.md).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct Manifest {
    pub host: Option<String>,
    /// RFC 3339 with the host's offset: `2026-11-27T09:41:12+00:00`.
    pub captured_at: Option<String>,
    /// IANA name (`Europe/Berlin`, `UTC`): the zone of every zone-less time.
    pub timezone: Option<String>,
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootcause_version: Option<String>,
    /// The `--unit`s the capture was asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
    /// Every command the capture ran, in order, with its outcome.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandRecord>,
    /// Why the file could not be read, when it could not: the analysis goes
    /// on and the report says so.
    #[serde(skip)]
    pub problem: Option<String>,
}

/// One command of a capture and what came of it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct CommandRecord {
    /// The bundle member it wrote; `None` when it wrote nothing.
    pub file: Option<String>,
    /// As a person would type it.
    pub command: String,
    pub status: CommandStatus,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    pub bytes: u64,
    /// What went wrong (the tool's stderr, the timeout), when something did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The output was longer than a member may be, and was cut (`detail`
    /// says where): a gap even when the command succeeded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// How a capture command ended. Anything but `ok` is a gap in the bundle.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CommandStatus {
    Ok,
    /// It ran and exited with a status that means failure.
    Failed,
    /// The program is not installed.
    Missing,
    /// Killed after the capture's timeout.
    Timeout,
    /// It could not be started or read (permissions, I/O).
    Error,
    /// Not run: there was nothing to ask it (no unit named or found).
    Skipped,
    /// A status this version does not know (a newer capture).
    #[serde(other)]
    Unknown,
}

impl CommandStatus {
    pub fn name(self) -> &'static str {
        match self {
            CommandStatus::Ok => "ok",
            CommandStatus::Failed => "failed",
            CommandStatus::Missing => "missing",
            CommandStatus::Timeout => "timeout",
            CommandStatus::Error => "error",
            CommandStatus::Skipped => "skipped",
            CommandStatus::Unknown => "unknown",
        }
    }
}

/// A manifest is optional metadata: a broken one is reported as unusable,
/// not fatal to the analysis of the logs beside it.
pub fn parse_manifest(bytes: &[u8]) -> Manifest {
    serde_json::from_slice(bytes).unwrap_or_else(|e| Manifest {
        problem: Some(format!("manifest.json is not valid: {e}")),
        ..Manifest::default()
    })
}
