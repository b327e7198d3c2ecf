//! The prefilter: the literal anchors of every rule, matched at grep speed
//! over each line so that only lines that can matter are kept as messages;
//! with the parsers' own anchors ([`FACT_ANCHORS`]), the lines ingest must
//! read in full. A line with none of them is only skimmed (see
//! `ingest::reader`).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

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
    /// Built on the first [`Anchors::matches`]: a run with the prefilter
    /// on searches [`Anchors::with_facts`] instead, and never needs it.
    matcher: OnceLock<Option<AhoCorasick>>,
    literals: Vec<String>,
}

impl Anchors {
    pub fn new<I, S>(literals: I) -> Anchors
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut literals: Vec<String> = literals
            .into_iter()
            .map(|s| s.as_ref().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        // A line inside a JSON record (`journalctl -o json`'s MESSAGE, a
        // Kubernetes JSON log) is searched as the record's bytes: a literal
        // with a quote or a backslash is also looked for as JSON escapes
        // it, or the line is only skimmed.
        let escaped: Vec<String> = literals
            .iter()
            .filter(|l| l.contains(['"', '\\']))
            .map(|l| l.replace('\\', "\\\\").replace('"', "\\\""))
            .collect();
        literals.extend(escaped);
        Anchors {
            matcher: OnceLock::new(),
            literals,
        }
    }

    /// Keeps no line: for callers that only want typed facts.
    pub fn none() -> Anchors {
        Anchors::new(std::iter::empty::<&str>())
    }

    pub fn matches(&self, line: &str) -> bool {
        self.matcher
            .get_or_init(|| {
                let literals: Vec<&str> = self.literals.iter().map(String::as_str).collect();
                let cover = Cover::of(&literals, &[]);
                (!cover.is_empty()).then(|| {
                    AhoCorasick::builder()
                        .ascii_case_insensitive(true)
                        .build(&cover)
                        .expect("anchors are plain literals")
                })
            })
            .as_ref()
            .is_some_and(|m| m.is_match(line))
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
        let literals: Vec<&str> = self.literals.iter().map(String::as_str).collect();
        let rules = Cover::of(&literals, &[]);
        let facts = Cover::of(FACT_ANCHORS, &rules);
        let hot = Arc::new(Hot {
            search: Search::new(&[&rules, &facts]),
            backward: OnceLock::new(),
            groups: [&rules, &facts].map(|g| g.iter().map(|&l| l.to_owned()).collect()),
            literals: self.literals.clone(),
            rules_only: OnceLock::new(),
        });
        *last = Some((self.literals.clone(), Arc::clone(&hot)));
        hot
    }
}

/// The fewest literals that find the same lines as a set of them: a
/// literal that holds another (ASCII case folded) finds no line the other
/// does not, and only makes the search bigger to build. The catalogs' rows
/// bring hundreds of anchors, many of them longer forms of another
/// (`Cuda failure 'out of memory'` beside `out of memory`): the search over
/// what is left is built in half the time, and finds the same lines.
struct Cover;

impl Cover {
    /// The literals of `literals` that hold no other one and none of
    /// `taken` (each once, in the order given).
    fn of<'a>(literals: &[&'a str], taken: &[&str]) -> Vec<&'a str> {
        /// Literals by their first four bytes, folded; shorter ones apart.
        #[derive(Default)]
        struct Kept {
            by_head: HashMap<[u8; 4], Vec<Vec<u8>>>,
            short: Vec<Vec<u8>>,
        }
        impl Kept {
            fn add(&mut self, folded: Vec<u8>) {
                match folded.first_chunk::<4>() {
                    Some(head) => self.by_head.entry(*head).or_default().push(folded),
                    None => self.short.push(folded),
                }
            }
            fn in_(&self, folded: &[u8]) -> bool {
                let short = self
                    .short
                    .iter()
                    .any(|s| memchr::memmem::find(folded, s).is_some());
                short
                    || (0..folded.len()).any(|at| {
                        folded[at..].first_chunk::<4>().is_some_and(|head| {
                            self.by_head
                                .get(head)
                                .is_some_and(|l| l.iter().any(|l| folded[at..].starts_with(l)))
                        })
                    })
            }
        }
        let fold = |s: &str| s.to_ascii_lowercase().into_bytes();
        let mut kept = Kept::default();
        for t in taken {
            kept.add(fold(t));
        }
        // Shortest first: a literal is looked up among the shorter ones kept.
        let mut order: Vec<usize> = (0..literals.len()).collect();
        order.sort_by_key(|&i| literals[i].len());
        let mut keep = vec![false; literals.len()];
        for i in order {
            let folded = fold(literals[i]);
            if !folded.is_empty() && !kept.in_(&folded) {
                kept.add(folded);
                keep[i] = true;
            }
        }
        literals
            .iter()
            .zip(keep)
            .filter_map(|(l, keep)| keep.then_some(*l))
            .collect()
    }
}

