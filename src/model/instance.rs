//! A row of a serving control plane's instance table: an instance it
//! believes runs (GPUStack's model instances: name, worker, port, state),
//! as a table drawn in text lists it.

use crate::source::Span;

/// One instance row, with the cells the rules compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRow {
    /// The instance's name (`Qwen/Qwen3-32B-20VvO`).
    pub name: String,
    /// The worker (node) it is placed on, when the table says.
    pub worker: Option<String>,
    /// The port its server listens on, when the table has one.
    pub port: Option<u16>,
    /// Its state as printed (`RUNNING`, `ERROR`), when the table says.
    pub state: Option<String>,
    pub span: Span,
}
