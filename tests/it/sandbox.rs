//! A simulated host for running generated remediation scripts for real:
//! `systemctl`, `nvidia-smi` and `ss` stand-ins on PATH
//! (fixtures/sandbox/bin) that read and write state files in a scratch
//! directory, and real dummy processes ("ghosts") whose PIDs, start times and
//! command lines are written into the bundle at test time.
//!
//! The scripts read the real /proc. A ghost cannot be put in a systemd
//! unit's cgroup without privileges, so the tests that need a process to
//! *pass* the cgroup guard point the script's `PROC=/proc` line at a tree of
//! symlinks to the ghosts' real /proc entries plus a simulated `cgroup` file
//! ([`Sandbox::with_fake_proc`]); every other line runs as generated.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rootcause::bundle::{self, Input};
use rootcause::source::{Source, SourceMap};

use crate::support::{self, fixtures, require_tool};

/// A scratch directory removed on drop.
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "rootcause-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir { path }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// A real process standing in for the one a bundle names: `sleep`, under a
/// process title of our choice, optionally ignoring SIGTERM. It is this
/// test's child: it is killed and reaped on drop, and a zombie it leaves
/// behind counts as gone for the scripts and the stand-ins alike.
pub struct Ghost {
    child: Child,
    pub pid: u32,
}

impl Ghost {
    pub fn spawn(title: Option<&str>, ignore_term: bool, seconds: u32) -> Ghost {
        let trap = if ignore_term { "trap '' TERM; " } else { "" };
        let exec = match title {
            Some(_) => format!("{trap}exec -a \"$0\" sleep {seconds}"),
            None => format!("{trap}exec sleep {seconds}"),
        };
        let child = Command::new("bash")
            .arg("-c")
            .arg(exec)
            .arg(title.unwrap_or("ghost"))
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn a ghost");
        let pid = child.id();
        let ghost = Ghost { child, pid };
        // Wait for the exec, so its command line and start time are final.
        let deadline = Instant::now() + Duration::from_secs(5);
        // Between fork and exec /proc shows the test binary, then bash; wait
        // for the final command line itself.
        let final_cmd = title.unwrap_or("sleep");
        while !ghost.cmdline().starts_with(final_cmd) {
            assert!(Instant::now() < deadline, "the ghost never exec'd");
            std::thread::sleep(Duration::from_millis(10));
        }
        ghost
    }

    pub fn sleeper() -> Ghost {
        Ghost::spawn(None, false, 300)
    }

