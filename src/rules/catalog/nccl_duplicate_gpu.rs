//! `nccl-duplicate-gpu`: NCCL refused to build a communicator because two
//! ranks on one host use the same GPU; the ranks are not pinned to their own
//! devices.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::{Message, ServerEventKind};
use crate::rules::support::server::events_at;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: NcclDuplicateGpu = NcclDuplicateGpu;

pub struct NcclDuplicateGpu;

/// `Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000`
/// (NCCL 2.5.6 – 2.29, init.cc: `%x`, later `%lx` of the bus id): the NCCL
/// catalog's row, with the ranks and the bus id captured.
const DUPLICATE: &str = "nccl.duplicate-gpu";
/// The same failure as the result code says it (ncclInvalidUsage), in any
/// wrapper: `NCCL error in: …, invalid usage …`, `ncclInvalidUsage: …`.
const INVALID_USAGE: &str = "nccl.invalid-usage";
/// NCCL's trace of a failed call back up the stack, `NCCL INFO
/// init.cc:916 -> 5` (5 = ncclInvalidUsage).
static INVALID_RETURN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"NCCL INFO \S+:[0-9]+ -> 5\s*$").expect("return regex"));
/// NCCL's own prefix, `host:pid:tid [cudaDev]`, when the line parser did not
/// read it (a launcher's tag in front).
static NCCL_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[\s:>])[A-Za-z0-9][0-9A-Za-z_.-]*:(?P<pid>[0-9]+):[0-9]+ \[(?P<dev>[0-9]+)\]")
        .expect("prefix")
});

static META: RuleMeta = RuleMeta {
    id: "nccl-duplicate-gpu",
    category: Category::NcclInitFailure,
    severity: Severity::Critical,
    summary: "NCCL found two ranks on the same GPU: the ranks are not pinned to their own devices",
    // The catalog rows' anchors come by themselves; NCCL's INFO trace of
    // the failed call is this rule's own.
    anchors: &[" -> 5"],
    doc: r#"
## What it means
While building a communicator, NCCL compares the GPUs of the ranks on each
host and stops with `ncclInvalidUsage` when two share one: `NCCL WARN
Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000` (with
`NCCL_DEBUG=WARN`), or PyTorch's `NCCL error in: …, invalid usage …` with
`Last error: Duplicate GPU detected : rank 0 and rank 1 both on CUDA device
2000`. The "CUDA device" is NCCL's bus id in hex, the PCI address without
its `:` and `.` (`1000` = `0000:01:00.0`), not a device index.

## Why it happens
Every rank selected the same device: a hard-coded `cuda:0` or default device
in the script, `torch.cuda.set_device` (or Horovod's
`hvd.local_rank()` pinning) missing, `CUDA_VISIBLE_DEVICES` set to one GPU
for all ranks, or a container that exposes fewer GPUs than the ranks started
on the host. Not a network or timeout problem.

## How to confirm
The `[N]` after NCCL's `host:pid:tid` prefix is the CUDA device each rank
uses: the same number in every rank. `nvidia-smi -L` and
`CUDA_VISIBLE_DEVICES` inside the job show how many GPUs a rank can see.

## How to fix
Select each rank's GPU from its local rank before any CUDA call:
`torch.cuda.set_device(local_rank)` (torchrun sets `LOCAL_RANK`), Horovod
`torch.cuda.set_device(hvd.local_rank())`; remove hard-coded devices; give
the container all the GPUs (`--gpus all`) or start no more ranks per host
than it has GPUs.

## Safety
Advice only: the ranks are the job itself, never another process to stop.
"#,
};

/// `0000:01:00` from NCCL's `%lx` bus id: the PCI address with `:` and `.`
/// dropped, read as hex (NCCL's busIdToInt64).
fn bus_id(hex: &str) -> Option<String> {
    Some(crate::model::BusId::from_nccl_hex(hex)?.kernel())
}

