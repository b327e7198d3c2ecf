//! Python tracebacks (docs/formats/servers.md) and C++ aborts, for any writer.
//!
//! A traceback opens at `Traceback (most recent call last):` (bare, or after
//! SGLang's `Scheduler hit an exception: `), collects its `File "…"` frames
//! and closes at its exception line, which becomes one event. Chained
//! tracebacks (`During handling of the above exception…`, `The above
//! exception was the direct cause…`) link each exception to the one printed
//! before it. Tracebacks of several ranks can interleave without prefixes:
//! exception lines are then paired in order with the tracebacks that opened,
//! and frames, which cannot be told apart, are dropped.

use std::collections::VecDeque;
use std::sync::LazyLock;

use regex::Regex;

use super::imbalance::{IMBALANCE_TEXT, parse_imbalance};
use super::{Cx, findings};
use crate::model::{
    ChainLink, Chained, CppAbort, Frame, Framework, OomSource, PyException, RankTag,
    ServerEventKind, Timestamp,
};
use crate::source::Span;

/// What an exception line is; read by hand ([`exception_line`]), kept as
/// its definition and test oracle.
#[cfg(test)]
pub(super) static EXCEPTION_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<name>(?:[A-Za-z_][0-9A-Za-z_.]*)?(?:Error|Exception|Exit|Interrupt|Warning|Failed|Timeout|StopIteration|StopAsyncIteration))(?::\x20?(?P<msg>.*))?$",
    )
    .expect("exception line regex")
});

static FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^\s*File "(?P<file>[^"]*)", line (?P<line>[0-9]+)(?:, in (?P<func>.+))?$"#)
        .expect("frame regex")
});

static TERMINATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^terminate called (?:after throwing an instance of '(?P<type>[^']+)'|without an active exception|recursively)",
    )
    .expect("terminate regex")
});

static WHAT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s+what\(\):\s+(?P<what>.*)$").expect("what() regex"));

static RAISED_FROM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Exception raised from (?P<from>.+?)(?: \(most recent call first\):?)?$")
        .expect("raised from regex")
});

/// Python multiprocessing's banner before a child's traceback:
/// `Process EngineCore_DP0:`.
static PROCESS_BANNER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^Process [0-9A-Za-z_.-]+:$").expect("process banner regex"));

/// A frame's source line that raises, pasted without its `File "…"` line
/// or its indentation (`raise ValueError(`): a traceback cut above it.
static RAISE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*raise\x20+[A-Za-z_][0-9A-Za-z_.]*(?:\(.*)?$").expect("raise line regex")
});

/// Frames flattened onto one line by a paste (`… ^^^^ File "/x.py", line
/// 4308, in f logprobs = …`): inside a traceback, still its frames.
static INLINE_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\bFile "[^"]+", line [0-9]+, in [0-9A-Za-z_]"#).expect("inline frame regex")
});

/// An exception class as Python prints it on the last line of a traceback:
/// a dotted path whose last part is a CamelCase name ending in `Error` or
/// `Exception` (`torch.distributed.DistNetworkError`, `ValueError`), or
/// `Exception` itself. A bare `Error: …` is what CLIs print (Ollama's
/// `Error: could not create directory …`), not Python.
static STRICT_EXCEPTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[a-z_][a-z0-9_]*\.)*(?:[A-Z][A-Za-z0-9]*(?:Error|Exception)|Exception)$")
        .expect("strict exception name regex")
});

/// The fixed lines PyTorch appends to every `CUDA error: …` message
/// (c10/cuda/CUDAException.cpp, CUDAMiscFunctions.cpp; docs/rules/cuda-oom-at-context-creation.md),
/// in their wordings across versions.
const CUDA_TRAILER: &[&str] = &[
    "CUDA kernel errors might be asynchronously reported at some other API call",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    "Device-side assertions were explicitly omitted for this error check",
    "Search for `cuda",
    "For more detailed error information, run with CUDA_LOG_FILE=stderr",
];

