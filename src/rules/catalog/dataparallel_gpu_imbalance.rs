//! `dataparallel-gpu-imbalance`: PyTorch's DataParallel warned that one of
//! its GPUs has less than 75% of the memory or cores of another, and the
//! job then ran out of GPU memory: the even split overfilled the smaller
//! card, so the mismatched pair is the cause, not the batch alone.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: DataparallelGpuImbalance = DataparallelGpuImbalance;

pub struct DataparallelGpuImbalance;

/// The catalog row (`catalogs/stacks-torch.toml`) of DataParallel's warning.
const ROW: &str = "stacks-torch.dataparallel-gpu-imbalance";

/// The warning's second half, wrapped onto the next line as PyTorch prints
/// it: the larger GPU.
static LARGER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"of the memory or cores of GPU (?P<gpu>[0-9]+)").expect("larger gpu regex")
});

/// Lines after the warning an out-of-memory error may come in and still be
/// the same run's.
const WINDOW: u32 = 400;

static META: RuleMeta = RuleMeta {
    id: "dataparallel-gpu-imbalance",
    category: Category::HeterogeneousGpuMemory,
    severity: Severity::Error,
    summary: "DataParallel spans GPUs of unequal memory and the smaller one ran out of memory",
    // The warning's second line, which names the larger GPU when the
    // message wraps (`has less than 75% of the memory or cores of GPU 0.`).
    anchors: &["of the memory or cores of GPU"],
    doc: r#"
## What it means
`torch.nn.DataParallel` warned when it was built: `There is an imbalance
between your GPUs. You may want to exclude GPU 0 which has less than 75% of
the memory or cores of GPU 1.` The same run then failed with an
out-of-memory error. DataParallel splits every batch evenly over its
`device_ids` (and gathers outputs on the first), so the smaller card fills
first: the pair of unequal GPUs is the cause.

Alone, the warning is only a warning (the job may fit even the smaller
card); `known-message` reports it as such. Under Python 2 the check's
integer division warned about identical cards (mileyan/pseudo_lidar#8):
the GPUs' names settle it.

## Why it happens
A workstation with a display card beside a compute card, or two
generations of GPU in one box, and DataParallel left to use every visible
GPU.

## How to confirm
`nvidia-smi --query-gpu=index,name,memory.total --format=csv`: the GPU the
warning names has much less memory than the other.

## How to fix
Exclude the smaller GPU (`CUDA_VISIBLE_DEVICES` listing the matched cards,
or `device_ids=[…]`), or size the batch for the smallest card.

## Safety
Advice only: a launch setting.
"#,
};

impl Rule for DataparallelGpuImbalance {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let Some((warn, hit)) = incident.known(ROW).next() else {
            return;
        };
        let weak: Option<u32> = hit.get("gpu").and_then(|g| g.parse().ok());
        // The larger GPU: on the warning's line, else on the next.
        let messages = &incident.facts.messages;
        let at = messages.iter().position(|m| m.span == warn.span);
        let larger = at.and_then(|i| {
            messages[i..messages.len().min(i + 2)]
                .iter()
                .filter(|m| m.span.source == warn.span.source)
                .find_map(|m| LARGER.captures(&m.text)?["gpu"].parse::<u32>().ok())
        });
        // An out-of-memory error of the same input after the warning: a
        // line a catalog reads as one, or any error line saying `out of
        // memory` (Thrust's `after cudaLaunch in
        // triple_chevron_launcher::launch(): out of memory`, which no
        // catalog row names): after DataParallel's warning the memory is
        // the GPUs'.
        let after = |m: &crate::model::Message| {
            m.span.source == warn.span.source
                && m.span.line > warn.span.line
                && m.span.line <= warn.span.line.saturating_add(WINDOW)
        };
        let read = incident.known.iter().find_map(|k| {
            let row = k.hit.row?;
            let m = &incident.facts.messages[k.message];
            (after(m) && row.category == Some(Category::CudaOom)).then_some(m)
        });
        let oom = read.or_else(|| {
            messages
                .iter()
                .filter(|m| after(m))
                .find(|m| m.text.to_ascii_lowercase().contains("out of memory"))
        });
        let Some(oom) = oom else {
            return;
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        let weak_text = weak.map_or("one GPU".to_owned(), |g| format!("GPU {g}"));
        let larger_text = larger.map_or("the largest".to_owned(), |g| format!("GPU {g}"));
        f.evidence(
            warn.span,
            format!("DataParallel: {weak_text} has less than 75% of the memory or cores of {larger_text}"),
        );
        f.evidence(oom.span, "then the job ran out of GPU memory");
        f.entities.gpus.extend(weak.into_iter().chain(larger));
        f.condition("DataParallel warned that its GPUs are unequal", true);
        f.condition("an out-of-memory error followed in the same input", true);
        f.chain.push("the job ran out of GPU memory".to_owned());
        f.chain.push(format!(
            "DataParallel splits each batch evenly, so {weak_text}, the smaller card, filled first"
        ));
        f.title = format!("DataParallel spans unequal GPUs: {weak_text} ran out of memory first");
        f.headline = format!(
            "DataParallel was given unequal GPUs ({weak_text} has less than 75% of the memory or cores of {larger_text}) and the job then ran out of GPU memory: the even split overfilled the smaller card."
        );
        f.explanation = "DataParallel replicates the model on every device and splits each batch evenly, gathering on the first; a batch sized for the larger card does not fit the smaller one. Lowering the batch hides it; excluding the smaller card fixes it.".to_owned();
        let keep = larger.map_or("the matched GPUs".to_owned(), |g| format!("GPU {g}"));
        f.actions.push(Action::advice(
            format!("exclude {weak_text} from the job: run it on {keep} only (CUDA_VISIBLE_DEVICES or DataParallel's device_ids)"),
            Some("nvidia-smi --query-gpu=index,name,memory.total --format=csv"),
        ));
        f.confidence = 0.75;
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::{Category, Rule};

    /// The warning as SKKU-ESLAB/ANT#99 shows it; then the out-of-memory
    /// error pytorch/examples#343 shows after the same warning (a reduction
    /// of batch AB's case 2094: that thread's one error line). The warning
    /// alone is no finding of this rule.
    #[test]
    fn the_warning_then_an_oom_blames_the_pair() {
        let warning = "/home/khs/anaconda2/lib/python2.7/site-packages/torch/nn/parallel/data_parallel.py:24: UserWarning:\n\
There is an imbalance between your GPUs. You may want to exclude GPU 2 which\n\
has less than 75% of the memory or cores of GPU 0. You can do so by setting\n\
the device_ids argument to DataParallel, or by setting the CUDA_VISIBLE_DEVICES\n\
environment variable.\n";
        let analysis = crate::testing::analyze_paste(warning);
        let mut out = Vec::new();
        super::RULE.check(&analysis.incident, &mut out);
        assert!(out.is_empty(), "{out:?}");
        let text = format!(
            "{warning}RuntimeError: after cudaLaunch in triple_chevron_launcher::launch(): out of memory\n"
        );
        let analysis = crate::testing::analyze_paste(&text);
        let mut out = Vec::new();
        super::RULE.check(&analysis.incident, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].category, Category::HeterogeneousGpuMemory);
        assert!(out[0].entities.gpus.contains(&2) && out[0].entities.gpus.contains(&0));
    }
}
