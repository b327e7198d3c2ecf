//! Ingest: turn each input into typed [`Facts`].
//!
//! An input is split into segments ([`detect`]), each segment is parsed by the
//! parser of its format; a line that parser cannot read, or that no format
//! claimed, meets every line-level recogniser ([`recognize`]). A line none
//! knows is counted against its segment: prose, a shell prompt, or
//! unrecognised. Parsers never fail: a line they cannot read is a
//! count, not an error. Inputs are streamed, one line at a time
//! ([`stream`]); with the prefilter, lines no anchor matches are only
//! skimmed ([`reader`]).

mod aggregate;
mod anchors;
mod chatter;
mod check_env;
mod collect_env;
mod detect;
pub mod frame;
mod gpustat;
mod harness;
mod journal_cat;
mod journal_fields;
mod journal_json;
mod journal_marks;
mod journal_short;
mod journal_time;
mod journal_verbose;
mod kernel;
mod lsmod;
mod nvidia_smi_csv;
mod nvidia_smi_list;
mod nvidia_smi_pmon;
mod nvidia_smi_q;
mod nvidia_smi_table;
mod package_log;
mod proc_cgroup;
mod ps;
mod reader;
mod recognize;
mod server;
mod ss;
mod stream;
mod systemctl_show;
mod systemctl_status;
mod systemd_unit_file;
mod tables;
mod values;

use std::fmt;
use std::str::FromStr;

use crate::model::{Facts, Framework};
use crate::source::{SourceId, SourceMap, Span};
pub use frame::{Frame, Peeled, Peeler, peel_line};

pub use aggregate::Repeats;
pub use anchors::{Anchors, FACT_ANCHORS};
pub use detect::{segment, segment_as};
pub(crate) use kernel::KernelParser;
pub use recognize::{LineKind, Listed, is_prose};
pub(crate) use server::ServerLogParser;
pub use server::process_title;
pub use stream::{Settings, Threads, ingest_with};

/// Every input format rootcause reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    SglangLog,
    NvidiaSmiTable,
    NvidiaSmiQueryGpu,
    NvidiaSmiComputeApps,
    JournalShort,
    JournalShortIso,
    JournalShortFull,
    JournalShortUnix,
    JournalShortMonotonic,
    JournalShortDelta,
    JournalWithUnit,
    JournalVerbose,
    /// `journalctl -o cat`: only with `--format-hint`, never detected.
    JournalCat,
    JournalJson,
    SystemctlStatus,
    Ps,
    /// `nvidia-smi -q` text.
    NvidiaSmiQ,
    /// `nvidia-smi -q -x` XML.
    NvidiaSmiQXml,
    NvidiaSmiPmon,
    /// `nvidia-smi -L` and `nvidia-smi nvlink --status`: `GPU N: NAME (UUID: …)` lines.
    NvidiaSmiList,
    /// `ss -ltnp`: listening sockets and the processes that hold them.
    Ss,
    /// `lsmod`: loaded kernel modules and their use counts.
    Lsmod,
    /// `gpustat`: one `[0] NAME | 48'C, 7 % | 213 / 1995 MB |` line per GPU.
    Gpustat,
    /// `dmesg` in any of its time formats.
    Dmesg,
    SystemctlShow,
    /// A unit file (`systemctl cat`, `cat /etc/systemd/system/x.service`).
    SystemdUnitFile,
    /// `/proc/PID/cgroup` contents.
    ProcCgroup,
    /// Lines such as `root@host:~# nvidia-smi` between the pieces of a paste.
    ShellPrompt,
    VllmLog,
    /// NCCL debug lines (`host:pid:tid [dev] NCCL WARN …`) on their own.
    NcclLog,
    /// PyTorch c10 lines (`[E601 … ProcessGroupNCCL.cpp:629]`) and
    /// `[rank0]:`-prefixed output on their own.
    TorchLog,
    /// A Python traceback with no server prefix around it.
    PythonTraceback,
    /// Ray actor output: `(WorkerDict pid=…, ip=…) …`.
    RayLog,
    /// `docker compose logs`/`up`: `service-1  | …`.
    DockerComposeLog,
    /// A log viewer's RFC 3339 timestamp in front of each line
    /// (`docker logs -t`, `kubectl logs --timestamps`).
    ContainerLog,
    /// `python -m sglang.check_env`.
    SglangCheckEnv,
    /// apt's `history.log` and `dpkg.log`: package upgrades and installs.
    PackageLog,
    /// `python -m torch.utils.collect_env` (and vLLM's `collect_env.py`).
    TorchCollectEnv,
    Unknown,
}

