//! A model too large for the GPUs it was given: the parameter count its
//! name states (`Qwen1.5-72B-Chat`: 72 billion), at two bytes each (16-bit,
//! no quantization named), over the tensor-parallel size the launch used,
//! above the card's whole capacity. Then no holder covers the shortfall:
//! freeing every other process would still not make room for the weights.

use std::sync::LazyLock;

use regex::Regex;

use super::*;
use crate::rules::support::server::server_cmdlines;
use crate::source::Span;

/// A parameter count in a model's name: `72B`, `1.5B`, `8x7B`, set off by
/// `-`, `_`, `/` or the ends.
static PARAMS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:^|[-_/])(?:(?P<experts>[0-9]+)x)?(?P<b>[0-9]+(?:\.[0-9]+)?)b(?:$|[-_.])")
        .expect("params regex")
});

/// A name that says its weights are not 16-bit: quantized or 8-bit.
static QUANTIZED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)gptq|awq|int4|int8|fp8|w4a16|w8a8|4bit|8bit|gguf|ggml|exl2|bnb|nf4|[-_]q[2-8]")
        .expect("quantized regex")
});

/// 16-bit weights: two bytes per parameter.
const BYTES_PER_PARAM: f64 = 2.0;

/// The model, its weights per GPU, and the launch line that names it.
pub(super) struct Weights {
    pub(super) name: String,
    pub(super) params_b: f64,
    pub(super) per_gpu: u64,
    pub(super) tp: u32,
    pub(super) span: Span,
}

/// The parameter count (billions) a model's name states; `None` for a
/// name that states none or says its weights are quantized.
fn params_b(name: &str) -> Option<f64> {
    let base = name
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(name);
    if QUANTIZED.is_match(base) {
        return None;
    }
    let c = PARAMS.captures(base)?;
    let b: f64 = c["b"].parse().ok()?;
    let experts: f64 = c
        .name("experts")
        .map_or(Ok(1.0), |e| e.as_str().parse())
        .ok()?;
    Some(b * experts)
}

/// The model and tensor-parallel size a launch command states (`python3
/// -m vllm.entrypoints.openai.api_server --model M`, `vllm serve M
/// --tensor-parallel-size 4`); `None` where it splits the model in a way
/// this does not read (a pipeline or a short `-tp`/`-pp` flag).
fn from_command(incident: &Incident) -> Option<(String, Option<u32>, Span)> {
    for (cmd, span) in server_cmdlines(incident, None, Framework::Vllm) {
        let tokens: Vec<&str> = cmd.split_whitespace().collect();
        let split = |t: &&str| {
            t.contains("pipeline-parallel")
                || t.contains("pipeline_parallel")
                || *t == "-tp"
                || *t == "-pp"
        };
        if tokens.iter().any(split) {
            return None;
        }
        let flag = |name: &str| {
            tokens.iter().enumerate().find_map(|(i, t)| {
                let t = t.replace('_', "-");
                let rest = t.strip_prefix(name)?;
                match rest.strip_prefix('=') {
                    Some(v) => Some(v.to_owned()),
                    None if rest.is_empty() => tokens.get(i + 1).map(|v| (*v).to_owned()),
                    None => None,
                }
            })
        };
        let served = tokens
            .iter()
            .position(|t| *t == "serve")
            .and_then(|i| tokens.get(i + 1))
            .filter(|t| !t.starts_with('-'))
            .map(|t| (*t).to_owned());
        let Some(model) = flag("--model").or(served) else {
            continue;
        };
        let tp = match flag("--tensor-parallel-size") {
            Some(v) => Some(v.parse().ok()?),
            None => None,
        };
        return Some((model, tp, span));
    }
    None
}

/// The launched model's 16-bit weights per GPU where they exceed the
/// card's total capacity by themselves.
pub(super) fn too_big(incident: &Incident, oom: &CudaOom) -> Option<Weights> {
    let total = oom.total_bytes?;
    let (name, tp, span) = match launch_args(incident, Framework::Unknown) {
        Some((args, span)) if args.pp_size.unwrap_or(1) <= 1 => (
            args.model_path.or(args.served_model_name)?,
            args.tp_size,
            span,
        ),
        Some(_) => return None,
        None => from_command(incident)?,
    };
    let params_b = params_b(&name)?;
    let tp = tp.unwrap_or(1).max(1);
    let per_gpu = (params_b * 1e9 * BYTES_PER_PARAM / f64::from(tp)) as u64;
    (per_gpu > total).then_some(Weights {
        name,
        params_b,
        per_gpu,
        tp,
        span,
    })
}

#[cfg(test)]
mod tests {
    use super::params_b;

    #[test]
    fn parameter_counts_from_names() {
        // vllm-project/vllm#10533's two models, and a mixture of experts.
        assert_eq!(params_b("/models/Qwen2.5-72B-Instruct"), Some(72.0));
        assert_eq!(params_b("/models/Qwen2.5-72B-Instruct-GPTQ-Int4"), None);
        assert_eq!(params_b("mistralai/Mixtral-8x7B-Instruct-v0.1"), Some(56.0));
        assert_eq!(params_b("Qwen/Qwen1.5-1.8B-Chat"), Some(1.8));
        assert_eq!(params_b("meta-llama/Meta-Llama-3-70B-Instruct-AWQ"), None);
        assert_eq!(params_b("facebook/opt-iml-max-1.3b"), Some(1.3));
        assert_eq!(params_b("gpt2"), None);
        assert_eq!(params_b("bigscience/bloomz"), None);
    }
}
