//! A result of DCGM's diagnostic (`dcgmi diag`) that is not a pass: which
//! test, on which GPU, and the text DCGM printed under it.

use crate::source::Span;

/// How a `dcgmi diag` test ended on a GPU (DCGM's `dcgmDiagResult_t` as
/// dcgmi prints it: `Fail`, `Warn`, `Skip`; a pass is not recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagOutcome {
    Fail,
    Warn,
    Skip,
}

impl DiagOutcome {
    /// The word dcgmi prints.
    pub fn word(self) -> &'static str {
        match self {
            DiagOutcome::Fail => "Fail",
            DiagOutcome::Warn => "Warn",
            DiagOutcome::Skip => "Skip",
        }
    }
}

/// One test's result on one GPU (or on the whole group, when the row names
/// none), with the warning DCGM printed for it.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagResult {
    /// The test as the box names it (`GPU Memory`, `memory`, `pcie`).
    pub test: String,
    /// The row that names the test.
    pub test_span: Span,
    /// The box's section over the test (`Deployment`, `Hardware`, …).
    pub section: Option<String>,
    pub gpu: Option<u32>,
    pub outcome: DiagOutcome,
    /// The row that gives this result (`|  | Fail - GPU: 0 |`, `| | GPU0:
    /// Fail |`, or the test's own row).
    pub span: Span,
    /// DCGM's warning for this GPU, its lines joined as DCGM cut them
    /// (the last piece's padding kept: read it trimmed).
    pub detail: String,
    pub detail_spans: Vec<Span>,
}
