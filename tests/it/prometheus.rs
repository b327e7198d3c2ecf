//! Findings as Prometheus metrics, checked by the real programs: the text
//! exposition output (pinned, bounded, pure), `--textfile DIR` written
//! whole, `promtool check metrics` on it, Debian's node_exporter serving it
//! from a textfile directory and Prometheus scraping that and answering
//! queries (both started here on free loopback ports and stopped after),
//! and `promtool test rules` proving the shipped alert rules
//! (contrib/prometheus/rootcause.rules.yml) fire on the seed incident's
//! report and stay silent on a healthy one. scripts/test.sh installs the
//! `prometheus` and `prometheus-node-exporter` packages.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use insta::assert_snapshot;
use rootcause::render::{self, OutputFormat, RenderOptions};

use crate::support::{Scratch, bin, check, copy_dir, incident, require_tool};

const SEED: &str = "2026-11-27-ct200-ghost-ddtree";
const HEALTHY: &str = "2026-03-05-h200-healthy-start";

fn metrics(name: &str) -> String {
    let out = check(&incident(name));
    let report = out.analysis.report();
    let mut bytes = Vec::new();
    render::render(
        &report,
        OutputFormat::Prometheus,
        RenderOptions::default(),
        &mut bytes,
    )
    .expect("render");
    String::from_utf8(bytes).expect("utf-8")
}

/// `rootcause BUNDLE --textfile DIR`, as the textfile unit runs it.
fn textfile(bundle: &Path, dir: &Path) -> String {
    let o = bin()
        .arg(bundle)
        .args(["--quiet", "--textfile"])
        .arg(dir)
        .output()
        .expect("rootcause runs");
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read_to_string(dir.join(render::TEXTFILE_NAME)).expect("the textfile is written")
}

#[test]
fn the_seed_incident_as_metrics() {
    let seed = metrics(SEED);
    assert_eq!(seed, metrics(SEED), "a pure function of the inputs");
    // The fleet's question in one expression's worth of labels.
    assert!(seed.contains(
        r#"rootcause_finding{host="ct200",finding="F1",rule="sglang-unbalanced-memory",category="gpu-memory-held-by-other-process",severity="critical",root_cause="true",gpu="0",unit="ddtree-qwen.service"} 1"#
    ), "{seed}");
    // The capture time of manifest.json, 2026-11-27T09:41:12Z.
    assert!(seed.contains(
        r#"rootcause_report_timestamp_seconds{host="ct200",source="capture"} 1795772472"#
    ));
    // No PID, headline or log text as a label.
    assert!(!seed.contains("20629"), "{seed}");
    assert!(!seed.contains("pid="), "{seed}");
    assert_snapshot!("seed_prometheus", seed);
}

