//! Words about a process listing's row (`ps`, `top`) that several findings
//! end a row's description with, kept in one place so that they read alike.

use crate::model::PsRecord;

/// `, started TIME` for a row that shows when its process started (`ps`'s
/// `START`/`STIME`/`lstart`), else nothing.
pub fn started(row: &PsRecord) -> String {
    row.started
        .as_deref()
        .map_or(String::new(), |s| format!(", started {s}"))
}
