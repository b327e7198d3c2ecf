//! Start-up free-memory figures of servers other than Ollama, read from
//! their catalog rows: TensorFlow's device record (`Found device 0 with
//! properties:` … `Total memory: 7.92GiB` / `Free memory: 190.31MiB`, or
//! `totalMemory: … freeMemory: …` on one line) and llama.cpp's `using device
//! CUDA0 (…) - 8720 MiB free`, whose total comes from the memory breakdown
//! (`| 11165 = 8702 + (…`) or, on a one-GPU host, from nvidia-smi. Each is
//! measured before the program loaded anything but its CUDA context, so
//! free memory well below the total is memory other processes hold.

use std::collections::BTreeMap;

use crate::correlate::Incident;
use crate::rules::{Action, Finding, Severity};
use crate::source::Span;

/// TensorFlow's first line of a device's record, with the device's ordinal.
const TF_FOUND: &str = "stacks-tf.found-device";
/// TensorFlow's total and free figures (one line, or two after 1.4's layout).
const TF_MEMORY: &str = "stacks-tf.device-memory";
/// TensorFlow's compute capability and clock line of a device's record: it
/// opens the record where the paste starts below `Found device N`.
const TF_PROPERTIES: &str = "stacks-tf.device-properties";
/// TensorFlow's bus id line of a device's record.
const TF_BUS: &str = "stacks-tf.device-bus-id";
/// How many lines TensorFlow's record spans from `Found device` to the free
/// figure (name, capability, bus id, total, free).
const TF_RECORD: u32 = 6;
/// llama.cpp's free figure of each device it will load on.
const LLAMA_FREE: &str = "stacks-llamacpp.device-free-at-load";
/// llama.cpp's memory breakdown: the device's total.
const LLAMA_BREAKDOWN: &str = "stacks-llamacpp.memory-breakdown-device";
/// CUDA's out-of-memory code, however a program prints it.
const ALLOCATION: &str = "cuda.memory-allocation";

/// Held by others below this (GiB) is a display, a context, noise.
const MIN_HELD_GIB: f64 = 1.0;
/// Held at start-up, as a share of the total, worth a finding.
const SHARE: f64 = 0.2;
/// Held at start-up, as a share of the total, that is an error by itself.
const SHARE_ERROR: f64 = 0.3;

/// One device's free and total memory as a program printed them before it
/// loaded anything.
struct Figure<'a> {
    /// The program that printed them.
    what: &'static str,
    /// The device as the program names it (`GPU 0`, `CUDA0`).
    device: String,
    /// The GPU's index, when the line or a one-GPU host says it.
    gpu: Option<u32>,
    /// The line that opens the device's record, when it is another line.
    opening: Option<Span>,
    /// The record's bus id line and the id as printed, when it has one.
    bus: Option<(Span, &'a str)>,
    free: Figured<'a>,
    total: Figured<'a>,
}

/// A figure: the line, the text as printed (or written out with the unit
/// the line implies) and the value in GiB.
struct Figured<'a> {
    span: Span,
    text: String,
    /// The text to mark on the line, when the line prints it as is.
    mark: Option<&'a str>,
    gib: f64,
}

impl Figure<'_> {
    fn held(&self) -> f64 {
        self.total.gib - self.free.gib
    }
}

/// A size as TensorFlow prints it (`7.92GiB`, `190.31MiB`, `0B`), in GiB.
fn gib(text: &str) -> Option<f64> {
    let text = text.trim();
    let at = text.find(|c: char| c.is_ascii_alphabetic())?;
    let n: f64 = text[..at].trim().parse().ok()?;
    let scale = match &text[at..] {
        "B" | "bytes" => 1.0 / (1024.0 * 1024.0 * 1024.0),
        "KiB" | "KB" => 1.0 / (1024.0 * 1024.0),
        "MiB" | "MB" => 1.0 / 1024.0,
        "GiB" | "GB" => 1.0,
        "TiB" | "TB" => 1024.0,
        _ => return None,
    };
    Some(n * scale)
}

fn same_record(a: Span, b: Span, within: u32) -> bool {
    a.source == b.source && a.line <= b.line && b.line - a.line <= within
}

