//! nccl-tests' own report (NVIDIA/nccl-tests `src/common.cu`: `run()` and
//! the `Reporter`), printed by `all_reduce_perf` and its siblings:
//!
//! ```text
//! # nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
//! #
//! # Using devices
//! #  Rank  0 Group  0 Pid   5026 on         vm device  0 [0x00] NVIDIA H200
//! #                                                              out-of-place                       in-place
//! #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
//! #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
//!  17179869184    4294967296     float     sum      -1    62639  274.27  479.97      0    62601  274.44  480.26      0
//! # Out of bounds values : 0 OK
//! # Avg bus bandwidth    : 480.11
//! ```
//!
//! Each line is read by its grammar; its `# ` is the report's, never
//! root's shell prompt. A rank line names the process, host and CUDA
//! device of each rank; the failures (`Test CUDA failure common.cu:N
//! '…'`, `Test NCCL failure …`) are messages of the NCCL catalog's rows,
//! read there.

use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_while1};
use nom::character::complete::{char, digit1, space0, space1};
use nom::combinator::{all_consuming, opt, recognize};
use nom::multi::many1_count;
use nom::sequence::preceded;

type Res<'a, T> = nom::IResult<&'a str, T>;

/// What a rank line says: `#  Rank %2d Group %2d Pid %6d on %10s device
/// %2d [0x%02x] %s` (`Group` since 2.11; the bus ID `[0000:1b:00]` in
/// later versions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RankLine<'a> {
    pub rank: u32,
    pub pid: u32,
    pub host: &'a str,
    pub device: u32,
    pub gpu_name: &'a str,
}

fn number(i: &str) -> Res<'_, u32> {
    digit1.map_res(str::parse).parse(i)
}

fn word(i: &str) -> Res<'_, &str> {
    take_while1(|c: char| !c.is_whitespace()).parse(i)
}

/// `#  Rank  0 Group  0 Pid   5026 on         vm device  0 [0x00] NVIDIA H200`.
pub(crate) fn rank_line(text: &str) -> Option<RankLine<'_>> {
    let bus = (
        space1,
        char('['),
        take_while1(|c: char| c.is_ascii_hexdigit() || c == 'x' || c == ':'),
        char(']'),
        space1,
    );
    let mut head = (
        preceded((char('#'), space1, tag("Rank"), space1), number),
        opt((space1, tag("Group"), space1, digit1)),
        preceded((space1, tag("Pid"), space1), number),
        preceded((space1, tag("on"), space1), word),
        preceded((space1, tag("device"), space1), number),
        bus,
    );
    let (gpu_name, (rank, _, pid, host, device, _)) = head.parse(text.trim_end()).ok()?;
    (!gpu_name.is_empty()).then_some(RankLine {
        rank,
        pid,
        host,
        device,
        gpu_name,
    })
}

/// `# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: …`: the run's
/// parameters (older versions stop after `validation: N`).
fn parameters(t: &str) -> bool {
    (
        tag::<_, _, nom::error::Error<&str>>("# nThread "),
        digit1,
        tag(" nGpus "),
        digit1,
        tag(" minBytes "),
        digit1,
        tag(" maxBytes "),
        digit1,
        tag(" step: "),
    )
        .parse(t)
        .is_ok()
}

/// The result table's three header lines.
fn table_header(t: &str) -> bool {
    let Some(rest) = t.strip_prefix('#') else {
        return false;
    };
    let words: Vec<&str> = rest.split_whitespace().collect();
    matches!(words.as_slice(), ["out-of-place", "in-place"])
        || matches!(
            words.as_slice(),
            ["size", "count", "type", ..] if words.contains(&"algbw") && words.contains(&"busbw")
        )
        || matches!(words.as_slice(), ["(B)", "(elements)", ..])
}

/// A result row: `%12li  %12li  %8s  %6s  %6i` (size, count, type, redop,
/// root), then out-of-place and in-place `%7s  %6.2f  %6.2f  %5li` (time,
/// algbw, busbw, wrong elements, `N/A` where not checked). Older versions
/// and some tests (`sendrecv_perf`, `alltoall_perf`) print `redop` or
/// `root` as `none`/`-1`.
fn result_row(t: &str) -> bool {
    let figure = |i| -> Res<'_, &str> {
        alt((
            recognize((opt(char('-')), digit1, opt((char('.'), digit1)))),
            tag("N/A"),
        ))
        .parse(i)
    };
    let row = all_consuming((
        space0,
        digit1,
        space1,
        digit1,
        space1,
        take_while1(|c: char| c.is_ascii_alphanumeric()),
        space1,
        take_while1(|c: char| c.is_ascii_alphanumeric()),
        space1,
        opt(char('-')),
        digit1,
        many1_count(preceded(space1, figure)),
        space0,
    ))
    .parse(t);
    row.is_ok_and(|(_, (.., figures, _))| figures >= 4)
}

/// The summary and notes `run()` prints with its `# `.
fn note(t: &str) -> bool {
    const NOTES: [&str; 9] = [
        "# Using devices",
        "# Out of bounds values : ",
        "# Avg bus bandwidth    : ",
        "# Reducing maxBytes to ",
        "# Blocking Enabled: ",
        "# Parallel Init Enabled: ",
        "# Writing results to file: ",
        "# nccl-tests version ",
        "# Collective test starting: ",
    ];
    t == "#" || NOTES.iter().any(|n| t.starts_with(n.trim_end()))
}

/// Whether `text` is a line of nccl-tests' report.
pub(crate) fn is_line(text: &str) -> bool {
    let t = text.trim_end();
    match t.as_bytes().first() {
        Some(b'#') => note(t) || parameters(t) || table_header(t) || rank_line(t).is_some(),
        Some(b' ' | b'0'..=b'9') => result_row(t),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fixtures/real/915 (all_reduce_perf on eight H200s), its report
    /// verbatim; fixtures/real/619's parameters line of an older run.
    #[test]
    fn every_line_of_the_report_is_read() {
        let report = "\
# nThread 1 nGpus 8 minBytes 17179869184 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   5026 on         vm device  0 [0x00] NVIDIA H200
#  Rank  7 Group  0 Pid   5026 on         vm device  7 [0x00] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
 17179869184    4294967296     float     sum      -1    62639  274.27  479.97      0    62601  274.44  480.26      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 480.11
";
        for line in report.lines() {
            assert!(is_line(line), "{line}");
        }
        let rank =
            rank_line("#  Rank  7 Group  0 Pid   5026 on         vm device  7 [0x00] NVIDIA H200")
                .expect("a rank line");
        assert_eq!(
            rank,
            RankLine {
                rank: 7,
                pid: 5026,
                host: "vm",
                device: 7,
                gpu_name: "NVIDIA H200"
            }
        );
    }

    #[test]
    fn a_shell_comment_or_a_table_is_not_the_report() {
        for line in [
            "# apt install nccl-tests",
            "# GPU blocks: 1478, # CPU blocks: 512",
            "#  Rank is what matters",
            "  0    1    GPU0",
            " 8 16 float sum",
            "2024 05 20 12 13",
        ] {
            assert!(!is_line(line), "{line}");
        }
    }
}