impl Rule for NcclDuplicateGpu {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = incident.known(DUPLICATE).collect();
        if hits.is_empty() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = hits.len() as u32;
        let mut ranks: BTreeSet<u32> = BTreeSet::new();
        let mut buses: BTreeSet<String> = BTreeSet::new();
        let mut raw: BTreeSet<String> = BTreeSet::new();
        let mut devs: BTreeSet<u32> = BTreeSet::new();
        let mut pids: BTreeSet<u32> = BTreeSet::new();
        for (m, c) in &hits {
            for k in ["a", "b"] {
                if let Some(r) = c.get(k).and_then(|v| v.parse().ok()) {
                    ranks.insert(r);
                }
            }
            let bus = c.get("bus").unwrap_or_default();
            raw.insert(bus.to_ascii_lowercase());
            if let Some(b) = bus_id(bus) {
                buses.insert(b);
            }
            let (pid, dev) = writer(incident, m);
            pids.extend(pid);
            devs.extend(dev);
        }
        // The ranks that only traced the failure back (`init.cc:916 -> 5`,
        // 5 = ncclInvalidUsage) failed the same way.
        for (m, _) in matches(incident, &INVALID_RETURN) {
            if !hits.iter().any(|(h, _)| h.span.source == m.span.source) {
                continue;
            }
            let (pid, dev) = writer(incident, m);
            pids.extend(pid);
            devs.extend(dev);
        }
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(3) {
            f.evidence(m.span, format!("NCCL found two ranks on one GPU ({n}x)"));
        }
        let usage: Vec<_> = incident.known(INVALID_USAGE).map(|(m, _)| m).collect();
        for (m, n) in distinct(usage.iter().copied()).into_iter().take(3) {
            f.evidence(
                m.span,
                format!("the communicator failed with invalid usage ({n}x)"),
            );
        }
        f.entities.pids.extend(pids.iter().copied());
        f.entities.gpus.extend(devs.iter().copied());
        f.entities.gpu_bus_ids.extend(buses.iter().cloned());
        let rank_list = ranks
            .iter()
            .map(|r| format!("rank {r}"))
            .collect::<Vec<_>>()
            .join(", ");
        let gpu = shared_gpu(&buses, &raw);
        f.chain.push(format!(
            "NCCL refused to build its communicator (`Duplicate GPU detected`, ncclInvalidUsage): {rank_list} run on {gpu}"
        ));
        if devs.len() == 1 && pids.len() > 1 {
            let dev = devs.iter().next().copied().unwrap_or_default();
            f.chain.push(format!(
                "every process ({}) uses CUDA device {dev}: the ranks were never pinned to their own GPUs",
                pids.iter()
                    .map(|p| format!("PID {p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        } else {
            f.chain
                .push("the ranks were not pinned to distinct GPUs".to_owned());
        }
        f.condition("NCCL reported `Duplicate GPU detected`", true);
        f.condition(
            "the failure surfaced as NCCL's invalid usage",
            !usage.is_empty(),
        );
        f.title = format!("Duplicate GPU: {rank_list} on one GPU");
        f.headline = format!(
            "NCCL stopped with `Duplicate GPU detected`: {rank_list} use one GPU ({}); each rank must select its own device.",
            buses
                .iter()
                .next()
                .map_or("the same bus id".to_owned(), |b| format!("PCI {b}"))
        );
        f.explanation = "NCCL needs one GPU per rank on a host. The ranks all selected the same device: a hard-coded device, no per-rank set_device, CUDA_VISIBLE_DEVICES naming one GPU for every rank, or a container that sees fewer GPUs than the ranks started. Not a network problem.".to_owned();
        f.actions.push(Action::advice(
            "select each rank's GPU from its local rank before any CUDA call: torch.cuda.set_device(local_rank) (torchrun's LOCAL_RANK; Horovod: torch.cuda.set_device(hvd.local_rank())), and remove any hard-coded device",
            None,
        ));
        f.actions.push(Action::advice(
            "check that each rank sees enough GPUs: CUDA_VISIBLE_DEVICES must not name one GPU for all ranks, and a container needs as many GPUs as the ranks started on the host (docker --gpus all)",
            Some("nvidia-smi -L; echo \"$CUDA_VISIBLE_DEVICES\""),
        ));
        f.confidence = confidence(&f, 0.8, 0.95);
        out.push(f);
    }
}

/// The GPU the ranks share, for the chain: `the GPU at PCI …` when the
/// normalized bus ids name one, else `shared GPUs (NCCL's bus ids …)` with
/// NCCL's `raw` bus ids.
fn shared_gpu(buses: &BTreeSet<String>, raw: &BTreeSet<String>) -> String {
    match (buses.len(), buses.iter().next()) {
        (1, Some(b)) => format!(
            "the GPU at PCI {b} (NCCL's `CUDA device {}` is this bus id, not an index)",
            raw.iter().next().map_or("", String::as_str)
        ),
        _ => format!(
            "shared GPUs (NCCL's bus ids {})",
            raw.iter().cloned().collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The PID and CUDA device of the rank that printed `m`: from its parsed
/// NCCL event, else from the `host:pid:tid [dev]` prefix of the line.
fn writer(incident: &Incident, m: &Message) -> (Option<u32>, Option<u32>) {
    events_at(incident, m.span)
        .find_map(|e| match &e.kind {
            ServerEventKind::Nccl(n) => Some((Some(n.pid), n.cuda_dev)),
            _ => None,
        })
        .unwrap_or_else(|| match NCCL_PREFIX.captures(&m.text) {
            Some(p) => (p["pid"].parse().ok(), p["dev"].parse().ok()),
            None => (None, None),
        })
}

#[cfg(test)]
mod tests {
    use super::bus_id;

    #[test]
    fn nccls_hex_bus_id_is_a_pci_address() {
        // busIdToInt64 drops ':' and '.': 0000:01:00.0 -> 0x1000.
        assert_eq!(bus_id("1000").as_deref(), Some("0000:01:00"));
        assert_eq!(bus_id("3b000").as_deref(), Some("0000:3b:00"));
        assert_eq!(bus_id("e2000").as_deref(), Some("0000:e2:00"));
        assert_eq!(bus_id("10").as_deref(), Some("0000:00:01"));
        assert_eq!(bus_id("zz"), None);
    }
}