/// TensorFlow's records: each free figure with its total (the same line,
/// or the line before) under a `Found device N` line a few lines above (or
/// on the same line, where a paste joined the record), or, where the paste
/// starts below that line, under the record's own properties line
/// (`major: 6 minor: 1 memoryClockRate …`): TensorFlow's layout, which no
/// other program's `Total memory:` / `Free memory:` pair has.
fn tensorflow(incident: &Incident) -> Vec<Figure<'_>> {
    let found: Vec<(Span, u32)> = incident
        .known(TF_FOUND)
        .filter_map(|(m, h)| Some((m.span, h.get("gpu")?.parse().ok()?)))
        .collect();
    let properties: Vec<Span> = incident.known(TF_PROPERTIES).map(|(m, _)| m.span).collect();
    let buses: Vec<(Span, &str)> = incident
        .known(TF_BUS)
        .filter_map(|(m, h)| Some((m.span, h.get("bus")?)))
        .collect();
    let memory: Vec<_> = incident.known(TF_MEMORY).collect();
    let mut out = Vec::new();
    for (m, h) in &memory {
        let Some(free) = h.get("free") else {
            continue;
        };
        let total = match h.get("total") {
            Some(t) => Some((m.span, t)),
            None => memory.iter().find_map(|(p, ph)| {
                let before = p.span.source == m.span.source && p.span.line + 1 == m.span.line;
                before
                    .then(|| ph.get("total").map(|t| (p.span, t)))
                    .flatten()
            }),
        };
        let Some((total_span, total)) = total else {
            continue;
        };
        let in_record = |f: Span| f.line <= total_span.line && same_record(f, m.span, TF_RECORD);
        let opened = found
            .iter()
            .filter(|(f, _)| in_record(*f))
            .max_by_key(|(f, _)| f.line)
            .map(|&(f, gpu)| (f, Some(gpu)))
            .or_else(|| {
                properties
                    .iter()
                    .filter(|f| in_record(**f))
                    .max_by_key(|f| f.line)
                    .map(|&f| (f, None))
            });
        let Some((opening, gpu)) = opened else {
            continue;
        };
        let bus = buses
            .iter()
            .find(|(b, _)| b.line >= opening.line && in_record(*b))
            .copied();
        let (Some(free_gib), Some(total_gib)) = (gib(free), gib(total)) else {
            continue;
        };
        let device = match (gpu, bus) {
            (Some(gpu), _) => format!("GPU {gpu}"),
            (None, Some((_, id))) => format!("the GPU at {id}"),
            (None, None) => "the GPU".to_owned(),
        };
        out.push(Figure {
            what: "TensorFlow",
            device,
            gpu,
            opening: Some(opening),
            bus,
            free: Figured {
                span: m.span,
                text: free.to_owned(),
                mark: Some(free),
                gib: free_gib,
            },
            total: Figured {
                span: total_span,
                text: total.to_owned(),
                mark: Some(total),
                gib: total_gib,
            },
        });
    }
    out
}

/// llama.cpp's free figure of each device (the first per device), with the
/// device's total from the memory breakdown, or from nvidia-smi on a host
/// with one GPU.
fn llama(incident: &Incident) -> Vec<Figure<'_>> {
    let mut totals: BTreeMap<&str, (Span, &str)> = BTreeMap::new();
    for (m, h) in incident.known(LLAMA_BREAKDOWN) {
        if let (Some(dev), Some(total)) = (h.get("dev"), h.get("total")) {
            totals.entry(dev).or_insert((m.span, total));
        }
    }
    let only = match incident.gpus.as_slice() {
        [g] => g
            .memory_total_mib
            .zip(g.spans.first().copied())
            .map(|(t, s)| (g.index, t, s)),
        _ => None,
    };
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (m, h) in incident.known(LLAMA_FREE) {
        let (Some(dev), Some(free)) = (h.get("dev"), h.get("free")) else {
            continue;
        };
        let Ok(free_mib) = free.parse::<f64>() else {
            continue;
        };
        if seen.contains(&dev) {
            continue;
        }
        let (total, gpu) = match (totals.get(dev), only) {
            (Some(&(span, t)), _) => match t.parse::<f64>() {
                Ok(mib) => (
                    Figured {
                        span,
                        text: format!("{t} MiB"),
                        mark: Some(t),
                        gib: mib / 1024.0,
                    },
                    only.map(|o| o.0),
                ),
                Err(_) => continue,
            },
            (None, Some((index, mib, span))) => (
                Figured {
                    span,
                    text: format!("{mib} MiB"),
                    mark: None,
                    gib: mib as f64 / 1024.0,
                },
                Some(index),
            ),
            (None, None) => continue,
        };
        seen.push(dev);
        let printed = m.text.find(free).map(|at| &m.text[at..at + free.len()]);
        out.push(Figure {
            what: "llama.cpp",
            device: dev.to_owned(),
            gpu,
            opening: None,
            bus: None,
            free: Figured {
                span: m.span,
                text: format!("{free} MiB"),
                mark: printed,
                gib: free_mib / 1024.0,
            },
            total,
        });
    }
    out
}

