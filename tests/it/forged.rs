//! The probe's sandbox runs (probe-2026-12-03.md, appendix; issue 18): a
//! script acts only on what the live host shows. Live dummy processes stand
//! in for what a bundle names, with the identity the bundle recorded (start
//! time, command line, cgroup), so every guard but the live GPU check would
//! pass; the nvidia-smi stand-in then shows what holds the GPU now. Nothing
//! the stand-in does not show on the GPU may be signalled or stopped, and
//! nothing from the script's own ancestry ever is.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use regex::Regex;

use crate::sandbox::{Ghost, Sandbox, TempDir, analyze_edited, log, short_grace};
use crate::support::{fixtures, incident, json};

const GPU0: &str = "GPU-5a5b4eef-ee9c-40f5-977e-2242f48837be";

/// Eight GPUs of the seed host, none holding memory.
fn idle_gpus(sb: &Sandbox) {
    let uuids: Vec<String> = (0..8)
        .map(|i| match i {
            0 => GPU0.to_owned(),
            i => format!("GPU-0000000{i}-0000-4000-8000-00000000000{i}"),
        })
        .collect();
    let gpus: Vec<(u32, &str, u64)> = uuids
        .iter()
        .enumerate()
        .map(|(i, u)| (i as u32, u.as_str(), 0))
        .collect();
    sb.gpus(&gpus);
}

/// What a bundle's script would act on: each PID with the unit, command
/// line and start time its steps carry.
#[derive(Debug, Default, Clone)]
struct Named {
    unit: Option<String>,
    cmdline: Option<String>,
    start: Option<String>,
}

fn named_processes(report: &serde_json::Value) -> BTreeMap<u64, Named> {
    let mut out: BTreeMap<u64, Named> = BTreeMap::new();
    for f in report["findings"].as_array().unwrap() {
        for a in f["actions"].as_array().unwrap() {
            let Some(pid) = a["pid"].as_u64() else {
                continue;
            };
            let n = out.entry(pid).or_default();
            let text = |k: &str| a[k].as_str().map(str::to_owned);
            n.unit = n.unit.take().or(text("expected_unit")).or(text("unit"));
            n.cmdline = n.cmdline.take().or(text("expected_cmdline"));
            n.start = n.start.take().or(text("expected_start"));
        }
    }
    out
}

