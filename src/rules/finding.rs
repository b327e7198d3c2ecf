//! What a rule concludes: a finding with its evidence, confidence and steps.

use std::collections::BTreeSet;

use super::Action;
use crate::source::Span;

/// Ordered most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The service cannot run until this is fixed.
    Critical,
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// The report schema's root-cause taxonomy (docs/report-schema.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    GpuMemoryHeldByOtherProcess,
    StaleServingInstance,
    HeterogeneousGpuMemory,
    ImbalanceCheckFalsePositive,
    CudaOom,
    KvCacheTooSmall,
    MemFractionMisconfigured,
    NcclTimeout,
    NcclInitFailure,
    PortInUse,
    XidGpuFellOffBus,
    XidEcc,
    XidOther,
    DriverLibraryMismatch,
    /// Not in the first taxonomy: a driver that is not loaded at all is a
    /// different fix (rebuild the module) from a mismatched one (reboot).
    DriverNotLoaded,
    EccUncorrectable,
    UnitCrashLoop,
    UnitExitedZeroNoRestart,
    HostOomKiller,
    ModelLoadFailure,
    CudaIllegalMemoryAccess,
    CudaGraphCaptureFailure,
    UnsupportedHardware,
    TpSizeMismatch,
    /// Not in the first taxonomy: an exception in the server's own code that
    /// no more specific category names, shown to be the first failure of a
    /// distributed group (its peers' NCCL timeouts follow from it).
    ServerException,
    /// Not in the first taxonomy: a server that stopped making progress
    /// (SGLang's watchdog) with no cause visible in the inputs.
    ServerHang,
    Unknown,
}

impl Category {
    pub const ALL: [Category; 27] = [
        Category::GpuMemoryHeldByOtherProcess,
        Category::StaleServingInstance,
        Category::HeterogeneousGpuMemory,
        Category::ImbalanceCheckFalsePositive,
        Category::CudaOom,
        Category::KvCacheTooSmall,
        Category::MemFractionMisconfigured,
        Category::NcclTimeout,
        Category::NcclInitFailure,
        Category::PortInUse,
        Category::XidGpuFellOffBus,
        Category::XidEcc,
        Category::XidOther,
        Category::DriverLibraryMismatch,
        Category::DriverNotLoaded,
        Category::EccUncorrectable,
        Category::UnitCrashLoop,
        Category::UnitExitedZeroNoRestart,
        Category::HostOomKiller,
        Category::ModelLoadFailure,
        Category::CudaIllegalMemoryAccess,
        Category::CudaGraphCaptureFailure,
        Category::UnsupportedHardware,
        Category::TpSizeMismatch,
        Category::ServerException,
        Category::ServerHang,
        Category::Unknown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::GpuMemoryHeldByOtherProcess => "gpu-memory-held-by-other-process",
            Category::StaleServingInstance => "stale-serving-instance",
            Category::HeterogeneousGpuMemory => "heterogeneous-gpu-memory",
            Category::ImbalanceCheckFalsePositive => "imbalance-check-false-positive",
            Category::CudaOom => "cuda-oom",
            Category::KvCacheTooSmall => "kv-cache-too-small",
            Category::MemFractionMisconfigured => "mem-fraction-misconfigured",
            Category::NcclTimeout => "nccl-timeout",
            Category::NcclInitFailure => "nccl-init-failure",
            Category::PortInUse => "port-in-use",
            Category::XidGpuFellOffBus => "xid-gpu-fell-off-bus",
            Category::XidEcc => "xid-ecc",
            Category::XidOther => "xid-other",
            Category::DriverLibraryMismatch => "driver-library-mismatch",
            Category::DriverNotLoaded => "driver-not-loaded",
            Category::EccUncorrectable => "ecc-uncorrectable",
            Category::UnitCrashLoop => "unit-crash-loop",
            Category::UnitExitedZeroNoRestart => "unit-exited-zero-no-restart",
            Category::HostOomKiller => "host-oom-killer",
            Category::ModelLoadFailure => "model-load-failure",
            Category::CudaIllegalMemoryAccess => "cuda-illegal-memory-access",
            Category::CudaGraphCaptureFailure => "cuda-graph-capture-failure",
            Category::UnsupportedHardware => "unsupported-hardware",
            Category::TpSizeMismatch => "tp-size-mismatch",
            Category::ServerException => "server-exception",
            Category::ServerHang => "server-hang",
            Category::Unknown => "unknown",
        }
    }
}

