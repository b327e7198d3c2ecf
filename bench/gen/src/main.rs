//! Generates large, realistic inputs for the benchmark (bench/run.sh): a busy
//! host's journal (`-o short-iso` and `-o json`) with many units, PIDs and an
//! SGLang server logging through journald, an 8-rank SGLang log, and a
//! kernel log (`dmesg`). A few known incidents are buried at random
//! positions; their rule ids and line numbers go to `<out>.incidents`
//! (`rule<TAB>line` per line), so the benchmark can check each is found.
//!
//! Usage: `rootcause-bench-gen KIND MIB OUT [SEED]`, KIND one of
//! `journal-iso`, `journal-json`, `journal-chatty`, `crash-loop`, `sglang`,
//! `kernel`, or `family:NAME:FRAMING` (real lines of one family, see
//! `family.rs`). Deterministic for a given seed. No dependencies: the PRNG is a xorshift.

mod family;

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

const HOST: &str = "gpu-node-7";
const BOOT: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
const MACHINE: &str = "7c1d2e3f4a5b6c7d8e9fa0b1c2d3e4f5";
/// 2026-11-01T00:00:00Z: the month the journal covers starts here.
const EPOCH: u64 = 1_793_491_200;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    fn hex(&mut self, digits: usize) -> String {
        let mut s = String::with_capacity(digits);
        while s.len() < digits {
            s.push_str(&format!("{:016x}", self.next()));
        }
        s.truncate(digits);
        s
    }
}

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A point in time, in microseconds since the epoch.
#[derive(Clone, Copy)]
struct Clock {
    micros: u64,
}

impl Clock {
    fn parts(self) -> (i64, u32, u32, u64, u64, u64, u64) {
        let secs = self.micros / 1_000_000;
        let (y, m, d) = civil((secs / 86_400) as i64);
        let day = secs % 86_400;
        (
            y,
            m,
            d,
            day / 3600,
            day / 60 % 60,
            day % 60,
            self.micros % 1_000_000,
        )
    }
    /// `2026-11-27T09:38:40+0000`, as `journalctl -o short-iso` prints it.
    fn iso(self) -> String {
        let (y, mo, d, h, mi, s, _) = self.parts();
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}+0000")
    }
    /// `2026-11-27 09:38:40`, SGLang's prefix.
    fn sglang(self) -> String {
        let (y, mo, d, h, mi, s, _) = self.parts();
        format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
    }
    /// Seconds since boot, as dmesg prints them.
    fn uptime(self) -> String {
        let up = self.micros - EPOCH * 1_000_000 + 11_370_000_000;
        format!("[{:5}.{:06}]", up / 1_000_000, up % 1_000_000)
    }
    fn tick(&mut self, rng: &mut Rng, mean_ms: u64) {
        self.micros += rng.below(mean_ms * 2000) + 1;
    }
}

/// One journal entry before formatting.
struct Entry {
    ident: &'static str,
    pid: Option<u32>,
    unit: &'static str,
    comm: &'static str,
    exe: &'static str,
    cmdline: String,
    transport: &'static str,
    message: String,
}

/// A daemon of the noise: who it is and what it says.
struct Daemon {
    ident: &'static str,
    unit: &'static str,
    exe: &'static str,
    /// PIDs it logs under (a forking daemon has many).
    pids: Vec<u32>,
    weight: u64,
}

fn daemons(rng: &mut Rng) -> Vec<Daemon> {
    let mut pool =
        |n: usize| -> Vec<u32> { (0..n).map(|_| 2000 + rng.below(400_000) as u32).collect() };
    vec![
        Daemon {
            ident: "sshd",
            unit: "ssh.service",
            exe: "/usr/sbin/sshd",
            pids: pool(600),
            weight: 14,
        },
        Daemon {
            ident: "CRON",
            unit: "cron.service",
            exe: "/usr/sbin/cron",
            pids: pool(900),
            weight: 10,
        },
        Daemon {
            ident: "systemd-logind",
            unit: "systemd-logind.service",
            exe: "/usr/lib/systemd/systemd-logind",
            pids: vec![812],
            weight: 4,
        },
        Daemon {
            ident: "dockerd",
            unit: "docker.service",
            exe: "/usr/bin/dockerd",
            pids: vec![1203],
            weight: 9,
        },
        Daemon {
            ident: "containerd",
            unit: "containerd.service",
            exe: "/usr/bin/containerd",
            pids: vec![1100],
            weight: 7,
        },
        Daemon {
            ident: "kubelet",
            unit: "kubelet.service",
            exe: "/usr/bin/kubelet",
            pids: vec![1502],
            weight: 12,
        },
        Daemon {
            ident: "node_exporter",
            unit: "prometheus-node-exporter.service",
            exe: "/usr/bin/prometheus-node-exporter",
            pids: vec![1401],
            weight: 3,
        },
        Daemon {
            ident: "chronyd",
            unit: "chrony.service",
            exe: "/usr/sbin/chronyd",
            pids: vec![733],
            weight: 1,
        },
        Daemon {
            ident: "nvidia-persistenced",
            unit: "nvidia-persistenced.service",
            exe: "/usr/bin/nvidia-persistenced",
            pids: vec![1017],
            weight: 1,
        },
        Daemon {
            ident: "kernel",
            unit: "",
            exe: "",
            pids: vec![],
            weight: 6,
        },
        Daemon {
            ident: "python3",
            unit: "sglang.service",
            exe: "/opt/sglang/venv/bin/python3",
            pids: vec![
                31544, 31701, 31702, 31703, 31704, 31705, 31706, 31707, 31708,
            ],
            weight: 60,
        },
        Daemon {
            ident: "vllm",
            unit: "vllm-qwen.service",
            exe: "/opt/vllm/venv/bin/python3",
            pids: vec![41230, 41388],
            weight: 0,
        },
    ]
}

