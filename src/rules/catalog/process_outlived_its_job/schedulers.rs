//! What the rule reads of a paste's shell session: a batch scheduler's
//! query for one user's jobs that listed none, the owner of `ps` rows
//! (their own `USER` column or the `ps -u USER` that printed them), and how
//! old a `ps` row's start column says its process is.

use crate::model::{PsRecord, TypedCommand};

/// A batch scheduler's job query, as people type it.
pub(super) struct Scheduler {
    /// The program (`qstat`, `squeue`), by the command's first word.
    pub tool: &'static str,
    /// The scheduler's name, for reports.
    pub name: &'static str,
    /// The first title of the header its listing prints even when it lists
    /// no job (Slurm's `squeue` prints `JOBID PARTITION NAME USER ST TIME
    /// NODES NODELIST(REASON)` unless `-h`/`--noheader`, its man page);
    /// `None` for a tool that prints nothing at all then (Torque's and
    /// PBS's `qstat -u USER`: fixtures/real/870, the
    /// prompt that follows it straight away).
    pub header: Option<&'static str>,
    /// How the tool asks for one user's jobs, besides `-u USER`.
    pub user_flags: &'static [&'static str],
}

/// The schedulers whose empty answers the rule reads.
pub(super) const SCHEDULERS: &[Scheduler] = &[
    Scheduler {
        tool: "qstat",
        name: "Torque/PBS",
        header: None,
        user_flags: &[],
    },
    Scheduler {
        tool: "squeue",
        name: "Slurm",
        header: Some("JOBID"),
        user_flags: &["--user"],
    },
];

/// A scheduler query that listed no job of `user`.
pub(super) struct EmptyQuery<'a> {
    pub command: &'a TypedCommand,
    pub scheduler: &'static Scheduler,
    pub user: String,
}

/// The program a command line runs, past `sudo` and a path.
fn tool(command: &str) -> Option<&str> {
    command
        .split_whitespace()
        .find(|w| !matches!(*w, "sudo" | "command" | "time"))
        .map(|w| w.rsplit('/').next().unwrap_or(w))
}

/// The user a command names with `-u USER`, `-uUSER` or one of `flags`
/// (`--user USER`, `--user=USER`); the first of a comma list.
pub(super) fn user_of(command: &str, flags: &[&str]) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let value = words.iter().enumerate().find_map(|(i, w)| {
        if *w == "-u" || flags.contains(w) {
            return words.get(i + 1).copied();
        }
        if let Some(v) = w.strip_prefix("-u").filter(|v| !v.is_empty()) {
            return Some(v);
        }
        flags
            .iter()
            .find_map(|f| w.strip_prefix(f).and_then(|r| r.strip_prefix('=')))
    })?;
    let user = value.split(',').next()?.trim_matches(['\'', '"']);
    let plain = !user.is_empty()
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    plain.then(|| user.to_owned())
}

/// The scheduler queries among `commands` that name a user and listed no
/// job: nothing printed, or only the header the tool prints anyway.
pub(super) fn empty_queries(commands: &[TypedCommand]) -> Vec<EmptyQuery<'_>> {
    commands
        .iter()
        .filter_map(|c| {
            let tool = tool(&c.command)?;
            let scheduler = SCHEDULERS.iter().find(|s| s.tool == tool)?;
            let user = user_of(&c.command, scheduler.user_flags)?;
            let header_only = c.output_lines == 1
                && scheduler.header.is_some_and(|h| {
                    c.first_output
                        .as_deref()
                        .is_some_and(|o| o.split_whitespace().next() == Some(h))
                });
            (c.output_lines == 0 || header_only).then_some(EmptyQuery {
                command: c,
                scheduler,
                user,
            })
        })
        .collect()
}

/// The owner of `ps` row `p`: its own user column, or the user the `ps`
/// command that printed it asked for (`ps -u alice -o pid,lstart,cmd`).
pub(super) fn owner(p: &PsRecord, commands: &[TypedCommand]) -> Option<String> {
    if let Some(user) = &p.user {
        return Some(user.clone());
    }
    let same: Vec<&TypedCommand> = commands
        .iter()
        .filter(|c| c.span.source == p.span.source)
        .collect();
    let at = same.iter().rposition(|c| c.span.line < p.span.line)?;
    let command = same[at];
    let next = same.get(at + 1).map(|c| c.span.line);
    if !command.prints_line(p.span.line, next) || tool(&command.command) != Some("ps") {
        return None;
    }
    user_of(&command.command, &["--user", "-U", "--User"])
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// How old a `ps` start column says its process is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Age {
    /// Started on an earlier day than the listing: `ps` prints a date
    /// (`May11`, `Nov 27`) or a year (`2024`) instead of a time of day for
    /// a process started more than a day before, or an elapsed time with
    /// days (`2-03:04:05`).
    Days,
    /// `lstart`'s full date (`Mon May 19 14:17:44 2025`), as seconds since
    /// the epoch in the printed local time, to compare with the inputs'
    /// own clock.
    Since(i64),
    /// Started today (`10:28`), or a start the rule cannot read.
    Recent,
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `lstart` as printed (`Sat Jun  7 14:06:35 2025`), as seconds since the
/// epoch in its own local time.
fn lstart_seconds(words: &[&str]) -> Option<i64> {
    let [_, month, day, time, year] = words[..] else {
        return None;
    };
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let day: i64 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms[..] else { return None };
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s)
}

