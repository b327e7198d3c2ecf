//! `ps` listings (docs/formats/procfs.md): `ps -ef`, `ps aux`, `ps -eo …` with any
//! column order. The header row says which column is which; rows are split on
//! whitespace, one token per column, except the start time (`lstart` is five
//! tokens, `start` of an older process two) and a trailing command, which is
//! the rest of the line. `top -b`'s process table (`PID USER PR NI VIRT RES
//! SHR S %CPU %MEM TIME+ COMMAND`) is such a listing; the summary lines above
//! it (`top - … load average:`, `Tasks:`, `%Cpu(s):`, `MiB Mem :`) are
//! [`is_top_summary`]'s.

use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{Facts, PsRecord};
use crate::source::Span;

/// A `ps -ef` row: `UID PID PPID C STIME TTY TIME CMD`, the start `19:08`,
/// `Jun01` or `2024`, the terminal `?`, `pts/0` or `tty1`, the CPU time
/// `00:54:48` or `1-02:03:04`; BSD's (macOS) prints the start `10:19AM` or
/// `Tue05PM` (`2:23pm` in a lower-case locale, ome/openmicroscopy#5991),
/// the terminal `??` or `ttys005` and the time `11:00.35`.
static EF_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*\S+\s+[0-9]+\s+[0-9]+\s+[0-9]+\s+(?:[0-9][0-9]:[0-9][0-9]|[A-Z][a-z]{2}[0-9][0-9]|[0-9]{4}|[0-9]{1,2}:[0-9][0-9][AaPp][Mm]|[A-Z][a-z]{2}[0-9][0-9][AaPp][Mm])\s+(?:\?\??|pts/[0-9]+|tty[0-9A-Za-z_]*|console)\s+(?:(?:[0-9]+-)?[0-9][0-9]:[0-9][0-9]:[0-9][0-9]|[0-9]+:[0-9][0-9]\.[0-9][0-9])\s+\S",
    )
    .expect("ps -ef row regex")
});

/// A row of procps' `-f` full format mixed with a BSD option (`ps -edf
/// ww`, `ps -f x`): `UID PID PPID C STIME TTY STAT TIME CMD`, the `STAT`
/// column between the terminal and the time, the time BSD's `M:SS`
/// (wazuh/wazuh#12783: `wazuh 527299 1 0 23:01 ? SN 0:00 /var/ossec/…`).
static EF_STAT_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*\S+\s+[0-9]+\s+[0-9]+\s+[0-9]+\s+(?:[0-9][0-9]:[0-9][0-9]|[A-Z][a-z]{2}[0-9][0-9]|[0-9]{4})\s+(?:\?|pts/[0-9]+|tty[0-9A-Za-z_]*|console)\s+[DIRSTtWXZ][<NLsl+]*\s+(?:[0-9]+-)?[0-9]+:[0-9][0-9](?::[0-9][0-9])?\s+\S",
    )
    .expect("ps -f with STAT row regex")
});

/// A `ps aux` row: `USER PID %CPU %MEM VSZ RSS TTY STAT START TIME COMMAND`.
static AUX_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*\S+\s+[0-9]+\s+[0-9]+(?:\.[0-9]+)?\s+[0-9]+(?:\.[0-9]+)?\s+[0-9]+\s+[0-9]+\s+(?:\?|pts/[0-9]+|tty[0-9A-Za-z_]*|console)\s+[DIRSTtWXZ][<NLsl+]*\s+(?:[0-9][0-9]:[0-9][0-9]|[A-Z][a-z]{2}[0-9][0-9]|[0-9]{4})\s+[0-9]+:[0-9][0-9]\s+\S",
    )
    .expect("ps aux row regex")
});

/// A `ps alx` (`ps axl`, `ps l`) row: `F UID PID PPID PRI NI VSZ RSS WCHAN
/// STAT TTY TIME COMMAND`, the user a number, the wait channel cut to six
/// characters (`futex_`, `-` when running).
static ALX_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*[0-9]{1,3}\s+[0-9]+\s+[0-9]+\s+[0-9]+\s+-?[0-9]+\s+-?[0-9]+\s+[0-9]+\s+[0-9]+\s+\S{1,6}\s+[DIRSTtWXZ][<NLsl+]*\s+(?:\?|pts/[0-9]+|tty[0-9A-Za-z_]*|console)\s+[0-9]+:[0-9][0-9]\s+\S",
    )
    .expect("ps alx row regex")
});

/// A row of a script's own `ps -o …,lstart,args` layout pasted without its
/// header: numbers (the PID among them, and its parent's or group's), the
/// five-word start time, the command (fixtures/real/640, `1051  181171
/// 1051 Mon May 19 14:17:44 2025 /usr/local/bin/ollama runner …`). Which
/// number is the PID one row does not say; a block of them does
/// ([`lstart_columns`]).
static LSTART_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^\s*(?:[0-9]+\s+){1,4}(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\s+(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+[0-9]{1,2}\s+[0-9]{2}:[0-9]{2}:[0-9]{2}\s+[0-9]{4}\s+\S",
    )
    .expect("ps lstart row regex")
});