/// A journal of a host whose servers are busy: nine lines in ten are the
/// SGLang ranks' and the vLLM server's batch, throughput, access and health
/// check lines, the rest the usual daemons.
fn chatty(daemons: &mut [Daemon]) {
    for d in daemons {
        d.weight = match d.ident {
            "python3" => 600,
            "vllm" => 300,
            _ => d.weight / 2,
        };
    }
}

fn ip(rng: &mut Rng) -> String {
    format!(
        "10.{}.{}.{}",
        rng.below(4),
        rng.below(256),
        1 + rng.below(254)
    )
}

/// What a noise daemon says: realistic, and free of every failure signature.
fn say(d: &Daemon, rng: &mut Rng, clock: Clock, seq: &mut u64) -> String {
    *seq += 1;
    match d.ident {
        "sshd" => match rng.below(6) {
            0 => format!(
                "Accepted publickey for deploy from {} port {} ssh2: ED25519 SHA256:{}",
                ip(rng),
                1024 + rng.below(60000),
                rng.hex(43)
            ),
            1 => {
                "pam_unix(sshd:session): session opened for user deploy(uid=1000) by deploy(uid=0)"
                    .to_owned()
            }
            2 => format!(
                "Received disconnect from {} port {}:11: disconnected by user",
                ip(rng),
                1024 + rng.below(60000)
            ),
            3 => format!(
                "Disconnected from user deploy {} port {}",
                ip(rng),
                1024 + rng.below(60000)
            ),
            4 => format!(
                "Connection closed by authenticating user root 203.0.113.{} port {} [preauth]",
                rng.below(255),
                1024 + rng.below(60000)
            ),
            _ => "pam_unix(sshd:session): session closed for user deploy".to_owned(),
        },
        "CRON" => match rng.below(3) {
            0 => "pam_unix(cron:session): session opened for user root(uid=0) by root(uid=0)"
                .to_owned(),
            1 => format!(
                "(root) CMD ({})",
                rng.pick(&[
                    "command -v debian-sa1 > /dev/null && debian-sa1 1 1",
                    "   cd / && run-parts --report /etc/cron.hourly",
                    "/usr/local/bin/gpu-metrics-push --quiet"
                ])
            ),
            _ => "pam_unix(cron:session): session closed for user root".to_owned(),
        },
        "systemd-logind" => match rng.below(3) {
            0 => format!("New session {} of user deploy.", 1000 + *seq % 5000),
            1 => format!(
                "Session {} logged out. Waiting for processes to exit.",
                1000 + *seq % 5000
            ),
            _ => format!("Removed session {}.", 1000 + *seq % 5000),
        },
        "dockerd" => format!(
            "time=\"{}.{:09}Z\" level=info msg=\"ignoring event\" container={} module=libcontainerd namespace=moby topic=/tasks/delete type=\"*events.TaskDelete\"",
            &clock.iso()[..19],
            rng.below(1_000_000_000),
            rng.hex(64)
        ),
        "containerd" => format!(
            "time=\"{}.{:09}Z\" level=info msg=\"shim disconnected\" id={} namespace=moby",
            &clock.iso()[..19],
            rng.below(1_000_000_000),
            rng.hex(64)
        ),
        "kubelet" => match rng.below(3) {
            0 => format!(
                "I1103 {:02}:{:02}:{:02}.{:06}    1502 kubelet_getters.go:187] \"Pod status updated\" pod=\"kube-system/kube-proxy-{}\" status=\"Running\"",
                rng.below(24),
                rng.below(60),
                rng.below(60),
                rng.below(1_000_000),
                rng.hex(5)
            ),
            1 => format!(
                "I1103 {:02}:{:02}:{:02}.{:06}    1502 scope.go:117] \"RemoveContainer\" containerID=\"{}\"",
                rng.below(24),
                rng.below(60),
                rng.below(60),
                rng.below(1_000_000),
                rng.hex(64)
            ),
            _ => format!(
                "I1103 {:02}:{:02}:{:02}.{:06}    1502 reconciler_common.go:258] \"operationExecutor.VerifyControllerAttachedVolume started for volume\" volume=\"kube-api-access-{}\"",
                rng.below(24),
                rng.below(60),
                rng.below(60),
                rng.below(1_000_000),
                rng.hex(5)
            ),
        },
        "node_exporter" => format!(
            "ts={}.{:03}Z caller=textfile.go:227 level=debug collector=textfile msg=\"collected textfile\" file=gpu_{}.prom",
            &clock.iso()[..19],
            rng.below(1000),
            rng.below(8)
        ),
        "chronyd" => format!(
            "Selected source {} (ntp{}.example.net)",
            ip(rng),
            rng.below(4)
        ),
        "nvidia-persistenced" => "device 0000:3b:00.0 - persistence mode enabled.".to_owned(),
        "kernel" => match rng.below(4) {
            0 => format!(
                "[UFW BLOCK] IN=eth0 OUT= MAC=0c:42:a1:{:02x}:{:02x}:{:02x} SRC={} DST=10.0.0.7 LEN=60 TOS=0x00 PREC=0x00 TTL=52 ID={} DF PROTO=TCP SPT={} DPT=22 WINDOW=64240 RES=0x00 SYN URGP=0",
                rng.below(256),
                rng.below(256),
                rng.below(256),
                ip(rng),
                rng.below(65535),
                rng.below(65535)
            ),
            1 => format!(
                "audit: type=1400 audit({}.{:03}:{}): apparmor=\"ALLOWED\" operation=\"open\" profile=\"snap.lxd.daemon\" name=\"/proc/{}/status\" pid={} comm=\"lxd\" requested_mask=\"r\" denied_mask=\"r\" fsuid=0 ouid=0",
                EPOCH + rng.below(3_000_000),
                rng.below(1000),
                rng.below(100_000),
                rng.below(400_000),
                rng.below(400_000)
            ),
            2 => format!(
                "mlx5_core 0000:{:02x}:00.0 eth{}: Link up",
                rng.below(256),
                rng.below(4)
            ),
            _ => "EXT4-fs (nvme0n1p2): re-mounted. Quota mode: none.".to_owned(),
        },
        "vllm" => vllm_message(rng),
        _ => sglang_message(rng, None),
    }
}

