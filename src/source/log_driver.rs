//! Container log drivers' records, read as the line a person sees.
//!
//! Docker's default `json-file` driver keeps each line a container printed
//! as one JSON record (`/var/lib/docker/containers/<id>/<id>-json.log`):
//!
//! ```text
//! {"log":"Log line is here\n","stream":"stdout","time":"2019-01-01T11:11:11.111111111Z"}
//! ```
//!
//! (docs.docker.com/engine/logging/drivers/json-file; `attrs` follows when
//! `--log-opt labels/env` is set). The line inside is JSON-escaped: quotes,
//! backslashes, control bytes and, Go's encoder being HTML-safe, `<`, `>`
//! and `&` (`\u003e`) — so no anchor or pattern written for the program's
//! own words would match the record. [`docker_json_file`] turns a record into
//! what `docker logs -t` prints for it, `<time> <line>`, before anything
//! else looks at the line: the anchors, the frame peeler and the readers then
//! see a container log (`ingest`'s container-log format), as they do for
//! `docker logs -t` and the CRI's files. The span still names the record's
//! line of the file.
//!
//! A line longer than 16 KiB is split by Docker into records whose `log`
//! does not end in `\n`; each is read as a line of its own.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

/// The first bytes of every json-file record: `log` is always the first
/// field Docker writes.
const HEAD: &str = r#"{"log":""#;

#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    log: Cow<'a, str>,
    #[serde(borrow, default)]
    time: Option<Cow<'a, str>>,
    #[serde(default, rename = "stream")]
    _stream: Option<IgnoredAny>,
    #[serde(default, rename = "attrs")]
    _attrs: Option<IgnoredAny>,
}

/// `raw` as `docker logs -t` prints it, when it is a json-file record;
/// `None` for any other line (a record cut short or mangled is left as it
/// is: it is still cited and counted, never lost).
pub(super) fn docker_json_file(raw: &str) -> Option<String> {
    if !raw.starts_with(HEAD) {
        return None;
    }
    let record: Record<'_> = serde_json::from_str(raw.trim_end()).ok()?;
    let log = record.log.strip_suffix('\n').unwrap_or(&record.log);
    let log = log.strip_suffix('\r').unwrap_or(log);
    Some(match record.time {
        Some(time) => format!("{time} {log}"),
        None => log.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::docker_json_file;

    #[test]
    fn a_record_reads_as_docker_logs_t_prints_it() {
        // The example of Docker's json-file driver page.
        assert_eq!(
            docker_json_file(
                r#"{"log":"Log line is here\n","stream":"stdout","time":"2019-01-01T11:11:11.111111111Z"}"#
            )
            .as_deref(),
            Some("2019-01-01T11:11:11.111111111Z Log line is here")
        );
        // Grafana Loki's docker stage example: fewer fraction digits.
        assert_eq!(
            docker_json_file(
                r#"{"log":"log message\n","stream":"stderr","time":"2019-04-30T02:12:41.8443515Z"}"#
            )
            .as_deref(),
            Some("2019-04-30T02:12:41.8443515Z log message")
        );
    }

    #[test]
    fn escapes_are_decoded_and_attrs_skipped() {
        // ollama's logfmt inside a record: quotes escaped, `>` HTML-escaped
        // by Go's encoder, an ANSI colour as \u001b (clean_line removes it).
        let line = r#"{"log":"\u001b[32mtime=2025-01-05T16:43:46.099+02:00 level=INFO msg=\"inference compute\" a=\u003e1\n","stream":"stderr","attrs":{"tag":"ollama"},"time":"2026-11-01T00:00:00.027485123Z"}"#;
        assert_eq!(
            docker_json_file(line).as_deref(),
            Some(
                "2026-11-01T00:00:00.027485123Z \u{1b}[32mtime=2025-01-05T16:43:46.099+02:00 level=INFO msg=\"inference compute\" a=>1"
            )
        );
    }

    #[test]
    fn other_lines_and_broken_records_are_left_alone() {
        for line in [
            "",
            "{}",
            r#"{"MESSAGE":"x","_PID":"1"}"#,
            r#"{"log":"cut short\n","stream":"std"#,
            r#"{"log":"x\n","stream":"stdout","time":"2019-01-01T11:11:11Z"} trailing"#,
            "2019-01-01T11:11:11.111111111Z Log line is here",
        ] {
            assert_eq!(docker_json_file(line), None, "{line}");
        }
        // A split long line: its first record has no newline.
        assert_eq!(
            docker_json_file(
                r#"{"log":"first half","stream":"stdout","time":"2019-01-01T11:11:11Z"}"#
            )
            .as_deref(),
            Some("2019-01-01T11:11:11Z first half")
        );
    }
}
