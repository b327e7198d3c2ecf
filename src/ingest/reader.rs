//! One segment read line by line: the reader of its format, and what it
//! tells the streaming driver ([`super::stream`]) about each line.
//!
//! Readers of the formats that get big (journals, server logs, kernel logs)
//! work a line at a time and may *skim* a line no anchor matched: they keep
//! only what the full reading would have recorded about it (whether it is
//! recognised, its time, the state later lines depend on) and make no fact.
//! The other formats are small: their lines are buffered and parsed at the
//! end of the segment by the parser of the format.
//!
//! No line goes unseen: lines of unknown segments and under shell prompts,
//! and lines a server, kernel or buffered segment's parser could not read,
//! go to the line-level recognisers ([`super::recognize`]).

use super::journal_short::{Ident, JournalReader};
use super::read::{Out, Read};
use super::recognize::{Except, LineReader, Tally};
use super::snapshots::TableReader;
use super::{Format, Line, Missed, parse_segment};
use crate::model::Framework;
use crate::source::{KeptLines, Span};

/// The reader of one segment.
pub(super) enum SegmentReader {
    Journal(Box<JournalReader>),
    Json(Box<super::journal_json::JsonReader>),
    /// A server log; the lines its parser cannot read meet the others.
    Server(Box<super::server::ServerReader>, Box<LineReader>),
    /// A kernel log, likewise.
    Dmesg(Box<super::kernel::DmesgReader>, Box<LineReader>),
    /// Lines no format claimed: each meets every recogniser.
    Unknown(Box<LineReader>),
    /// A shell prompt, then output no format claimed; `first` until the
    /// prompt line is read.
    Prompt {
        first: bool,
        /// Whether the command goes on on the next line (`… \`, a quote
        /// left open).
        continued: super::detect::Continuation,
        lines: Box<LineReader>,
    },
    /// An `nvidia-smi` table segment, parsed a snapshot at a time, repeated
    /// snapshots counted ([`super::snapshots`]).
    Table(Box<TableReader>),
    /// A small format, parsed whole at the end of its segment.
    Buffered {
        format: Format,
        lines: Vec<(Span, String)>,
        /// The command typed at the prompt above, when it names what the
        /// lines are (`ps -o …`'s columns).
        command: Option<String>,
    },
}

impl SegmentReader {
    /// Whether the reader of `format` takes a line at a time (all but the
    /// small formats, parsed whole at the end of their segment). Asked for
    /// every line: no reader is built to answer it.
    pub(super) fn streams(format: Format) -> bool {
        matches!(
            format,
            Format::JournalShort
                | Format::JournalShortIso
                | Format::JournalShortFull
                | Format::JournalShortUnix
                | Format::JournalShortMonotonic
                | Format::JournalShortDelta
                | Format::JournalWithUnit
                | Format::JournalJson
                | Format::SglangLog
                | Format::VllmLog
                | Format::NcclLog
                | Format::TorchLog
                | Format::PythonTraceback
                | Format::RayLog
                | Format::DockerComposeLog
                | Format::ContainerLog
                | Format::Dmesg
                | Format::Unknown
                | Format::ShellPrompt
        )
    }

