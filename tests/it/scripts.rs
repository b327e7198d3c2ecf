//! Remediation scripts: every generated script passes shellcheck, and the
//! scripts of the seed incident and of the leftover-SGLang incident are run
//! for real against a simulated host (sandbox.rs): dry run, happy path,
//! running twice, SIGTERM ignored, PID reused, GPU index changed, memory that
//! never frees, a target that fails again, a declined question, and the sweep
//! of a stopped unit's leftover processes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::sandbox::{Ghost, Sandbox, TempDir, analyze_edited, log, short_grace};
use crate::support::{check, fixtures, incident, require_tool};

fn bundles(group: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(fixtures().join(group))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("manifest.json").exists())
        .collect();
    dirs.sort();
    dirs
}

/// Fails with shellcheck's findings unless the script is clean at every
/// severity, style included.
pub fn shellcheck(script: &str, what: &str) {
    require_tool("shellcheck", "shellcheck");
    let tmp = TempDir::new("shellcheck");
    let path = tmp.path.join("fix.sh");
    fs::write(&path, script).unwrap();
    let o = Command::new("shellcheck")
        .arg("--severity=style")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "shellcheck failed on the script of {what}:\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn every_fixture_script_passes_shellcheck() {
    for dir in bundles("incidents").into_iter().chain(bundles("hostile")) {
        shellcheck(&check(&dir).script, &dir.display().to_string());
    }
}

/// The part of a script after the fixed prelude: the generated steps.
pub fn steps(script: &str) -> &str {
    let start = script
        .find("\nlog \"rootcause remediation for ")
        .expect("the steps follow the prelude");
    &script[start..]
}

const SEED: &str = "2026-11-27-ct200-ghost-ddtree";
const SEED_START: &str = "Tue Nov 24 14:02:17 2026";
const SEED_CMD: &str = "/opt/ddtree/venv/bin/python3 /opt/ddtree/serve.py --model /models/Qwen2.5-32B-Instruct --draft-model /models/Qwen2.5-0.5B-Instruct --port 8100";
const SEED_GPU0: &str = "GPU-5a5b4eef-ee9c-40f5-977e-2242f48837be";

/// What of the recorded process the ghost takes over.
#[derive(Clone, Copy, PartialEq)]
enum Same {
    /// PID, start time and command line: it is the process of the report.
    Process,
    /// Only the PID: another process got the recorded PID.
    PidOnly,
    /// PID and start time, not the command line.
    PidAndStart,
}

/// The seed incident's script with the ghost in place of PID 20629.
fn seed_script(ghost: &Ghost, same: Same) -> String {
    script_for(&incident(SEED), ghost, "20629", SEED_START, SEED_CMD, same)
}

fn script_for(dir: &Path, ghost: &Ghost, pid: &str, start: &str, cmd: &str, same: Same) -> String {
    let (new_pid, new_start, new_cmd) = (ghost.pid.to_string(), ghost.lstart(), ghost.cmdline());
    analyze_edited(dir, |_, text| {
        let mut t = text.replace(pid, &new_pid);
        if same != Same::PidOnly {
            t = t.replace(start, &new_start);
        }
        if same == Same::Process {
            t = t.replace(cmd, &new_cmd);
        }
        Some(t)
    })
    .script
}

/// ct200: eight GPUs, GPU 0 with 9 MiB of driver overhead,
/// ddtree-qwen.service running, sglang-k26.service failed.
fn seed_host(sb: &Sandbox) {
    let uuids: Vec<String> = (0..8)
        .map(|i| match i {
            0 => SEED_GPU0.to_owned(),
            i => format!("GPU-0000000{i}-0000-4000-8000-00000000000{i}"),
        })
        .collect();
    let gpus: Vec<(u32, &str, u64)> = uuids
        .iter()
        .enumerate()
        .map(|(i, u)| (i as u32, u.as_str(), if i == 0 { 9 } else { 0 }))
        .collect();
    sb.gpus(&gpus);
    sb.unit("ddtree-qwen.service", "active");
    sb.unit("sglang-k26.service", "failed");
}

