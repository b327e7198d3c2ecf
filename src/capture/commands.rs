//! The read-only commands a capture runs, and running one: with a timeout
//! (the whole process group is killed), a fixed locale and no pager, its
//! outcome recorded whatever happens. A missing tool or a hung one is a gap,
//! never an error of the capture.

use std::io::{ErrorKind, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::context::{CommandRecord, CommandStatus};

/// One command and the bundle member it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub file: String,
    pub program: String,
    pub args: Vec<String>,
    /// Exit statuses that mean success (`systemctl status` exits 3 for a
    /// unit that is not running, which is exactly what we came for).
    pub ok: &'static [i32],
    /// Its end matters most (a journal prints oldest first): an output over
    /// the cap keeps its end rather than its start.
    pub tail: bool,
}

impl Spec {
    fn new(file: impl Into<String>, program: &str, args: &[&str]) -> Spec {
        Spec {
            file: file.into(),
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ok: &[0],
            tail: false,
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
        tail: true,
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

/// The most of one command's output a bundle keeps: a 2 GB `nvidia-smi -q
/// -x` or a year of journal must not take the host's memory.
pub const MEMBER_CAP: usize = 128 << 20;

/// How long the output of a command that has exited may stay open: a
/// process it left behind (`cmd &`, `setsid cmd`) may hold the pipe for
/// ever.
const AFTER_EXIT: Duration = Duration::from_secs(2);

/// Runs `spec` for at most `timeout`, reading at most [`MEMBER_CAP`] of its
/// output. Never fails: every outcome is a record.
pub fn run(spec: &Spec, timeout: Duration) -> Ran {
    run_capped(spec, timeout, MEMBER_CAP)
}

/// [`run`] with the output cap `cap`. The pipes are read on threads the
/// caller never waits for past the deadline: a descendant that keeps them
/// open (even one that left the process group with `setsid`) cannot hang
/// the capture.
pub fn run_capped(spec: &Spec, timeout: Duration, cap: usize) -> Ran {
    let started = Instant::now();
    let deadline = started + timeout;
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
        truncated: false,
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
    let keep = if spec.tail { Keep::Tail } else { Keep::Head };
    let stdout = Capped::read(child.stdout.take(), cap, keep);
    let stderr = Capped::read(child.stderr.take(), 64 << 10, Keep::Head);
    let waited = wait(&mut child, deadline, &stdout);
    // Whatever still holds the pipes after the command exited gets a moment,
    // never more than the deadline.
    let grace = match waited {
        Some(_) => (Instant::now() + AFTER_EXIT).min(deadline.max(Instant::now())),
        None => Instant::now() + Duration::from_millis(200),
    };
    let exited = waited.is_some();
    let out_open = !stdout.wait_done(grace);
    let err_open = !stderr.wait_done(grace);
    let open_after_exit = out_open || err_open;
    if open_after_exit {
        kill_group(&mut child);
    }
    let (out, seen, capped) = stdout.take();
    let (err, _, _) = stderr.take();
    let err = String::from_utf8_lossy(&err).trim().to_owned();
    let err = (!err.is_empty()).then(|| truncate(&err, 2000));
    let (status, code, mut detail) = match waited {
        None => (
            CommandStatus::Timeout,
            None,
            Some(format!("killed after {} s", timeout.as_secs())),
        ),
        // Stopped at the cap: however it ended, that was us.
        Some(Ok(s)) if capped && keep == Keep::Head => (CommandStatus::Ok, s.code(), None),
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
    let mut notes: Vec<String> = detail.take().into_iter().collect();
    if capped {
        notes.push(match keep {
            Keep::Tail => format!(
                "output cut to its last {} MiB of {} MiB read (the journal's end is kept)",
                cap >> 20,
                seen >> 20
            ),
            Keep::Head => format!(
                "output cut to its first {} MiB; the command was stopped there",
                cap >> 20
            ),
        });
    }
    if open_after_exit && exited {
        notes.push(
            "a process it left behind kept its output open; read until the deadline".to_owned(),
        );
    }
    detail = (!notes.is_empty()).then(|| notes.join("; "));
    let file = (!out.is_empty() || status == CommandStatus::Ok).then(|| spec.file.clone());
    Ran {
        record: CommandRecord {
            file,
            truncated: capped,
            ..record(status, code, detail, out.len())
        },
        stdout: out,
    }
}

/// Which part of an output over the cap is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// The first bytes; reading stops there.
    Head,
    /// The last bytes, from a line start; everything is read.
    Tail,
}

/// One pipe read on its own thread into a buffer of at most `cap` bytes.
struct Capped {
    state: std::sync::Arc<std::sync::Mutex<Piped>>,
    done: std::sync::mpsc::Receiver<()>,
}

#[derive(Default)]
struct Piped {
    bytes: std::collections::VecDeque<u8>,
    /// Bytes read in all.
    seen: usize,
    capped: bool,
    /// Set by the reader once it stopped at the cap (head only).
    full: bool,
}

impl Capped {
    fn read(pipe: Option<impl Read + Send + 'static>, cap: usize, keep: Keep) -> Capped {
        let state = std::sync::Arc::new(std::sync::Mutex::new(Piped::default()));
        let (tx, done) = std::sync::mpsc::channel();
        let shared = std::sync::Arc::clone(&state);
        thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut block = vec![0u8; 64 << 10];
                loop {
                    let n = match pipe.read(&mut block) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(_) => break,
                    };
                    let Ok(mut s) = shared.lock() else { break };
                    s.seen += n;
                    s.bytes.extend(&block[..n]);
                    if s.bytes.len() > cap {
                        s.capped = true;
                        match keep {
                            Keep::Head => {
                                s.bytes.truncate(cap);
                                s.full = true;
                                break;
                            }
                            Keep::Tail => {
                                let extra = s.bytes.len() - cap;
                                s.bytes.drain(..extra);
                            }
                        }
                    }
                }
            }
            let _ = tx.send(());
        });
        Capped { state, done }
    }

    /// Whether the reader stopped at the cap of a [`Keep::Head`] output.
    fn full(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.full)
    }

    /// Waits until the pipe is closed (or the cap reached), at most until
    /// `until`; `false` when it is still open.
    fn wait_done(&self, until: Instant) -> bool {
        let left = until.saturating_duration_since(Instant::now());
        !matches!(
            self.done.recv_timeout(left),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        )
    }

    /// What was read so far, how much was read in all, and whether the cap
    /// cut it. A tail starts at a line.
    fn take(&self) -> (Vec<u8>, usize, bool) {
        let Ok(mut s) = self.state.lock() else {
            return (Vec::new(), 0, false);
        };
        let mut bytes: Vec<u8> = std::mem::take(&mut s.bytes).into();
        if s.capped && !s.full {
            let from = memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |i| i + 1);
            bytes.drain(..from);
        }
        (bytes, s.seen, s.capped)
    }
}