/// Whether `text` is a headerless row of a `…,lstart,args` layout.
pub(crate) fn is_lstart_row(text: &str) -> bool {
    LSTART_ROW.is_match(text)
}

/// The columns of a block of headerless [`LSTART_ROW`]s: the processes of
/// one listing differ in their PID and share their parent or group (a
/// server's runners, a job's ranks), so the one number column whose values
/// all differ is the PID, and the columns whose value is the same in every
/// row are the others (a parent, a group: which, the rows do not say).
/// `None` for a single row, rows of different shapes, or no such column.
fn lstart_columns(texts: &[&str]) -> Option<Vec<Column>> {
    let numbers = |t: &str| -> Vec<u64> {
        t.split_whitespace()
            .map_while(|w| w.parse::<u64>().ok())
            .collect()
    };
    let rows: Vec<Vec<u64>> = texts.iter().map(|t| numbers(t)).collect();
    let width = rows.first()?.len();
    if rows.len() < 2 || rows.iter().any(|r| r.len() != width) {
        return None;
    }
    let distinct = |c: usize| {
        let mut values: Vec<u64> = rows.iter().map(|r| r[c]).collect();
        values.sort_unstable();
        values.dedup();
        values.len()
    };
    let varying: Vec<usize> = (0..width).filter(|&c| distinct(c) > 1).collect();
    let [pid] = varying[..] else { return None };
    if distinct(pid) != rows.len() || (0..width).any(|c| c != pid && distinct(c) != 1) {
        return None;
    }
    let mut columns: Vec<Column> = (0..width)
        .map(|c| if c == pid { Column::Pid } else { Column::Other })
        .collect();
    columns.extend([Column::Start, Column::Cmd]);
    Some(columns)
}

/// The columns a headerless row of each default layout has.
const EF_COLUMNS: [Column; 8] = [
    Column::User,
    Column::Pid,
    Column::Ppid,
    Column::Other,
    Column::Start,
    Column::Other,
    Column::Other,
    Column::Cmd,
];
const EF_STAT_COLUMNS: [Column; 9] = [
    Column::User,
    Column::Pid,
    Column::Ppid,
    Column::Other,
    Column::Start,
    Column::Other,
    Column::Stat,
    Column::Other,
    Column::Cmd,
];
const ALX_COLUMNS: [Column; 13] = [
    Column::Other,
    Column::User,
    Column::Pid,
    Column::Ppid,
    Column::Other,
    Column::Other,
    Column::Other,
    Column::Other,
    Column::Other,
    Column::Stat,
    Column::Other,
    Column::Other,
    Column::Cmd,
];
const AUX_COLUMNS: [Column; 11] = [
    Column::User,
    Column::Pid,
    Column::Other,
    Column::Other,
    Column::Other,
    Column::Other,
    Column::Other,
    Column::Stat,
    Column::Start,
    Column::Other,
    Column::Cmd,
];

/// A `ps -o pid,ppid,comm` (or `…,args`) row pasted without its header
/// whose command is a serving stack's process title, which SGLang and vLLM
/// set for their processes (`  34472  1  VLLM::Worker_DP1_EP1`,
/// `sglang::scheduler_TP0`): two numbers, the PID and its parent's, then
/// the title alone. A bare `N N word` row says nothing of its columns;
/// the title is what makes it a process row, and the order PID, PPID is
/// `ps`'s own for every layout that prints both.
const TITLE_COLUMNS: [Column; 3] = [Column::Pid, Column::Ppid, Column::Cmd];

/// Whether `text` is such a row: [`TITLE_COLUMNS`].
pub(crate) fn is_title_row(text: &str) -> bool {
    let mut words = text.split_whitespace();
    let (Some(pid), Some(ppid), Some(title), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return false;
    };
    let number = |w: &str| !w.is_empty() && w.len() <= 10 && w.bytes().all(|b| b.is_ascii_digit());
    number(pid) && number(ppid) && super::server::process_title(title).is_some()
}

/// The layout of a row pasted without its header, when its shape is
/// unmistakably `ps -ef`'s, `ps aux`'s or `ps alx`'s, or a serving
/// process's [`TITLE_COLUMNS`].
fn implied_columns(text: &str) -> Option<&'static [Column]> {
    if is_title_row(text) {
        return Some(&TITLE_COLUMNS);
    }
    if EF_ROW.is_match(text) {
        Some(&EF_COLUMNS)
    } else if EF_STAT_ROW.is_match(text) {
        Some(&EF_STAT_COLUMNS)
    } else if AUX_ROW.is_match(text) {
        Some(&AUX_COLUMNS)
    } else if ALX_ROW.is_match(text) {
        Some(&ALX_COLUMNS)
    } else {
        None
    }
}

/// Whether `text` is a `ps -ef`, `ps aux` or `ps alx` row even without its
/// header.
pub(super) fn is_headerless_row(text: &str) -> bool {
    EF_ROW.is_match(text)
        || EF_STAT_ROW.is_match(text)
        || AUX_ROW.is_match(text)
        || ALX_ROW.is_match(text)
}

