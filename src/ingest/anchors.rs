//! The prefilter: the literal anchors of every rule, matched at grep speed
//! over each line so that only lines that can matter are kept as messages;
//! with the parsers' own anchors ([`FACT_ANCHORS`]), the lines ingest must
//! read in full. A line with none of them is only skimmed (see
//! `ingest::reader`).

use std::sync::{Arc, LazyLock, Mutex};

use aho_corasick::{AhoCorasick, AhoCorasickKind, Input};

/// The literals without which no parser makes a fact of a line (journal
/// lines are also read in full for PID 1, and for each PID's first entries,
/// which their structure tells). Matched like the rules' anchors, ASCII
/// case-insensitively. A parser that learns a new kind of line adds its
/// literal here; the equivalence test (tests/it/prefilter.rs) reads every
/// fixture both ways. None holds `/`, `"` or `\`, which JSON may escape.
pub const FACT_ANCHORS: &[&str] = &[
    // SGLang's own lines (server/sglang.rs).
    "server_args=",
    "hit an exception",
    "sigquit",
    "fired up and ready",
    "memory capacity is unbalanced",
    "scheduler is dead",
    "watchdog",
    "Init torch distributed",
    "Init parallel ends",
    "Memory baseline taken",
    "Load weight",
    "KV Cache is allocated",
    "Memory pool end",
    "Capture cuda graph",
    "max_total_num_tokens=",
    // uvicorn (server/uvicorn.rs).
    "server process",
    "Uvicorn running on",
    "Application startup complete",
    "Shutting down",
    "error while attempting to bind",
    // vLLM (server/vllm.rs).
    "vLLM API server version",
    "LLM engine (v",
    "args: ",
    "Model loading took",
    "GPU KV cache size",
    "Maximum concurrency for",
    "KV cache memory",
    "reserved for KV Cache",
    "# GPU blocks",
    "EngineCore",
    "WorkerProc",
    "Engine core",
    "died unexpectedly",
    " died, exit code",
    // A shell's report of a job a signal ended (server/pylog.rs).
    "Killed",
    "Terminated",
    "Aborted",
    "Segmentation fault",
    "Bus error",
    // Tracebacks, chained exceptions, C++ aborts (server/traceback.rs).
    "traceback",
    "exception",
    "terminate called",
    "what():",
    // CUDA OOM, c10d and NCCL (server/oom.rs, torch.rs, nccl.rs).
    "out of memory",
    "Tried to allocate",
    "Heartbeat monitor timed out",
    "taking the entire process down",
    "NCCL",
    // The kernel (kernel/nvrm.rs, kernel/oom.rs).
    "NVRM",
    // The compiler line of /proc/driver/nvidia/version (kernel/mod.rs).
    "GCC version:",
    "oom-killer",
    "Killed process",
    "oom-kill:",
    "oom_reaper",
    // Bare and cut framework lines, cut tracebacks, the programs around a
    // server (server/vllm.rs, traceback.rs, runtime.rs, pylog.rs).
    "Loading model weights took",
    "GPU blocks:",
    "Memory profiling",
    "Writing input of failed execution",
    "loading failed with error",
    "Cannot start service",
    "Encountered errors while bringing up",
    "runc create failed",
    "nvidia-container-cli",
    "nvml error",
    "Illegal instruction",
];

/// A set of literals, matched ASCII case-insensitively anywhere in a line.
#[derive(Debug, Clone)]
pub struct Anchors {
    matcher: Option<AhoCorasick>,
    literals: Vec<String>,
}

impl Anchors {
    pub fn new<I, S>(literals: I) -> Anchors
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let literals: Vec<String> = literals
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let matcher = (!literals.is_empty()).then(|| {
            AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(&literals)
                .expect("anchors are plain literals")
        });
        Anchors { matcher, literals }
    }

    /// Keeps no line: for callers that only want typed facts.
    pub fn none() -> Anchors {
        Anchors {
            matcher: None,
            literals: Vec::new(),
        }
    }

    pub fn matches(&self, line: &str) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(line))
    }

    /// Every literal, in the order given.
    pub fn literals(&self) -> &[String] {
        &self.literals
    }

    /// These anchors and [`FACT_ANCHORS`]: a line with none of them is only
    /// skimmed. Compiled to a DFA, the fastest search, once per set of rules
    /// (a replay analyses many bundles with the same rules).
    pub(crate) fn with_facts(&self) -> Arc<Hot> {
        /// The last set built, by the rule literals it was built for.
        type Built = Option<(Vec<String>, Arc<Hot>)>;
        static LAST: LazyLock<Mutex<Built>> = LazyLock::new(|| Mutex::new(None));
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((literals, hot)) = last.as_ref() {
            if *literals == self.literals {
                return Arc::clone(hot);
            }
        }
        let all: Vec<&str> = self
            .literals
            .iter()
            .map(String::as_str)
            .chain(FACT_ANCHORS.iter().copied())
            .collect();
        let matcher = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&all)
            .or_else(|_| {
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .build(&all)
            })
            .expect("anchors are plain literals");
        let hot = Arc::new(Hot {
            matcher,
            rules: self.literals.len(),
        });
        *last = Some((self.literals.clone(), Arc::clone(&hot)));
        hot
    }
}

/// The rules' anchors and the parsers': whether a line must be read in full.
#[derive(Debug)]
pub(crate) struct Hot {
    matcher: AhoCorasick,
    /// The rules' literals come first: a match of pattern below this makes
    /// the line a message.
    rules: usize,
}

impl Hot {
    #[cfg(test)]
    fn matches(&self, line: &str) -> bool {
        self.matcher.is_match(line)
    }

    /// The first match of each line of `block` that has one, many lines
    /// searched at once: where it starts, and whether it is a rule's (then
    /// the line is a message; otherwise it may still be one, see
    /// [`Anchors::matches`]). No anchor holds a newline, so the search goes
    /// on from the next line.
    pub(crate) fn scan(&self, block: &[u8], found: &mut Vec<(usize, bool)>) {
        let mut at = 0;
        while at < block.len() {
            let Some(m) = self.matcher.find(Input::new(block).range(at..)) else {
                break;
            };
            found.push((m.start(), m.pattern().as_usize() < self.rules));
            at = memchr::memchr(b'\n', &block[m.end()..]).map_or(block.len(), |i| m.end() + i + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_match_case_insensitively_anywhere() {
        let a = Anchors::new(["Xid", "address already in use"]);
        assert!(a.matches("kernel: NVRM: XID (PCI:0000:3b:00): 79"));
        assert!(a.matches("OSError: [Errno 98] Address already in use"));
        assert!(!a.matches("all good"));
        assert!(!Anchors::none().matches("Xid"));
    }

    #[test]
    fn fact_anchors_survive_json_escaping_and_extend_the_rules() {
        for a in FACT_ANCHORS {
            assert!(!a.contains(['/', '"', '\\']), "{a}");
        }
        let hot = Anchors::new(["Address already in use"]).with_facts();
        assert!(hot.matches("OSError: [Errno 98] address already in use"));
        assert!(hot.matches("kernel: NVRM: Xid (PCI:0000:3b:00): 79"));
        assert!(!hot.matches("sshd[900]: Accepted publickey for deploy"));
    }
}
