//! `rootcause capture` on a simulated host: nvidia-smi, systemctl and ps
//! stand-ins (fixtures/capture-sandbox/bin), the sandbox's /proc, and the
//! real `journalctl` reading real journal files that `systemd-journal-remote`
//! builds from fixtures/capture-sandbox/journal.export (the seed incident's
//! journal).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::{Scratch, bin, fixtures, require_tool};

fn sandbox() -> PathBuf {
    fixtures().join("capture-sandbox")
}

/// Real journal files of the seed host, in `dir`.
fn journal_files(dir: &Path) {
    require_tool("journalctl", "systemd");
    let remote = [
        "/lib/systemd/systemd-journal-remote",
        "/usr/lib/systemd/systemd-journal-remote",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .unwrap_or("systemd-journal-remote");
    require_tool(remote, "systemd-journal-remote");
    fs::create_dir_all(dir).unwrap();
    let o = Command::new(remote)
        .arg("-o")
        .arg(dir.join("remote.journal"))
        .arg(sandbox().join("journal.export"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Runs `capture ARGS` with `path` first on PATH (the stand-ins), the seed
/// host's journal and /proc, in UTC.
fn capture(scratch: &Scratch, path: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    let journal = scratch.path.join("journal");
    if !journal.exists() {
        journal_files(&journal);
    }
    let mut c = bin();
    c.arg("capture")
        .args(["--since", "2026-11-20 00:00:00"])
        .arg("--journal-dir")
        .arg(&journal)
        .arg("--proc")
        .arg(sandbox().join("proc"))
        .args(args)
        .env("PATH", path)
        .env("TZ", "UTC")
        .env("CAPTURE_CALLS", scratch.path.join("calls"));
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stand_ins_first() -> String {
    format!(
        "{}:{}",
        sandbox().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn log(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

fn analyse_json(path: &Path) -> serde_json::Value {
    let o = bin().arg(path).args(["-o", "json"]).output().unwrap();
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", log(&o)))
}

fn root(report: &serde_json::Value) -> &serde_json::Value {
    let id = report["root_cause"].as_str().expect("a root cause");
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap()
}

#[test]
fn a_complete_capture_of_the_seed_host_finds_its_root_cause() {
    let scratch = Scratch::new("capture-full");
    let out = scratch.path.join("bundle");
    let o = capture(
        &scratch,
        &stand_ins_first(),
        &[],
        &["--unit", "sglang-k26", "-o", out.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    assert!(log(&o).contains("no gaps"), "{}", log(&o));

    let mut files: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "journal-kernel.json",
            "journal-units.json",
            "manifest.json",
            "nvidia-smi-q.xml",
            "nvidia-smi-query-compute-apps.csv",
            "nvidia-smi-query-gpu.csv",
            "nvidia-smi.txt",
            "proc-cgroup.txt",
            "ps.txt",
            "systemctl-show-ddtree-qwen.service.txt",
            "systemctl-show-sglang-k26.service.txt",
            "systemctl-status-ddtree-qwen.service.txt",
            "systemctl-status-sglang-k26.service.txt",
        ]
    );
    let m = manifest(&out);
    assert_eq!(m["host"], "ct200");
    assert_eq!(m["timezone"], "UTC");
    assert_eq!(m["rootcause_version"], env!("CARGO_PKG_VERSION"));
    assert!(
        m["captured_at"].as_str().unwrap().ends_with("+00:00"),
        "{m}"
    );
    // The named unit, then the unit that owns the GPU process.
    assert_eq!(
        m["units"],
        serde_json::json!(["sglang-k26.service", "ddtree-qwen.service"])
    );
    for c in m["commands"].as_array().unwrap() {
        assert_eq!(c["status"], "ok", "{c}");
        assert!(c["duration_ms"].is_u64());
        let file = c["file"].as_str().unwrap();
        if file != "proc-cgroup.txt" {
            let len = fs::metadata(out.join(file)).unwrap().len();
            assert_eq!(c["bytes"].as_u64(), Some(len), "{c}");
        }
    }
    let cgroup = fs::read_to_string(out.join("proc-cgroup.txt")).unwrap();
    assert_eq!(
        cgroup,
        "$ cat /proc/20629/cgroup\n0::/system.slice/ddtree-qwen.service\n"
    );
    // The real journalctl read the journal files: both units, and the kernel.
    let units = fs::read_to_string(out.join("journal-units.json")).unwrap();
    assert!(units.contains("\"_SYSTEMD_UNIT\":\"ddtree-qwen.service\""));
    assert!(units.contains("The memory capacity is unbalanced"));
    let kernel = fs::read_to_string(out.join("journal-kernel.json")).unwrap();
    assert_eq!(kernel.lines().count(), 1, "{kernel}");

    // Read-only: nothing but status and show was asked of systemctl.
    let calls = fs::read_to_string(scratch.path.join("calls")).unwrap();
    for call in calls.lines().filter(|c| c.starts_with("systemctl")) {
        assert!(
            call.starts_with("systemctl status ") || call.starts_with("systemctl show "),
            "{call}"
        );
    }

    let report = analyse_json(&out);
    let f = root(&report);
    assert_eq!(f["rule"], "sglang-unbalanced-memory");
    assert_eq!(f["entities"]["pids"], serde_json::json!([20629]));
    assert_eq!(f["entities"]["gpus"], serde_json::json!([0]));
    assert!(
        f["headline"]
            .as_str()
            .unwrap()
            .contains("ddtree-qwen.service")
    );
    assert_eq!(report["gaps"], serde_json::json!([]));
    assert_eq!(report["capture"]["host"], "ct200");
}

#[test]
fn a_tar_bundle_is_read_like_the_folder() {
    let scratch = Scratch::new("capture-tar");
    let tar = scratch.path.join("ct200-incident.tar");
    let o = capture(
        &scratch,
        &stand_ins_first(),
        &[],
        &[
            "--unit",
            "sglang-k26.service",
            "--tar",
            tar.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    let list = Command::new("tar").arg("tf").arg(&tar).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.lines().all(|l| l.starts_with("ct200-incident/")),
        "{list}"
    );
    assert!(list.contains("ct200-incident/manifest.json"), "{list}");
    let f = root(&analyse_json(&tar)).clone();
    assert_eq!(f["entities"]["pids"], serde_json::json!([20629]));
    // An existing file is never overwritten.
    let again = capture(
        &scratch,
        &stand_ins_first(),
        &[],
        &["--tar", tar.to_str().unwrap()],
    );
    assert_eq!(again.status.code(), Some(2), "{}", log(&again));
}

/// A PATH with the systemctl and ps stand-ins and the system's tools, but
/// no nvidia-smi.
fn without_nvidia_smi(scratch: &Scratch) -> String {
    let bin = scratch.path.join("bin");
    fs::create_dir_all(&bin).unwrap();
    for tool in ["systemctl", "ps"] {
        std::os::unix::fs::symlink(sandbox().join("bin").join(tool), bin.join(tool)).unwrap();
    }
    let system: Vec<String> = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !Path::new(d).join("nvidia-smi").exists())
        .map(str::to_owned)
        .collect();
    format!("{}:{}", bin.display(), system.join(":"))
}

#[test]
fn missing_tools_are_gaps_in_a_partial_bundle_and_in_the_report() {
    let scratch = Scratch::new("capture-missing");
    let out = scratch.path.join("bundle");
    let path = without_nvidia_smi(&scratch);
    let o = capture(
        &scratch,
        &path,
        &[],
        &["--unit", "sglang-k26", "-o", out.to_str().unwrap()],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "a missing tool is not fatal: {}",
        log(&o)
    );
    assert!(log(&o).contains("4 gaps"), "{}", log(&o));
    let m = manifest(&out);
    let missing: Vec<&serde_json::Value> = m["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "missing")
        .collect();
    assert_eq!(missing.len(), 4, "{m}");
    for c in &missing {
        assert!(c["command"].as_str().unwrap().starts_with("nvidia-smi"));
        assert_eq!(c["file"], serde_json::Value::Null);
        assert_eq!(c["detail"], "nvidia-smi: command not found");
    }
    assert!(!out.join("nvidia-smi.txt").exists());
    assert!(out.join("journal-units.json").exists());

    let report = analyse_json(&out);
    let gaps = report["gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 4, "{gaps:?}");
    assert_eq!(gaps[0]["status"], "missing");
    assert_eq!(gaps[0]["command"], "nvidia-smi");
    let text = bin().arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "Gaps in the capture\n  - nvidia-smi: missing (nvidia-smi: command not found)"
        ),
        "{text}"
    );
    let md = bin().arg(&out).args(["-o", "markdown"]).output().unwrap();
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(
        md.contains("## Gaps in the capture\n\n- nvidia-smi: missing"),
        "{md}"
    );
}

#[test]
fn a_hung_command_is_killed_and_recorded_as_a_timeout() {
    let scratch = Scratch::new("capture-hang");
    let out = scratch.path.join("bundle");
    let started = Instant::now();
    let o = capture(
        &scratch,
        &stand_ins_first(),
        &[("CAPTURE_HANG", "nvidia-smi -q -x")],
        &["--timeout", "1", "-o", out.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the hung command was not killed"
    );
    let m = manifest(&out);
    let xml = m["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"] == "nvidia-smi -q -x")
        .unwrap()
        .clone();
    assert_eq!(xml["status"], "timeout", "{xml}");
    assert_eq!(xml["detail"], "killed after 1 s");
    // Everything else still ran; the GPU process's unit was still found.
    assert!(
        out.join("systemctl-status-ddtree-qwen.service.txt")
            .exists()
    );
    let report = analyse_json(&out);
    assert_eq!(report["gaps"][0]["status"], "timeout");
}

#[test]
fn redaction_leaves_no_hostname_ip_user_or_token_in_the_bundle() {
    let scratch = Scratch::new("capture-redact");
    let out = scratch.path.join("bundle");
    let o = capture(
        &scratch,
        &stand_ins_first(),
        &[],
        &[
            "--unit",
            "sglang-k26",
            "--redact",
            "--description",
            "ddtree on ct200 again; HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    let mapping_path = scratch.path.join("bundle.redactions.json");
    let mapping: serde_json::Value =
        serde_json::from_slice(&fs::read(&mapping_path).expect("mapping beside the bundle"))
            .unwrap();
    let originals: Vec<String> = mapping["masks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["original"].as_str().unwrap().to_owned())
        .collect();
    for expected in [
        "ct200",
        "10.40.3.21",
        "10.40.3.9",
        "ddtree",
        "hf_abcdefghijklmnopqrstuvwxyz",
    ] {
        assert!(
            originals.iter().any(|o| o == expected),
            "{expected} not masked: {originals:?}"
        );
    }
    for entry in fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = String::from_utf8_lossy(&fs::read(&path).unwrap()).into_owned();
        for original in &originals {
            assert!(!name.contains(original.as_str()), "{name} names {original}");
            assert!(
                !text.contains(original.as_str()),
                "{name} still holds {original}"
            );
        }
    }
    // A cgroup line is not an IPv6 address.
    assert_eq!(
        fs::read_to_string(out.join("proc-cgroup.txt")).unwrap(),
        "$ cat /proc/20629/cgroup\n0::/system.slice/user-1-qwen.service\n"
    );
    let m = manifest(&out);
    assert_eq!(m["host"], "host-1");
    assert_eq!(m["redacted"], true);
    // The same value has the same mask everywhere, so the analysis still
    // joins the ghost's PID to its (masked) unit.
    let report = analyse_json(&out);
    let f = root(&report);
    assert_eq!(f["entities"]["pids"], serde_json::json!([20629]));
    let headline = f["headline"].as_str().unwrap();
    assert!(headline.contains("user-1-qwen.service"), "{headline}");
}

/// Probe D3: capture never writes into a folder that is not the caller's,
/// nor through a link; the bundle is private.
#[test]
fn d3_capture_writes_only_into_a_private_folder_of_its_own() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
    let scratch = Scratch::new("capture-d3");
    let out = scratch.path.join("bundle");
    let o = capture(
        &scratch,
        &stand_ins_first(),
        &[],
        &[
            "--unit",
            "sglang-k26",
            "--redact",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    let mode = |p: &Path| fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), 0o700);
    for entry in fs::read_dir(&out).unwrap() {
        assert_eq!(mode(&entry.unwrap().path()), 0o600);
    }
    assert_eq!(mode(&scratch.path.join("bundle.redactions.json")), 0o600);

    // A mapping path someone planted as a link: refused, the target kept.
    let victim = scratch.path.join("victim");
    fs::write(&victim, "ORIGINAL\n").unwrap();
    let out2 = scratch.path.join("second");
    symlink(&victim, scratch.path.join("second.redactions.json")).unwrap();
    let o = capture(
        &scratch,
        &stand_ins_first(),
        &[],
        &["--redact", "-o", out2.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", log(&o));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "ORIGINAL\n");

    // An output folder that is a link: refused, nothing written where it points.
    let elsewhere = scratch.path.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, scratch.path.join("linked")).unwrap();
    let o = capture(
        &scratch,
        &stand_ins_first(),
        &[],
        &["-o", scratch.path.join("linked").to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", log(&o));
    assert!(fs::read_dir(&elsewhere).unwrap().next().is_none());

    // An empty folder of another user (as root, the probe's attack): refused.
    let theirs = scratch.path.join("theirs");
    fs::create_dir(&theirs).unwrap();
    if std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).is_ok() {
        assert_eq!(fs::metadata(&theirs).unwrap().uid(), 65534);
        let o = capture(
            &scratch,
            &stand_ins_first(),
            &[],
            &["-o", theirs.to_str().unwrap()],
        );
        assert_eq!(o.status.code(), Some(2), "{}", log(&o));
        assert!(log(&o).contains("belongs to another user"), "{}", log(&o));
        assert!(fs::read_dir(&theirs).unwrap().next().is_none());
    } else {
        eprintln!("not root: the other user's folder is checked by the writer's unit tests only");
    }
}

/// Probe D9: a command that leaves a process holding its output, in its
/// group or in a session of its own, cannot hang the capture.
#[test]
fn d9_a_child_left_holding_stdout_does_not_hang_the_capture() {
    for setsid in ["0", "1"] {
        let scratch = Scratch::new(&format!("capture-d9-{setsid}"));
        let out = scratch.path.join("bundle");
        let started = Instant::now();
        let o = capture(
            &scratch,
            &stand_ins_first(),
            &[
                ("CAPTURE_HOLD", "nvidia-smi -q -x"),
                ("CAPTURE_HOLD_SETSID", setsid),
            ],
            &["--timeout", "20", "-o", out.to_str().unwrap()],
        );
        assert_eq!(o.status.code(), Some(0), "{}", log(&o));
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "setsid={setsid}: {:?}",
            started.elapsed()
        );
        let m = manifest(&out);
        let q = m["commands"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["command"] == "nvidia-smi -q -x")
            .unwrap()
            .clone();
        assert_eq!(q["status"], "ok", "{q}");
        assert!(
            q["detail"]
                .as_str()
                .unwrap_or("")
                .contains("kept its output open"),
            "{q}"
        );
        assert!(out.join("nvidia-smi-q.xml").exists());
    }
}

/// Probe D15: secrets outside the first list of patterns are masked too.
#[test]
fn d15_flag_keys_curl_users_and_url_passwords_are_redacted() {
    let scratch = Scratch::new("capture-d15");
    let out = scratch.path.join("bundle");
    let o = capture(
        &scratch,
        &stand_ins_first(),
        &[("CAPTURE_PS_SECRETS", "1")],
        &["--redact", "-o", out.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", log(&o));
    let ps = fs::read_to_string(out.join("ps.txt")).unwrap();
    for secret in [
        "0123456789abcdef0123456789abcdef01234567",
        "supersecretpw",
        ":pa55@",
        "pa55w0rd",
    ] {
        assert!(!ps.contains(secret), "{secret} left in ps.txt:\n{ps}");
    }
    // Every masked password keeps a numbered mask.
    assert!(ps.contains("--password=REDACTED-TOKEN-"), "{ps}");
}
