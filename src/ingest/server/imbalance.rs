//! SGLang's TP memory-balance check, in one place: the sentence it raises
//! with and the figures it prints. SGLang logs it on its own line and in
//! the exception a child process raises ([`super::sglang`],
//! [`super::traceback`]); both read it here.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::MemoryImbalance;

pub(super) const IMBALANCE_TEXT: &str =
    "The memory capacity is unbalanced. Some GPUs may be occupied by other processes.";

static IMBALANCE_NUMBERS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<label>min_per_gpu_memory|pre_model_load_memory)=(?P<min>[0-9.eE+-]+), local_gpu_memory=(?P<local>[0-9.eE+-]+), local_gpu_memory \* 0\.9=(?P<thr>[0-9.eE+-]+)",
    )
    .expect("imbalance regex")
});

pub(super) fn parse_imbalance(message: &str, exception: Option<String>) -> MemoryImbalance {
    let numbers = IMBALANCE_NUMBERS.captures(message);
    let num = |name| {
        numbers
            .as_ref()
            .and_then(|c| c.name(name))
            .and_then(|m| m.as_str().parse::<f64>().ok())
    };
    MemoryImbalance {
        exception,
        min_label: numbers.as_ref().map(|c| c["label"].to_owned()),
        min_gib: num("min"),
        local_gib: num("local"),
        threshold_gib: num("thr"),
    }
}