/// Whether `text` is one of PyTorch's CUDA error trailer lines.
pub(super) fn is_cuda_trailer(text: &str) -> bool {
    CUDA_TRAILER.iter().any(|t| text.starts_with(t))
}

/// grep's separator between groups of context lines (`grep -A/-B/-C`),
/// copied with the log.
pub(super) fn is_grep_separator(text: &str) -> bool {
    text.trim_end() == "--"
}

static CPP_FRAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^frame #[0-9]+: ").expect("C++ frame regex"));

/// Lines appended to one message at most: a stray writer must not swallow
/// a whole log.
const MAX_CONTINUATION: u32 = 64;

/// Traceback state of one writer.
#[derive(Debug, Default)]
pub(super) struct Tracebacks {
    /// Tracebacks that opened and have not reached their exception line,
    /// oldest first.
    open: VecDeque<Open>,
    /// The exception just closed, until the next line shows whether a
    /// chained traceback follows.
    last_closed: Option<Closed>,
    /// A chain marker was read: the next traceback continues `Closed`.
    pending_chain: Option<(ChainLink, Closed)>,
    in_traceback: bool,
    /// The event whose text the next unstructured lines continue.
    continuation: Option<Continuation>,
    /// The C++ abort whose `what():` and origin are still to come.
    cpp: Option<usize>,
    /// A `warnings` line was just read: the next line, indented two
    /// spaces, is the source line it quotes.
    pub(super) warning_source: bool,
    /// A `warnings` line with its message below it was just read: how many
    /// more of the message's lines may come before the source line.
    pub(super) warning_message: u8,
}

#[derive(Debug)]
struct Open {
    rank: Option<RankTag>,
    time: Option<Timestamp>,
    frames: Vec<Frame>,
    /// Another traceback of this writer was open at the same time.
    ambiguous: bool,
    /// The exception this traceback's exception is chained from, and the
    /// index of its event.
    chained: Option<(Chained, usize)>,
    /// Opened by a frame, its first line cut off (a log tail that starts
    /// mid-traceback): a traceback that opens properly replaces it.
    headless: bool,
}

#[derive(Debug, Clone, Copy)]
struct Closed {
    rank: Option<RankTag>,
    time: Option<Timestamp>,
    span: Span,
    index: usize,
}

#[derive(Debug)]
struct Continuation {
    index: usize,
    what: bool,
    /// The vLLM record prefix of the line that started it: only lines of the
    /// same record continue it.
    record: Option<String>,
    lines: u32,
}

impl Tracebacks {
    pub(super) fn end_continuation(&mut self) {
        self.continuation = None;
    }

    fn active(&self) -> bool {
        self.in_traceback || !self.open.is_empty()
    }

    /// Whether a line with no anchor could change this writer's state or
    /// make an event: inside a traceback, or while a message continues.
    /// What else is kept (the exception just closed, a C++ abort) only lines
    /// with an anchor read.
    pub(super) fn busy(&self) -> bool {
        self.active() || self.continuation.is_some() || self.warning_source
    }
}

/// Whether [`Cx::plain`] recognises `text` for a writer that is not
/// [busy](Tracebacks::busy), when no anchor is in it: the lines it accepts
/// without recording anything.
pub(super) fn idle_recognizes(text: &str) -> bool {
    text.trim().is_empty()
        || is_grep_separator(text)
        || is_cuda_trailer(text)
        || (text.starts_with("Process ") && PROCESS_BANNER.is_match(text))
        || (text.starts_with("frame #") && CPP_FRAME.is_match(text))
        || foreign_stack(text)
        || (text.starts_with("Python ") || text.starts_with('[') || text.starts_with("Type "))
            && REPL_BANNER.is_match(text)
}

