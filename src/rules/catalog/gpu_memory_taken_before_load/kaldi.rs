//! Kaldi's allocator's own account beside the device's: `Memory usage:
//! A/H bytes currently allocated/total-held; … device memory info: free:…M,
//! used:…M, total:…M` (cu-allocator.cc PrintMemoryUsage()). `H` is what the
//! program holds; `used` is every process's memory on the GPU (cuMemGetInfo).
//! The device's memory in use far above what the program holds and its CUDA
//! context is another process's (kaldi-asr/kaldi#3375: 0 bytes held, 16778M
//! used, where the GPU had 1050M used when Kaldi chose it). The GPU and the
//! figure at selection are in `The active GPU is [N]: … used:…M` before it.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Finding};

const USAGE: &str = "stacks-kaldi.memory-usage";
const ACTIVE: &str = "stacks-kaldi.active-gpu";

/// What a Kaldi program's CUDA context, cuBLAS and cuSPARSE may take
/// beside what its allocator holds, where the inputs do not show it (the
/// device's `used` at selection includes it and is used instead).
const CONTEXT_MIB: u64 = 1024;

/// Held by others below this (MiB) is a desktop's display and noise.
const MIN_OTHERS_MIB: u64 = 2048;

/// One allocator account with the device's figures.
struct Usage<'a> {
    msg: &'a Message,
    held_bytes: u64,
    used_mib: u64,
    total_mib: u64,
}

/// The GPU Kaldi chose and its memory in use just after its context.
struct Active<'a> {
    msg: &'a Message,
    gpu: u32,
    used_mib: u64,
}

fn usages(incident: &Incident) -> Vec<Usage<'_>> {
    incident
        .known(USAGE)
        .filter_map(|(msg, h)| {
            Some(Usage {
                msg,
                held_bytes: h.get("held")?.parse().ok()?,
                used_mib: h.get("used")?.parse().ok()?,
                total_mib: h.get("total")?.parse().ok()?,
            })
        })
        .collect()
}

fn actives(incident: &Incident) -> Vec<Active<'_>> {
    incident
        .known(ACTIVE)
        .filter_map(|(msg, h)| {
            Some(Active {
                msg,
                gpu: h.get("gpu")?.parse().ok()?,
                used_mib: h.get("used")?.parse().ok()?,
            })
        })
        .collect()
}