/// Whether a CUDA allocation failed after `span` in the same input.
fn allocation_failed_after(incident: &Incident, span: Span) -> bool {
    incident
        .known(ALLOCATION)
        .any(|(m, _)| m.span.source == span.source && m.span.line > span.line)
}

fn cite(f: &mut Finding, fig: &Figure, held: f64) {
    if let Some(opening) = fig.opening {
        f.evidence(opening, format!("{} found {}", fig.what, fig.device));
    }
    if let Some((span, id)) = fig.bus
        && Some(span) != fig.opening
    {
        f.evidence_marked(span, format!("{}'s PCI bus id", fig.device), id);
    }
    if fig.total.span != fig.free.span {
        let note = format!("{}: {} total", fig.device, fig.total.text);
        match fig.total.mark {
            Some(mark) => f.evidence_marked(fig.total.span, note, mark),
            None => f.evidence(fig.total.span, note),
        }
    }
    let note = format!(
        "before {} loaded anything: {} free of {} (about {held:.1} GiB held by other processes)",
        fig.what, fig.free.text, fig.total.text
    );
    match fig.free.mark {
        Some(mark) => f.evidence_marked(fig.free.span, note, mark),
        None => f.evidence(fig.free.span, note),
    }
    if let Some(gpu) = fig.gpu {
        f.entities.gpus.insert(gpu);
    }
}