/// The frames other runtimes print under a Python line that called into
/// them: Java's (`\tat pkg.Class.method(File.java:12)`, `... 3 more`, as
/// java/lang/Throwable.java prints them, JPype passing them on), and
/// dmlc-core's (MXNet's) `Stack trace:` / `  [bt] (0) lib.so(+0x2fa22f0)
/// [0x7f…]` (include/dmlc/logging.h), with MXNet's `Segmentation fault: 11`
/// above them (src/initialize.cc, its signal handler), and glog's (Caffe,
/// TensorFlow, Triton, PaddlePaddle): `*** Check failure stack trace: ***`
/// after a failed `CHECK` (src/utilities.cc, DumpStackTraceAndExit()), its
/// signal handler's `*** Aborted at 1486 (unix time) try "date -d @1486" if
/// you are using GNU date ***`, `PC: @ 0x7f… (unknown)` and `*** SIGSEGV
/// (@0x0) received by PID 123 (TID 0x7f…) from PID 0; stack trace: ***`
/// (src/signalhandler.cc), then a frame per line, `    @     0x7fab…
/// caffe::SyncedMemory::to_gpu()` or `(unknown)`. And Lua's (Torch7's
/// `luajit`, a Lua error under a CUDA one): `stack traceback:`, then a
/// frame per line, `\t[C]: in function 'error'`, `\tneural_style.lua:2: in
/// main chunk`, `\t...path/th:145: in main chunk` (lauxlib.c,
/// luaL_traceback: `%s:%d: in `, then `main chunk`, `function 'f'`,
/// `function <file:N>`, `local 'f'`, `method 'm'`, `field 'f'`, `upvalue
/// 'f'` or `?`; `(...tail calls...)`), and LuaJIT's `[C]: at 0x00405ea0`
/// (lib_debug.c). And TensorRT-LLM's own (`TllmException`, whose message
/// ends with the call stack it captured: cpp/tensorrt_llm/common/
/// tllmException.cpp, getTrace(), a frame per line as `%-3d %*p %s + %zd`
/// with the demangled symbol, or `%-3d %*p %s` with backtrace_symbols'
/// text: `1       0x7f5fe6888d85 /opt/tritonserver/backends/tensorrtllm/
/// libtriton_tensorrtllm.so(+0x35d85) [0x7f5fe6888d85]` under Triton's
/// `Failed to create instance: … [TensorRT-LLM][ERROR] …`).
fn foreign_stack(text: &str) -> bool {
    let t = text.trim_start();
    if t.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        return TLLM_FRAME.is_match(t);
    }
    if t.starts_with("stack traceback:")
        || t.starts_with("[C]: ")
        || t.starts_with("(...tail calls...)")
        || t.contains(": in ")
    {
        return LUA_FRAME.is_match(t);
    }
    (t.starts_with("at ")
        || t.starts_with("... ")
        || t.starts_with("[bt]")
        || t.starts_with("Stack trace")
        || t.starts_with("Segmentation fault: ")
        || t.starts_with("*** ")
        || t.starts_with("@ ")
        || t.starts_with("PC: @ "))
        && FOREIGN_FRAME.is_match(t)
}

static FOREIGN_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^(?:at [0-9A-Za-z_$.<>]+\((?:[0-9A-Za-z_$.-]+\.(?:java|kt|scala|groovy):[0-9]+|Native Method|Unknown Source)\)|\.\.\. [0-9]+ more|\[bt\] \([0-9]+\) \S.*|Stack trace(?: returned [0-9]+ entries)?:|Segmentation fault: [0-9]+|\*\*\* Check failure stack trace: \*\*\*|\*\*\* Aborted at [0-9]+ \(unix time\) try "date -d @[0-9]+" if you are using GNU date \*\*\*|\*\*\* SIG[A-Z]+ \(@0x[0-9a-f]+\) received by PID [0-9]+ \(TID 0x[0-9a-f]+\)(?: from PID [0-9]+)?; stack trace: \*\*\*|(?:PC: )?@ +0x[0-9a-f]+ +\S.*)\s*$"#,
    )
    .expect("foreign stack frame regex")
});

