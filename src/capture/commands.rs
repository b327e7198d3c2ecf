//! The read-only commands a capture runs, and running one: with a timeout
//! (the whole process group is killed), a fixed locale and no pager, its
//! outcome recorded whatever happens. A missing tool or a hung one is a gap,
//! never an error of the capture.

use std::io::{ErrorKind, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::bundle::{CommandRecord, CommandStatus};

/// One command and the bundle member it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub file: String,
    pub program: String,
    pub args: Vec<String>,
    /// Exit statuses that mean success (`systemctl status` exits 3 for a
    /// unit that is not running, which is exactly what we came for).
    pub ok: &'static [i32],
}

impl Spec {
    fn new(file: impl Into<String>, program: &str, args: &[&str]) -> Spec {
        Spec {
            file: file.into(),
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ok: &[0],
        }
    }

    /// As a person would type it, for the manifest and the report's gaps.
    pub fn display(&self) -> String {
        let mut parts = vec![self.program.clone()];
        parts.extend(self.args.iter().map(|a| {
            if a.is_empty() || a.contains([' ', '\'', '"', '*']) {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a.clone()
            }
        }));
        parts.join(" ")
    }
}

/// The GPU views: the table, both CSV queries, and the full XML report.
pub fn gpu() -> Vec<Spec> {
    vec![
        Spec::new("nvidia-smi.txt", "nvidia-smi", &[]),
        Spec::new(
            "nvidia-smi-query-gpu.csv",
            "nvidia-smi",
            &[
                "--query-gpu=index,uuid,name,pci.bus_id,memory.used,memory.total",
                "--format=csv",
            ],
        ),
        Spec::new(
            "nvidia-smi-query-compute-apps.csv",
            "nvidia-smi",
            &[
                "--query-compute-apps=gpu_uuid,pid,process_name,used_gpu_memory",
                "--format=csv",
            ],
        ),
        Spec::new("nvidia-smi-q.xml", "nvidia-smi", &["-q", "-x"]),
    ]
}

/// Every process, with start time and full command line (`-ww`: never cut
/// to a terminal's width).
pub fn ps() -> Spec {
    Spec::new(
        "ps.txt",
        "ps",
        &["-ww", "-eo", "pid,ppid,user,lstart,stat,cmd"],
    )
}

/// A unit name as a file name: units may hold `@` and `\x2d` escapes.
pub fn file_safe(unit: &str) -> String {
    unit.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "@._-:".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `systemctl status` (with the journal tail) and `systemctl show` of a unit.
pub fn unit(unit: &str) -> Vec<Spec> {
    let safe = file_safe(unit);
    let mut status = Spec::new(
        format!("systemctl-status-{safe}.txt"),
        "systemctl",
        &["status", "--no-pager", "--full", "--lines=50", "--", unit],
    );
    status.ok = &[0, 3];
    vec![
        status,
        Spec::new(
            format!("systemctl-show-{safe}.txt"),
            "systemctl",
            &["show", "--no-pager", "--", unit],
        ),
    ]
}

fn journal(file: &str, since: &str, dir: Option<&Path>, filter: &[String]) -> Spec {
    let mut args: Vec<String> = vec![
        "-o".into(),
        "json".into(),
        "--no-pager".into(),
        "--since".into(),
        since.into(),
    ];
    if let Some(dir) = dir {
        args.push("--directory".into());
        args.push(dir.display().to_string());
    }
    args.extend(filter.iter().cloned());
    Spec {
        file: file.to_owned(),
        program: "journalctl".to_owned(),
        args,
        ok: &[0],
    }
}

/// The journal of the units (PID 1's messages about them included), as JSON.
pub fn unit_journal(units: &[String], since: &str, dir: Option<&Path>) -> Spec {
    let filter: Vec<String> = units
        .iter()
        .flat_map(|u| ["-u".into(), u.clone()])
        .collect();
    journal("journal-units.json", since, dir, &filter)
}

/// The kernel's messages (Xid, OOM killer), across boots, as JSON.
pub fn kernel_journal(since: &str, dir: Option<&Path>) -> Spec {
    journal(
        "journal-kernel.json",
        since,
        dir,
        &["_TRANSPORT=kernel".to_owned()],
    )
}

/// What one command produced.
#[derive(Debug, Clone)]
pub struct Ran {
    pub record: CommandRecord,
    pub stdout: Vec<u8>,
}

/// Runs `spec` for at most `timeout`. Never fails: every outcome is a record.
pub fn run(spec: &Spec, timeout: Duration) -> Ran {
    let started = Instant::now();
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Stable, parseable output: English dates, no pager, no colour.
        .env("LC_ALL", "C")
        .env("SYSTEMD_PAGER", "")
        .env("PAGER", "cat")
        .env("SYSTEMD_COLORS", "0");
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group, so a timeout kills what it spawned too.
        command.process_group(0);
    }
    let record = |status, exit_code, detail: Option<String>, bytes: usize| CommandRecord {
        file: Some(spec.file.clone()),
        command: spec.display(),
        status,
        exit_code,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        bytes: bytes as u64,
        detail,
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let (status, detail) = if e.kind() == ErrorKind::NotFound {
                (
                    CommandStatus::Missing,
                    format!("{}: command not found", spec.program),
                )
            } else {
                (CommandStatus::Error, format!("{}: {e}", spec.program))
            };
            return Ran {
                record: CommandRecord {
                    file: None,
                    ..record(status, None, Some(detail), 0)
                },
                stdout: Vec::new(),
            };
        }
    };
    let stdout = reader(child.stdout.take());
    let stderr = reader(child.stderr.take());
    let waited = wait(&mut child, timeout);
    let out = stdout.join().unwrap_or_default();
    let err = String::from_utf8_lossy(&stderr.join().unwrap_or_default())
        .trim()
        .to_owned();
    let err = (!err.is_empty()).then(|| truncate(&err, 2000));
    let (status, code, detail) = match waited {
        None => (
            CommandStatus::Timeout,
            None,
            Some(format!("killed after {} s", timeout.as_secs())),
        ),
        Some(Ok(s)) => match s.code() {
            Some(c) if spec.ok.contains(&c) => (CommandStatus::Ok, Some(c), err),
            Some(c) => (
                CommandStatus::Failed,
                Some(c),
                err.or_else(|| first_line(&out)),
            ),
            None => (
                CommandStatus::Failed,
                None,
                Some(format!("killed by a signal ({s})")),
            ),
        },
        Some(Err(e)) => (CommandStatus::Error, None, Some(e.to_string())),
    };
    let file = (!out.is_empty() || status == CommandStatus::Ok).then(|| spec.file.clone());
    Ran {
        record: CommandRecord {
            file,
            ..record(status, code, detail, out.len())
        },
        stdout: out,
    }
}