/// The ghost is ddtree-qwen.service's process on the live host: it holds
/// GPU 0, sits in the unit's cgroup (the script's process table is the
/// simulated one), and stopping the unit sends it SIGTERM.
fn seed_holder(sb: &Sandbox, ghost: &Ghost, mib: u64) {
    sb.holds(ghost, 0, mib);
    sb.owns("ddtree-qwen.service", ghost);
    sb.in_cgroup(ghost, "ddtree-qwen.service");
}

#[test]
fn dry_run_changes_nothing() {
    let sb = Sandbox::new("dry");
    let mut ghost = Ghost::sleeper();
    seed_host(&sb);
    sb.holds(&ghost, 0, 55286);
    let script = sb.save("fix.sh", &seed_script(&ghost, Same::Process));
    // The ghost is alive but outside ddtree-qwen.service's cgroup: the dry
    // run checks the guard and says it would stop there, before the unit.
    let o = sb.run(&script, &[]);
    assert_eq!(o.status.code(), Some(11), "{}", log(&o));
    assert!(
        log(&o).contains(&format!(
            "refusing to stop ddtree-qwen.service: PID {} is not in its cgroup now",
            ghost.pid
        )),
        "{}",
        log(&o)
    );
    assert_eq!(
        sb.calls(),
        "",
        "a dry run must not call systemctl or nvidia-smi"
    );
    assert!(ghost.alive());
    assert_eq!(sb.unit_state("ddtree-qwen.service"), "active");

    // Once the PID is gone every step is printed and nothing runs.
    drop(ghost);
    let o = sb.run(&script, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    for step in [
        "is gone: ddtree-qwen.service no longer holds what the report names; not stopping it",
        "is gone: nothing to terminate",
        "would check GPU 0 against the recorded UUIDs",
        "would run: systemctl restart -- sglang-k26.service",
        "would wait up to",
        "advice (not executed): if ddtree-qwen.service is a leftover",
    ] {
        assert!(log(&o).contains(step), "{step} missing from:\n{}", log(&o));
    }
    assert_eq!(sb.calls(), "");
    assert_eq!(sb.unit_state("sglang-k26.service"), "failed");
}

#[test]
fn apply_stops_the_holder_waits_for_memory_restarts_the_target_and_can_run_twice() {
    let sb = Sandbox::new("happy");
    let mut ghost = Ghost::sleeper();
    seed_host(&sb);
    seed_holder(&sb, &ghost, 55286);
    let script = sb.save(
        "fix.sh",
        &sb.with_fake_proc(&seed_script(&ghost, Same::Process)),
    );
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    let calls = sb.calls();
    let order: Vec<&str> = calls.lines().collect();
    // The unit is stopped only once the live host shows the PID on GPU 0.
    assert_eq!(
        order[..3],
        [
            "systemctl is-active -- ddtree-qwen.service",
            "nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader",
            "systemctl stop -- ddtree-qwen.service"
        ]
    );
    let uuid_check = order
        .iter()
        .position(|c| c.contains("--query-gpu=index,uuid"))
        .expect("the GPU identity is checked");
    let restart = order
        .iter()
        .position(|c| *c == "systemctl restart -- sglang-k26.service")
        .expect("the target is restarted");
    assert!(uuid_check < restart, "{calls}");
    assert!(!ghost.alive(), "stopping the unit ended the holder");
    assert_eq!(sb.unit_state("ddtree-qwen.service"), "inactive");
    assert_eq!(sb.unit_state("sglang-k26.service"), "active");
    assert!(!calls.contains("disable"), "the advice is never executed");
    assert!(log(&o).contains("all steps done"));

    // Running it again is safe: nothing left to stop or signal.
    sb.clear_calls();
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    assert!(
        log(&o).contains(
            "is gone: ddtree-qwen.service no longer holds what the report names; not stopping it"
        ),
        "{}",
        log(&o)
    );
    assert!(log(&o).contains("is gone: nothing to terminate"));
    assert!(!sb.calls().contains("stop"), "{}", sb.calls());
    assert_eq!(sb.unit_state("sglang-k26.service"), "active");
}

#[test]
fn memory_that_never_frees_fails_the_wait_and_does_not_restart() {
    let sb = Sandbox::new("stuck");
    let ghost = Ghost::sleeper();
    seed_host(&sb);
    // The holder exits but the driver keeps its memory.
    sb.gpus(&[(0, SEED_GPU0, 55295)]);
    seed_holder(&sb, &ghost, 1);
    let script = sb.with_fake_proc(&seed_script(&ghost, Same::Process));
    let fast = script.replace(
        &format!("wait_gpu_memory_free 1024 120 '0:{SEED_GPU0}'"),
        &format!("wait_gpu_memory_free 1024 3 '0:{SEED_GPU0}'"),
    );
    assert_ne!(fast, script, "the wait step moved");
    let o = sb.run(&sb.save("fast.sh", &fast), &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(13), "{}", log(&o));
    assert!(
        log(&o).contains("memory still in use after 3s: GPU 0: 55295 MiB"),
        "{}",
        log(&o)
    );
    assert!(
        !sb.calls().contains("restart"),
        "the target must not be restarted"
    );
    assert_eq!(sb.unit_state("sglang-k26.service"), "failed");
}

#[test]
fn a_reused_pid_is_never_signalled() {
    let sb = Sandbox::new("reused");
    let mut ghost = Ghost::sleeper();
    seed_host(&sb);
    // Stopping the unit does not end the ghost: the PID now belongs to an
    // unrelated process that started after the capture, in the same cgroup
    // and on the same GPU.
    sb.holds(&ghost, 0, 55286);
    sb.in_cgroup(&ghost, "ddtree-qwen.service");
    let script = sb.save(
        "fix.sh",
        &sb.with_fake_proc(&seed_script(&ghost, Same::PidOnly)),
    );
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(12), "{}", log(&o));
    assert!(log(&o).contains("refusing to signal"), "{}", log(&o));
    assert!(
        log(&o).contains(&format!("not {SEED_START} as recorded: the PID was reused")),
        "{}",
        log(&o)
    );
    assert!(ghost.alive(), "the unrelated process must survive");
    assert!(!sb.calls().contains("restart"));

    // Same start time, another command line: refused as well.
    let script = sb.save(
        "fix2.sh",
        &sb.with_fake_proc(&seed_script(&ghost, Same::PidAndStart)),
    );
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(12), "{}", log(&o));
    assert!(
        log(&o).contains(&format!("PID {} now runs: sleep 300", ghost.pid)),
        "{}",
        log(&o)
    );
    assert!(ghost.alive());
}