/// A frame of [`foreign_stack`]'s TensorRT-LLM call stack: the frame's
/// number padded to three, the address right-aligned in 18 (`%*p` with
/// `2 + 2 * sizeof(void*)`), then a symbol or backtrace_symbols' object
/// and offset.
static TLLM_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[0-9]{1,3} +0x[0-9a-f]{1,16} (?:\S+\(\S*\) \[0x[0-9a-f]+\]|\S.* \+ [0-9]+)\s*$")
        .expect("TensorRT-LLM stack frame regex")
});

static LUA_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:stack traceback:|\(\.\.\.tail calls\.\.\.\)|(?:\[C\]|[^\s:]+:[0-9]+): (?:in (?:main chunk|function (?:'[^']*'|<[^>\s]+>)|(?:local|method|field|upvalue|global|metamethod|for iterator) '[^']*'|\?)|at 0x[0-9a-f]+))\s*$",
    )
    .expect("lua stack frame regex")
});

/// The interactive interpreter's banner (CPython Modules/main.c,
/// pymain_header(): `Python 2.7.12 (default, …)`, `[GCC 5.4.0] on linux2`,
/// `Type "help", "copyright", "credits" or "license" for more information.`).
static REPL_BANNER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^(?:Python [23]\.[0-9]+\.[0-9]+\S* \(.*\)|\[(?:GCC|Clang|MSC) [^\]]*\] on [a-z0-9]+|Type "help", "copyright", "credits" or "license"(?: for more information)?\.)\s*$"#,
    )
    .expect("python banner regex")
});

/// Whether `text` is a traceback frame, which opens a traceback when none
/// is open (a paste cut below `Traceback (most recent call last):`).
pub(super) fn may_open(text: &str) -> bool {
    let t = text.trim_start();
    (t.starts_with("File \"") && FRAME.is_match(text))
        || (t.starts_with("raise ") && RAISE.is_match(text))
}

/// Whether `text` may be an exception line that closes a traceback whose
/// top a paste cut off (see [`strict_exception`]).
pub(super) fn may_be_bare_exception(text: &str) -> bool {
    text.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && (text.contains("Error") || text.contains("Exception"))
        && exception_line(text).is_some_and(|(name, _)| strict_exception(name))
}

/// Whether an exception line's name is unmistakably a Python exception
/// class (see [`STRICT_EXCEPTION`]): such a line outside a traceback is the
/// end of one whose top was cut off.
fn strict_exception(name: &str) -> bool {
    STRICT_EXCEPTION.is_match(name)
}

/// `Name: message` at the start of a line, for exception-like names:
/// [`EXCEPTION_LINE`] read by hand, as each line of a traceback segment
/// asks (issue 18's 2M distinct error lines read sixteen thousand in full,
/// and its captures were a tenth of that reading). The name is the run of
/// name bytes the line starts with (none of them is `:`, so a shorter name
/// would leave a name byte where the pattern wants `:` or the end), its
/// first byte a letter or `_`, ending in one of [`EXCEPTION_SUFFIXES`];
/// then the end, or `:`, an optional space and the message (`.*$`: no
/// newline in it).
pub(super) fn exception_line(text: &str) -> Option<(&str, &str)> {
    let b = text.as_bytes();
    let n = b
        .iter()
        .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
        .count();
    let name = &text[..n];
    if !b
        .first()
        .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_')
        || !EXCEPTION_SUFFIXES.iter().any(|s| name.ends_with(s))
    {
        return None;
    }
    match b.get(n) {
        None => Some((name, "")),
        Some(b':') => {
            let rest = &text[n + 1..];
            let msg = rest.strip_prefix(' ').unwrap_or(rest);
            (!msg.contains('\n')).then_some((name, msg))
        }
        Some(_) => None,
    }
}

