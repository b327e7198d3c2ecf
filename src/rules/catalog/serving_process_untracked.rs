//! `serving-process-untracked`: a model server that a process listing
//! shows serving on a port which no instance of its control plane's
//! instance table has: an instance the control plane lost track of, still
//! running with its GPU (fixtures/real/504: GPUStack's table and `ps -eo
//! …,lstart,etimes` of two `vllm serve` started weeks before).

use std::collections::BTreeSet;

use crate::correlate::{Incident, is_serving};
use crate::model::PsRecord;
use crate::rules::support::{COMPUTE_APPS, confidence};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: ServingProcessUntracked = ServingProcessUntracked;

pub struct ServingProcessUntracked;

static META: RuleMeta = RuleMeta {
    id: "serving-process-untracked",
    category: Category::StaleServingInstance,
    severity: Severity::Error,
    summary: "a model server serves on a port that no instance of its control plane's instance table has: an instance it lost track of, still holding its GPU",
    anchors: &[],
    doc: r#"
## What it means
The inputs hold a control plane's instance table (GPUStack's model
instances: name, worker, port, state) and a process listing with the
serving processes' command lines (`ps -eo pid,ppid,lstart,etimes,args`). A
server (`vllm serve … --port 40047`) serves on a port that none of the
listed instances has: the control plane does not know it runs. It keeps its
GPU memory while the control plane schedules new instances on GPUs it
counts free.

The finding gives the process's start time as `ps` printed it. It
compares it with the incident only when the inputs have times of their
own (a log's lines): a server started before the first of them is older
than the incident. A table cut short, or one of another worker, would
also miss the port: the finding is an error at a confidence below a PPID 1
orphan's, and names the commands that settle it.

## Why it happens
The worker lost its connection to the server (network throttling) and the
server rescheduled the instance elsewhere or deleted it without the
worker stopping the old process (gpustack/gpustack#2595); a server
started by hand next to the control plane's.

## How to confirm
The control plane's full list of instances for this worker (its UI or
API), against `ps -eo pid,ppid,lstart,etimes,args` and `nvidia-smi
--query-compute-apps=pid,process_name,used_memory --format=csv` on the
worker: a serving process with no instance is the leftover.

## How to fix
Stop the leftover server (its launcher too, when the control plane's
worker no longer tracks it) and check its GPU memory is freed; restart the
control plane's worker so that it re-syncs.

## Safety
Advice only: the table may be cut, and the process's identity is not
re-checked here.
"#,
};

/// The port a serving command line names (`--port 40047`, `--port=40047`).
fn port_flag(cmd: &str) -> Option<u16> {
    let mut words = cmd.split_whitespace();
    while let Some(w) = words.next() {
        if w == "--port" {
            return words.next()?.parse().ok();
        }
        if let Some(v) = w.strip_prefix("--port=") {
            return v.parse().ok();
        }
    }
    None
}

/// `lstart` as printed (`Sat Jun  7 14:06:35 2025`) as `2025-06-07
/// 14:06:35`, which sorts with a timestamp's own text.
fn lstart_iso(started: &str) -> Option<String> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let w: Vec<&str> = started.split_whitespace().collect();
    let [_, month, day, time, year] = w[..] else {
        return None;
    };
    let month = MONTHS.iter().position(|m| *m == month)? + 1;
    let day: u32 = day.parse().ok()?;
    let year: u32 = year.parse().ok()?;
    (time.len() == 8 && time.as_bytes()[2] == b':' && time.as_bytes()[5] == b':')
        .then(|| format!("{year:04}-{month:02}-{day:02} {time}"))
}

