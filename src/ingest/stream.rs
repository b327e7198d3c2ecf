//! Streaming ingest: every input is read once, line by line, and never held
//! whole. Each line is cleaned, matched against the anchors (Aho-Corasick),
//! classified into its segment ([`super::detect::Segmenter`]) and handed to
//! that segment's reader ([`super::reader`]).
//!
//! With the prefilter on, a line no anchor matches is only skimmed: the
//! facts are those of a full reading (the equivalence test reads every
//! fixture both ways), minus the journal entries and line times no rule,
//! join or report needs. What a report may still need about skimmed lines
//! is kept here: the time of the last one above each line read in full
//! (untimed evidence is placed after it), and the earliest line without a
//! zone, without a year, and the latest with a year (they decide how every
//! time is read, `correlate::clock`). Only the text of lines read in full
//! is kept ([`KeptLines`]).
//!
//! Inputs are read in parallel when there are several big ones; the facts
//! are joined in input order, so the result is that of one thread.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::aggregate::{self, Aggregator, Drained, Repeats};
use super::anchors::Hot;
use super::chatter;
use super::detect::{self, Provenance, Segmenter, Step};
use super::frame::{Peeled, Peeler};
use super::read::{Out, Read};
use super::reader::SegmentReader;
use super::{Anchors, Format, Ingested, InputSummary, Line, Segment};
use crate::model::{
    EmbeddedBlock, Facts, MAX_TYPED_COMMANDS, Message, Resumed, Timestamp, TypedCommand,
};
use crate::source::{KeptLines, Source, SourceId, SourceMap, Span, clean_line};

/// Inputs smaller than this together are read on one thread: starting
/// threads would cost more than it saves.
const PARALLEL_FROM_BYTES: u64 = 8 << 20;

/// How to ingest.
#[derive(Clone, Copy)]
pub struct Settings<'a> {
    /// Read every input as this format (`--format-hint`).
    pub hint: Option<Format>,
    /// The rules' anchors: matching lines become messages.
    pub anchors: &'a Anchors,
    /// Skim the lines no anchor matches; off, every line is read in full.
    pub prefilter: bool,
    /// Told the bytes read so far and the bytes to read, block by block.
    pub progress: Option<&'a (dyn Fn(u64, u64) + Sync)>,
    pub threads: Threads,
    /// How many lines of one template are read before the rest is only
    /// counted ([`Repeats::UNBOUNDED`]: all).
    pub repeats: Repeats,
}

/// When to read on more than one thread. The result is the same.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Threads {
    /// When the inputs are big enough to gain from it.
    #[default]
    Auto,
    /// Never.
    One,
    /// Whatever the size (to test the threaded reading on small inputs).
    Always,
}

/// Parses every input of `sources` as `settings` say.
pub fn ingest_with(sources: &SourceMap, settings: &Settings<'_>) -> Ingested {
    let hot: Option<Arc<Hot>> = settings.prefilter.then(|| settings.anchors.with_facts());
    let sizes: Vec<u64> = sources.iter().map(|(_, s)| s.size_hint()).collect();
    let total: u64 = sizes.iter().sum();
    let done = AtomicU64::new(0);
    let read = |id: SourceId| {
        let source = sources.get(id);
        let progress = |bytes: u64| {
            if let Some(report) = settings.progress {
                report(done.fetch_add(bytes, Ordering::Relaxed) + bytes, total);
            }
        };
        read_source(id, source, settings, hot.as_deref(), &progress)
    };
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let parallel = match settings.threads {
        Threads::Auto => workers > 1 && total >= PARALLEL_FROM_BYTES,
        Threads::One => false,
        Threads::Always => true,
    };
    let parts: Vec<Part> = if parallel && sources.len() > 1 {
        // Biggest first, so that no thread is left with a big one at the end.
        let mut order: Vec<usize> = (0..sources.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
        let next = AtomicUsize::new(0);
        let slots: Mutex<Vec<Option<Part>>> =
            Mutex::new((0..sources.len()).map(|_| None).collect());
        std::thread::scope(|scope| {
            for _ in 0..workers.clamp(2, sources.len()) {
                scope.spawn(|| {
                    while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let part = read(SourceId(i));
                        if let Ok(mut slots) = slots.lock() {
                            slots[i] = Some(part);
                        }
                    }
                });
            }
        });
        slots
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .enumerate()
            .map(|(i, part)| part.unwrap_or_else(|| read(SourceId(i))))
            .collect()
    } else {
        (0..sources.len()).map(|i| read(SourceId(i))).collect()
    };
    if let Some(hot) = &hot {
        hot.shed_caches();
    }
    let mut out = Ingested::default();
    for (i, part) in parts.into_iter().enumerate() {
        out.facts.append(part.facts);
        out.inputs.extend(part.inputs);
        sources.get(SourceId(i)).keep(part.kept);
    }
    out
}

/// What one input gave.
struct Part {
    facts: Facts,
    inputs: Vec<InputSummary>,
    kept: KeptLines,
}

/// Inputs at least this big are read on two threads: one reads, decodes,
/// cleans and searches the anchors, the other parses.
const PIPELINE_FROM_BYTES: u64 = 16 << 20;

