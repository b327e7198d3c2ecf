//! The rule's unit tests: a stated fraction far below SGLang's defaults is
//! the knob at fault; the default alone is not.

use crate::rules::Category;

fn root(text: &str) -> (Category, f64) {
    let analysis = crate::testing::analyze_paste(text);
    let report = analysis.report();
    let f = report.root_cause().expect("a root cause");
    (f.category, f.confidence)
}

/// https://github.com/gpustack/gpustack/issues/3831 (SGLang 0.5.6).
const LOW: &str = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: self.server_args.mem_fraction_static=0.2\n";
/// SGLang 0.5.x at its own default (fixtures/rules/…/pos-0.5.10-foreign-holder).
const DEFAULT: &str = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.88\n";

#[test]
fn a_stated_fraction_far_below_the_defaults_is_the_knob_at_fault() {
    let (category, confidence) = root(LOW);
    assert_eq!(category, Category::MemFractionMisconfigured);
    // Only the headline line: partial evidence, a lower confidence.
    assert!(confidence < 0.85, "{confidence}");
    // Near miss: the default fraction alone says nothing about the knob.
    assert_eq!(root(DEFAULT).0, Category::KvCacheTooSmall);
}
