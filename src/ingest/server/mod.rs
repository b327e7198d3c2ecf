//! Everything a GPU serving process writes, read line by line through one
//! entry point ([`ServerLogParser::feed`]): SGLang and vLLM log lines, uvicorn,
//! Python tracebacks, C++ aborts, PyTorch c10d and NCCL lines, CUDA OOM
//! messages — under any layers a supervisor or log viewer added in front
//! (journald, docker compose, `docker logs -t`, Ray, PyTorch's `[rank0]:`).
//!
//! Several processes write into one stream and their lines interleave
//! (docs/formats/servers.md). State that spans lines (open tracebacks, a message
//! that continues) is therefore kept per writer: per stream key built from
//! the layers (journal PID and unit, compose service, `pid=` prefix,
//! `[rankN]:`).

mod args;
mod imbalance;
mod layers;
mod nccl;
mod oom;
mod pylog;
mod runtime;
mod sglang;
mod sizes;
mod title;
mod torch;
mod traceback;
mod uvicorn;
mod vllm;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Datelike, NaiveDate, NaiveTime, Timelike};

use super::Line;
use super::chatter;
use super::read::{Out, Read};
use crate::model::{
    CudaOom, Facts, Framework, NcclDetail, OomSource, RankTag, ServerEvent, ServerEventKind,
    Timestamp, TorchDist, TorchDistKind,
};
use crate::source::{Span, clean_line};

pub(super) use title::is_vllm_process_name;
pub use title::process_title;

/// Lines of a `warnings` message printed below its category, at most: a
/// stray line must not swallow the log (Hydra's is three).
const WARNING_MESSAGE_LINES: u8 = 6;

/// Metadata an outer layer (a journal entry) knows about a server line.
#[derive(Debug, Default, Clone)]
pub(crate) struct Outer {
    pub pid: Option<u32>,
    pub unit: Option<String>,
    pub time: Option<Timestamp>,
}

/// [`Outer`], borrowed: what [`ServerLogParser::skim`] needs.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OuterRef<'a> {
    pub pid: Option<u32>,
    pub unit: Option<&'a str>,
    pub time: Option<Timestamp>,
}

impl OuterRef<'_> {
    /// The stream of a line with no layer of its own.
    fn key(&self) -> StreamKey {
        StreamKey {
            outer_pid: self.pid,
            unit: self.unit.map(str::to_owned),
            ..StreamKey::default()
        }
    }
}

/// What [`ServerLogParser::skim`] could tell about a line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Skim {
    /// Only reading it in full can tell.
    Full,
    /// Reading it in full would make no event; it would be recognised or
    /// not, and give the line this time of its own.
    Read {
        recognized: bool,
        time: Option<Timestamp>,
    },
}

/// A streaming reader of server output. Feed it every line of one input (or
/// every message of one journal) in order.
#[derive(Debug, Default)]
pub(crate) struct ServerLogParser {
    /// The framework of the input, when detection knew it: the default for
    /// lines (tracebacks, NCCL) that do not say.
    hint: Option<Framework>,
    streams: BTreeMap<StreamKey, Stream>,
    /// Streams in the middle of something (a traceback, a message that
    /// continues): every line of theirs is read in full.
    busy: BTreeSet<StreamKey>,
}

/// Who wrote a line, as far as its layers tell.
#[derive(Debug, Clone, Default)]
pub(super) struct Writer {
    pub time: Option<Timestamp>,
    pub pid: Option<u32>,
    pub unit: Option<String>,
    pub container: Option<String>,
    pub process: Option<String>,
    pub host: Option<String>,
    pub rank: Option<RankTag>,
    pub framework: Option<Framework>,
    pub key: StreamKey,
    /// A layer was peeled off the line.
    pub layered: bool,
    /// A logger's record prefix (glog, TensorRT, Go's `log`) was peeled: the
    /// line is a record of a known logger whatever its message says.
    pub record: bool,
    /// The time a logger's record prefix gave, when no outer layer timed the
    /// line (it goes on the timeline).
    pub record_time: Option<Timestamp>,
    /// A log viewer's time on a line of its own: it stamps the next message.
    pub stamp: Option<Timestamp>,
    /// Ray's `[repeated Nx across cluster]`: the line stands for N.
    pub repeats: Option<u32>,
}