fn read_source(
    id: SourceId,
    source: &Source,
    settings: &Settings<'_>,
    hot: Option<&Hot>,
    progress: &(dyn Fn(u64) + Sync),
) -> Part {
    let mut input = InputReader {
        id,
        // Text in memory is cited from there; a streamed file's is kept.
        keep_text: source.is_streamed(),
        segmenter: Segmenter::new(id, settings.hint),
        peeler: Peeler::new(),
        provenance: Provenance::default(),
        reader: None,
        format: Format::Unknown,
        repeats: Aggregator::new(settings.repeats),
        limits: settings.repeats,
        pending: Vec::new(),
        facts: Facts::default(),
        inputs: Vec::new(),
        kept: KeptLines::default(),
        timing: Timing::default(),
        engine: Engine::default(),
        writers: Default::default(),
        last_text: 0,
        wrapped: None,
        tail: None,
        command: None,
        counted_unrecognized: 0,
    };
    let look = Look {
        rules: settings.anchors,
        hot,
        repeats: settings.repeats != Repeats::UNBOUNDED,
    };
    let mut read_so_far = 0;
    let mut progress = |bytes: u64| {
        progress(bytes - read_so_far);
        read_so_far = bytes;
    };
    let two_threads = match settings.threads {
        Threads::Auto => {
            let cores = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
            // A pipe's size is unknown: as big as any.
            let big = source.size().is_none_or(|size| size >= PIPELINE_FROM_BYTES);
            cores && source.is_streamed() && big
        }
        Threads::One => false,
        Threads::Always => true,
    };
    // Each thread makes the templates of the lines it looks at with its own
    // templater, kept from batch to batch.
    let mut templater = aggregate::Templater::default();
    if !two_threads {
        let mut batch = Batch::default();
        let summary = source.for_each_line(&mut progress, &mut |n, raw| {
            batch.push(n, &clean_line(raw));
            if batch.is_full() {
                batch.look(&look, &mut templater);
                input.lines(&mut batch);
            }
        });
        batch.look(&look, &mut templater);
        input.lines(&mut batch);
        return input.finish(summary.lines);
    }
    // The anchor search goes to whichever thread has time: the reading
    // thread searches as much of a batch as the parsing one has work
    // waiting (see `send`).
    let queued = AtomicUsize::new(0);
    // Four batches may wait (2 MiB at most): while the parsing thread warms
    // up (its first regexes compile, its DFA states get built) the reading
    // one searches ahead instead of waiting.
    let (full, batches) = std::sync::mpsc::sync_channel::<Batch>(4);
    let (empty, recycled) = std::sync::mpsc::sync_channel::<Batch>(4);
    let summary = std::thread::scope(|scope| {
        let queued = &queued;
        let reading = scope.spawn(move || {
            let mut batch = Batch::default();
            let mut templater = aggregate::Templater::default();
            let mut split = Split::start();
            let mut send = |batch: &mut Batch| {
                // With one batch waiting, half of this one is left to the
                // parsing thread: neither thread waits long for the other.
                match queued.load(Ordering::Relaxed) {
                    0 => {}
                    1 => batch.look_to(&look, batch.lines.len() / 2, &mut templater),
                    _ => batch.look(&look, &mut templater),
                }
                split.looked(batch.looked.len(), batch.lines.len());
                let next = recycled.try_recv().unwrap_or_default();
                queued.fetch_add(1, Ordering::Relaxed);
                // The parsing thread only stops early if it panicked.
                let waiting = split.now();
                let _ = full.send(std::mem::replace(batch, next));
                split.waited(waiting);
            };
            let summary = source.for_each_line(&mut progress, &mut |n, raw| {
                batch.push(n, &clean_line(raw));
                if batch.is_full() {
                    send(&mut batch);
                }
            });
            send(&mut batch);
            split.end();
            (summary, split)
        });
        let mut split = Split::start();
        loop {
            let waiting = split.now();
            let Ok(mut batch) = batches.recv() else {
                break;
            };
            split.waited(waiting);
            queued.fetch_sub(1, Ordering::Relaxed);
            let from = batch.looked.len();
            batch.look(&look, &mut templater);
            split.looked(batch.lines.len() - from, batch.lines.len());
            input.lines(&mut batch);
            let _ = empty.try_send(batch);
        }
        split.end();
        let (summary, read) = reading
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        read.report("reading", &split, "parsing");
        summary
    });
    input.finish(summary.lines)
}

/// How one of the two threads spent its time, told on standard error when
/// `ROOTCAUSE_TRACE_THREADS` is set (a measure for docs/performance.md:
/// how busy each thread is and whether one waits on the other). Unset, it
/// reads no clock.
struct Split {
    /// When the thread started, where traced, and how long it ran.
    started: Option<std::time::Instant>,
    ran: std::time::Duration,
    /// Time spent waiting on the other thread (a full queue, an empty one).
    waited: std::time::Duration,
    /// Lines whose anchors and template this thread looked at, of lines.
    looked: (usize, usize),
}

impl Split {
    fn start() -> Split {
        static TRACED: std::sync::LazyLock<bool> =
            std::sync::LazyLock::new(|| std::env::var_os("ROOTCAUSE_TRACE_THREADS").is_some());
        Split {
            started: TRACED.then(std::time::Instant::now),
            ran: std::time::Duration::ZERO,
            waited: std::time::Duration::ZERO,
            looked: (0, 0),
        }
    }

    fn now(&self) -> Option<std::time::Instant> {
        self.started.map(|_| std::time::Instant::now())
    }

    fn waited(&mut self, since: Option<std::time::Instant>) {
        if let Some(since) = since {
            self.waited += since.elapsed();
        }
    }

    fn end(&mut self) {
        if let Some(started) = self.started {
            self.ran = started.elapsed();
        }
    }

    fn looked(&mut self, looked: usize, lines: usize) {
        self.looked.0 += looked;
        self.looked.1 += lines;
    }

    /// Both threads' times, this one's and `other`'s, on standard error.
    fn report(&self, name: &str, other: &Split, other_name: &str) {
        for (split, name) in [(self, name), (other, other_name)] {
            if split.started.is_some() {
                let all = split.ran.as_secs_f64();
                let waited = split.waited.as_secs_f64();
                eprintln!(
                    "rootcause: {name} thread: {all:.3} s, waited {waited:.3} s, busy {:.3} s; looked at {} of {} lines",
                    all - waited,
                    split.looked.0,
                    split.looked.1,
                );
            }
        }
    }
}

/// Lines read and cleaned, on their way to their segment's reader.
#[derive(Default)]
struct Batch {
    /// The lines, each followed by `\n`: searched for anchors at once.
    text: String,
    /// Line number and end of its text in `text`.
    lines: Vec<(u32, usize)>,
    /// What was seen of each line, once looked at.
    looked: Vec<Looked>,
    found: Vec<(usize, bool)>,
    /// Where the lines that hold [`aggregate::PID1`] or [`chatter::WAIT`] are.
    needles: Needles,
}

/// The needles every line is asked about whatever its anchors
/// ([`aggregate::PID1`]: PID 1's entries are aggregated like the lines with
/// one; [`chatter::WAIT`]: vLLM's engine waiting), each searched once over
/// a batch's block of lines, not once a line: a search's call costs about a
/// hundred instructions on a short line, a block's search a few a match. No
/// needle holds a newline, so a match is within its line.
#[derive(Default)]
struct Needles {
    /// Where each needle's matches start in the block, in order: the
    /// service managers' three, the wait's.
    at: [Vec<usize>; 5],
    /// The first of each not yet given to a line.
    next: [usize; 5],
}

