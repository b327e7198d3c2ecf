//! The result box of DCGM's diagnostic, `dcgmi diag` (NVIDIA/DCGM
//! `dcgmi/Diag.cpp`: `DIAG_HEADER`, the section rules `DIAG_DEPLOYMENT`,
//! `DIAG_HARDWARE`, `DIAG_INTEGRATION`, `DIAG_STRESS`, and the `DIAG_DATA`
//! stencil every row is printed through), in the layouts of its versions:
//!
//! - DCGM 2 and 3: a test's row gives its result for the GPUs that share it
//!   (`| GPU Memory | Pass - GPUs: 1, 2 |`, `|  | Fail - GPU: 0 |`, `Pass -
//!   All`), then `| Warning | GPU 0 <message> |` and `| Info | GPU 1 … |`
//!   rows, a deployment check's `| Error | GPU 3 has … |`;
//! - DCGM 4: the test's row gives its overall result (`| memory | Fail |`),
//!   then one row per GPU (`|  | GPU0: Fail |`), each followed by its
//!   `| Warning: GPU0 | <message> |` (`Diag::HelperDisplayEntityResults`).
//!
//! A message is cut into pieces of 45 characters, one a row under its
//! title (`Diag::DisplayVerboseInfo`); its pieces are joined as they were
//! cut. A result that is not a pass becomes a [`DiagResult`] with its GPU,
//! its test, the box's section and the warning DCGM printed for that GPU.

use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::tag;
use nom::character::complete::{digit1, space0, space1};
use nom::combinator::{all_consuming, map, map_res, opt, value};
use nom::multi::separated_list1;
use nom::sequence::{preceded, terminated};

use crate::model::{DiagOutcome, DiagResult, Facts};
use crate::source::Span;

/// The width of a message's piece in a row (`DATA_INFO_TAG_LEN`).
const PIECE: usize = 45;

/// What a result cell says: the outcome and the GPUs it is for (none:
/// the test as a whole, or `All`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResultCell {
    pub outcome: Option<DiagOutcome>,
    pub gpus: Vec<u32>,
}

fn outcome(i: &str) -> nom::IResult<&str, Option<DiagOutcome>> {
    alt((
        value(None, tag("Pass")),
        value(Some(DiagOutcome::Fail), tag("Fail")),
        value(Some(DiagOutcome::Warn), tag("Warn")),
        value(Some(DiagOutcome::Skip), tag("Skip")),
    ))
    .parse(i)
}

fn index(i: &str) -> nom::IResult<&str, u32> {
    map_res(digit1, str::parse).parse(i)
}

/// `Fail`, `Pass - All`, `Fail - GPU: 0`, `Pass - GPUs: 1, 2, 3` (DCGM 2
/// and 3), or `GPU0: Fail` (DCGM 4).
pub(crate) fn result_cell(cell: &str) -> Option<ResultCell> {
    let gpus = alt((
        value(Vec::new(), tag("All")),
        preceded(
            alt((tag("GPUs: "), tag("GPU: "))),
            separated_list1((tag(","), space0), index),
        ),
    ));
    let old = map(
        (outcome, opt(preceded((space1, tag("-"), space1), gpus))),
        |(outcome, gpus)| ResultCell {
            outcome,
            gpus: gpus.unwrap_or_default(),
        },
    );
    let new = map(
        (preceded(tag("GPU"), terminated(index, tag(": "))), outcome),
        |(gpu, outcome)| ResultCell {
            outcome,
            gpus: vec![gpu],
        },
    );
    all_consuming(alt((old, new)))
        .parse(cell.trim())
        .ok()
        .map(|(_, r)| r)
}

/// Whether a result cell names GPUs, as only dcgmi's do (`Pass - All`,
/// `Fail - GPU: 0`, `GPU1: Pass`): such a row is a diag box's even when
/// the paste starts under its header.
pub(crate) fn is_gpu_result(cell: &str) -> bool {
    cell.trim() != "Pass"
        && cell.trim() != "Fail"
        && result_cell(cell).is_some_and(|r| !r.gpus.is_empty() || cell.contains(" - All"))
}