/// Lines with the same key come from one writer, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct StreamKey {
    pub outer_pid: Option<u32>,
    pub unit: Option<String>,
    pub container: Option<String>,
    pub process_pid: Option<u32>,
    pub torch_rank: Option<u32>,
    /// Open MPI's `[job,rank]<stdout>:` tag.
    pub mpi_rank: Option<u32>,
}

#[derive(Debug, Default)]
pub(super) struct Stream {
    /// The framework this writer's own lines showed.
    framework: Option<Framework>,
    tracebacks: traceback::Tracebacks,
    /// A log viewer's framing (RunPod's: a time line, `[pod id]`,
    /// `[level]`, then the message): the time it stamps the message with,
    /// and how many bracket lines followed it.
    framing: Option<(Timestamp, u8)>,
}

/// Parses a segment of server output; returns the number of lines it did not
/// recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts, hint: Option<Framework>) -> u32 {
    let mut parser = ServerLogParser::new(hint);
    let outer = Outer::default();
    lines
        .iter()
        .filter(|l| !parser.feed(l.text, l.span, &outer, facts))
        .count() as u32
}

/// Reads a segment of server output line by line (see [`super::reader`]).
pub(crate) struct ServerReader {
    parser: ServerLogParser,
    unrecognized: u32,
}

impl ServerReader {
    pub(crate) fn new(hint: Option<Framework>) -> ServerReader {
        ServerReader {
            parser: ServerLogParser::new(hint),
            unrecognized: 0,
        }
    }

    pub(crate) fn read(&mut self, line: &Line<'_>, hot: bool, out: &mut Out<'_>) -> Read {
        // A frame's time (a forwarder's) times the line as a journal's would.
        let time = line.frame.time;
        if !hot {
            let outer = OuterRef {
                time,
                pid: line.frame.pid,
                ..OuterRef::default()
            };
            if let Skim::Read { recognized, time } = self.parser.skim(line.text, outer) {
                self.unrecognized += u32::from(!recognized);
                return Read::Skimmed(time);
            }
        }
        let outer = Outer {
            time,
            pid: line.frame.pid,
            ..Outer::default()
        };
        if !self.parser.feed(line.text, line.span, &outer, out.facts) {
            self.unrecognized += 1;
        }
        Read::Parsed
    }

    pub(crate) fn finish(self) -> u32 {
        self.unrecognized
    }

    /// Lines not recognised so far: whether the last one was.
    pub(crate) fn unrecognized(&self) -> u32 {
        self.unrecognized
    }
}

impl ServerLogParser {
    pub fn new(hint: Option<Framework>) -> ServerLogParser {
        ServerLogParser {
            hint,
            streams: BTreeMap::new(),
            busy: BTreeSet::new(),
        }
    }

