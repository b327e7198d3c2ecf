//! `nccl-error`: an NCCL call failed; the warning NCCL printed with it says
//! why (a small `/dev/shm`, an unreachable peer, InfiniBand, topology).

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{Message, NcclLevel, ServerEvent, ServerEventKind, TorchDistKind};
use crate::rules::support::server::target;
use crate::rules::support::{confidence, distinct};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: NcclError = NcclError;

pub struct NcclError;

/// The NCCL catalog's result codes that are failures, read in every
/// wrapper it knows (`NCCL error in: …, unhandled system error`, `NCCL
/// error: …`, nccl-tests' `NCCL failure …`, PyTorch's `ncclSystemError: …`).
const RESULTS: &[&str] = &[
    "nccl.unhandled-cuda-error",
    "nccl.system-error",
    "nccl.internal-error",
    "nccl.invalid-argument",
    "nccl.invalid-usage",
    "nccl.remote-error",
];

struct Cause {
    /// The NCCL catalog's WARN rows that name this cause, wherever they
    /// are printed (a WARN line, PyTorch's `Last error:`).
    rows: &'static [&'static str],
    /// What the rows do not cover: other programs' words in a warning or a
    /// `Last error:` text.
    re: Regex,
    what: &'static str,
    fix: &'static str,
    command: Option<&'static str>,
}

/// By the NCCL warning that accompanies the error, most specific first. A
/// `Cuda failure` is left to the CUDA rules.
static CAUSES: LazyLock<Vec<Cause>> = LazyLock::new(|| {
    [
        (
            &["nccl.shm-extend-failed", "nccl.shm-segment-failed"][..],
            r"unable to allocate shared memory|/dev/shm/nccl-\S+ .*(?:No space left|Bus error)",
            "the container's /dev/shm is too small for NCCL's shared-memory transport (Docker's default is 64 MB)",
            "give the container a larger /dev/shm: docker run --shm-size=16g or --ipc=host (Kubernetes: an emptyDir with medium: Memory mounted at /dev/shm)",
            Some("df -h /dev/shm"),
        ),
        (
            &[
                "nccl.socket-connect-failed",
                "nccl.socket-creation-failed",
                "nccl.bootstrap-no-interface",
                "nccl.no-listening-interface",
                "nccl.socket-bad-family",
            ][..],
            r"ncclOsSocketPollConnect|Connection refused|No route to host|Software caused connection abort|Connection timed out|remote process exited",
            "a peer could not be reached over the network: wrong interface, a firewall, or the peer died",
            "pin NCCL to the right interface (NCCL_SOCKET_IFNAME), open the ports between the nodes, and check that the peer is up",
            Some("ip -br addr; ss -tnp | grep -i nccl"),
        ),
        (
            &[
                "nccl.ib-completion-error",
                "nccl.ib-open-device-failed",
                "nccl.ibv-call-failed",
            ][..],
            r"NET/IB|ibv_|IBV_|unable to allocate requests|mlx5",
            "InfiniBand/RDMA setup: GPUDirect, the memlock limit, or the HCA",
            "load nvidia-peermem, raise the memlock limit (LimitMEMLOCK=infinity in the unit), check the HCA (ibstat); NCCL_IB_DISABLE=1 confirms it",
            Some("ibstat; ulimit -l; lsmod | grep peermem"),
        ),
        (
            &[][..],
            r"does not loop back|[Tt]opology|peer access is not supported|P2P|NVLS|nvlink",
            "GPU topology or peer-to-peer access (NVLink, the Fabric Manager, PCIe ACS in a VM)",
            "check the topology (nvidia-smi topo -m) and the Fabric Manager; NCCL_P2P_DISABLE=1 as a diagnostic",
            Some("nvidia-smi topo -m"),
        ),
    ]
    .into_iter()
    .map(|(rows, p, what, fix, command)| Cause {
        rows,
        re: Regex::new(p).expect("cause regex"),
        what,
        fix,
        command,
    })
    .collect()
});

