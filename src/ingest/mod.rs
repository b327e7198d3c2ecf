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
mod config_echo;
mod coredump;
mod dcgmi_diag;
mod dcgmi_nvlink;
mod detect;
mod docker_inspect;
mod docker_ps;
mod format;
pub mod frame;
mod fuser;
mod gpustat;
mod harness;
mod instances;
mod journal_cat;
mod journal_fields;
mod journal_json;
mod journal_marks;
mod journal_short;
mod journal_time;
mod journal_verbose;
mod kernel;
mod kube_describe;
mod line;
mod lsmod;
mod nccl_tests;
mod nvidia_ctk_cdi_list;
mod nvidia_smi_csv;
mod nvidia_smi_list;
mod nvidia_smi_pmon;
mod nvidia_smi_q;
mod nvidia_smi_table;
mod package_log;
mod proc_cgroup;
mod process_head;
mod prose;
mod ps;
mod pstree;
mod read;
mod reader;
#[cfg(test)]
mod real_lines;
mod recognize;
mod server;
mod shell_notes;
mod slog_head;
mod snapshots;
mod ss;
mod stack_frames;
mod stream;
mod systemctl_show;
mod systemctl_status;
mod systemd_unit_file;
mod tables;
mod values;
mod viewer_head;
mod vllm_head;

use crate::model::{Facts, Framework};
use crate::source::{SourceId, SourceMap, Span};
pub use frame::{Frame, Peeled, Peeler, peel_line};

pub use aggregate::Repeats;
pub use anchors::{Anchors, FACT_ANCHORS};
pub use detect::{segment, segment_as};
pub use format::Format;
pub(crate) use kernel::KernelParser;
pub use line::Line;
pub use prose::is_prose;
pub use recognize::{LineKind, Listed};
pub(crate) use server::ServerLogParser;
pub use server::process_title;
pub use stream::{Settings, Threads, ingest_with};

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
        Format::NvidiaCtkCdiList => Lines(nvidia_ctk_cdi_list::read(lines, facts)),
        Format::Gpustat => Count(gpustat::parse(lines, facts)),
        Format::Ss => Lines(ss::read(lines, facts)),
        Format::Lsmod => Count(lsmod::parse(lines, facts)),
        Format::Coredumpctl => Lines(coredump::read(lines, facts)),
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