/// One line a vLLM server writes while it serves: the engine's periodic
/// throughput line and uvicorn's access log, health checks included.
fn vllm_message(rng: &mut Rng) -> String {
    let (m, d) = (11, 1 + rng.below(28));
    let (h, mi, s) = (rng.below(24), rng.below(60), rng.below(60));
    match rng.below(10) {
        0..=3 => format!(
            "INFO {m:02}-{d:02} {h:02}:{mi:02}:{s:02} [loggers.py:123] Engine 000: Avg prompt throughput: {}.{} tokens/s, Avg generation throughput: {}.{} tokens/s, Running: {} reqs, Waiting: 0 reqs, GPU KV cache usage: {}.{}%, Prefix cache hit rate: {}.{}%",
            rng.below(9000),
            rng.below(10),
            rng.below(3000),
            rng.below(10),
            rng.below(64),
            rng.below(100),
            rng.below(10),
            rng.below(100),
            rng.below(10)
        ),
        4..=6 => format!(
            "INFO:     10.0.{}.{}:{} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
            rng.below(4),
            rng.below(255),
            1024 + rng.below(60000)
        ),
        7 => format!(
            "INFO:     127.0.0.1:{} - \"GET /health HTTP/1.1\" 200 OK",
            1024 + rng.below(60000)
        ),
        8 => format!(
            "INFO:     10.0.{}.{}:{} - \"GET /v1/models HTTP/1.1\" 200 OK",
            rng.below(4),
            rng.below(255),
            1024 + rng.below(60000)
        ),
        _ => format!(
            "INFO {m:02}-{d:02} {h:02}:{mi:02}:{s:02} [logger.py:43] Received request chatcmpl-{}: prompt: '', params: SamplingParams(n=1, temperature=0.7, top_p=0.8, max_tokens={}), prompt_token_ids: None, lora_request: None.",
            rng.hex(32),
            64 + rng.below(4000)
        ),
    }
}

/// One line an SGLang server writes while it serves: decode and prefill
/// batches per rank, and the HTTP access log.
fn sglang_message(rng: &mut Rng, rank: Option<u64>) -> String {
    let running = rng.below(64);
    match rng.below(10) {
        0..=5 => format!(
            "Decode batch. #running-req: {running}, #token: {}, token usage: 0.{:02}, cuda graph: True, gen throughput (token/s): {}.{:02}, #queue-req: {}",
            running * 900 + rng.below(900),
            rng.below(100),
            200 + rng.below(3000),
            rng.below(100),
            rng.below(4)
        ),
        6 | 7 => format!(
            "Prefill batch. #new-seq: {}, #new-token: {}, #cached-token: {}, token usage: 0.{:02}, #running-req: {running}, #queue-req: {}",
            1 + rng.below(4),
            rng.below(8192),
            rng.below(8192),
            rng.below(100),
            rng.below(4)
        ),
        _ if rank.is_some() => format!(
            "Decode batch. #running-req: {running}, #token: {}, token usage: 0.{:02}, cuda graph: True, gen throughput (token/s): {}.{:02}, #queue-req: 0",
            running * 900,
            rng.below(100),
            200 + rng.below(3000),
            rng.below(100)
        ),
        _ => format!(
            "INFO:     10.0.{}.{}:{} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
            rng.below(4),
            rng.below(255),
            1024 + rng.below(60000)
        ),
    }
}

/// How a journal dump is written.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    ShortIso,
    Json,
}

fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

