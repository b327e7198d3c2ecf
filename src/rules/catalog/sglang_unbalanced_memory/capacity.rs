//! Mixed GPU sizes: GPUs of different models (or sizes) in one
//! tensor-parallel group, their capacities from the captures or, failing
//! that, from the model's name, and the advice to group identical GPUs.

use super::*;

impl<'a> Analysis<'a> {
    pub(super) fn explain_heterogeneous(&self, f: &mut Finding, small: &[&Gpu], large: &[&Gpu]) {
        let nominal = self.incident.gpus.is_empty();
        self.cite_gpus(f, small, large, nominal);
        let describe = |gs: &[&Gpu]| {
            gs.iter()
                .map(|g| {
                    format!(
                        "GPU {} ({}, {})",
                        g.index,
                        g.name.as_deref().unwrap_or("unknown model"),
                        mib(g.memory_total_mib)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let small_total = small
            .iter()
            .filter_map(|g| g.memory_total_mib)
            .min()
            .unwrap_or(0);
        let large_total = large
            .iter()
            .filter_map(|g| g.memory_total_mib)
            .max()
            .unwrap_or(0);
        let gap = large_total.saturating_sub(small_total) as f64 / MIB_PER_GIB;
        f.chain.push(format!(
            "the group mixes GPUs of different capacity: {} vs {}",
            describe(small),
            describe(large)
        ));
        let target = self.target_name();
        let matches = self
            .deficit_gib()
            .map(|d| (d - gap).abs() <= RECONCILE_TOLERANCE_GIB + 0.02 * gap);
        f.condition(
            if nominal {
                "the GPUs of the group are different models (sglang.check_env), of different nominal capacity"
            } else {
                "the GPUs of the group differ in memory.total"
            },
            true,
        );
        if nominal {
            f.condition("nvidia-smi confirms the capacities (missing: nvidia-smi --query-gpu=index,name,memory.total --format=csv)", false);
        }
        f.condition(
            match self.deficit_gib() {
                Some(d) => format!("the deficit {d:.2} GiB matches the capacity gap {gap:.2} GiB"),
                None => "the deficit can be compared with the capacity gap".to_owned(),
            },
            matches == Some(true),
        );
        f.condition(
            "no other process holds memory on the group's GPUs",
            self.group()
                .iter()
                .all(|g| self.holders.on(g.index).is_empty()),
        );
        let small_ranks: Vec<u32> = self
            .rank_gpus
            .iter()
            .filter(|(_, g)| small.iter().any(|s| s.index == **g))
            .map(|(r, _)| *r)
            .collect();
        if !small_ranks.is_empty() && !self.failing_ranks.is_empty() {
            f.condition(
                "only the ranks on the larger GPUs raised",
                small_ranks.iter().all(|r| !self.failing_ranks.contains(r)),
            );
        }
        f.title = "the tensor-parallel group mixes GPUs of different capacity".to_owned();
        f.headline = format!(
            "{target} failed SGLang's memory balance check because its tensor-parallel group mixes GPUs of different capacity ({:.0} GiB vs {:.0} GiB); no process is to blame.",
            small_total as f64 / MIB_PER_GIB,
            large_total as f64 / MIB_PER_GIB
        );
        f.explanation = format!(
            "Every rank sizes its KV cache by the smallest GPU, so SGLang refuses a group whose free memory differs by more than 10 %. \
             The capacity gap between the models is {gap:.2} GiB. Killing processes will not help: the error repeats on every restart."
        );
        let by_model = models(small.iter().chain(large).copied());
        f.actions.push(Action::advice(
            format!(
                "run each tensor-parallel group on GPUs of one model ({by_model}), e.g. restrict the server with CUDA_VISIBLE_DEVICES and set --tp to the number of identical GPUs"
            ),
            Some("nvidia-smi --query-gpu=index,name,memory.total --format=csv"),
        ));
    }

    /// Cites each GPU of the group and adds it to the finding's entities:
    /// the model listing once when only names are known (`nominal`), else
    /// each GPU's own evidence; returns nothing.
    fn cite_gpus(&self, f: &mut Finding, small: &[&Gpu], large: &[&Gpu], nominal: bool) {
        for g in small.iter().chain(large) {
            f.entities.gpus.insert(g.index);
            if nominal {
                // Only the model names are known: cite the listing once per
                // model with its nominal size.
                if let Some(span) = g.spans.first() {
                    f.evidence_once(
                        *span,
                        format!(
                            "sglang.check_env lists the GPUs' models: {}",
                            models(small.iter().chain(large).copied())
                        ),
                    );
                }
            } else {
                self.gpu_evidence(f, g);
            }
        }
    }
}

/// A GPU model's memory (MiB) from its name: the size it states (`H100
/// 80GB HBM3`, `A100-SXM4-40GB`), else the model's only size. `None` for
/// models sold with several sizes or unknown here.
pub(super) fn nominal_mib(name: &str) -> Option<u64> {
    static STATED: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?i)\b([0-9]{1,3})\s*GB\b").expect("stated size regex"));
    if let Some(c) = STATED.captures(name) {
        return c[1].parse::<u64>().ok().map(|gb| gb * 1024);
    }
    // Most specific first: `RTX 3080 Ti` before `RTX 3080`, `L40S` before `L4`.
    const MODELS: &[(&str, u64)] = &[
        ("RTX 5090", 32),
        ("RTX 5080", 16),
        ("RTX 4090", 24),
        ("RTX 4080", 16),
        ("RTX 3090", 24),
        ("RTX 3080 Ti", 12),
        ("RTX A6000", 48),
        ("RTX 6000 Ada", 48),
        ("H200", 141),
        ("H100", 80),
        ("H800", 80),
        ("L40S", 48),
        ("L40", 48),
        ("L4", 24),
        ("A10G", 24),
        ("A40", 48),
        ("A30", 24),
        ("T4", 16),
    ];
    let words: Vec<&str> = name.split_whitespace().collect();
    MODELS
        .iter()
        .find(|(model, _)| {
            let parts: Vec<&str> = model.split(' ').collect();
            words.windows(parts.len()).any(|w| w == parts.as_slice())
        })
        .map(|(_, gb)| gb * 1024)
}

pub(super) fn models<'g>(gpus: impl Iterator<Item = &'g Gpu>) -> String {
    let mut by_name: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for g in gpus {
        by_name
            .entry(g.name.as_deref().unwrap_or("unknown"))
            .or_default()
            .push(g.index);
    }
    by_name
        .iter()
        .map(|(name, idx)| {
            format!(
                "{name}: GPU {}",
                idx.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