/// The finding for start-up figures well below the device's total, when a
/// program other than Ollama printed them.
pub(super) fn held_at_start(incident: &Incident) -> Option<Finding> {
    let figures: Vec<Figure> = tensorflow(incident)
        .into_iter()
        .chain(llama(incident))
        .collect();
    let held: Vec<(&Figure, f64)> = figures
        .iter()
        .map(|fig| (fig, fig.held()))
        .filter(|(fig, h)| *h >= MIN_HELD_GIB && *h >= SHARE * fig.total.gib)
        .collect();
    let (first, _) = held.first()?;
    let mut f = super::finding();
    let mut parts = Vec::new();
    let mut big = false;
    for (fig, h) in &held {
        big |= *h >= SHARE_ERROR * fig.total.gib;
        parts.push(format!(
            "{} had {} free of {} (about {h:.1} GiB held)",
            fig.device, fig.free.text, fig.total.text
        ));
        cite(&mut f, fig, *h);
    }
    let what = first.what;
    f.condition(
        format!("{what}'s free memory before it loaded anything is well below the device's total"),
        true,
    );
    let failed = f.condition(
        "an allocation failed for lack of memory after it",
        held.iter()
            .any(|(fig, _)| allocation_failed_after(incident, fig.free.span)),
    );
    if !big && !failed {
        f.severity = Severity::Warning;
    }
    let parts = parts.join(", ");
    f.title = format!("GPU memory already held by another process when {what} started: {parts}");
    f.headline = format!(
        "When {what} started, before it had loaded anything, {parts}: other processes hold that memory{}.",
        if failed {
            ", and the allocation that failed afterwards had only the rest"
        } else {
            ", and what it loads gets only the rest"
        }
    );
    if failed {
        f.chain.push(format!(
            "{what} ran out of GPU memory: only the rest was free"
        ));
    }
    f.chain.push(format!(
        "other processes held GPU memory before {what} loaded anything"
    ));
    f.explanation = format!(
        "{what} prints each device's free memory when it starts, after creating its CUDA context and before loading anything: what is missing from the total then is held by other processes (a display takes a few hundred MiB; this rule counts only more than 1 GiB and a fifth of the device). The figures say how much, not who: nvidia-smi --query-compute-apps names the holders."
    );
    f.actions.push(Action::advice(
        "list the processes that hold the GPU's memory (another server or notebook, a left-over run) and stop or move them",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "or run on a GPU with free memory (CUDA_VISIBLE_DEVICES=<index of a free GPU>)",
        None,
    ));
    f.confidence = crate::rules::support::confidence(&f, 0.5, 0.75);
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::gib;
    use crate::rules::Severity;

    const RULE: &str = "gpu-memory-taken-before-load";
    const FIXTURES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/rules/gpu-memory-taken-before-load/"
    );

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{FIXTURES}{name}")).expect("fixture")
    }

    /// https://github.com/tensorflow/tensorflow/issues/8170: 190.31MiB free
    /// of 7.92GiB when TensorFlow found the GPU, then its first allocation
    /// failed; https://github.com/mozilla/DeepSpeech/issues/463: two GPUs,
    /// both nearly full, TensorFlow 1.0's indented record.
    #[test]
    fn tensorflow_s_start_up_figures_name_memory_held_by_others() {
        let f = crate::testing::findings_of(
            RULE,
            &fixture("pos-tf-8170-free-190mib-of-7.92gib-at-start.log"),
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Error);
        assert!(
            f[0].headline.contains("190.31MiB free of 7.92GiB"),
            "{}",
            f[0].headline
        );
        assert!(f[0].entities.gpus.contains(&0));
        // The allocation that failed afterwards is why.
        assert!(
            f[0].conditions.iter().all(|c| c.met),
            "{:?}",
            f[0].conditions
        );
        let f = crate::testing::findings_of(
            RULE,
            &fixture("pos-tf-deepspeech-463-two-gpus-nearly-full.log"),
        );
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].entities.gpus.iter().copied().collect::<Vec<_>>(),
            [0, 1]
        );
        assert!(
            f[0].headline.contains("227.88MiB free of 11.17GiB"),
            "{}",
            f[0].headline
        );
    }

    /// The near misses: google/seq2seq#132, 7.81GiB of 7.92GiB free (the
    /// allocation that failed asked for the total, TensorFlow's own bug);
    /// the DeepSpeech record without its `Found device` and properties
    /// lines (a `Total memory:` / `Free memory:` pair alone is any
    /// program's, a JVM's heap included); tensorflow#25337's one-line figures, a display's
    /// 1.43GiB of 8.00GiB.
    #[test]
    fn figures_near_the_total_or_outside_a_device_record_are_not_read() {
        let seq2seq = r#"I tensorflow/core/common_runtime/gpu/gpu_device.cc:885] Found device 0 with properties: 
name: GeForce GTX 1080
major: 6 minor: 1 memoryClockRate (GHz) 1.8095
pciBusID 0000:02:00.0
Total memory: 7.92GiB
Free memory: 7.81GiB
W tensorflow/stream_executor/cuda/cuda_driver.cc:590] creating context when one is currently active; existing: 0x3863510
I tensorflow/core/common_runtime/gpu/gpu_device.cc:885] Found device 1 with properties: 
name: GeForce GTX 1080
major: 6 minor: 1 memoryClockRate (GHz) 1.8095
pciBusID 0000:01:00.0
Total memory: 7.92GiB
Free memory: 7.81GiB
I tensorflow/core/common_runtime/gpu/gpu_device.cc:906] DMA: 0 1 
I tensorflow/core/common_runtime/gpu/gpu_device.cc:916] 0:   Y Y 
I tensorflow/core/common_runtime/gpu/gpu_device.cc:916] 1:   Y Y 
I tensorflow/core/common_runtime/gpu/gpu_device.cc:975] Creating TensorFlow device (/gpu:0) -> (device: 0, name: GeForce GTX 1080, pci bus id: 0000:02:00.0)
I tensorflow/core/common_runtime/gpu/gpu_device.cc:975] Creating TensorFlow device (/gpu:1) -> (device: 1, name: GeForce GTX 1080, pci bus id: 0000:01:00.0)
E tensorflow/stream_executor/cuda/cuda_driver.cc:1002] failed to allocate 7.92G (8508145664 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY
"#;
        assert!(crate::testing::findings_of(RULE, seq2seq).is_empty());
        let unopened: String = fixture("pos-tf-deepspeech-463-two-gpus-nearly-full.log")
            .lines()
            .filter(|l| !l.contains("Found device") && !l.contains("memoryClockRate"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(crate::testing::findings_of(RULE, &unopened).is_empty());
        let one_line = fixture("neg-tf-25337-one-line-figures-display-holds-1.4gib.log");
        assert!(crate::testing::findings_of(RULE, &one_line).is_empty());
        // The same one-line record with the figures a holder leaves (the
        // next paste): read.
        let held = one_line.replace("freeMemory: 6.57GiB", "freeMemory: 1.57GiB");
        let f = crate::testing::findings_of(RULE, &held);
        assert_eq!(f.len(), 1, "{held}");
        assert!(
            f[0].headline.contains("1.57GiB free of 8.00GiB"),
            "{}",
            f[0].headline
        );
    }

    /// https://github.com/ggml-org/llama.cpp/issues/19437: 8720 MiB free on
    /// a GTX 1080 Ti whose breakdown says 11165 MiB total: about 2.4 GiB
    /// held, a fifth of the card, and no allocation failed: a warning.
    #[test]
    fn llama_cpp_s_free_figure_at_load_against_its_breakdown_total() {
        let f = crate::testing::findings_of(
            RULE,
            &fixture("pos-llamacpp-19437-8720-of-11165-mib-free-at-load.log"),
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Warning);
        assert!(
            f[0].headline
                .contains("CUDA0 had 8720 MiB free of 11165 MiB"),
            "{}",
            f[0].headline
        );
        // Without the breakdown or nvidia-smi there is no total: nothing.
        let alone = "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce GTX 1080 Ti) (0000:03:00.0) - 8720 MiB free\n";
        assert!(crate::testing::findings_of(RULE, alone).is_empty());
    }

    /// A record pasted from its `name:` line on, below the `Found device`
    /// line (batch S 1154, from a GTX 1070 thread): the properties line
    /// opens it, and the GPU is named by its bus id; the DeepSpeech record
    /// cut the same way (https://github.com/mozilla/DeepSpeech/issues/463)
    /// gives both its GPUs.
    #[test]
    fn a_record_pasted_below_its_found_device_line_is_opened_by_its_properties() {
        let paste = "name: GeForce GTX 1070\nmajor: 6 minor: 1 memoryClockRate (GHz) 1.683\npciBusID 0000:01:00.0\nTotal memory: 7.91GiB\nFree memory: 148.69MiB\n";
        let f = crate::testing::findings_of(RULE, paste);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].headline
                .contains("the GPU at 0000:01:00.0 had 148.69MiB free of 7.91GiB"),
            "{}",
            f[0].headline
        );
        assert!(f[0].entities.gpus.is_empty());
        assert!(
            f[0].evidence.iter().any(|e| e.span.line == 3),
            "{:?}",
            f[0].evidence
        );
        let cut: String = fixture("pos-tf-deepspeech-463-two-gpus-nearly-full.log")
            .lines()
            .filter(|l| !l.contains("Found device"))
            .map(|l| format!("{l}\n"))
            .collect();
        let f = crate::testing::findings_of(RULE, &cut);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].headline
                .contains("the GPU at 0000:02:00.0 had 227.88MiB free of 11.17GiB"),
            "{}",
            f[0].headline
        );
    }

    #[test]
    fn sizes_as_tensorflow_prints_them() {
        assert_eq!(gib("7.92GiB"), Some(7.92));
        let mib = gib("190.31MiB").expect("MiB");
        assert!((mib - 0.18585).abs() < 0.0001, "{mib}");
        assert_eq!(gib("0B"), Some(0.0));
        assert_eq!(gib("8.00 GiB"), Some(8.0));
        assert!(gib("7.92").is_none());
        assert!(gib("GiB").is_none());
    }
}
