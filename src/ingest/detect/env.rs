//! Detection of environment reports: `python -m torch.utils.collect_env`
//! and vLLM's `collect_env.py`.

use super::{Class, re};
use crate::ingest::Format;

re!(
    COLLECT_ENV,
    r"^(?:Collecting environment information\.\.\.|PyTorch version: \S+|Is debug build: (?:No|Yes|False|True)|CUDA used to build PyTorch: \S+|ROCM used to build PyTorch: \S+|Is CUDA available: (?:No|Yes|False|True)|Nvidia driver version: .+|GPU models and configuration:.*|Versions of relevant libraries:|vLLM Version: \S+)\s*$"
);

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    // Each of the report's lines starts with one of these words: a line
    // of another format pays byte tests, not the regex.
    const FIRST: [&str; 9] = [
        "Collecting environment information",
        "PyTorch version: ",
        "Is ",
        "CUDA used to build PyTorch: ",
        "ROCM used to build PyTorch: ",
        "Nvidia driver version: ",
        "GPU models and configuration:",
        "Versions of relevant libraries:",
        "vLLM Version: ",
    ];
    if FIRST.iter().any(|w| line.starts_with(w)) && COLLECT_ENV.is_match(line) {
        return Some(if current == Some(Format::TorchCollectEnv) {
            Class::Continue
        } else {
            Class::Strong(Format::TorchCollectEnv, "collect_env report entry")
        });
    }
    // Its other lines (`Key: value`, `GPU 1: …`, `[pip3] …`) continue the
    // report unless another format claims them: a traceback pasted under
    // the report is still a traceback.
    None
}
