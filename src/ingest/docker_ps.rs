//! `docker ps`'s and `docker compose ps`' rows as containers: each row's
//! name, its `CREATED` age and its `STATUS` as the daemon words it (moby's
//! `container.State.String()`: `Up 10 seconds`, `Up 4 hours (healthy)`,
//! `Restarting (1) 44 seconds ago`, `Exited (137) 2 hours ago`,
//! `Created`), the daemon's rounded durations (docker/go-units'
//! `HumanDuration`) read back into seconds. The column listing reader
//! (`tables.rs`) hands each row under either header here.

use crate::model::{ContainerRow, Facts};
use crate::source::Span;

/// The seconds a go-units `HumanDuration` stands for, its lower bound:
/// `Less than a second`, `1 second`, `10 seconds`, `About a minute`, `16
/// minutes`, `About an hour`, `3 hours`, `2 days`, `3 weeks`, `4 months`,
/// `2 years`.
pub(crate) fn human_duration(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.to_ascii_lowercase().as_str() {
        "less than a second" => return Some(0),
        "about a minute" => return Some(60),
        "about an hour" => return Some(3600),
        _ => {}
    }
    let (n, unit) = t.split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    let unit = unit.trim();
    let unit = unit.strip_suffix('s').unwrap_or(unit);
    let seconds = match unit {
        "second" => 1,
        "minute" => 60,
        "hour" => 3_600,
        "day" => 86_400,
        "week" => 604_800,
        "month" => 2_592_000,
        "year" => 31_536_000,
        _ => return None,
    };
    n.checked_mul(seconds)
}

/// A `STATUS` cell, read: (up for how long, restarting after which exit
/// code, exited with which); `None` for a cell that is no status.
type Status = (Option<u64>, Option<i64>, Option<i64>);

fn status(cell: &str) -> Option<Status> {
    if let Some(rest) = cell.strip_prefix("Up ") {
        // A health check's word or `(Paused)` after the time; podman
        // writes `Up 5 seconds ago`.
        let time = rest.split(" (").next().unwrap_or(rest);
        let time = time.strip_suffix(" ago").unwrap_or(time);
        return Some((Some(human_duration(time)?), None, None));
    }
    for (word, restarting) in [("Restarting (", true), ("Exited (", false)] {
        if let Some(rest) = cell.strip_prefix(word) {
            let (code, rest) = rest.split_once(") ")?;
            let code: i64 = code.parse().ok()?;
            human_duration(rest.strip_suffix(" ago")?)?;
            return Some(if restarting {
                (None, Some(code), None)
            } else {
                (None, None, Some(code))
            });
        }
    }
    matches!(cell, "Created" | "Dead" | "Removal In Progress").then_some((None, None, None))
}

/// Records the container a row lists (its cells apart by two spaces or
/// more), when one of its cells is a status and a name stands where the
/// header puts it: last in `docker ps`, first in `docker compose ps`.
pub(crate) fn row(cells: &[&str], name_first: bool, span: Span, facts: &mut Facts) {
    let Some((at, (up_for, restarting, exited))) = cells
        .iter()
        .enumerate()
        .find_map(|(i, c)| Some((i, status(c)?)))
    else {
        return;
    };
    let name = if name_first {
        cells.first().filter(|_| at > 0)
    } else {
        cells.last().filter(|_| at + 1 < cells.len())
    };
    let Some(name) = name.filter(|n| !n.contains(char::is_whitespace)) else {
        return;
    };
    let created_ago = at
        .checked_sub(1)
        .and_then(|i| cells[i].strip_suffix(" ago"))
        .and_then(human_duration);
    facts.container_rows.push(ContainerRow {
        span,
        name: (*name).to_owned(),
        created_ago,
        status: cells[at].to_owned(),
        up_for,
        restarting,
        exited,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(cells: &[&str], name_first: bool) -> Option<ContainerRow> {
        let mut facts = Facts::default();
        let span = Span {
            source: crate::source::SourceId(0),
            line: 1,
        };
        row(cells, name_first, span, &mut facts);
        facts.container_rows.pop()
    }

    #[test]
    fn the_daemons_durations_read_back_as_their_lower_bound() {
        for (text, seconds) in [
            ("Less than a second", 0),
            ("1 second", 1),
            ("10 seconds", 10),
            ("About a minute", 60),
            ("16 minutes", 960),
            ("About an hour", 3_600),
            ("44 hours", 158_400),
            ("3 weeks", 1_814_400),
        ] {
            assert_eq!(human_duration(text), Some(seconds), "{text}");
        }
        assert_eq!(human_duration("a while"), None);
    }

    /// https://github.com/gpustack/gpustack/issues/2937 (real case 1292):
    /// the serving container up 10 seconds, created 16 minutes ago, no
    /// `PORTS` cell.
    #[test]
    fn a_docker_ps_row_gives_its_name_age_and_status() {
        let r = read(
            &[
                "3d3eb5bb85fd",
                "4aea8980b104",
                "\"tini -- vox-box sta…\"",
                "16 minutes ago",
                "Up 10 seconds",
                "cosyvoice2-0.5b-JXx4S-run-0",
            ],
            false,
        )
        .expect("a row");
        assert_eq!(r.name, "cosyvoice2-0.5b-JXx4S-run-0");
        assert_eq!((r.created_ago, r.up_for), (Some(960), Some(10)));
        // v-kostyukov/Internship-2021 task7: the agent restarted by its
        // policy after exiting 1.
        let r = read(
            &[
                "38d3aee9f053",
                "zabbix/zabbix-agent2:5.4.2-alpine",
                "\"/sbin/tini -- /usr/…\"",
                "44 hours ago",
                "Restarting (1) 44 seconds ago",
                "zabbix-agent",
            ],
            false,
        )
        .expect("a row");
        assert_eq!((r.restarting, r.up_for), (Some(1), None));
        assert_eq!(r.created_ago, Some(158_400));
    }

    /// `docker compose ps` names the container first (a course's lab notes
    /// quoting its output: `Lab-03-mysql-1 … Restarting (1) Less than a
    /// second ago`); a healthy row reads its health apart.
    #[test]
    fn a_compose_row_names_its_container_first() {
        let r = read(
            &[
                "Lab-03-mysql-1",
                "mariadb:latest",
                "\"docker-entrypoint.s…\"",
                "mysql",
                "About a minute ago",
                "Restarting (1) Less than a second ago",
            ],
            true,
        )
        .expect("a row");
        assert_eq!(r.name, "Lab-03-mysql-1");
        assert_eq!((r.created_ago, r.restarting), (Some(60), Some(1)));
        let r = read(
            &[
                "web-1",
                "app",
                "\"puma\"",
                "web",
                "About a minute ago",
                "Up About a minute (healthy)",
                "0.0.0.0:3000->3000/tcp",
            ],
            true,
        )
        .expect("a row");
        assert_eq!(r.up_for, Some(60));
        // A row with no status cell is no container.
        assert_eq!(read(&["a", "b", "c", "d"], false), None);
    }
}
