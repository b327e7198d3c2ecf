//! `gsp-heartbeat-timeout`: the GPU System Processor stopped answering the
//! driver (heartbeat timed out, RPC timeout banner, PMU halted) and no Xid
//! 119/120 in the inputs reports it.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{KernelEventKind, Message};
use crate::rules::support::{confidence, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: GspHeartbeatTimeout = GspHeartbeatTimeout;

pub struct GspHeartbeatTimeout;

/// `NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs
/// … diff 6070 timeout 5200`, and the RPC poll's `NVRM: _kgspRpcRecvPoll:
/// GSP RM heartbeat timed out` / `LibOS heartbeat timed out` (R570+).
static HEARTBEAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:GPU(?P<gpu>[0-9]+) .*?)?(?P<who>GSP RM |LibOS )?[Hh]eartbeat timed out(?:.*\bdiff (?P<diff>[0-9]+) timeout (?P<timeout>[0-9]+))?")
        .expect("regex")
});

/// The other lines of the same failure: the `GSP Timeout` banner, an RPC
/// that never got its answer, the PMU halting, a memory subsystem error.
static SYMPTOM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:GPU(?P<gpu>[0-9]+) .*?)?(?P<what>\*+ GSP Timeout \*+|Timeout after [0-9]+s of waiting for RPC response from GPU[0-9]+ GSP|PMU has halted|Memory Subsystem Error detected)",
    )
    .expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "gsp-heartbeat-timeout",
    category: Category::XidOther,
    severity: Severity::Critical,
    summary: "the GPU's GSP firmware stopped answering the driver (heartbeat or RPC timeout, PMU halted) without an Xid 119/120 in the inputs",
    anchors: &[
        "Heartbeat timed out",
        "heartbeat timed out",
        "GSP Timeout",
        "of waiting for RPC response from GPU",
        "PMU has halted",
        "Memory Subsystem Error detected",
    ],
    doc: r#"
## What it means
`NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs …
diff 6070 timeout 5200` (or `NVRM: _kgspRpcRecvPoll: GSP RM heartbeat
timed out`), the banner `NVRM: GPU6 _kgspLogRpcTimeout: ****
GSP Timeout ****`, `Timeout after 6s of waiting for RPC response from GPU6
GSP!` or `Received signal from GSP that PMU has halted`: the firmware on
the GPU's System Processor (GSP), which runs most of the driver on Turing
and later GPUs with the GSP driver, stopped answering. At driver load the
GPU never comes up; at run time calls into it hang or fail until the GPU
is reset.

`GPU6` is the driver's own instance number. It is nvidia-smi's index only
when both count the GPUs in PCI order (the default); the bus id in
`nvidia-smi -q` or the `NVRM: GPU at PCI:` lines settle it.

When an Xid 119 or 120 line is present, `xid-gsp-timeout` reports the
failure instead; this rule covers captures with only the driver's own
messages.

## Why it happens
A GPU that is hanging or failing (a memory subsystem error right before
the timeout points at the board), a firmware or driver bug of some
branches, or a board left in a bad state by an earlier fault.

## How to confirm
`dmesg -T | grep -E 'GSP|Heartbeat|Xid'`; `nvidia-smi -q -d
RECOVERY_ACTION` (newer drivers) for what the driver asks.

## How to fix
Drain the GPU, reset it (`nvidia-smi -r -i N`) or reboot the node; if it
recurs on the same board, run the GPU diagnostics (`dcgmi diag -r 3`),
update the driver to a release that fixes GSP timeouts for this GPU and
report it with `nvidia-bug-report.sh`.

## Safety
Advice only: a reset or reboot stops everything on the GPU.
"#,
};

