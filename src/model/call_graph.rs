//! A line of the call graph macOS's `sample` (and Activity Monitor's
//! "Sample Process") prints under `Call graph:`, as `ingest/stack_frames.rs`
//! reads it: a thread's head (`1740 Thread_96991399   DispatchQueue_1:
//! com.apple.main-thread  (serial)`) or a frame under it (`+ 1740 start
//! (in dyld) + 6992  [0x183553e00]`). A rule reads where a thread sat.

use crate::source::Span;

/// One line of the call graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallGraphLine {
    /// The column its sample count stands at: a frame deeper in the stack
    /// stands further right.
    pub depth: usize,
    /// The samples the thread or frame was seen in.
    pub samples: u64,
    /// A thread's head (`Thread_N …`), not a frame.
    pub thread: bool,
    /// A frame's symbol (`server.serve`, `__ulock_wait2`, `???`), or a
    /// thread's head after its count.
    pub text: String,
    /// A frame's image (`mlx-serve`, `libsystem_kernel.dylib`).
    pub image: Option<String>,
    pub span: Span,
}
