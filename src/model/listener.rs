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

/// A process that has a GPU's device node open, as `fuser -v /dev/nvidia*`
/// lists it (`/dev/nvidia0:  ubuntu  4411 F...m python`): it holds a CUDA
/// context (or at least the driver) on that GPU, whatever nvidia-smi's
/// process table shows; how much memory it holds is not said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceHolder {
    /// The device file: `/dev/nvidia0`, `/dev/nvidiactl`, `/dev/nvidia-uvm`.
    pub file: String,
    /// The GPU of a `/dev/nvidiaN` node; `None` for the driver's shared
    /// nodes (`nvidiactl`, `nvidia-uvm`).
    pub gpu: Option<u32>,
    pub user: String,
    pub pid: u32,
    /// fuser's access letters: `F` open for writing, `m` mapped (`F...m`).
    pub access: String,
    pub command: String,
    pub span: Span,
}
