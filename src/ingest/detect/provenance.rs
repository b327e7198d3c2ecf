//! Where a block of host output stands: in an input of its own (a file of
//! nvidia-smi output, a paste of commands and what they printed), or inside
//! another format's input (a table a server printed into its log, a block
//! pasted below a log with no prompt above it). Anything a process logs can
//! look like an nvidia-smi table at column 0, so a block inside a log is
//! weaker evidence: the rules never act on it alone (docs/remediation.md,
//! "Where a fact comes from").
//!
//! The rule, segment by segment, in input order:
//! - an input whose first segment of a known format is a log (a server's
//!   output, a journal, a kernel log) is that log's file: every block of
//!   host output in it stands inside the log, whatever stands above it (a
//!   log can carry a prompt-looking line as easily as a table);
//! - otherwise (a paste, a file of command output) a block stands inside a
//!   log when a log segment came before it and no shell prompt since;
//! - the journal lines `systemctl status` prints below a unit's block are
//!   part of that command's output, not a log above the next block.

use crate::ingest::Format;

/// What a segment is for the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A command's report of the host: facts a remediation may act on.
    Host,
    /// What a process or the system logged: may carry any text.
    Log,
    Prompt,
    /// Text in no known format: neither.
    Neutral,
}

fn kind(format: Format) -> Kind {
    match format {
        Format::NvidiaSmiTable
        | Format::NvidiaSmiQueryGpu
        | Format::NvidiaSmiComputeApps
        | Format::NvidiaSmiQ
        | Format::NvidiaSmiQXml
        | Format::NvidiaSmiPmon
        | Format::Gpustat
        | Format::Ss
        | Format::Lsmod
        | Format::Coredumpctl
        | Format::SystemctlStatus
        | Format::SystemctlShow
        | Format::ProcCgroup
        | Format::Ps
        | Format::SglangCheckEnv
        | Format::TorchCollectEnv
        | Format::PackageLog => Kind::Host,
        Format::ShellPrompt => Kind::Prompt,
        Format::Unknown => Kind::Neutral,
        // Every other format, and any added later, is something logged.
        _ => Kind::Log,
    }
}

/// Whether `format` is a command's report of the host (an nvidia-smi
/// table, `ps` rows, a `systemctl status` block): output whose lines a log
/// record does not continue ([`super::Segmenter::line`]).
pub(in crate::ingest) fn is_host_output(format: Format) -> bool {
    kind(format) == Kind::Host
}

/// The journal modes `systemctl status` may print its tail in.
fn is_status_tail(format: Format) -> bool {
    matches!(
        format,
        Format::JournalShort
            | Format::JournalShortIso
            | Format::JournalShortFull
            | Format::JournalShortUnix
            | Format::JournalShortMonotonic
            | Format::JournalShortDelta
            | Format::JournalWithUnit
    )
}

/// The rule's state over one input's segments.
#[derive(Debug, Default)]
pub(in crate::ingest) struct Provenance {
    /// Whether the input is a log's file, once its first segment of a known
    /// format says.
    log_file: Option<bool>,
    /// The log a block now would stand inside.
    inside: Option<Format>,
    previous: Option<Format>,
}

impl Provenance {
    /// The format of the log a segment of `format` stands inside, if it is
    /// host output that does. Called once per segment, in input order.
    pub(in crate::ingest) fn segment(&mut self, format: Format) -> Option<Format> {
        let kind = kind(format);
        let previous = self.previous.replace(format);
        if self.log_file.is_none() && kind != Kind::Neutral {
            self.log_file = Some(kind == Kind::Log);
        }
        match kind {
            Kind::Host => self.inside,
            Kind::Prompt => {
                if self.log_file != Some(true) {
                    self.inside = None;
                }
                None
            }
            Kind::Log => {
                let tail = previous == Some(Format::SystemctlStatus) && is_status_tail(format);
                if !tail || self.log_file == Some(true) {
                    self.inside = Some(format);
                }
                None
            }
            Kind::Neutral => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(formats: &[Format]) -> Vec<Option<Format>> {
        let mut p = Provenance::default();
        formats.iter().map(|f| p.segment(*f)).collect()
    }

    #[test]
    fn a_paste_of_outputs_stands_alone_and_a_status_tail_is_no_log() {
        use Format::*;
        assert_eq!(
            run(&[
                NvidiaSmiTable,
                Ps,
                SystemctlStatus,
                JournalShort,
                SystemctlStatus,
                JournalShort
            ]),
            [None; 6]
        );
        // Prompts between the pieces of a paste.
        assert_eq!(
            run(&[ShellPrompt, JournalShort, ShellPrompt, NvidiaSmiTable]),
            [None; 4]
        );
        // Prose first is no log.
        assert_eq!(run(&[Unknown, NvidiaSmiTable]), [None, None]);
    }

    #[test]
    fn a_block_below_a_log_stands_inside_it() {
        use Format::*;
        // A server log with a table, ps rows and a status block printed into it.
        assert_eq!(
            run(&[SglangLog, NvidiaSmiTable, Ps, SystemctlStatus]),
            [None, Some(SglangLog), Some(SglangLog), Some(SglangLog)]
        );
        // In a log's file a prompt-looking line changes nothing.
        assert_eq!(
            run(&[JournalShortIso, ShellPrompt, NvidiaSmiTable]),
            [None, None, Some(JournalShortIso)]
        );
        // In a paste, a block pasted below a log with no prompt between.
        assert_eq!(
            run(&[NvidiaSmiTable, SglangLog, Ps, ShellPrompt, Ps]),
            [None, None, Some(SglangLog), None, None]
        );
        // Unknown lines between the log and the block do not end the log.
        assert_eq!(
            run(&[ShellPrompt, VllmLog, Unknown, NvidiaSmiTable]),
            [None, None, None, Some(VllmLog)]
        );
    }
}