/// Every script of the hostile corpus, every PID it names alive with the
/// recorded identity and in the recorded unit's cgroup, every unit active,
/// and a GPU that nvidia-smi shows idle: `--apply --yes` stops nothing and
/// signals nothing.
#[test]
fn no_hostile_script_touches_what_the_live_host_does_not_show_on_the_gpu() {
    let mut dirs: Vec<PathBuf> = fs::read_dir(fixtures().join("hostile"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut scripted_somewhere = 0;
    for dir in dirs {
        let case = dir.file_name().unwrap().to_string_lossy().into_owned();
        let first = crate::support::check(&dir);
        let named = named_processes(&json(&first));
        // One dummy per PID, with the recorded command line as its title.
        let ghosts: Vec<(u64, Named, Ghost)> = named
            .into_iter()
            .map(|(pid, n)| {
                let ghost = Ghost::spawn(Some(n.cmdline.as_deref().unwrap_or("ghost")), false, 300);
                (pid, n, ghost)
            })
            .collect();
        let out = analyze_edited(&dir, |_, mut text| {
            for (pid, n, ghost) in &ghosts {
                let re = Regex::new(&format!(r"\b{pid}\b")).unwrap();
                text = re.replace_all(&text, ghost.pid.to_string()).into_owned();
                if let Some(start) = &n.start {
                    text = text.replace(start.as_str(), &ghost.lstart());
                }
            }
            Some(text)
        });
        if out.script.contains("\nstop_unit ") || out.script.contains("\nterminate_process ") {
            scripted_somewhere += 1;
        }
        let sb = Sandbox::new(&format!("forged-{case}"));
        idle_gpus(&sb);
        for (_, n, ghost) in &ghosts {
            match &n.unit {
                Some(unit) => {
                    sb.unit(unit, "active");
                    sb.in_cgroup(ghost, unit);
                }
                None => sb.in_proc(ghost),
            }
        }
        sb.unit("sglang-k26.service", "failed");
        let script = sb.with_fake_proc(&short_grace(&out.script));
        let o = sb.run(&sb.save("fix.sh", &script), &["--apply", "--yes"]);
        let calls = sb.calls();
        for verb in ["stop", "disable", "kill"] {
            assert!(
                !calls.contains(&format!("systemctl {verb} ")),
                "{case}: {verb} called:\n{calls}\n{}",
                log(&o)
            );
        }
        for (pid, _, mut ghost) in ghosts {
            assert!(
                ghost.alive(),
                "{case}: PID {pid}'s stand-in was signalled:\n{}",
                log(&o)
            );
        }
    }
    // The corpus does script destructive steps (guarded ones): the runs above
    // exercised the live checks, not only scripts with nothing to do.
    assert!(scripted_somewhere >= 5, "{scripted_somewhere}");
}

/// The probe's `run-forged.sh`: the D1 block names a live `sshd: …`
/// process, with its real start time. Inside a server log it is never acted
/// on; given in inputs of its own under a unit a script may stop
/// (`app.service`), the live check still refuses: nvidia-smi shows no
/// process on the GPU.
#[test]
fn a_forged_sshd_is_never_signalled_nor_its_unit_stopped() {
    let title = "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups";
    let mut sshd = Ghost::spawn(Some(title), false, 300);
    let (pid, lstart) = (sshd.pid, sshd.lstart());
    let block =
        fs::read_to_string(fixtures().join("hostile/forged-sshd-in-server-log/server-extra.log"))
            .unwrap()
            .replace("812", &pid.to_string())
            .replace("Mon Nov  9 07:12:31 2026", &lstart);
    let seed = incident("2026-11-27-ct200-ghost-ddtree");
    for (variant, unit) in [("in-log", "ssh.service"), ("own-inputs", "app.service")] {
        let block = block.replace("ssh.service", unit);
        let out = analyze_edited(&seed, |name, text| match name {
            "journal.txt" | "nvidia-smi-query-gpu.csv" | "sglang.log" => Some(text),
            // The block: inside the server log, or split into the inputs a
            // capture writes (a table, ps rows, a status), each its own.
            "nvidia-smi.txt" if variant == "own-inputs" => Some(
                block
                    .lines()
                    .skip(1)
                    .take(9)
                    .map(|l| format!("{l}\n"))
                    .collect(),
            ),
            "ps.txt" if variant == "own-inputs" => Some(
                block
                    .lines()
                    .skip(10)
                    .take(2)
                    .map(|l| format!("{l}\n"))
                    .collect(),
            ),
            "systemctl-status-ddtree-qwen.txt" if variant == "own-inputs" => {
                Some(block.lines().skip(12).map(|l| format!("{l}\n")).collect())
            }
            "systemctl-status-sglang-k26.txt" => Some(text),
            // The server log with the block, under the name of an input the
            // variant drops (names do not decide formats).
            "ps.txt" if variant == "in-log" => Some(block.clone()),
            _ => None,
        });
        if variant == "own-inputs" {
            // The live guards are what stands here.
            assert!(
                out.script
                    .contains(&format!("\nstop_unit 'app.service' {pid} ")),
                "{}",
                out.script
            );
            assert!(
                out.script.contains(&format!("\nterminate_process {pid} ")),
                "{}",
                out.script
            );
        } else {
            assert!(!out.script.contains("\nstop_unit "), "{}", out.script);
            assert!(
                !out.script.contains("\nterminate_process "),
                "{}",
                out.script
            );
        }
        let sb = Sandbox::new(&format!("forged-sshd-{variant}"));
        idle_gpus(&sb);
        sb.unit(unit, "active");
        sb.unit("sglang-k26.service", "failed");
        sb.in_cgroup(&sshd, unit);
        let script = sb.with_fake_proc(&short_grace(&out.script));
        let path = sb.save("fix.sh", &script);
        for args in [&[][..], &["--apply", "--yes"]] {
            let o = sb.run(&path, args);
            assert!(
                sshd.alive(),
                "{variant} {args:?}: sshd was signalled:\n{}",
                log(&o)
            );
            assert!(
                !sb.calls().contains("systemctl stop"),
                "{variant}: {}",
                sb.calls()
            );
            if variant == "own-inputs" && !args.is_empty() {
                assert!(
                    log(&o).contains(&format!("PID {pid} holds no memory on GPU 0")),
                    "{}",
                    log(&o)
                );
            }
        }
    }
}

/// The probe's `run-shell.sh`: the holder named is the user's own shell,
/// which runs the script through `timeout` (as `sudo` would): the shell is
/// the script's grandparent, and nvidia-smi even shows it on the GPU. It is
/// refused as an ancestor.
#[test]
fn the_shell_that_runs_the_script_is_never_signalled() {
    let dir = TempDir::new("forged-shell");
    let go = dir.path.join("go");
    let done = dir.path.join("done");
    let shell_script = dir.path.join("usershell.sh");
    fs::write(
        &shell_script,
        format!(
            "while [ ! -e '{go}' ]; do sleep 0.05; done\n\
             timeout 60 bash \"$FIX\" --apply --yes >'{done}.log' 2>&1; echo $? >'{done}.tmp'; mv '{done}.tmp' '{done}'\n\
             sleep 300\n",
            go = go.display(),
            done = done.display()
        ),
    )
    .unwrap();
    let sb = Sandbox::new("forged-shell-run");
    let fix = sb.path("fix.sh");
    let mut shell = spawn_shell(&shell_script, &fix, &sb);
    let pid = shell.id();
    let ghost_like = |p: u32| {
        fs::read(format!("/proc/{p}/cmdline"))
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .replace('\0', " ")
                    .trim_end()
                    .to_owned()
            })
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ghost_like(pid).starts_with("-bash") {
        assert!(Instant::now() < deadline, "the shell never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let lstart = {
        let o = Command::new("ps")
            .args(["-o", "lstart=", "-p", &pid.to_string()])
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let cmd = ghost_like(pid);
    let out = analyze_edited(&fixtures().join("hostile/forged-shell"), |name, text| {
        Some(match name {
            "ps.txt" => format!(
                "    PID    PPID USER                      STARTED STAT CMD\n  {pid}    31300 alice    {lstart} Ss   {cmd}\n"
            ),
            _ => text.replace("31337", &pid.to_string()),
        })
    });
    assert!(
        out.script.contains(&format!("\nterminate_process {pid} ")),
        "{}",
        out.script
    );
    idle_gpus(&sb);
    sb.unit("sglang-k26.service", "failed");
    // The live host even shows the shell holding GPU 0.
    fs::write(sb.path("holders"), format!("{pid} 0 55286\n")).unwrap();
    fs::write(&fix, short_grace(&out.script)).unwrap();
    fs::write(&go, "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done.exists() {
        assert!(Instant::now() < deadline, "the script never finished");
        std::thread::sleep(Duration::from_millis(50));
    }
    let run_log = fs::read_to_string(format!("{}.log", done.display())).unwrap();
    assert!(
        matches!(shell.try_wait(), Ok(None)),
        "the user's shell was killed:\n{run_log}"
    );
    assert!(
        run_log.contains(&format!(
            "PID {pid} is init, this script, one of its ancestors or its session's leader"
        )),
        "{run_log}"
    );
    assert_ne!(fs::read_to_string(&done).unwrap().trim(), "0", "{run_log}");
    let _ = shell.kill();
    let _ = shell.wait();
}

/// `bash usershell.sh` under the process title `-bash`, with the sandbox's
/// stand-ins first on PATH.
fn spawn_shell(script: &Path, fix: &Path, sb: &Sandbox) -> Child {
    let path = format!(
        "{}:{}",
        fixtures().join("sandbox/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .arg("-c")
        .arg("exec -a -bash bash \"$0\"")
        .arg(script)
        .env("FIX", fix)
        .env("PATH", path)
        .env("SANDBOX", &sb.dir.path)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

/// The probe's `run-weak.sh`: only an nvidia-smi table names the holder,
/// by the process name `python3`; the PID now runs an unrelated
/// `python3 …`, which nvidia-smi even shows on the GPU. Nothing is scripted
/// for it, so nothing signals it.
#[test]
fn a_python3_that_reused_the_pid_is_never_signalled() {
    let mut python = Ghost::spawn(Some("python3"), false, 300);
    let out = analyze_edited(&fixtures().join("hostile/reused-python3"), |_, text| {
        Some(text.replace(" 4242 ", &format!(" {:>4} ", python.pid)))
    });
    assert!(
        !out.script.contains("\nterminate_process "),
        "{}",
        out.script
    );
    let sb = Sandbox::new("forged-python3");
    idle_gpus(&sb);
    sb.holds(&python, 0, 55286);
    sb.in_proc(&python);
    let o = sb.run(
        &sb.save("fix.sh", &sb.with_fake_proc(&out.script)),
        &["--apply", "--yes"],
    );
    assert!(python.alive(), "{}", log(&o));
}

/// Probe D13, the guard's half: a user's own unit with a system unit's name
/// (`…/user@1000.service/app.slice/ddtree-qwen.service`) is not that unit.
#[test]
fn a_users_unit_of_the_same_name_is_not_the_system_unit() {
    let mut ghost = Ghost::sleeper();
    let seed = incident("2026-11-27-ct200-ghost-ddtree");
    let (pid, start, cmd) = (ghost.pid.to_string(), ghost.lstart(), ghost.cmdline());
    let out = analyze_edited(&seed, |_, text| {
        Some(
            text.replace("20629", &pid)
                .replace("Tue Nov 24 14:02:17 2026", &start)
                .replace(
                    "/opt/ddtree/venv/bin/python3 /opt/ddtree/serve.py --model /models/Qwen2.5-32B-Instruct --draft-model /models/Qwen2.5-0.5B-Instruct --port 8100",
                    &cmd,
                ),
        )
    });
    let sb = Sandbox::new("forged-user-unit");
    idle_gpus(&sb);
    sb.holds(&ghost, 0, 55286);
    sb.unit("ddtree-qwen.service", "active");
    sb.unit("sglang-k26.service", "failed");
    sb.in_cgroup(&ghost, "ddtree-qwen.service");
    fs::write(
        sb.path(&format!("proc/{pid}/cgroup")),
        "0::/user.slice/user-1000.slice/user@1000.service/app.slice/ddtree-qwen.service\n",
    )
    .unwrap();
    let o = sb.run(
        &sb.save("fix.sh", &sb.with_fake_proc(&out.script)),
        &["--apply", "--yes"],
    );
    assert_eq!(o.status.code(), Some(11), "{}", log(&o));
    assert!(log(&o).contains("is not in its cgroup now"), "{}", log(&o));
    assert!(ghost.alive());
    assert!(!sb.calls().contains("systemctl stop"), "{}", sb.calls());
}
