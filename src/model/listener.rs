//! A listening socket and the process that holds it, as `ss -ltnp` shows,
//! or the container that publishes it, as `docker ps` shows.

use crate::source::Span;

/// One socket in the listening state and one process that owns it (a socket
/// shared by several processes is one record per process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// `None` when the capture was run without `-p` or without the rights
    /// to see the owner.
    pub pid: Option<u32>,
    /// The process name as `ss` prints it (`ollama`, `python3`).
    pub process: Option<String>,
    /// The local address without brackets: `127.0.0.1`, `::`, `*`.
    pub address: String,
    pub port: u16,
    /// The container that publishes the port (`docker ps`'s `NAMES`), when
    /// the socket was read from a container listing rather than `ss`.
    pub container: Option<String>,
    pub span: Span,
}