    /// What reading a line with no anchor in full would record, without
    /// reading it: whether it is recognised, its own time, and the writer's
    /// framework. Every event needs an anchor (see `ingest::anchors`), and a
    /// writer in the middle of a traceback reads every line; a line under a
    /// layer (compose, Ray, `[rankN]:`) or a c10 line is read in full, one
    /// under a logger's record prefix alone is skimmed on its message.
    pub fn skim(&mut self, text: &str, outer: OuterRef<'_>) -> Skim {
        // Colour codes a paste spelled out: lines that took the fast path
        // (journals, SGLang logs) skipped the frame peeler.
        let cleaned = clean_line(text);
        let cleaned = crate::ingest::frame::strip_escapes(&cleaned);
        // A logger's record prefix and nothing around it, under the journal
        // (kubelet's glog lines, every few seconds on a Kubernetes node) or
        // as a raw log's line (Ollama's slog records): a record of a known
        // logger whatever its message says, whose message is skimmed like
        // any other. Any other layer may open a writer of
        // its own: read in full.
        // So is a process prefix (vLLM's `(EngineCore_DP0 pid=N) `, half of
        // a vLLM V1 journal's lines): its writer is the prefix's process,
        // skimmed unless busy, its framework kept as the full reading would.
        // In a raw log (no outer time) the record's own head times it.
        let (record, record_time) = match outer.time {
            Some(_) => (layers::record_only(&cleaned), None),
            None => layers::record_only_timed(&cleaned).map_or((None, None), |(p, t)| (Some(p), t)),
        };
        let process = match record {
            None if outer.time.is_some() => layers::process_only(&cleaned),
            _ => None,
        };
        let text = match (record, &process) {
            (Some(payload), _) => payload,
            // The full reading calls an empty message under a layer recognised.
            (None, Some(p)) if p.payload.trim().is_empty() => return Skim::Full,
            (None, Some(p)) => p.payload,
            (None, None) if layers::may_peel(&cleaned) => return Skim::Full,
            (None, None) => &cleaned,
        };
        let record = record.is_some() || process.as_ref().is_some_and(|p| p.record);
        let mut key = outer.key();
        key.process_pid = process.as_ref().map(|p| p.pid);
        if !self.busy.is_empty() && self.busy.contains(&key) {
            return Skim::Full;
        }
        // Under a log viewer's time line come its bracketed lines, which
        // only the full reading knows (`feed`'s framing).
        let mut known = self
            .streams
            .get(&key)
            .map(|s| (s.framing.is_some(), s.framework));
        if known.is_some_and(|(framing, _)| framing) {
            return Skim::Full;
        }
        // The framework a process prefix names is its writer's until the
        // writer's own lines say (`feed`).
        if let Some(framework) = process
            .as_ref()
            .filter(|_| known.is_none_or(|(_, f)| f.is_none()))
            .and_then(layers::ProcessOnly::framework)
        {
            self.streams.entry(key.clone()).or_default().framework = Some(framework);
            known = Some((false, Some(framework)));
        }
        // A line of SGLang's or vLLM's own: its writer's framework from now
        // on (looked up again only when that is news).
        let streams = &mut self.streams;
        let saw = |framework: Framework| {
            if known.is_none_or(|(_, f)| f != Some(framework)) {
                streams.entry(key).or_default().framework = Some(framework);
            }
        };
        // A time of the line's own counts when no outer layer timed it.
        let own = |time: Option<Timestamp>| if outer.time.is_none() { time } else { None };
        // Under the journal, the journal's time counts: no need for the line's.
        if outer.time.is_some() && sglang::is_prefixed(text) {
            saw(Framework::Sglang);
            return Skim::Read {
                recognized: true,
                time: None,
            };
        }
        // The lines servers print by the million, told by their bytes
        // (`ingest::chatter`): what the regexes below would conclude.
        if outer.time.is_some() && chatter::vllm_record(text) {
            saw(Framework::Vllm);
            return Skim::Read {
                recognized: true,
                time: None,
            };
        }
        if chatter::access_line(text) {
            return Skim::Read {
                recognized: true,
                time: None,
            };
        }
        if let Some(time) = sglang::prefix_time(text) {
            saw(Framework::Sglang);
            return Skim::Read {
                recognized: true,
                time: own(time),
            };
        }
        if let Some(record) = vllm::may_be_record(text)
            .then(|| vllm::parse_record(text, outer.time))
            .flatten()
        {
            saw(Framework::Vllm);
            return Skim::Read {
                recognized: true,
                time: own(record.time),
            };
        }
        if torch::may_be_c10(text) {
            return Skim::Full;
        }
        if uvicorn::parse(text).is_some() || pylog::is_progress_bar(text) {
            return Skim::Read {
                recognized: true,
                time: None,
            };
        }
        if let Some(line) = pylog::parse_logging(text) {
            return Skim::Read {
                recognized: true,
                time: own(line.time),
            };
        }
        // A frame opens a traceback even without its first line, and an
        // exception line ends one whose top was cut; a warning makes the
        // next line its source; a framework's bare message is read as its.
        if traceback::may_open(text)
            || pylog::warning(text).is_some()
            || traceback::may_be_bare_exception(text)
            || vllm::may_be_bare(text)
            || sglang::is_own_message(text)
            || runtime::parse(text).is_some()
        {
            return Skim::Full;
        }
        if pylog::shell_foreground(text) || chatter::progress(text) {
            return Skim::Read {
                recognized: true,
                time: None,
            };
        }
        Skim::Read {
            recognized: record || traceback::idle_recognizes(text),
            time: own(record_time),
        }
    }