struct JournalWriter {
    out: BufWriter<File>,
    mode: Mode,
    bytes: u64,
    lines: u64,
    seqnum: u64,
    rng: Rng,
}

impl JournalWriter {
    fn write(&mut self, clock: Clock, e: &Entry) {
        let line = match self.mode {
            Mode::ShortIso => match e.pid {
                Some(pid) => format!("{} {HOST} {}[{pid}]: {}\n", clock.iso(), e.ident, e.message),
                None => format!("{} {HOST} {}: {}\n", clock.iso(), e.ident, e.message),
            },
            Mode::Json => self.json(clock, e),
        };
        self.bytes += line.len() as u64;
        self.lines += 1;
        self.out.write_all(line.as_bytes()).expect("write");
    }

    fn json(&mut self, clock: Clock, e: &Entry) -> String {
        self.seqnum += 1;
        let mono = clock.micros - EPOCH * 1_000_000 + 11_370_000_000;
        let mut s = format!(
            "{{\"__CURSOR\":\"s=6f1a2b3c4d5e4f60a1b2c3d4e5f60718;i={:x};b={BOOT};m={mono:x};t={:x};x={}\",\"__REALTIME_TIMESTAMP\":\"{}\",\"__MONOTONIC_TIMESTAMP\":\"{mono}\",\"__SEQNUM\":\"{}\",\"__SEQNUM_ID\":\"6f1a2b3c4d5e4f60a1b2c3d4e5f60718\",\"_BOOT_ID\":\"{BOOT}\",\"_MACHINE_ID\":\"{MACHINE}\",\"_HOSTNAME\":\"{HOST}\",\"PRIORITY\":\"6\",\"SYSLOG_FACILITY\":\"3\",\"SYSLOG_IDENTIFIER\":\"{}\"",
            self.seqnum,
            clock.micros,
            self.rng.hex(16),
            clock.micros,
            self.seqnum,
            e.ident
        );
        if let Some(pid) = e.pid {
            let _ = write!(
                s,
                ",\"_PID\":\"{pid}\",\"_UID\":\"0\",\"_GID\":\"0\",\"_COMM\":\"{}\",\"_EXE\":\"{}\",\"_CMDLINE\":\"{}\",\"_CAP_EFFECTIVE\":\"1ffffffffff\",\"_SELINUX_CONTEXT\":\"unconfined\\n\"",
                e.comm,
                e.exe,
                json_escape(&e.cmdline)
            );
            if !e.unit.is_empty() {
                let _ = write!(
                    s,
                    ",\"_SYSTEMD_CGROUP\":\"/system.slice/{0}\",\"_SYSTEMD_UNIT\":\"{0}\",\"_SYSTEMD_SLICE\":\"system.slice\",\"_SYSTEMD_INVOCATION_ID\":\"{1}\"",
                    e.unit,
                    self.rng.hex(32)
                );
            }
            if pid == 1 && !e.unit.is_empty() {
                let _ = write!(s, ",\"UNIT\":\"{}\"", e.unit);
            }
        }
        let _ = writeln!(
            s,
            ",\"_TRANSPORT\":\"{}\",\"_SOURCE_REALTIME_TIMESTAMP\":\"{}\",\"MESSAGE\":\"{}\"}}",
            e.transport,
            clock.micros - 7,
            json_escape(&e.message)
        );
        s
    }
}

fn pid1(unit: &'static str, message: String) -> Entry {
    Entry {
        ident: "systemd",
        pid: Some(1),
        unit,
        comm: "systemd",
        exe: "/usr/lib/systemd/systemd",
        cmdline: "/sbin/init splash".to_owned(),
        transport: "journal",
        message,
    }
}

fn from(d: &Daemon, pid: u32, message: String) -> Entry {
    Entry {
        ident: d.ident,
        pid: (d.ident != "kernel").then_some(pid),
        unit: d.unit,
        comm: match d.ident {
            "CRON" => "cron",
            "python3" => "python3",
            other => other,
        },
        exe: d.exe,
        cmdline: match d.ident {
            "python3" => "/opt/sglang/venv/bin/python3 -m sglang.launch_server --model-path /models/Qwen3-32B --tp-size 8 --port 30000".to_owned(),
            "sshd" => "sshd: deploy [priv]".to_owned(),
            _ => d.exe.to_owned(),
        },
        transport: if d.ident == "kernel" { "kernel" } else { "syslog" },
        message,
    }
}

/// A recurring timer: PID 1's lines for one run of a oneshot service.
fn timer_run(unit: &'static str, desc: &str) -> [Entry; 3] {
    [
        pid1(unit, format!("Starting {unit} - {desc}...")),
        pid1(unit, format!("{unit}: Deactivated successfully.")),
        pid1(unit, format!("Finished {unit} - {desc}.")),
    ]
}