impl Rule for ServingProcessUntracked {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let instances = &incident.facts.instances;
        let ports: BTreeSet<u16> = instances.iter().filter_map(|i| i.port).collect();
        if ports.is_empty() {
            return;
        }
        let mut untracked: Vec<(&PsRecord, u16)> = Vec::new();
        for p in &incident.facts.ps {
            let Some(port) = port_flag(&p.cmd) else {
                continue;
            };
            if is_serving(&p.cmd, p.ppid)
                && !ports.contains(&port)
                && !untracked.iter().any(|(u, _)| u.pid == p.pid)
            {
                untracked.push((p, port));
            }
        }
        if untracked.is_empty() {
            return;
        }
        // Servers of the same listing whose rows show no port (cut, or
        // the default): not proven untracked, named to be checked alike.
        let unported: Vec<&PsRecord> = incident
            .facts
            .ps
            .iter()
            .filter(|p| {
                port_flag(&p.cmd).is_none()
                    && p.span.source == untracked[0].0.span.source
                    && is_serving(&p.cmd, p.ppid)
                    && untracked
                        .iter()
                        .any(|(u, _)| first_word(&u.cmd) == first_word(&p.cmd))
            })
            .collect();
        out.push(finding(incident, &ports, &untracked, &unported));
    }
}

/// A command line's program, to tell one serving command from another.
fn first_word(cmd: &str) -> &str {
    cmd.split_whitespace().next().unwrap_or(cmd)
}

/// Cites the instances the table lists, the untracked servers and their
/// look-alikes with no port; returns how many servers started before the
/// inputs' first time.
fn cite(
    f: &mut Finding,
    incident: &Incident,
    untracked: &[(&PsRecord, u16)],
    unported: &[&PsRecord],
    first_time: Option<&str>,
) -> usize {
    let instances = &incident.facts.instances;
    let mut older = 0;
    for i in instances.iter().filter(|i| i.port.is_some()) {
        f.evidence_once(
            i.span,
            format!(
                "the control plane lists instance {} on port {}{}",
                i.name,
                i.port.map_or(String::new(), |p| p.to_string()),
                i.state
                    .as_deref()
                    .map_or(String::new(), |s| format!(" ({s})"))
            ),
        );
    }
    for (p, port) in untracked {
        f.entities.pids.insert(p.pid);
        let since = p.started.as_deref().map_or(String::new(), |s| {
            format!(
                ", started {}",
                s.split_whitespace().collect::<Vec<_>>().join(" ")
            )
        });
        let before = match (p.started.as_deref().and_then(lstart_iso), &first_time) {
            (Some(start), Some(first)) if start.as_str() < *first => {
                older += 1;
                format!(", before the inputs' first timed line ({first})")
            }
            _ => String::new(),
        };
        f.evidence_marked(
            p.span,
            format!(
                "PID {} serves on port {port}, which no listed instance has{since}{before}",
                p.pid
            ),
            port.to_string(),
        );
    }
    for p in unported {
        f.entities.pids.insert(p.pid);
        f.evidence(
            p.span,
            format!(
                "PID {} runs the same program, but its row shows no port (cut, or the default): check it alike",
                p.pid
            ),
        );
    }
    older
}

