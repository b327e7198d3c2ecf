//! The server's own memory fraction set at or near the whole GPU: vLLM's
//! `--gpu-memory-utilization` (`--gpu_memory_utilization 1`,
//! OpenBMB/MiniCPM-V#640) or SGLang's `--mem-fraction-static`, read from
//! the command line as printed (a typed launch, a `ps` row, a unit's
//! `ExecStart=`) or from the arguments the server logs. With the OOM in the
//! server's own allocations, that fraction is the cause: nothing was left
//! for activations, CUDA graphs or a vision encoder's profile run.

use super::*;
use crate::rules::support::server::printed_flag;
use crate::source::Span;

/// A static fraction at or above this leaves no headroom: vLLM's default is
/// 0.9 and SGLang's at most 0.88; the maintainers advise 0.85–0.9.
const NO_HEADROOM: f64 = 0.95;

/// The fraction lowered to this, the value the advice names.
const ADVISED: &str = "0.90";

/// The fraction that leaves no headroom, as the inputs state it.
pub(super) struct Knob {
    /// As printed: `--gpu_memory_utilization 1`, `gpu_memory_utilization=1.0`.
    printed: String,
    value: f64,
    span: Span,
    flag: &'static str,
}

impl Analysis<'_> {
    /// The server's memory fraction when it is at or near the whole GPU.
    pub(super) fn fraction_knob(&self) -> Option<Knob> {
        let knobs = [
            (
                Framework::Vllm,
                "--gpu-memory-utilization",
                "gpu_memory_utilization",
            ),
            (
                Framework::Sglang,
                "--mem-fraction-static",
                "mem_fraction_static",
            ),
        ];
        for (framework, flag, name) in knobs {
            if !matches!(self.event.framework, Framework::Unknown)
                && self.event.framework != framework
            {
                continue;
            }
            let typed = printed_flag(self.incident, None, framework, flag).and_then(|p| {
                let value = p.value.parse::<f64>().ok()?;
                Some(Knob {
                    printed: p.printed,
                    value,
                    span: p.span,
                    flag,
                })
            });
            let logged = || {
                let (args, span) = launch_args(self.incident, framework)?;
                let value = match framework {
                    Framework::Sglang => args.mem_fraction_static?,
                    _ => args.gpu_memory_utilization?,
                };
                Some(Knob {
                    printed: format!("{name}={value}"),
                    value,
                    span,
                    flag,
                })
            };
            if let Some(k) = typed.or_else(logged)
                && (NO_HEADROOM..=1.0).contains(&k.value)
            {
                return Some(k);
            }
        }
        None
    }

    /// The finding when the fraction is the cause: its category, the line
    /// that sets it, and the flag lowered.
    pub(super) fn explain_knob(&self, f: &mut Finding, who: &str, knob: &Knob) {
        let gpu_text = self
            .oom
            .gpu
            .map_or("the GPU".to_owned(), |g| format!("GPU {g}"));
        let share = knob.value * 100.0;
        f.category = Category::MemFractionMisconfigured;
        f.evidence(
            knob.span,
            format!(
                "the server was started with {}: {share:.0}% of the GPU for weights and KV cache, no headroom",
                knob.printed
            ),
        );
        f.condition(
            format!(
                "the server's memory fraction ({}) leaves no headroom",
                knob.printed
            ),
            true,
        );
        f.chain.push(format!(
            "{} gives the server {share:.0}% of {gpu_text} up front: nothing is left for activations, CUDA graphs or a profile run",
            knob.printed
        ));
        f.title = format!(
            "CUDA out of memory on {gpu_text}: started with {}",
            knob.printed
        );
        f.headline = format!(
            "{who} ran out of GPU memory because it was started with {}: its static share of {gpu_text} leaves no headroom for the next allocation. Lower it to {ADVISED} (0.85 if it fails again).",
            knob.printed
        );
        f.explanation = "vLLM's --gpu-memory-utilization and SGLang's --mem-fraction-static are the share of the GPU's total memory the server takes up front for weights and KV cache; the CUDA context, activations, CUDA graphs and a multimodal model's profile run need memory beyond it. At or near 1 there is none.".to_owned();
        let action = crate::rules::support::server::flag_action(
            self.incident,
            f,
            None,
            knob.flag,
            ADVISED,
            format!("{} leaves no headroom", knob.printed),
            [knob.span, self.event.span],
        );
        f.actions.push(action);
    }
}