/// The journal incidents: a crash loop of a server whose port is taken
/// (then the start limit), and a unit whose processes survive SIGKILL.
fn journal_incidents(start: Clock) -> Vec<(Clock, Entry, Option<&'static str>)> {
    let mut t = start;
    let mut out = Vec::new();
    let mut at = |secs: u64, e: Entry, rule: Option<&'static str>| {
        t.micros += secs * 1_000_000;
        out.push((t, e, rule));
    };
    let vllm = |pid: u32, message: &str| Entry {
        ident: "vllm",
        pid: Some(pid),
        unit: "vllm-qwen.service",
        comm: "vllm",
        exe: "/opt/vllm/venv/bin/python3",
        cmdline:
            "/opt/vllm/venv/bin/python3 /opt/vllm/venv/bin/vllm serve /models/Qwen3-8B --port 8000"
                .to_owned(),
        transport: "stdout",
        message: message.to_owned(),
    };
    for n in 1..=5u32 {
        let pid = 52_000 + n * 17;
        at(
            0,
            pid1(
                "vllm-qwen.service",
                "Started vllm-qwen.service - vLLM Qwen3-8B.".to_owned(),
            ),
            None,
        );
        let rule = (n == 1).then_some("address-already-in-use");
        at(
            9,
            vllm(
                pid,
                "ERROR 11-14 03:12:09 [launcher.py:75] [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
            ),
            rule,
        );
        let rule = (n == 1).then_some("unit-exit-nonzero");
        at(
            0,
            pid1(
                "vllm-qwen.service",
                "vllm-qwen.service: Main process exited, code=exited, status=1/FAILURE".to_owned(),
            ),
            rule,
        );
        at(
            0,
            pid1(
                "vllm-qwen.service",
                "vllm-qwen.service: Failed with result 'exit-code'.".to_owned(),
            ),
            None,
        );
        if n < 5 {
            let rule = (n == 3).then_some("systemd-crash-loop");
            at(
                5,
                pid1(
                    "vllm-qwen.service",
                    format!("vllm-qwen.service: Scheduled restart job, restart counter is at {n}."),
                ),
                rule,
            );
        }
    }
    at(
        0,
        pid1(
            "vllm-qwen.service",
            "vllm-qwen.service: Start request repeated too quickly.".to_owned(),
        ),
        Some("systemd-start-limit-hit"),
    );
    at(
        0,
        pid1(
            "vllm-qwen.service",
            "vllm-qwen.service: Failed with result 'start-limit-hit'.".to_owned(),
        ),
        None,
    );
    at(
        0,
        pid1(
            "vllm-qwen.service",
            "Failed to start vllm-qwen.service - vLLM Qwen3-8B.".to_owned(),
        ),
        None,
    );
    out
}

fn stuck_stop(start: Clock) -> Vec<(Clock, Entry, Option<&'static str>)> {
    let mut t = start;
    let mut out = Vec::new();
    let mut at = |secs: u64, e: Entry, rule: Option<&'static str>| {
        t.micros += secs * 1_000_000;
        out.push((t, e, rule));
    };
    let unit = "triton-embed.service";
    at(
        0,
        pid1(
            unit,
            "Stopping triton-embed.service - Triton embedding server...".to_owned(),
        ),
        None,
    );
    at(
        90,
        pid1(
            unit,
            "triton-embed.service: State 'stop-sigterm' timed out. Killing.".to_owned(),
        ),
        Some("systemd-stop-timeout"),
    );
    at(
        0,
        pid1(
            unit,
            "triton-embed.service: Killing process 61234 (tritonserver) with signal SIGKILL."
                .to_owned(),
        ),
        None,
    );
    at(
        90,
        pid1(
            unit,
            "triton-embed.service: Processes still around after SIGKILL. Ignoring.".to_owned(),
        ),
        None,
    );
    at(
        90,
        pid1(
            unit,
            "triton-embed.service: State 'final-sigterm' timed out. Killing.".to_owned(),
        ),
        None,
    );
    at(90, pid1(unit, "triton-embed.service: Processes still around after final SIGKILL. Entering failed mode.".to_owned()), None);
    at(
        0,
        pid1(
            unit,
            "triton-embed.service: Failed with result 'timeout'.".to_owned(),
        ),
        None,
    );
    at(
        0,
        pid1(
            unit,
            "Stopped triton-embed.service - Triton embedding server.".to_owned(),
        ),
        None,
    );
    out
}