/// What a column of a listing holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Column {
    Pid,
    Ppid,
    User,
    Stat,
    /// `lstart`/`start`/`stime`/`start_time`/`bsdstart`.
    Start,
    /// `etime`/`etimes`.
    Elapsed,
    Cmd,
    Other,
}

/// Reads a header row; `None` when the line is not one.
///
/// A script that formats `ps` itself may mangle a title in passing (`ps
/// aux | awk '{print $1, $2, $6/1024 " MB", $11}'` divides the header's
/// `RSS` too and prints `0.00 MB`, gpustack/gpustack#4060): a header
/// framed by titles (its first a title, its last the command's) keeps
/// such words as columns of their own, one per word, as its rows print
/// them.
fn header(text: &str) -> Option<Vec<Column>> {
    let titles: Vec<&str> = text.split_whitespace().collect();
    let is_title = |t: &&str| {
        t.starts_with(|c: char| c.is_ascii_uppercase() || c == '%')
            && t.chars().all(|c| {
                // `TIME+` is top's CPU time in hundredths.
                c.is_ascii_uppercase() || c.is_ascii_digit() || matches!(c, '%' | '_' | '+')
            })
    };
    let framed = || {
        titles.first().is_some_and(is_title)
            && titles
                .last()
                .is_some_and(|t| matches!(*t, "CMD" | "COMMAND" | "ARGS"))
            && titles.iter().filter(|t| is_title(t)).count() >= 3
            && titles.iter().all(|t| is_title(t) || is_mangled_title(t))
    };
    if !titles.contains(&"PID") || !(titles.iter().all(is_title) || framed()) {
        return None;
    }
    // `ps -ef` titles the user name `UID`; a real `USER` column wins.
    let has_user = titles.contains(&"USER");
    let has_stat = titles.contains(&"STAT");
    Some(
        titles
            .iter()
            .map(|t| match *t {
                "PID" => Column::Pid,
                "PPID" => Column::Ppid,
                "USER" => Column::User,
                "UID" | "RUSER" | "EUSER" if !has_user => Column::User,
                "STAT" => Column::Stat,
                "S" if !has_stat => Column::Stat,
                "LSTART" | "STARTED" | "START" | "STIME" => Column::Start,
                "ELAPSED" | "ETIME" | "ETIMES" => Column::Elapsed,
                "CMD" | "COMMAND" | "ARGS" => Column::Cmd,
                _ => Column::Other,
            })
            .collect(),
    )
}

/// A word a script's arithmetic made of a title: a number (`0.00`) or a
/// unit it appended (`MB`, `KiB`, `%`).
fn is_mangled_title(word: &str) -> bool {
    let number = !word.is_empty()
        && word.bytes().any(|b| b.is_ascii_digit())
        && word.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    number
        || matches!(
            word,
            "B" | "KB" | "MB" | "GB" | "KiB" | "MiB" | "GiB" | "K" | "M" | "G" | "%"
        )
}

/// Whether `text` is one of the summary lines `top` prints above its
/// process table (procps top's `top - 08:56:03 up 7:49, 3 users, load
/// average: …`, `Tasks: N total, N running, N sleeping, …` (`Threads:`
/// under `-H`), `%Cpu(s): 7.6 us, 2.8 sy, …`, `MiB Mem : N total, N free,
/// …`, `MiB Swap: …`): read, but no fact a rule asks for.
pub(crate) fn is_top_summary(text: &str) -> bool {
    let t = text.trim();
    let all = |words: &[&str]| words.iter().all(|w| t.contains(w));
    if let Some(rest) = t.strip_prefix("top - ") {
        return rest.contains(" up ") && rest.contains("load average:");
    }
    if t.starts_with("Tasks:") || t.starts_with("Threads:") {
        return all(&[" total,", " running,", " sleeping,"]);
    }
    if t.starts_with("%Cpu") {
        return all(&[" us,", " sy,", " id,"]);
    }
    ["KiB ", "MiB ", "GiB ", "TiB "].iter().any(|unit| {
        t.strip_prefix(unit).is_some_and(|rest| {
            let rest = rest.trim_start();
            (rest.starts_with("Mem") || rest.starts_with("Swap")) && all(&["total,", "free,"])
        })
    })
}

/// Parses one segment; returns the lines it did not recognise (their
/// indices), which go on to the line-level recognisers.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    read_by(None, lines, facts)
}

/// [`read`] for the output of `command`, typed at the prompt above: its
/// `-o` list names the columns of rows pasted without the header.
pub fn read_typed(command: &str, lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    read_by(typed_columns(command), lines, facts)
}