impl Needles {
    fn finders() -> &'static [memchr::memmem::Finder<'static>; 5] {
        static FINDERS: std::sync::LazyLock<[memchr::memmem::Finder<'static>; 5]> =
            std::sync::LazyLock::new(|| {
                let [a, b, c, d] = aggregate::PID1;
                [a, b, c, d, chatter::WAIT].map(memchr::memmem::Finder::new)
            });
        &FINDERS
    }

    fn scan(&mut self, block: &[u8]) {
        for ((at, next), finder) in self.at.iter_mut().zip(&mut self.next).zip(Self::finders()) {
            at.clear();
            at.extend(finder.find_iter(block));
            *next = 0;
        }
    }

    /// Which needles the next line holds, asked in order, its end in the
    /// block at `end`: (one of the service managers', the wait's).
    fn held(&mut self, end: usize) -> (bool, bool) {
        let mut held = [false; 5];
        for ((at, next), held) in self.at.iter().zip(&mut self.next).zip(&mut held) {
            while at.get(*next).is_some_and(|&p| p < end) {
                *held = true;
                *next += 1;
            }
        }
        (held[..4].contains(&true), held[4])
    }
}

impl Batch {
    /// Lines handed over at a time.
    const LINES: usize = 2048;
    const BYTES: usize = 512 << 10;

    fn push(&mut self, n: u32, text: &str) {
        self.text.push_str(text);
        self.lines.push((n, self.text.len()));
        self.text.push('\n');
    }

    fn is_full(&self) -> bool {
        self.lines.len() >= Self::LINES || self.text.len() >= Self::BYTES
    }

    fn line(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.lines[i - 1].1 + 1 };
        &self.text[start..self.lines[i].1]
    }

    /// Searches the anchors, once: which lines are read in full, which are
    /// messages. No anchor holds a newline, so a match is within one line.
    /// Their templates are made by `templater` ([`aggregate::Templater`]),
    /// the looking thread's, kept from batch to batch.
    fn look(&mut self, look: &Look<'_>, templater: &mut aggregate::Templater) {
        self.look_to(look, self.lines.len(), templater);
    }

    /// [`Self::look`] of the lines not looked at yet before line `end`: the
    /// reading thread may look at part of a batch, the parsing one at the
    /// rest.
    fn look_to(&mut self, look: &Look<'_>, end: usize, template: &mut aggregate::Templater) {
        let from = self.looked.len();
        let end = end.min(self.lines.len());
        if from >= end {
            return;
        }
        match look.hot {
            None => {
                for i in from..end {
                    let message = look.rules.matches(self.line(i));
                    let key = look.repeats.then(|| template.key(self.line(i))).flatten();
                    self.looked.push(Looked {
                        hot: true,
                        message,
                        key,
                        content: detect::content_line(self.line(i)),
                        waits: chatter::engine_waits(self.line(i)),
                    });
                }
            }
            Some(hot) => {
                // Each line is followed by its `\n`: the block is whole lines.
                let first = if from == 0 {
                    0
                } else {
                    self.lines[from - 1].1 + 1
                };
                let last = self.lines[end - 1].1 + 1;
                let block = &self.text.as_bytes()[first..last];
                self.found.clear();
                hot.scan(block, &mut self.found);
                self.needles.scan(block);
                let mut next = 0;
                let mut rules = hot.rules();
                for i in from..end {
                    let end = self.lines[i].1 - first;
                    let (mut found, mut rule) = (false, false);
                    while let Some(&(_, by_rule)) = self.found.get(next).filter(|f| f.0 < end) {
                        found = true;
                        rule |= by_rule;
                        next += 1;
                    }
                    let (pid1, wait) = self.needles.held(end);
                    let line = self.line(i);
                    // A parser's anchor came first: a rule's may follow.
                    let message = rule || found && rules.is_rule(line);
                    // A skimmed line costs nothing to keep: only lines read
                    // in full are aggregated, those with an anchor and
                    // PID 1's (read in full whatever their text).
                    let key = (look.repeats && (found || pid1))
                        .then(|| template.key(line))
                        .flatten();
                    self.looked.push(Looked {
                        hot: found,
                        message,
                        key,
                        content: detect::content_line(line),
                        waits: wait && chatter::engine_waited(line),
                    });
                }
            }
        }
    }

    fn clear(&mut self) {
        self.text.clear();
        self.lines.clear();
        self.looked.clear();
    }
}

/// What is seen of a line before its segment is known: the same whichever
/// reader gets it, so it can be worked out on either thread.
#[derive(Debug, Clone, Copy)]
struct Looked {
    /// Read it in full (an anchor is in it, or nothing is skimmed).
    hot: bool,
    /// It becomes a message for the rules.
    message: bool,
    /// Its template, when repeats are aggregated ([`aggregate::key`]).
    key: Option<u64>,
    /// Whether it is a content line (`detect::content_line`): the segmenter
    /// asks it of most lines of a traceback, and here it costs the parsing
    /// thread nothing.
    content: bool,
    /// Whether it shows vLLM's engine waiting ([`chatter::engine_waits`]),
    /// asked of every line.
    waits: bool,
}

/// How lines are looked at.
#[derive(Clone, Copy)]
struct Look<'a> {
    rules: &'a Anchors,
    /// The prefilter; `None` reads every line in full.
    hot: Option<&'a Hot>,
    /// Repeats are aggregated: each line's template is needed.
    repeats: bool,
}

/// One input being read.
struct InputReader {
    id: SourceId,
    keep_text: bool,
    segmenter: Segmenter,
    /// Strips the frames of each line before the segmenter sees it.
    peeler: Peeler,
    /// Which segments stand inside another format's input.
    provenance: Provenance,
    reader: Option<SegmentReader>,
    /// The format of `reader`'s segment.
    format: Format,
    /// Repeated lines counted instead of read; `None` reads every line.
    repeats: Option<Aggregator>,
    /// How many repeats are read: for readers that aggregate whole blocks.
    limits: Repeats,
    /// Lines before the first strong line, for the first segment's reader:
    /// the input's first lines, so a fresh [`Peeler`] peels them again as
    /// they were peeled.
    pending: Vec<(u32, String, bool)>,
    facts: Facts,
    inputs: Vec<InputSummary>,
    kept: KeptLines,
    timing: Timing,
    engine: Engine,
    /// The `ident[pid]` pairs frames named so far: each is recorded once.
    writers: std::collections::HashSet<(String, u32)>,
    /// The last line that was not blank so far (0: none yet).
    last_text: u32,
    /// The last line, when it was a message that may have been wrapped
    /// inside a token ([`Wrapped`]).
    wrapped: Option<Wrapped>,
    /// The last line of the last batch, with its number, when a wrap may
    /// have cut it ([`rest_of_above`]).
    tail: Option<(u32, String)>,
    /// The command typed at the last prompt, counting what it prints.
    command: Option<TypedCommand>,
    /// Lines of the open segment only counted as repeats of a line that
    /// was not understood: added to its reader's count when it closes.
    counted_unrecognized: u32,
}