/// `GPU 0 ` at the head of a DCGM 2/3 message, or `: GPU0` after a DCGM 4
/// row title.
fn gpu_prefix(text: &str) -> Option<u32> {
    preceded(tag::<_, _, nom::error::Error<&str>>("GPU "), index)
        .parse(text)
        .ok()
        .map(|(_, n)| n)
}

/// A row's title cell: a test, a message's title (`Warning`, `Warning:
/// GPU0`, `Error`, `Info`), or nothing (a continued row).
enum Title<'a> {
    Blank,
    Warning(Option<u32>),
    Info,
    Test(&'a str),
}

fn title(cell: &str) -> Title<'_> {
    let t = cell.trim();
    let entity = |rest: &str| {
        preceded(tag::<_, _, nom::error::Error<&str>>(": GPU"), index)
            .parse(rest)
            .ok()
            .map(|(_, n)| n)
    };
    match t {
        "" => Title::Blank,
        "Warning" | "Error" => Title::Warning(None),
        "Info" => Title::Info,
        _ => {
            if let Some(rest) = t.strip_prefix("Warning") {
                if let Some(n) = entity(rest) {
                    return Title::Warning(Some(n));
                }
            }
            if t.strip_prefix("Info").and_then(entity).is_some() {
                return Title::Info;
            }
            Title::Test(t)
        }
    }
}

/// A piece of a message as its row holds it: the cell after its one space
/// of margin, up to the piece's width (a piece may end in a space).
fn piece(cell: &str) -> &str {
    let body = cell.strip_prefix(' ').unwrap_or(cell);
    match body.char_indices().nth(PIECE) {
        Some((at, _)) => &body[..at],
        None => body,
    }
}

/// Where a `dcgmi diag` box is: its section, its test, and the result a
/// message's next piece belongs to.
#[derive(Debug, Default)]
pub(crate) struct DiagBox {
    section: Option<String>,
    test: Option<(String, Span)>,
    /// The index in `Facts::diag_results` of the result the message being
    /// read belongs to.
    target: Option<usize>,
    /// The results of the test being read, by their index there.
    results: Vec<usize>,
    /// The box's last line read: dcgmi prints its rows on consecutive
    /// lines, so a row after a gap (a blank line between two pasted boxes)
    /// starts afresh.
    last: Option<Span>,
}

impl DiagBox {
    /// A section rule: `+-----  Hardware  ----------+-----+`.
    pub(crate) fn section(&mut self, rule: &str, span: Span) {
        self.follow(span);
        let name = rule.trim_matches(['|', '+', '-', ' ']);
        let name = name.split("--").next().unwrap_or(name).trim();
        self.section = Some(name.to_owned());
        self.test = None;
        self.target = None;
        self.results.clear();
    }

    /// One row, `| title | info |` (the closing `|` may be cut).
    pub(crate) fn row(&mut self, row: &str, span: Span, facts: &mut Facts) {
        self.follow(span);
        let Some(inner) = row.trim_start().strip_prefix('|') else {
            return;
        };
        let Some((name, rest)) = inner.split_once('|') else {
            return;
        };
        let info = rest.strip_suffix('|').unwrap_or(rest);
        let info = info.trim_end().strip_suffix('|').unwrap_or(info);
        if self.section.as_deref() == Some("Metadata") {
            return;
        }
        match title(name) {
            Title::Test(test) => {
                self.test = Some((test.to_owned(), span));
                self.target = None;
                self.results.clear();
                if let Some(cell) = result_cell(info) {
                    self.results(&cell, span, facts);
                }
            }
            Title::Blank => match result_cell(info) {
                Some(cell) => {
                    self.target = None;
                    self.results(&cell, span, facts);
                }
                None => self.more(piece(info), span, facts),
            },
            Title::Info => self.target = None,
            Title::Warning(gpu) => {
                let text = piece(info);
                let gpu = gpu.or_else(|| gpu_prefix(text.trim_start()));
                self.target = self.result_for(gpu, facts);
                if self.target.is_none() && self.test.is_none() {
                    // A check's error under its section alone (DCGM 2:
                    // `| Error | GPU 3 has uncorrectable memory errors …`).
                    let test = self.section.clone().unwrap_or_default();
                    facts.diag_results.push(DiagResult {
                        test,
                        test_span: span,
                        section: self.section.clone(),
                        gpu,
                        outcome: DiagOutcome::Fail,
                        span,
                        detail: String::new(),
                        detail_spans: Vec::new(),
                    });
                    self.target = Some(facts.diag_results.len() - 1);
                }
                self.more(text, span, facts);
            }
        }
    }