/// The rules' anchors and the parsers': whether a line must be read in full.
#[derive(Debug)]
pub(crate) struct Hot {
    /// The rules' literals (the first group: a match of theirs makes the
    /// line a message) and the parsers'.
    search: Search,
    /// The same groups searched from a line's end ([`Backward`]), where
    /// the lazy DFA can be built: built for the first block of
    /// [`Backward::FROM`] bytes (a paste never needs it).
    backward: OnceLock<Option<Backward>>,
    /// The two groups' literals (the rules', the parsers'), to build it.
    groups: [Vec<String>; 2],
    /// The rules' literals, and their search alone, for a line where a
    /// parser's came first: built when the first such line comes (a journal
    /// of quiet lines may have none).
    literals: Vec<String>,
    rules_only: OnceLock<Option<Search>>,
}

/// How the anchors are searched: groups of literals, a match told by its
/// group. Case-insensitive Aho-Corasick has no prefilter to skip with, and
/// its DFA takes one byte a step through a generic loop; regex-automata's
/// lazy DFA over the same literals (ASCII case folding only, as
/// Aho-Corasick's) unrolls its loop and stops at the first match state,
/// which is all a line needs. Its states are built as the search meets
/// them, in a cache per thread (a pool: the anchor search runs on whichever
/// thread has time).
#[derive(Debug)]
enum Search {
    /// One pattern per group: the group's literals as their trie
    /// ([`Search::trie`]).
    Lazy {
        dfa: Box<regex_automata::hybrid::dfa::DFA>,
        caches: Mutex<Vec<regex_automata::hybrid::dfa::Cache>>,
    },
    /// Where the lazy DFA cannot be built: one pattern per literal, `ends`
    /// the pattern after each group's last.
    Automaton {
        matcher: AhoCorasick,
        ends: Vec<usize>,
    },
}

/// The lazy DFA's cache: the anchors' states take a few hundred KiB.
const LAZY_CACHE_BYTES: usize = 4 << 20;

impl Search {
    fn new(groups: &[&[&str]]) -> Search {
        Search::lazy(groups).unwrap_or_else(|| {
            let literals: Vec<&str> = groups.iter().flat_map(|g| g.iter().copied()).collect();
            let ends = groups
                .iter()
                .scan(0, |end, g| {
                    *end += g.len();
                    Some(*end)
                })
                .collect();
            let matcher = AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .kind(Some(AhoCorasickKind::DFA))
                .build(&literals)
                .or_else(|_| {
                    AhoCorasick::builder()
                        .ascii_case_insensitive(true)
                        .build(&literals)
                })
                .expect("anchors are plain literals");
            Search::Automaton { matcher, ends }
        })
    }

    /// The group of a match's pattern.
    fn group(&self, pattern: usize) -> usize {
        match self {
            Search::Lazy { .. } => pattern,
            Search::Automaton { ends, .. } => ends.partition_point(|&end| end <= pattern),
        }
    }

    /// Each group as one expression ([`Search::trie`]), built as such (not
    /// written as a pattern to be parsed back: parsing hundreds took as
    /// long as compiling them). `None` where there is no literal or the
    /// DFA cannot be built.
    fn lazy(groups: &[&[&str]]) -> Option<Search> {
        if groups.iter().all(|g| g.is_empty()) {
            return None;
        }
        let dfa = Search::lazy_dfa(groups, false)?;
        Some(Search::Lazy {
            dfa: Box::new(dfa),
            caches: Mutex::new(Vec::new()),
        })
    }