fn finding(
    incident: &Incident,
    ports: &BTreeSet<u16>,
    untracked: &[(&PsRecord, u16)],
    unported: &[&PsRecord],
) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let instances = &incident.facts.instances;
    // The inputs' own first time: the incident's, when a log has times.
    let first_time = incident.times.values().min().map(|t| t.local.to_string());
    let listed: Vec<String> = ports.iter().map(u16::to_string).collect();
    let older = cite(&mut f, incident, untracked, unported, first_time.as_deref());
    let pids: Vec<String> = untracked.iter().map(|(p, _)| p.pid.to_string()).collect();
    let checked: Vec<String> = f.entities.pids.iter().map(u32::to_string).collect();
    let their_ports: Vec<String> = untracked.iter().map(|(_, port)| port.to_string()).collect();
    conditions(&mut f, &listed, first_time.as_deref(), older);
    let one = untracked.len() == 1;
    f.title = format!(
        "PID{} {} serve{} on port{} {} that the control plane does not list",
        if one { "" } else { "s" },
        pids.join(", "),
        if one { "s" } else { "" },
        if one { "" } else { "s" },
        their_ports.join(", ")
    );
    let starts = untracked
        .iter()
        .filter_map(|(p, _)| p.started.as_deref())
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>();
    let age = match (starts.is_empty(), &first_time) {
        (true, _) => String::new(),
        (false, Some(_)) if older > 0 => {
            format!(
                " {} started {}, before the incident's first logged line.",
                if one { "It" } else { "They" },
                starts.join(", ")
            )
        }
        (false, _) => format!(
            " {} started {} (`ps` lstart; the inputs have no time of the incident to compare it with).",
            if one { "It" } else { "They" },
            starts.join(", ")
        ),
    };
    f.headline = format!(
        "The process listing shows model server PID{} {} serving on port{} {}, which none of the {} instance{} the control plane's table lists has ({}): {} the control plane lost track of, still holding {} GPU memory (inferred: the table may be cut or another worker's).{age}",
        if one { "" } else { "s" },
        pids.join(", "),
        if one { "" } else { "s" },
        their_ports.join(", "),
        instances.len(),
        if instances.len() == 1 { "" } else { "s" },
        listed.join(", "),
        if one { "an instance" } else { "instances" },
        if one { "its" } else { "their" },
    );
    if !unported.is_empty() {
        let others: Vec<String> = unported.iter().map(|p| p.pid.to_string()).collect();
        f.headline.push_str(&format!(
            " PID{} {} run{} the same program, with no port in {} row: check {} alike.",
            if others.len() == 1 { "" } else { "s" },
            others.join(", "),
            if others.len() == 1 { "s" } else { "" },
            if others.len() == 1 { "its" } else { "their" },
            if others.len() == 1 { "it" } else { "them" },
        ));
    }
    f.chain
        .push("the GPUs the control plane counts free are in use".to_owned());
    f.chain.push(format!(
        "server PID{} {} run{} outside the control plane's instances",
        if one { "" } else { "s" },
        pids.join(", "),
        if one { "s" } else { "" }
    ));
    f.explanation = "A control plane starts one server per instance, on the instance's port. A server on a port that no instance has is one the control plane no longer tracks: its worker lost the server's connection and the instance was deleted or moved without the old process being stopped. It keeps its GPU memory.".to_owned();
    advise(&mut f, &checked);
    f.confidence = confidence(&f, 0.3, 0.85);
    f
}

/// What was checked, and what only the control plane's full list or a
/// log with times would settle.
fn conditions(f: &mut Finding, listed: &[String], first_time: Option<&str>, older: usize) {
    f.condition(
        format!(
            "the control plane's instance table lists its instances' ports ({})",
            listed.join(", ")
        ),
        true,
    );
    f.condition(
        "a serving process serves on a port no listed instance has",
        true,
    );
    f.condition(
        "the table is the control plane's whole list for this host (missing: the list of the process's worker)",
        false,
    );
    match first_time {
        Some(first) => {
            f.condition(
                format!("the server started before the inputs' first timed line ({first})"),
                older > 0,
            );
        }
        None => {
            f.condition(
                "the inputs have a time of the incident to compare the start with (missing: a log with times)",
                false,
            );
        }
    }
}