/// The words an exception-like name ends in ([`EXCEPTION_LINE`]'s).
const EXCEPTION_SUFFIXES: [&str; 9] = [
    "Error",
    "Exception",
    "Exit",
    "Interrupt",
    "Warning",
    "Failed",
    "Timeout",
    "StopIteration",
    "StopAsyncIteration",
];

fn chain_marker(text: &str) -> Option<ChainLink> {
    if text.starts_with("During handling of the above exception") {
        Some(ChainLink::DuringHandling)
    } else if text.starts_with("The above exception was the direct cause") {
        Some(ChainLink::DirectCause)
    } else {
        None
    }
}

fn is_caret_line(text: &str) -> bool {
    let t = text.trim();
    !t.is_empty() && t.chars().all(|c| matches!(c, '^' | '~'))
}

impl Cx<'_> {
    /// A traceback starts (`rank` and `time` are those of the line that
    /// announced it).
    pub(super) fn open_traceback(&mut self, rank: Option<RankTag>, time: Option<Timestamp>) {
        self.open_traceback_as(rank, time, false);
    }

    /// [`Self::open_traceback`]; `headless` when a frame opened it. A
    /// fragment whose exception never came is dropped when a whole
    /// traceback starts, rather than made ambiguous with it.
    fn open_traceback_as(
        &mut self,
        rank: Option<RankTag>,
        time: Option<Timestamp>,
        headless: bool,
    ) {
        let tb = &mut self.stream.tracebacks;
        tb.continuation = None;
        if !headless {
            tb.open.retain(|o| !o.headless);
        }
        let open = match tb.pending_chain.take() {
            Some((link, closed)) => Open {
                rank: closed.rank,
                time: closed.time,
                frames: Vec::new(),
                ambiguous: false,
                chained: Some((
                    Chained {
                        link,
                        span: closed.span,
                    },
                    closed.index,
                )),
                headless,
            },
            None => Open {
                rank,
                time,
                frames: Vec::new(),
                ambiguous: false,
                chained: None,
                headless,
            },
        };
        tb.open.push_back(open);
        if tb.open.len() > 1 {
            for o in &mut tb.open {
                o.ambiguous = true;
                o.frames.clear();
            }
        }
        tb.in_traceback = true;
    }

    /// Reads a line with no format prefix of its own (or the message of a
    /// vLLM record, whose `record` prefix is given): traceback structure,
    /// exception lines, C++ aborts, and the lines that continue a message.
    /// Returns whether the line was recognised.
    pub(super) fn plain(
        &mut self,
        text: &str,
        record: Option<&str>,
        time: Option<Timestamp>,
    ) -> bool {
        let continuation = self.stream.tracebacks.continuation.take();
        if text.trim().is_empty() || is_grep_separator(text) {
            return true;
        }
        if text.starts_with("Traceback (most recent call last):") {
            self.open_traceback(self.writer.rank, time);
            return true;
        }
        if PROCESS_BANNER.is_match(text) {
            return true;
        }
        let tb = &mut self.stream.tracebacks;
        if let Some(link) = chain_marker(text) {
            tb.pending_chain = tb.last_closed.take().map(|closed| (link, closed));
            tb.in_traceback = true;
            return true;
        }
        if let Some(c) = FRAME.captures(text) {
            if !tb.active() {
                // A paste that starts below `Traceback (most recent call
                // last):`: the frame is unmistakable, so the traceback is
                // open all the same.
                self.open_traceback_as(self.writer.rank, time, true);
            }
            let tb = &mut self.stream.tracebacks;
            if let [only] = tb.open.make_contiguous() {
                if !only.ambiguous {
                    only.frames.push(Frame {
                        file: c["file"].to_owned(),
                        line: c["line"].parse().unwrap_or(0),
                        function: c.name("func").map(|m| m.as_str().to_owned()),
                    });
                }
            }
            return true;
        }
        if RAISE.is_match(text) {
            if !self.stream.tracebacks.active() {
                self.open_traceback_as(self.writer.rank, time, true);
            }
            return true;
        }
        let tb = &mut self.stream.tracebacks;
        // A frame's code line, indented four spaces.
        if text.starts_with("    ") || is_caret_line(text) {
            return tb.active() || foreign_stack(text);
        }
        // A frame's source line indented by a tab, where the paste turned
        // the four spaces into one (batch Q 1065, Zulip's run-dev in
        // zulip/zulip#11386: `\tapp.listen(proxy_port, …)`).
        if text.starts_with('\t') && tb.active() && !text.trim().is_empty() {
            return true;
        }
        if tb.active() && text.contains("File \"") && INLINE_FRAME.is_match(text) {
            return true;
        }
        if self.cpp_line(text, record, time) {
            return true;
        }
        if let Some((name, message)) = exception_line(text) {
            // A message that continues takes a further `Name: …` line as
            // its own, unless a detector or an open traceback claims it.
            let bare = continuation.is_none();
            if self.close(name, message, text, record, time, bare) {
                return true;
            }
        }
        if let Some(c) = continuation {
            if c.record.as_deref() == record && c.lines < MAX_CONTINUATION {
                self.append(&c, text);
                self.stream.tracebacks.continuation = Some(Continuation {
                    lines: c.lines + 1,
                    ..c
                });
                return true;
            }
        }
        is_cuda_trailer(text)
    }

    /// An exception line: closes the oldest open traceback. Outside a
    /// traceback only an unmistakable line is trusted: one a detector
    /// reads, or one whose name is a Python exception class (a paste that
    /// kept only a traceback's last line); `Timeout: x` alone may be
    /// anything.
    fn close(
        &mut self,
        name: &str,
        message: &str,
        text: &str,
        record: Option<&str>,
        time: Option<Timestamp>,
        bare: bool,
    ) -> bool {
        let imbalance = message.contains(IMBALANCE_TEXT);
        let found = if imbalance {
            Vec::new()
        } else {
            findings(text, Some(name))
        };
        let tb = &mut self.stream.tracebacks;
        let trusted =
            tb.active() || imbalance || !found.is_empty() || (bare && strict_exception(name));
        if !trusted {
            return false;
        }
        let open = tb.open.pop_front().unwrap_or_else(|| {
            let chained = tb.pending_chain.take();
            Open {
                rank: chained.map_or(self.writer.rank, |(_, c)| c.rank),
                time: chained.map_or(time, |(_, c)| c.time),
                frames: Vec::new(),
                ambiguous: false,
                chained: chained.map(|(link, c)| (Chained { link, span: c.span }, c.index)),
                headless: false,
            }
        });
        tb.in_traceback = !tb.open.is_empty();
        let (rank, time) = (open.rank, open.time.or(time));
        let index = if imbalance {
            // Only SGLang runs this check, whatever the stream showed so far
            // (a capture may start at the exception line).
            self.stream.framework = Some(Framework::Sglang);
            let kind =
                ServerEventKind::MemoryImbalance(parse_imbalance(message, Some(name.to_owned())));
            self.push(kind, None, rank, time)
        } else {
            let exception = PyException {
                name: name.to_owned(),
                message: message.to_owned(),
                frames: open.frames,
                chained_from: open.chained.map(|(c, _)| c),
                wrapped_by: None,
            };
            let index = self.push(ServerEventKind::Exception(exception), None, rank, time);
            if let Some((_, earlier)) = open.chained {
                if let Some(ServerEventKind::Exception(e)) = self
                    .facts
                    .server_events
                    .get_mut(earlier)
                    .map(|e| &mut e.kind)
                {
                    e.wrapped_by = Some(self.span);
                }
            }
            index
        };
        for (kind, framework) in found {
            self.push(kind, framework, rank, time);
        }
        let tb = &mut self.stream.tracebacks;
        tb.last_closed = Some(Closed {
            rank,
            time,
            span: self.span,
            index,
        });
        if !imbalance {
            tb.continuation = Some(Continuation {
                index,
                what: false,
                record: record.map(str::to_owned),
                lines: 0,
            });
        }
        true
    }

    /// `terminate called …`, `  what():  …`, `Exception raised from …` and
    /// `frame #N: …`.
    fn cpp_line(&mut self, text: &str, record: Option<&str>, time: Option<Timestamp>) -> bool {
        if let Some(c) = TERMINATE.captures(text) {
            let abort = CppAbort {
                exception: c.name("type").map(|m| m.as_str().to_owned()),
                ..CppAbort::default()
            };
            let index = self.push(ServerEventKind::CppAbort(abort), None, None, time);
            self.stream.tracebacks.cpp = Some(index);
            return true;
        }
        if let Some(c) = WHAT.captures(text) {
            let what = c["what"].to_owned();
            let index = match self.stream.tracebacks.cpp {
                Some(index) => index,
                None => self.push(
                    ServerEventKind::CppAbort(CppAbort::default()),
                    None,
                    None,
                    time,
                ),
            };
            if let Some(ServerEventKind::CppAbort(a)) =
                self.facts.server_events.get_mut(index).map(|e| &mut e.kind)
            {
                a.what = Some(what.clone());
            }
            self.stream.tracebacks.cpp = Some(index);
            self.detect(&what, None, None, time);
            self.stream.tracebacks.continuation = Some(Continuation {
                index,
                what: true,
                record: record.map(str::to_owned),
                lines: 0,
            });
            return true;
        }
        if let Some(c) = RAISED_FROM.captures(text) {
            if let Some(index) = self.stream.tracebacks.cpp.take() {
                if let Some(ServerEventKind::CppAbort(a)) =
                    self.facts.server_events.get_mut(index).map(|e| &mut e.kind)
                {
                    a.raised_from = Some(c["from"].to_owned());
                }
            }
            return true;
        }
        // Another runtime's frames (Java's, dmlc's, glog's) are read as
        // the prefilter's skim reads them.
        CPP_FRAME.is_match(text) || foreign_stack(text)
    }

    fn append(&mut self, c: &Continuation, text: &str) {
        self.continue_oom(c, text);
        let Some(event) = self.facts.server_events.get_mut(c.index) else {
            return;
        };
        let target = match &mut event.kind {
            ServerEventKind::Exception(e) if !c.what => &mut e.message,
            ServerEventKind::CppAbort(a) if c.what => a.what.get_or_insert_with(String::new),
            _ => return,
        };
        target.push('\n');
        target.push_str(text);
    }

    /// PyTorch's out-of-memory exception pasted split at its sentences:
    /// the `GPU 0 has a total capacity …` and `Process N has … memory in
    /// use` lines under it are the same message, and the out-of-memory
    /// event read from its first line is read again from all of them.
    fn continue_oom(&mut self, c: &Continuation, text: &str) {
        if c.what || !super::oom::continues(text) {
            return;
        }
        let Some(ServerEventKind::Exception(e)) =
            self.facts.server_events.get(c.index).map(|e| &e.kind)
        else {
            return;
        };
        let whole = format!("{}: {}\n{text}", e.name, e.message);
        let span = self.span;
        let first = self.facts.server_events[c.index].span;
        for event in self.facts.server_events[c.index..]
            .iter_mut()
            .filter(|ev| ev.span == first)
        {
            if let ServerEventKind::CudaOom(o) = &mut event.kind
                && o.source == OomSource::Allocator
                && let Some(mut read) = super::oom::parse(&whole)
            {
                read.exception = o.exception.take();
                read.continued = std::mem::take(&mut o.continued);
                read.continued.push(span);
                *o = read;
            }
        }
    }
}