    pub(super) fn new(format: Format) -> SegmentReader {
        use super::journal_json::JsonReader;
        use super::kernel::DmesgReader;
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
            Format::SglangLog => server(Some(Framework::Sglang)),
            Format::VllmLog => server(Some(Framework::Vllm)),
            Format::NcclLog
            | Format::TorchLog
            | Format::PythonTraceback
            | Format::RayLog
            | Format::DockerComposeLog
            | Format::ContainerLog => server(None),
            Format::Dmesg => SegmentReader::Dmesg(
                Box::<DmesgReader>::default(),
                Box::new(LineReader::new(Except::Kernel)),
            ),
            Format::Unknown => SegmentReader::Unknown(Box::new(LineReader::new(Except::Nothing))),
            Format::NvidiaSmiTable => SegmentReader::Table(Box::new(TableReader::new())),
            Format::ShellPrompt => SegmentReader::Prompt {
                first: true,
                continued: super::detect::Continuation::Over,
                lines: Box::new(LineReader::new(Except::Nothing)),
            },
            format => SegmentReader::Buffered {
                format,
                lines: Vec::new(),
                command: None,
            },
        }
    }

    /// The command typed at the prompt above, whose output this segment is
    /// (`detect::Segmenter::typed_command`): a buffered reader reads by it.
    pub(super) fn typed(&mut self, typed: Option<&str>) {
        if let SegmentReader::Buffered { command, .. } = self {
            *command = typed.map(str::to_owned);
        }
    }

    /// Reads one line. `hot`: an anchor matched it (or nothing is skimmed).
    pub(super) fn read(&mut self, line: &Line<'_>, hot: bool, out: &mut Out<'_>) -> Read {
        match self {
            SegmentReader::Journal(r) => r.read(line, hot, out),
            SegmentReader::Json(r) => r.read(line, hot, out),
            SegmentReader::Server(r, lines) => {
                let before = r.unrecognized();
                let read = r.read(line, hot, out);
                if r.unrecognized() == before {
                    return read;
                }
                either(read, lines.read(line, hot, out))
            }
            SegmentReader::Dmesg(r, lines) => {
                let before = r.unrecognized();
                let read = r.read(line, hot, out);
                if r.unrecognized() == before {
                    return read;
                }
                either(read, lines.read(line, hot, out))
            }
            SegmentReader::Unknown(lines) => lines.read(line, hot, out),
            SegmentReader::Prompt {
                first,
                continued,
                lines,
            } => {
                // Lines before an input's first strong line join its first
                // segment: the prompt may come after them.
                if continued.takes(line.text) || (*first && super::detect::is_prompt(line.text)) {
                    *first = false;
                    *continued = continued.after(line.text);
                    lines.prompt(line);
                    return Read::Skimmed(None);
                }
                lines.read(line, hot, out)
            }
            SegmentReader::Table(r) => r.read(line, out),
            SegmentReader::Buffered { lines, .. } => {
                lines.push((line.span, line.text.to_owned()));
                Read::Parsed
            }
        }
    }

    /// Lines of the segment counted as not recognised so far, where the
    /// reader counts them a line at a time (a table's and a buffered
    /// format's are known only at the end: `None`). A line's reading
    /// raised it when it was not understood.
    pub(super) fn unrecognized(&self) -> Option<u32> {
        match self {
            SegmentReader::Journal(r) => Some(r.unrecognized()),
            SegmentReader::Json(r) => Some(r.unrecognized()),
            SegmentReader::Server(_, lines)
            | SegmentReader::Dmesg(_, lines)
            | SegmentReader::Unknown(lines)
            | SegmentReader::Prompt { lines, .. } => Some(lines.unrecognized()),
            SegmentReader::Table(_) | SegmentReader::Buffered { .. } => None,
        }
    }

    /// Counts repeats within `limits` where the reader aggregates whole
    /// blocks itself (an `nvidia-smi -l` loop's snapshots).
    pub(super) fn aggregate(&mut self, limits: super::aggregate::Repeats) {
        if let SegmentReader::Table(r) = self {
            r.aggregate(limits);
        }
    }

    /// Closes the segment: what it did not turn into facts.
    pub(super) fn finish(self, out: &mut Out<'_>) -> Tally {
        let facts = &mut *out.facts;
        match self {
            SegmentReader::Journal(mut r) => Tally::unrecognized(r.finish(facts)),
            SegmentReader::Json(mut r) => Tally::unrecognized(r.finish(facts)),
            // Every line the segment's parser missed went to `lines`, which
            // counted it again unless another recogniser knew it.
            SegmentReader::Server(r, lines) => {
                r.finish();
                lines.finish(facts)
            }
            SegmentReader::Dmesg(mut r, lines) => {
                r.finish(facts);
                lines.finish(facts)
            }
            SegmentReader::Unknown(lines) | SegmentReader::Prompt { lines, .. } => {
                lines.finish(facts)
            }
            SegmentReader::Table(r) => r.finish(out),
            SegmentReader::Buffered {
                format,
                lines,
                command,
            } => {
                let lines: Vec<Line<'_>> = lines
                    .iter()
                    .map(|(span, text)| Line::bare(*span, text))
                    .collect();
                let missed = match (format, command) {
                    (Format::Ps, Some(command)) => {
                        Missed::Lines(super::ps::read_typed(&command, &lines, facts))
                    }
                    (Format::NvidiaSmiQueryGpu, Some(command)) => {
                        Missed::Count(super::nvidia_smi_csv::read_typed(&command, &lines, facts))
                    }
                    _ => parse_segment(format, &lines, facts),
                };
                match missed {
                    Missed::Count(n) => Tally::unrecognized(n),
                    // The lines the parser missed meet every recogniser,
                    // in order, as lines of an unknown segment do. Each was
                    // read in full (`Read::Parsed` above): its text is kept.
                    Missed::Lines(missed) => {
                        let mut reader = LineReader::new(Except::Nothing);
                        let mut kept = KeptLines::default();
                        let mut out = Out {
                            facts,
                            kept: &mut kept,
                        };
                        for i in missed {
                            if let Some(line) = lines.get(i) {
                                reader.read(line, true, &mut out);
                            }
                        }
                        reader.finish(facts)
                    }
                }
            }
        }
    }
}

fn server(hint: Option<Framework>) -> SegmentReader {
    SegmentReader::Server(
        Box::new(super::server::ServerReader::new(hint)),
        Box::new(LineReader::new(Except::Server)),
    )
}

/// A line read by two readers: in full if either read it so.
fn either(first: Read, second: Read) -> Read {
    match (first, second) {
        (Read::Parsed, _) | (_, Read::Parsed) => Read::Parsed,
        (Read::Skimmed(a), Read::Skimmed(b)) => Read::Skimmed(a.or(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_says_which_formats_get_a_line_at_a_time_reader() {
        for format in Format::ALL {
            let buffered = matches!(
                SegmentReader::new(format),
                SegmentReader::Buffered { .. } | SegmentReader::Table(_)
            );
            assert_eq!(SegmentReader::streams(format), !buffered, "{format:?}");
        }
    }
}