static META: RuleMeta = RuleMeta {
    id: "nccl-error",
    category: Category::NcclInitFailure,
    severity: Severity::Critical,
    summary: "an NCCL call failed; the accompanying NCCL warning says why",
    // The NCCL catalog's rows come by themselves; the warnings and
    // PyTorch's `Last error:` are read whatever they say.
    anchors: &["NCCL WARN", "Last error"],
    doc: r#"
## What it means
An NCCL call (communicator set-up or a collective) returned an error:
`torch.distributed.DistBackendError: NCCL error in:
…/ProcessGroupNCCL.cpp:1970, unhandled system error (run with
NCCL_DEBUG=INFO for details), NCCL version 2.21.5`, then
`ncclSystemError: …` and often `Last error:` with NCCL's own warning; vLLM
and SGLang's own NCCL wrappers raise `RuntimeError: NCCL error: unhandled
system error`.

## Why it happens
By the `NCCL WARN` line (with `NCCL_DEBUG=WARN`) or the `Last error:` text:
`failed to extend /dev/shm/…` (a container's small /dev/shm),
`socketStartConnect: Connect to … failed : Connection refused` (interface,
firewall or a dead peer), `NET/IB : …` / `ibv_reg_mr` (RDMA set-up),
`does not loop back` / P2P errors (topology). `Cuda failure '…'` is a CUDA
error inside NCCL: the CUDA rules report it.

## How to confirm
Rerun with `NCCL_DEBUG=INFO` (or `WARN`) to get the warning when it is
missing.

## How to fix
As the cause says: `--shm-size`/`--ipc=host`; `NCCL_SOCKET_IFNAME` and open
ports; `nvidia-peermem` and `LimitMEMLOCK=infinity`; the topology and Fabric
Manager.

## Safety
Advice only.
"#,
};

impl Rule for NcclError {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let events = &incident.facts.server_events;
        let errors = nccl_errors(incident);
        // Each failed call's line and the result's short string; a wrapper
        // of the NCCL catalog whose string no row knows says it itself.
        let results = results(incident);
        let error_lines: Vec<_> = results.iter().map(|(m, _)| *m).collect();
        if errors.is_empty() && error_lines.is_empty() {
            return;
        }
        // Two ranks on one GPU: `nccl-duplicate-gpu` reports it.
        if incident.known("nccl.duplicate-gpu").next().is_some() {
            return;
        }
        // What NCCL warned, and the `Last error:` text of the exceptions.
        let warns = warns(events);
        // A CUDA error inside NCCL is the CUDA rules' to report.
        // Each cause's lines: its catalog rows' first, then its own words
        // in a warning.
        let cause_lines = |c: &Cause| cause_lines(incident, &warns, c);
        if warns.iter().any(|(_, w)| w.contains("Cuda failure"))
            && !CAUSES.iter().any(|c| !cause_lines(c).is_empty())
        {
            return;
        }
        let cause = CAUSES.iter().find_map(|c| {
            let lines = cause_lines(c);
            (!lines.is_empty()).then_some((c, lines))
        });
        // The first line that names the result by its string, else by name.
        let reason = reason(&results, &errors);
        let mut f = Finding::new(META.id, META.category, META.severity);
        let lines = error_lines.iter().copied().chain(
            errors
                .iter()
                .filter_map(|e| incident.facts.messages.iter().find(|m| m.span == e.span)),
        );
        let all: Vec<_> = distinct(lines);
        f.occurrences = all.iter().map(|(_, n)| *n as u32).sum::<u32>().max(1);
        for (m, n) in all.into_iter().take(3) {
            f.evidence(m.span, format!("an NCCL call failed ({n}x)"));
        }
        let first = errors.first().copied().or_else(|| {
            error_lines
                .first()
                .and_then(|m| events.iter().find(|e| e.span == m.span))
        });
        let tgt = target(
            incident,
            first,
            first.map_or(crate::model::Framework::Unknown, |e| e.framework),
        );
        if let Some((u, _, _)) = &tgt {
            f.entities.units.insert(u.clone());
        }
        if let Some(p) = first.and_then(|e| e.pid) {
            f.entities.pids.insert(p);
        }
        let who = tgt
            .as_ref()
            .map_or("the server", |t| t.0.as_str())
            .to_owned();
        f.chain
            .push(format!("{who} failed: NCCL reported `{reason}`"));
        f.condition("an NCCL call returned an error", true);
        f.condition("NCCL's warning names the cause", cause.is_some());
        match cause {
            Some((c, lines)) => {
                for (span, text) in lines.iter().take(3) {
                    f.evidence(*span, format!("NCCL's warning: {}", first_line(text)));
                }
                f.chain.push(c.what.to_owned());
                f.title = format!("NCCL failed: {}", c.what);
                f.headline = format!("{who} failed in NCCL (`{reason}`): {}.", c.what);
                f.explanation = "NCCL's error codes are generic; the warning it printed just before says which call failed and why.".to_owned();
                f.actions.push(Action::advice(c.fix, c.command));
            }
            None => {
                for (span, text) in warns.iter().take(2) {
                    f.evidence(*span, format!("NCCL's warning: {}", first_line(text)));
                }
                f.title = format!("NCCL failed: {reason}");
                f.headline = format!(
                    "{who} failed in NCCL (`{reason}`); the inputs lack the NCCL warning that says why."
                );
                f.explanation =
                    "Rerun with NCCL_DEBUG=WARN (or INFO) to see the failing call.".to_owned();
                f.actions.push(Action::advice(
                    "rerun with NCCL_DEBUG=WARN in the server's environment to see the failing call",
                    Some("systemctl edit UNIT   # [Service] Environment=NCCL_DEBUG=WARN"),
                ));
            }
        }
        f.confidence = confidence(&f, 0.7, 0.95);
        out.push(f);
    }
}

/// The PyTorch NCCL errors that are set-up failures (not `ncclTimeout`,
/// `ncclInProgress` or `ncclSuccess`, their catalog rows' to report).
fn nccl_errors(incident: &Incident) -> Vec<&ServerEvent> {
    incident
        .facts
        .server_events
        .iter()
        .filter(|e| {
            matches!(&e.kind, ServerEventKind::TorchDist(t) if matches!(t.kind, TorchDistKind::NcclError { .. }))
        })
        // A result that is no set-up failure (ncclTimeout, ncclInProgress)
        // is its catalog row's to report.
        .filter(|e| {
            !["nccl.timeout", "nccl.in-progress", "nccl.success"]
                .iter()
                .any(|id| incident.known(id).any(|(m, _)| m.span == e.span))
        })
        .collect()
}

/// Each failed NCCL call's line and the result's short string, in input
/// order (one per line, NCCL's WARN lines left out); a wrapper of the NCCL
/// catalog whose string no row knows says it itself.
fn results(incident: &Incident) -> Vec<(&Message, String)> {
    let mut results: Vec<(&Message, String)> = incident
        .known
        .iter()
        .filter(|k| k.hit.catalog.id == "nccl")
        .filter_map(|k| {
            let reason = match k.hit.row {
                Some(r) if RESULTS.contains(&r.id.as_str()) => r.strings.first()?.text.clone(),
                None => k.hit.get("msg")?.trim().to_owned(),
                Some(_) => return None,
            };
            Some((&incident.facts.messages[k.message], reason))
        })
        .filter(|(m, _)| !m.text.contains("NCCL WARN"))
        .collect();
    results.sort_by_key(|(m, _)| m.span);
    results.dedup_by_key(|(m, _)| m.span);
    results
}

/// What NCCL warned (WARN and above, not TRACE), and the `Last error:` text
/// of the exceptions, with their lines.
fn warns(events: &[ServerEvent]) -> Vec<(Span, &str)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            ServerEventKind::Nccl(n)
                if n.level >= NcclLevel::Warn && n.level != NcclLevel::Trace =>
            {
                Some((e.span, n.message.as_str()))
            }
            ServerEventKind::Exception(x) if x.message.contains("Last error:") => {
                Some((e.span, x.message.as_str()))
            }
            _ => None,
        })
        .collect()
}

/// The lines of cause `c`: its catalog rows' first (the warning without
/// NCCL's `host:pid:tid … WARN` header), else the first of `warns` in its
/// own words.
fn cause_lines<'a>(
    incident: &'a Incident,
    warns: &[(Span, &'a str)],
    c: &Cause,
) -> Vec<(Span, &'a str)> {
    let mut lines: Vec<(Span, &str)> = c
        .rows
        .iter()
        .flat_map(|id| incident.known(id))
        // The warning itself, without NCCL's `host:pid:tid … WARN` header.
        .map(|(m, _)| {
            let text = m.text.as_str();
            (m.span, text.split_once(" WARN ").map_or(text, |(_, w)| w))
        })
        .collect();
    lines.sort_by_key(|(s, _)| *s);
    lines.dedup_by_key(|(s, _)| *s);
    if lines.is_empty() {
        lines.extend(
            warns
                .iter()
                .filter(|(_, w)| c.re.is_match(w))
                .take(1)
                .copied(),
        );
    }
    lines
}

/// The failure's reason: the first result that names it by its string,
/// else by name, else the reason of PyTorch's NCCL error, else `NCCL error`.
fn reason(results: &[(&Message, String)], errors: &[&ServerEvent]) -> String {
    results
        .iter()
        .find(|(m, _)| !m.text.trim_start().starts_with("nccl"))
        .or(results.first())
        .map(|(_, r)| r.clone())
        .or_else(|| {
            errors.iter().find_map(|e| match &e.kind {
                ServerEventKind::TorchDist(t) => match &t.kind {
                    TorchDistKind::NcclError { reason, .. } => Some(reason.clone()),
                    _ => None,
                },
                _ => None,
            })
        })
        .unwrap_or_else(|| "NCCL error".to_owned())
}

fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(text);
    line.chars().take(200).collect()
}