/// vLLM's engine loop as the lines go by: the last wait for its workers and
/// the first progress line below it ([`Resumed`]). Constant memory: one
/// line's text at most.
#[derive(Default)]
struct Engine {
    wait: Option<Span>,
    /// The first progress line after `wait`: its number and, for a streamed
    /// input, its text (to cite).
    resumed: Option<(u32, String)>,
}

/// A message line that may go on, unindented, on the next line: a paste
/// wrapped by a terminal or a mail client inside a token (`…
/// ::cudaMallocAsync(ptr, n, mCudaSt` then `ream->get()): out of memory
/// (…tllmBuffers.h:112)`), or by GitHub's issue form after one (`…
/// Timeout(ms)` then `=600000) ran for 600012 milliseconds before timing
/// out.`). The next line is joined to it only where the join is a catalog
/// message that neither half is, and the next line has no frame of its
/// own (no time, level or logger head: a record stands alone) and no
/// indentation.
struct Wrapped {
    line: u32,
    /// Its index in `Facts::messages`.
    message: usize,
}

impl Wrapped {
    /// Lines shorter than this are not cut by a wrap.
    const MIN_WIDTH: usize = 60;

    /// Whether `text` may have been cut inside a token or between two:
    /// long enough for a wrap, and ending in a token or in the space a
    /// wrap kept (`… collective operation timeout: ` then `WorkNCCL(…`).
    fn may_continue(text: &str) -> bool {
        text.len() >= Self::MIN_WIDTH
            && text
                .as_bytes()
                .last()
                .is_some_and(|&b| b.is_ascii_graphic() || b == b' ')
    }

    /// Joins `text` to the message when it starts with no indentation and
    /// the whole is a catalog row that neither half is; says whether it
    /// did (the line is then read as the rest of that message). A cut
    /// inside a token joins as it stands; a cut at a space that the wrap
    /// dropped (`… (2.6/121.63 GiB) on startup` then `is less than desired
    /// GPU memory utilization (…)`) joins with the space put back, tried
    /// only when the line goes on with a lower-case word, as a sentence
    /// does.
    fn rejoin(self, text: &str, messages: &mut [Message]) -> bool {
        let first = text.as_bytes().first().copied();
        let starts_in_word = first.is_some_and(|b| b.is_ascii_graphic());
        let Some(head) = messages.get_mut(self.message) else {
            return false;
        };
        if !starts_in_word || head.span.line != self.line {
            return false;
        }
        let joined = format!("{}{text}", head.text);
        if completes_a_row(&joined, &head.text, text) {
            head.text = joined;
            return true;
        }
        let at_space = !head.text.ends_with(' ') && first.is_some_and(|b| b.is_ascii_lowercase());
        if at_space {
            let joined = format!("{} {text}", head.text);
            if completes_a_row(&joined, &head.text, text) {
                head.text = joined;
                return true;
            }
        }
        false
    }
}

/// A message line that a terminal or a pager wrapped at a space and
/// indented (systemd-oomd's `Killed /user.slice/…/x.service` then `  due
/// to memory pressure for … being 56.11% > 50.00% for > 20s with reclaim
/// activity`, batch O's 1007): `text`, indented, joined to `above` (long
/// enough for a wrap, with no space before the cut: [`Wrapped::may_continue`])
/// when the whole is a catalog row that neither half is. The joined
/// message, or `None`.
fn rest_of_above(above: &str, text: &str) -> Option<String> {
    if !text.starts_with([' ', '\t']) || !Wrapped::may_continue(above) {
        return None;
    }
    let rest = text.trim_start();
    let joined = format!("{} {rest}", above.trim_end());
    completes_a_row(&joined, above, rest).then_some(joined)
}

/// Whether `joined`, two lines a wrap split, is a catalog row that neither
/// half, `first` or `second`, is by itself: the test both joins
/// ([`Wrapped::rejoin`], [`rest_of_above`]) make before reading two lines
/// as one message.
fn completes_a_row(joined: &str, first: &str, second: &str) -> bool {
    let all = crate::catalogs::catalogs();
    // Asked of most long message lines of a server log and the line after
    // each: the whole first, each half only while a row is left to rule
    // out (mostly the first half's own row is all the whole has).
    let mut rows = all.row_ids(joined);
    for half in [first, second] {
        if rows.is_empty() {
            return false;
        }
        let theirs = all.row_ids(half);
        rows.retain(|id| !theirs.contains(id));
    }
    !rows.is_empty()
}

impl InputReader {
    /// Reads a batch of lines, looked at, and empties it.
    fn lines(&mut self, batch: &mut Batch) {
        let tail = self.tail.take();
        for i in 0..batch.lines.len() {
            let n = batch.lines[i].0;
            // The line above, for a message a wrap moved onto its own
            // indented line ([`rest_of_above`]).
            let above = match i {
                0 => tail
                    .as_ref()
                    .filter(|(line, _)| line + 1 == n)
                    .map(|(_, t)| t.as_str()),
                _ => (batch.lines[i - 1].0 + 1 == n).then(|| batch.line(i - 1)),
            };
            self.line(n, batch.line(i), batch.looked[i], above);
        }
        if let Some(last) = batch.lines.len().checked_sub(1) {
            let text = batch.line(last);
            if Wrapped::may_continue(text) {
                self.tail = Some((batch.lines[last].0, text.to_owned()));
            }
        }
        batch.clear();
    }

