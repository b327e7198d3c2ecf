//! A loaded kernel module, as `lsmod` (`/proc/modules`) lists it.

use crate::source::Span;

/// One `lsmod` row: `nvidia  56717312  188 nvidia_uvm,nvidia_modeset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelModule {
    /// The module's name (`nvidia`, `nvidia_uvm`).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// How many references hold it (modules and open devices).
    pub used: u32,
    /// The modules that depend on it, as listed (may be incomplete: open
    /// file handles count in `used` but have no name here).
    pub users: Vec<String>,
    pub span: Span,
}
