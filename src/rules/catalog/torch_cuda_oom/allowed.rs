//! PyTorch's other out-of-memory message, `Allocation on device 0 would
//! exceed allowed memory. (out of memory)` with its figures (`Currently
//! allocated`, `Requested`, `Device limit`, `Free (according to CUDA)`,
//! `PyTorch limit`), one a line or flattened onto the message's own line
//! (catalogs/stacks-torch.toml). Numbers before blame: when no memory
//! fraction is set and what this process has allocated plus what it asked
//! for is below the device's limit, yet CUDA has less free than the
//! request, the difference (`limit - allocated - free`) is held outside
//! this process's tensors; past its own CUDA context (at most
//! [`super::OWN_CONTEXT`]), enough that the request would have fit, it is
//! another process's (a desktop, a browser, another server).

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding};
use crate::source::Span;

/// The message's row, and the row of its figure lines.
const ROW: &str = "stacks-torch.cuda-oom-allowed-memory";
const FIGURES: &str = "stacks-torch.allowed-memory-figures";
/// The figure lines follow the message within this many lines.
const BLOCK: u32 = 7;
/// `PyTorch limit` when no fraction is set: `17179869184.00 GiB` (2^64
/// bytes); anything above this many bytes is no limit.
const UNSET_LIMIT: u64 = 1 << 50;

/// One figure as printed, in bytes, and the line it is on.
struct Figure {
    printed: String,
    bytes: u64,
    span: Span,
}

#[derive(Default)]
struct Figures {
    allocated: Option<Figure>,
    requested: Option<Figure>,
    limit: Option<Figure>,
    free: Option<Figure>,
    /// `PyTorch limit (set by user-supplied memory fraction)`, in bytes.
    fraction: Option<u64>,
}

const SIZE: &str = r"([0-9]+(?:\.[0-9]+)?) ?(bytes|B|KiB|MiB|GiB|TiB)";

static FIGURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(Currently allocated|Requested|Device limit|Free \(according to CUDA\)|memory fraction\)(?:\\n)?)\s*:\s*{SIZE}"
    ))
    .expect("figure regex")
});

/// `21.55 GiB` in bytes.
fn bytes(n: &str, unit: &str) -> Option<u64> {
    let n: f64 = n.parse().ok()?;
    let scale = match unit {
        "bytes" | "B" => 1u64,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => 1 << 40,
    };
    Some((n * scale as f64) as u64)
}

impl Figures {
    fn read(&mut self, text: &str, span: Span) {
        for c in FIGURE.captures_iter(text) {
            let Some(b) = bytes(&c[2], &c[3]) else {
                continue;
            };
            let figure = || {
                Some(Figure {
                    printed: format!("{} {}", &c[2], &c[3]),
                    bytes: b,
                    span,
                })
            };
            match &c[1] {
                "Currently allocated" => self.allocated = self.allocated.take().or_else(figure),
                "Requested" => self.requested = self.requested.take().or_else(figure),
                "Device limit" => self.limit = self.limit.take().or_else(figure),
                "Free (according to CUDA)" => self.free = self.free.take().or_else(figure),
                _ => self.fraction = self.fraction.or(Some(b)),
            }
        }
    }
}

/// The findings of the message whose numbers put the shortfall outside
/// this process; the others stay `known-message`'s `cuda-oom`.
pub(super) fn findings(incident: &Incident, out: &mut Vec<Finding>) {
    for (m, hit) in incident.known(ROW) {
        let mut figures = Figures::default();
        figures.read(&m.text, m.span);
        let next = (m.span.line + 1)..=(m.span.line + BLOCK);
        for (line, _) in incident.known(FIGURES) {
            if line.span.source == m.span.source && next.contains(&line.span.line) {
                figures.read(&line.text, line.span);
            }
        }
        // A later copy of the same block is read by its own message.
        if let Some(f) = held_elsewhere(&figures, m.span, hit.get("gpu")) {
            out.push(f);
        }
    }
}

fn held_elsewhere(x: &Figures, span: Span, gpu: Option<&str>) -> Option<Finding> {
    let (alloc, req, limit, free) = (
        x.allocated.as_ref()?,
        x.requested.as_ref()?,
        x.limit.as_ref()?,
        x.free.as_ref()?,
    );
    // A fraction the program set is what ran out (another finding's).
    if x.fraction.is_some_and(|f| f < UNSET_LIMIT) {
        return None;
    }
    let below = alloc.bytes + req.bytes <= limit.bytes;
    let short = free.bytes < req.bytes;
    let outside = limit.bytes.saturating_sub(alloc.bytes + free.bytes);
    let beyond_context = outside.saturating_sub(super::OWN_CONTEXT);
    if !(below && short && free.bytes + beyond_context >= req.bytes) {
        return None;
    }
    let gib = |b: u64| format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64);
    let on = gpu.map(|g| format!(" on GPU {g}")).unwrap_or_default();
    let mut f = Finding::new(
        super::META.id,
        Category::GpuMemoryHeldByOtherProcess,
        super::META.severity,
    );
    if let Some(g) = gpu.and_then(|g| g.parse().ok()) {
        f.entities.gpus.insert(g);
    }
    f.evidence(
        span,
        "PyTorch: the allocation would exceed the memory it may use",
    );
    for (figure, what) in [
        (alloc, "allocated by this process"),
        (req, "requested"),
        (limit, "the device's limit"),
        (free, "free according to CUDA"),
    ] {
        f.evidence_marked(
            figure.span,
            format!("{what}: {}", figure.printed),
            figure.printed.clone(),
        );
    }
    f.condition(
        format!(
            "allocated + requested ({} + {}) is below the device limit ({})",
            alloc.printed, req.printed, limit.printed
        ),
        true,
    );
    f.condition(
        format!("CUDA had less free ({}) than requested", free.printed),
        true,
    );
    f.condition(
        "no memory fraction was set (PyTorch limit absent or unset)",
        true,
    );
    f.condition("a process on the GPU is named", false);
    f.title =
        "GPU memory held outside this process: PyTorch's allocation failed below the device limit"
            .to_owned();
    f.headline = format!(
        "PyTorch could not allocate {}{on}: {} allocated + {} requested is below the device's {}, yet CUDA reports {} free, so about {} of the card is held outside this process's tensors (its own CUDA context takes at most about 1 GiB of it; the rest is another process: a desktop, a browser, another server).",
        req.printed,
        alloc.printed,
        req.printed,
        limit.printed,
        free.printed,
        gib(outside)
    );
    f.chain
        .push(format!("PyTorch could not allocate {}{on}", req.printed));
    f.chain.push(format!(
        "about {} of the device is held outside this process",
        gib(outside)
    ));
    f.actions.push(Action::advice(
        "find what else holds the GPU and close it (a browser or desktop with hardware acceleration, another model server or notebook), or move this program to a free GPU; a smaller workload (ComfyUI's --lowvram) only hides the shortfall",
        Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; nvidia-smi"),
    ));
    f.confidence = confidence(&f, 0.6, 0.8);
    Some(f)
}