impl Format {
    pub const ALL: [Format; 39] = [
        Format::SglangLog,
        Format::NvidiaSmiTable,
        Format::NvidiaSmiQueryGpu,
        Format::NvidiaSmiComputeApps,
        Format::JournalShort,
        Format::JournalShortIso,
        Format::JournalShortFull,
        Format::JournalShortUnix,
        Format::JournalShortMonotonic,
        Format::JournalShortDelta,
        Format::JournalWithUnit,
        Format::JournalVerbose,
        Format::JournalCat,
        Format::JournalJson,
        Format::SystemctlStatus,
        Format::Ps,
        Format::NvidiaSmiQ,
        Format::NvidiaSmiQXml,
        Format::NvidiaSmiPmon,
        Format::NvidiaSmiList,
        Format::Gpustat,
        Format::Ss,
        Format::Lsmod,
        Format::Dmesg,
        Format::SystemctlShow,
        Format::SystemdUnitFile,
        Format::ProcCgroup,
        Format::ShellPrompt,
        Format::VllmLog,
        Format::NcclLog,
        Format::TorchLog,
        Format::PythonTraceback,
        Format::RayLog,
        Format::DockerComposeLog,
        Format::ContainerLog,
        Format::SglangCheckEnv,
        Format::PackageLog,
        Format::TorchCollectEnv,
        Format::Unknown,
    ];

    /// The stable name used in reports and in `--format-hint`.
    pub fn name(self) -> &'static str {
        match self {
            Format::SglangLog => "sglang-log",
            Format::NvidiaSmiTable => "nvidia-smi-table",
            Format::NvidiaSmiQueryGpu => "nvidia-smi-query-gpu-csv",
            Format::NvidiaSmiComputeApps => "nvidia-smi-compute-apps-csv",
            Format::JournalShort => "journal-short",
            Format::JournalShortIso => "journal-short-iso",
            Format::JournalShortFull => "journal-short-full",
            Format::JournalShortUnix => "journal-short-unix",
            Format::JournalShortMonotonic => "journal-short-monotonic",
            Format::JournalShortDelta => "journal-short-delta",
            Format::JournalWithUnit => "journal-with-unit",
            Format::JournalVerbose => "journal-verbose",
            Format::JournalCat => "journal-cat",
            Format::JournalJson => "journal-json",
            Format::SystemctlStatus => "systemctl-status",
            Format::Ps => "ps",
            Format::NvidiaSmiQ => "nvidia-smi-q",
            Format::NvidiaSmiQXml => "nvidia-smi-q-xml",
            Format::NvidiaSmiPmon => "nvidia-smi-pmon",
            Format::NvidiaSmiList => "nvidia-smi-list",
            Format::Gpustat => "gpustat",
            Format::Ss => "ss",
            Format::Lsmod => "lsmod",
            Format::Dmesg => "dmesg",
            Format::SystemctlShow => "systemctl-show",
            Format::SystemdUnitFile => "systemd-unit-file",
            Format::ProcCgroup => "proc-cgroup",
            Format::ShellPrompt => "shell-prompt",
            Format::VllmLog => "vllm-log",
            Format::NcclLog => "nccl-log",
            Format::TorchLog => "torch-log",
            Format::PythonTraceback => "python-traceback",
            Format::RayLog => "ray-log",
            Format::DockerComposeLog => "docker-compose-log",
            Format::ContainerLog => "container-log",
            Format::SglangCheckEnv => "sglang-check-env",
            Format::PackageLog => "package-log",
            Format::TorchCollectEnv => "torch-collect-env",
            Format::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("unknown format `{s}`"))
    }
}