/// A line that supports a finding, and what it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    pub span: Span,
    pub note: String,
    /// The text on the line that the note is about (`55286MiB`, `20629`),
    /// underlined in the reports. `None`: the renderer underlines the first
    /// value named in the note that the line holds, if any.
    pub highlight: Option<String>,
}

impl Evidence {
    pub fn new(span: Span, note: impl Into<String>) -> Evidence {
        Evidence {
            span,
            note: note.into(),
            highlight: None,
        }
    }

    /// Evidence whose key value is `needle`, a literal part of the line.
    pub fn marked(span: Span, note: impl Into<String>, needle: impl Into<String>) -> Evidence {
        Evidence {
            highlight: Some(needle.into()).filter(|n: &String| !n.is_empty()),
            ..Evidence::new(span, note)
        }
    }
}

/// The things a finding is about, for filtering and fleet aggregation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Entities {
    pub pids: BTreeSet<u32>,
    pub gpus: BTreeSet<u32>,
    /// GPUs the inputs name only by PCI bus id (`0000:dc:00`, a kernel Xid
    /// line), never resolved to an index: listed after the indices.
    pub gpu_bus_ids: BTreeSet<String>,
    pub units: BTreeSet<String>,
    pub xid: BTreeSet<u32>,
}

/// One condition of a rule and whether the incident met it: the explanation
/// of a confidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub text: String,
    pub met: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// `F1`, `F2`, … assigned after ranking.
    pub id: String,
    pub rule: &'static str,
    pub category: Category,
    pub severity: Severity,
    /// 0..=1, derived from `conditions`.
    pub confidence: f64,
    pub title: String,
    /// One sentence naming the cause, for the top of the report.
    pub headline: String,
    pub explanation: String,
    /// From the symptom the user saw down to the cause, one line each.
    pub chain: Vec<String>,
    pub entities: Entities,
    pub evidence: Vec<Evidence>,
    pub actions: Vec<Action>,
    pub conditions: Vec<Condition>,
    /// Ids of findings this one explains.
    pub explains: Vec<String>,
    /// Other findings that could also be the root cause, with their confidence.
    pub competing: Vec<(String, f64)>,
    /// How many times the failure was seen (ranks, restarts) before merging.
    pub occurrences: u32,
    /// Values from the logs that were refused (and so produced no action).
    pub refused: Vec<String>,
}

impl Finding {
    pub fn new(rule: &'static str, category: Category, severity: Severity) -> Finding {
        Finding {
            id: String::new(),
            rule,
            category,
            severity,
            confidence: 0.0,
            title: String::new(),
            headline: String::new(),
            explanation: String::new(),
            chain: Vec::new(),
            entities: Entities::default(),
            evidence: Vec::new(),
            actions: Vec::new(),
            conditions: Vec::new(),
            explains: Vec::new(),
            competing: Vec::new(),
            occurrences: 1,
            refused: Vec::new(),
        }
    }

    pub fn evidence(&mut self, span: Span, note: impl Into<String>) {
        self.push_evidence(Evidence::new(span, note));
    }

    /// Like [`Finding::evidence`], with the value on the line that the note
    /// is about (a literal substring of the line) to underline.
    pub fn evidence_marked(
        &mut self,
        span: Span,
        note: impl Into<String>,
        needle: impl Into<String>,
    ) {
        self.push_evidence(Evidence::marked(span, note, needle));
    }

    /// Adds `e` unless its line is already cited.
    pub fn push_evidence(&mut self, e: Evidence) {
        if !self.evidence.iter().any(|x| x.span == e.span) {
            self.evidence.push(e);
        }
    }

    /// Like [`Finding::evidence`], but a second line saying the same thing
    /// (the same message in two captures) is not repeated.
    pub fn evidence_once(&mut self, span: Span, note: impl Into<String>) {
        let note = note.into();
        if !self.evidence.iter().any(|e| e.note == note) {
            self.evidence(span, note);
        }
    }

    /// [`Finding::evidence_once`] with a key value to underline.
    pub fn evidence_once_marked(
        &mut self,
        span: Span,
        note: impl Into<String>,
        needle: impl Into<String>,
    ) {
        let note = note.into();
        if !self.evidence.iter().any(|e| e.note == note) {
            self.evidence_marked(span, note, needle);
        }
    }

    pub fn condition(&mut self, text: impl Into<String>, met: bool) -> bool {
        self.conditions.push(Condition {
            text: text.into(),
            met,
        });
        met
    }
}
