//! Copies of one server's command line started at different times: a
//! listing (`ps -eo pid,ppid,lstart,etime,args`, `ps -ef`, `ps -o
//! pid,etime,args`) where one server (typed by its command line: `serve`,
//! `server`, `--port`, a web server's name, a model server's) runs several
//! times, each copy its own instance (no copy is another's child), started
//! minutes to days apart. A server is started once: the newest copy is the
//! live one and the older ones are instances earlier starts left behind
//! (a daemon restarted without stopping the old one, a start script run
//! again, a test run interrupted before its fixture stopped its server).
//!
//! What makes the copies instances rather than a healthy pool: with PPIDs
//! shown, each copy's parent is PPID 1 (detached or orphaned; a worker's
//! parent is its master, a managed server's its manager); without them,
//! each copy listens on a port of its own (workers share their master's).
//! What makes the older ones leftovers rather than a planned set of
//! instances: one endpoint for all (the same port, or none given: they
//! cannot all serve it), a test harness's per-run directories in their
//! command lines (pytest's `pytest-N/`, `pytest-of-USER/`), or ports that
//! climb with the start times, each start taking the next port because the
//! earlier instance still held its own (at a lower confidence: an
//! operator's planned instances can look so).

use std::collections::{BTreeMap, BTreeSet};

use super::META;
use super::managed::server_of;
use crate::correlate::{Incident, is_serving};
use crate::model::PsRecord;
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};
use crate::source::SourceId;

/// Options whose value is the address a server listens on.
const PORT_OPTIONS: &[&str] = &["--port", "--http-socket", "--bind", "--listen", "-p"];

/// Interpreters whose script (or `-m` module) is the program.
const INTERPRETERS: &[&str] = &["python", "node", "ruby", "perl", "php", "bash", "sh"];

/// Words a server is started by, as its subcommand.
const SERVE_WORDS: &[&str] = &["serve", "server", "runserver"];

/// Path marks of a test harness's per-run directories: pytest's
/// `tmp_path` (`/tmp/pytest-of-USER/pytest-3/test_name0/`) and a
/// `mkdtemp` prefix named after it (`…/T/app-pytest-wz6morai/`).
const HARNESS_MARKS: &[&str] = &["/pytest-of-", "/pytest-", "-pytest-"];

/// The gap, in seconds, that two starts must be apart to be two starts.
const MIN_GAP: i64 = 60;

/// Why the older copies are leftovers.
#[derive(Clone, Copy, PartialEq)]
enum Why {
    /// All copies serve one endpoint (one port, or none given).
    OneEndpoint,
    /// Their command lines hold a test harness's per-run directories.
    Harness,
    /// Each later start took a higher port.
    Climbing,
}

/// One copy: its row, when it started (seconds on the listing's own
/// scale, larger is later) and its port.
struct Copy<'a> {
    rec: &'a PsRecord,
    start: i64,
    port: Option<u32>,
}

/// Findings for the older copies of each server started more than once;
/// `reported` are PIDs another part of the rule named.
pub(super) fn generations(incident: &Incident, reported: &BTreeSet<u32>) -> Vec<Finding> {
    let ps = &incident.facts.ps;
    // Inside a container PID 1 is its entrypoint (the server, a start
    // script), whose children have PPID 1 by birth: only init's adopted
    // orphans say something.
    if ps.iter().any(|p| p.pid == 1 && !is_init(&p.cmd)) {
        return Vec::new();
    }
    type Key<'a> = (SourceId, Option<&'a str>, String);
    let mut groups: BTreeMap<Key<'_>, Vec<&PsRecord>> = BTreeMap::new();
    for p in ps.iter().filter(|p| is_server(&p.cmd)) {
        let key = (p.span.source, p.user.as_deref(), identity(&p.cmd));
        let members = groups.entry(key).or_default();
        if !members.iter().any(|m| m.pid == p.pid) {
            members.push(p);
        }
    }
    let mut out = Vec::new();
    for members in groups.values() {
        let Some((copies, why)) = instances(members) else {
            continue;
        };
        let (live, older) = copies.split_last().expect("two copies or more");
        let left: Vec<&Copy<'_>> = older
            .iter()
            .filter(|c| !reported.contains(&c.rec.pid))
            .collect();
        if !left.is_empty() {
            out.push(finding(live, &left, why));
        }
    }
    out
}

