//! PaddlePaddle's out-of-memory error with its figures (`Out of memory
//! error on GPU 0. Cannot allocate 2.250000kB memory on GPU 0, 6.5GB memory
//! has been allocated and available memory is only 0.000000B.`,
//! catalogs/stacks-paddle.toml). Numbers before blame: a request of at most
//! [`TINY`] refused with (almost) nothing available, while Paddle's own
//! allocator holds little ([`OWN_MAX`]) or a figure no card has (an
//! accounting artefact, not memory), means the GPU was full before this
//! process allocated anything: another process holds it (a hidden earlier
//! Paddle process, another worker). A large request, or a large own
//! figure, is this process's own model and batch: `known-message`'s
//! cuda-oom stays.

use crate::correlate::Incident;
use crate::rules::support::{COMPUTE_APPS, confidence};
use crate::rules::{Action, Finding};

/// The error's row.
const ROW: &str = "stacks-paddle.gpu-out-of-memory";
/// A request this small fails only when the card is already full.
const TINY: f64 = 1024.0 * 1024.0;
/// Free memory below this is none at all.
const NONE_FREE: f64 = 1024.0 * 1024.0;
/// What Paddle's allocator holds, at most, when it has loaded nothing of
/// note.
const OWN_MAX: f64 = 1024.0 * 1024.0 * 1024.0;
/// No GPU has this much memory: an allocated figure above it is a counter
/// gone wrong, not memory this process holds.
const NO_CARD: f64 = 1024.0 * 1024.0 * 1024.0 * 1024.0;

/// Paddle's size as it prints it (`512.000000B`, `2.250000kB`,
/// `3.621826GB`: binary multiples), in bytes.
fn bytes(text: &str) -> Option<f64> {
    let text = text.trim();
    let at = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = text.split_at(at);
    let n: f64 = n.trim().parse().ok()?;
    let exp = match unit.trim_end_matches("iB").trim_end_matches('B') {
        "" => 0,
        "k" | "K" => 1,
        "M" => 2,
        "G" => 3,
        "T" => 4,
        "P" => 5,
        _ => return None,
    };
    Some(n * 1024f64.powi(exp))
}

/// The finding when one of Paddle's out-of-memory errors shows the GPU full
/// before this process allocated anything; it cites every such error of
/// the inputs (they are one failure).
pub(super) fn held_at_failure(incident: &Incident) -> Option<Finding> {
    let lines: Vec<_> = incident.known(ROW).collect();
    let (tiny, hit) = lines.iter().find(|(_, hit)| {
        let request = hit.get("request").and_then(bytes);
        let available = hit.get("available").and_then(bytes);
        // Printed, the allocated figure must be small or impossible.
        let own_small = hit
            .get("allocated")
            .and_then(bytes)
            .is_some_and(|a| !(OWN_MAX..=NO_CARD).contains(&a));
        request.is_some_and(|r| r <= TINY) && available.is_some_and(|a| a < NONE_FREE) && own_small
    })?;
    let request = hit.get("request").unwrap_or("?");
    let available = hit.get("available").unwrap_or("?");
    let allocated = hit.get("allocated").unwrap_or("?");
    let gpu = hit.get("gpu");
    let mut f = super::finding();
    if let Some(g) = gpu.and_then(|g| g.parse().ok()) {
        f.entities.gpus.insert(g);
    }
    for (m, h) in &lines {
        let note = match h.get("available") {
            Some(a) => format!(
                "Paddle could not allocate {}: available memory {a}",
                h.get("request").unwrap_or("?")
            ),
            None => "Paddle ran out of GPU memory".to_owned(),
        };
        match h.get("available") {
            Some(a) if m.span == tiny.span => f.evidence_marked(m.span, note, a),
            _ => f.evidence(m.span, note),
        }
    }
    f.condition(format!("the refused request is tiny ({request})"), true);
    f.condition(format!("the GPU had nothing free ({available})"), true);
    let artefact = bytes(allocated).is_some_and(|a| a > NO_CARD);
    f.condition(
        if artefact {
            format!("Paddle's own allocated figure ({allocated}) is more than any GPU has: a counter, not memory it holds")
        } else {
            format!("Paddle's own allocator holds little ({allocated})")
        },
        true,
    );
    f.condition("a process on the GPU is named", false);
    let on = gpu.map(|g| format!(" on GPU {g}")).unwrap_or_default();
    f.title = format!(
        "GPU memory held by another process: Paddle could not allocate {request}{on} with {available} available"
    );
    f.headline = format!(
        "Paddle could not allocate even {request}{on}: available memory is only {available}. A request that small fails only when the GPU is already full, and this process's own allocator holds little of it, so another process holds the memory: most often an earlier Paddle process that never exited (a hidden or backgrounded run, another worker)."
    );
    f.chain
        .push(format!("Paddle could not allocate {request}{on}"));
    f.chain.push(
        "the GPU was full before this process allocated anything: another process holds its memory"
            .to_owned(),
    );
    f.explanation = "Paddle's error gives the request, what its own allocator already holds and what CUDA reported free. A model or batch too large for the card fails on a large request after Paddle has allocated much; a request of bytes or kilobytes refused with nothing free, while Paddle holds little, means the memory was taken before this process began.".to_owned();
    f.actions.push(Action::advice(
        "list the processes on the GPU (a leftover may not show in nvidia-smi's plain table) and stop the one that holds it, then run again",
        Some(&format!("{COMPUTE_APPS}; fuser -v /dev/nvidia*")),
    ));
    f.actions.push(Action::advice(
        "or start Paddle on a free GPU (CUDA_VISIBLE_DEVICES); lowering the batch size does not help a card that is already full",
        None,
    ));
    f.confidence = confidence(&f, 0.6, 0.8);
    Some(f)
}