    fn line(&mut self, n: u32, text: &str, looked: Looked, above: Option<&str>) {
        if !super::frame::blank(text) {
            self.last_text = n;
        }
        let Looked {
            hot,
            message,
            key,
            content,
            waits,
        } = looked;
        let span = Span {
            source: self.id,
            line: n,
        };
        // Progress matters only after a wait, until the first is seen: the
        // chatty progress lines are searched for only then.
        if waits {
            self.engine.wait = Some(span);
            self.engine.resumed = None;
        } else if self.engine.wait.is_some()
            && self.engine.resumed.is_none()
            && chatter::engine_moves(text)
        {
            let text = if self.keep_text {
                text.to_owned()
            } else {
                String::new()
            };
            self.engine.resumed = Some((n, text));
        }
        // Under a hint the line is read as it is: the user named its format;
        // a line of a big journal or server log on its fast path has no
        // frame (it starts with its own time).
        let fast = self.segmenter.continues_fast(text);
        let peeled = if fast || self.segmenter.hinted() {
            self.peeler.skip(text);
            Peeled::bare(text)
        } else {
            self.peeler.peel(text)
        };
        if let (Some(ident), Some(pid)) = (&peeled.frame.ident, peeled.frame.pid) {
            if self.writers.insert((ident.clone(), pid)) {
                self.facts.frame_writers.push((ident.clone(), pid, span));
            }
        }
        let step = match fast {
            true => self.segmenter.line_continues(n),
            false => {
                // What the reading thread saw of the text holds of the body
                // when no frame was peeled off it.
                let content = std::ptr::eq(peeled.body.as_ref(), text).then_some(content);
                self.segmenter.line(n, &peeled.body, &peeled.frame, content)
            }
        };
        let format = match &step {
            Step::Start { .. } => self.segmenter.open().map_or(Format::Unknown, |s| s.format),
            Step::Continue if self.reader.is_some() => self.format,
            // Before the first strong line: read as its segment decides.
            Step::Continue => Format::Unknown,
        };
        // A repeated line is only counted: the reader never sees it, the
        // rules only see the last of its kind ([`Self::finish`]), and it is
        // counted as not understood when the line of its template read in
        // full was not. Small formats are parsed whole and never repeat
        // much.
        let aggregated = SegmentReader::streams(format)
            && (self.reader.is_some() || matches!(step, Step::Start { .. }));
        let repeated = aggregated
            && self
                .repeats
                .as_mut()
                .is_some_and(|r| r.repeated(n, text, key, format, message));
        let unrecognized = repeated
            && self
                .repeats
                .as_ref()
                .is_some_and(|r| r.counted_unrecognized(key));
        // Whether this line's reading tells its template's repeats how to
        // be counted.
        let templated = aggregated && !repeated && key.is_some();
        // A line that goes on with no indentation inside the token the
        // line above was cut in (`… mCudaSt` / `ream->get()): out of
        // memory (…)`) completes that line's message, and is read as its
        // rest: no segment reader sees it on its own.
        let mut joined = false;
        if let Some(head) = self.wrapped.take() {
            if head.line + 1 == n
                && !fast
                && peeled.frame.peeled == 0
                && !super::server::opens_record(text)
            {
                joined = head.rejoin(text, &mut self.facts.messages);
            }
        }
        if message && !repeated {
            // An indented line that goes on with the message the line above
            // began (`Killed /…/x.service` / `  due to memory pressure for
            // … being 56.11% > 50.00% …`): the message is the two joined.
            let whole = (!fast)
                .then(|| above.and_then(|a| rest_of_above(a, text)))
                .flatten();
            self.facts.messages.push(Message {
                span,
                text: whole.unwrap_or_else(|| text.to_owned()),
                pid: None,
            });
            if !fast && Wrapped::may_continue(text) {
                self.wrapped = Some(Wrapped {
                    line: n,
                    message: self.facts.messages.len() - 1,
                });
            }
            // A message may be cited: its text, and the line that times it
            // (kept first: it is above, and the kept lines' arena takes
            // lines in order; one kept after a later one waits apart).
            self.flush();
            self.keep(n, text);
        }
        let prompt = matches!(step, Step::Start { .. }) && format == Format::ShellPrompt;
        self.typed(n, &peeled.body, text, prompt);
        let read = !joined && !repeated;
        match step {
            Step::Start { closed } => {
                match (closed, self.reader.take()) {
                    (Some(closed), Some(reader)) => self.close(closed, reader),
                    // The waiting lines closed as a segment of their own
                    // (a log above a command's report): read as unknown.
                    (Some(closed), None) => {
                        let mut reader = SegmentReader::new(closed.format);
                        let rest = self.pending.split_off(
                            self.pending
                                .partition_point(|(line, _, _)| *line <= closed.last_line),
                        );
                        self.feed_pending(&mut reader);
                        self.pending = rest;
                        self.close(closed, reader);
                    }
                    _ => {}
                }
                let mut reader = SegmentReader::new(format);
                reader.typed(self.segmenter.typed_command());
                reader.aggregate(self.limits);
                self.format = format;
                self.feed_pending(&mut reader);
                if read {
                    self.feed_templated(&mut reader, n, text, &peeled, hot, templated);
                }
                self.counted_unrecognized += u32::from(unrecognized);
                self.reader = Some(reader);
            }
            Step::Continue => match self.reader.take() {
                Some(mut reader) => {
                    if read {
                        self.feed_templated(&mut reader, n, text, &peeled, hot, templated);
                    }
                    self.counted_unrecognized += u32::from(unrecognized);
                    self.reader = Some(reader);
                }
                None if joined => {}
                None => self.pending.push((n, text.to_owned(), hot)),
            },
        }
    }

    /// Follows the commands typed at prompts: `body` is line `n` under its
    /// frames, `prompt` whether it opens a prompt's segment. A prompt
    /// closes the command above it (what it printed is counted) and opens
    /// its own; any other line that is not blank is output.
    fn typed(&mut self, n: u32, body: &str, text: &str, prompt: bool) {
        if !prompt {
            if let Some(c) = &mut self.command {
                if !body.trim().is_empty() {
                    c.output_lines += 1;
                    if c.first_output.is_none() {
                        let mut end = body.len().min(TypedCommand::FIRST_OUTPUT_MAX);
                        while !body.is_char_boundary(end) {
                            end -= 1;
                        }
                        c.first_output = Some(body[..end].trim().to_owned());
                    }
                }
            }
            return;
        }
        self.close_command();
        let Some(command) = detect::prompt_command(body).filter(|c| !c.is_empty()) else {
            return;
        };
        if self.facts.typed_commands.len() >= MAX_TYPED_COMMANDS {
            return;
        }
        self.command = Some(TypedCommand {
            span: self.span(n),
            command: command.to_owned(),
            output_lines: 0,
            first_output: None,
        });
        // A rule may cite the prompt: its text is kept.
        self.keep(n, text);
    }

    fn close_command(&mut self) {
        if let Some(c) = self.command.take() {
            self.facts.typed_commands.push(c);
        }
    }