#[test]
fn a_holder_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let sb = Sandbox::new("escalate");
    let mut ghost = Ghost::spawn(None, true, 300);
    seed_host(&sb);
    sb.holds(&ghost, 0, 55286);
    // The stop only sends SIGTERM (KillMode=process), which is ignored; the
    // process stays in the unit's cgroup.
    sb.owns("ddtree-qwen.service", &ghost);
    sb.in_cgroup(&ghost, "ddtree-qwen.service");
    let script = sb.with_fake_proc(&short_grace(&seed_script(&ghost, Same::Process)));
    let o = sb.run(&sb.save("fix.sh", &script), &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    let out = log(&o);
    let term = out
        .find(&format!("sending SIGTERM to PID {}", ghost.pid))
        .expect(&out);
    let kill = out
        .find(&format!(
            "PID {} survived SIGTERM for 2s: sending SIGKILL",
            ghost.pid
        ))
        .expect(&out);
    assert!(
        term < kill,
        "SIGKILL only after SIGTERM and the grace period"
    );
    assert!(!ghost.alive());
    assert!(out.contains("GPU 0 memory released"), "{out}");
    assert_eq!(sb.unit_state("sglang-k26.service"), "active");
}

#[test]
fn a_process_outside_any_unit_that_ignores_sigterm_is_killed() {
    let sb = Sandbox::new("nounit");
    let mut ghost = Ghost::spawn(None, true, 300);
    seed_host(&sb);
    sb.holds(&ghost, 0, 55286);
    // The same incident without the holder's unit: no status of it and no
    // journal lines of it. The guards are its start time and command line,
    // read from the real /proc.
    let (pid, start, cmd) = (ghost.pid.to_string(), ghost.lstart(), ghost.cmdline());
    let out = analyze_edited(&incident(SEED), |name, text| {
        let text = match name {
            "systemctl-status-ddtree-qwen.txt" => return None,
            "journal.txt" => text
                .lines()
                .filter(|l| !l.contains("ddtree") && !l.contains("python3[20629]"))
                .map(|l| format!("{l}\n"))
                .collect(),
            _ => text,
        };
        Some(
            text.replace("20629", &pid)
                .replace(SEED_START, &start)
                .replace(SEED_CMD, &cmd),
        )
    });
    assert!(
        out.script.contains(&format!(
            "terminate_process {pid} '' 'sleep 300' '{start}' '0:{SEED_GPU0}' 30"
        )),
        "{}",
        out.script
    );
    let o = sb.run(
        &sb.save("fix.sh", &short_grace(&out.script)),
        &["--apply", "--yes"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    assert!(
        log(&o).contains("survived SIGTERM for 2s: sending SIGKILL"),
        "{}",
        log(&o)
    );
    assert!(!ghost.alive());
    assert_eq!(sb.unit_state("sglang-k26.service"), "active");
}

#[test]
fn a_changed_gpu_index_stops_before_waiting() {
    let sb = Sandbox::new("uuid");
    let ghost = Ghost::sleeper();
    seed_host(&sb);
    // After a reboot index 0 is another GPU.
    sb.gpus(&[
        (0, "GPU-9ad05367-4144-422e-e5a9-b50411e0d8dd", 0),
        (1, SEED_GPU0, 0),
    ]);
    // The holder is on the GPU it was on (now index 1): found by UUID.
    sb.holds(&ghost, 1, 55286);
    sb.owns("ddtree-qwen.service", &ghost);
    sb.in_cgroup(&ghost, "ddtree-qwen.service");
    let script = sb.save(
        "fix.sh",
        &sb.with_fake_proc(&seed_script(&ghost, Same::Process)),
    );
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(13), "{}", log(&o));
    assert!(
        log(&o).contains(&format!(
            "GPU 0 is GPU-9ad05367-4144-422e-e5a9-b50411e0d8dd now, not {SEED_GPU0} as recorded"
        )),
        "{}",
        log(&o)
    );
    assert!(!sb.calls().contains("memory.used"), "{}", sb.calls());
    assert!(!sb.calls().contains("restart"));
}

#[test]
fn a_target_that_fails_again_is_reported() {
    let sb = Sandbox::new("fails");
    let ghost = Ghost::sleeper();
    seed_host(&sb);
    seed_holder(&sb, &ghost, 55286);
    sb.write("units/sglang-k26.service.start-fails", "");
    let script = sb.save(
        "fix.sh",
        &sb.with_fake_proc(&seed_script(&ghost, Same::Process)),
    );
    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(15), "{}", log(&o));
    assert!(
        log(&o).contains("sglang-k26.service failed again: see journalctl -u sglang-k26.service")
    );
}

