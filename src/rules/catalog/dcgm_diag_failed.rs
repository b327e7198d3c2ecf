//! `dcgm-diag-failed`: a `dcgmi diag` result box shows a test that failed
//! (or warned) on a GPU. The test is named by its catalog row
//! (`dcgm.diag-*`), and the warning DCGM printed under it is read by the
//! catalogs, so that the finding says what failed: a GPU that another
//! process holds (`busy or unavailable`) is not a fault of the GPU.

use crate::catalogs::{Row, catalogs};
use crate::correlate::Incident;
use crate::model::{DiagOutcome, DiagResult};
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: DcgmDiagFailed = DcgmDiagFailed;

pub struct DcgmDiagFailed;

/// The id prefix of the rows that name `dcgmi diag`'s tests.
const TEST_ROWS: &str = "dcgm.diag-";

static META: RuleMeta = RuleMeta {
    id: "dcgm-diag-failed",
    category: Category::XidOther,
    severity: Severity::Error,
    summary: "DCGM's diagnostic (dcgmi diag) failed a test on a GPU: the test, the GPU and DCGM's warning, classified",
    anchors: &[],
    doc: r#"
## What it means
`dcgmi diag` ran its tests and one did not pass on a GPU: `| GPU Memory |
Pass - GPU: 1 |` then `|  | Fail - GPU: 0 |` and `| Warning | GPU 0 … |`
(DCGM 2 and 3), or `| memory | Fail |`, `|  | GPU0: Fail |` and `|
Warning: GPU0 | … |` (DCGM 4), or a deployment check's `| Error | GPU 3
has uncorrectable memory errors and row remappings are pending |`. The
finding names the test (what it checks, by its catalog row), the GPU and
DCGM's warning for it. A `Warn` is reported as a warning; a `Skip` is not
reported (a test that does not apply, as `EUD Test | Skip - All` on a
healthy node).

## Why it happens
What the warning says: memory that does not hold its data, a PCIe link
replaying, a GPU that does not reach its power or clocks (heat, power
brake), a fault under load. A test that could not get the GPU at all
(`cuCtxCreate` … `busy or unavailable`) says another process holds the
GPU, not that the GPU is broken: that warning is read by the CUDA catalog
and the finding is `gpu-memory-held-by-other-process`.

## How to confirm
Run the diagnostic again on that GPU with nothing else on it: `dcgmi diag
-r 2 -i N -v`; `nvidia-smi -q -i N -d ECC,ROW_REMAPPER,PAGE_RETIREMENT,PERFORMANCE`.

## How to fix
A GPU held by another process: stop that process (`nvidia-smi` lists it)
and run the test again. A fault that repeats on the same GPU: drain it,
reset it (pending remaps apply at a reset), and open a hardware case with
the diagnostic's output when it still fails.

## Safety
Advice only: a GPU reset ends every process on it.
"#,
};

impl Rule for DcgmDiagFailed {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let results = &incident.facts.diag_results;
        for r in results {
            if r.outcome == DiagOutcome::Skip {
                continue;
            }
            // DCGM 4 gives a test's overall result and then each GPU's:
            // the GPUs' rows say more.
            let per_gpu = results
                .iter()
                .any(|o| o.test_span == r.test_span && o.gpu.is_some());
            if r.gpu.is_none() && per_gpu {
                continue;
            }
            out.push(finding(incident, r));
        }
    }
}

/// The catalog row that names the test, by the kept line of its row.
fn test_row<'a>(incident: &'a Incident, r: &DiagResult) -> Option<&'a Row> {
    catalogs()
        .rows()
        .filter(|row| row.id.starts_with(TEST_ROWS))
        .find(|row| incident.known(&row.id).any(|(m, _)| m.span == r.test_span))
}

/// The catalog rows DCGM's warning names, read once per result.
fn rows_of(detail: &str) -> Vec<&'static Row> {
    catalogs()
        .hits(detail)
        .into_iter()
        .filter_map(|h| h.row)
        .collect()
}

/// What DCGM's warning is, by the catalogs: the first row with a category.
fn classify(rows: &[&'static Row]) -> Option<&'static Row> {
    rows.iter().copied().find(|row| row.category.is_some())
}

fn finding(incident: &Incident, r: &DiagResult) -> Finding {
    let detail = r.detail.split_whitespace().collect::<Vec<_>>().join(" ");
    let test = test_row(incident, r);
    let rows = rows_of(&detail);
    let known = classify(&rows);
    let busy = known.is_some_and(|k| k.category == Some(Category::GpuMemoryHeldByOtherProcess));
    let category = match known.and_then(|k| k.category) {
        Some(c @ (Category::GpuMemoryHeldByOtherProcess | Category::EccUncorrectable)) => c,
        _ => META.category,
    };
    // Every reason DCGM gives is an NVLink link down: on a PCIe card with
    // no NVLink connected DCGM has reported every link down (DCGM#49), so
    // alone this is not a fault until `nvidia-smi nvlink --status` agrees.
    let links_only = nvlink_down_only(&rows);
    let severity = match r.outcome {
        DiagOutcome::Fail if busy => Severity::Error,
        DiagOutcome::Fail if !links_only => META.severity,
        _ => Severity::Warning,
    };
    let mut f = Finding::new(META.id, category, severity);
    let on = r.gpu.map_or("the GPUs".to_owned(), |g| format!("GPU {g}"));
    // A check's error under its section alone names no test (DCGM 2).
    let check = r.section.as_deref() == Some(r.test.as_str());
    let what = match test {
        Some(row) => format!(
            "{} (`{}`)",
            row.title.trim_start_matches("dcgmi diag: the "),
            r.test
        ),
        None if check => format!("{} check", r.test.to_lowercase()),
        None => format!("test `{}`", r.test),
    };
    let section = r
        .section
        .as_deref()
        .map_or(String::new(), |s| format!(", in its {s} section"));
    cite(&mut f, r, (&what, &section, &on), (&detail, known));
    f.condition(format!("dcgmi diag: {on} {}", r.outcome.word()), true);
    let named = f.condition(
        "DCGM says why (its warning under the result)",
        !detail.is_empty(),
    );
    f.condition(
        "the warning is a known message (the catalogs name it)",
        known.is_some(),
    );
    if links_only {
        f.condition(
            "a link down is confirmed by nvidia-smi (missing: nvidia-smi nvlink --status; on a PCIe card with no NVLink bridge every link reads down, DCGM's known false alarm)",
            false,
        );
    }
    f.title = format!("dcgmi diag: {what} {} on {on}", verb(r.outcome));
    f.headline = if busy {
        format!(
            "DCGM's {what} could not run on {on}: the GPU is busy or unavailable, held by another process; this is not a fault of the GPU."
        )
    } else if named {
        format!("DCGM's {what} {} on {on}: {detail}", verb(r.outcome))
    } else {
        format!("DCGM's {what} {} on {on}.", verb(r.outcome))
    };
    f.explanation = test.map_or(String::new(), |row| row.meaning.clone());
    f.chain
        .push(format!("dcgmi diag: {what} {} on {on}", verb(r.outcome)));
    if named {
        f.chain.push(detail.clone());
    }
    if let Some(g) = r.gpu {
        f.entities.gpus.insert(g);
    }
    advise(&mut f, r.gpu, busy, known);
    f.confidence = if links_only {
        0.3
    } else {
        confidence(&f, 0.5, if busy { 0.75 } else { 0.8 })
    };
    f
}

/// Whether DCGM's warning names NVLink links down (the catalog row
/// `dcgm.nvlink-link-down`, DCGM_FR_NVLINK_DOWN) and no other known
/// message (`rows`, [`rows_of`] the warning).
fn nvlink_down_only(rows: &[&Row]) -> bool {
    const LINK_DOWN: &str = "dcgm.nvlink-link-down";
    rows.iter().any(|r| r.id == LINK_DOWN) && rows.iter().all(|r| r.id == LINK_DOWN)
}

/// Cites the diag result `r` on `f`: the test's row (`what`, in its
/// `section`), the result for `on`, and DCGM's warning (`detail`, the
/// catalog row that names it when one does).
fn cite(
    f: &mut Finding,
    r: &DiagResult,
    (what, section, on): (&str, &str, &str),
    (detail, known): (&str, Option<&Row>),
) {
    if r.detail_spans.first() != Some(&r.test_span) {
        f.evidence_marked(
            r.test_span,
            format!("dcgmi diag: the {what}'s row{section}"),
            r.test.as_str(),
        );
    }
    if r.span != r.test_span {
        f.evidence_marked(
            r.span,
            format!("{on}: {}", r.outcome.word()),
            r.outcome.word(),
        );
    }
    if let Some(first) = r.detail_spans.first() {
        let note = match known {
            Some(k) => format!("DCGM's warning for {on}: {detail} ({})", k.title),
            None => format!("DCGM's warning for {on}: {detail}"),
        };
        f.evidence(*first, note);
        for s in &r.detail_spans[1..] {
            f.evidence(*s, "the warning, continued");
        }
    }
}

fn verb(outcome: DiagOutcome) -> &'static str {
    match outcome {
        DiagOutcome::Fail => "failed",
        DiagOutcome::Warn => "warned",
        DiagOutcome::Skip => "was skipped",
    }
}

fn advise(f: &mut Finding, gpu: Option<u32>, busy: bool, known: Option<&Row>) {
    let i = gpu.map_or(String::new(), |g| format!(" -i {g}"));
    if busy {
        f.actions.push(Action::advice(
            "find the process that holds the GPU and stop it before running the diagnostic again",
            Some(crate::rules::support::COMPUTE_APPS),
        ));
    } else if let Some(fix) = known.and_then(|k| k.fix.as_deref()) {
        f.actions.push(Action::advice(
            fix,
            known.and_then(|k| k.confirm.as_deref()),
        ));
    }
    f.actions.push(Action::advice(
        "run the diagnostic again on that GPU alone, with nothing else on it, and read its warnings",
        Some(&format!("dcgmi diag -r 2{} -v", gpu.map_or(String::new(), |g| format!(" -i {g}")))),
    ));
    if !busy {
        f.actions.push(Action::advice(
            "if it fails again: drain the GPU, reset it (pending row remaps apply at a reset) and open a hardware case with the diagnostic's output",
            Some(&format!("nvidia-smi -q{i} -d ECC,ROW_REMAPPER,PAGE_RETIREMENT,PERFORMANCE")),
        ));
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    const ID: &str = super::META.id;

    /// NVIDIA/go-dcgm#52 (DCGM 3.3.1): GPU 0's memory test could not create
    /// a context, the GPU busy or unavailable.
    const GO_DCGM_52: &str =
        include_str!("../../../fixtures/formats/lines/dcgmi-diag-3.3.1-fail.txt");

    /// stas00/ml-engineering's debug.md: a DCGM 2/3 deployment check's
    /// `Error` row, and a `-r 2` memory failure cut under its header.
    const ML_ENGINEERING: &str =
        include_str!("../../../fixtures/formats/lines/dcgmi-diag-row-remap-thermal.txt");

    #[test]
    fn a_busy_gpu_is_named_held_not_faulty() {
        let f = findings_of(ID, GO_DCGM_52);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].category.name(), "gpu-memory-held-by-other-process");
        assert!(f[0].entities.gpus.contains(&0));
        assert!(
            f[0].headline.contains("busy or unavailable"),
            "{}",
            f[0].headline
        );
        assert!(f[0].title.contains("GPU Memory"), "{}", f[0].title);
    }

    #[test]
    fn an_error_row_and_a_headerless_failure_are_read() {
        let f = findings_of(ID, ML_ENGINEERING);
        assert_eq!(f.len(), 2, "{f:#?}");
        assert!(f[0].entities.gpus.contains(&3));
        assert!(
            f[0].headline.contains("row remappings are pending"),
            "{}",
            f[0].headline
        );
        assert!(f[1].entities.gpus.contains(&0));
        assert!(
            f[1].headline
                .contains("Thermal violations totaling 13.3 seconds started"),
            "{}",
            f[1].headline
        );
        assert_eq!(f[1].category.name(), "xid-other");
    }

    /// DCGM 4's layout: NVIDIA/DCGM#253's box, then a `pcie` row that
    /// warns on GPU 1 and skips GPU 0, assembled (not copied) from
    /// `Diag::HelperDisplayEntityResults` and dcgm_errors.h's
    /// `DCGM_FR_PCI_REPLAY_RATE_MSG`: a warning stays below an error, a skip
    /// is not reported, and a passing box is clean.
    #[test]
    fn dcgm4_warn_is_a_warning_a_skip_nothing_and_a_pass_clean() {
        let head = include_str!("../../../fixtures/formats/lines/dcgmi-diag-4.2.3.txt");
        assert!(findings_of(ID, head).is_empty());
        let warn = format!(
            "{head}| pcie                      | Warn                                           |\n\
             |                           | GPU0: Skip                                     |\n\
             |                           | GPU1: Warn                                     |\n\
             | Warning: GPU1             | Detected more than 8 PCIe replays per minute   |\n\
             |                           | for GPU 1 : 13                                 |\n"
        );
        let f = findings_of(ID, &warn);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity.name(), "warning");
        assert_eq!(f[0].entities.gpus.iter().copied().collect::<Vec<_>>(), [1]);
        assert!(
            f[0].headline
                .contains("8 PCIe replays per minute for GPU 1"),
            "{}",
            f[0].headline
        );
    }

    /// DCGM 2/3's layout when a test fails as a whole and its warning names
    /// the GPU (`| Diagnostic | Fail |`, `| Warning | GPU 2 … |`; assembled
    /// from dcgmi/Diag.cpp's stencil and `DCGM_FR_THERMAL_VIOLATIONS_MSG`,
    /// not copied): the GPU of the warning is the one that failed.
    #[test]
    fn a_whole_test_failure_takes_the_gpu_its_warning_names() {
        let text = "+-----  Hardware  ----------+------------------------------------------------+\n\
             | Diagnostic                | Fail                                           |\n\
             | Warning                   | GPU 2 There were thermal violations totaling   |\n\
             |                           | 4.2 seconds for GPU 2                          |\n";
        let f = findings_of(ID, text);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].entities.gpus.iter().copied().collect::<Vec<_>>(), [2]);
        assert!(f[0].headline.contains("4.2 seconds"), "{}", f[0].headline);
    }

    /// A DCGM 3 deployment check that finds a page retirement pending
    /// (`| Page Retirement/Row Remap | Fail |` and its warning, assembled
    /// from dcgmi/Diag.cpp's stencil and dcgm_errors.h's
    /// `DCGM_FR_PENDING_PAGE_RETIREMENTS_MSG`, not copied): the warning,
    /// joined across its rows, is read by the catalog as an ECC fault.
    /// DCGM 2.4.6 failing its PCIe test on an A100 with no NVLink, every
    /// reason an NVLink link down (NVIDIA/DCGM#49, fixtures/real/863,
    /// its first rows): a warning to check with nvidia-smi,
    /// not a fault; a link down beside another reason stays an error.
    #[test]
    fn every_link_down_alone_is_a_warning_to_check() {
        let box_ = "+-----  Integration  -------+------------------------------------------------+\n\
| PCIe                      | Fail - All                                     |\n\
| Warning                   | GPU 0GPU 0's NvLink link 0 is currently down   |\n\
|                           | Run a field diagnostic on the GPU., GPU 0GPU   |\n\
|                           | 0's NvLink link 1 is currently down Run a fie  |\n\
|                           | ld diagnostic on the GPU., GPU 0GPU 0's NvLin  |\n\
|                           | k link 2 is currently down Run a field diagno  |\n\
|                           | stic on the GPU., GPU 0GPU 0's NvLink link 3   |\n";
        let f = findings_of(ID, box_);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].severity, crate::rules::Severity::Warning);
        assert!(f[0].confidence < 0.5, "{}", f[0].confidence);
        assert!(
            f[0].conditions
                .iter()
                .any(|c| c.text.contains("nvlink --status") && !c.met)
        );
        assert!(super::nvlink_down_only(&super::rows_of(
            "GPU 0's NvLink link 0 is currently down Run a field diagnostic on the GPU."
        )));
        assert!(!super::nvlink_down_only(&super::rows_of(
            "GPU 0's NvLink link 0 is currently down, GPU 0 has uncorrectable memory errors and row remappings are pending"
        )));
        assert!(!super::nvlink_down_only(&super::rows_of(
            "Run a field diagnostic on the GPU."
        )));
    }

    #[test]
    fn a_pending_page_retirement_is_an_ecc_fault() {
        let text = "|-----  Deployment  --------+------------------------------------------------|\n\
             | Page Retirement/Row Remap | Fail                                           |\n\
             | Warning                   | GPU 0 A pending retired page has been detecte  |\n\
             |                           | d in GPU 0.                                    |\n";
        let f = findings_of(ID, text);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].category.name(), "ecc-uncorrectable");
        assert!(f[0].title.contains("deployment checks"), "{}", f[0].title);
        assert_eq!(f[0].entities.gpus.iter().copied().collect::<Vec<_>>(), [0]);
    }
}
