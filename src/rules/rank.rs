//! One root cause per incident: findings are ranked by causal layer
//! (hardware and driver faults cause software symptoms, never the reverse),
//! the root explains the findings of the layers below it, and findings of
//! the root's own layer are competing hypotheses.

use std::collections::BTreeMap;

use super::{Category, Finding, Severity};

/// Where a category sits in the chain of causes; lower causes higher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CausalLayer {
    /// The GPU, its driver, its memory: nothing above works without them.
    Hardware,
    /// The host: memory exhaustion kills whatever is biggest.
    Host,
    /// How the deployment is set up: who holds the GPUs, sizes, flags, ports.
    Environment,
    /// What the server ran into at run time because of the above.
    Runtime,
    /// What the supervisor did about it (restarts, failure states).
    Supervisor,
    Unknown,
}

impl CausalLayer {
    pub fn of(category: Category) -> CausalLayer {
        use Category::*;
        match category {
            XidGpuFellOffBus
            | XidEcc
            | XidOther
            | EccUncorrectable
            | DriverLibraryMismatch
            | DriverNotLoaded
            | UnsupportedHardware => CausalLayer::Hardware,
            HostOomKiller => CausalLayer::Host,
            GpuMemoryHeldByOtherProcess
            | StaleServingInstance
            | HeterogeneousGpuMemory
            | ImbalanceCheckFalsePositive
            | KvCacheTooSmall
            | MemFractionMisconfigured
            | PortInUse
            | ModelLoadFailure
            | TpSizeMismatch => CausalLayer::Environment,
            CudaOom
            | CudaIllegalMemoryAccess
            | CudaGraphCaptureFailure
            | NcclInitFailure
            | NcclTimeout
            | ServerException
            | ServerHang => CausalLayer::Runtime,
            UnitCrashLoop | UnitExitedZeroNoRestart => CausalLayer::Supervisor,
            Unknown => CausalLayer::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CausalLayer::Hardware => "hardware",
            CausalLayer::Host => "host",
            CausalLayer::Environment => "environment",
            CausalLayer::Runtime => "runtime",
            CausalLayer::Supervisor => "supervisor",
            CausalLayer::Unknown => "unknown",
        }
    }
}