    /// The lazy DFA of the groups' tries, one pattern a group, to search
    /// forward or (`reverse`) from the end of a text towards its start.
    fn lazy_dfa(groups: &[&[&str]], reverse: bool) -> Option<regex_automata::hybrid::dfa::DFA> {
        use regex_automata::hybrid::dfa::DFA;
        use regex_automata::nfa::thompson;
        let exprs: Vec<regex_syntax::hir::Hir> =
            groups.iter().map(|g| Search::trie(g, reverse)).collect();
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .reverse(reverse)
                    // A reverse NFA has no captures (and a search for
                    // anchors needs none either way).
                    .which_captures(if reverse {
                        thompson::WhichCaptures::None
                    } else {
                        thompson::WhichCaptures::All
                    }),
            )
            .build_many_from_hir(&exprs)
            .ok()?;
        DFA::builder()
            .configure(DFA::config().cache_capacity(LAZY_CACHE_BYTES))
            .build_from_nfa(nfa)
            .ok()
    }

    /// The literals as the expression of their trie: a shared prefix is
    /// one path, each byte an ASCII letter in either case or a byte that
    /// stands for itself (Aho-Corasick's `ascii_case_insensitive`). A
    /// literal apiece, each state of the lazy DFA held a thread for every
    /// literal (the unanchored search starts each one at every byte), and
    /// computing a transition walked all of them: 935 anchors made each new
    /// state cost about 80,000 instructions, and a text of words no log
    /// repeats (a paste of anything else) kept meeting new states. As a
    /// trie a state holds the first bytes' branches and the few nodes the
    /// text is in. The same lines match at the same places: a match ends
    /// where its literal does, the earliest such end either way.
    ///
    /// `mirrored`, the trie of the literals read from their ends, written
    /// last byte last: the same literals, as the expression that a reverse
    /// NFA (which reads each concatenation from its end) compiles to a trie
    /// of the literals' ends. Compiled in reverse, the trie of their starts
    /// would start a backward search on every literal's last byte at once.
    fn trie(literals: &[&str], mirrored: bool) -> regex_syntax::hir::Hir {
        use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir};
        /// A node: the bytes that go on (folded), and whether a literal
        /// ends here (then nothing past it matters: it matched earlier).
        #[derive(Default)]
        struct Node {
            next: Vec<(u8, usize)>,
            end: bool,
        }
        let mut nodes = vec![Node::default()];
        for literal in literals.iter().filter(|l| !l.is_empty()) {
            let mut at = 0;
            let mut bytes: Vec<u8> = literal.bytes().map(|b| b.to_ascii_lowercase()).collect();
            if mirrored {
                bytes.reverse();
            }
            for b in bytes {
                at = match nodes[at].next.iter().find(|&&(c, _)| c == b) {
                    Some(&(_, child)) => child,
                    None => {
                        nodes.push(Node::default());
                        let child = nodes.len() - 1;
                        nodes[at].next.push((b, child));
                        child
                    }
                };
            }
            nodes[at].end = true;
        }
        let byte = |b: u8| {
            if b.is_ascii_alphabetic() {
                let (lower, upper) = (b.to_ascii_lowercase(), b.to_ascii_uppercase());
                Hir::class(Class::Bytes(ClassBytes::new([
                    ClassBytesRange::new(upper, upper),
                    ClassBytesRange::new(lower, lower),
                ])))
            } else {
                Hir::literal([b])
            }
        };
        // A child comes after its parent in `nodes`: built from the last,
        // each node as the expressions of its path to a match, last first
        // (a run of single bytes is one concatenation, not one a byte:
        // concatenating flattens, and a long literal would be copied once
        // per byte).
        let mut built: Vec<Vec<Hir>> = (0..nodes.len()).map(|_| Vec::new()).collect();
        let edge = |b: u8, mut rest: Vec<Hir>| {
            rest.push(byte(b));
            rest
        };
        let whole = |mut last_first: Vec<Hir>| {
            if !mirrored {
                last_first.reverse();
            }
            Hir::concat(last_first)
        };
        for (at, node) in nodes.iter().enumerate().rev() {
            built[at] = match node.next.as_slice() {
                _ if node.end => Vec::new(),
                &[(b, child)] => edge(b, std::mem::take(&mut built[child])),
                next => {
                    let branches = next
                        .iter()
                        .map(|&(b, child)| whole(edge(b, std::mem::take(&mut built[child]))))
                        .collect();
                    vec![Hir::alternation(branches)]
                }
            };
        }
        // No literal: the empty alternation, which matches nothing.
        whole(std::mem::take(&mut built[0]))
    }
}

impl Search {
    /// [`Hot::scan`] from each line's start (a lazy DFA's search; nothing
    /// otherwise). The bytes the search read: a line's up to the end of its
    /// first match, a line without one whole.
    fn scan_forward(&self, block: &[u8], found: &mut Vec<(usize, bool)>) -> usize {
        let Search::Lazy { dfa, caches } = self else {
            return 0;
        };
        let next_line =
            |end: usize| memchr::memchr(b'\n', &block[end..]).map_or(block.len(), |i| end + i + 1);
        let taken = caches.lock().ok().and_then(|mut c| c.pop());
        let mut cache = taken.unwrap_or_else(|| dfa.create_cache());
        let (mut at, mut skipped) = (0, 0);
        while at < block.len() {
            let input = regex_automata::Input::new(block).range(at..).earliest(true);
            // Without a quit byte or a cache limit the search never
            // fails; were it to, every remaining line is read in full.
            let m = match dfa.try_search_fwd(&mut cache, &input) {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(_) => {
                    mark_every_line(block, at, found);
                    break;
                }
            };
            // A match is at least one byte: its last byte is in its line.
            let end = m.offset();
            let group = self.group(m.pattern().as_usize());
            found.push((end - 1, group == 0));
            at = next_line(end);
            skipped += at - end;
        }
        if let Ok(mut c) = caches.lock() {
            c.push(cache);
        }
        block.len() - skipped
    }

