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

/// One row of `dcgmi nvlink --link-status` (NVIDIA/DCGM `dcgmi/Nvlink.cpp`,
/// `DisplayNvLinkLinkStatus`): a GPU's (`gpuId N:`) or an NVSwitch's
/// (`physicalId N:`) links, one letter each, under the box titled
/// `NvLink Link Status`.
#[derive(Debug, Clone, PartialEq)]
pub struct NvlinkStates {
    /// The box's title row (`|  NvLink Link Status  |`): rows with the same
    /// title are one listing.
    pub title: Span,
    /// The row of letters.
    pub span: Span,
    /// An NVSwitch's row (under `NvSwitches:`), not a GPU's.
    pub switch: bool,
    /// The GPU's DCGM id (its NVML index on a host without MIG) or the
    /// NVSwitch's physical id.
    pub id: u32,
    /// One letter per link as dcgmi prints it (`nvLinkStateToCharacter`):
    /// `U` up, `D` down (a link the GPU has, NVML says inactive), `X`
    /// disabled (DCGM's word for a down link while MIG is on), `_` not
    /// supported (a link the GPU does not have).
    pub states: String,
}

impl NvlinkStates {
    /// How many of its links are in `state` (`'U'`, `'D'`, `'X'`, `'_'`).
    pub fn count(&self, state: char) -> usize {
        self.states.chars().filter(|c| *c == state).count()
    }
}
