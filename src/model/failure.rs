//! Failures as processes report them: Python exceptions (with their chains),
//! C++ aborts, and vLLM's notices that an engine or worker process died.

use crate::source::Span;

/// One exception of a Python traceback (docs/formats/servers.md).
#[derive(Debug, Clone, PartialEq)]
pub struct PyException {
    /// As printed, qualified when Python qualifies it: `torch.OutOfMemoryError`.
    pub name: String,
    /// The text after `Name: `, with any lines that continue it joined by `\n`.
    pub message: String,
    /// `File "…", line N, in f` lines, outermost call first, the raising
    /// frame last. Empty when the traceback's lines could not be told apart
    /// from another writer's (unprefixed tracebacks of several ranks that
    /// interleave) or when the log starts mid-traceback.
    pub frames: Vec<Frame>,
    /// The exception printed before this one in a chained traceback, which
    /// this one was raised while handling (`During handling of the above
    /// exception…`) or from (`The above exception was the direct cause…`).
    /// `None` for the innermost exception: the real cause.
    pub chained_from: Option<Chained>,
    /// The exception of the same chain that was raised while handling this
    /// one. `None` for the outermost exception: the one that propagated.
    pub wrapped_by: Option<Span>,
}

impl PyException {
    /// The innermost exception of a chain, the one that started it.
    pub fn is_root_cause(&self) -> bool {
        self.chained_from.is_none()
    }

    /// The outermost exception of a chain, the one that propagated.
    pub fn is_outermost(&self) -> bool {
        self.wrapped_by.is_none()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub file: String,
    pub line: u32,
    /// `None` for frames printed without `, in <function>`.
    pub function: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainLink {
    /// `During handling of the above exception, another exception occurred:`
    /// (implicit `__context__`).
    DuringHandling,
    /// `The above exception was the direct cause of the following exception:`
    /// (`raise … from …`).
    DirectCause,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chained {
    pub link: ChainLink,
    /// The exception line of the earlier exception.
    pub span: Span,
}

/// `terminate called after throwing an instance of 'c10::DistBackendError'`
/// and the `what():` and `Exception raised from …` lines after it: a C++
/// exception nobody caught, ending the process with SIGABRT.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CppAbort {
    /// `c10::DistBackendError`; `None` for `terminate called without an
    /// active exception`.
    pub exception: Option<String>,
    /// The text after `what():`, continuation lines joined by `\n`.
    pub what: Option<String>,
    /// `checkTimeout at …/ProcessGroupNCCL.cpp:607` from `Exception raised from …`.
    pub raised_from: Option<String>,
}

/// vLLM's lines about a failed engine or worker process (docs/formats/servers.md,
/// docs/rules/vllm-engine-core-failed.md). They are consequences: the cause is in the failed
/// process's own lines before them.
#[derive(Debug, Clone, PartialEq)]
pub enum VllmFailure {
    /// `EngineCore failed to start.`
    EngineCoreFailedToStart,
    /// `EngineCore encountered a fatal error.`
    EngineCoreFatalError,
    /// `EngineCore encountered an issue. See stack trace (above) for the root cause.`
    EngineDead,
    /// `Engine core initialization failed. See root cause above. Failed core
    /// proc(s): {'EngineCore_DP0': 1}`: each failed process with its exit code.
    EngineInitFailed { failed: Vec<(String, i32)> },
    /// `Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.`
    EngineCoreDied { name: String },
    /// `WorkerProc failed to start.`
    WorkerProcFailedToStart,
    /// `WorkerProc initialization failed due to an exception in a background process.`
    WorkerProcInitFailed,
    /// `Worker proc VllmWorker-1 died unexpectedly[ (exit code: -9)], shutting
    /// down executor.` and v0's `Worker VllmWorkerProcess pid 4243 died, exit
    /// code: -9`. A negative exit code is the signal that killed it.
    WorkerDied {
        name: String,
        pid: Option<u32>,
        exit_code: Option<i32>,
    },
    /// v0: `Exception in worker VllmWorkerProcess while processing method init_device.`
    WorkerException { worker: String, method: String },
}