fn journal(mode: Mode, busy: bool, mib: u64, path: &str, seed: u64) -> Vec<(&'static str, u64)> {
    let mut rng = Rng(seed | 1);
    let mut daemons = daemons(&mut rng);
    if busy {
        chatty(&mut daemons);
    }
    let total: u64 = daemons.iter().map(|d| d.weight).sum();
    let target = mib << 20;
    let mut w = JournalWriter {
        out: BufWriter::with_capacity(1 << 20, File::create(path).expect("create output")),
        mode,
        bytes: 0,
        lines: 0,
        seqnum: 0,
        rng: Rng(seed.rotate_left(17) | 1),
    };
    let mut clock = Clock {
        micros: EPOCH * 1_000_000,
    };
    // Where the incidents go: fractions of the file, drawn once.
    let mut marks = [rng.below(800) + 100, rng.below(800) + 100];
    marks.sort_unstable();
    let mut pending: Vec<Vec<(Clock, Entry, Option<&'static str>)>> = Vec::new();
    let mut incidents = Vec::new();
    let mut seq = 0;
    let mut next_timer = clock.micros + 600_000_000;
    let mut placed = 0;
    while w.bytes < target {
        if placed < marks.len() && w.bytes * 1000 / target >= marks[placed] {
            pending.push(if placed == 0 {
                journal_incidents(clock)
            } else {
                stuck_stop(clock)
            });
            placed += 1;
        }
        if let Some(batch) = pending.pop() {
            for (t, e, rule) in batch {
                clock.micros = clock.micros.max(t.micros);
                w.write(clock, &e);
                if let Some(rule) = rule {
                    incidents.push((rule, w.lines));
                }
            }
            continue;
        }
        clock.tick(&mut rng, 40);
        if clock.micros >= next_timer {
            next_timer += 600_000_000 + rng.below(60_000_000);
            let (unit, desc) = *rng.pick(&[
                ("sysstat-collect.service", "system activity accounting tool"),
                ("gpu-metrics.service", "Push GPU metrics"),
                ("logrotate.service", "Rotate log files"),
            ]);
            for e in timer_run(unit, desc) {
                w.write(clock, &e);
            }
            continue;
        }
        let mut r = rng.below(total);
        let d = daemons
            .iter()
            .find(|d| {
                if r < d.weight {
                    return true;
                }
                r -= d.weight;
                false
            })
            .expect("weights add up");
        let pid = if d.pids.is_empty() {
            0
        } else {
            *rng.pick(&d.pids)
        };
        let message = if d.ident == "python3" && pid != 31544 {
            format!(
                "[{} TP{}] {}",
                clock.sglang(),
                (pid - 31701) % 8,
                sglang_message(&mut rng, Some(0))
            )
        } else if d.ident == "python3" {
            format!("[{}] {}", clock.sglang(), sglang_message(&mut rng, None))
        } else {
            say(d, &mut rng, clock, &mut seq)
        };
        w.write(clock, &from(d, pid, message));
    }
    w.out.flush().expect("flush");
    incidents
}

/// An 8-rank SGLang log: a long healthy run, then a restart on a GPU that
/// another process holds (the memory-balance check fails), buried at a
/// random position and followed by more healthy serving after the fix.
fn sglang(mib: u64, path: &str, seed: u64) -> Vec<(&'static str, u64)> {
    let mut rng = Rng(seed | 1);
    let target = mib << 20;
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).expect("create output"));
    let (mut bytes, mut lines) = (0u64, 0u64);
    let mut put = |s: &str, bytes: &mut u64, lines: &mut u64| {
        out.write_all(s.as_bytes()).expect("write");
        out.write_all(b"\n").expect("write");
        *bytes += s.len() as u64 + 1;
        *lines += 1;
    };
    let mut clock = Clock {
        micros: EPOCH * 1_000_000,
    };
    let mark = (rng.below(800) + 100) * target / 1000;
    let mut incidents = Vec::new();
    let mut buried = false;
    while bytes < target {
        if !buried && bytes >= mark {
            buried = true;
            let ts = clock.sglang();
            put(
                &format!(
                    "[{ts}] server_args=ServerArgs(model_path='/models/Qwen3-235B-A22B', tp_size=8, pp_size=1, dp_size=1, ep_size=1, base_gpu_id=0, gpu_id_step=1, mem_fraction_static=0.85, host='0.0.0.0', port=30000, served_model_name='qwen3-235b', dist_init_addr=None, nnodes=1, node_rank=0)"
                ),
                &mut bytes,
                &mut lines,
            );
            for tp in 0..8 {
                put(
                    &format!("[{ts} TP{tp}] Init torch distributed begin."),
                    &mut bytes,
                    &mut lines,
                );
            }
            for tp in 1..8 {
                put(
                    &format!(
                        "[{ts} TP{tp}] Scheduler hit an exception: Traceback (most recent call last):"
                    ),
                    &mut bytes,
                    &mut lines,
                );
                put(
                    "  File \"/opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py\", line 3127, in run_scheduler_process",
                    &mut bytes,
                    &mut lines,
                );
                put("    scheduler = Scheduler(", &mut bytes, &mut lines);
                put(
                    "  File \"/opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/model_executor/model_runner.py\", line 781, in init_torch_distributed",
                    &mut bytes,
                    &mut lines,
                );
                put("    raise RuntimeError(", &mut bytes, &mut lines);
                put(
                    "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875",
                    &mut bytes,
                    &mut lines,
                );
                if tp == 1 {
                    incidents.push(("sglang-unbalanced-memory", lines));
                }
                put("", &mut bytes, &mut lines);
            }
            put(
                &format!(
                    "[{ts}] Received sigquit from a child process. It usually means the child failed."
                ),
                &mut bytes,
                &mut lines,
            );
            clock.micros += 120_000_000;
            continue;
        }
        clock.tick(&mut rng, 40);
        let rank = rng.below(9);
        let line = if rank == 8 {
            format!("[{}] {}", clock.sglang(), sglang_message(&mut rng, None))
        } else {
            format!(
                "[{} TP{rank}] {}",
                clock.sglang(),
                sglang_message(&mut rng, Some(rank))
            )
        };
        put(&line, &mut bytes, &mut lines);
    }
    out.flush().expect("flush");
    incidents
}

