//! `xid-nvlink`: NVLink errors (Xid 74, and 144–150 on Hopper and later);
//! multi-GPU collectives over the link fail, and the driver removes the GPU
//! work of the processes using it (Xid 45 `caused by previous Xid N`). A failed peer GPU makes its neighbours log 74 too, so the
//! peers' Xids at the same time decide which GPU is at fault.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{KernelEvent, Xid};
use crate::rules::support::{add_owner_units, confidence, kernel_time, seconds_between};
use crate::rules::xid::{self, same_bus};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: XidNvlink = XidNvlink;

pub struct XidNvlink;

/// Faults of a GPU as a whole, which its NVLink neighbours see as link errors.
const PEER_FAULTS: [u32; 9] = [48, 62, 64, 79, 95, 109, 119, 120, 154];

/// How close in time a peer's fault must be to explain the link errors.
const PEER_WINDOW_SECS: i64 = 60;

/// `145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (…)`.
static NONFATAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\S+ Nonfatal\b").expect("regex"));

static LINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[Ll]ink (?P<link>-?[0-9]+)\b").expect("regex"));

static META: RuleMeta = RuleMeta {
    id: "xid-nvlink",
    category: Category::XidOther,
    severity: Severity::Critical,
    summary: "NVLink errors (Xid 74, 144-150): collectives between the GPUs fail",
    anchors: &[],
    doc: r#"
## What it means
`NVRM: Xid (PCI:…): 74, pid=…, name=…, NVLink: fatal error detected on
link 6(0x10000, …)`: an NVLink connection of the GPU, to another GPU or an
NVSwitch, failed. Collectives over it (tensor-parallel all-reduce) fail or
hang: NCCL errors and watchdog timeouts follow on every rank. The link
stays down until the GPU is reset.

Hopper and later GPUs report NVLink errors of each NVLink unit under
their own codes, with `Fatal` or `Nonfatal`:

| Xid | Unit | Example |
|---|---|---|
| 144 | SAW | `Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 …)` |
| 145 | RLW | `Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 …)` |
| 146 | TLW | |
| 147 | TREX | |
| 148 | NVLPW | |
| 149 | NETIR | `Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 …)` |
| 150 | MSE | |

Xid 137 (NVLINK_PRIV_ERR, `RLW_RXPIPE interrupt hit on link 11 on GPU0:
PRIV Error`) is a fault the remote MMU reported for an access over NVLink;
NVIDIA's catalog says it is usually an application's illegal peer access.
Alone it stays a note; beside the NVLink unit errors above it is read as
the same links failing, and it is not a non-fatal error.

When a link fails, the driver tears down the channels of the processes
using the GPU and logs Xid 45 for each, naming the cause (r570+):
`Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused
by previous Xid 149`. Those processes are victims of the link error, not
its cause; an Xid 45 after an NVLink Xid on the same GPU is read the same
way. When only the Xid 45s are in the inputs, the finding rests on the
driver's word and asks for the kernel log before them.

## Why it happens
A fault on the link (cable, connector, NVSwitch), or the far end: a peer
GPU that failed (Xid 79, 48/95, 119) makes its neighbours log Xid 74. When
a peer had such an Xid at the same time, the peer is the cause.

## How to confirm
`nvidia-smi nvlink -s` (link state) and `nvidia-smi nvlink -e` (error
counters) per GPU; the kernel log for other Xids in the same minute; on
NVSwitch systems the Fabric Manager's log.

## How to fix
If a peer failed, follow that peer's recovery. Otherwise drain the GPUs,
reset them (on NVSwitch systems all GPUs of the baseboard are reset
together) or reboot; if the errors persist after a reset, open a hardware
case.

## Safety
Advice only: a GPU reset ends every process on the GPUs.
"#,
};