/// `None` on timeout, after killing the command's process group. A command
/// whose output reached the cap is stopped there too.
fn wait(
    child: &mut Child,
    deadline: Instant,
    stdout: &Capped,
) -> Option<std::io::Result<std::process::ExitStatus>> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(Ok(status)),
            Ok(None) if stdout.full() => {
                kill_group(child);
                return Some(child.wait());
            }
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

    /// A command that exits but leaves a process holding its output, in its
    /// group or in a session of its own, cannot hang the capture (probe D9).
    #[test]
    fn a_descendant_holding_the_output_cannot_hang_the_capture() {
        for script in ["echo out; sleep 8 &", "echo out; setsid sleep 8 &"] {
            let started = Instant::now();
            let ran = run(
                &Spec::new("x.txt", "sh", &["-c", script]),
                Duration::from_secs(30),
            );
            assert!(
                started.elapsed() < Duration::from_secs(6),
                "{script}: {:?}",
                started.elapsed()
            );
            assert_eq!(ran.record.status, CommandStatus::Ok, "{script}");
            assert_eq!(ran.stdout, b"out\n", "{script}");
            assert!(
                ran.record
                    .detail
                    .as_deref()
                    .is_some_and(|d| d.contains("kept its output open")),
                "{script}: {:?}",
                ran.record.detail
            );
        }
    }

    /// Output over the cap is cut, recorded as truncated: a head stops the
    /// command, a journal's tail keeps its last lines from a line start.
    #[test]
    fn output_over_the_cap_is_cut_and_recorded() {
        let cap = 1 << 20;
        let head = run_capped(
            &Spec::new("x.txt", "sh", &["-c", "yes abcdefg"]),
            Duration::from_secs(20),
            cap,
        );
        assert_eq!(head.stdout.len(), cap);
        assert!(head.record.truncated);
        assert_eq!(head.record.status, CommandStatus::Ok);
        let mut spec = Spec::new(
            "j.json",
            "sh",
            &["-c", "seq 1 400000; echo the-failure-is-last"],
        );
        spec.tail = true;
        let tail = run_capped(&spec, Duration::from_secs(20), cap);
        assert!(tail.record.truncated && tail.stdout.len() <= cap);
        assert!(tail.stdout.ends_with(b"the-failure-is-last\n"));
        assert!(tail.stdout.first().is_some_and(u8::is_ascii_digit));
        let first = tail.stdout.split(|b| *b == b'\n').next().unwrap();
        let n: u64 = std::str::from_utf8(first).unwrap().parse().unwrap();
        assert!(n > 1, "the tail starts at a whole line, not the first");
        assert!(
            tail.record
                .detail
                .as_deref()
                .unwrap_or("")
                .contains("last 1 MiB")
        );
    }
}
