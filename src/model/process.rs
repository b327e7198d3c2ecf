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
    pub cmd: String,
    pub span: Span,
}