    /// Whether any literal is in `text`.
    fn is_match(&self, text: &[u8]) -> bool {
        match self {
            Search::Lazy { dfa, caches } => {
                let taken = caches.lock().ok().and_then(|mut c| c.pop());
                let mut cache = taken.unwrap_or_else(|| dfa.create_cache());
                let input = regex_automata::Input::new(text).earliest(true);
                // A search that fails says nothing: then the line is a
                // message (the rules look for their own patterns in it).
                let found = !matches!(dfa.try_search_fwd(&mut cache, &input), Ok(None));
                if let Ok(mut c) = caches.lock() {
                    c.push(cache);
                }
                found
            }
            Search::Automaton { matcher, .. } => matcher.is_match(text),
        }
    }
}

impl Hot {
    /// Whether a rule's literal is in `line` ([`Anchors::matches`] of the
    /// rules' anchors, searched the same way as [`Self::scan`]).
    #[cfg(test)]
    pub(crate) fn is_rule(&self, line: &str) -> bool {
        self.rules().is_rule(line)
    }

    /// Drops the searches' large caches once an analysis has read its
    /// inputs: a large input grows each to megabytes, which would otherwise
    /// sit beside the correlation, the rules and the timeline at the run's
    /// peak of memory ([`Anchors::with_facts`] keeps the searches for the
    /// next analysis of a replay). Small caches stay warm for it.
    pub(crate) fn shed_caches(&self) {
        /// A cache of a paste's size: a few dozen states.
        const KEEP_UP_TO: usize = 256 << 10;
        let shed = |caches: &Mutex<Vec<regex_automata::hybrid::dfa::Cache>>| {
            if let Ok(mut c) = caches.lock() {
                c.retain(|cache| cache.memory_usage() <= KEEP_UP_TO);
            }
        };
        for search in [
            Some(&self.search),
            self.rules_only.get().and_then(Option::as_ref),
        ] {
            if let Some(Search::Lazy { caches, .. }) = search {
                shed(caches);
            }
        }
        if let Some(Some(backward)) = self.backward.get() {
            shed(&backward.caches);
        }
    }

    /// The backward search, built on its first use.
    fn backward(&self) -> Option<&Backward> {
        self.backward
            .get_or_init(|| {
                let [rules, facts] = self
                    .groups
                    .each_ref()
                    .map(|g| g.iter().map(String::as_str).collect::<Vec<_>>());
                Backward::new(&[&rules, &facts])
            })
            .as_ref()
    }

    fn rule_search(&self) -> Option<&Search> {
        self.rules_only
            .get_or_init(|| {
                let literals: Vec<&str> = self.literals.iter().map(String::as_str).collect();
                let cover = Cover::of(&literals, &[]);
                (!cover.is_empty()).then(|| Search::new(&[&cover]))
            })
            .as_ref()
    }

    /// [`Self::is_rule`] for many lines in a row: the search's cache is
    /// taken once, not once a line (a kernel log's `NVRM:` lines, a
    /// parser's anchor first, each ask).
    pub(crate) fn rules(&self) -> Rules<'_> {
        Rules {
            hot: self,
            cache: None,
        }
    }

    #[cfg(test)]
    fn matches(&self, line: &str) -> bool {
        let mut found = Vec::new();
        self.scan(line.as_bytes(), &mut found);
        !found.is_empty()
    }

    /// A match in each line of `block` that has one, many lines searched at
    /// once: where it is (an offset inside its line), and whether it is a
    /// rule's (then the line is a message; otherwise it may still be one,
    /// see [`Anchors::matches`]). No anchor holds a newline, so the search
    /// goes on from the next line.
    pub(crate) fn scan(&self, block: &[u8], found: &mut Vec<(usize, bool)>) {
        match &self.search {
            search @ Search::Lazy { .. } if block.len() >= Backward::FROM => {
                // The first lines forward, and where that read more than
                // half their bytes backward too: the rest of the block the
                // way that read fewer. A block whose anchors start its
                // lines (a kernel log's) never builds a backward state.
                let probe = block.len().min(Backward::PROBE);
                let probe =
                    memchr::memchr(b'\n', &block[probe..]).map_or(block.len(), |i| probe + i + 1);
                let ahead = search.scan_forward(&block[..probe], found);
                let from = found.len();
                let rest = &block[probe..];
                match (2 * ahead > probe).then(|| self.backward()).flatten() {
                    Some(backward) if backward.scan(&block[..probe], found) < ahead => {
                        found.truncate(from);
                        backward.scan(rest, found);
                        found[from..].reverse();
                    }
                    _ => {
                        found.truncate(from);
                        search.scan_forward(rest, found);
                    }
                }
                for f in &mut found[from..] {
                    f.0 += probe;
                }
            }
            search @ Search::Lazy { .. } => {
                search.scan_forward(block, found);
            }
            Search::Automaton { matcher, .. } => {
                let next_line = |end: usize| {
                    memchr::memchr(b'\n', &block[end..]).map_or(block.len(), |i| end + i + 1)
                };
                let mut at = 0;
                while at < block.len() {
                    let Some(m) = matcher.find(Input::new(block).range(at..)) else {
                        break;
                    };
                    let group = self.search.group(m.pattern().as_usize());
                    found.push((m.start(), group == 0));
                    at = next_line(m.end());
                }
            }
        }
    }
}

