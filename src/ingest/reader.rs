//! One segment read line by line: the reader of its format, and what it
//! tells the streaming driver ([`super::stream`]) about each line.
//!
//! Readers of the formats that get big (journals, server logs, kernel logs)
//! work a line at a time and may *skim* a line no anchor matched: they keep
//! only what the full reading would have recorded about it (whether it is
//! recognised, its time, the state later lines depend on) and make no fact.
//! The other formats are small: their lines are buffered and parsed at the
//! end of the segment by the parser of the format.

use super::journal_short::{Ident, JournalReader};
use super::{Format, Line, count_nonblank, parse_segment};
use crate::model::{Facts, Framework, Timestamp};
use crate::source::{KeptLines, Span};

/// How a line was read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Read {
    /// In full: facts may cite it, so its text is kept.
    Parsed,
    /// Skimmed: no fact cites it. The time the full reading would have
    /// given the line, if any, places the lines kept below it.
    Skimmed(Option<Timestamp>),
}

/// Where a reader writes: the facts, and the text of lines read in full
/// other than the current one (a skimmed entry read after all).
pub(super) struct Out<'a> {
    pub facts: &'a mut Facts,
    pub kept: &'a mut KeptLines,
}

/// The reader of one segment.
pub(super) enum SegmentReader {
    Journal(Box<JournalReader>),
    Json(Box<super::journal_json::JsonReader>),
    Server(Box<super::server::ServerReader>),
    Dmesg(Box<super::kernel::DmesgReader>),
    /// Lines no format claimed: each non-blank one is unrecognised.
    Unknown {
        unrecognized: u32,
    },
    /// A shell prompt: the prompt itself is recognised, the rest is not.
    Prompt {
        first: bool,
        unrecognized: u32,
    },
    /// A small format, parsed whole at the end of its segment.
    Buffered {
        format: Format,
        lines: Vec<(Span, String)>,
    },
}

impl SegmentReader {
    pub(super) fn new(format: Format) -> SegmentReader {
        use super::journal_json::JsonReader;
        use super::kernel::DmesgReader;
        use super::server::ServerReader;
        match format {
            Format::JournalShort
            | Format::JournalShortIso
            | Format::JournalShortFull
            | Format::JournalShortUnix
            | Format::JournalShortMonotonic
            | Format::JournalShortDelta => {
                SegmentReader::Journal(Box::new(JournalReader::new(Ident::Identifier)))
            }
            Format::JournalWithUnit => {
                SegmentReader::Journal(Box::new(JournalReader::new(Ident::Unit)))
            }
            Format::JournalJson => SegmentReader::Json(Box::new(JsonReader::new())),
            Format::SglangLog => {
                SegmentReader::Server(Box::new(ServerReader::new(Some(Framework::Sglang))))
            }
            Format::VllmLog => {
                SegmentReader::Server(Box::new(ServerReader::new(Some(Framework::Vllm))))
            }
            Format::NcclLog
            | Format::TorchLog
            | Format::PythonTraceback
            | Format::RayLog
            | Format::DockerComposeLog
            | Format::ContainerLog => SegmentReader::Server(Box::new(ServerReader::new(None))),
            Format::Dmesg => SegmentReader::Dmesg(Box::<DmesgReader>::default()),
            Format::Unknown => SegmentReader::Unknown { unrecognized: 0 },
            Format::ShellPrompt => SegmentReader::Prompt {
                first: true,
                unrecognized: 0,
            },
            format => SegmentReader::Buffered {
                format,
                lines: Vec::new(),
            },
        }
    }

    /// Reads one line. `hot`: an anchor matched it (or nothing is skimmed).
    pub(super) fn read(&mut self, line: &Line<'_>, hot: bool, out: &mut Out<'_>) -> Read {
        match self {
            SegmentReader::Journal(r) => r.read(line, hot, out),
            SegmentReader::Json(r) => r.read(line, hot, out),
            SegmentReader::Server(r) => r.read(line, hot, out),
            SegmentReader::Dmesg(r) => r.read(line, hot, out),
            SegmentReader::Unknown { unrecognized } => {
                *unrecognized += count_nonblank(std::slice::from_ref(line));
                Read::Skimmed(None)
            }
            SegmentReader::Prompt {
                first,
                unrecognized,
            } => {
                if !std::mem::take(first) {
                    *unrecognized += count_nonblank(std::slice::from_ref(line));
                }
                Read::Skimmed(None)
            }
            SegmentReader::Buffered { lines, .. } => {
                lines.push((line.span, line.text.to_owned()));
                Read::Parsed
            }
        }
    }

    /// Closes the segment; returns the number of lines it did not recognise.
    pub(super) fn finish(self, facts: &mut Facts) -> u32 {
        match self {
            SegmentReader::Journal(mut r) => r.finish(facts),
            SegmentReader::Json(mut r) => r.finish(facts),
            SegmentReader::Server(r) => r.finish(),
            SegmentReader::Dmesg(mut r) => r.finish(facts),
            SegmentReader::Unknown { unrecognized }
            | SegmentReader::Prompt { unrecognized, .. } => unrecognized,
            SegmentReader::Buffered { format, lines } => {
                let lines: Vec<Line<'_>> = lines
                    .iter()
                    .map(|(span, text)| Line { span: *span, text })
                    .collect();
                parse_segment(format, &lines, facts)
            }
        }
    }
}