#[cfg(test)]
mod tests {
    const RULE: &str = "gpu-memory-taken-before-load";

    /// PaddleOCR's predictor creation, Paddle 2.0.2
    /// (https://github.com/PaddlePaddle/PaddleOCR/issues/6197): a 2.25 kB
    /// request refused with 0 B available, the allocated figure an artefact
    /// (127.99 TB); a hidden earlier Paddle process held the card.
    const HELD: &str = "Out of memory error on GPU 0. Cannot allocate 512.000000B memory on GPU 6, available memory is only 0.000000B.\n\nRuntimeError: ResourceExhaustedError:\n\nOut of memory error on GPU 0. Cannot allocate 2.250000kB memory on GPU 0, 127.994262TB memory has been allocated and available memory is only 0.000000B.\n";

    #[test]
    fn a_tiny_request_with_nothing_free_is_memory_another_process_holds() {
        let f = crate::testing::findings_of(RULE, HELD);
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].category,
            crate::rules::Category::GpuMemoryHeldByOtherProcess
        );
        assert!(f[0].entities.gpus.contains(&0));
        assert_eq!(f[0].evidence.len(), 2, "both errors are one failure");
    }

    /// https://github.com/PaddlePaddle/PaddleGAN/issues/587: 3.6 GB asked
    /// with 21 GB of Paddle's own allocated, the model filling the card; and
    /// a tiny request beside a large own figure: neither is read.
    #[test]
    fn a_large_request_or_a_large_own_figure_stays_cuda_oom() {
        let own = "Out of memory error on GPU 0. Cannot allocate 3.621826GB memory on GPU 0, 21.184814GB memory has been allocated and available memory is only 2.814575GB.\n";
        assert!(crate::testing::findings_of(RULE, own).is_empty());
        let full = "Out of memory error on GPU 0. Cannot allocate 512.000000B memory on GPU 0, 14.500000GB memory has been allocated and available memory is only 0.000000B.\n";
        assert!(crate::testing::findings_of(RULE, full).is_empty());
        let bare = "Out of memory error on GPU 0. Cannot allocate 512.000000B memory on GPU 0, available memory is only 0.000000B.\n";
        assert!(crate::testing::findings_of(RULE, bare).is_empty());
    }

    #[test]
    fn paddle_s_sizes_are_binary_multiples() {
        assert_eq!(super::bytes("512.000000B"), Some(512.0));
        assert_eq!(super::bytes("2.250000kB"), Some(2304.0));
        assert_eq!(super::bytes("1.5 GB"), Some(1.5 * 1073741824.0));
        assert!(super::bytes("12 parsecs").is_none());
    }
}