/// Lines about one driver GPU instance (`GPU6`), or about none.
struct Instance<'a> {
    gpu: Option<u32>,
    heartbeats: Vec<(&'a Message, Option<(u64, u64)>)>,
    symptoms: Vec<(&'a Message, String)>,
}

impl Rule for GspHeartbeatTimeout {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // With the Xid, the Xid rules tell it (and cite these lines).
        if incident
            .xids()
            .any(|(_, x)| matches!(x.code, 62 | 119 | 120 | 154))
        {
            return;
        }
        let instances = instances(incident);
        let version = incident
            .facts
            .kernel_events
            .iter()
            .find_map(|e| match &e.kind {
                KernelEventKind::DriverLoaded { version, .. } => Some((e.span, version.clone())),
                _ => None,
            });
        for x in &instances {
            let name = x
                .gpu
                .map(|g| format!("GPU{g}"))
                .unwrap_or_else(|| "a GPU".to_owned());
            let mut f = Finding::new(META.id, META.category, META.severity);
            // The driver's instance number is nvidia-smi's index when no
            // capture contradicts it (default PCI order); say so.
            let listed = x.gpu.filter(|g| {
                incident.gpus.is_empty() || incident.gpus.iter().any(|l| l.index == *g)
            });
            if let Some(g) = listed {
                f.entities.gpus.insert(g);
            }
            let figures = x.heartbeats.iter().find_map(|(_, f)| *f);
            if let Some((m, _)) = x.heartbeats.first() {
                f.evidence(
                    m.span,
                    match figures {
                        Some((diff, timeout)) => format!(
                            "{name}'s GSP firmware missed its heartbeat: {diff} ms since the last one, the limit is {timeout} ms ({} line(s))",
                            x.heartbeats.len()
                        ),
                        None => format!("{name}'s GSP firmware missed its heartbeat"),
                    },
                );
            }
            let kinds = cite_symptoms(&mut f, x, &name);
            if let Some((span, v)) = &version {
                f.evidence(*span, format!("driver {v} (GSP firmware of that release)"));
            }
            if let Some(g) = x.gpu {
                let note = if listed.is_some() {
                    format!(
                        "{name} is the driver's instance number, taken as nvidia-smi's GPU {g} (the default PCI order); nvidia-smi -q's bus ids confirm it"
                    )
                } else {
                    format!(
                        "{name} is the driver's instance number, and no GPU {g} is in nvidia-smi's list: match them by bus id"
                    )
                };
                f.explanation = note;
            }
            f.condition("the driver logged the GSP timeout", true);
            f.condition("the GPU is named", x.gpu.is_some());
            f.condition(
                "more than one sign of the failure (timeout figures, RPC banner, PMU, memory error)",
                figures.is_some() && !x.symptoms.is_empty(),
            );
            f.title = match figures {
                Some((diff, timeout)) => format!(
                    "{name}'s GSP firmware stopped responding (heartbeat {diff} ms > {timeout} ms; no Xid in the inputs)"
                ),
                None => format!("{name}'s GSP firmware stopped responding (no Xid in the inputs)"),
            };
            f.headline = format!(
                "{name}'s GPU System Processor firmware stopped answering the driver: Heartbeat timed out{}. The GPU cannot be used until it is reset or the node rebooted; this is the GPU or its firmware, not a software or memory setting.",
                if kinds.iter().any(|k| k.starts_with("Memory Subsystem")) {
                    ", after a memory subsystem error"
                } else {
                    ""
                }
            );
            f.chain.push(format!(
                "work on {name} hangs or fails; the GPU does not come up"
            ));
            f.chain.push(format!(
                "{name}'s GSP firmware stopped answering the driver"
            ));
            if f.explanation.is_empty() {
                f.explanation = "The driver names no GPU: the bus ids of nvidia-smi -q and the NVRM lines around it say which".to_owned();
            }
            f.explanation.push_str(
                ". The Xid (119 or 120) the driver usually logs with it is not in the inputs.",
            );
            f.actions.extend(actions(&name));
            f.confidence = confidence(&f, 0.65, 0.9);
            out.push(f);
        }
    }
}