    /// The lines that waited for the first segment, peeled again from the
    /// input's start.
    fn feed_pending(&mut self, reader: &mut SegmentReader) {
        let mut peeler = Peeler::new();
        let hinted = self.segmenter.hinted();
        for (n, text, hot) in std::mem::take(&mut self.pending) {
            let peeled = match hinted {
                false => peeler.peel(&text),
                true => Peeled::bare(&text),
            };
            self.feed(reader, n, &text, &peeled, hot);
        }
    }

    /// Hands line `n` to `reader`: `text` is the line as it is (kept, and
    /// cited), `peeled` what is under its frames (read).
    fn feed(
        &mut self,
        reader: &mut SegmentReader,
        n: u32,
        text: &str,
        peeled: &Peeled<'_>,
        hot: bool,
    ) {
        let span = Span {
            source: self.id,
            line: n,
        };
        let mut out = Out {
            facts: &mut self.facts,
            kept: &mut self.kept,
        };
        let line = Line {
            span,
            text: &peeled.body,
            frame: &peeled.frame,
        };
        match reader.read(&line, hot, &mut out) {
            Read::Parsed => {
                self.flush();
                self.keep(n, text);
            }
            Read::Skimmed(Some(time)) => self.timing.skimmed(n, time, text),
            Read::Skimmed(None) => {}
        }
    }

    /// [`Self::feed`], and when the line is its template's reading
    /// (`templated`), tells the aggregator whether it was understood.
    fn feed_templated(
        &mut self,
        reader: &mut SegmentReader,
        n: u32,
        text: &str,
        peeled: &Peeled<'_>,
        hot: bool,
        templated: bool,
    ) {
        let before = templated.then(|| reader.unrecognized()).flatten();
        self.feed(reader, n, text, peeled, hot);
        if let (Some(before), Some(after)) = (before, reader.unrecognized()) {
            if after > before {
                if let Some(repeats) = self.repeats.as_mut() {
                    repeats.read_unrecognized();
                }
            }
        }
    }

    fn keep(&mut self, n: u32, text: &str) {
        if self.keep_text {
            self.kept.push(n, text);
        }
    }

    /// Records the time of the last skimmed timed line: a line read in full
    /// below it may have no time of its own and be placed after it.
    fn flush(&mut self) {
        if let Some(Stamped { n, time, text }) = self.timing.last.take() {
            self.facts.line_times.push((self.span(n), time));
            self.keep(n, &text);
            self.timing.spare = text;
        }
    }

    fn span(&self, line: u32) -> Span {
        Span {
            source: self.id,
            line,
        }
    }

    fn close(&mut self, segment: Segment, reader: SegmentReader) {
        let mut out = Out {
            facts: &mut self.facts,
            kept: &mut self.kept,
        };
        let tally = reader.finish(&mut out);
        if detect::is_host_output(segment.format) {
            self.facts
                .host_reports
                .push((self.span(segment.first_line), segment.last_line));
        }
        if let Some(inside) = self.provenance.segment(segment.format) {
            self.facts.embedded.push(EmbeddedBlock {
                first: self.span(segment.first_line),
                last_line: segment.last_line,
                format: segment.format.name(),
                inside: inside.name(),
            });
        }
        let counted = std::mem::take(&mut self.counted_unrecognized);
        self.inputs.push(InputSummary {
            lines: segment.last_line - segment.first_line + 1,
            unrecognized: tally.unrecognized + counted,
            prose: tally.prose,
            prompts: tally.prompts,
            listed: tally.listed,
            anchored: tally.anchored,
            cited: Vec::new(),
            segment,
        });
    }

    fn finish(mut self, line_count: u32) -> Part {
        let last = std::mem::replace(&mut self.segmenter, Segmenter::new(self.id, None));
        if let Some(segment) = last.finish(line_count) {
            let reader = match self.reader.take() {
                Some(reader) => reader,
                // No line was strong: every line is unknown.
                None => {
                    let mut reader = SegmentReader::new(segment.format);
                    self.feed_pending(&mut reader);
                    reader
                }
            };
            self.close(segment, reader);
        }
        if let Some(repeats) = self.repeats.take() {
            self.read_last(repeats);
        }
        if let (Some(wait), Some((n, text))) = (self.engine.wait, self.engine.resumed.take()) {
            self.facts.resumed.push(Resumed {
                wait,
                progress: self.span(n),
            });
            self.keep(n, &text);
        }
        let frame: Vec<Stamped> = self.timing.frame().collect();
        for Stamped { n, time, text } in frame {
            self.facts.line_times.push((self.span(n), time));
            self.keep(n, &text);
        }
        if self.last_text > 0 {
            self.facts.input_ends.push(self.span(self.last_text));
        }
        self.close_command();
        Part {
            facts: self.facts,
            inputs: self.inputs,
            kept: self.kept,
        }
    }
}

impl InputReader {
    /// Reads the last lines of each template seen more often than read,
    /// in input order, as the segments they came from would (with a fresh
    /// reader: each is a line that stands alone, a journal entry or a
    /// server line, and the last cycles of a loop come whole), and records
    /// what was counted of each template. The last lines of templates
    /// whose ring gave them up are kept for citing only, not read.
    fn read_last(&mut self, repeats: Aggregator) {
        let Drained {
            kept,
            cited,
            repeats: counted,
        } = repeats.drain(self.id);
        if counted.is_empty() {
            return;
        }
        for (n, text) in &cited {
            self.keep(*n, text);
        }
        let mut reader: Option<(Format, SegmentReader)> = None;
        for last in kept {
            for (i, (n, text)) in last.lines.iter().enumerate() {
                if last.message && i == 0 {
                    self.facts.messages.push(Message {
                        span: self.span(*n),
                        text: text.clone(),
                        pid: None,
                    });
                }
                self.keep(*n, text);
                if reader.as_ref().is_none_or(|(f, _)| *f != last.format) {
                    if let Some((_, done)) = reader.take() {
                        done.finish(&mut Out {
                            facts: &mut self.facts,
                            kept: &mut self.kept,
                        });
                    }
                    reader = Some((last.format, SegmentReader::new(last.format)));
                }
                let span = self.span(*n);
                if let Some((_, r)) = reader.as_mut() {
                    let mut out = Out {
                        facts: &mut self.facts,
                        kept: &mut self.kept,
                    };
                    let peeled = Peeler::new().peel(text);
                    let line = Line {
                        span,
                        text: &peeled.body,
                        frame: &peeled.frame,
                    };
                    r.read(&line, true, &mut out);
                }
            }
        }
        if let Some((_, done)) = reader.take() {
            done.finish(&mut Out {
                facts: &mut self.facts,
                kept: &mut self.kept,
            });
        }
        // What was read last goes where its lines are.
        let facts = &mut self.facts;
        facts.messages.sort_by_key(|m| m.span);
        facts.journal.sort_by_key(|e| e.span);
        facts.server_events.sort_by_key(|e| e.span);
        facts.line_times.sort_by_key(|t| t.0);
        facts.repeats.extend(counted);
    }
}