/// One line handed to a parser: its text under its frames, where it came
/// from, and what the frames said ([`frame`]).
#[derive(Debug, Clone)]
pub struct Line<'a> {
    pub span: Span,
    pub text: &'a str,
    pub frame: &'a Frame,
}

impl<'a> Line<'a> {
    /// A line with no frame around it (or whose frame does not matter to
    /// the reader it goes to).
    pub fn bare(span: Span, text: &'a str) -> Line<'a> {
        Line {
            span,
            text,
            frame: &frame::NO_FRAME,
        }
    }
}

#[cfg(test)]
impl<'a> Line<'a> {
    /// Each line of `text` as input 0's, numbered from 1, under its frames
    /// as the stream peels them: how parser tests feed a parser without
    /// the detector. (A test's frames are leaked: they live as long as it.)
    pub fn numbered(text: &'a str) -> Vec<Line<'a>> {
        let mut peeler = frame::Peeler::new();
        text.lines()
            .enumerate()
            .map(|(i, t)| {
                let peeled = peeler.peel(t);
                let text: &'a str = match peeled.body {
                    std::borrow::Cow::Borrowed(b) => b,
                    std::borrow::Cow::Owned(o) => Box::leak(o.into_boxed_str()),
                };
                Line {
                    span: Span {
                        source: crate::source::SourceId(0),
                        line: i as u32 + 1,
                    },
                    text,
                    frame: Box::leak(Box::new(peeled.frame)),
                }
            })
            .collect()
    }
}

/// A run of lines of one input that share a format.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub source: SourceId,
    pub format: Format,
    pub first_line: u32,
    pub last_line: u32,
    /// Why detection chose this format, for `rootcause inputs` and the report.
    pub why: &'static str,
}

/// A segment after parsing: what the report's `inputs[]` lists.
#[derive(Debug, Clone, PartialEq)]
pub struct InputSummary {
    pub segment: Segment,
    pub lines: u32,
    /// Non-blank lines nothing recognised, prose and prompts aside.
    pub unrecognized: u32,
    /// Sentences a person wrote between outputs ([`is_prose`]).
    pub prose: u32,
    /// Shell prompt lines (`root@host:~# nvidia-smi`).
    pub prompts: u32,
    /// The first lines that were prose, prompts or unrecognised, where the
    /// reader knows which (not the lines of a journal or other format
    /// whose parser only counts them).
    pub listed: Vec<Listed>,
    /// The unrecognised lines that were kept as messages for the rules
    /// (bounded as messages are): a finding may cite them.
    pub anchored: Vec<u32>,
    /// The lines no parser read that a finding cites, in line order: the
    /// rule's signature understood them, so they are not counted in
    /// `unrecognized` ([`InputSummary::cite`]).
    pub cited: Vec<Cited>,
}

/// A line no parser read that a finding cites as evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Cited {
    pub line: u32,
    /// The citing finding's id (`F1`) and rule; the first finding to cite
    /// the line when several do.
    pub finding: String,
    pub rule: &'static str,
}

impl InputSummary {
    /// Counts `span` as understood by `rule` when it is an unrecognised
    /// line of this segment (one kept as a message); returns whether it was.
    /// A line is moved once, to the first finding that cites it.
    pub fn cite(&mut self, span: Span, finding: &str, rule: &'static str) -> bool {
        if span.source != self.segment.source
            || self.anchored.binary_search(&span.line).is_err()
            || self.cited.iter().any(|c| c.line == span.line)
        {
            return false;
        }
        self.unrecognized = self.unrecognized.saturating_sub(1);
        let at = self.cited.partition_point(|c| c.line < span.line);
        self.cited.insert(
            at,
            Cited {
                line: span.line,
                finding: finding.to_owned(),
                rule,
            },
        );
        true
    }

    /// The finding that cites `line`, if it is one of [`Self::cited`].
    pub fn cited_by(&self, line: u32) -> Option<&Cited> {
        self.cited
            .binary_search_by_key(&line, |c| c.line)
            .ok()
            .map(|i| &self.cited[i])
    }
}

#[derive(Debug, Default)]
pub struct Ingested {
    pub facts: Facts,
    pub inputs: Vec<InputSummary>,
}

