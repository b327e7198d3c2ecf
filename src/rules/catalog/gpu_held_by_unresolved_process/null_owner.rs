//! gpustat's `(null)` owner: a GPU with memory in use and no process
//! gpustat could resolve for it. The finding of `gpu-held-by-unresolved-process`
//! for that evidence; advice only, there is no PID to act on.

use crate::correlate::Incident;
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};
use crate::source::Span;

use super::META;

/// gpustat's process column when it found no process for the memory in use.
pub(super) const NO_PROCESS: &str = "| (null)";
/// The share of the card in use that counts beside a failure (a table
/// alone asks for a quarter: `gpu-memory-unaccounted`).
const MIN_SHARE: f64 = 0.05;

/// One GPU with memory in use and no process listed for it.
struct Held {
    index: Option<u32>,
    used: u64,
    total: u64,
    span: Span,
    /// The figures as the line prints them.
    mark: String,
}

fn big(used: u64, total: u64) -> bool {
    crate::rules::support::holds_working_set(used, total, MIN_SHARE)
}

/// gpustat lines whose process column reads `(null)`.
fn gpustat_nulls(incident: &Incident) -> Vec<Held> {
    let lines: Vec<_> = incident
        .facts
        .messages
        .iter()
        .filter(|m| m.text.trim_end().ends_with(NO_PROCESS))
        .collect();
    incident
        .facts
        .gpus
        .iter()
        .filter_map(|g| {
            let span = g.span?;
            lines.iter().find(|m| m.span == span)?;
            let (used, total) = (g.memory_used_mib?, g.memory_total_mib?);
            big(used, total).then(|| Held {
                index: g.index,
                used,
                total,
                span,
                mark: format!("{used} / {total} MB"),
            })
        })
        .collect()
}

/// The finding for every GPU gpustat shows with memory in use and `(null)`
/// for its processes.
pub(super) fn finding(incident: &Incident) -> Option<Finding> {
    // A model server's own log in the inputs may be the invisible user
    // of the memory (a server in a container): not a foreign holder.
    if !incident.facts.server_events.is_empty() {
        return None;
    }
    let held = gpustat_nulls(incident);
    if held.is_empty() {
        return None;
    }
    let mut f = Finding::new(META.id, META.category, META.severity);
    let mut parts = Vec::new();
    for h in &held {
        let gpu = h
            .index
            .map(|i| format!("GPU {i}"))
            .unwrap_or_else(|| "a GPU".to_owned());
        if let Some(i) = h.index {
            f.entities.gpus.insert(i);
        }
        f.evidence_marked(
            h.span,
            format!(
                "{gpu}: {} of {} MiB in use, and no process listed for it",
                h.used, h.total
            ),
            h.mark.clone(),
        );
        parts.push(format!("{gpu} ({} of {} MiB)", h.used, h.total));
    }
    f.condition("memory in use with no process listed", true);
    f.condition("no model server's log in the inputs could own it", true);
    let parts = parts.join(", ");
    f.title = format!("GPU memory held by a process this shell cannot see: {parts}");
    f.headline = format!(
        "{parts}: memory in use with no process listed. The holder runs outside this shell's view (another container or PID namespace, or the host seen from a container), so it cannot be ended from here."
    );
    f.chain
        .push("the memory is not free for new jobs on that GPU".to_owned());
    f.chain.push(
        "a process in another container or PID namespace holds it (or one still being torn down)"
            .to_owned(),
    );
    f.explanation = "gpustat names the processes NVML reports for each GPU; `(null)` means it could resolve none of them although the memory is in use: the PIDs belong to another PID namespace (the driver reports host PIDs). Advice only: there is no PID here to act on.".to_owned();
    f.actions.push(Action::advice(
        "on the host, list the processes that hold the GPU and whose they are",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
            "ask the owner or the node's admin to stop that process, or use another GPU; from inside a container it cannot be signalled",
            None,
        ));
    f.confidence = confidence(&f, 0.5, 0.65);
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// VisEdit issue 5, verbatim.
    const NULL_OWNER: &str =
        "[6] NVIDIA A100 80GB PCIe | 52'C, 100 % | 10151 / 81920 MB | (null)\n";

    #[test]
    fn memory_with_no_process_is_held_by_someone_unseen() {
        let f = findings_of(super::super::META.id, NULL_OWNER);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.gpus.contains(&6));
        assert!(f[0].headline.contains("10151"), "{}", f[0].headline);
        assert!(
            f[0].actions
                .iter()
                .all(|a| matches!(a.kind, crate::rules::ActionKind::Advice { .. }))
        );
    }

    /// The same line from another node of that grammar: an idle GPU
    /// (a few MiB, no process) is not held, and a listed process is not
    /// `(null)`.
    #[test]
    fn an_idle_gpu_or_a_listed_process_is_no_finding() {
        let idle = "[6] NVIDIA A100 80GB PCIe | 52'C,   0 % |     4 / 81920 MB | (null)\n";
        assert!(findings_of(super::super::META.id, idle).is_empty());
        let listed =
            "[6] NVIDIA A100 80GB PCIe | 52'C, 100 % | 10151 / 81920 MB | python/12345(10140M)\n";
        assert!(findings_of(super::super::META.id, listed).is_empty());
    }

    /// microsoft/pai issue 2001, verbatim to the process block's header (the
    /// stored copy ends there): a GPU with 11637 MiB in use, seen from
    /// inside a job's container.
    const PAI_2001: &str = "root@xxx:~# nvidia-smi
Mon Jan 14 07:10:25 2019       
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 384.111                Driver Version: 384.111                   |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce GTX TIT...  Off  | 00000000:83:00.0 Off |                  N/A |
| 22%   59C    P2    74W / 250W |  11637MiB / 12207MiB |     14%      Default |
+-------------------------------+----------------------+----------------------+
                                                                               
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
";

    /// nvidia-smi's view of the same situation is not read by this rule: a
    /// process block cut before its rows says nothing about processes.
    #[test]
    fn a_cut_nvidia_smi_process_block_is_no_finding() {
        assert!(findings_of(super::super::META.id, PAI_2001).is_empty());
    }

    /// A second GPU line of the same grammar (the figures varied) is named
    /// the same way, each GPU with its own figures.
    #[test]
    fn every_gpu_with_unseen_memory_is_named() {
        let two = format!(
            "{NULL_OWNER}[7] NVIDIA A100 80GB PCIe | 40'C,  35 % | 30720 / 81920 MB | (null)\n"
        );
        let f = findings_of(super::super::META.id, &two);
        assert_eq!(f.len(), 1);
        assert!(f[0].entities.gpus.contains(&7), "{:?}", f[0].entities.gpus);
    }
}