/// The instances among one server's rows, oldest first, and why the older
/// ones are leftovers; `None` when the rows do not show that.
fn instances<'a>(members: &[&'a PsRecord]) -> Option<(Vec<Copy<'a>>, Why)> {
    let pids: BTreeSet<u32> = members.iter().map(|m| m.pid).collect();
    // A copy whose parent is another copy is a worker of that one.
    let own: Vec<&PsRecord> = members
        .iter()
        .copied()
        .filter(|p| !p.ppid.is_some_and(|pp| pids.contains(&pp)))
        .collect();
    if own.len() < 2 {
        return None;
    }
    let starts = start_times(&own)?;
    let mut copies: Vec<Copy<'a>> = own
        .iter()
        .zip(starts)
        .map(|(rec, start)| Copy {
            rec,
            start,
            port: port(&rec.cmd),
        })
        .collect();
    copies.sort_by_key(|c| (c.start, c.rec.pid));
    let gaps: Vec<i64> = copies.windows(2).map(|w| w[1].start - w[0].start).collect();
    // The newest start stands alone: the live instance.
    if gaps.last().is_none_or(|g| *g < MIN_GAP) {
        return None;
    }
    let ports: BTreeSet<Option<u32>> = copies.iter().map(|c| c.port).collect();
    let distinct = ports.len() == copies.len() && !ports.contains(&None);
    let with_ppid = copies.iter().all(|c| c.rec.ppid.is_some());
    if with_ppid && copies.iter().any(|c| c.rec.ppid != Some(1)) {
        return None;
    }
    let why = if with_ppid && ports.len() == 1 {
        Why::OneEndpoint
    } else if !distinct {
        return None;
    } else if copies.iter().any(|c| harness_run(&c.rec.cmd)) {
        Why::Harness
    } else if copies.len() >= 3
        && gaps.iter().all(|g| *g >= MIN_GAP)
        && copies.windows(2).all(|w| w[0].port < w[1].port)
    {
        Why::Climbing
    } else {
        return None;
    };
    Some((copies, why))
}

/// Whether PID 1's command line is a system's init (systemd, SysV init,
/// launchd), which adopts orphans.
fn is_init(cmd: &str) -> bool {
    let first = cmd.split_whitespace().next().unwrap_or_default();
    let base = first.rsplit('/').next().unwrap_or(first);
    matches!(base, "systemd" | "init" | "launchd" | "(sd-pam)") || first.starts_with("/sbin/init")
}

/// Whether `cmd` runs a server: a model server's or a web server's
/// command line, a program named a server (`moto_server`,
/// `llama-server`), a `serve` subcommand, or a `--port` option.
fn is_server(cmd: &str) -> bool {
    let words = words(cmd);
    let Some(program) = program(&words) else {
        return false;
    };
    let name = program.1.to_ascii_lowercase();
    let sub = words
        .get(program.0 + 1..)
        .and_then(|rest| rest.iter().find(|w| !w.starts_with('-')));
    is_serving(cmd, None)
        || server_of(cmd).is_some()
        || name.contains("server")
        || sub.is_some_and(|s| SERVE_WORDS.contains(s))
        || words
            .iter()
            .any(|w| *w == "--port" || w.starts_with("--port="))
}

/// The command's words, up to an annotation the paste's author added
/// (`<- live`, `# the old one`).
fn words(cmd: &str) -> Vec<&str> {
    cmd.split_whitespace()
        .take_while(|w| !matches!(*w, "<-" | "<--" | "#" | "←"))
        .collect()
}

fn base(word: &str) -> &str {
    word.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(word)
}

/// The program a command runs, with its word's index: the first word's
/// basename, or after an interpreter and its options its script or `-m`
/// module.
fn program<'a>(words: &[&'a str]) -> Option<(usize, &'a str)> {
    let first = base(words.first()?);
    let interpreter = INTERPRETERS.iter().any(|i| {
        first
            .strip_prefix(i)
            .is_some_and(|v| v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    });
    if !interpreter {
        return Some((0, first));
    }
    let mut i = 1;
    while let Some(w) = words.get(i) {
        if *w == "-m" {
            return words.get(i + 1).map(|m| (i + 1, *m));
        }
        if !w.starts_with('-') {
            return Some((i, base(w)));
        }
        i += 1;
    }
    None
}

/// A command line as one server's, whatever differs from one start to the
/// next: paths cut to their last part (a per-run directory), ports and
/// other bare numbers masked, options that take no value dropped.
fn identity(cmd: &str) -> String {
    let words = words(cmd);
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        let flag = w.starts_with('-') && !w.contains('=');
        let next_is_value = words.get(i + 1).is_some_and(|n| !n.starts_with('-'));
        if flag && !next_is_value && port_digits(w).is_none() {
            continue;
        }
        let w = match w.split_once('=') {
            Some((k, v)) => format!("{k}={}", base(v)),
            None => base(w).to_owned(),
        };
        out.push(mask(&w));
    }
    out.join(" ")
}

