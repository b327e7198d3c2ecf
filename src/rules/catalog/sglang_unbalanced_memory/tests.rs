//! The rule's unit tests: rank lists, nominal capacities, and mixed GPU
//! models read from `check_env`.

use super::*;

#[test]
fn rank_lists_are_compact() {
    let r = |v: &[u32]| rank_ranges(&v.iter().copied().collect(), "TP");
    assert_eq!(r(&[1, 2, 3, 4, 5, 6, 7]), "TP1-TP7");
    assert_eq!(r(&[0, 1, 3]), "TP0, TP1, TP3");
    assert_eq!(r(&[1]), "TP1");
}

#[test]
fn nominal_capacities_come_from_the_name() {
    assert_eq!(nominal_mib("NVIDIA GeForce RTX 3090"), Some(24 * 1024));
    assert_eq!(nominal_mib("NVIDIA GeForce RTX 5090"), Some(32 * 1024));
    assert_eq!(nominal_mib("NVIDIA GeForce RTX 3090 Ti"), Some(24 * 1024));
    assert_eq!(nominal_mib("NVIDIA H100 80GB HBM3"), Some(80 * 1024));
    assert_eq!(nominal_mib("NVIDIA A100-SXM4-40GB"), Some(40 * 1024));
    assert_eq!(nominal_mib("NVIDIA L40S"), Some(48 * 1024));
    assert_eq!(nominal_mib("NVIDIA L4"), Some(24 * 1024));
    // Sold in several sizes, and not stated: unknown.
    assert_eq!(nominal_mib("NVIDIA A100"), None);
    assert_eq!(nominal_mib("Tesla V100-PCIE"), None);
}

#[test]
fn mib_has_thousands_separators() {
    assert_eq!(mib(Some(55286)), "55,286 MiB");
    assert_eq!(mib(Some(512)), "512 MiB");
    assert_eq!(mib(Some(143771)), "143,771 MiB");
}

mod mixed_models {
    use crate::rules::Category;

    const ERROR: &str = "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=23.16046142578125, local_gpu_memory=30.41015625, local_gpu_memory * 0.9=27.369140625";
    const CHECK_ENV: &str = "Python: 3.10.12 (main, Feb  4 2025, 14:57:36) [GCC 11.4.0]\nCUDA available: True\nGPU 0,1,3,4: NVIDIA GeForce RTX 3090\nGPU 2: NVIDIA GeForce RTX 5090\nsglang: 0.4.6.post2\n";

    fn root(text: &str) -> (Category, usize) {
        let a = crate::testing::analyze_paste(text);
        let report = a.report();
        let f = report.root_cause().expect("a root cause");
        let steps = f
            .actions
            .iter()
            .filter(|x| !matches!(x.kind, crate::rules::ActionKind::Advice { .. }))
            .count();
        (f.category, steps)
    }

    #[test]
    fn check_env_model_names_explain_the_imbalance_with_advice_only() {
        let text = format!(
            "[2025-04-13 10:02:11 TP0] Scheduler hit an exception: Traceback (most recent call last):\n  File \"/s/python/sglang/srt/model_executor/model_runner.py\", line 230, in init_torch_distributed\n    raise ValueError(\n{ERROR}\n\n{CHECK_ENV}"
        );
        assert_eq!(root(&text), (Category::HeterogeneousGpuMemory, 0));
    }

    #[test]
    #[ignore = "waits on ingest-lines: the error line pasted alone above check_env must reach the server parser"]
    fn the_bare_error_line_answers_the_same() {
        assert_eq!(
            root(&format!("{ERROR}\n\n{CHECK_ENV}")),
            (Category::HeterogeneousGpuMemory, 0)
        );
    }
}