/// The driver's GSP failures, one instance per GPU it names: its heartbeat
/// lines (with their figures) and symptom lines, NVRM's own lines only; a
/// lone memory-subsystem line is left out.
fn instances(incident: &Incident) -> Vec<Instance<'_>> {
    let mut instances: Vec<Instance> = Vec::new();
    // Only the NVIDIA driver's lines: other software has heartbeats too.
    let nvrm = |m: &Message| ["NVRM", "kgsp", "kgmmu"].iter().any(|k| m.text.contains(k));
    for (m, c) in matches(incident, &HEARTBEAT).filter(|(m, _)| nvrm(m)) {
        let gpu = c.name("gpu").and_then(|g| g.as_str().parse().ok());
        let figures = c
            .name("diff")
            .zip(c.name("timeout"))
            .and_then(|(d, t)| Some((d.as_str().parse().ok()?, t.as_str().parse().ok()?)));
        let i = instance(&mut instances, gpu);
        instances[i].heartbeats.push((m, figures));
    }
    for (m, c) in matches(incident, &SYMPTOM).filter(|(m, _)| nvrm(m)) {
        let gpu = c.name("gpu").and_then(|g| g.as_str().parse().ok());
        let i = instance(&mut instances, gpu);
        instances[i]
            .symptoms
            .push((m, c["what"].trim_matches('*').trim().to_owned()));
    }
    // A lone memory-subsystem line is not a GSP failure.
    instances.retain(|x| {
        !x.heartbeats.is_empty()
            || x.symptoms
                .iter()
                .any(|(_, w)| !w.starts_with("Memory Subsystem"))
    });
    instances
}

/// Cites on `f` each kind of symptom of instance `x` once (memory subsystem
/// error, PMU halted, a GSP call timed out), naming the GPU `name`; returns
/// the kinds, in order.
fn cite_symptoms<'a>(f: &mut Finding, x: &'a Instance, name: &str) -> Vec<&'a str> {
    let mut kinds: Vec<&str> = Vec::new();
    for (m, what) in &x.symptoms {
        if kinds.contains(&what.as_str()) {
            continue;
        }
        kinds.push(what);
        let note = if what.starts_with("Memory Subsystem") {
            format!(
                "{name}: the driver found a memory subsystem error (the board itself is suspect)"
            )
        } else if what.contains("PMU") {
            format!("{name}: the GSP reports its power management unit (PMU) halted")
        } else {
            format!("{name}: a call into the GSP firmware timed out")
        };
        f.evidence(m.span, note);
    }
    kinds
}

/// What to do for `name`: see the driver's recovery action and the kernel's
/// account, drain and reset it, and the diagnostics if it recurs.
fn actions(name: &str) -> Vec<Action> {
    vec![
        Action::advice(
            "see what the driver asks for this GPU and the kernel's account of it",
            Some("nvidia-smi -q -d RECOVERY_ACTION; dmesg -T | grep -E 'GSP|Heartbeat|Xid'"),
        ),
        Action::advice(
            format!(
                "drain {name}, stop its workloads and reset it (nvidia-smi -r -i N, N its nvidia-smi index) or reboot the node"
            ),
            None,
        ),
        Action::advice(
            "if it recurs on the same board: run the GPU diagnostics, update the driver, and report it to NVIDIA with nvidia-bug-report.sh",
            Some("dcgmi diag -r 3"),
        ),
    ]
}

fn instance<'a>(instances: &mut Vec<Instance<'a>>, gpu: Option<u32>) -> usize {
    instances
        .iter()
        .position(|x| x.gpu == gpu)
        .unwrap_or_else(|| {
            instances.push(Instance {
                gpu,
                heartbeats: Vec::new(),
                symptoms: Vec::new(),
            });
            instances.len() - 1
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_wordings_with_and_without_a_gpu_number() {
        let c = HEARTBEAT
            .captures("NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200")
            .expect("R595 wording");
        assert_eq!(
            (&c["gpu"], &c["diff"], &c["timeout"]),
            ("6", "6070", "5200")
        );
        let c = HEARTBEAT
            .captures("NVRM: _kgspRpcRecvPoll: GSP RM heartbeat timed out")
            .expect("RPC poll wording");
        assert!(c.name("gpu").is_none() && c.name("diff").is_none());
        let c = SYMPTOM
            .captures("NVRM: GPU6 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************")
            .expect("banner");
        assert_eq!(&c["gpu"], "6");
    }
}