/// The finding for an account whose device figure is far above what the
/// program holds.
pub(super) fn held_beside_kaldi(incident: &Incident) -> Option<Finding> {
    let actives = actives(incident);
    let (usage, active, others) = usages(incident).into_iter().find_map(|u| {
        // The program's selection line before it, in the same input.
        let active = actives
            .iter()
            .filter(|a| a.msg.span.source == u.msg.span.source && a.msg.span.line < u.msg.span.line)
            .max_by_key(|a| a.msg.span.line);
        let own = u.held_bytes / (1024 * 1024) + active.map_or(CONTEXT_MIB, |a| a.used_mib);
        let others = u.used_mib.saturating_sub(own);
        (others >= MIN_OTHERS_MIB).then_some((u, active, others))
    })?;
    let held_mib = usage.held_bytes / (1024 * 1024);
    let device = active.map_or("the GPU".to_owned(), |a| format!("device {}", a.gpu));
    let mut f = super::finding();
    if let Some(a) = active {
        f.entities.gpus.insert(a.gpu);
        f.evidence_marked(
            a.msg.span,
            format!(
                "Kaldi chose {device} with {} MiB in use, its own CUDA context included",
                a.used_mib
            ),
            format!("used:{}M", a.used_mib),
        );
    }
    let used = format!("used:{}M", usage.used_mib);
    f.evidence_marked(
        usage.msg.span,
        format!(
            "Kaldi itself holds {} bytes ({held_mib} MiB) while {device} has {} MiB of {} MiB in use: about {others} MiB is another process's",
            usage.held_bytes, usage.used_mib, usage.total_mib
        ),
        used,
    );
    f.condition(
        "Kaldi's allocator names what the program holds beside the device's memory in use",
        true,
    );
    f.condition(
        "the device's memory at selection is read (what Kaldi's context took)",
        active.is_some(),
    );
    f.condition(
        "the holders are listed (missing: nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv)",
        false,
    );
    f.title = format!(
        "{device} had {} MiB in use while Kaldi held {held_mib} MiB of it",
        usage.used_mib
    );
    let since = active.map_or(String::new(), |a| {
        format!(" ({} MiB when Kaldi chose it)", a.used_mib)
    });
    f.headline = format!(
        "{device} had {} MiB in use{since} while Kaldi's allocator held {held_mib} MiB: about {others} MiB of it is another process's (another job on the same GPU, which its Default compute mode allows), so Kaldi gets only what is left.",
        usage.used_mib
    );
    f.chain.push(format!(
        "Kaldi's allocations get only what is left of {device}"
    ));
    f.chain.push(format!(
        "another process holds about {others} MiB of {device}"
    ));
    f.explanation = "Kaldi's allocator prints what the program itself holds (`total-held`) beside the device's memory in use by every process (`device memory info`, from cuMemGetInfo). A device figure far above what the program holds and its CUDA context is memory another process took: in the Default compute mode several jobs share one GPU, and a job that chose the GPU when it was free finds it taken when it allocates.".to_owned();
    f.actions.push(Action::advice(
        "list what holds the GPU's memory",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "give each job a GPU of its own: exclusive compute mode (`nvidia-smi -c 3`) with Kaldi's --use-gpu=wait, or fewer concurrent jobs than GPUs",
        None,
    ));
    f.confidence = crate::rules::support::confidence(&f, 0.5, 0.8);
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;
    use crate::testing::findings_of;

    const RULE: &str = "gpu-memory-taken-before-load";

    /// kaldi-asr/kaldi#3375 (batch O's 1015): chosen at 1050M used, then 0
    /// bytes held with 16778M used.
    const ISSUE_3375: &str = "\
LOG (nnet3-train[5.5.357~1435-80092]:FinalizeActiveGpu():cu-device.cc:284) The active GPU is [2]: Tesla V100-PCIE-32GB\tfree:31452M, used:1050M, total:32502M, free/total:0.967695 version 7.0
LOG (nnet3-train[5.5.357~1435-80092]:PrintMemoryUsage():cu-allocator.cc:368) Memory usage: 0/0 bytes currently allocated/total-held; 0/0 blocks currently allocated/free; largest free/allocated block sizes are 0/0; time taken total/cudaMalloc is 0/0.106236, synchronized the GPU 0 times out of 0 frees; device memory info: free:15724M, used:16778M, total:32502M, free/total:0.48379maximum allocated: 0current allocated: 0
";

    /// farisalasmary/kaldi-installation-guide's README (its Error #3):
    /// 610 MiB held, 11160M of 11175M used, no selection line.
    const GUIDE: &str = "\
LOG (nnet3-chain-train[5.5.313~1-203c]:PrintMemoryUsage():cu-allocator.cc:368) Memory usage: 591856896/639631360 bytes currently allocated/total-held; 587/7 blocks currently allocated/free; largest free/allocated block sizes are 83886080/17760256; time taken total/cudaMalloc is 0.00290585/0.00194597, synchronized the GPU 0 times out of 12 frees; device memory info: free:15M, used:11160M, total:11175M, free/total:0.00138696maximum allocated: 602227968current allocated: 591856896
";

    #[test]
    fn held_by_another_process_beside_kaldi() {
        let f = findings_of(RULE, ISSUE_3375);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
        assert!(f[0].entities.gpus.contains(&2));
        assert!(f[0].headline.contains("15728 MiB"), "{}", f[0].headline);
        let g = findings_of(RULE, GUIDE);
        assert_eq!(g.len(), 1, "{g:?}");
        assert!(g[0].headline.contains("9526 MiB"), "{}", g[0].headline);
    }

    /// Kaldi's own memory accounts for the device's: #3375's line with
    /// 16 GiB held instead of 0 (assembled, not copied): none.
    #[test]
    fn its_own_memory_is_no_finding() {
        let own = ISSUE_3375.replace(
            "Memory usage: 0/0 bytes",
            "Memory usage: 0/17179869184 bytes",
        );
        assert!(findings_of(RULE, &own).is_empty());
    }
}
