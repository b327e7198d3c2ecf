//! A row of `ps` output.

use crate::source::Span;

#[derive(Debug, Clone, PartialEq)]
pub struct PsRecord {
    pub pid: u32,
    pub ppid: Option<u32>,
    pub user: Option<String>,
    /// `STAT` (`D` = uninterruptible sleep, `Z` = zombie).
    pub stat: Option<String>,
    /// `lstart`/`START`/`etime` as printed.
    pub started: Option<String>,
    /// `etime`/`etimes` as printed (`12-03:11:52`, `4074589` seconds), when
    /// the listing has that column: `started` is it when there is no start
    /// column.
    pub elapsed: Option<String>,
    pub cmd: String,
    pub span: Span,
}

/// A command typed at a shell prompt in a paste (`$ squeue -u alice`,
/// `[user@host dir]$ qstat -u user`), with what it printed: the lines that
/// were not blank before the next prompt or the input's end. "Printed
/// nothing" is itself a fact (a scheduler that lists no job).
#[derive(Debug, Clone, PartialEq)]
pub struct TypedCommand {
    /// The prompt line.
    pub span: Span,
    /// The command as typed, after the prompt.
    pub command: String,
    /// How many lines that were not blank it printed.
    pub output_lines: u32,
    /// The first of them, cut to [`TypedCommand::FIRST_OUTPUT_MAX`] bytes
    /// (a table's header, which a rule may ask about).
    pub first_output: Option<String>,
}

impl TypedCommand {
    /// How much of the first output line is kept.
    pub const FIRST_OUTPUT_MAX: usize = 256;

    /// Whether line `line` of the prompt's input is part of what this
    /// command printed, given the prompt that follows it (`next`, the next
    /// command's line in the same input, if any).
    pub fn prints_line(&self, line: u32, next: Option<u32>) -> bool {
        line > self.span.line && next.is_none_or(|n| line < n)
    }
}
