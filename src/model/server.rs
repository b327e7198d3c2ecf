//! Events a model server (SGLang, vLLM) reports about itself.

use std::fmt;

use super::Timestamp;
use crate::source::Span;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Framework {
    Sglang,
}

impl Framework {
    pub fn name(self) -> &'static str {
        match self {
            Framework::Sglang => "SGLang",
        }
    }
}

/// The parallel ranks in a log prefix such as `[… DP0 TP3]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct RankTag {
    pub dp: Option<u32>,
    pub pp: Option<u32>,
    pub tp: Option<u32>,
    pub ep: Option<u32>,
}

impl fmt::Display for RankTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            ("DP", self.dp),
            ("PP", self.pp),
            ("TP", self.tp),
            ("EP", self.ep),
        ];
        let mut first = true;
        for (name, value) in parts {
            if let Some(v) = value {
                if !first {
                    f.write_str(" ")?;
                }
                write!(f, "{name}{v}")?;
                first = false;
            }
        }
        Ok(())
    }
}

/// The launch configuration a server logs at start-up (`server_args=…`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerArgs {
    pub model_path: Option<String>,
    pub tp_size: Option<u32>,
    pub pp_size: Option<u32>,
    pub dp_size: Option<u32>,
    pub base_gpu_id: Option<u32>,
    pub gpu_id_step: Option<u32>,
    pub mem_fraction_static: Option<f64>,
    pub port: Option<u32>,
}

/// SGLang's TP memory balance check: `min < 0.9 * local`, all in GiB.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryImbalance {
    /// `ValueError` (≤ 0.5.6), `RuntimeError` (≥ 0.5.7), `None` when logged
    /// as a warning because the check was disabled.
    pub exception: Option<String>,
    /// `min_per_gpu_memory` (≤ 0.5.9) or `pre_model_load_memory` (≥ 0.5.10);
    /// `None` in 0.3 – 0.4.3, which printed no numbers.
    pub min_label: Option<String>,
    pub min_gib: Option<f64>,
    pub local_gib: Option<f64>,
    pub threshold_gib: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ServerEventKind {
    Args(ServerArgs),
    MemoryImbalance(MemoryImbalance),
    /// `Scheduler hit an exception: Traceback …` and its siblings.
    ChildException {
        component: String,
    },
    /// `Received sigquit from a child process.`: the main process is about to
    /// SIGKILL its process tree, itself included.
    SigquitFromChild,
    /// `The server is fired up and ready to roll!`
    Ready,
    /// The closing line of a traceback that no more specific event describes.
    Exception {
        name: String,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerEvent {
    pub framework: Framework,
    pub kind: ServerEventKind,
    pub rank: Option<RankTag>,
    pub time: Option<Timestamp>,
    /// The writer's PID when an outer layer (the journal) recorded it.
    pub pid: Option<u32>,
    /// The unit of the writer when an outer layer recorded it.
    pub unit: Option<String>,
    pub span: Span,
}