    /// Starts afresh when `span` does not follow the box's last line.
    fn follow(&mut self, span: Span) {
        let next = self
            .last
            .is_none_or(|l| l.source == span.source && l.line + 1 == span.line);
        if !next {
            *self = DiagBox::default();
        }
        self.last = Some(span);
    }

    /// The results a result cell gives, one per GPU it names.
    fn results(&mut self, cell: &ResultCell, span: Span, facts: &mut Facts) {
        let (Some(outcome), Some((test, test_span))) = (cell.outcome, self.test.as_ref()) else {
            return;
        };
        let gpus: Vec<Option<u32>> = match cell.gpus.as_slice() {
            [] => vec![None],
            gpus => gpus.iter().copied().map(Some).collect(),
        };
        for gpu in gpus {
            facts.diag_results.push(DiagResult {
                test: test.clone(),
                test_span: *test_span,
                section: self.section.clone(),
                gpu,
                outcome,
                span,
                detail: String::new(),
                detail_spans: Vec::new(),
            });
            self.results.push(facts.diag_results.len() - 1);
        }
    }

    /// The result of the test being read for `gpu`: its own, the test's
    /// when the message names no GPU (or the only one it has), or, when
    /// the test failed as a whole (`| Diagnostic | Fail |`) and the
    /// message names a GPU, a result of that GPU made from it.
    fn result_for(&mut self, gpu: Option<u32>, facts: &mut Facts) -> Option<usize> {
        let of = |i: &usize| facts.diag_results.get(*i);
        if let Some(&i) = self
            .results
            .iter()
            .find(|i| of(i).is_some_and(|r| r.gpu == gpu))
        {
            return Some(i);
        }
        if let ([only], None) = (self.results.as_slice(), gpu) {
            return Some(*only);
        }
        let whole = self
            .results
            .iter()
            .find_map(|i| of(i).filter(|r| r.gpu.is_none()))?;
        let mut one = whole.clone();
        one.gpu = gpu;
        one.detail.clear();
        one.detail_spans.clear();
        facts.diag_results.push(one);
        self.results.push(facts.diag_results.len() - 1);
        self.results.last().copied()
    }

    /// The next piece of the message being read.
    fn more(&mut self, text: &str, span: Span, facts: &mut Facts) {
        let Some(result) = self.target.and_then(|i| facts.diag_results.get_mut(i)) else {
            return;
        };
        // Kept as cut: a piece may end in the space before the next one's
        // word; the last one's padding is trimmed by whoever reads it.
        result.detail.push_str(text);
        result.detail_spans.push(span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_cells_of_every_layout() {
        let fail0 = ResultCell {
            outcome: Some(DiagOutcome::Fail),
            gpus: vec![0],
        };
        assert_eq!(result_cell("Fail - GPU: 0  "), Some(fail0.clone()));
        assert_eq!(result_cell("GPU0: Fail"), Some(fail0));
        assert_eq!(
            result_cell("Pass - GPUs: 1, 2, 3"),
            Some(ResultCell {
                outcome: None,
                gpus: vec![1, 2, 3]
            })
        );
        assert_eq!(
            result_cell("Skip - All").and_then(|r| r.outcome),
            Some(DiagOutcome::Skip)
        );
        assert_eq!(
            result_cell("Warn").and_then(|r| r.outcome),
            Some(DiagOutcome::Warn)
        );
        assert_eq!(result_cell("GPU 0 Error using CUDA API"), None);
        assert_eq!(result_cell("Failed to start"), None);
        assert!(is_gpu_result("Pass - GPUs: 1, 2, 3, 4, 5, 6, 7"));
        assert!(!is_gpu_result("Pass"));
    }

    #[test]
    fn a_piece_keeps_its_last_space() {
        assert_eq!(
            piece(" GPU 0 Error using CUDA API cuCtxCreate Check   "),
            "GPU 0 Error using CUDA API cuCtxCreate Check "
        );
        assert_eq!(piece(" ts."), "ts.");
    }
}
