//! The processes on the GPUs: their PIDs (read from what nvidia-smi just
//! printed, with the analyser's own parsers), their `/proc/PID/cgroup`, and
//! the units that own them, whose status and journal the capture then adds.

use std::fs;
use std::path::Path;
use std::time::Instant;

use crate::context::{CommandRecord, CommandStatus};
use crate::ingest::{self, Anchors};
use crate::source::{Source, SourceMap};

/// The bundle member that holds every GPU process's cgroup.
pub const CGROUP_FILE: &str = "proc-cgroup.txt";

/// PIDs holding GPU memory, sorted, from captured nvidia-smi outputs.
pub fn gpu_pids(outputs: &[(&str, &[u8])]) -> Vec<u32> {
    let mut sources = SourceMap::new();
    for (name, bytes) in outputs {
        sources.add(Source::new(*name, bytes));
    }
    let ingested = ingest::ingest(&sources, &Anchors::new(std::iter::empty::<&str>()));
    let mut pids: Vec<u32> = ingested.facts.gpu_processes.iter().map(|p| p.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Reads `PROC/PID/cgroup` and appends it to `out` under the prompt a
/// person's paste would carry (`$ cat /proc/PID/cgroup`), so the analysis
/// knows whose file it is.
pub fn read_cgroup(proc_root: &Path, pid: u32, out: &mut Vec<u8>) -> CommandRecord {
    let started = Instant::now();
    let path = proc_root.join(pid.to_string()).join("cgroup");
    let command = format!("cat /proc/{pid}/cgroup");
    let result = fs::read(&path);
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match result {
        Ok(bytes) => {
            out.extend_from_slice(format!("$ {command}\n").as_bytes());
            out.extend_from_slice(&bytes);
            if !bytes.ends_with(b"\n") {
                out.push(b'\n');
            }
            CommandRecord {
                file: Some(CGROUP_FILE.to_owned()),
                command,
                status: CommandStatus::Ok,
                exit_code: None,
                duration_ms,
                bytes: bytes.len() as u64,
                detail: None,
                truncated: false,
            }
        }
        Err(e) => CommandRecord {
            file: None,
            command,
            status: CommandStatus::Error,
            exit_code: None,
            duration_ms,
            bytes: 0,
            // The process may have exited since nvidia-smi listed it.
            detail: Some(format!("{}: {e}", path.display())),
            truncated: false,
        },
    }
}

/// The systemd unit a cgroup file names: the unified (`0::`) line, else v1's
/// `name=systemd` line; a `.service` directly below slices. `None` for a
/// login session, a container, the root (a private cgroup namespace), and a
/// user's own unit (below `user@UID.service`), which may carry a system
/// unit's name (`systemd-run --user --unit=ssh.service`).
pub fn unit_of_cgroup(text: &str) -> Option<String> {
    let path = |prefix: &str| {
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .filter_map(|(_, rest)| rest.split_once(':'))
            .find(|(controllers, _)| *controllers == prefix)
            .map(|(_, path)| path.to_owned())
    };
    let path = path("").or_else(|| path("name=systemd"))?;
    let unit = path
        .split('/')
        .filter(|c| !c.is_empty())
        .find(|c| !c.ends_with(".slice"))?;
    (unit.ends_with(".service")
        && !unit.starts_with("user@")
        && !unit.starts_with("docker-")
        && !unit.starts_with("cri-"))
    .then(|| unit.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_come_from_system_services_only() {
        let cases = [
            (
                "0::/system.slice/ddtree-qwen.service\n",
                Some("ddtree-qwen.service"),
            ),
            (
                "0::/system.slice/sglang.service/payload\n",
                Some("sglang.service"),
            ),
            (
                "12:memory:/system.slice/x.service\n1:name=systemd:/system.slice/vllm.service\n",
                Some("vllm.service"),
            ),
            ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
            ("0::/system.slice/docker-0123abcd.scope\n", None),
            // A user's own unit named like a system one (probe D13).
            (
                "0::/user.slice/user-1000.slice/user@1000.service/app.slice/ssh.service\n",
                None,
            ),
            ("0::/\n", None),
        ];
        for (text, unit) in cases {
            assert_eq!(unit_of_cgroup(text).as_deref(), unit, "{text}");
        }
    }

    #[test]
    fn gpu_pids_are_read_with_the_analysers_parsers() {
        let csv = b"gpu_uuid, pid, process_name, used_gpu_memory [MiB]\nGPU-5a5b4eef-ee9c-40f5-977e-2242f48837be, 20629, /opt/ddtree/venv/bin/python3, 55286 MiB\nGPU-5a5b4eef-ee9c-40f5-977e-2242f48837be, 311, python, 10 MiB\n";
        assert_eq!(gpu_pids(&[("apps.csv", csv)]), [311, 20629]);
    }
}