/// The steps: check each server, see what it holds, stop the leftover.
fn advise(f: &mut Finding, checked: &[String]) {
    f.actions.push(Action::advice(
        "check each server against the control plane's full list of instances for this worker, with its parent and start time",
        Some(&format!(
            "ps -o pid,ppid,lstart,etimes,args -p {}",
            checked.join(",")
        )),
    ));
    f.actions.push(Action::advice(
        "see what each holds on the GPUs",
        Some(COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "stop the untracked server (SIGTERM, then SIGKILL) and check its memory is freed; restart the control plane's worker so that it re-syncs",
        None,
    ));
}

#[cfg(test)]
mod tests {
    use super::{META, lstart_iso, port_flag};
    use crate::testing::findings_of;

    /// fixtures/real/504 (gpustack/gpustack#2595): the instance table and
    /// the `ps` rows, as pasted (the second row cut by the excerpt).
    const REAL: &str = "  | source     | name                                   | worker_name | worker_ip   | port  | state   | state_message                        | model_name                       | id   | created_at          | updated_at          | gpu_indexes              |
  | ---------- | -------------------------------------- | ----------- | ----------- | ----- | ------- | ------------------------------------ | -------------------------------- | ---- | ------------------- | ------------------- | ------------------------ |
  | LOCAL_PATH | Qwen/Qwen3-32B-20VvO                   | worker1     | 172.18.19.1 | 40058 | RUNNING |                                      | Qwen/Qwen3-32B                   | 192  | 2025-06-07 07:29:34 | 2025-06-07 07:32:28 | [0, 1, 2, 3, 4, 5, 6, 7] |
  | LOCAL_PATH | iic/CosyVoice-300M-SFT-gjDxO           | worker1     | 172.18.19.1 | 40006 | RUNNING |                                      | iic/CosyVoice-300M-SFT           | 193  | 2025-06-13 08:58:42 | 2025-06-13 09:00:01 | []                       |

  $ ps -eo pid,ppid,user,stat,lstart,etimes,pcpu,pmem,nlwp,args | grep '[v]llm' 
  824867  824670 root     Sl   Sat Jun  7 14:06:35 2025 4074589  0.0  0.1   71 /usr/bin/python3 /root/.local/share/pipx/venvs/gpustack/bin/vllm serve /data/models/modelscope/Qwen/Qwen3-Embedding-8B --max-model-len 8192 --task=embed --enforce-eager --host 0.0.0.0 --port 40047 --served-model-name Qwen3-Embedding-8B
";

    #[test]
    fn a_server_on_a_port_no_instance_has_is_untracked() {
        let f = findings_of(META.id, REAL);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.pids.contains(&824867));
        assert!(f[0].headline.contains("40047"), "{}", f[0].headline);
        assert!(
            f[0].headline.contains("Sat Jun 7 14:06:35 2025"),
            "{}",
            f[0].headline
        );
        assert!(f[0].confidence < 0.7, "{}", f[0].confidence);
        // The same server on a port the table lists: tracked.
        let tracked = REAL.replace("--port 40047", "--port 40006");
        assert!(findings_of(META.id, &tracked).is_empty());
    }

    /// The next such paste: a box table (`+---+` borders, title-case
    /// titles) of another control plane's instances, a `python -m
    /// sglang.launch_server --port=30001` in `ps -ef`, and a worker log
    /// with times after the server's start (assembled, not copied).
    #[test]
    fn a_box_table_and_a_log_with_times() {
        let paste = "\
+----------------+--------+-------+---------+
| Name           | Node   | Port  | Status  |
+----------------+--------+-------+---------+
| llama-3-8b-a1  | gpu-01 | 30000 | running |
+----------------+--------+-------+---------+
    PID    PPID STARTED                  CMD
  41234       1 Mon Mar  3 09:12:44 2025 python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B --port=30001
2025-03-10 12:00:01,114 - worker - ERROR - instance llama-3-8b-a1 failed to start
";
        let f = findings_of(META.id, paste);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.pids.contains(&41234));
        assert!(
            f[0].headline.contains("before the incident"),
            "{}",
            f[0].headline
        );
        // No table: nothing to compare with.
        let no_table: String = paste.lines().skip(5).map(|l| format!("{l}\n")).collect();
        assert!(findings_of(META.id, &no_table).is_empty());
    }

    #[test]
    fn reads_the_port_and_the_start() {
        assert_eq!(port_flag("vllm serve m --port 8000 --host 0"), Some(8000));
        assert_eq!(
            port_flag("python -m sglang.launch_server --port=30001"),
            Some(30001)
        );
        assert_eq!(port_flag("vllm serve m"), None);
        assert_eq!(
            lstart_iso("Sat Jun  7 14:06:35 2025").as_deref(),
            Some("2025-06-07 14:06:35")
        );
        assert_eq!(lstart_iso("14:06"), None);
    }
}