    /// Reaps the ghost if it died, so a zombie does not count as alive.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// `/proc/PID/cmdline` with NULs as spaces, as the scripts compare it.
    pub fn cmdline(&self) -> String {
        // Right after the spawn the child may not have exec'd yet and its
        // command line reads empty: wait for it (a loaded CI machine).
        let read = || {
            fs::read(format!("/proc/{}/cmdline", self.pid))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .unwrap_or_default()
                .trim_end()
                .to_owned()
        };
        for _ in 0..200 {
            let line = read();
            if !line.is_empty() {
                return line;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        read()
    }

    /// `ps -o lstart`, as a capture would have recorded it.
    pub fn lstart(&self) -> String {
        require_tool("ps", "procps");
        let o = Command::new("ps")
            .args(["-o", "lstart=", "-p", &self.pid.to_string()])
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let lstart = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(!lstart.is_empty(), "ps shows no start time for the ghost");
        lstart
    }
}

impl Drop for Ghost {
    fn drop(&mut self) {
        // std never signals a child it has already reaped.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A simulated host: stand-ins on PATH, their state in files.
pub struct Sandbox {
    pub dir: TempDir,
}

impl Sandbox {
    pub fn new(tag: &str) -> Sandbox {
        let dir = TempDir::new(tag);
        fs::create_dir_all(dir.path.join("units")).unwrap();
        fs::create_dir_all(dir.path.join("proc")).unwrap();
        symlink("/proc/stat", dir.path.join("proc/stat")).unwrap();
        fs::write(dir.path.join("calls"), "").unwrap();
        fs::write(dir.path.join("gpus"), "").unwrap();
        Sandbox { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path.join(name)
    }

    pub fn write(&self, name: &str, text: &str) {
        fs::write(self.path(name), text).unwrap();
    }

    pub fn unit(&self, unit: &str, state: &str) {
        self.write(&format!("units/{unit}"), state);
    }

    /// Stopping `unit` sends SIGTERM to the ghost.
    pub fn owns(&self, unit: &str, ghost: &Ghost) {
        self.write(&format!("units/{unit}.pid"), &ghost.pid.to_string());
    }

    /// `index, uuid, MiB` lines: memory no process accounts for.
    pub fn gpus(&self, gpus: &[(u32, &str, u64)]) {
        let text: String = gpus
            .iter()
            .map(|(i, uuid, used)| format!("{i}, {uuid}, {used}\n"))
            .collect();
        self.write("gpus", &text);
    }

    /// The ghost holds `mib` on GPU `index` for as long as it lives.
    pub fn holds(&self, ghost: &Ghost, index: u32, mib: u64) {
        let mut text = fs::read_to_string(self.path("holders")).unwrap_or_default();
        text.push_str(&format!("{} {index} {mib}\n", ghost.pid));
        self.write("holders", &text);
    }

    /// The ghost appears in the simulated process table, in `unit`'s cgroup.
    pub fn in_cgroup(&self, ghost: &Ghost, unit: &str) {
        let dir = self.path(&format!("proc/{}", ghost.pid));
        fs::create_dir_all(&dir).unwrap();
        for file in ["stat", "cmdline"] {
            symlink(format!("/proc/{}/{file}", ghost.pid), dir.join(file)).unwrap();
        }
        fs::write(dir.join("cgroup"), format!("0::/system.slice/{unit}\n")).unwrap();
    }

    /// The ghost appears in the simulated process table as it is, in no
    /// unit (its real cgroup file).
    pub fn in_proc(&self, ghost: &Ghost) {
        let dir = self.path(&format!("proc/{}", ghost.pid));
        fs::create_dir_all(&dir).unwrap();
        for file in ["stat", "cmdline", "cgroup"] {
            symlink(format!("/proc/{}/{file}", ghost.pid), dir.join(file)).unwrap();
        }
    }

    /// The script with its process table pointed at the simulated one.
    pub fn with_fake_proc(&self, script: &str) -> String {
        let line = "\nPROC=/proc\n";
        assert_eq!(script.matches(line).count(), 1, "the PROC line moved");
        script.replace(line, &format!("\nPROC='{}'\n", self.path("proc").display()))
    }

    pub fn save(&self, name: &str, script: &str) -> PathBuf {
        let path = self.path(name);
        fs::write(&path, script).unwrap();
        path
    }

    pub fn run(&self, script: &Path, args: &[&str]) -> Output {
        self.command("bash", script, args).output().unwrap()
    }

    /// Runs the script without a controlling terminal, so a question reads
    /// no answer (and never blocks on the terminal of whoever runs the tests).
    pub fn run_detached(&self, script: &Path, args: &[&str]) -> Output {
        require_tool("setsid", "util-linux");
        let mut c = self.command("setsid", script, args);
        c.stdin(Stdio::null());
        c.output().unwrap()
    }

    fn command(&self, program: &str, script: &Path, args: &[&str]) -> Command {
        let path = format!(
            "{}:{}",
            fixtures().join("sandbox/bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut c = Command::new(program);
        if program != "bash" {
            c.arg("bash");
        }
        c.arg(script)
            .args(args)
            .env("PATH", path)
            .env("SANDBOX", &self.dir.path);
        c
    }

    pub fn calls(&self) -> String {
        fs::read_to_string(self.path("calls")).unwrap()
    }

    pub fn clear_calls(&self) {
        self.write("calls", "");
    }

    pub fn unit_state(&self, unit: &str) -> String {
        fs::read_to_string(self.path(&format!("units/{unit}")))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }
}

/// A bundle of the repo, each input passed through `edit` (which may drop
/// it by returning `None`), analysed like any other.
pub fn analyze_edited(
    dir: &Path,
    edit: impl Fn(&str, String) -> Option<String>,
) -> support::Outputs {
    let (original, _) =
        bundle::load(&[Input::Path(dir.to_owned())], &mut std::io::empty()).unwrap();
    let mut sources = SourceMap::new();
    for (_, s) in original.iter() {
        let text: String = (1..=s.line_count())
            .map(|n| format!("{}\n", s.raw_line(n)))
            .collect();
        if let Some(text) = edit(&s.name, text) {
            sources.add(Source::new(s.name.clone(), text.as_bytes()));
        }
    }
    support::analyze(sources)
}

pub fn log(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Shortens every grace period of 30 s to 2 s: the logic is the same.
pub fn short_grace(script: &str) -> String {
    script
        .lines()
        .map(|l| {
            if (l.starts_with("terminate_process ") || l.starts_with("kill_orphans "))
                && l.ends_with(" 30")
            {
                format!("{} 2\n", &l[..l.len() - 3])
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}