/// The columns a `ps` command prints, from its `-o` lists (`ps -eo
/// pid,ppid,user,stat,lstart,etimes,args | grep vllm`, `ps axo …`, `ps
/// -o pid= -o args=`, `--format …`); `None` when it names no PID column.
pub(crate) fn typed_columns(command: &str) -> Option<Vec<Column>> {
    let stage = command.split('|').find(|stage| {
        stage
            .split_whitespace()
            .find(|w| !matches!(*w, "sudo" | "env" | "watch" | "time" | "command"))
            .is_some_and(|tool| tool.rsplit('/').next() == Some("ps"))
    })?;
    let words: Vec<&str> = stage.split_whitespace().collect();
    let mut lists = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let bsd_or_unix = |w: &str| {
            let letters = w.strip_prefix('-').unwrap_or(w);
            letters.ends_with('o') && letters.bytes().all(|b| b"aAdeEfFgHjlLNrTuwxo".contains(&b))
        };
        if *word == "--format" || bsd_or_unix(word) {
            lists.extend(words.get(i + 1).copied());
        } else if let Some(list) = word
            .strip_prefix("--format=")
            .or_else(|| word.strip_prefix("-o").filter(|l| !l.is_empty()))
        {
            lists.push(list);
        }
    }
    let columns: Vec<Column> = lists
        .iter()
        .flat_map(|l| l.trim_matches(['\'', '"']).split(','))
        .filter(|k| !k.is_empty())
        .map(|k| {
            let name = k.split(['=', ':']).next().unwrap_or(k);
            match name {
                "pid" | "tgid" => Column::Pid,
                "ppid" => Column::Ppid,
                "user" | "uname" | "euser" | "ruser" | "uid" | "euid" | "ruid" => Column::User,
                "stat" | "s" | "state" => Column::Stat,
                "lstart" | "start" | "stime" | "start_time" | "bsdstart" => Column::Start,
                "etime" | "etimes" => Column::Elapsed,
                "args" | "cmd" | "command" | "comm" | "ucmd" | "ucomm" => Column::Cmd,
                _ => Column::Other,
            }
        })
        .collect();
    columns.contains(&Column::Pid).then_some(columns)
}

fn read_by(typed: Option<Vec<Column>>, lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut columns: Option<Vec<Column>> = typed;
    let mut missed = Vec::new();
    let mut lstart = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.text.trim().is_empty() {
            continue;
        }
        if let Some(h) = header(line.text) {
            columns = Some(h);
            continue;
        }
        if is_top_summary(line.text) {
            continue;
        }
        // A row that does not fit the header (or has none above it) may
        // still be one of the default layouts, pasted without its header.
        let read = columns
            .as_deref()
            .and_then(|c| row(line.text, c, line.span))
            .or_else(|| implied_columns(line.text).and_then(|c| row(line.text, c, line.span)));
        match read {
            Some(r) => facts.ps.push(r),
            // `ps m` prints each thread under its process, `-` for its PID.
            None if columns
                .as_deref()
                .is_some_and(|c| is_thread_row(line.text, c)) => {}
            None if columns.is_none() && is_lstart_row(line.text) => lstart.push(i),
            None => missed.push(i),
        }
    }
    // Rows of a layout with a start time and no header: read as a block.
    let texts: Vec<&str> = lstart.iter().map(|&i| lines[i].text).collect();
    match lstart_columns(&texts) {
        Some(c) => {
            for &i in &lstart {
                match row(lines[i].text, &c, lines[i].span) {
                    Some(r) => facts.ps.push(r),
                    None => missed.push(i),
                }
            }
        }
        None => missed.extend(lstart),
    }
    missed.sort_unstable();
    missed
}

/// The number of lines [`read`] did not recognise.
#[cfg(test)]
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    read(lines, facts).len() as u32
}

/// A thread row of `ps m` (`ps auxm`, `ps -eLm`): `-` where the PID is
/// (and where most per-process columns are), under its process's row.
fn is_thread_row(text: &str, columns: &[Column]) -> bool {
    let toks = tokens(text);
    columns
        .iter()
        .position(|c| *c == Column::Pid)
        .and_then(|i| toks.get(i))
        .is_some_and(|(_, t)| *t == "-")
}

/// Whitespace-separated tokens with their byte offsets.
fn tokens(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((s, &text[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &text[s..]));
    }
    out
}

/// How many tokens a start-time value takes: `Sun Nov 29 22:51:33 2026`
/// (`lstart`) is five, `Nov 27` (`start` of a process older than a day) is
/// two, `09:38`, `Nov27` and `2025` are one.
fn start_width(rest: &[(usize, &str)]) -> usize {
    const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let word = |i: usize| rest.get(i).map(|t| t.1);
    match word(0) {
        Some(w) if WEEKDAYS.contains(&w) && rest.len() >= 5 => 5,
        Some(w)
            if MONTHS.contains(&w)
                && word(1)
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) =>
        {
            2
        }
        _ => 1,
    }
}

