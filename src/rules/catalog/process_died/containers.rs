//! A container's death as `docker inspect` records it
//! (`model::ContainerState`): exited with a non-zero exit code, `dead`,
//! OOM-killed, or with the daemon's `State.Error`. How (the exit code, read
//! through the signal table when it is 128 + N), when (`FinishedAt`, as
//! printed), and its last words when the paste has its logs. A death a
//! catalog row already reads on one of the record's lines (`"OOMKilled":
//! true`, `"ExitCode": 137`, an `"Error"` whose text is a row's line) is
//! that row's, or its rule's; a `State.Error` the rows read only once its
//! JSON string is decoded (escaped quotes, `\n` between the runtime's
//! chain and `nvidia-container-cli`'s words) is asked through the same
//! rows, and the death takes the row's category and fix.

use super::records::preceding_error;
use super::{Death, is_crash, is_stop, status_of};
use crate::catalogs::Row;
use crate::correlate::{Incident, exit_meaning};
use crate::model::ContainerState;
use crate::source::Span;

/// Docker's zero time: never started, or not finished.
const NEVER: &str = "0001-01-01T00:00:00Z";

/// Every container record that is a death no catalog row on its lines
/// explains.
pub(super) fn container_deaths(incident: &Incident) -> Vec<Death> {
    incident
        .facts
        .containers
        .iter()
        .filter(|r| !read_by_a_row(incident, r))
        .filter_map(|r| death(incident, r))
        .collect()
}

/// Whether a catalog row with a category reads one of the record's lines:
/// that row's finding (or its rule's) tells this death.
fn read_by_a_row(incident: &Incident, r: &ContainerState) -> bool {
    incident.known.iter().any(|k| {
        k.hit.row.is_some_and(|row| row.category.is_some())
            && r.holds(incident.facts.messages[k.message].span)
    })
}

/// The record's death, if it is one.
fn death(incident: &Incident, r: &ContainerState) -> Option<Death> {
    let oom = r.oom_killed == Some(true);
    let dead = r.dead == Some(true) || r.status.as_deref() == Some("dead");
    let error = r.error.as_deref().filter(|e| !e.trim().is_empty());
    let exited = r.running != Some(true) && r.status.as_deref() != Some("running");
    let code = r.exit_code.filter(|c| exited && *c != 0);
    // 128 + N: killed by signal N, as a shell and the runtime report it.
    let signal = code
        .and_then(|c| u32::try_from(c - 128).ok())
        .filter(|n| (1..=31).contains(n));
    let status = signal.map(status_of);
    if status.as_deref().is_some_and(is_stop) && !oom && !dead && error.is_none() {
        // Stopped (`docker stop`'s SIGTERM, Ctrl-C): no death.
        return None;
    }
    if !(oom || dead || error.is_some() || code.is_some()) {
        return None;
    }
    let cause = error.and_then(row_of);
    let mut how = Vec::new();
    if let Some(c) = code {
        let meaning = status
            .as_deref()
            .and_then(|s| exit_meaning("killed", s))
            .map(|m| format!("exit code {c} = 128 + {}: {m}", c - 128));
        how.push(meaning.unwrap_or_else(|| format!("exit code {c}")));
    }
    if oom {
        how.push("the runtime records it OOMKilled".to_owned());
    }
    if dead {
        how.push("the daemon marks it dead (it could not be stopped or removed)".to_owned());
    }
    if let Some(row) = cause {
        how.push(format!("the daemon's error: {}", row.title));
    } else if error.is_some() {
        how.push("the daemon could not start it".to_owned());
    }
    let finished = r.finished_at.as_deref().filter(|t| *t != NEVER);
    let mut how = how.join("; ");
    if let Some(t) = finished {
        how.push_str(&format!(" (FinishedAt {t})"));
    }
    let span = [
        error.and(r.line_of("Error")),
        oom.then(|| r.line_of("OOMKilled")).flatten(),
        code.and(r.line_of("ExitCode")),
        r.line_of("Status"),
    ]
    .into_iter()
    .flatten()
    .next()
    .unwrap_or(r.span);
    // A zero time says nothing.
    let started = r.started_at.as_deref().is_some_and(|t| t != NEVER);
    let records: Vec<(Span, String, Option<u32>)> = [
        ("ExitCode", "the exit code it ended with", code.is_some()),
        ("FinishedAt", "when it ended", finished.is_some()),
        ("StartedAt", "when its last run began", started),
    ]
    .into_iter()
    .filter(|(_, _, shown)| *shown)
    .filter_map(|(key, note, _)| Some((r.line_of(key)?, note.to_owned(), None)))
    .filter(|(s, _, _)| *s != span)
    .collect();
    let who = match r.name.as_deref() {
        Some(n) => format!("container {}", n.trim_start_matches('/')),
        None => match r.id.as_deref() {
            Some(id) => format!("container {}", id.chars().take(12).collect::<String>()),
            None => "the container".to_owned(),
        },
    };
    let crashed = status.as_deref().is_some_and(is_crash) || (signal.is_none() && code.is_some());
    Some(Death {
        span,
        how,
        unit: None,
        pid: None,
        signalled: true,
        signal,
        records,
        last_words: last_words(incident, r),
        crashed: crashed || cause.is_some() || (error.is_some() && !oom),
        verdicts: Vec::new(),
        said: error.map(str::to_owned),
        who: Some(who),
        cause,
        unit_failed: false,
    })
}

