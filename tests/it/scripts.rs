//! Remediation scripts: every fixture's script passes shellcheck, a dry run
//! touches nothing, and the seed incident's script is run for real against a
//! simulated host (systemctl and nvidia-smi stand-ins, a live dummy process).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use rootcause::bundle::{self, Input};
use rootcause::source::{Source, SourceMap};

use crate::support::{self, check, fixtures, incident, require_tool};

fn incident_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(fixtures().join("incidents"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("manifest.json").exists())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn every_fixture_script_passes_shellcheck() {
    require_tool("shellcheck", "shellcheck");
    let tmp = TempDir::new("shellcheck");
    for dir in incident_dirs() {
        let script = tmp.path.join("fix.sh");
        fs::write(&script, check(&dir).script).unwrap();
        let o = Command::new("shellcheck")
            .arg("--severity=style")
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "shellcheck failed on the script of {}:\n{}",
            dir.display(),
            String::from_utf8_lossy(&o.stdout)
        );
    }
}

/// A scratch directory removed on drop.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new(tag: &str) -> TempDir {
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

/// A simulated host: stand-ins on PATH, unit states and GPU memory in files,
/// and a real process playing the ghost.
struct Sandbox {
    dir: TempDir,
    ghost: Option<Child>,
    ghost_pid: u32,
}

impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        let dir = TempDir::new(tag);
        fs::create_dir_all(dir.path.join("units")).unwrap();
        fs::write(dir.path.join("calls"), "").unwrap();
        let ghost = Command::new("sleep")
            .arg("300")
            .spawn()
            .expect("spawn the ghost");
        let ghost_pid = ghost.id();
        Sandbox {
            dir,
            ghost: Some(ghost),
            ghost_pid,
        }
    }

    fn write(&self, name: &str, text: &str) {
        fs::write(self.dir.path.join(name), text).unwrap();
    }

    /// The seed incident with the ghost's PID in place of 20629, analysed
    /// like any bundle, and its script written into the sandbox.
    fn script(&self) -> PathBuf {
        let dir = incident("2026-11-27-ct200-ghost-ddtree");
        let (original, _) = bundle::load(&[Input::Path(dir)], &mut std::io::empty()).unwrap();
        let mut sources = SourceMap::new();
        for (id, s) in original.iter() {
            let text: String = (1..=s.line_count())
                .map(|n| format!("{}\n", s.raw_line(n)))
                .collect::<String>()
                .replace("20629", &self.ghost_pid.to_string());
            let _ = id;
            sources.add(Source::new(s.name.clone(), text.as_bytes()));
        }
        let path = self.dir.path.join("fix.sh");
        fs::write(&path, support::analyze(sources).script).unwrap();
        path
    }

    fn run(&self, script: &Path, args: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            fixtures().join("sandbox/bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new("bash")
            .arg(script)
            .args(args)
            .env("PATH", path)
            .env("SANDBOX", &self.dir.path)
            .output()
            .unwrap()
    }

    fn calls(&self) -> String {
        fs::read_to_string(self.dir.path.join("calls")).unwrap()
    }

    fn unit_state(&self, unit: &str) -> String {
        fs::read_to_string(self.dir.path.join("units").join(unit))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// Reaps the ghost if something killed it, so it does not linger as a
    /// zombie that still looks alive in /proc.
    fn ghost_alive(&mut self) -> bool {
        let child = self.ghost.as_mut().unwrap();
        matches!(child.try_wait(), Ok(None))
    }

    fn kill_ghost(&mut self) {
        let child = self.ghost.as_mut().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// The unit "owns" the ghost: stopping it kills the ghost. A reaper
    /// thread collects the ghost so that it is gone, not a zombie.
    fn ghost_owned_by(&mut self, unit: &str) {
        self.write(&format!("units/{unit}.pid"), &self.ghost_pid.to_string());
        let mut child = self.ghost.take().unwrap();
        let handle = std::thread::spawn(move || {
            let _ = child.wait();
        });
        drop(handle);
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(child) = self.ghost.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("kill")
            .arg(self.ghost_pid.to_string())
            .output();
    }
}

const BUSY: &str = "0, 55295\n1, 0\n2, 0\n3, 0\n4, 0\n5, 0\n6, 0\n7, 0\n";
const FREE: &str = "0, 0\n1, 0\n2, 0\n3, 0\n4, 0\n5, 0\n6, 0\n7, 0\n";

fn log(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn dry_run_changes_nothing() {
    let mut sb = Sandbox::new("dry");
    sb.write("gpus", BUSY);
    sb.write("units/ddtree-qwen.service", "active");
    let script = sb.script();
    // The ghost is alive but, in this sandbox, outside the unit's cgroup:
    // the dry run checks the guard and says it would stop there.
    let o = sb.run(&script, &[]);
    assert_eq!(o.status.code(), Some(12), "{}", log(&o));
    assert!(log(&o).contains("dry run: would run: systemctl stop -- ddtree-qwen.service"));
    assert!(log(&o).contains("refusing to signal"));
    assert_eq!(
        sb.calls(),
        "",
        "a dry run must not call systemctl or nvidia-smi"
    );
    assert!(sb.ghost_alive());
    assert_eq!(sb.unit_state("ddtree-qwen.service"), "active");

    // Once the PID is gone every step is printed and nothing runs.
    sb.kill_ghost();
    let o = sb.run(&script, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    for step in [
        "would poll nvidia-smi",
        "would run: systemctl restart -- sglang-k26.service",
        "would wait up to",
    ] {
        assert!(log(&o).contains(step), "{step} missing from:\n{}", log(&o));
    }
    assert_eq!(sb.calls(), "");
}

#[test]
fn apply_stops_the_holder_waits_for_memory_and_restarts_the_target() {
    let mut sb = Sandbox::new("happy");
    sb.write("gpus", BUSY);
    sb.write("units/ddtree-qwen.service", "active");
    sb.write("units/ddtree-qwen.service.frees", FREE);
    sb.write("units/sglang-k26.service", "failed");
    sb.ghost_owned_by("ddtree-qwen.service");
    let script = sb.script();
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    let calls = sb.calls();
    let order: Vec<&str> = calls.lines().collect();
    assert_eq!(order[0], "systemctl stop -- ddtree-qwen.service");
    assert!(
        calls.contains("systemctl restart -- sglang-k26.service"),
        "{calls}"
    );
    assert_eq!(sb.unit_state("ddtree-qwen.service"), "inactive");
    assert_eq!(sb.unit_state("sglang-k26.service"), "active");
    assert!(log(&o).contains("all steps done"));
}

#[test]
fn memory_that_never_frees_fails_the_wait_and_does_not_restart() {
    let mut sb = Sandbox::new("stuck");
    sb.write("gpus", BUSY);
    sb.write("units/ddtree-qwen.service", "active");
    sb.ghost_owned_by("ddtree-qwen.service");
    let script = fs::read_to_string(sb.script()).unwrap();
    // A short timeout keeps the test fast; the logic is the same.
    let script_path = sb.dir.path.join("fast.sh");
    fs::write(
        &script_path,
        script.replace(
            "wait_gpu_memory_free 13 1024 120",
            "wait_gpu_memory_free 13 1024 3",
        ),
    )
    .unwrap();
    let o = sb.run(&script_path, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(13), "{}", log(&o));
    assert!(log(&o).contains("memory still in use"), "{}", log(&o));
    assert!(
        !sb.calls().contains("restart"),
        "the target must not be restarted"
    );
}

#[test]
fn a_reused_pid_is_never_signalled() {
    let mut sb = Sandbox::new("reused");
    sb.write("gpus", BUSY);
    sb.write("units/ddtree-qwen.service", "active");
    // Stopping the unit does not kill the ghost: the PID now belongs to an
    // unrelated process outside ddtree-qwen.service's cgroup.
    let script = sb.script();
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(12), "{}", log(&o));
    assert!(log(&o).contains("refusing to signal"), "{}", log(&o));
    assert!(sb.ghost_alive(), "the unrelated process must survive");
    assert!(!sb.calls().contains("restart"));
}