/// Parses every input of `sources`, detecting the format of each part;
/// lines containing one of `anchors` are also kept verbatim as messages for
/// the rules.
pub fn ingest(sources: &SourceMap, anchors: &Anchors) -> Ingested {
    ingest_as(sources, None, anchors)
}

/// [`ingest`]; with a `hint`, every input is read as that one format instead
/// of being detected (`--format-hint`). Every line is read in full.
pub fn ingest_as(sources: &SourceMap, hint: Option<Format>, anchors: &Anchors) -> Ingested {
    ingest_with(
        sources,
        &Settings {
            hint,
            anchors,
            prefilter: false,
            progress: None,
            threads: Threads::Auto,
            repeats: Repeats::UNBOUNDED,
        },
    )
}

/// Runs the parser of `format`; returns what it did not recognise.
fn parse_segment(format: Format, lines: &[Line<'_>], facts: &mut Facts) -> Missed {
    use Missed::{Count, Lines};
    match format {
        Format::SglangLog => Count(server::parse(lines, facts, Some(Framework::Sglang))),
        Format::NvidiaSmiTable => Lines(nvidia_smi_table::read(lines, facts)),
        Format::NvidiaSmiQueryGpu => Count(nvidia_smi_csv::parse_query_gpu(lines, facts)),
        Format::NvidiaSmiComputeApps => Count(nvidia_smi_csv::parse_compute_apps(lines, facts)),
        Format::JournalShort
        | Format::JournalShortIso
        | Format::JournalShortFull
        | Format::JournalShortUnix
        | Format::JournalShortMonotonic
        | Format::JournalShortDelta => Count(journal_short::parse(
            lines,
            facts,
            journal_short::Ident::Identifier,
        )),
        Format::JournalWithUnit => Count(journal_short::parse(
            lines,
            facts,
            journal_short::Ident::Unit,
        )),
        Format::JournalVerbose => Count(journal_verbose::parse(lines, facts)),
        Format::JournalCat => Count(journal_cat::parse(lines, facts)),
        Format::JournalJson => Count(journal_json::parse(lines, facts)),
        Format::SystemctlStatus => Lines(systemctl_status::read(lines, facts)),
        Format::Ps => Lines(ps::read(lines, facts)),
        Format::NvidiaSmiQ => Count(nvidia_smi_q::parse_text(lines, facts)),
        Format::NvidiaSmiQXml => Count(nvidia_smi_q::parse_xml(lines, facts)),
        Format::NvidiaSmiPmon => Lines(nvidia_smi_pmon::read(lines, facts)),
        Format::NvidiaSmiList => Lines(nvidia_smi_list::read(lines, facts)),
        Format::Gpustat => Count(gpustat::parse(lines, facts)),
        Format::Ss => Count(ss::parse(lines, facts)),
        Format::Lsmod => Count(lsmod::parse(lines, facts)),
        Format::Dmesg => Count(kernel::parse(lines, facts)),
        Format::SystemctlShow => Lines(systemctl_show::read(lines, facts)),
        Format::SystemdUnitFile => Lines(systemd_unit_file::read(lines, facts)),
        Format::ProcCgroup => Lines(proc_cgroup::read(lines, facts)),
        Format::VllmLog => Count(server::parse(lines, facts, Some(Framework::Vllm))),
        Format::NcclLog
        | Format::TorchLog
        | Format::PythonTraceback
        | Format::RayLog
        | Format::DockerComposeLog
        | Format::ContainerLog => Count(server::parse(lines, facts, None)),
        Format::SglangCheckEnv => Lines(check_env::read(lines, facts)),
        Format::PackageLog => Lines(package_log::read(lines, facts)),
        Format::TorchCollectEnv => Count(collect_env::parse(lines, facts)),
        // Read line by line, never buffered (`reader::SegmentReader`).
        Format::ShellPrompt | Format::Unknown => {
            Count(lines.iter().filter(|l| !l.text.trim().is_empty()).count() as u32)
        }
    }
}

/// What a segment's parser did not recognise: the lines themselves (their
/// indices), which then meet the line-level recognisers, or, from a parser
/// that only counts them, how many.
pub(super) enum Missed {
    Lines(Vec<usize>),
    Count(u32),
}