/// Whether a death's `who` is a container's, as [`death`] names it.
pub(super) fn is_container(who: &str) -> bool {
    who.starts_with("container ") || who == "the container"
}

/// The catalog row with a category that the daemon's error is, line by
/// line (the chain the runtime wraps is one string with `\n` in it).
fn row_of(error: &str) -> Option<&'static Row> {
    let catalogs = crate::catalogs::catalogs();
    error
        .lines()
        .flat_map(|line| catalogs.hits(line))
        .filter_map(|h| h.row)
        .find(|row| row.category.is_some())
}

/// What the container said last, where the paste has its logs: the last
/// error line a catalog knows before the record in its input, else after
/// it.
fn last_words(incident: &Incident, r: &ContainerState) -> Vec<(Span, String)> {
    preceding_error(incident, r.span)
        .or_else(|| {
            let after = Span {
                line: u32::MAX,
                ..r.end
            };
            preceding_error(incident, after).filter(|(s, _)| s.line > r.end.line)
        })
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::rules::{Category, Severity};
    use crate::testing::{cites_line, findings_of};

    /// https://github.com/docker/for-linux/issues/1019: exited 139, not
    /// OOM-killed, no error (fixtures/rules/process-died/pos-docker-inspect-container-exited-139).
    const EXITED_139: &str = include_str!(
        "../../../../fixtures/rules/process-died/pos-docker-inspect-container-exited-139/inspect.txt"
    );

    #[test]
    fn a_container_that_exited_139_died_of_sigsegv_when_it_finished() {
        let f = findings_of(super::super::META.id, EXITED_139);
        let [f] = f.as_slice() else {
            panic!("{f:#?}");
        };
        assert_eq!(
            (f.category, f.severity),
            (Category::ServerException, Severity::Error)
        );
        assert!(
            f.title
                .starts_with("container pedantic_sinoussi died: exit code 139 = 128 + 11"),
            "{}",
            f.title
        );
        assert!(f.title.contains("SIGSEGV"), "{}", f.title);
        assert!(
            f.headline.contains("2020-05-25T03:36:32.992004756Z"),
            "{}",
            f.headline
        );
        // The exit code first, then when it ended and began.
        assert_eq!(f.evidence[0].span.line, 16);
        cites_line(f, 19);
        cites_line(f, 18);
    }

    /// What a row already tells is that row's: `"OOMKilled": true`
    /// (fixtures/real/1040), exit code 137 without it (container-killed-137,
    /// fixtures/formats/lines/docker-inspect-exited-137.txt).
    #[test]
    fn a_death_a_catalog_row_reads_on_the_records_lines_is_the_rows() {
        let oom = include_str!(
            "../../../../fixtures/real/1040-dotagiftx-server-container-exited-inspect-state-memory-limit/input.log"
        );
        assert!(findings_of(super::super::META.id, oom).is_empty());
        let all = crate::testing::analyze_paste(oom).diagnosis.findings;
        assert_eq!(all.len(), 1, "{all:#?}");
        assert_eq!(all[0].category, Category::HostOomKiller);
        let killed =
            include_str!("../../../../fixtures/formats/lines/docker-inspect-exited-137.txt");
        assert!(findings_of(super::super::META.id, killed).is_empty());
        assert_eq!(findings_of("container-killed-137", killed).len(), 1);
    }

    /// `State.Error` holds the daemon's start error as it answered the
    /// client (moby's `daemon/start.go`: `containerStart` sets it on the
    /// container when the start fails), so the rows that read the client's
    /// line read the field: the wording of
    /// https://github.com/hiyouga/LlamaFactory/issues/5268, without the
    /// client's `docker: Error response from daemon: `.
    #[test]
    fn the_daemons_error_is_asked_through_the_catalog_rows() {
        let row = super::row_of("could not select device driver \"\" with capabilities: [[gpu]]")
            .expect("a row");
        assert_eq!(row.id, "stacks-containers.no-gpu-device-driver");
        // A chain the runtime wraps: each of its lines is asked.
        let row = super::row_of(
            "could not start\ncould not select device driver \"\" with capabilities: [[gpu]]",
        )
        .expect("a row");
        assert_eq!(row.id, "stacks-containers.no-gpu-device-driver");
        assert!(super::row_of("exit status 1").is_none());
    }
}