/// The anchors searched from each line's end towards its start: the same
/// lines found, and a match of the rules' group where a line holds one of
/// theirs first from its end. Which lines hold a literal does not depend on
/// the way they are read, but the bytes read do: a search stops at a line's
/// first match, and a server's line holds its anchor in its message, often
/// near its end (`… gen throughput (token/s): 4.21, #queue-req: 0`: read
/// from the start, 84% of an SGLang line's bytes; from the end, 48%), a
/// kernel's near its start (`NVRM: Xid …`). [`Hot::scan`] reads a block's
/// first lines both ways and the rest the way that read fewer bytes.
#[derive(Debug)]
struct Backward {
    dfa: Box<regex_automata::hybrid::dfa::DFA>,
    caches: Mutex<Vec<regex_automata::hybrid::dfa::Cache>>,
}

impl Backward {
    /// The bytes (whole lines, at least) of a block read both ways.
    const PROBE: usize = 8 << 10;
    /// The smallest block read backward where that reads fewer bytes.
    const FROM: usize = 8 * Backward::PROBE;

    fn new(groups: &[&[&str]]) -> Option<Backward> {
        if groups.iter().all(|g| g.is_empty()) {
            return None;
        }
        Some(Backward {
            dfa: Box::new(Search::lazy_dfa(groups, true)?),
            caches: Mutex::new(Vec::new()),
        })
    }

    /// [`Hot::scan`] from each line's end, the block's last line first: a
    /// match where it starts, the matches last first. The bytes read: a
    /// line's from its end to the start of its last match, a line without
    /// one whole.
    fn scan(&self, block: &[u8], found: &mut Vec<(usize, bool)>) -> usize {
        let taken = self.caches.lock().ok().and_then(|mut c| c.pop());
        let mut cache = taken.unwrap_or_else(|| self.dfa.create_cache());
        let (mut end, mut skipped) = (block.len(), 0);
        while end > 0 {
            let input = regex_automata::Input::new(block)
                .range(..end)
                .earliest(true);
            let m = match self.dfa.try_search_rev(&mut cache, &input) {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(_) => {
                    // As forward: every line left is read in full, marked
                    // last first as this search's matches are.
                    let from = found.len();
                    mark_every_line(&block[..end], 0, found);
                    found[from..].reverse();
                    break;
                }
            };
            let start = m.offset();
            found.push((start, m.pattern().as_usize() == 0));
            // The line before this one ends at its `\n`, before this line's start.
            let line = memchr::memrchr(b'\n', &block[..start]).map_or(0, |i| i + 1);
            skipped += start - line;
            end = line;
        }
        if let Ok(mut c) = self.caches.lock() {
            c.push(cache);
        }
        block.len() - skipped
    }
}

/// The rules' literals searched line after line ([`Hot::rules`]).
pub(crate) struct Rules<'a> {
    hot: &'a Hot,
    cache: Option<regex_automata::hybrid::dfa::Cache>,
}

impl Rules<'_> {
    /// [`Hot::is_rule`].
    pub(crate) fn is_rule(&mut self, line: &str) -> bool {
        match self.hot.rule_search() {
            None => false,
            Some(Search::Lazy { dfa, caches }) => {
                let cache = self.cache.get_or_insert_with(|| {
                    let taken = caches.lock().ok().and_then(|mut c| c.pop());
                    taken.unwrap_or_else(|| dfa.create_cache())
                });
                let input = regex_automata::Input::new(line.as_bytes()).earliest(true);
                !matches!(dfa.try_search_fwd(cache, &input), Ok(None))
            }
            Some(search @ Search::Automaton { .. }) => search.is_match(line.as_bytes()),
        }
    }
}

impl Drop for Rules<'_> {
    fn drop(&mut self) {
        if let (Some(cache), Some(Search::Lazy { caches, .. })) =
            (self.cache.take(), self.hot.rule_search())
        {
            if let Ok(mut c) = caches.lock() {
                c.push(cache);
            }
        }
    }
}