impl Rule for XidNvlink {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let mut links: Vec<(&KernelEvent, &Xid)> = incident
            .xids()
            .filter(|(_, x)| xid::is_nvlink(x.code))
            .collect();
        // An NVLink privilege error (Xid 137) beside NVLink unit errors is
        // the same links failing: a remote access refused over them.
        if !links.is_empty() {
            links.extend(incident.xids().filter(|(_, x)| x.code == NVLINK_PRIV));
            links.sort_by_key(|(e, _)| e.span);
        }
        // The processes whose GPU work the driver removed because of the
        // link errors (Xid 45): victims, not causes.
        let victims = victims(incident, &links);
        let Some(&(first, _)) = links.first() else {
            if !victims.is_empty() {
                out.push(declared_only(incident, &victims));
            }
            return;
        };
        let codes = codes_of(links.iter().map(|(_, x)| x.code));
        let code_list = xid_list(&codes);
        let buses = xid::buses(incident, &NVLINK_CODES);
        let gpus: Vec<_> = buses
            .iter()
            .map(|b| xid::gpu_at(incident, b.as_deref()))
            .collect();
        // A peer's own fault at about the same time.
        let peer = peer_fault(incident, &buses, first);
        // Hopper's NVLink units say whether the error was fatal; links that
        // only reported non-fatal errors, with no process harmed, are noted.
        let nonfatal = links
            .iter()
            .all(|(_, x)| x.code != 74 && NONFATAL.is_match(&x.message));
        let severity = if nonfatal && victims.is_empty() && peer.is_none() {
            Severity::Info
        } else if peer.is_some() {
            Severity::Warning
        } else {
            META.severity
        };
        let mut f = Finding::new(META.id, META.category, severity);
        f.occurrences = links.len() as u32;
        f.entities.xid.extend(codes.iter().copied());
        let names = cite_links(&mut f, incident, &gpus, &buses);
        let peer_label = peer.map(|(e, x)| cite_peer(&mut f, incident, e, x));
        cite_victims(&mut f, incident, &victims);
        add_owner_units(&mut f, incident);
        f.condition(format!("the kernel logged {code_list}"), true);
        f.condition(
            "no peer GPU failed at the same time (the link itself is at fault)",
            peer.is_none(),
        );
        f.condition(
            "the GPUs are identified by their index",
            gpus.iter().all(|g| g.index.is_some()),
        );
        let list = names.join(", ");
        if severity == Severity::Info {
            note_nonfatal(&mut f, &list, &code_list);
            f.confidence = confidence(&f, 0.7, 0.95);
            out.push(f);
            return;
        }
        f.title = match &peer_label {
            Some((g, what)) => {
                format!("NVLink errors on {list} ({code_list}), following {what} on {g}")
            }
            None => format!("NVLink errors on {list} ({code_list})"),
        };
        f.headline = match &peer_label {
            Some((g, what)) => format!(
                "NVLink errors on {list} ({code_list}) follow {what} on {g}: the failed peer, not the links, is the likely cause."
            ),
            None => format!(
                "NVLink failed on {list} ({code_list}): collectives between the GPUs fail until they are reset."
            ),
        };
        f.chain
            .extend(chain(&victims, &list, &code_list, peer_label.as_ref()));
        f.explanation = format!(
            "Xid 74 takes a link down until the GPU is reset (catalog action: {}). A peer GPU failing makes its NVLink neighbours log 74 as well, so the other GPUs' Xids at the same time decide where the fault is.",
            xid::info(74).map_or("", |i| i.bucket)
        );
        f.actions.extend(actions(peer_label.is_some()));
        f.confidence = confidence(&f, 0.7, 0.95);
        out.push(f);
    }
}

/// A whole-GPU fault of a GPU other than those at `buses` (an Xid 154 only
/// when it asks for something) within [`PEER_WINDOW_SECS`] of the `first`
/// link error, or at any time when either has no time.
fn peer_fault<'a>(
    incident: &'a Incident,
    buses: &[Option<String>],
    first: &KernelEvent,
) -> Option<(&'a KernelEvent, &'a Xid)> {
    let first_time = kernel_time(incident, first);
    incident.xids().find(|(e, x)| {
        PEER_FAULTS.contains(&x.code)
            && (x.code != 154 || x.recovery_action.as_deref().is_some_and(|a| a != "None"))
            && !buses
                .iter()
                .any(|b| same_bus(b.as_deref(), x.bus_id.as_deref()))
            && match (first_time, kernel_time(incident, e)) {
                (Some(a), Some(b)) => seconds_between(a, b).abs() <= PEER_WINDOW_SECS,
                _ => true,
            }
    })
}