#[test]
fn a_question_without_an_answer_changes_nothing() {
    let sb = Sandbox::new("declined");
    let mut ghost = Ghost::sleeper();
    seed_host(&sb);
    seed_holder(&sb, &ghost, 55286);
    let script = sb.save(
        "fix.sh",
        &sb.with_fake_proc(&seed_script(&ghost, Same::Process)),
    );
    let o = sb.run_detached(&script, &["--apply"]);
    assert_eq!(o.status.code(), Some(3), "{}", log(&o));
    assert!(
        log(&o).contains("declined: Stop ddtree-qwen.service?"),
        "{}",
        log(&o)
    );
    assert!(!sb.calls().contains("stop"), "{}", sb.calls());
    assert!(ghost.alive());
    assert_eq!(sb.unit_state("ddtree-qwen.service"), "active");
}

const STALE: &str = "2025-06-14-h100node3-stale-sglang";
const STALE_GPU3: &str = "GPU-bb3cdc90-8130-ed6c-9db3-d58a6f1c1ee5";

#[test]
fn leftover_server_processes_are_swept_from_the_stopped_unit() {
    let sb = Sandbox::new("sweep");
    // The holder of the bundle, a sibling it does not show (ignoring
    // SIGTERM), and two decoys: a namesake in another unit, and a process
    // of the unit that is not a server process.
    let mut holder = Ghost::spawn(Some("sglang::scheduler_TP3"), false, 300);
    let mut sibling = Ghost::spawn(Some("sglang::scheduler_TP5"), true, 300);
    let mut namesake = Ghost::spawn(Some("sglang::scheduler_TP0"), false, 300);
    let mut bystander = Ghost::sleeper();
    // A server process of the unit that holds no GPU memory: not the
    // sweep's business.
    let mut idle = Ghost::spawn(Some("sglang::detokenizer"), false, 300);
    sb.gpus(&[
        (3, STALE_GPU3, 9),
        (5, STALE_GPU3.replace("bb3", "bb5").as_str(), 9),
    ]);
    sb.holds(&holder, 3, 61378);
    sb.holds(&sibling, 5, 61378);
    sb.unit("sglang.service", "failed");
    sb.unit("other.service", "active");
    for g in [&holder, &sibling, &bystander, &idle] {
        sb.in_cgroup(g, "sglang.service");
    }
    sb.in_cgroup(&namesake, "other.service");
    let script = script_for(
        &incident(STALE),
        &holder,
        "48213",
        "Tue Jun 10 09:20:16 2025",
        "sglang::scheduler_TP3",
        Same::PidAndStart,
    );
    assert!(
        script.contains("kill_orphans 'sglang.service' 'sglang::' 30"),
        "{script}"
    );
    let script = sb.with_fake_proc(&short_grace(&script));
    let script = sb.save("fix.sh", &script);

    let o = sb.run(&script, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    let planned = log(&o)
        .lines()
        .find(|l| l.contains("dry run: would end PID"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        planned.ends_with(
            "(sglang::*, in the cgroup of sglang.service) once sglang.service is stopped, those nvidia-smi then lists on a GPU"
        ),
        "{}",
        log(&o)
    );
    for g in [&holder, &sibling] {
        assert!(planned.contains(&g.pid.to_string()), "{planned}");
    }
    for g in [&namesake, &bystander] {
        assert!(!planned.contains(&g.pid.to_string()), "{planned}");
    }
    assert_eq!(sb.calls(), "");

    let o = sb.run(&script, &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    assert!(log(&o).contains("sglang.service is already failed: nothing to stop"));
    assert!(!holder.alive(), "the recorded holder is terminated");
    assert!(!sibling.alive(), "the sibling left in the unit is swept");
    assert!(log(&o).contains(&format!(
        "PID {} survived SIGTERM for 2s: sending SIGKILL",
        sibling.pid
    )));
    assert!(
        namesake.alive(),
        "a process of another unit is never touched"
    );
    assert!(
        bystander.alive(),
        "a process of another name is never touched"
    );
    assert!(idle.alive(), "a process on no GPU is never touched");
    assert!(
        log(&o).contains(&format!(
            "PID {} (sglang::detokenizer 300) holds no GPU memory now: leaving it",
            idle.pid
        )),
        "{}",
        log(&o)
    );
    assert_eq!(sb.unit_state("sglang.service"), "active");

    // The sweep refuses while the unit runs: its processes are no orphans.
    sb.unit("sglang.service", "active");
    let refuse = fs::read_to_string(&script)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("stop_unit ") && !l.starts_with("terminate_process "))
        .map(|l| format!("{l}\n"))
        .collect::<String>();
    let o = sb.run(&sb.save("refuse.sh", &refuse), &["--apply", "--yes"]);
    assert_eq!(o.status.code(), Some(13), "{}", log(&o));
    assert!(log(&o).contains("sglang.service is active: its processes are not orphans"));
    assert!(bystander.alive());
}