/// Eight ranks printing the same error are one finding: findings of one rule
/// with the same title are merged, their evidence joined and counted.
pub fn merge_duplicates(findings: Vec<Finding>) -> Vec<Finding> {
    let mut merged: BTreeMap<(&'static str, String), Finding> = BTreeMap::new();
    let mut order = Vec::new();
    for f in findings {
        let key = (f.rule, f.title.clone());
        match merged.get_mut(&key) {
            Some(existing) => {
                existing.occurrences += f.occurrences;
                for e in f.evidence {
                    existing.evidence(e.span, e.note);
                }
                existing.entities.pids.extend(f.entities.pids);
                existing.entities.gpus.extend(f.entities.gpus);
                existing.entities.gpu_bus_ids.extend(f.entities.gpu_bus_ids);
                existing.entities.units.extend(f.entities.units);
                existing.entities.xid.extend(f.entities.xid);
            }
            None => {
                order.push(key.clone());
                merged.insert(key, f);
            }
        }
    }
    order
        .into_iter()
        .filter_map(|k| merged.remove(&k))
        .collect()
}

/// Orders findings, assigns ids and returns the root cause's id.
pub fn rank(mut findings: Vec<Finding>) -> (Vec<Finding>, Option<String>) {
    // A wording class's finding (`symptom-wording`) names what no exact
    // row read: any exact finding of a known category is the root before
    // it, whatever their layers.
    let key = |f: &Finding| {
        (
            f.rule == super::SYMPTOM_WORDING,
            CausalLayer::of(f.category),
            f.severity,
            std::cmp::Reverse((f.confidence * 100.0).round() as i64),
            f.evidence.first().map(|e| e.span),
            f.rule,
        )
    };
    // Only errors can be a root cause; a warning never explains a failure.
    let root = findings
        .iter()
        .enumerate()
        .filter(|(_, f)| f.severity <= Severity::Error && f.category != Category::Unknown)
        .min_by_key(|(_, f)| key(f))
        .map(|(i, _)| i)
        .or_else(|| {
            findings
                .iter()
                .enumerate()
                .filter(|(_, f)| f.severity <= Severity::Error)
                .min_by_key(|(_, f)| key(f))
                .map(|(i, _)| i)
        });
    let root_layer = root.map(|i| CausalLayer::of(findings[i].category));
    // Root first, then its consequences (deeper layers), then the rest.
    findings.sort_by_key(|f| {
        let layer = CausalLayer::of(f.category);
        let group = match root_layer {
            Some(r) if layer == r => 0,
            Some(r) if layer > r => 1,
            _ => 2,
        };
        (group, key(f))
    });
    for (i, f) in findings.iter_mut().enumerate() {
        f.id = format!("F{}", i + 1);
    }
    let Some(root_layer) = root_layer else {
        return (findings, None);
    };
    let root_index = 0;
    let (explained, competing): (Vec<String>, Vec<(String, f64)>) = {
        let root = &findings[root_index];
        let mut explained = Vec::new();
        let mut competing = Vec::new();
        for f in findings.iter().skip(1) {
            let layer = CausalLayer::of(f.category);
            let related = shares_entity(root, f);
            // Deeper layers are consequences; a finding of the root's own
            // layer about the same PID, GPU or unit is the same story seen
            // from elsewhere.
            // A generic finding (category unknown) is a fallback: any root of
            // a known category explains it.
            let consequence = (layer > root_layer && layer != CausalLayer::Unknown)
                || (layer == CausalLayer::Unknown && root_layer != CausalLayer::Unknown)
                || (related && layer == root_layer && f.severity >= root.severity);
            if consequence {
                explained.push(f.id.clone());
            } else if layer == root_layer
                && f.severity <= Severity::Error
                && f.category != root.category
            {
                competing.push((f.id.clone(), f.confidence));
            }
        }
        (explained, competing)
    };
    let root = &mut findings[root_index];
    root.explains = explained;
    root.competing = competing;
    let id = root.id.clone();
    (findings, Some(id))
}

/// Two findings are about the same thing when they share a PID, GPU or unit,
/// or cite the same line (a plain log names no PID or unit, yet a finding
/// that cites another's cause line is that cause seen from elsewhere).
fn shares_entity(a: &Finding, b: &Finding) -> bool {
    let (x, y) = (&a.entities, &b.entities);
    x.pids.intersection(&y.pids).next().is_some()
        || x.gpus.intersection(&y.gpus).next().is_some()
        || x.units.intersection(&y.units).next().is_some()
        || a.evidence
            .iter()
            .any(|e| b.evidence.iter().any(|o| o.span == e.span))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(rule: &'static str, category: Category, severity: Severity) -> Finding {
        let mut f = Finding::new(rule, category, severity);
        f.confidence = 0.95;
        f.title = rule.to_owned();
        f
    }

    #[test]
    fn a_gpu_fault_explains_the_runtime_failures_it_causes() {
        // Whatever runtime finding the server's own lines produce, a
        // hardware Xid at the same time is the root and explains it.
        let findings = vec![
            finding(
                "nccl-watchdog-timeout",
                Category::NcclTimeout,
                Severity::Critical,
            ),
            finding(
                "cuda-illegal-memory-access",
                Category::CudaIllegalMemoryAccess,
                Severity::Critical,
            ),
            finding(
                "sglang-watchdog-timeout",
                Category::ServerHang,
                Severity::Critical,
            ),
            finding(
                "nccl-watchdog-timeout",
                Category::ServerException,
                Severity::Critical,
            ),
            finding(
                "systemd-crash-loop",
                Category::UnitCrashLoop,
                Severity::Error,
            ),
            finding("vllm-engine-core-failed", Category::Unknown, Severity::Info),
            finding("xid", Category::XidGpuFellOffBus, Severity::Critical),
        ];
        let (ranked, root) = rank(findings);
        let root = ranked
            .iter()
            .find(|f| Some(&f.id) == root.as_ref())
            .unwrap();
        assert_eq!(root.category, Category::XidGpuFellOffBus);
        assert_eq!(root.explains.len(), 6, "{:?}", root.explains);
    }

    /// A wording class's finding (`symptom-wording`) ranks below every
    /// exact finding of a known category, whatever their layers: a GPU
    /// hang in a stack's words does not outrank CUDA's own error.
    #[test]
    fn a_symptom_ranks_below_every_exact_finding() {
        let mut hang = finding(
            super::super::SYMPTOM_WORDING,
            Category::XidOther,
            Severity::Error,
        );
        hang.confidence = 0.4;
        let oom = finding("known-message", Category::CudaOom, Severity::Error);
        let (ranked, root) = rank(vec![hang, oom]);
        let root = ranked
            .iter()
            .find(|f| Some(&f.id) == root.as_ref())
            .unwrap();
        assert_eq!(root.category, Category::CudaOom);
        assert_eq!(ranked[1].rule, super::super::SYMPTOM_WORDING);
        // Alone, it is the root: it names what nothing else does.
        let alone = finding(
            super::super::SYMPTOM_WORDING,
            Category::PortInUse,
            Severity::Error,
        );
        let (_, root) = rank(vec![alone]);
        assert_eq!(root.as_deref(), Some("F1"));
    }

    #[test]
    fn findings_that_cite_the_same_line_are_one_story() {
        let span = crate::source::Span {
            source: crate::source::SourceId(0),
            line: 8,
        };
        let mut cause = finding(
            "nccl-watchdog-timeout",
            Category::ServerException,
            Severity::Critical,
        );
        cause.evidence(span, "rank 3's exception");
        let mut timeouts = finding(
            "nccl-watchdog-timeout",
            Category::NcclTimeout,
            Severity::Error,
        );
        timeouts.title = "timeouts".to_owned();
        timeouts.evidence(span, "rank 3's exception");
        let (ranked, root) = rank(vec![timeouts, cause]);
        let root = ranked
            .iter()
            .find(|f| Some(&f.id) == root.as_ref())
            .unwrap();
        assert_eq!(root.category, Category::ServerException);
        assert_eq!(root.explains.len(), 1);
        assert!(root.competing.is_empty());
    }
}
