//! `unsupported-hardware`: the GPU is too old (or too new) for the build or
//! a kernel the server uses.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: UnsupportedHardware = UnsupportedHardware;

pub struct UnsupportedHardware;

static UNSUPPORTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        no\x20kernel\x20image\x20is\x20available\x20for\x20execution\x20on\x20the\x20device
        | (?:is\x20only\x20supported\x20on\x20GPUs\x20with\x20compute\x20capability\x20of\x20at\x20least\x20(?P<need>[0-9]+\.[0-9]+)).*?compute\x20capability\x20(?:of\x20)?(?P<have>[0-9]+\.[0-9]+)
        | FlashAttention\x20only\x20supports\x20(?:Ampere|Hopper|Turing)\x20GPUs\x20or\x20newer
        | with\x20CUDA\x20capability\x20sm_(?P<sm>[0-9]+)\x20is\x20not\x20compatible\x20with\x20the\x20current\x20PyTorch\x20installation
        | (?:GPU|device)\x20compute\x20capability\x20(?P<cc>[0-9]+\.[0-9]+)\x20(?:is\x20)?(?:not\x20supported|is\x20below)",
    )
    .expect("unsupported regex")
});

static META: RuleMeta = RuleMeta {
    id: "unsupported-hardware",
    category: Category::UnsupportedHardware,
    severity: Severity::Critical,
    summary: "the GPU's architecture is not supported by the build or a kernel the server needs",
    anchors: &[
        "no kernel image is available",
        "compute capability",
        "FlashAttention only supports",
        "is not compatible with the current PyTorch installation",
    ],
    doc: r#"
## What it means
The GPU's compute capability is outside what the installed build supports:
`no kernel image is available for execution on the device`, `Bfloat16 is
only supported on GPUs with compute capability of at least 8.0`, `GPU with
CUDA capability sm_120 is not compatible with the current PyTorch
installation`.

## Why it happens
An old GPU (T4, V100) with a feature that needs Ampere or newer (bf16,
FlashAttention 2, FP8), or a new GPU (Blackwell, sm_100/sm_120) with a build
that predates it.

## How to confirm
`nvidia-smi --query-gpu=name,compute_cap --format=csv` against the build's
supported architectures (`torch.cuda.get_arch_list()`).

## How to fix
Use a build that includes the GPU's architecture, or avoid the feature
(`--dtype float16` instead of bfloat16, another attention backend).

## Safety
Advice only.
"#,
};

impl Rule for UnsupportedHardware {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let hits: Vec<_> = matches(incident, &UNSUPPORTED).collect();
        if hits.is_empty() {
            return;
        }
        let mut f = Finding::new(META.id, META.category, META.severity);
        for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(3) {
            f.evidence(m.span, format!("the build does not run on this GPU ({n}x)"));
        }
        let detail =
            hits.iter().find_map(
                |(_, c)| match (c.name("need"), c.name("have"), c.name("sm")) {
                    (Some(need), Some(have), _) => Some(format!(
                        "needs compute capability {}, the GPU has {}",
                        need.as_str(),
                        have.as_str()
                    )),
                    (_, _, Some(sm)) => Some(format!(
                        "the GPU is sm_{}, which the installed PyTorch was not built for",
                        sm.as_str()
                    )),
                    _ => None,
                },
            );
        let gpu = incident.gpus.first().and_then(|g| g.name.clone());
        f.condition("the build reported an unsupported GPU architecture", true);
        f.condition("nvidia-smi names the GPU model", gpu.is_some());
        f.title = match &detail {
            Some(d) => format!("the GPU is not supported: {d}"),
            None => "the build has no kernels for this GPU's architecture".to_owned(),
        };
        f.headline = format!(
            "The server cannot run on {}: {}.",
            gpu.as_deref().unwrap_or("this GPU"),
            detail
                .as_deref()
                .unwrap_or("the installed build has no kernels for its architecture")
        );
        f.chain
            .push("the server failed on its first GPU kernel".to_owned());
        f.chain.push(f.title.clone());
        f.actions.push(Action::advice(
            "compare the GPU's compute capability with what the build supports",
            Some("nvidia-smi --query-gpu=name,compute_cap --format=csv; python3 -c 'import torch; print(torch.cuda.get_arch_list())'"),
        ));
        f.actions.push(Action::advice(
            "install a build that includes this architecture, or avoid the feature (for example --dtype float16 instead of bfloat16)",
            None,
        ));
        f.confidence = confidence(&f, 0.8, 0.95);
        out.push(f);
    }
}