/// A kernel log (`dmesg`): driver chatter, firewall and audit lines, and an
/// NVIDIA driver/library version mismatch buried in it.
fn kernel(mib: u64, path: &str, seed: u64) -> Vec<(&'static str, u64)> {
    let mut rng = Rng(seed | 1);
    let target = mib << 20;
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).expect("create output"));
    let (mut bytes, mut lines) = (0u64, 0u64);
    let mut clock = Clock {
        micros: EPOCH * 1_000_000,
    };
    let mark = (rng.below(800) + 100) * target / 1000;
    let mut incidents = Vec::new();
    let kernel = Daemon {
        ident: "kernel",
        unit: "",
        exe: "",
        pids: vec![],
        weight: 1,
    };
    let mut seq = 0;
    while bytes < target {
        clock.tick(&mut rng, 900);
        let line = if incidents.is_empty() && bytes >= mark {
            incidents.push(("nvml-driver-library-mismatch", lines + 1));
            format!(
                "{} NVRM: API mismatch: the client has the version 550.127.05, but this kernel module has the version 550.90.07.  Please make sure that this kernel module and all NVIDIA driver components have the same version.",
                clock.uptime()
            )
        } else {
            format!(
                "{} {}",
                clock.uptime(),
                say(&kernel, &mut rng, clock, &mut seq)
            )
        };
        out.write_all(line.as_bytes()).expect("write");
        out.write_all(b"\n").expect("write");
        bytes += line.len() as u64 + 1;
        lines += 1;
    }
    out.flush().expect("flush");
    incidents
}