/// What the times of skimmed lines still decide: where untimed lines read
/// in full are placed, how zone-less and year-less times are read. Each is
/// a line the timeline lists, so its text goes with it.
#[derive(Default)]
struct Timing {
    /// The last skimmed line with a time, until a line read in full follows.
    last: Option<Stamped>,
    /// The first time: a line with none of its own above it is placed
    /// before it.
    first: Option<Stamped>,
    /// The first time without a zone, the first without a year, and the
    /// latest with a year.
    zoneless: Option<Stamped>,
    yearless: Option<Stamped>,
    latest: Option<Stamped>,
    /// A buffer to reuse for the next line's text.
    spare: String,
}

/// A skimmed line with a time.
#[derive(Clone)]
struct Stamped {
    n: u32,
    time: Timestamp,
    text: String,
}

impl Timing {
    fn skimmed(&mut self, n: u32, time: Timestamp, text: &str) {
        let mut buffer = match self.last.take() {
            Some(last) => last.text,
            None => std::mem::take(&mut self.spare),
        };
        buffer.clear();
        buffer.push_str(text);
        let stamped = Stamped {
            n,
            time,
            text: buffer,
        };
        if self.first.is_none() {
            self.first = Some(stamped.clone());
        }
        if time.offset_secs.is_none() && self.zoneless.is_none() {
            self.zoneless = Some(stamped.clone());
        }
        if !time.year_known && self.yearless.is_none() {
            self.yearless = Some(stamped.clone());
        }
        if time.year_known
            && self
                .latest
                .as_ref()
                .is_none_or(|l| time.utc_seconds() >= l.time.utc_seconds())
        {
            match &mut self.latest {
                Some(latest) => {
                    latest.n = n;
                    latest.time = time;
                    latest.text.clear();
                    latest.text.push_str(text);
                }
                None => self.latest = Some(stamped.clone()),
            }
        }
        self.last = Some(stamped);
    }