    /// Reads one line (or one line of a journal message, with the entry's
    /// metadata in `outer`); returns whether it was recognised.
    pub fn feed(&mut self, text: &str, span: Span, outer: &Outer, facts: &mut Facts) -> bool {
        // Journal messages arrive uncleaned; vLLM's records end in `\r`.
        let text = clean_line(text);
        let text = crate::ingest::frame::strip_escapes(&text);
        let mut writer = Writer::from_outer(outer);
        let payload = layers::peel(&text, &mut writer);
        // The stream keeps a line with an anchor as a message before it
        // reads it: the writer its prefix names goes with it.
        if let Some(m) = facts.messages.last_mut().filter(|m| m.span == span) {
            m.pid = m.pid.or(writer.key.process_pid);
        }
        let stream = self.streams.entry(writer.key.clone()).or_default();
        if stream.framework.is_none() {
            stream.framework = writer.framework;
        }
        if let Some(time) = writer.stamp {
            stream.framing = Some((time, 0));
            return true;
        }
        if let Some((time, brackets)) = stream.framing.take() {
            if brackets < 2 && layers::is_viewer_bracket(payload) {
                stream.framing = Some((time, brackets + 1));
                return true;
            }
            writer.time.get_or_insert(time);
        }
        if let (Some(t), None) = (writer.record_time, writer.time) {
            facts.line_times.push((span, t));
            writer.time = Some(t);
        }
        let mut cx = Cx {
            writer: &writer,
            stream,
            facts,
            span,
            hint: self.hint,
        };
        let recognized =
            cx.dispatch(payload) || writer.record || (writer.layered && payload.trim().is_empty());
        if cx.stream.tracebacks.busy() {
            self.busy.insert(writer.key);
        } else if !self.busy.is_empty() {
            self.busy.remove(&writer.key);
        }
        recognized
    }
}

/// One line being read: its writer, that writer's state, and where events go.
pub(super) struct Cx<'a> {
    writer: &'a Writer,
    stream: &'a mut Stream,
    facts: &'a mut Facts,
    span: Span,
    hint: Option<Framework>,
}

