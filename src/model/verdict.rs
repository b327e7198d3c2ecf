//! The vocabulary of a verdict: how severe a failure is and which root-cause
//! category it belongs to (docs/report-schema.md). It sits with the model
//! because the message catalogs (`crate::catalogs`), below the rules, name
//! both in their rows.

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

impl Severity {
    /// Every severity, most severe first.
    pub const ALL: [Severity; 4] = [
        Severity::Critical,
        Severity::Error,
        Severity::Warning,
        Severity::Info,
    ];

    /// The severity named `name` (`critical`, `error`, `warning`, `info`).
    pub fn from_name(name: &str) -> Option<Severity> {
        Severity::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl Category {
    /// The category named `name` in the report schema's spelling.
    pub fn from_name(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == name)
    }
}