/// Names each GPU with NVLink errors in the finding (by index, else by bus
/// id), cites each of its failed links once per code with the PID the line
/// names, and what nvidia-smi shows of its health; returns the GPUs' short
/// names.
fn cite_links(
    f: &mut Finding,
    incident: &Incident,
    gpus: &[xid::GpuAt<'_>],
    buses: &[Option<String>],
) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (gpu, bus) in gpus.iter().zip(buses) {
        if let Some(i) = gpu.index {
            f.entities.gpus.insert(i);
        } else if let Some(b) = bus.as_deref().and_then(xid::kernel_bus) {
            f.entities.gpu_bus_ids.insert(b);
        }
        names.push(gpu.short());
        let on: Vec<_> = xid::on_bus(incident, bus.as_deref(), &NVLINK_CODES).collect();
        let mut seen: Vec<String> = Vec::new();
        for (e, x) in on {
            let link = LINK
                .captures(&x.message)
                .map(|c| c["link"].to_owned())
                .unwrap_or_else(|| "?".to_owned());
            let key = format!("{}/{link}", x.code);
            if seen.contains(&key) {
                continue;
            }
            f.evidence(
                e.span,
                format!("Xid {} on {}: NVLink {link} failed", x.code, gpu.short()),
            );
            seen.push(key);
            if let Some(pid) = x.pid {
                f.entities.pids.insert(pid);
            }
        }
        let healths = gpu.health(incident);
        xid::cite_health(f, &healths, &gpu.short());
    }
    names
}

/// Cites the peer GPU's own fault `x` (line `e`) and adds its GPU and
/// process: the finding is about it too; returns the peer's short name and
/// the fault's description.
fn cite_peer(f: &mut Finding, incident: &Incident, e: &KernelEvent, x: &Xid) -> (String, String) {
    let g = xid::gpu_at(incident, x.bus_id.as_deref());
    // The peer's GPU and process: the finding is about it too.
    if let Some(i) = g.index {
        f.entities.gpus.insert(i);
    }
    if let Some(pid) = x.pid {
        f.entities.pids.insert(pid);
    }
    f.evidence(
        e.span,
        format!(
            "at the same time {} had {}: a failed peer makes its neighbours log Xid 74",
            g.short(),
            xid::describe(x.code)
        ),
    );
    (g.short(), xid::describe(x.code))
}

/// Words the finding as a note of non-fatal errors only on the GPUs `list`
/// (codes `code_list`): the links corrected them; watch the counters.
fn note_nonfatal(f: &mut Finding, list: &str, code_list: &str) {
    f.title = format!("non-fatal NVLink errors on {list} ({code_list})");
    f.headline = format!(
        "{list} reported non-fatal NVLink errors ({code_list}); no process was harmed. Watch the error counters: errors that grow or turn fatal need a reset or a hardware case."
    );
    f.chain
        .push(format!("non-fatal NVLink errors on {list} ({code_list})"));
    f.explanation = "Hopper and later GPUs mark each NVLink error Fatal or Nonfatal; a non-fatal one was corrected by the link.".to_owned();
    f.actions.push(Action::advice(
        "watch the link error counters of each GPU",
        Some("nvidia-smi nvlink -e"),
    ));
}