/// The age a `ps` row shows: its start column, or its elapsed one when it
/// has no start.
pub(super) fn age_of(p: &PsRecord) -> Age {
    match (&p.elapsed, &p.started) {
        (Some(elapsed), Some(started)) if elapsed == started => elapsed_age(elapsed),
        (_, Some(started)) => age(started),
        (Some(elapsed), None) => elapsed_age(elapsed),
        (None, None) => Age::Recent,
    }
}

/// `etime`'s `2-03:04:05` (days before the dash) or `etimes`' seconds
/// (`4074589`): a day or more is [`Age::Days`].
fn elapsed_age(elapsed: &str) -> Age {
    let e = elapsed.trim();
    let days = match e.split_once('-') {
        Some((d, rest)) => {
            !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) && rest.contains(':')
        }
        None => e.parse::<u64>().is_ok_and(|seconds| seconds >= 86_400),
    };
    if days { Age::Days } else { Age::Recent }
}

/// The age `ps` printed in a start column.
pub(super) fn age(started: &str) -> Age {
    let words: Vec<&str> = started.split_whitespace().collect();
    if let Some(seconds) = lstart_seconds(&words) {
        return Age::Since(seconds);
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let month_day = |s: &str| {
        s.len() > 3 && s.is_char_boundary(3) && MONTHS.contains(&&s[..3]) && digits(&s[3..])
    };
    let days = match words[..] {
        // `May11` (procps), a year `2024`.
        [w] => {
            month_day(w)
                || (w.len() == 4 && w.parse::<u32>().is_ok_and(|y| (1970..=2100).contains(&y)))
        }
        // `Nov 27`.
        [m, d] => MONTHS.contains(&m) && digits(d),
        _ => false,
    };
    // `etime`'s `2-03:04:05`.
    let elapsed_days = words.len() == 1
        && words[0]
            .split_once('-')
            .is_some_and(|(d, rest)| digits(d) && rest.contains(':'));
    if days || elapsed_days {
        Age::Days
    } else {
        Age::Recent
    }
}

/// Whether a command line is a job's program: an interpreter or launcher a
/// batch job runs (Python, an MPI or torch launcher, a rank's proxy), or a
/// model server.
pub(super) fn is_job_program(cmd: &str, ppid: Option<u32>) -> bool {
    const LAUNCHERS: &[&str] = &[
        "torchrun",
        "torch.distributed.run",
        "torch.distributed.launch",
        "deepspeed",
        "accelerate",
        "mpirun",
        "mpiexec",
        "orted",
        "hydra_pmi_proxy",
        "srun",
    ];
    let program = cmd
        .split_whitespace()
        .next()
        .map_or("", |w| w.rsplit('/').next().unwrap_or(w));
    let python = program.starts_with("python");
    python || LAUNCHERS.iter().any(|l| cmd.contains(l)) || crate::correlate::is_serving(cmd, ppid)
}

#[cfg(test)]
mod tests {
    use super::{Age, age, elapsed_age, user_of};

    #[test]
    fn reads_the_start_columns() {
        assert_eq!(age("May11"), Age::Days);
        assert_eq!(age("Nov 27"), Age::Days);
        assert_eq!(age("2024"), Age::Days);
        assert_eq!(age("2-03:04:05"), Age::Days);
        assert_eq!(elapsed_age("12-03:11:52"), Age::Days);
        assert_eq!(elapsed_age("4074589"), Age::Days);
        // `etimes` of 2024 seconds is half an hour, not a year.
        assert_eq!(elapsed_age("2024"), Age::Recent);
        assert_eq!(elapsed_age("05:41"), Age::Recent);
        assert_eq!(age("10:28"), Age::Recent);
        assert_eq!(age("03:04:05"), Age::Recent);
        let Age::Since(a) = age("Mon May 19 14:17:44 2025") else {
            panic!("lstart")
        };
        let Age::Since(b) = age("Wed May 21 14:17:44 2025") else {
            panic!("lstart")
        };
        assert_eq!(b - a, 2 * 86_400);
        // 2025-05-19 is day 20227 of the epoch.
        assert_eq!(a.div_euclid(86_400), 20_227);
    }

    #[test]
    fn reads_the_user_asked_for() {
        assert_eq!(user_of("qstat -u luirink", &[]).as_deref(), Some("luirink"));
        assert_eq!(
            user_of("squeue --user=alice", &["--user"]).as_deref(),
            Some("alice")
        );
        assert_eq!(
            user_of("squeue --user alice,bob", &["--user"]).as_deref(),
            Some("alice")
        );
        assert_eq!(user_of("squeue -ualice", &[]).as_deref(), Some("alice"));
        assert_eq!(user_of("squeue", &["--user"]), None);
        assert_eq!(user_of("qstat -u $USER", &[]), None);
    }
}