/// `w` with the number of a port-like word masked: `8000`, `:8081`,
/// `127.0.0.1:8000`, `--port=8000`, `-p15000`.
fn mask(w: &str) -> String {
    match port_digits(w) {
        Some(d) => format!("{}#", &w[..w.len() - d.len()]),
        None => w.to_owned(),
    }
}

/// The trailing number of a port-like word.
fn port_digits(w: &str) -> Option<&str> {
    let digits = w.trim_start_matches(|c: char| !c.is_ascii_digit());
    let cut = w.len() - digits.len();
    let head = &w[..cut];
    let number = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    let shaped = head.is_empty()
        || head.ends_with(':')
        || head.ends_with('=')
        || (head.len() == 2 && head.starts_with('-'));
    (number && shaped).then_some(digits)
}

/// The port a command line names: a port option's value (`--port 7373`,
/// `--http-socket :8081`, `-p15000`, `--port=8000`).
fn port(cmd: &str) -> Option<u32> {
    let words = words(cmd);
    words.iter().enumerate().find_map(|(i, w)| {
        let value = PORT_OPTIONS.iter().find_map(|o| {
            if w == o {
                words.get(i + 1).copied()
            } else {
                w.strip_prefix(o)
                    .map(|v| v.strip_prefix('=').unwrap_or(v))
                    .filter(|v| !v.is_empty())
            }
        })?;
        value.rsplit(':').next()?.parse().ok()
    })
}

/// Whether `cmd` runs from a test harness's per-run directory.
fn harness_run(cmd: &str) -> bool {
    HARNESS_MARKS.iter().any(|m| cmd.contains(m))
}

/// The copies' start times on one scale, larger later: every row's full
/// start (`lstart`), else every row's elapsed time, else every row's
/// `ps -ef` start (`06:13`, `Oct26`, `2025`); `None` when the rows do not
/// all have one kind.
fn start_times(rows: &[&PsRecord]) -> Option<Vec<i64>> {
    let all = |f: &dyn Fn(&PsRecord) -> Option<i64>| rows.iter().map(|r| f(r)).collect();
    let lstart: Option<Vec<i64>> = all(&|r| r.started.as_deref().and_then(lstart));
    lstart
        .or_else(|| all(&|r| r.elapsed.as_deref().and_then(elapsed).map(|s| -s)))
        .or_else(|| all(&|r| r.started.as_deref().and_then(stime)))
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn month(m: &str) -> Option<i64> {
    MONTHS.iter().position(|x| *x == m).map(|i| i as i64 + 1)
}

/// Seconds of a clock `HH:MM[:SS]`.
fn clock(t: &str) -> Option<i64> {
    let parts: Vec<i64> = t
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    match parts[..] {
        [h, m] if h < 24 && m < 60 => Some(h * 3600 + m * 60),
        [h, m, s] if h < 24 && m < 60 && s < 60 => Some(h * 3600 + m * 60 + s),
        _ => None,
    }
}

/// `lstart`'s `Sun Aug 30 20:39:29 2026`, in seconds on a calendar of
/// 31-day months (an order, not a date).
fn lstart(s: &str) -> Option<i64> {
    let w: Vec<&str> = s.split_whitespace().collect();
    let [_, mon, day, time, year] = w[..] else {
        return None;
    };
    let days = year.parse::<i64>().ok()? * 372 + month(mon)? * 31 + day.parse::<i64>().ok()?;
    Some(days * 86_400 + clock(time)?)
}

/// `etime`'s `[[DD-]HH:]MM:SS`, or `etimes`' seconds.
fn elapsed(s: &str) -> Option<i64> {
    if let Ok(n) = s.parse::<i64>() {
        return Some(n);
    }
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<i64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<i64> = rest
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let secs = match parts[..] {
        [m, sec] => m * 60 + sec,
        [h, m, sec] => h * 3600 + m * 60 + sec,
        _ => return None,
    };
    Some(days * 86_400 + secs)
}

/// `ps -ef`'s start: today's `06:13`, this year's `Oct26` (`Oct 26`), an
/// earlier year's `2025`, on one scale: a year before a day before a time.
fn stime(s: &str) -> Option<i64> {
    const DAY: i64 = 86_400;
    const YEAR: i64 = 372 * DAY;
    if let Some(t) = clock(s) {
        return Some(2 * YEAR * 10_000 + t);
    }
    let compact: String = s.split_whitespace().collect();
    if compact.len() == 4 && compact.bytes().all(|b| b.is_ascii_digit()) {
        return Some(compact.parse::<i64>().ok()? * YEAR);
    }
    let (mon, day) = compact.split_at_checked(3)?;
    let day: i64 = day.parse().ok().filter(|d| (1..=31).contains(d))?;
    Some(YEAR * 10_000 + (month(mon)? * 31 + day) * DAY)
}

fn finding(live: &Copy<'_>, left: &[&Copy<'_>], why: Why) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let program = label(&live.rec.cmd);
    let pids: Vec<String> = left.iter().map(|c| c.rec.pid.to_string()).collect();
    for c in left {
        f.entities.pids.insert(c.rec.pid);
        f.evidence(
            c.rec.span,
            format!(
                "PID {} runs the same `{program}` command line{}{}, started earlier{}: an earlier instance",
                c.rec.pid,
                on_port(c.port),
                orphaned(c.rec),
                when(c.rec)
            ),
        );
    }
    f.evidence(
        live.rec.span,
        format!(
            "PID {} is the newest copy{}{}: the live instance",
            live.rec.pid,
            on_port(live.port),
            when(live.rec)
        ),
    );
    push_conditions(&mut f, why, left.len() + 1);
    let (plural, were) = if left.len() == 1 {
        ("PID", "was")
    } else {
        ("PIDs", "were")
    };
    f.title = format!(
        "{} earlier `{program}` instance(s) still running beside the newest ({plural} {})",
        left.len(),
        pids.join(", ")
    );
    f.headline = format!(
        "`{program}` runs {} times, each an instance of its own started at a different time: PID {} is the newest, the live one; {plural} {} {were} started before it and never stopped{}, so they keep their ports, sockets and memory.",
        left.len() + 1,
        live.rec.pid,
        pids.join(", "),
        because(why)
    );
    f.chain.push(format!(
        "`{program}` was started again while its earlier instances still ran"
    ));
    f.chain.push(format!(
        "{plural} {} outlived the runs that started them",
        pids.join(", ")
    ));
    f.explanation = "A server is started once; copies of its command line that are not each other's workers, started minutes to days apart, are instances that earlier starts left behind (a restart that did not stop the old process, a start script run again, a test run interrupted before its fixture stopped its server). The older ones keep their ports and memory: requests, clients or the next start reach them instead of the current instance, or find the port taken.".to_owned();
    push_actions(&mut f, live, &pids);
    f.confidence = confidence(&f, 0.45, 0.85);
    f
}