fn reader(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut buf);
        }
        buf
    })
}

/// `None` on timeout, after killing the command's process group.
fn wait(child: &mut Child, timeout: Duration) -> Option<std::io::Result<std::process::ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(Ok(status)),
            Ok(None) if Instant::now() >= deadline => {
                kill_group(child);
                let _ = child.wait();
                return None;
            }
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(e) => return Some(Err(e)),
        }
    }
}

#[cfg(unix)]
fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative PID signals the process group the
        // child leads (made by `process_group(0)`); it touches no memory.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

#[cfg(not(unix))]
fn kill_group(child: &mut Child) {
    let _ = child.kill();
}

fn first_line(out: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(out);
    text.lines()
        .find(|l| !l.trim().is_empty())
        .map(|l| truncate(l.trim(), 2000))
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_display_as_typed_and_units_become_file_names() {
        assert_eq!(ps().display(), "ps -ww -eo pid,ppid,user,lstart,stat,cmd");
        let j = unit_journal(&["a.service".into()], "-24h", None);
        assert_eq!(
            j.display(),
            "journalctl -o json --no-pager --since -24h -u a.service"
        );
        let k = kernel_journal("2026-11-27 00:00", Some(Path::new("/mnt/j")));
        assert_eq!(
            k.display(),
            "journalctl -o json --no-pager --since '2026-11-27 00:00' --directory /mnt/j _TRANSPORT=kernel"
        );
        assert_eq!(
            file_safe(r"getty@tty1\x2d.service"),
            "getty@tty1_x2d.service"
        );
    }

    #[test]
    fn every_outcome_is_a_record() {
        let missing = run(
            &Spec::new("x.txt", "rootcause-no-such-tool", &[]),
            Duration::from_secs(5),
        );
        assert_eq!(missing.record.status, CommandStatus::Missing);
        assert_eq!(missing.record.file, None);

        let ok = run(
            &Spec::new("x.txt", "sh", &["-c", "echo hi"]),
            Duration::from_secs(5),
        );
        assert_eq!(
            (ok.record.status, ok.record.exit_code, ok.stdout.as_slice()),
            (CommandStatus::Ok, Some(0), &b"hi\n"[..])
        );
        assert_eq!(ok.record.bytes, 3);

        let failed = run(
            &Spec::new("x.txt", "sh", &["-c", "echo oops >&2; exit 9"]),
            Duration::from_secs(5),
        );
        assert_eq!(
            (
                failed.record.status,
                failed.record.exit_code,
                failed.record.detail.as_deref()
            ),
            (CommandStatus::Failed, Some(9), Some("oops"))
        );

        // The child's own children die with it: the pipe closes at once.
        let started = Instant::now();
        let hung = run(
            &Spec::new("x.txt", "sh", &["-c", "echo partial; sleep 30; echo never"]),
            Duration::from_millis(300),
        );
        assert_eq!(hung.record.status, CommandStatus::Timeout);
        assert_eq!(hung.stdout, b"partial\n");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
