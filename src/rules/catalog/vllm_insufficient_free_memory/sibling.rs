//! A sibling stage of the same multi-stage deployment (vllm-omni's
//! `[Stage-1]` beside the refusing `[Stage-0]`) that loaded its model on the
//! GPU: the memory in the way is the deployment's own, and the refusing
//! stage's fraction is what does not fit beside it.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::source::Span;

/// The stage tag vllm-omni puts before a stage's lines (`[Stage-0] ERROR`).
static STAGE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[Stage-(?P<n>[0-9]+)\]").expect("stage regex"));

/// vLLM's and vllm-omni's model runners: `Model loading took 26.4738 GiB
/// and 13.178609 seconds` (vllm/v1/worker/gpu_model_runner.py,
/// vllm_omni/diffusion/worker/diffusion_model_runner.py).
static LOADED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Model loading took (?P<gib>[0-9]+(?:\.[0-9]+)?) GiB").expect("loaded regex")
});

/// The share of the memory in use the sibling's weights must account for
/// to be the memory in the way (the rest: its CUDA context and buffers).
const SIBLING_SHARE: f64 = 0.75;

/// A sibling stage's model load: its stage, its GiB and the line.
pub(super) struct Sibling {
    pub(super) stage: String,
    pub(super) gib: f64,
    pub(super) span: Span,
}

/// The stage tag in a line's text.
fn stage_of(text: &str) -> Option<String> {
    STAGE.captures(text).map(|c| c["n"].to_owned())
}

/// The sibling stage whose model load accounts for most of `used` GiB on
/// the GPU the refusing line `at` (with text `text`) measured: another
/// stage tag than the refusal's, its weights at most `used` and at least
/// three quarters of it. `None` where the refusal carries no stage tag (a
/// second run of one server is another story: a leftover, not a sibling).
pub(super) fn sibling(incident: &Incident, text: &str, at: Span, used: f64) -> Option<Sibling> {
    let own = stage_of(text)?;
    incident
        .facts
        .messages
        .iter()
        .filter(|m| m.span != at)
        .filter_map(|m| {
            let stage = stage_of(&m.text).filter(|s| *s != own)?;
            let gib: f64 = LOADED.captures(&m.text)?["gib"].parse().ok()?;
            (gib <= used && gib >= used * SIBLING_SHARE).then_some(Sibling {
                stage,
                gib,
                span: m.span,
            })
        })
        .max_by(|a, b| a.gib.total_cmp(&b.gib))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_tags_and_load_lines() {
        // vllm-project/vllm-omni#2032 (BAGEL's DiT stage on an H100 in CI).
        let load = "INFO 03-20 04:32:13 [diffusion_model_runner.py:134] Model loading took 26.4738 GiB and 8.534754 seconds";
        assert_eq!(&LOADED.captures(load).unwrap()["gib"], "26.4738");
        assert_eq!(
            stage_of(
                "(Worker pid=322179) [Stage-1] ERROR 04-24 20:16:15 [multiproc_executor.py:857]"
            ),
            Some("1".to_owned())
        );
        assert_eq!(stage_of(load), None);
    }
}