/// The server's name: its program, with its `serve` subcommand.
fn label(cmd: &str) -> String {
    let words = words(cmd);
    let Some((i, name)) = program(&words) else {
        return cmd.to_owned();
    };
    match words.get(i + 1) {
        Some(sub) if SERVE_WORDS.contains(sub) => format!("{name} {sub}"),
        _ => name.to_owned(),
    }
}

fn on_port(port: Option<u32>) -> String {
    port.map_or(String::new(), |p| format!(" on port {p}"))
}

fn orphaned(rec: &PsRecord) -> &'static str {
    if rec.ppid == Some(1) {
        " with PPID 1"
    } else {
        ""
    }
}

/// The row's start and elapsed time as printed.
fn when(rec: &PsRecord) -> String {
    match (rec.started.as_deref(), rec.elapsed.as_deref()) {
        (Some(s), Some(e)) if s != e => format!(" (started {s}, running {e})"),
        (_, Some(e)) => format!(" (running {e})"),
        (Some(s), None) => format!(" (started {s})"),
        (None, None) => String::new(),
    }
}

fn because(why: Why) -> &'static str {
    match why {
        Why::OneEndpoint => ": they all serve one endpoint, which only one of them can",
        Why::Harness => {
            ": their command lines run from a test harness's per-run directories, one run each"
        }
        Why::Climbing => {
            " (inferred: each later start took a higher port, as a start does when the earlier instance still holds its own)"
        }
    }
}

fn push_conditions(f: &mut Finding, why: Why, n: usize) {
    f.condition(
        format!("{n} copies of one server command line, none another's child, started at different times"),
        true,
    );
    f.condition(
        "the older copies serve the same endpoint or come from earlier test runs",
        why != Why::Climbing,
    );
    f.condition(
        "their listening sockets show which copy clients reach (missing: ss -ltnp / lsof -i)",
        false,
    );
}

fn push_actions(f: &mut Finding, live: &Copy<'_>, pids: &[String]) {
    f.actions.push(Action::advice(
        "check which copy holds the port or socket clients use, and that the older ones are not in use",
        Some(&format!(
            "ps -o pid,ppid,lstart,etime,args -p {},{}; ss -ltnp",
            live.rec.pid,
            pids.join(",")
        )),
    ));
    f.actions.push(Action::advice(
        "stop the older instances (SIGTERM, then SIGKILL if they ignore it), not the newest",
        None,
    ));
    f.actions.push(Action::advice(
        "make whatever starts the server stop the previous instance first (a pid file, a single-instance lock, a test fixture's teardown)",
        None,
    ));
}

#[cfg(test)]
mod tests;