/// Reads one row under `columns`; `None` when it does not fit them.
fn row(text: &str, columns: &[Column], span: Span) -> Option<PsRecord> {
    let toks = tokens(text);
    let mut next = 0;
    let mut pid = None;
    let mut ppid = None;
    let (mut user, mut stat, mut start, mut elapsed, mut cmd) = (None, None, None, None, None);
    for (i, column) in columns.iter().enumerate() {
        let last = i + 1 == columns.len();
        let width = match column {
            Column::Start => start_width(toks.get(next..)?),
            Column::Cmd if last => toks.len().saturating_sub(next),
            _ => 1,
        };
        let (first, _) = *toks.get(next)?;
        let (end_at, end_tok) = *toks.get(next + width.checked_sub(1)?)?;
        // The value as printed, inner spacing kept (`Sun Nov  9 …`).
        let value = &text[first..end_at + end_tok.len()];
        next += width;
        match column {
            Column::Pid => pid = Some(value.parse::<u32>().ok()?),
            Column::Ppid => ppid = Some(value.parse::<u32>().ok()?),
            Column::User => user = Some(value.to_owned()),
            Column::Stat => stat = Some(value.to_owned()),
            Column::Start => start = Some(value.to_owned()),
            Column::Elapsed => elapsed = Some(value.to_owned()),
            Column::Cmd => cmd = Some(value.to_owned()),
            Column::Other => {}
        }
    }
    if next != toks.len() {
        // More tokens than columns and no trailing command to take them.
        return None;
    }
    Some(PsRecord {
        pid: pid?,
        ppid,
        user,
        stat,
        started: start.or_else(|| elapsed.clone()),
        elapsed,
        cmd: cmd.unwrap_or_default(),
        span,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> (Vec<PsRecord>, u32) {
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        (facts.ps, unrecognized)
    }

    type Row<'a> = (
        u32,
        u32,
        Option<u32>,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
        &'a str,
    );

    fn rows(records: &[PsRecord]) -> Vec<Row<'_>> {
        records
            .iter()
            .map(|r| {
                (
                    r.span.line,
                    r.pid,
                    r.ppid,
                    r.user.as_deref(),
                    r.stat.as_deref(),
                    r.started.as_deref(),
                    r.cmd.as_str(),
                )
            })
            .collect()
    }

    #[test]
    fn ps_eo_with_elapsed() {
        let (records, unrecognized) = run("  PID  PPID USER         ELAPSED CMD
    1     0 root      12-03:11:52 /sbin/init
 4242     1 root           05:41 /opt/sglang/venv/bin/python3 -m sglang.launch_server --model-path /models/Llama-3.1-70B-Instruct --tp 2 --port 30000
 4318  4242 root           05:38 sglang::scheduler_TP0
 3981     1 root        01:02:13 sglang::scheduler_TP1");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&records),
            vec![
                (
                    2,
                    1,
                    Some(0),
                    Some("root"),
                    None,
                    Some("12-03:11:52"),
                    "/sbin/init"
                ),
                (
                    3,
                    4242,
                    Some(1),
                    Some("root"),
                    None,
                    Some("05:41"),
                    "/opt/sglang/venv/bin/python3 -m sglang.launch_server --model-path /models/Llama-3.1-70B-Instruct --tp 2 --port 30000"
                ),
                (
                    4,
                    4318,
                    Some(4242),
                    Some("root"),
                    None,
                    Some("05:38"),
                    "sglang::scheduler_TP0"
                ),
                (
                    5,
                    3981,
                    Some(1),
                    Some("root"),
                    None,
                    Some("01:02:13"),
                    "sglang::scheduler_TP1"
                ),
            ]
        );
    }

    #[test]
    fn ps_eo_with_lstart_and_stat() {
        let (records, unrecognized) =
            run("    PID    PPID USER                      STARTED STAT CMD
  20629       1 root     Sun Nov 29 22:51:33 2026 Ssl  /opt/ddtree/venv/bin/python3 serve.py
  20700   20629 svc-llm  Mon Nov  9 08:01:02 2026 D    sglang::scheduler_TP0
     77       2 root     Sun Nov 29 22:51:33 2026 I<   [kworker/0:1H-kblockd]");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&records),
            vec![
                (
                    2,
                    20629,
                    Some(1),
                    Some("root"),
                    Some("Ssl"),
                    Some("Sun Nov 29 22:51:33 2026"),
                    "/opt/ddtree/venv/bin/python3 serve.py"
                ),
                (
                    3,
                    20700,
                    Some(20629),
                    Some("svc-llm"),
                    Some("D"),
                    Some("Mon Nov  9 08:01:02 2026"),
                    "sglang::scheduler_TP0"
                ),
                (
                    4,
                    77,
                    Some(2),
                    Some("root"),
                    Some("I<"),
                    Some("Sun Nov 29 22:51:33 2026"),
                    "[kworker/0:1H-kblockd]"
                ),
            ]
        );
    }

    #[test]
    fn ps_ef_and_ps_aux() {
        let (records, unrecognized) = run("UID          PID    PPID  C STIME TTY          TIME CMD
root           1       0  0 Nov27 ?        00:00:09 /sbin/init splash
root        4242       1 99 09:38 ?        01:12:00 python3 -m sglang.launch_server --tp 2
root        5000    4242  0 2025 ?        00:00:00 [python3] <defunct>
USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND
root        4318 99.7  1.2 178123456 6543210 ?   Rl   12:00  40:11 sglang::scheduler_TP0
verylon+   18189  0.0  0.0   2920  1732 ?        S    Nov 27   0:00 sleep 30");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&records),
            vec![
                (
                    2,
                    1,
                    Some(0),
                    Some("root"),
                    None,
                    Some("Nov27"),
                    "/sbin/init splash"
                ),
                (
                    3,
                    4242,
                    Some(1),
                    Some("root"),
                    None,
                    Some("09:38"),
                    "python3 -m sglang.launch_server --tp 2"
                ),
                (
                    4,
                    5000,
                    Some(4242),
                    Some("root"),
                    None,
                    Some("2025"),
                    "[python3] <defunct>"
                ),
                (
                    6,
                    4318,
                    None,
                    Some("root"),
                    Some("Rl"),
                    Some("12:00"),
                    "sglang::scheduler_TP0"
                ),
                (
                    7,
                    18189,
                    None,
                    Some("verylon+"),
                    Some("S"),
                    Some("Nov 27"),
                    "sleep 30"
                ),
            ]
        );
    }

    /// Rows pasted without their header, from real threads: `ps -ef`
    /// (https://github.com/ai-dynamo/dynamo/issues/308, and zombies from
    /// https://github.com/apache/texera/issues/3462) and `ps aux`.
    #[test]
    fn headerless_ps_ef_and_ps_aux_rows() {
        let (records, unrecognized) = run("\
root      65931      1  0 19:08 ?        00:00:00 /root/venv/bin/python3 -c from multiprocessing.resource_tracker import main;main(23)
root      66204      1 99 19:08 ?        00:54:48 /root/venv/bin/python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=24, pipe_handle=26) --multiprocessing-fork
root     2011967  502717  0 Jun01 ?        00:00:19 [python3] <defunct>
user      4318  98.7  2.1 81234567 2789012 ?    Rl   2025 1234:56 python3 -m sglang.launch_server --port 30000");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&records),
            vec![
                (
                    1,
                    65931,
                    Some(1),
                    Some("root"),
                    None,
                    Some("19:08"),
                    "/root/venv/bin/python3 -c from multiprocessing.resource_tracker import main;main(23)"
                ),
                (
                    2,
                    66204,
                    Some(1),
                    Some("root"),
                    None,
                    Some("19:08"),
                    "/root/venv/bin/python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=24, pipe_handle=26) --multiprocessing-fork"
                ),
                (
                    3,
                    2011967,
                    Some(502717),
                    Some("root"),
                    None,
                    Some("Jun01"),
                    "[python3] <defunct>"
                ),
                (
                    4,
                    4318,
                    None,
                    Some("user"),
                    Some("Rl"),
                    Some("2025"),
                    "python3 -m sglang.launch_server --port 30000"
                ),
            ]
        );
    }

    /// Odd headers of real pastes: a hand-picked `USER PID PPID CMD`
    /// (https://github.com/sgl-project/sglang/issues/23627) and an indented
    /// `ps -o pid,ppid,stat,lstart,cmd` (https://github.com/vllm-project/vllm/issues/25127).
    #[test]
    fn headerless_bsd_ps_ef_rows() {
        // macOS (fixtures/real/697): the start `Tue05PM`/`10:19AM`, the
        // terminal `??`/`ttys005`, the time `11:00.35`.
        let (records, unrecognized) = run("\
    0  9526     1   0 Tue05PM ??        11:00.35 /Users/seal/.local/pipx/venvs/gpustack/bin/python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=7, pipe_handle=9) --multiprocessing-fork
  501 24836 24747   0 10:19AM ttys005    0:00.00 grep --color=auto gpustack");
        assert_eq!(unrecognized, 0);
        let got: Vec<_> = records
            .iter()
            .map(|r| (r.pid, r.ppid, r.started.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (9526, Some(1), Some("Tue05PM")),
                (24836, Some(24747), Some("10:19AM"))
            ]
        );
    }

    /// `ps -edf ww | grep clusterd` without its header (wazuh/wazuh#12783):
    /// the full format with BSD's `STAT` column before the time.
    #[test]
    fn headerless_ps_f_rows_with_a_stat_column() {
        let (records, unrecognized) = run("\
root      149472  147632  0 20:32 pts/2    SN+    0:04 watch ps -edf ww | grep clusterd
wazuh     527299       1  0 23:01 ?        SN     0:00 /var/ossec/framework/python/bin/python3 /var/ossec/framework/scripts/wazuh-clusterd.py
wazuh     549266       1  5 23:09 ?        SNl    0:00 /var/ossec/framework/python/bin/python3 /var/ossec/framework/scripts/wazuh-clusterd.py");
        assert_eq!(unrecognized, 0);
        let got: Vec<_> = records
            .iter()
            .map(|r| (r.pid, r.ppid, r.stat.as_deref(), r.started.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (149472, Some(147632), Some("SN+"), Some("20:32")),
                (527299, Some(1), Some("SN"), Some("23:01")),
                (549266, Some(1), Some("SNl"), Some("23:09")),
            ]
        );
        assert!(records[1].cmd.ends_with("wazuh-clusterd.py"));
    }

    /// `ps alx | grep zcashd` without its header (zcash/zcash
    /// doc/book/src/dev/regtest.md): the long format's shape names its
    /// columns, the user a number, the wait channel `futex_` or `-`.
    #[test]
    fn headerless_ps_alx_rows() {
        let (records, unrecognized) = run("\
0  1000   96247   96246  20   0 1426304 123952 futex_ SLl+ pts/12   0:18 /g/zcash/src/zcashd -datadir=/tmp/test9d907s8a/96246/node0 -keypool=1
0  1000   96274   96246  20   0 744092 85568 -      RLl+ pts/12     0:05 /g/zcash/src/zcashd -datadir=/tmp/test9d907s8a/96246/node1");
        assert_eq!(unrecognized, 0);
        let got: Vec<_> = records
            .iter()
            .map(|r| (r.pid, r.ppid, r.user.as_deref(), r.stat.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (96247, Some(96246), Some("1000"), Some("SLl+")),
                (96274, Some(96246), Some("1000"), Some("RLl+")),
            ]
        );
        assert!(records[0].cmd.starts_with("/g/zcash/src/zcashd -datadir="));
    }

    /// Rows with no header under `ps -eo pid,ppid,user,stat,lstart,etimes,pcpu,pmem,nlwp,args
    /// | grep '[v]llm'` (fixtures/real/504, cut): the typed list names the
    /// columns; without it the rows are no layout's.
    #[test]
    fn the_typed_column_list_reads_rows_without_a_header() {
        let text = "  824867  824670 root     Sl   Sat Jun  7 14:06:35 2025 4074589  0.0  0.1   71 /usr/bin/python3 /root/.local/share/pipx/venvs/gpustack/bin/vllm serve /data/models/modelscope/Qwen/Qwen3-Embedding-8B --max-model-len 8192";
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let command = "ps -eo pid,ppid,user,stat,lstart,etimes,pcpu,pmem,nlwp,args | grep '[v]llm'";
        assert!(read_typed(command, &lines, &mut facts).is_empty());
        assert_eq!(
            rows(&facts.ps),
            [(
                1,
                824867,
                Some(824670),
                Some("root"),
                Some("Sl"),
                Some("Sat Jun  7 14:06:35 2025"),
                "/usr/bin/python3 /root/.local/share/pipx/venvs/gpustack/bin/vllm serve /data/models/modelscope/Qwen/Qwen3-Embedding-8B --max-model-len 8192"
            )]
        );
        let mut facts = Facts::default();
        assert_eq!(read(&lines, &mut facts), [0]);
        // Lists in every spelling; no PID, no columns.
        assert!(typed_columns("sudo ps axo pid,etime,args").is_some());
        assert!(typed_columns("ps -o pid= -o args=").is_some());
        assert!(typed_columns("ps --format=pid,cmd").is_some());
        assert_eq!(typed_columns("ps -eo user,args"), None);
        assert_eq!(typed_columns("ps aux | grep -o pid"), None);
    }

    #[test]
    fn hand_picked_and_indented_headers() {
        let (records, unrecognized) = run("\
USER   PID      PPID  CMD
user   2505781  1     sglang::scheduler_DP0_TP0_EP0
      PID  PPID STAT                  STARTED CMD
      77637     1 R    Wed Sep 17 12:51:13 2025 VLLM::EngineCore");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&records),
            vec![
                (
                    2,
                    2505781,
                    Some(1),
                    Some("user"),
                    None,
                    None,
                    "sglang::scheduler_DP0_TP0_EP0"
                ),
                (
                    4,
                    77637,
                    Some(1),
                    None,
                    Some("R"),
                    Some("Wed Sep 17 12:51:13 2025"),
                    "VLLM::EngineCore"
                ),
            ]
        );
    }

    /// Rows of a script's `…,lstart,args` layout without their header
    /// (fixtures/real/640): the number that differs from row to row is the
    /// PID. The variant is the same layout with the PID first and two
    /// children of one parent; a single row, or rows where two numbers
    /// vary, say nothing of which is the PID and stay unread.
    #[test]
    fn headerless_lstart_rows_are_read_as_a_block() {
        let (records, unrecognized) = run("\
   1051  181171    1051 Mon May 19 14:17:44 2025 /usr/local/bin/ollama runner --model /usr/share/ollama/.ollama/models/blobs/sha256-5ff0 --ctx-size 49152 --port 35375
   1051  182420    1051 Mon May 19 14:27:14 2025 /usr/local/bin/ollama runner --model /usr/share/ollama/.ollama/models/blobs/sha256-5ff0 --ctx-size 24576 --port 33451");
        assert_eq!(unrecognized, 0);
        let got: Vec<_> = records
            .iter()
            .map(|r| (r.pid, r.ppid, r.started.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (181171, None, Some("Mon May 19 14:17:44 2025")),
                (182420, None, Some("Mon May 19 14:27:14 2025"))
            ]
        );
        assert!(
            records[0]
                .cmd
                .starts_with("/usr/local/bin/ollama runner --model")
        );
        let (records, _) = run("\
 4318  4242 Sun Nov 29 22:51:33 2026 sglang::scheduler_TP0
 4319  4242 Sun Nov 29 22:51:34 2026 sglang::scheduler_TP1");
        assert_eq!(
            records.iter().map(|r| r.pid).collect::<Vec<_>>(),
            [4318, 4319]
        );
        for text in [
            "   1051  181171    1051 Mon May 19 14:17:44 2025 /usr/local/bin/ollama runner",
            " 4318  4242 Sun Nov 29 22:51:33 2026 a\n 4319  4243 Sun Nov 29 22:51:34 2026 b",
        ] {
            let (records, unrecognized) = run(text);
            assert!(records.is_empty(), "{text}");
            assert_eq!(unrecognized as usize, text.lines().count());
        }
    }

    /// A `PID PPID TITLE` row without its header: the title a serving
    /// stack gives its process makes it one (batch O's 1010,
    /// https://github.com/vllm-project/vllm/pull/44751: a GPU worker left
    /// under PID 1 after its launcher timed out). Two numbers and a word
    /// that is no such title are not a row.
    #[test]
    fn headerless_rows_of_serving_process_titles() {
        let (records, unrecognized) =
            run("  34472  1  VLLM::Worker_DP1_EP1\n 4318 4242 sglang::scheduler_TP0");
        assert_eq!(unrecognized, 0);
        let got: Vec<_> = records
            .iter()
            .map(|r| (r.pid, r.ppid, r.cmd.as_str(), r.span.line))
            .collect();
        assert_eq!(
            got,
            [
                (34472, Some(1), "VLLM::Worker_DP1_EP1", 1),
                (4318, Some(4242), "sglang::scheduler_TP0", 2)
            ]
        );
        for text in [
            "  34472  1  python3",
            "  34472  1  VLLM::Worker_DP1_EP1 extra",
            "34472 VLLM::Worker_TP0",
        ] {
            let (records, _) = run(text);
            assert!(records.is_empty(), "{text}");
            assert!(!is_title_row(text), "{text}");
        }
    }

    /// A header a script's `awk` mangled (fixtures/real/698,
    /// gpustack/gpustack#4060: `$6/1024 " MB"` turned `RSS` into `0.00
    /// MB`); the variant is the same script printing `KiB` for another
    /// column order. A line of words that only looks like one is no header.
    #[test]
    fn a_header_a_script_mangled_keeps_its_columns() {
        let (records, unrecognized) = run("\
USER       PID        0.00 MB COMMAND
root       57704    780.16 MB /usr/local/bin/envoy -c etc/istio/proxy/envoy-rev.json --drain-time-s 45
root       74081    363.32 MB gpustack_model_instance_1574");
        assert_eq!(unrecognized, 0);
        let got: Vec<_> = records
            .iter()
            .map(|r| (r.pid, r.user.as_deref(), r.cmd.as_str()))
            .collect();
        assert_eq!(
            got[1],
            (74081, Some("root"), "gpustack_model_instance_1574")
        );
        assert_eq!(got[0].0, 57704);
        let (records, unrecognized) = run("\
PID    PPID  0 KiB  STAT CMD
 4242     1  81234 KiB Sl  python3 -m sglang.launch_server --port 30000");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&records),
            [(
                2,
                4242,
                Some(1),
                None,
                Some("Sl"),
                None,
                "python3 -m sglang.launch_server --port 30000"
            )]
        );
        for line in [
            "PID 1234 was killed by COMMAND",
            "USER PID 0.00 MB",
            "user PID 0.00 MB COMMAND",
        ] {
            assert_eq!(header(line), None, "{line}");
        }
    }

    /// https://github.com/sgl-project/sglang/issues/3752 (`top` in batch
    /// mode, its last row cut as the thread shows it).
    #[test]
    fn top_batch_output() {
        for line in [
            "top - 08:56:03 up 7:49, 3 users, load average: 20.25, 19.04, 13.06 ",
            "Tasks: 3035 total, 9 running, 3026 sleeping, 0 stopped, 0 zombie ",
            "%Cpu(s): 7.6 us, 2.8 sy, 0.0 ni, 89.5 id, 0.0 wa, 0.0 hi, 0.0 si, 0.0 st",
            "MiB Mem : 2063901.+total, 1534045.+free, 74650.8 used, 455205.5 buff/cache",
            "MiB Swap: 0.0 total, 0.0 free, 0.0 used. 1977538.+avail Mem ",
        ] {
            assert!(is_top_summary(line), "{line}");
        }
        assert!(!is_top_summary("top - the best of the logs"));
        assert!(!is_top_summary("Tasks: 3 of 5 done"));
        let (records, unrecognized) = run("PID USER PR NI VIRT RES SHR S %CPU %MEM TIME+ COMMAND
22098 root 20 0 125.2g 4.1g 1.4g R 300.7 0.2 260:17.42 sglang::schedul
22099 root 20 0 125.0g 4.1g 1.4g R 300.3 0.2 256:54.83 sglang::schedu
");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            rows(&records)[0],
            (
                2,
                22098,
                None,
                Some("root"),
                Some("R"),
                None,
                "sglang::schedul"
            )
        );
        assert_eq!(records[1].pid, 22099);
    }

    #[test]
    fn garbage_is_counted_and_never_panics() {
        let (records, unrecognized) = run("root 1 2 before any header
  PID  PPID CMD
 abc     1 not a pid
   12     x bad ppid
   13
   14    1 ok ✓ ünïcødé
99999999999 1 overflow
\u{1b}\u{0}\u{ff}");
        assert_eq!(unrecognized, 6);
        assert_eq!(
            rows(&records),
            vec![(6, 14, Some(1), None, None, None, "ok ✓ ünïcødé")]
        );
    }
}