impl Cx<'_> {
    fn dispatch(&mut self, payload: &str) -> bool {
        let after_warning = std::mem::take(&mut self.stream.tracebacks.warning_source);
        let message_lines = std::mem::take(&mut self.stream.tracebacks.warning_message);
        if after_warning && payload.starts_with("  ") && !payload.trim().is_empty() {
            return true;
        }
        // A line of a warning's message printed below its `UserWarning:`
        // (`pylog::WARNING`): the source line may still follow. A line that
        // opens a traceback ends the message.
        if message_lines > 0
            && payload.starts_with(|c: char| !c.is_whitespace())
            && !traceback::may_open(payload)
        {
            self.stream.tracebacks.warning_source = true;
            self.stream.tracebacks.warning_message = message_lines - 1;
            let time = self.writer.time;
            self.detect(payload, None, None, time);
            return true;
        }
        // NCCL ≥ 2.26 stamps its warnings `[YYYY-MM-DD HH:MM:SS] `, which
        // looks like an SGLang main-process prefix: try NCCL first.
        if let Some(line) = nccl::parse(payload) {
            self.stream.tracebacks.end_continuation();
            self.nccl(line);
            return true;
        }
        if let Some(line) = sglang::parse_prefix(payload) {
            self.stream.framework = Some(Framework::Sglang);
            self.stream.tracebacks.end_continuation();
            self.own_time(line.time);
            self.sglang(line);
            return true;
        }
        if let Some(record) = vllm::parse_record(payload, self.writer.time) {
            self.stream.framework = Some(Framework::Vllm);
            self.own_time(record.time);
            self.vllm(record);
            return true;
        }
        if let Some(line) = torch::parse_c10(payload, self.writer.time) {
            self.stream.tracebacks.end_continuation();
            self.c10(line);
            return true;
        }
        if let Some(event) = uvicorn::parse(payload) {
            self.stream.tracebacks.end_continuation();
            if let Some(event) = event {
                let time = self.writer.time;
                self.push(ServerEventKind::Uvicorn(event), None, None, time);
            }
            return true;
        }
        if let Some(line) = pylog::parse_logging(payload) {
            self.stream.tracebacks.end_continuation();
            self.own_time(line.time);
            let time = line.time.or(self.writer.time);
            self.detect(line.message, None, None, time);
            return true;
        }
        if let Some(message) = pylog::warning(payload) {
            self.stream.tracebacks.end_continuation();
            self.stream.tracebacks.warning_source = true;
            if message.is_empty() {
                self.stream.tracebacks.warning_message = WARNING_MESSAGE_LINES;
            }
            let time = self.writer.time;
            self.detect(message, None, None, time);
            return true;
        }
        if let Some(signal) = pylog::shell_foreground_or_glued(payload) {
            self.stream.tracebacks.end_continuation();
            let kind = ServerEventKind::ShellForegroundSignaled {
                signal: signal.to_owned(),
            };
            let time = self.writer.time;
            self.push(kind, None, None, time);
            return true;
        }
        // Before the bars: zsh's job report can be glued to the bar the
        // job was drawing.
        if let Some(job) = pylog::shell_job(payload) {
            self.stream.tracebacks.end_continuation();
            let kind = ServerEventKind::ShellJobSignaled {
                pid: job.pid,
                signal: job.signal.to_owned(),
                command: job.command.to_owned(),
            };
            let time = self.writer.time;
            self.push(kind, None, None, time);
            return true;
        }
        if pylog::is_progress_bar(payload) || chatter::progress(payload) {
            self.stream.tracebacks.end_continuation();
            return true;
        }
        if let Some(message) = runtime::parse(payload) {
            self.stream.tracebacks.end_continuation();
            let time = self.writer.time;
            self.detect(message, None, None, time);
            return true;
        }
        // A framework's own message pasted without its prefix: the message
        // tells whose it is.
        if let Some(message) = vllm::bare(payload) {
            self.stream.framework = Some(Framework::Vllm);
            self.vllm_bare(message);
            return true;
        }
        if sglang::is_own_message(payload) {
            self.stream.framework = Some(Framework::Sglang);
            self.stream.tracebacks.end_continuation();
            self.sglang(sglang::SglangLine {
                time: None,
                rank: None,
                message: payload,
            });
            return true;
        }
        let time = self.writer.time;
        if self.plain(payload, None, time) {
            return true;
        }
        // A line no structure explains, but whose text is unmistakable.
        self.detect(payload, None, None, time)
    }

    /// A line's own timestamp, for the timeline, when no outer layer (the
    /// journal, a log viewer) already timed it.
    fn own_time(&mut self, time: Option<Timestamp>) {
        if let (Some(t), None) = (time, self.writer.time) {
            self.facts.line_times.push((self.span, t));
        }
    }

    fn framework(&self) -> Framework {
        self.stream
            .framework
            .or(self.writer.framework)
            .or(self.hint)
            .unwrap_or(Framework::Unknown)
    }

    /// Records an event of this line; returns its index in `server_events`.
    fn push(
        &mut self,
        kind: ServerEventKind,
        framework: Option<Framework>,
        rank: Option<RankTag>,
        time: Option<Timestamp>,
    ) -> usize {
        let w = self.writer;
        self.facts.server_events.push(ServerEvent {
            framework: framework.unwrap_or_else(|| self.framework()),
            kind,
            rank: rank.or(w.rank),
            time: time.or(w.time),
            pid: w.pid,
            unit: w.unit.clone(),
            process: w.process.clone(),
            container: w.container.clone(),
            host: w.host.clone(),
            span: self.span,
        });
        self.facts.server_events.len() - 1
    }

    /// Runs the detectors that recognise a failure by its text alone (CUDA
    /// OOM, c10d watchdog and NCCL errors, vLLM's process failures) and
    /// records what they find; returns whether any did.
    fn detect(
        &mut self,
        text: &str,
        exception: Option<&str>,
        rank: Option<RankTag>,
        time: Option<Timestamp>,
    ) -> bool {
        let found = findings(text, exception);
        let any = !found.is_empty();
        for (kind, framework) in found {
            self.push(kind, framework, rank, time);
        }
        any
    }

    fn nccl(&mut self, line: nccl::NcclParsed) {
        let nccl::NcclParsed { line, time } = line;
        let time = time.or(self.writer.time);
        let oom = matches!(&line.detail, NcclDetail::CudaFailure { error, .. } if error == "out of memory");
        let version = match &line.detail {
            NcclDetail::Version(v) => Some(v.clone()),
            _ => None,
        };
        let keep = nccl::worth_keeping(&line);
        let (pid, host) = (line.pid, line.host.clone());
        let mut pushed = Vec::new();
        if let Some(version) = version {
            let kind = ServerEventKind::Version {
                component: "NCCL".to_owned(),
                version,
            };
            pushed.push(self.push(kind, None, None, time));
        }
        if keep {
            pushed.push(self.push(ServerEventKind::Nccl(line), None, None, time));
        }
        if oom {
            let kind = ServerEventKind::CudaOom(CudaOom::new(OomSource::Nccl));
            pushed.push(self.push(kind, None, None, time));
        }
        // The NCCL line names its own writer: that beats the outer layers.
        for i in pushed {
            let event = &mut self.facts.server_events[i];
            event.pid = Some(pid);
            event.host = Some(host.clone());
        }
    }

    fn c10(&mut self, line: torch::C10Line<'_>) {
        let mut found = findings(line.message, None);
        let typed = found
            .iter()
            .any(|(k, _)| matches!(k, ServerEventKind::TorchDist(_)));
        if !typed && matches!(line.level, 'E' | 'F') {
            found.push((
                ServerEventKind::TorchDist(TorchDist {
                    level: None,
                    source: None,
                    rank: torch::message_rank(line.message),
                    kind: TorchDistKind::Other {
                        message: line.message.to_owned(),
                    },
                }),
                None,
            ));
        }
        for (mut kind, framework) in found {
            if let ServerEventKind::TorchDist(t) = &mut kind {
                t.level = Some(line.level);
                t.source = Some(line.source.to_owned());
            }
            self.push(kind, framework, None, line.time);
        }
    }
}