/// A unit crash-looping for days: the seed incident (sglang-k26.service
/// dies at start-up because a forgotten ddtree-qwen.service holds GPU 0;
/// fixtures/incidents/2026-11-27-ct200-ghost-ddtree) restarted by systemd
/// every minute, each cycle with fresh PIDs, a little host noise between
/// cycles. Buried at random places, once each: a unit whose processes
/// survive SIGKILL, and an Xid 79 (the GPU fell off the bus).
fn crash_loop(mib: u64, path: &str, seed: u64) -> Vec<(&'static str, u64)> {
    let mut rng = Rng(seed | 1);
    let daemons = daemons(&mut rng);
    let noise: Vec<&Daemon> = daemons
        .iter()
        .filter(|d| !matches!(d.ident, "python3" | "vllm" | "kernel"))
        .collect();
    let target = mib << 20;
    let mut w = JournalWriter {
        out: BufWriter::with_capacity(1 << 20, File::create(path).expect("create output")),
        mode: Mode::ShortIso,
        bytes: 0,
        lines: 0,
        seqnum: 0,
        rng: Rng(seed.rotate_left(17) | 1),
    };
    let mut clock = Clock {
        micros: EPOCH * 1_000_000,
    };
    let server = |pid: u32, message: String| {
        Entry {
        ident: "python3",
        pid: Some(pid),
        unit: "sglang-k26.service",
        comm: "python3",
        exe: "/opt/sglang/venv/bin/python3",
        cmdline: "/opt/sglang/venv/bin/python3 -m sglang.launch_server --model-path /models/Kimi-K2.6 --tp-size 8 --port 30001".to_owned(),
        transport: "stdout",
        message,
    }
    };
    let unit = "sglang-k26.service";
    let mut incidents = Vec::new();
    // The holder, started once, long before.
    w.write(
        clock,
        &pid1(
            "ddtree-qwen.service",
            "Started ddtree-qwen.service - DDTree speculative decoding (Qwen3.6-27B).".to_owned(),
        ),
    );
    clock.micros += 8_000_000;
    let holder = Entry {
        unit: "ddtree-qwen.service",
        ..server(
            20629,
            format!(
                "[{}] server_args=ServerArgs(model_path='/models/Qwen3.6-27B', tp_size=1, port=30000, speculative_algorithm='DDTREE', speculative_num_draft_tokens=15)",
                clock.sglang()
            ),
        )
    };
    w.write(clock, &holder);
    clock.micros += 148_000_000;
    let ready = Entry {
        message: format!(
            "[{}] The server is fired up and ready to roll!",
            clock.sglang()
        ),
        ..holder
    };
    w.write(clock, &ready);
    let mut marks = [rng.below(800) + 100, rng.below(800) + 100];
    marks.sort_unstable();
    let mut placed = 0;
    let mut cycle: u64 = 0;
    let kernel = daemons
        .iter()
        .find(|d| d.ident == "kernel")
        .expect("kernel");
    while w.bytes < target {
        if placed < marks.len() && w.bytes * 1000 / target >= marks[placed] {
            if placed == 0 {
                for (t, e, rule) in stuck_stop(clock) {
                    clock.micros = clock.micros.max(t.micros);
                    w.write(clock, &e);
                    if let Some(rule) = rule {
                        incidents.push((rule, w.lines));
                    }
                }
            } else {
                let e = from(kernel, 0, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1102, name=nvidia-persistenced, GPU has fallen off the bus.".to_owned());
                w.write(clock, &e);
                incidents.push(("xid-gpu-fell-off-bus", w.lines));
            }
            placed += 1;
        }
        cycle += 1;
        let main = 40_000 + (cycle * 197 % 3_000_000) as u32;
        let first = cycle == 1;
        w.write(
            clock,
            &pid1(
                unit,
                "Started sglang-k26.service - SGLang Kimi K2.6 (TP8).".to_owned(),
            ),
        );
        clock.micros += 7_000_000;
        w.write(clock, &server(main, format!("[{}] server_args=ServerArgs(model_path='/models/Kimi-K2.6', tp_size=8, port=30001, mem_fraction_static=0.85, trust_remote_code=True)", clock.sglang())));
        clock.micros += 22_000_000;
        for tp in [0u32, 3] {
            w.write(
                clock,
                &server(
                    main + 166 + tp,
                    format!("[{} TP{tp}] Init torch distributed begin.", clock.sglang()),
                ),
            );
        }
        clock.micros += 2_000_000;
        let rank = main + 166;
        for line in [
            format!("[{} TP0] Scheduler hit an exception: Traceback (most recent call last):", clock.sglang()),
            "  File \"/opt/sglang/python/sglang/srt/managers/scheduler.py\", line 2891, in run_scheduler_process".to_owned(),
            "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)".to_owned(),
            "  File \"/opt/sglang/python/sglang/srt/managers/tp_worker.py\", line 81, in __init__".to_owned(),
            "    self.model_runner = ModelRunner(".to_owned(),
            "  File \"/opt/sglang/python/sglang/srt/model_executor/model_runner.py\", line 539, in init_torch_distributed".to_owned(),
            "    raise RuntimeError(".to_owned(),
            "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875".to_owned(),
        ] {
            w.write(clock, &server(rank, line));
        }
        if first {
            incidents.push(("sglang-unbalanced-memory", w.lines));
        }
        clock.micros += 1_000_000;
        w.write(clock, &server(main, format!("[{}] Received sigquit from a child process. It usually means the child failed.", clock.sglang())));
        clock.micros += 1_000_000;
        w.write(
            clock,
            &pid1(
                unit,
                "sglang-k26.service: Main process exited, code=killed, status=9/KILL".to_owned(),
            ),
        );
        w.write(
            clock,
            &pid1(
                unit,
                "sglang-k26.service: Failed with result 'signal'.".to_owned(),
            ),
        );
        clock.micros += 5_000_000;
        w.write(
            clock,
            &pid1(
                unit,
                format!(
                    "sglang-k26.service: Scheduled restart job, restart counter is at {cycle}."
                ),
            ),
        );
        if cycle == 3 {
            incidents.push(("systemd-crash-loop", w.lines));
        }
        w.write(
            clock,
            &pid1(
                unit,
                "Stopped sglang-k26.service - SGLang Kimi K2.6 (TP8).".to_owned(),
            ),
        );
        // The host goes on between cycles.
        for _ in 0..rng.below(8) {
            clock.tick(&mut rng, 2000);
            let d = *rng.pick(&noise);
            let pid = *rng.pick(&d.pids);
            let mut seq = cycle;
            let message = say(d, &mut rng, clock, &mut seq);
            w.write(clock, &from(d, pid, message));
        }
        clock.micros += 12_000_000;
    }
    w.out.flush().expect("flush");
    incidents
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(kind), Some(mib), Some(out)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!(
            "usage: rootcause-bench-gen journal-iso|journal-json|journal-chatty|crash-loop|sglang|kernel|family:NAME:FRAMING MIB OUT [SEED]"
        );
        return ExitCode::from(2);
    };
    let Ok(mib) = mib.parse::<u64>() else {
        eprintln!("MIB must be a number");
        return ExitCode::from(2);
    };
    let seed = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20261127);
    if let Some(spec) = kind.strip_prefix("family:") {
        let Some((name, framing)) = spec.split_once(':') else {
            eprintln!("want family:NAME:FRAMING");
            return ExitCode::from(2);
        };
        let Some(framing) = family::Framing::parse(framing) else {
            eprintln!("unknown framing `{framing}` (raw, journal-iso, journal-json, docker, cri)");
            return ExitCode::from(2);
        };
        let dir = std::env::var("ROOTCAUSE_FAMILIES").unwrap_or_else(|_| "bench/families".into());
        let incidents = family::generate(&dir, name, framing, mib, out, seed);
        let list: String = incidents
            .iter()
            .map(|(r, l)| format!("{r}\t{l}\n"))
            .collect();
        std::fs::write(format!("{out}.incidents"), list).expect("write incidents");
        return ExitCode::SUCCESS;
    }
    let incidents = match kind.as_str() {
        "journal-iso" => journal(Mode::ShortIso, false, mib, out, seed),
        "journal-json" => journal(Mode::Json, false, mib, out, seed),
        "journal-chatty" => journal(Mode::ShortIso, true, mib, out, seed),
        "crash-loop" => crash_loop(mib, out, seed),
        "sglang" => sglang(mib, out, seed),
        "kernel" => kernel(mib, out, seed),
        other => {
            eprintln!("unknown kind `{other}`");
            return ExitCode::from(2);
        }
    };
    let mut list = String::new();
    for (rule, line) in incidents {
        list.push_str(&format!("{rule}\t{line}\n"));
    }
    std::fs::write(format!("{out}.incidents"), list).expect("write incidents");
    ExitCode::SUCCESS
}