/// The causal chain, symptom first: the failed collectives, the `victims`'
/// removed work, the failed links of the GPUs `list`, and the peer's fault
/// (`peer`: its short name and fault) when one came first.
fn chain(
    victims: &[Victim<'_>],
    list: &str,
    code_list: &str,
    peer: Option<&(String, String)>,
) -> Vec<String> {
    let mut chain = vec!["multi-GPU collectives (all-reduce) fail or time out".to_owned()];
    if !victims.is_empty() {
        chain.push(format!(
            "the driver removed the GPU work of {} (Xid 45): victims of the link errors",
            victim_names(victims)
        ));
    }
    chain.push(format!("NVLink failed on {list} ({code_list})"));
    if let Some((g, what)) = peer {
        chain.push(format!("{g} failed first ({what})"));
    }
    chain
}

/// What to do: look at the links, then follow the peer's recovery first
/// (`peer_failed`), or drain and reset the GPUs and open a hardware case if
/// the errors return.
fn actions(peer_failed: bool) -> Vec<Action> {
    let mut actions = vec![Action::advice(
        "look at the link state and error counters of each GPU",
        Some("nvidia-smi nvlink -s; nvidia-smi nvlink -e"),
    )];
    if peer_failed {
        actions.push(Action::advice(
            "follow the recovery of the peer GPU's fault first; check the links again after it",
            None,
        ));
    } else {
        actions.push(Action::advice(
            "drain the GPUs, stop their workloads, then reset them (on NVSwitch systems the whole baseboard) or reboot",
            Some("nvidia-smi -r"),
        ));
        actions.push(Action::advice(
            "if Xid 74 returns after the reset, open a hardware case for the GPU, its NVLink connectors or the NVSwitch",
            None,
        ));
    }
    actions
}

/// Every NVLink Xid code.
const NVLINK_CODES: [u32; 9] = [74, 137, 144, 145, 146, 147, 148, 149, 150];

/// Xid 137, NVLINK_PRIV_ERR: a fault the remote MMU reported for an access
/// over NVLink (NVIDIA's Xid catalog: "typically application-level bugs,
/// but can also be driver bugs or hardware bugs"). Alone it is the catalog
/// row's (IGNORE); beside NVLink unit errors it is read with them.
const NVLINK_PRIV: u32 = 137;

/// An Xid 45 the link errors explain, with the NVLink Xid it follows.
struct Victim<'a> {
    event: &'a KernelEvent,
    xid: &'a Xid,
    cause: u32,
    /// The driver said so (`caused by previous Xid 149`), rather than an
    /// NVLink Xid seen earlier on the same GPU.
    declared: bool,
}

/// Xid 45s that say `caused by previous Xid N` with N an NVLink Xid, or
/// that follow an NVLink Xid on the same GPU.
fn victims<'a>(incident: &'a Incident, links: &[(&'a KernelEvent, &'a Xid)]) -> Vec<Victim<'a>> {
    incident
        .xids()
        .filter(|(_, x)| x.code == 45)
        .filter_map(|(e, x)| {
            if let Some(code) = xid::declared_cause(x).filter(|c| xid::is_nvlink(*c)) {
                return Some(Victim {
                    event: e,
                    xid: x,
                    cause: code,
                    declared: true,
                });
            }
            links
                .iter()
                .find(|(l, y)| {
                    l.span < e.span && same_bus(y.bus_id.as_deref(), x.bus_id.as_deref())
                })
                .map(|(_, y)| Victim {
                    event: e,
                    xid: x,
                    cause: y.code,
                    declared: false,
                })
        })
        .collect()
}