#[test]
fn a_healthy_report_has_no_finding_series() {
    let healthy = metrics(HEALTHY);
    assert!(!healthy.contains("rootcause_finding{"), "{healthy}");
    assert!(healthy.contains(r#"rootcause_findings{host="gpu-h200-07",severity="critical"} 0"#));
    assert_snapshot!("healthy_prometheus", healthy);
}

#[test]
fn without_a_manifest_the_report_time_is_the_last_dated_line() {
    let scratch = Scratch::new("prom-nomanifest");
    let bundle = scratch.path.join("bundle");
    copy_dir(&incident(SEED), &bundle);
    std::fs::remove_file(bundle.join("manifest.json")).unwrap();
    let o = bin()
        .arg(&bundle)
        .args(["-o", "prometheus"])
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("rootcause_report_timestamp_seconds"))
        .expect("a report time from the logs");
    assert!(
        line.starts_with(r#"rootcause_report_timestamp_seconds{source="last-log-line"} "#),
        "{line}"
    );
    let seconds: i64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    // The journal's last lines come shortly before the capture.
    assert!((1_795_770_000..=1_795_772_472).contains(&seconds), "{line}");
}

#[test]
fn the_textfile_is_written_whole_and_alone() {
    let scratch = Scratch::new("prom-textfile");
    let written = textfile(&incident(SEED), &scratch.path);
    let stdout = bin()
        .arg(incident(SEED))
        .args(["-o", "prometheus"])
        .output()
        .unwrap()
        .stdout;
    assert_eq!(written, String::from_utf8(stdout).unwrap());
    // Rewritten in place by the next analysis, no temporary file left.
    textfile(&incident(HEALTHY), &scratch.path);
    let names: Vec<_> = std::fs::read_dir(&scratch.path)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, [render::TEXTFILE_NAME]);
    // A folder that is not there is an error naming it, exit status 2.
    let missing = scratch.path.join("nope");
    let o = bin()
        .arg(incident(SEED))
        .args(["-q", "--textfile"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("nope/rootcause.prom"), "{stderr}");
}

#[test]
fn promtool_accepts_the_metrics() {
    require_tool("promtool", "prometheus");
    for name in [SEED, HEALTHY] {
        let mut child = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(metrics(name).as_bytes())
            .unwrap();
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(),
            "{name}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// A program started for a test, killed and reaped when the test ends.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn start(command: &mut Command, log: PathBuf) -> Daemon {
        let file = std::fs::File::create(&log).unwrap();
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("the daemon starts");
        Daemon { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The body of a 200 answer to `GET path`, or `None`.
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.split(' ')
        .nth(1)
        .filter(|&code| code == "200")
        .map(|_| body.to_owned())
}

/// Asks until `ready` says yes, for 60 seconds at most.
fn poll<T>(what: &str, daemon: &Daemon, mut ready: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = ready() {
            return value;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}; its log:\n{}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The result of an instant query, once it has one.
fn query(port: u16, expr: &str) -> Option<Vec<serde_json::Value>> {
    let body = get(
        port,
        &format!("/api/v1/query?query={}", percent_encode(expr)),
    )?;
    let answer: serde_json::Value = serde_json::from_str(&body).ok()?;
    let result = answer["data"]["result"].as_array()?.clone();
    (!result.is_empty()).then_some(result)
}

fn rules_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/prometheus/rootcause.rules.yml")
}

#[test]
fn node_exporter_serves_them_and_prometheus_answers_for_the_fleet() {
    require_tool("prometheus-node-exporter", "prometheus-node-exporter");
    require_tool("prometheus", "prometheus");
    let scratch = Scratch::new("prom-live");
    let textfiles = scratch.path.join("textfile");
    std::fs::create_dir_all(&textfiles).unwrap();
    textfile(&incident(SEED), &textfiles);

    let node_port = free_port();
    let node = Daemon::start(
        Command::new("prometheus-node-exporter").args([
            &format!("--web.listen-address=127.0.0.1:{node_port}"),
            "--collector.disable-defaults",
            "--collector.textfile",
            &format!("--collector.textfile.directory={}", textfiles.display()),
        ]),
        scratch.path.join("node-exporter.log"),
    );
    let scraped = poll("node_exporter's /metrics", &node, || {
        get(node_port, "/metrics")
    });
    assert!(
        scraped.contains(r#"rootcause_finding{category="gpu-memory-held-by-other-process",finding="F1",gpu="0",host="ct200",root_cause="true",rule="sglang-unbalanced-memory",severity="critical",unit="ddtree-qwen.service"} 1"#),
        "{scraped}"
    );
    assert!(
        scraped.contains("node_textfile_scrape_error 0"),
        "{scraped}"
    );

    let prometheus_port = free_port();
    let config = scratch.path.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: node\n    static_configs:\n      - targets: ['127.0.0.1:{node_port}']\n",
            rules_file().display()
        ),
    )
    .unwrap();
    let prometheus = Daemon::start(
        Command::new("prometheus").args([
            &format!("--config.file={}", config.display()),
            &format!(
                "--storage.tsdb.path={}",
                scratch.path.join("tsdb").display()
            ),
            &format!("--web.listen-address=127.0.0.1:{prometheus_port}"),
        ]),
        scratch.path.join("prometheus.log"),
    );
    // "A GPU held by another process, on any host": one expression.
    let held = poll("the query for held GPUs", &prometheus, || {
        query(
            prometheus_port,
            r#"max by (host, gpu) (rootcause_finding{category="gpu-memory-held-by-other-process"})"#,
        )
    });
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["metric"]["host"], "ct200");
    assert_eq!(held[0]["metric"]["gpu"], "0");
    assert_eq!(held[0]["value"][1], "1");
    let time = query(prometheus_port, "rootcause_report_timestamp_seconds").unwrap();
    assert_eq!(time[0]["value"][1], "1795772472");
    // The shipped rules loaded and evaluated without error.
    let rules = poll("the rules' first evaluation", &prometheus, || {
        let body = get(prometheus_port, "/api/v1/rules")?;
        let answer: serde_json::Value = serde_json::from_str(&body).ok()?;
        let rules = answer["data"]["groups"][0]["rules"].as_array()?.clone();
        rules
            .iter()
            .all(|r| {
                r["lastEvaluation"]
                    .as_str()
                    .is_some_and(|t| !t.starts_with("0001"))
            })
            .then_some(rules)
    });
    assert_eq!(rules.len(), 3);
    for rule in &rules {
        assert_eq!(rule["health"], "ok", "{rule}");
    }
    drop(prometheus);
    drop(node);
}

/// The metrics as promtool's input series, as a scrape of `instance`
/// labels them, one sample an hour from the epoch until `days`. promtool's
/// clock starts at the epoch, so the report's time moves back by `shift`
/// seconds (whole days) to meet it: the rules only ever compare it with
/// `time()`, so this changes nothing they decide.
fn input_series(metrics: &str, instance: &str, shift: i64, days: i64) -> String {
    let mut out = String::new();
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value = if series.starts_with("rootcause_report_timestamp_seconds") {
            (value.parse::<i64>().unwrap() - shift).to_string()
        } else {
            value.to_owned()
        };
        let scrape = format!("instance=\"{instance}\",job=\"node\"");
        let series = match series.strip_suffix('}') {
            Some(open) => format!("{open},{scrape}}}"),
            None => format!("{series}{{{scrape}}}"),
        };
        out.push_str(&format!(
            "      - series: '{}'\n        values: '{value}x{}'\n",
            series.replace('\'', "''"),
            days * 24
        ));
    }
    out
}

/// `- eval_time` blocks: each alert with the alerts it must raise then.
fn alert_tests(day: i64, expected: &[(&str, &str)]) -> String {
    expected
        .iter()
        .map(|(alert, alerts)| {
            format!(
                "      - eval_time: {day}d\n        alertname: {alert}\n        exp_alerts:{alerts}\n"
            )
        })
        .collect()
}

#[test]
fn the_shipped_alert_rules_fire_on_the_seed_and_stay_silent_when_healthy() {
    require_tool("promtool", "prometheus");
    let scratch = Scratch::new("prom-rules");
    // The seed, and the seed as a capture that missed a command.
    let seed = metrics(SEED);
    let blind = scratch.path.join("blind");
    copy_dir(&incident(SEED), &blind);
    let manifest = std::fs::read_to_string(blind.join("manifest.json")).unwrap();
    let manifest = manifest.replacen(
        '{',
        r#"{"commands": [{"command": "nvidia-smi -q -x", "file": null, "status": "missing", "exit_code": null, "duration_ms": 0, "bytes": 0, "detail": "nvidia-smi: command not found"}],"#,
        1,
    );
    std::fs::write(blind.join("manifest.json"), manifest).unwrap();
    let blind_dir = scratch.path.join("blind-textfile");
    std::fs::create_dir_all(&blind_dir).unwrap();
    let blind = textfile(&blind, &blind_dir);
    assert!(
        blind.contains("rootcause_analysis_gaps{host=\"ct200\"} 1"),
        "{blind}"
    );
    let healthy = metrics(HEALTHY);

    // The report's time on promtool's clock: its time of day. The rules are
    // evaluated at the next midnight, within the 24 hours they keep a
    // report, and a day later, past them.
    let shift = |metrics: &str| -> i64 {
        let line = metrics
            .lines()
            .find(|l| l.starts_with("rootcause_report_timestamp_seconds"))
            .unwrap();
        let seconds: i64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(
            seconds % 86_400 > 0,
            "a capture at midnight: pick another eval_time"
        );
        seconds / 86_400 * 86_400
    };
    let seed_shift = shift(&seed);
    let healthy_shift = shift(&healthy);

    let gpu_alert = r#"
          - exp_labels: {severity: critical, host: ct200, instance: "ct200:9100", gpu: "0"}
            exp_annotations:
              summary: "GPU 0 of ct200 is held by another process"
              description: "rootcause found GPU 0 on ct200 held by a process the failed serving unit does not own. Run `rootcause` on the host's latest bundle (/var/lib/rootcause/bundles) for the holder and the guarded script that frees it.""#;
    let root_alert = r#"
          - exp_labels: {host: ct200, instance: "ct200:9100", category: gpu-memory-held-by-other-process, rule: sglang-unbalanced-memory, severity: critical}
            exp_annotations:
              summary: "ct200: gpu-memory-held-by-other-process (sglang-unbalanced-memory)"
              description: "rootcause's root cause for the last failure on ct200 is gpu-memory-held-by-other-process, found by rule sglang-unbalanced-memory (`rootcause explain sglang-unbalanced-memory`). The report cites the evidence: run `rootcause` on the host's latest bundle.""#;
    let gaps_alert = r#"
          - exp_labels: {severity: warning, host: ct200, instance: "ct200:9100", job: node}
            exp_annotations:
              summary: "The last capture on ct200 missed 1 source(s)"
              description: "Commands of rootcause's capture on ct200 failed, timed out or were refused (a missing nvidia-smi, no permission to read the journal): its findings may be incomplete. `rootcause` on the bundle lists the gaps.""#;
    let none = " []";
    let alerts = [
        "RootcauseGpuHeldByAnotherProcess",
        "RootcauseRootCause",
        "RootcauseCaptureGaps",
    ];
    let silent: Vec<(&str, &str)> = alerts.iter().map(|a| (*a, none)).collect();

    let test = |metrics: &str, instance: &str, shift: i64, firing: &[(&str, &str)]| {
        format!(
            "  - interval: 1h\n    input_series:\n{}    alert_rule_test:\n{}{}\n",
            input_series(metrics, instance, shift, 3),
            alert_tests(1, firing),
            alert_tests(2, &silent),
        )
    };
    let tests = [
        test(
            &seed,
            "ct200:9100",
            seed_shift,
            &[
                (alerts[0], gpu_alert),
                (alerts[1], root_alert),
                (alerts[2], none),
            ],
        ),
        test(
            &blind,
            "ct200:9100",
            seed_shift,
            &[
                (alerts[0], gpu_alert),
                (alerts[1], root_alert),
                (alerts[2], gaps_alert),
            ],
        ),
        test(&healthy, "gpu-h200-07:9100", healthy_shift, &silent),
    ];
    let file = scratch.path.join("rootcause.test.yml");
    std::fs::write(
        &file,
        format!(
            "rule_files:\n  - {}\nevaluation_interval: 1m\ntests:\n{}",
            rules_file().display(),
            tests.concat()
        ),
    )
    .unwrap();
    let o = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "promtool test rules failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