/// Every line of `block` from `at` on, as if a parser's anchor matched it:
/// read in full (a rule's anchor is still looked for in each).
fn mark_every_line(block: &[u8], mut at: usize, found: &mut Vec<(usize, bool)>) {
    while at < block.len() {
        // An empty line holds no anchor.
        if block[at] != b'\n' {
            found.push((at, false));
        }
        at = memchr::memchr(b'\n', &block[at..]).map_or(block.len(), |i| at + i + 1);
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

    /// The lines of `block` (by index) a search found, and whether each
    /// match it reported is a rule's (of the first group).
    fn lines_found(search: Search, block: &str) -> Vec<(usize, bool)> {
        let hot = Hot {
            search,
            backward: OnceLock::new(),
            groups: Default::default(),
            literals: Vec::new(),
            rules_only: OnceLock::new(),
        };
        let mut found = Vec::new();
        hot.scan(block.as_bytes(), &mut found);
        found
            .iter()
            .map(|&(at, rule)| {
                (
                    memchr::memchr_iter(b'\n', &block.as_bytes()[..at]).count(),
                    rule,
                )
            })
            .collect()
    }

    #[test]
    fn the_lazy_dfa_finds_the_lines_aho_corasick_finds() {
        let literals = [
            "Address already in use",
            "what():",
            "NVRM",
            "[nvidia]",
            "GPU blocks:",
            "oom-kill:",
            "Killed",
        ];
        let lines = [
            "OSError: [Errno 98] ADDRESS already in use",
            "terminate called after throwing  what():  boom",
            "what() without its colon",
            "kernel: nvrm: Xid 79",
            "",
            "[ 1.0] [nvidia] loaded",
            "[nvidiaX] is another module",
            "INFO # GPU blocks: 4096, # CPU blocks: 512",
            "oom-kill:constraint=CONSTRAINT_NONE",
            // U+212A KELVIN SIGN folds to `k` in Unicode, not in ASCII.
            "\u{212A}illed by a sign",
            "Killed process 4242 (python3); also NVRM",
            "nothing here, not even a newline at the end",
        ];
        let block = lines.join("\n");
        let lazy = Search::new(&[&literals[..2], &literals[2..]]);
        assert!(matches!(lazy, Search::Lazy { .. }));
        let automaton = Search::Automaton {
            matcher: AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(literals)
                .expect("literals"),
            ends: vec![2, literals.len()],
        };
        let by_lazy = lines_found(lazy, &block);
        let by_automaton = lines_found(automaton, &block);
        let which = |f: &[(usize, bool)]| f.iter().map(|l| l.0).collect::<Vec<_>>();
        assert_eq!(which(&by_lazy), vec![0, 1, 3, 5, 7, 8, 10]);
        assert_eq!(which(&by_lazy), which(&by_automaton));
        // A match called a rule's is one: lines 0 and 1 hold the rules' literals.
        for (line, rule) in by_lazy {
            assert_eq!(rule, line <= 1, "line {line}");
        }
    }

    #[test]
    fn the_cover_keeps_the_literals_no_other_is_in() {
        let literals = [
            "out of memory",
            "CUDA out of memory",
            "OUT OF MEMORY",
            "NVRM",
            "NVRM: Xid",
            "oom",
        ];
        assert_eq!(Cover::of(&literals, &[]), ["out of memory", "NVRM", "oom"]);
        // A parser's literal that holds a rule's goes; a rule's that holds
        // a parser's stays (its line is a message).
        assert_eq!(
            Cover::of(&["Killed process", "exception"], &["killed"]),
            ["exception"]
        );
        let hot = Anchors::new(["Killed process 4242"]).with_facts();
        assert!(hot.is_rule("Out of memory: Killed process 4242 (python3)"));
    }

    /// The app's anchors, made again as this crate's (the rules are a
    /// dev-dependency, whose copy of this crate is another to the compiler).
    fn app_anchors() -> Anchors {
        Anchors::new(crate::rules::anchors(crate::rules::RULES).literals())
    }

    /// Every literal `anchors` and the parsers search for.
    fn with_facts(anchors: &Anchors) -> Vec<&str> {
        anchors
            .literals()
            .iter()
            .map(String::as_str)
            .chain(FACT_ANCHORS.iter().copied())
            .collect()
    }

    /// The search over the cover of every anchor (the rules', the
    /// catalogs', the parsers') finds the lines a search over all of them
    /// finds, and calls the same ones messages.
    #[test]
    fn the_cover_of_every_anchor_finds_what_all_of_them_find() {
        let anchors = app_anchors();
        let all = with_facts(&anchors);
        let full = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&all)
            .expect("literals");
        let rules_full = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(anchors.literals())
            .expect("literals");
        // Each literal in a line, whole and cut by a byte at either end.
        let mut lines = vec!["sshd[900]: Accepted publickey for deploy".to_owned()];
        for l in &all {
            let n = l.len();
            for (from, to) in [(0, n), (1, n), (0, n - 1)] {
                if let Some(part) = l.get(from..to) {
                    lines.push(format!("x {} y", part.to_ascii_uppercase()));
                }
            }
        }
        let hot = anchors.with_facts();
        let block = lines.join("\n") + "\n";
        let mut found = Vec::new();
        hot.scan(block.as_bytes(), &mut found);
        let mut next = 0;
        for line in &lines {
            let (mut hit, mut rule) = (false, false);
            while let Some(&(at, by_rule)) = found.first() {
                if at >= next + line.len() {
                    break;
                }
                found.remove(0);
                hit = true;
                rule |= by_rule;
            }
            next += line.len() + 1;
            assert_eq!(hit, full.is_match(line), "{line}");
            let message = rule || hit && hot.is_rule(line);
            assert_eq!(message, rules_full.is_match(line), "{line}");
            assert_eq!(anchors.matches(line), rules_full.is_match(line), "{line}");
        }
    }

    #[test]
    fn a_rule_literal_is_told_from_a_parser_literal() {
        let hot = Anchors::new(["Address already in use"]).with_facts();
        assert!(hot.is_rule("Traceback: OSError: [Errno 98] ADDRESS ALREADY IN USE"));
        assert!(!hot.is_rule("Traceback (most recent call last):"));
        assert!(
            !Anchors::new(Vec::<String>::new())
                .with_facts()
                .is_rule("Address already in use")
        );
    }

    /// A literal that is not ASCII (a localised Windows socket error in a
    /// catalog row) is searched by the lazy DFA too, its bytes as they are
    /// and its ASCII letters folded, as Aho-Corasick would: one such row
    /// once sent every search to Aho-Corasick's full DFA, two of them of
    /// 11 MiB each built at every start.
    #[test]
    fn a_literal_that_is_not_ascii_is_searched_by_the_lazy_dfa() {
        let literals = ["naïve", "NVRM", "以一种访问权限"];
        let block = "x\nNAïVE y\nnvrm\nNAÏVE is another letter\nz 以一种访问权限不允许 z\n以一种";
        let search = Search::new(&[&literals[..1], &literals[1..]]);
        assert!(matches!(search, Search::Lazy { .. }));
        let automaton = Search::Automaton {
            matcher: AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(literals)
                .expect("literals"),
            ends: vec![1, literals.len()],
        };
        let by_lazy = lines_found(search, block);
        assert_eq!(by_lazy, vec![(1, true), (2, false), (4, false)]);
        assert_eq!(by_lazy, lines_found(automaton, block));
    }

    /// Literals that share prefixes, one the prefix of another (the cover
    /// keeps no such pair, the trie does not need it not to), searched as
    /// tries find each line where Aho-Corasick finds it, at the byte where
    /// the first literal to end there ends, and tell its group the same.
    #[test]
    fn the_tries_find_where_aho_corasick_finds() {
        let rules = ["out of memory", "out of", "Xid", "XidX", "ECC error"];
        let facts = [
            "outage",
            "oom-kill",
            "oom_reaper",
            "NCCL",
            "nccl error",
            "Xi",
        ];
        let lines = [
            "CUDA OUT OF MEMORY",
            "ou of",
            "an outage, then out of memory",
            "nvrm: xi",
            "NVRM: XID 79",
            "oom_reape",
            "oom-killer invoked",
            "NCCL error: unhandled",
            "ecc erro",
            "no anchor at all",
            "x ECC ERROR y OUTAGE",
            "",
            "out",
        ];
        let block = lines.join("\n");
        let lazy = Search::new(&[&rules, &facts]);
        assert!(matches!(lazy, Search::Lazy { .. }));
        let all: Vec<&str> = rules.iter().chain(&facts).copied().collect();
        let automaton = Search::Automaton {
            matcher: AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(&all)
                .expect("literals"),
            ends: vec![rules.len(), all.len()],
        };
        let hot = |search| Hot {
            search,
            backward: OnceLock::new(),
            groups: Default::default(),
            literals: Vec::new(),
            rules_only: OnceLock::new(),
        };
        let (mut by_lazy, mut by_automaton) = (Vec::new(), Vec::new());
        hot(lazy).scan(block.as_bytes(), &mut by_lazy);
        hot(automaton).scan(block.as_bytes(), &mut by_automaton);
        // Aho-Corasick tells where a match starts, the lazy DFA where it
        // ends: the same lines, each told a rule's or not alike.
        let lines_of = |found: &[(usize, bool)]| {
            found
                .iter()
                .map(|&(at, rule)| {
                    (
                        memchr::memchr_iter(b'\n', &block.as_bytes()[..at]).count(),
                        rule,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            lines_of(&by_lazy),
            vec![
                (0, true),
                (2, false),
                (3, false),
                (4, false),
                (6, false),
                (7, false),
                (10, true)
            ]
        );
        assert_eq!(lines_of(&by_lazy), lines_of(&by_automaton));
        // `nvrm: xi` ends its match at its last byte; `an outage, …` at
        // `outage`'s `e` (before `out of memory` could end).
        assert_eq!(
            by_lazy[1].0,
            lines[..2].iter().map(|l| l.len() + 1).sum::<usize>() + 8
        );
        assert_eq!(by_lazy[2].0, block.find("nvrm: xi").expect("line") + 7);
    }

    /// Lines to search: every real incident's, every line the bench's
    /// families are drawn from (bench/families/*.tsv), and each literal
    /// whole and cut by a byte at either end, at a line's start, middle and
    /// end, in either case.
    fn lines_to_search(literals: &[&str]) -> Vec<String> {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let mut lines = crate::ingest::real_lines::real_lines();
        let mut families: Vec<_> = std::fs::read_dir(root.join("bench/families"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|f| f.path())
            .filter(|f| f.extension().is_some_and(|e| e == "tsv"))
            .collect();
        families.sort();
        for family in families {
            let text = std::fs::read_to_string(family).unwrap_or_default();
            lines.extend(
                text.lines()
                    .filter(|l| !l.starts_with('#'))
                    .filter_map(|l| l.splitn(4, '\t').nth(3))
                    .map(str::to_owned),
            );
        }
        for l in literals {
            let n = l.len();
            for (from, to) in [(0, n), (1, n), (0, n - 1)] {
                if let Some(part) = l.get(from..to) {
                    lines.push(part.to_ascii_uppercase());
                    lines.push(format!("x {part} y"));
                    lines.push(format!("{} tail", part.to_ascii_lowercase()));
                    lines.push(format!("head {part}"));
                }
            }
        }
        lines
    }

    /// The backward search ([`Backward`]) against the forward one, kept as
    /// its oracle, over the app's anchors (the rules', the catalogs', the
    /// parsers'): the same lines found, the same called messages (a rule's
    /// literal first either way, or one found by [`Hot::is_rule`]); and
    /// [`Hot::scan`], which reads a block's first lines both ways and the
    /// rest one way, the same again, on blocks where either way wins.
    #[test]
    fn the_backward_search_finds_what_the_forward_one_finds() {
        let anchors = app_anchors();
        let all = with_facts(&anchors);
        let lines = lines_to_search(&all);
        assert!(lines.len() > 20_000, "{}", lines.len());
        let hot = anchors.with_facts();
        let [rules, facts] = hot
            .groups
            .each_ref()
            .map(|g| g.iter().map(String::as_str).collect::<Vec<_>>());
        let backward = Backward::new(&[&rules, &facts]).expect("a lazy DFA");
        // Each line: whether a literal is in it, and whether it is a message.
        let per_line = |block: &str, found: &[(usize, bool)]| {
            let starts: Vec<usize> = std::iter::once(0)
                .chain(memchr::memchr_iter(b'\n', block.as_bytes()).map(|i| i + 1))
                .collect();
            let mut seen = vec![(false, false); starts.len()];
            assert!(found.windows(2).all(|w| w[0].0 < w[1].0), "in order");
            for &(at, rule) in found {
                let line = starts.partition_point(|&s| s <= at) - 1;
                assert!(!seen[line].0, "one match a line");
                let text = block[starts[line]..].lines().next().unwrap_or("");
                seen[line] = (true, rule || hot.is_rule(text));
            }
            seen
        };
        let (mut ahead, mut back) = (0, 0);
        for size in [1, 2, 5, 64, 2048] {
            for chunk in lines.chunks(size) {
                let block = chunk.join("\n") + "\n";
                let mut forward = Vec::new();
                ahead += hot.search.scan_forward(block.as_bytes(), &mut forward);
                let mut reverse = Vec::new();
                back += backward.scan(block.as_bytes(), &mut reverse);
                reverse.reverse();
                let oracle = per_line(&block, &forward);
                assert_eq!(per_line(&block, &reverse), oracle, "{chunk:?}");
                let mut scanned = Vec::new();
                hot.scan(block.as_bytes(), &mut scanned);
                assert_eq!(per_line(&block, &scanned), oracle, "{chunk:?}");
            }
        }
        // Blocks of one family's lines, repeated past the size read both
        // ways: SGLang's, whose anchors end its lines, read backward; the
        // kernel's, whose anchors start them, forward.
        for (family, backward_wins) in [("sglang", true), ("kernel", false)] {
            let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join("bench/families")
                .join(format!("{family}.tsv"));
            let text = std::fs::read_to_string(path).expect("the family's lines");
            let family: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("line\t") || l.starts_with("chatter"))
                .filter_map(|l| l.splitn(4, '\t').nth(3))
                .collect();
            let mut block = String::new();
            while block.len() < 4 * Backward::FROM {
                block.extend(family.iter().flat_map(|l| [*l, "\n"]));
            }
            let mut forward = Vec::new();
            let ahead = hot.search.scan_forward(block.as_bytes(), &mut forward);
            let back = backward.scan(block.as_bytes(), &mut Vec::new());
            assert_eq!(
                back < ahead,
                backward_wins,
                "{back} bytes read backward, {ahead} forward"
            );
            let mut scanned = Vec::new();
            hot.scan(block.as_bytes(), &mut scanned);
            assert_eq!(per_line(&block, &scanned), per_line(&block, &forward));
        }
        assert!(ahead > 0 && back > 0);
    }
}