/// Codes in order of first appearance, without repeats.
fn codes_of(codes: impl Iterator<Item = u32>) -> Vec<u32> {
    let mut out = Vec::new();
    for c in codes {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// `Xid 149, Xid 145`.
fn xid_list(codes: &[u32]) -> String {
    codes
        .iter()
        .map(|c| format!("Xid {c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `python3 (PID 1818990, 1818992)`.
fn victim_names(victims: &[Victim<'_>]) -> String {
    let mut pids: Vec<u32> = victims.iter().filter_map(|v| v.xid.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    let mut names: Vec<&str> = victims
        .iter()
        .filter_map(|v| v.xid.name.as_deref())
        .collect();
    names.sort_unstable();
    names.dedup();
    let who = if names.is_empty() {
        "processes".to_owned()
    } else {
        names.join(", ")
    };
    if pids.is_empty() {
        who
    } else {
        format!(
            "{who} (PID {})",
            pids.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Each victim's line, its PID and its GPU.
fn cite_victims(f: &mut Finding, incident: &Incident, victims: &[Victim<'_>]) {
    f.entities.xid.extend(victims.iter().map(|_| 45));
    for v in victims {
        let gpu = xid::gpu_at(incident, v.xid.bus_id.as_deref());
        if let Some(i) = gpu.index {
            f.entities.gpus.insert(i);
        } else if let Some(b) = v.xid.bus_id.as_deref().and_then(xid::kernel_bus) {
            f.entities.gpu_bus_ids.insert(b);
        }
        if let Some(pid) = v.xid.pid {
            f.entities.pids.insert(pid);
        }
        let how = if v.declared {
            "as the driver says"
        } else {
            "which came first on this GPU"
        };
        f.evidence_once(
            v.event.span,
            format!(
                "Xid 45 on {}: the driver removed the GPU work of {}, caused by {} ({how}): the process is a victim",
                gpu.short(),
                xid::owner_of(v.xid),
                xid::describe(v.cause)
            ),
        );
    }
}

/// The NVLink Xids themselves are not in the inputs, only the Xid 45s that
/// name them: the finding rests on the driver's word and says what is missing.
fn declared_only(incident: &Incident, victims: &[Victim<'_>]) -> Finding {
    let codes = codes_of(victims.iter().map(|v| v.cause));
    let code_list = xid_list(&codes);
    let meanings = codes
        .iter()
        .map(|c| xid::describe(*c))
        .collect::<Vec<_>>()
        .join(", ");
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.occurrences = victims.len() as u32;
    f.entities.xid.extend(codes.iter().copied());
    cite_victims(&mut f, incident, victims);
    let mut gpus: Vec<String> = Vec::new();
    for v in victims {
        let g = xid::gpu_at(incident, v.xid.bus_id.as_deref()).short();
        if !gpus.contains(&g) {
            gpus.push(g);
        }
    }
    add_owner_units(&mut f, incident);
    let list = gpus.join(", ");
    let who = victim_names(victims);
    f.condition(
        "the driver names NVLink Xids as the cause of the Xid 45s",
        true,
    );
    f.condition("the NVLink Xid lines themselves are in the inputs", false);
    f.condition(
        "the GPUs are identified by their index",
        victims.iter().all(|v| {
            xid::gpu_at(incident, v.xid.bus_id.as_deref())
                .index
                .is_some()
        }),
    );
    f.title = format!("NVLink errors ({code_list}) on {list} ended the GPU work of {who}");
    f.headline = format!(
        "NVLink errors ({meanings}) on {list} made the driver remove the GPU work of {who} (Xid 45): the NVLink fabric is at fault, the processes are victims."
    );
    f.chain
        .push(format!("the driver removed the GPU work of {who} (Xid 45)"));
    f.chain
        .push(format!("NVLink failed on {list} ({code_list})"));
    f.explanation = format!(
        "Xid 45 alone is the driver's cleanup after a process ended; here every one says `caused by previous Xid N`, and {code_list} are NVLink errors ({}). The NVLink Xid lines themselves are not in the inputs: the kernel log from before the first Xid 45 shows which link failed and whether it was fatal.",
        codes
            .iter()
            .filter_map(|c| xid::info(*c).map(|i| format!("Xid {c}: {}", i.bucket)))
            .collect::<Vec<_>>()
            .join("; ")
    );
    f.actions.push(Action::advice(
        "read the NVLink Xid lines the Xid 45s name (which link, fatal or not)",
        Some("journalctl -k -b --no-pager | grep -E 'NVRM: Xid'"),
    ));
    f.actions.push(Action::advice(
        "look at the link state and error counters of each GPU",
        Some("nvidia-smi nvlink -s; nvidia-smi nvlink -e"),
    ));
    f.actions.push(Action::advice(
        "drain the GPUs, reset them (on NVSwitch systems the whole baseboard, and check the Fabric Manager's log) or reboot; if the NVLink errors return, open a hardware case",
        None,
    ));
    f.confidence = confidence(&f, 0.6, 0.9);
    f
}