    /// The lines that decide the time frame, to record with the facts.
    fn frame(&mut self) -> impl Iterator<Item = Stamped> {
        [
            self.first.take(),
            self.zoneless.take(),
            self.yearless.take(),
            self.latest.take(),
        ]
        .into_iter()
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use crate::ingest::{Anchors, ingest};
    use crate::source::{Source, SourceMap};

    /// A batch's lines are looked at as line by line: the needles searched
    /// once over the block ([`super::Needles`]) give each line what
    /// [`aggregate::may_be_pid1`] and [`chatter::engine_waits`] give it
    /// alone, on every line of the real incidents and on lines that hold
    /// the needles in every place of a line (first, last, twice, beside a
    /// line that holds none), batches cut at every size.
    #[test]
    fn the_needles_of_a_batch_are_each_lines() {
        use super::{Batch, Look, aggregate, chatter};
        let mut lines: Vec<String> = vec![
            "[1]: ".into(),
            "systemd[1]: Started x.service.".into(),
            "2026-11-01T00:00:00+0000 node systemd[1]: a.service: Failed with result 'exit-code'.".into(),
            r#"{"_PID":"1","MESSAGE":"x"}"#.into(),
            r#"{"MESSAGE":"y","_PID":"12"}"#.into(),
            "(VllmWorkerProcess pid=3253) WARNING 08-13 11:31:37 shm_broadcast.py:386] No available block found in 60 second".into(),
            "No available shared memory broadcast block found in 60 seconds [1]: ".into(),
            "no free block found in the pool".into(),
            "".into(),
            "x".into(),
        ];
        let real = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("fixtures/real");
        for case in std::fs::read_dir(real).into_iter().flatten().flatten() {
            if let Ok(text) = std::fs::read_to_string(case.path().join("input.log")) {
                lines.extend(text.lines().map(str::to_owned));
            }
        }
        assert!(lines.len() > 4_000, "{}", lines.len());
        let anchors = Anchors::new(["CUDA error", "out of memory"]);
        let hot = anchors.with_facts();
        let look = Look {
            rules: &anchors,
            hot: Some(&hot),
            repeats: true,
        };
        let (mut pid1, mut waits) = (0, 0);
        let (mut reading, mut parsing) = (
            aggregate::Templater::default(),
            aggregate::Templater::default(),
        );
        for size in [1, 2, 3, 7, 2048] {
            for chunk in lines.chunks(size) {
                let mut batch = Batch::default();
                for (n, line) in chunk.iter().enumerate() {
                    batch.push(n as u32, line);
                }
                // Looked at in two parts, as the two threads may, each
                // with its own templater.
                batch.look_to(&look, chunk.len() / 2, &mut reading);
                batch.look(&look, &mut parsing);
                for (line, looked) in chunk.iter().zip(&batch.looked) {
                    let keyed = looked.hot || aggregate::may_be_pid1(line);
                    assert_eq!(
                        looked.key,
                        keyed.then(|| aggregate::key(line)).flatten(),
                        "{line:?}"
                    );
                    assert_eq!(looked.waits, chatter::engine_waits(line), "{line:?}");
                    pid1 += usize::from(!looked.hot && aggregate::may_be_pid1(line));
                    waits += usize::from(looked.waits);
                }
            }
        }
        assert!(pid1 > 10 && waits > 5, "{pid1} PID 1 lines, {waits} waits");
    }

    /// A message a terminal wrapped inside a token (batch M 943,
    /// https://github.com/NVIDIA/TensorRT-LLM/issues/260): the second half is joined to the first,
    /// and read as its rest, not as a line of its own; a line after a
    /// message that does not complete a catalog row is left to its reader.
    #[test]
    fn a_wrapped_messages_rest_is_read_as_part_of_it() {
        let text = "\
E1103 02:59:01.152656 81041 backend_model.cc:553] ERROR: Failed to create instance: unexpected error when creating modelInstanceState: [TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaSt
ream->get()): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)
";
        let mut sources = SourceMap::new();
        sources.add(Source::new("paste.txt", text.as_bytes()));
        let ingested = ingest(
            &sources,
            &Anchors::new(["CUDA runtime error", "out of memory"]),
        );
        let messages = &ingested.facts.messages;
        assert!(
            messages[0].text.ends_with("mCudaStream->get()): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)"),
            "{messages:?}"
        );
        let unread: u32 = ingested.inputs.iter().map(|i| i.unrecognized).sum();
        assert_eq!(unread, 0);
        // The same second line after a message it does not complete.
        let text = "\
E1103 02:59:01.152656 81041 backend_model.cc:553] ERROR: Failed to create instance: nothing about memory here at all, mCudaSt
ream->get()): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)
";
        let mut sources = SourceMap::new();
        sources.add(Source::new("paste.txt", text.as_bytes()));
        let ingested = ingest(
            &sources,
            &Anchors::new(["Failed to create instance", "out of memory"]),
        );
        assert_eq!(ingested.facts.messages.len(), 2);
        assert!(!ingested.facts.messages[0].text.contains("ream->get"));
    }

    /// A message a paste wrapped at a space: the space dropped and the rest
    /// unindented (vLLM's free-memory check, its first sentence split
    /// after `on startup`, as a chat window wraps it), or the space kept at
    /// the end of the first line (c10d's watchdog report, `timeout: ` then
    /// `WorkNCCL(…`). Each is joined back into one message; a line that
    /// goes on with an upper-case word after a dropped space is not tried.
    #[test]
    fn a_message_wrapped_at_a_space_is_joined_back() {
        let read = |text: &str, anchors: &[&str]| {
            let mut sources = SourceMap::new();
            sources.add(Source::new("paste.txt", text.as_bytes()));
            ingest(&sources, &Anchors::new(anchors.iter().copied()))
        };
        let text = "\
ValueError: Free memory on device cuda:1 (22.06/23.56 GiB) on startup
is less than desired GPU memory utilization (0.95, 22.38 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.
";
        let ingested = read(text, &["Free memory on device"]);
        let messages = &ingested.facts.messages;
        assert!(
            messages[0]
                .text
                .ends_with("on startup is less than desired GPU memory utilization (0.95, 22.38 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."),
            "{messages:?}"
        );
        let text = "\
[rank5]:[E814 17:27:59.408557873 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation timeout: 
WorkNCCL(SeqNum=4476, OpType=_ALLGATHER_BASE, NumelIn=4096, NumelOut=32768, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.
";
        let ingested = read(text, &["Watchdog caught collective operation timeout"]);
        let messages = &ingested.facts.messages;
        assert!(
            messages[0].text.ends_with("timeout: WorkNCCL(SeqNum=4476, OpType=_ALLGATHER_BASE, NumelIn=4096, NumelOut=32768, Timeout(ms)=600000) ran for 600012 milliseconds before timing out."),
            "{messages:?}"
        );
        // The same rest after a dropped space, but starting a sentence of
        // its own: two messages.
        let text = "\
ValueError: Free memory on device cuda:1 (22.06/23.56 GiB) on startup
Is less than desired GPU memory utilization (0.95, 22.38 GiB).
";
        let ingested = read(text, &["Free memory on device"]);
        assert!(
            !ingested.facts.messages[0].text.contains("desired"),
            "{:?}",
            ingested.facts.messages
        );
    }

    /// A message wrapped at a space onto an indented line (batch O's 1007,
    /// its source.md's thread): the indented line's message is the whole,
    /// so its catalog row reads the pressure figures; an indented line
    /// that completes no row is left as it is.
    #[test]
    fn an_indented_rest_of_the_line_above_is_read_with_it() {
        let text = "\
Jul 05 17:33:19 systemd-oomd[1599]: Killed /user.slice/user-1000.slice/user@1000.service/app.slice/overdeck-tmux-server.service
  due to memory pressure for /user.slice/user-1000.slice/user@1000.service being 56.11% > 50.00% for > 20s with reclaim activity
";
        let mut sources = SourceMap::new();
        sources.add(Source::new("paste.txt", text.as_bytes()));
        let ingested = ingest(&sources, &Anchors::new(["due to memory pressure for"]));
        let m = &ingested.facts.messages;
        assert!(
            m.len() == 1
                && m[0].span.line == 2
                && m[0]
                    .text
                    .contains("overdeck-tmux-server.service due to memory pressure"),
            "{m:?}"
        );
        let other = text.replace("Killed /", "Started /");
        let mut sources = SourceMap::new();
        sources.add(Source::new("paste.txt", other.as_bytes()));
        let ingested = ingest(&sources, &Anchors::new(["due to memory pressure for"]));
        assert!(ingested.facts.messages[0].text.starts_with("  due to"));
    }

    /// Each command typed at a prompt, with what it printed before the next
    /// prompt: fixtures/real/870's `qstat -u luirink`
    /// prints nothing (the prompt after it is empty), the `ps` below it two
    /// rows.
    #[test]
    fn commands_typed_at_prompts_and_what_they_printed() {
        let text = "\
[chodera@mskcc-ln1 ~/scripts]$ qstat -u luirink
[chodera@mskcc-ln1 ~/scripts]$ 
alice@node12:~$ squeue -u alice
             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)

alice@node12:~$ ps -u alice -o pid,lstart,cmd
  81234 Mon May 19 09:12:44 2025 /usr/bin/python -m torch.distributed.run train.py
  81240 Mon May 19 09:12:46 2025 /usr/bin/python -u train.py --local_rank=0
";
        let mut sources = SourceMap::new();
        sources.add(Source::new("paste.txt", text.as_bytes()));
        let ingested = ingest(&sources, &Anchors::none());
        let typed: Vec<(u32, &str, u32, Option<&str>)> = ingested
            .facts
            .typed_commands
            .iter()
            .map(|c| {
                (
                    c.span.line,
                    c.command.as_str(),
                    c.output_lines,
                    c.first_output.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            typed,
            [
                (1, "qstat -u luirink", 0, None),
                (
                    3,
                    "squeue -u alice",
                    1,
                    Some("JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)")
                ),
                (
                    6,
                    "ps -u alice -o pid,lstart,cmd",
                    2,
                    Some(
                        "81234 Mon May 19 09:12:44 2025 /usr/bin/python -m torch.distributed.run train.py"
                    )
                ),
            ]
        );
    }
}