/// Whether `text` is a Python exception line (`ValueError: …`): in a
/// `Name: value` listing, such a line is server output, not an entry.
pub(crate) fn is_exception_line(text: &str) -> bool {
    traceback::exception_line(text)
        .is_some_and(|(name, _)| name.ends_with("Error") || name.ends_with("Exception"))
}

/// The text under the layers other programs put in front of a line
/// (docker compose's `service-1  | `, vLLM's and Ray's `(Name pid=N) `, a
/// log viewer's time, a logger's record prefix): what a recogniser of a
/// line's own grammar reads when the server parser did not claim it.
pub(crate) fn under_layers(text: &str) -> &str {
    layers::peel(text, &mut Writer::default())
}

/// Whether `text` opens a record: a logger's (glog's `E0306 `, TensorRT's
/// `[TRT]`, Go's `log` and `slog`, zerolog), a server's own head (vLLM's
/// `INFO 06-01 12:00:00 [file.py:N]`, SGLang's `[2026-… TP0]`), or a layer
/// a server's lines carry (a process prefix `(EngineCore pid=N)`, a
/// viewer's time, compose's service, `[rank0]:`): a record stands alone,
/// so it is never the rest of a line a terminal wrapped above it. (Issue
/// 23: a raw vLLM log's process-prefixed lines each asked the catalogs
/// whether they completed the line above, 16% of its instructions.)
pub(crate) fn opens_record(text: &str) -> bool {
    layers::may_peel(text)
        || crate::ingest::vllm_head::head(text).is_some()
        || sglang::is_prefixed(text)
}

/// Text-only detectors, in a fixed order. The framework is set when the text
/// names it.
fn findings(text: &str, exception: Option<&str>) -> Vec<(ServerEventKind, Option<Framework>)> {
    let mut found = Vec::new();
    if let Some(mut oom) = oom::parse(text) {
        oom.exception = exception.map(str::to_owned);
        found.push((ServerEventKind::CudaOom(oom), None));
    }
    if let Some(dist) = torch::detect(text) {
        found.push((ServerEventKind::TorchDist(dist), None));
    }
    if let Some(failure) = vllm::failure(text) {
        found.push((ServerEventKind::VllmFailure(failure), Some(Framework::Vllm)));
    }
    found
}

/// `09:38:52` + `123456789` → a time of day; the fraction is right-padded
/// (`.5` is half a second, `.000100` is 100 µs).
pub(super) fn time_of_day(hms: &str, frac: Option<&str>) -> Option<NaiveTime> {
    let time = NaiveTime::parse_from_str(hms, "%H:%M:%S").ok()?;
    let Some(digits) = frac else {
        return Some(time);
    };
    let nanos: u32 = format!("{digits:0<9}").get(..9)?.parse().ok()?;
    time.with_nanosecond(nanos)
}

/// A timestamp printed without a year (vLLM, c10). The year comes from the
/// outer layer's timestamp when that has one (stepping over New Year), else
/// 2000 stands in — a leap year, so Feb 29 survives — and `year_known` is false.
pub(super) fn yearless(
    month: u32,
    day: u32,
    time: NaiveTime,
    reference: Option<Timestamp>,
) -> Option<Timestamp> {
    let (year, known) = match reference.filter(|r| r.year_known) {
        Some(r) => {
            let (ref_year, ref_month) = (r.local.year(), r.local.month());
            let year = match (month, ref_month) {
                (12, 1) => ref_year - 1,
                (1, 12) => ref_year + 1,
                _ => ref_year,
            };
            (year, true)
        }
        None => (2000, false),
    };
    let date = NaiveDate::from_ymd_opt(year, month, day)?;
    Some(Timestamp {
        local: date.and_time(time),
        offset_secs: None,
        year_known: known,
    })
}
