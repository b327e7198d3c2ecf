//! Lines no segment parser claimed meet every line-level recogniser.
//!
//! Detection decides the structure of a segment (a table, a journal, a
//! traceback), never whether a message is seen. A line of an `unknown`
//! segment, output under a shell prompt no format claimed, or a line the
//! segment's own parser could not read (a server log's, a kernel log's, a
//! buffered format's: table, ps, `systemctl status`/`show`, check_env,
//! package log, /proc cgroup) goes to [`LineReader`]: the server
//! parser (SGLang, vLLM, Python exceptions, CUDA OOM, NCCL, c10d), the
//! kernel parser (NVRM, OOM killer), and systemd's unit-lifecycle grammar
//! (`ollama.service: Main process exited, …`), each under the same
//! prefilter rules as in its own segment, then the upstream catalogs
//! (`crate::catalogs`: a known message is read). A line none of them knows is
//! prose when it reads as a person's sentence ([`is_prose`]), else
//! unrecognised. What was not understood is listed (bounded) for
//! `rootcause inputs`.

use std::sync::LazyLock;

use regex::Regex;

use super::journal_fields::{pid1_message_cut, pid1_message_in, unit_of_pid1_message};
use super::read::{Out, Read};
use super::server::{Outer, OuterRef, Skim};
use super::stack_frames::{
    is_dotnet_frame, is_go_stack_line, is_native_frame, sample_call_graph_line,
};
use super::{KernelParser, Line, ServerLogParser};
use crate::model::{Facts, JournalEntry};

/// Lines listed per segment at most; the counts go on.
const LISTED: usize = 64;
/// Characters of a listed line kept at most.
const LISTED_CHARS: usize = 400;

/// What a line that no parser recognised was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LineKind {
    /// A shell prompt and the command typed at it.
    Prompt,
    /// A person's sentence between pieces of output.
    Prose,
    /// Machine output nothing here understands.
    Unrecognized,
}

impl LineKind {
    pub fn name(self) -> &'static str {
        match self {
            LineKind::Prompt => "prompt",
            LineKind::Prose => "prose",
            LineKind::Unrecognized => "unrecognised",
        }
    }
}

/// One line of a segment that was a prompt, prose or not understood.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub line: u32,
    pub kind: LineKind,
    pub text: String,
    /// For an unrecognised line, the kind of machine output it looks like,
    /// when a cheap test can tell ([`family`]): a gap made visible.
    pub family: Option<&'static str>,
}

/// What a segment's reading did not turn into facts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub unrecognized: u32,
    pub prose: u32,
    pub prompts: u32,
    /// The first such lines, in order.
    pub listed: Vec<Listed>,
    /// The unrecognised lines that are also messages for the rules, in
    /// order: a finding may cite them. Bounded as the messages are.
    pub anchored: Vec<u32>,
}

impl Tally {
    /// Only a count of unrecognised lines (a parser that reads whole).
    pub fn unrecognized(n: u32) -> Tally {
        Tally {
            unrecognized: n,
            ..Tally::default()
        }
    }

    pub(super) fn note(&mut self, kind: LineKind, line: &Line<'_>) {
        match kind {
            LineKind::Prompt => self.prompts += 1,
            LineKind::Prose => self.prose += 1,
            LineKind::Unrecognized => self.unrecognized += 1,
        }
        if self.listed.len() < LISTED {
            let text: String = line.text.chars().take(LISTED_CHARS).collect();
            self.listed.push(Listed {
                line: line.span.line,
                kind,
                text,
                family: (kind == LineKind::Unrecognized)
                    .then(|| family(line.text).or_else(|| line.frame.what()))
                    .flatten(),
            });
        }
    }
}

/// Which recognisers a [`LineReader`] runs: all of them, or all but the
/// one the segment's own parser already is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Except {
    Nothing,
    Server,
    Kernel,
}

/// Every line-level recogniser, for lines no segment parser claimed.
pub(super) struct LineReader {
    server: Option<ServerLogParser>,
    kernel: Option<KernelParser>,
    /// A text table in progress (`ingest::tables`).
    tables: super::tables::Tables,
    /// How many of the next lines upstream prints as one message with the
    /// last catalog line (its row's `block`: ggml's failed call and abort
    /// after `current device: …`); such a line is read as part of it.
    block_rest: u8,
    /// A `kubectl describe` being read (`ingest::kube_describe`).
    describe: super::kube_describe::Describe,
    /// A Kubernetes Event object's fields being read.
    event: super::kube_describe::EventObject,
    /// How many more of Ray's `ActorDiedError` fields may follow
    /// ([`ray_actor_field`]).
    ray_fields: u8,
    /// A configuration echoed as YAML under its head (`ingest::config_echo`).
    config: super::config_echo::ConfigEcho,
    /// A catalog line cut mid-sentence at a terminal's width: how many more
    /// of its lines may follow, and the width ([`wrapped_on`]).
    wrapped: Option<(u8, usize)>,
    /// The column a Rich log record's message starts at, while its wrapped
    /// lines may follow ([`rich_head`]).
    rich: Option<usize>,
    tally: Tally,
}

impl LineReader {
    pub(super) fn new(except: Except) -> LineReader {
        LineReader {
            server: (except != Except::Server).then(|| ServerLogParser::new(None)),
            kernel: (except != Except::Kernel).then(KernelParser::default),
            tables: super::tables::Tables::default(),
            block_rest: 0,
            describe: super::kube_describe::Describe::default(),
            event: super::kube_describe::EventObject::default(),
            ray_fields: 0,
            config: super::config_echo::ConfigEcho::default(),
            wrapped: None,
            rich: None,
            tally: Tally::default(),
        }
    }

    /// Reads a line: recognised, it may make facts; else it is counted and
    /// listed as prose or unrecognised. Blank lines count as nothing.
    pub(super) fn read(&mut self, line: &Line<'_>, hot: bool, out: &mut Out<'_>) -> Read {
        let in_block = self.block_rest > 0;
        self.block_rest = self.block_rest.saturating_sub(1);
        let wrapped = self.wrapped.take();
        if line.text.trim().is_empty() {
            self.tables.blank();
            return Read::Skimmed(None);
        }
        // The rest of a Rich record's message, wrapped under its column.
        if let Some(column) = self.rich.take() {
            if rich_continues(line.text, column) {
                self.rich = Some(column);
                return Read::Skimmed(None);
            }
        }
        let rich = rich_head(line.text);
        self.rich = rich;
        // A line of a text table (dcgmi's boxes, a Markdown table, a
        // column listing, a tool's JSON): read by the table's header,
        // whatever its cells say.
        let made = |facts: &crate::model::Facts| {
            (
                facts.gpu_processes.len(),
                facts.listeners.len(),
                facts.gpu_health.len(),
                // A diag result, and each row of its warning, is cited.
                facts
                    .diag_results
                    .iter()
                    .map(|r| 1 + r.detail_spans.len())
                    .sum::<usize>(),
                facts.instances.len(),
                facts.container_rows.len(),
                // A process of a tree (`pstree -p`).
                facts.ps.len(),
                // A holder of a GPU's device node (`fuser -v /dev/nvidia0`).
                facts.device_holders.len(),
                // A container's record, and each State field's line of it.
                facts
                    .containers
                    .iter()
                    .map(|c| 1 + c.lines.len())
                    .sum::<usize>(),
            )
        };
        let facts_before = made(out.facts);
        if self.tables.read(line.text, line.span, out.facts) {
            // A row that made a fact (nvtop's GPU process, a port `docker
            // ps` publishes, a GPU's last Xid in `dcgmi dmon`, a `dcgmi
            // diag` result or a row of its warning, a control plane's
            // instance, a container `docker inspect` shows, a process of a
            // `pstree`, a holder of a device node in `fuser -v`) is cited:
            // keep it.
            return if made(out.facts) != facts_before {
                Read::Parsed
            } else {
                Read::Skimmed(None)
            };
        }
        if let Some(read) = self.recognize(line, hot, out.facts) {
            return read;
        }
        // A message of an upstream catalog is understood even where no
        // parser makes a fact of it: the rules read it by its row. Only a
        // line with an anchor can be one.
        if hot {
            if let Some(after) = crate::catalogs::catalogs().known_block(line.text) {
                self.block_rest = after;
                self.wrapped = cut_mid_sentence(line.text).map(|width| (WRAPPED_LINES, width));
                return Read::Skimmed(None);
            }
        }
        // A known logger's record whose message no recogniser knows is
        // still that logger's record (`ingest::frame`): its time is kept.
        if line.frame.record {
            return match line.frame.time {
                Some(time) if hot => {
                    out.facts.line_times.push((line.span, time));
                    Read::Parsed
                }
                time => Read::Skimmed(time),
            };
        }
        // A line of the message a catalog line opened (see `block_rest`).
        if in_block {
            return Read::Skimmed(None);
        }
        // The rest of a catalog message a terminal wrapped at its width.
        if let Some((left, width)) = wrapped {
            if let Some(next) = wrapped_on(line.text, left, width) {
                self.wrapped = next;
                return Read::Skimmed(None);
            }
        }
        // Ray's `ActorDiedError` lists the dead actor under its first line
        // (read by the server parser), a field a line.
        match ray_actor_field(line.text) {
            Some(true) => {
                self.ray_fields = 5;
                return Read::Skimmed(None);
            }
            Some(false) if self.ray_fields > 0 => {
                self.ray_fields -= 1;
                return Read::Skimmed(None);
            }
            _ => self.ray_fields = 0,
        }
        // A `kubectl describe` in progress (or its `Name:` line).
        if self.describe.read(line.text) || self.event.read(line.text) {
            return Read::Skimmed(None);
        }
        // A configuration echoed as YAML under its `…config:` head.
        if self.config.read(line.text, line.span.line) {
            return Read::Skimmed(None);
        }
        // A Rich record's head whose message no recogniser knows: the
        // logger's record all the same.
        if rich.is_some() {
            return Read::Skimmed(None);
        }
        // A line of macOS `sample`'s call graph: where a thread sat.
        if let Some(l) = sample_call_graph_line(line.text, line.span) {
            out.facts.call_graph.push(l);
            return Read::Parsed;
        }
        let prose = is_prose(line.text)
            || is_annotation(line.text)
            || is_elision(line.text)
            || is_heading(line.text);
        // Machine output that says what it is by its own grammar and makes
        // no fact: a report aligned by padding, NCCL's interface list
        // wrapped onto lines of its own, a wrapped logfmt record's fields,
        // llama.cpp's `function: ` lines, an INI setting, docker compose's
        // own lines, a command-line tool's closing `Error: …`. A person's
        // sentence stays prose whatever it starts with.
        // The same grammar under another program's layers (`llama-cpp-1  |
        // ggml_cuda_init: found 1 CUDA devices:` in `docker compose logs`).
        let shaped = |text: &str| {
            super::tables::is_aligned_key_value(text)
                || is_nccl_interface_list(text)
                || is_logfmt_fields(text)
                || is_ggml_line(text)
                || is_setting_line(text)
                || is_compose_cli_line(text)
                || is_slurm_client_line(text)
                || is_sinfo_row(text)
                || is_lspci_row(text)
                || is_dkms_status_row(text)
                || is_listing_summary(text)
                || is_cli_verdict(text)
                || is_rule_line(text)
                || is_dotnet_frame(text)
                || is_go_stack_line(text)
                || is_native_frame(text)
                || is_pod_status_field(text)
                || super::shell_notes::is_shell_note(text)
                || super::journal_short::is_cut_record(text)
                || super::nccl_tests::is_line(text)
                || is_kaldi_command_echo(text)
                || is_gin_mode_hint(text)
        };
        if !prose
            && (shaped(line.text) || {
                let payload = super::server::under_layers(line.text);
                payload.len() < line.text.len() && shaped(payload)
            })
        {
            return Read::Skimmed(None);
        }
        let kind = if prose {
            LineKind::Prose
        } else {
            LineKind::Unrecognized
        };
        self.tally.note(kind, line);
        // A rule's signature may know what no parser did: the report counts
        // the line as understood if a finding cites it.
        if kind == LineKind::Unrecognized
            && out
                .facts
                .messages
                .binary_search_by_key(&line.span, |m| m.span)
                .is_ok()
        {
            self.tally.anchored.push(line.span.line);
        }
        Read::Skimmed(None)
    }

    /// Counts a shell prompt line.
    pub(super) fn prompt(&mut self, line: &Line<'_>) {
        self.tally.note(LineKind::Prompt, line);
        self.tables.prompt(line.text, line.span);
    }

    /// The recognisers in turn; `None` when none knows the line. Each
    /// follows the prefilter as its own segment reader does: a line with no
    /// anchor is skimmed where skimming tells the same.
    fn recognize(&mut self, line: &Line<'_>, hot: bool, facts: &mut Facts) -> Option<Read> {
        let text = line.text;
        // Only the service manager words its messages like this (the
        // grammar journal_cat.rs reads as PID 1's too); quoted in a mail or
        // Markdown reply, `>nvidia-docker.service: Main process exited, …`
        // (the quote is a frame, peeled before).
        let message = may_be_pid1(text)
            .then(|| unit_of_pid1_message(text.trim_end()))
            .flatten()
            .map(|unit| (Some(unit), text.trim_end().to_owned()))
            // A message of the systemd catalog cut before its unit or behind
            // a prefix (`: ollama.service: Failed with result 'exit-code'.`).
            .or_else(|| {
                hot.then(|| pid1_message_in(text))
                    .flatten()
                    .map(|(unit, message)| (Some(unit), message))
            })
            // Or cut with its unit (`: Main process exited, code=exited,
            // status=1/FAILURE`): the correlator finds the unit.
            .or_else(|| {
                hot.then(|| pid1_message_cut(text))
                    .flatten()
                    .map(|message| (None, message))
            });
        if let Some((unit, message)) = message {
            facts.journal.push(JournalEntry {
                time: line.frame.time,
                host: line.frame.host.clone(),
                identifier: "systemd".to_owned(),
                pid: Some(1),
                unit,
                cmdline: None,
                message,
                span: line.span,
            });
            return Some(Read::Parsed);
        }
        if let Some(server) = &mut self.server {
            let mut full = hot;
            let time = line.frame.time;
            if !hot {
                let outer = OuterRef {
                    time,
                    pid: line.frame.pid,
                    ..OuterRef::default()
                };
                match server.skim(text, outer) {
                    Skim::Read {
                        recognized: true,
                        time,
                    } => return Some(Read::Skimmed(time)),
                    Skim::Read { .. } => {}
                    Skim::Full => full = true,
                }
            }
            let outer = Outer {
                time,
                pid: line.frame.pid,
                ..Outer::default()
            };
            if full && server.feed(text, line.span, &outer, facts) {
                return Some(Read::Parsed);
            }
        }
        // A test harness's own lines (pytest's report, CI GPU summaries),
        // an RPC server's connection log, `top`'s summary.
        if super::harness::read(text, line.span, facts)
            || is_rpyc_server_line(text)
            || super::ps::is_top_summary(text)
        {
            return Some(Read::Skimmed(None));
        }
        if let Some(kernel) = &mut self.kernel {
            if hot || kernel.busy() {
                // `grep NVRM /var/log/kern.log | cut …` and `journalctl -k
                // -o cat`-like pastes keep a bare `kernel: ` in front.
                let message = text.strip_prefix("kernel: ").unwrap_or(text);
                let frame = line.frame;
                if kernel.feed_at(message, line.span, frame.time, frame.uptime_us, facts) {
                    return Some(Read::Parsed);
                }
            }
        }
        None
    }

    /// Lines counted as not recognised so far.
    pub(super) fn unrecognized(&self) -> u32 {
        self.tally.unrecognized
    }

    pub(super) fn finish(mut self, facts: &mut Facts) -> Tally {
        if let Some(kernel) = &mut self.kernel {
            kernel.finish(facts);
        }
        self.tally
    }
}

/// rpyc's `ThreadedServer` logging its connections (rpyc/utils/server.py:
/// `server started on [%s]:%s`, `accepted %s with fd %s`, `welcome %s`,
/// `goodbye %s`), as SGLang ≤ 0.1's tensor-parallel workers print them.
fn is_rpyc_server_line(text: &str) -> bool {
    let peer = |rest: &str| {
        rest.starts_with("('")
            && rest.find(')').is_some_and(|end| {
                rest[end + 1..].is_empty() || rest[end + 1..].starts_with(" with fd ")
            })
    };
    let t = text.trim_end();
    t.strip_prefix("server started on [")
        .is_some_and(|rest| rest.contains("]:") && rest.ends_with(|c: char| c.is_ascii_digit()))
        || t.strip_prefix("accepted ").is_some_and(peer)
        || t.strip_prefix("welcome ").is_some_and(peer)
        || t.strip_prefix("goodbye ").is_some_and(peer)
}

/// NCCL's list of the interfaces its socket transport uses, `NET/Socket :
/// Using [0]bond0:192.168.1.161<0> [1]br-05ab815fa14e:172.19.0.1<0>`, wrapped
/// by a terminal or a thread so that items stand on lines of their own: every
/// word an item `[N]name:address<port>` (NVIDIA/nccl
/// src/transport/net_socket.cc, ncclNetSocketInit: `" [%d]%s:%s"` per
/// interface; the address is ncclSocketToString's `host<port>`).
fn is_nccl_interface_list(text: &str) -> bool {
    let mut items = text.split_whitespace().peekable();
    items.peek().is_some()
        && items.all(|item| {
            let Some((n, rest)) = item.strip_prefix('[').and_then(|r| r.split_once(']')) else {
                return false;
            };
            !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
                && rest.split_once(':').is_some_and(|(name, addr)| {
                    !name.is_empty() && addr.ends_with('>') && addr.contains('<')
                })
        })
}

/// Lines a catalog message wrapped at a terminal's width may go on for.
const WRAPPED_LINES: u8 = 6;

/// A catalog line that a terminal (or a script's 80 columns) cut
/// mid-sentence: 60 characters or more, ending in a word or a comma, where
/// one of its row's real samples shows the message going on after that
/// word (the line is a message's start, not a whole one). Its width, the
/// wrap's. nvidia-smi's `1 device is currently being used by one or more
/// other processes (e.g. Fabric` over four more lines (NVIDIA/NVSentinel#1690),
/// whose row's sample goes on `… (e.g., Fabric Manager, CUDA application, …`.
fn cut_mid_sentence(text: &str) -> Option<usize> {
    let t = text.trim_end();
    let open = t
        .chars()
        .last()
        .is_some_and(|c| c.is_alphanumeric() || c == ',');
    if t.chars().count() < 60 || !open {
        return None;
    }
    let last = t.rsplit(' ').next().filter(|w| w.len() >= 3)?;
    let more = format!(" {last} ");
    let goes_on = crate::catalogs::catalogs()
        .hits(t)
        .iter()
        .filter_map(|hit| hit.row)
        .any(|row| row.samples.iter().any(|s| s.line.contains(&more)));
    goes_on.then(|| t.chars().count())
}

/// Whether `text` goes on with a wrapped message: unindented, starting
/// with a word (a person's `→ …` note under it is not the message's), no wider
/// than the wrap's width can be, which the first line and the first word
/// after it bound (the word did not fit: the width is under the two
/// together); `width` is that bound once the first line after the cut set
/// it. `Some(None)` when it ends the sentence (`system.`), `Some(Some(…))`
/// when more may follow, `None` when it is no part of it.
fn wrapped_on(text: &str, left: u8, width: usize) -> Option<Option<(u8, usize)>> {
    let t = text.trim_end();
    let first_word = t.split(' ').next().unwrap_or("").chars().count();
    let bound = if left == WRAPPED_LINES {
        width + first_word
    } else {
        width
    };
    let word = text.starts_with(|c: char| c.is_alphanumeric());
    if !word || t.chars().count() > bound || left == 0 {
        return None;
    }
    let ends = t.ends_with(['.', '!', '?', ')']);
    Some((!ends && left > 1).then(|| (left - 1, bound)))
}

/// The two lines under Gin's debug-mode warning (`[GIN-debug] [WARNING]
/// Running in "debug" mode. …`, a frame): how to switch it off, as
/// gin-gonic/gin debug.go `debugPrintWARNINGNew` prints them, ` - using
/// env:\texport GIN_MODE=release` and ` - using code:\tgin.SetMode(gin.ReleaseMode)`
/// (some versions and forks print no `export `), the tab often pasted as
/// spaces.
fn is_gin_mode_hint(text: &str) -> bool {
    let t = text.trim();
    t.strip_prefix("- using env:").is_some_and(|rest| {
        let rest = rest.trim_start();
        rest == "export GIN_MODE=release" || rest == "GIN_MODE=release"
    }) || t
        .strip_prefix("- using code:")
        .is_some_and(|rest| rest.trim_start() == "gin.SetMode(gin.ReleaseMode)")
}

/// A logfmt record's fields on a line of their own (a record wrapped by a
/// terminal or a thread): two `key=value` pairs or more and nothing else,
/// keys like Go's slog and logrus write them (`memory.required.full="23.4
/// GiB" memory.required.partial="17.8 GiB"`).
fn is_logfmt_fields(text: &str) -> bool {
    let mut rest = text.trim();
    let mut pairs = 0;
    while !rest.is_empty() {
        let Some((key, value)) = rest.split_once('=') else {
            return false;
        };
        let key_ok = key.starts_with(|c: char| c.is_ascii_lowercase())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
        if !key_ok {
            return false;
        }
        let end = match value.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(close) => close + 2,
                None => return false,
            },
            None => value.find(' ').unwrap_or(value.len()),
        };
        pairs += 1;
        rest = value[end..].trim_start();
    }
    pairs >= 2
}

/// A rule drawn across the terminal between blocks of output: a run of
/// dashes or equals signs alone (Open MPI's `show_help` frames every
/// message in a line of 74 dashes; test runners, `pip`, banners draw
/// theirs of `=`), or such a rule with a title in its middle (`rocm-smi`'s
/// `====ROCm System Management Interface====` and `====End of ROCm SMI Log
/// ====`, ROCm/rocm_smi_lib python_smi_tools/rocm_smi.py `printLogSpacer`).
fn is_rule_line(text: &str) -> bool {
    let t = text.trim();
    let rule = |s: &str, b: u8| s.len() >= 4 && s.bytes().all(|c| c == b);
    if t.len() >= 8 && (t.bytes().all(|b| b == b'-') || t.bytes().all(|b| b == b'=')) {
        return true;
    }
    [b'=', b'-'].into_iter().any(|b| {
        let start = t.bytes().take_while(|c| *c == b).count();
        let end = t.bytes().rev().take_while(|c| *c == b).count();
        start >= 4
            && end >= 4
            && start + end < t.len()
            && rule(&t[..start], b)
            && t[start..t.len() - end]
                .trim()
                .starts_with(|c: char| c.is_ascii_alphabetic())
    })
}

/// The line a command-line tool ends with when it fails or warns: Go's
/// cobra (`c.PrintErrln(c.ErrPrefix(), err)`, prefix `Error:`: ollama's
/// `Error: mkdir /home/user: permission denied`), Rust's `main` returning
/// an error (std's `Termination` for `Result`: `Error: {err:?}`, TGI's
/// launcher's `Error: ShardCannotStart`), OpenSSH's and ollama's
/// `Warning: …`.
/// The message must show a program wrote it: an error's chain of `: `, a
/// quote, a path, a number, or one identifier alone (`ShardCannotStart`);
/// `Error: the server crashed when I started it` is a person's.
fn is_cli_verdict(text: &str) -> bool {
    let t = text.trim();
    t.strip_prefix("Error: ")
        .or_else(|| t.strip_prefix("Warning: "))
        .is_some_and(|rest| {
            rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '"')
                && (rest.contains(": ")
                    || rest.contains(['"', '/', ';'])
                    || rest.contains(|c: char| c.is_ascii_digit())
                    || !rest.contains(' '))
        })
}

/// The lines a listing prints around its rows: `systemctl list-units`'s
/// legend (`LOAD   = Reflects whether …`, since v248 `Legend: LOAD   →
/// …` and its indented `ACTIVE → …`), its count (`1 loaded units
/// listed.`) and hint, `dcgmi discovery -l`'s count (`4 GPUs found.`)
/// and `dcgmi stats`' head (`Successfully retrieved statistics for job:
/// 952404.`, `Successfully stopped recording stats for 232.`).
fn is_listing_summary(text: &str) -> bool {
    static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:(?:Legend: +)?(?:LOAD|ACTIVE|SUB|JOB) +(?:=|→) \S.*|[0-9]+ loaded units listed\..*|To show all installed unit files use 'systemctl list-unit-files'\.|[0-9]+ (?:GPUs?|NvSwitch(?:es)?|CPUs?|CPU Cores?) found\.|Successfully (?:retrieved statistics for job:|stopped recording stats for) \S+\.)$")
            .expect("listing summary regex")
    });
    let t = text.trim();
    t.as_bytes()
        .first()
        .is_some_and(|b| b.is_ascii_alphanumeric())
        && SUMMARY.is_match(t)
}

/// docker compose's own lines around its services' logs: the progress
/// head `[+] Running 38/38` (also `Pulling`, `Building`, `Creating`,
/// `Stopping`), `Attaching to a, b, c` (docker/compose pkg/compose:
/// `"Attaching to %s"`) and a service's end, `tabby_tabby_1 exited with
/// code 1` (`"%s exited with code %d"`; codes 127 and 137, which say why,
/// are catalog rows of their own, read before this).
fn is_compose_cli_line(text: &str) -> bool {
    let t = text.trim();
    if let Some(rest) = t.strip_prefix("[+] ") {
        let mut words = rest.split_whitespace();
        return words
            .next()
            .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_uppercase()))
            && words.next().is_some_and(|n| {
                n.split_once('/').is_some_and(|(a, b)| {
                    a.bytes().all(|c| c.is_ascii_digit()) && b.bytes().all(|c| c.is_ascii_digit())
                })
            });
    }
    if let Some(code) = t
        .split_once(' ')
        .and_then(|(_, rest)| rest.strip_prefix("exited with code "))
    {
        return !code.is_empty() && code.bytes().all(|b| b.is_ascii_digit());
    }
    if is_compose_task_line(t) {
        return true;
    }
    t.strip_prefix("Attaching to ")
        .is_some_and(|rest| !rest.contains(' ') || rest.contains(", "))
}

/// One task line of docker compose's progress display under its `[+]`
/// head (docker/compose cmd/display/tty.go: the task's spinner, its id,
/// its status text, its timer): ` ✔ Network app_default  Created  0.0s`,
/// ` - Container llm-api-container  Creating  0.0s`. The spinner is `✔`
/// (done), `✘` (error), `!` (warning), `⠿` or a braille frame (working),
/// or `-` on Windows (cmd/display/spinner.go); the id is the resource's
/// kind and name (`Network %s`, `Volume %s`, `Container %s`, `Image %s`,
/// pkg/compose); the status is one capitalised word, then the timer.
fn is_compose_task_line(t: &str) -> bool {
    const KINDS: [&str; 5] = ["Network", "Volume", "Container", "Image", "Service"];
    let mut words = t.split_whitespace();
    let spinner = words.next().is_some_and(|w| {
        matches!(w, "✔" | "✘" | "!" | "-" | "⠿")
            || (w.chars().count() == 1 && w.chars().all(|c| ('\u{2800}'..='\u{28FF}').contains(&c)))
    });
    if !spinner || !words.next().is_some_and(|w| KINDS.contains(&w)) {
        return false;
    }
    let rest: Vec<&str> = words.collect();
    // The name (one word, quoted for a volume), the status, the timer.
    let (status, timer) = match rest.as_slice() {
        [_, status, timer] => (*status, Some(*timer)),
        [_, status] => (*status, None),
        _ => return false,
    };
    let capitalised = status.starts_with(|c: char| c.is_ascii_uppercase())
        && status.chars().all(|c| c.is_ascii_alphabetic());
    let timed = timer.is_none_or(|t| {
        t.strip_suffix('s')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    });
    capitalised && timed
}

/// A record of Python's logging through Rich's `RichHandler`
/// (Textualize/rich rich/logging.py, laid out by rich/_log_render.py
/// `LogRender`): the time column when shown (`[01/12/24 16:09:39] `, blank
/// where the time repeats), the level in a column eight wide and a space,
/// the message, and the caller's `file.py:N` right-aligned at the
/// console's width. A message longer than its column is wrapped onto the
/// next lines, each indented to the message's column ([`rich_continues`]):
/// infinity_emb's `INFO     2024-01-12 16:09:39,438 infinity_emb INFO:
/// Getting   select_model.py:80` (batch S's 1199,
/// https://github.com/michaelfeil/infinity/issues/58). The column the
/// message starts at, for a head.
fn rich_head(text: &str) -> Option<usize> {
    let t = text.trim_end();
    let start = if t.starts_with('[') {
        t.find("] ")? + 2
    } else {
        t.len() - t.trim_start().len()
    };
    let rest = t.get(start..)?;
    let word = rest.find(' ')?;
    if !matches!(
        &rest[..word],
        "DEBUG" | "INFO" | "WARNING" | "ERROR" | "CRITICAL"
    ) {
        return None;
    }
    let column = 9;
    let padded = rest.get(word..column)?.bytes().all(|b| b == b' ');
    let message = rest.get(column..).is_some_and(|m| !m.starts_with(' '));
    let (before, place) = t.rsplit_once(' ')?;
    let caller = place.rsplit_once(".py:").is_some_and(|(file, line)| {
        !file.is_empty()
            && file
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
            && !line.is_empty()
            && line.bytes().all(|b| b.is_ascii_digit())
    });
    (padded && message && caller && before.ends_with(' ') && before.len() > start + column)
        .then_some(start + column)
}

/// A line of a Rich record's message wrapped under its column: indented
/// at least to it (further where the message's own line was indented; the
/// console pads it to its width).
fn rich_continues(text: &str, column: usize) -> bool {
    text.len() > column
        && text.as_bytes()[..column].iter().all(|b| *b == b' ')
        && !text.trim().is_empty()
}

/// A row of Slurm's `sinfo` (src/sinfo/print.c; the header, `PARTITION
/// AVAIL …`, is read as a table head): the partition (the default one
/// marked `*`), its availability (`up`, `down`, `drain`, `inact`), a time
/// limit (`infinite`, `[D-]HH:MM:SS`, `MM:SS`) among the next three, and the
/// other columns as words, whatever `-o`/`--format` chose (batch S's 1152,
/// https://github.com/lyulyul/shine-cluster/issues/171: `speedy*   up   mix
/// 6:00:00    gpu:8  gpu:8     hoth      18/46/0/64`).
fn is_sinfo_row(text: &str) -> bool {
    let mut words = text.split_whitespace();
    let (Some(partition), Some(avail)) = (words.next(), words.next()) else {
        return false;
    };
    let named = partition
        .trim_end_matches('*')
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !named || partition == "*" || !matches!(avail, "up" | "down" | "drain" | "inact") {
        return false;
    }
    let rest: Vec<&str> = words.collect();
    // The time limit follows the availability closely (the state may stand
    // between them): a sentence's clock time further on is not one.
    rest.len() >= 3 && rest.iter().take(3).any(|w| is_time_limit(w))
}

/// `infinite`, `6:00:00`, `5-00:00:00`, `30:00`: a Slurm time limit.
fn is_time_limit(word: &str) -> bool {
    if word == "infinite" {
        return true;
    }
    let clock = word.split_once('-').map_or(word, |(days, clock)| {
        if !days.is_empty() && days.bytes().all(|b| b.is_ascii_digit()) {
            clock
        } else {
            ""
        }
    });
    let parts: Vec<&str> = clock.split(':').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A row of `lspci` as pciutils prints it by default (lspci.c
/// show_slot_name() and show_terse(): the slot `[DOMAIN:]BB:DD.F`, the
/// class name (with `[cccc]` when pci.ids has none for it), `: `, the
/// vendor and device, then `(rev xx)`, `(prog-if …)`): `1c:00.0 VGA
/// compatible controller: NVIDIA Corporation TU102GL [Quadro RTX
/// 6000/8000] (rev ff)` (batch S's 1152). The revision `ff` of a card that
/// reads all ones is for the rules that read a fallen card, not this.
fn is_lspci_row(text: &str) -> bool {
    let t = text.trim_start();
    let Some((slot, rest)) = t.split_once(' ') else {
        return false;
    };
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let slot_ok = {
        let (bus_dev, func) = slot.rsplit_once('.').unwrap_or(("", ""));
        let parts: Vec<&str> = bus_dev.split(':').collect();
        let func_ok = func.len() == 1 && func.bytes().all(|b| (b'0'..=b'7').contains(&b));
        func_ok
            && match parts.as_slice() {
                [bus, dev] => hex(bus, 2) && hex(dev, 2),
                [domain, bus, dev] => hex(domain, 4) && hex(bus, 2) && hex(dev, 2),
                _ => false,
            }
    };
    let Some((class, device)) = rest.split_once(": ") else {
        return false;
    };
    let class = class
        .strip_suffix(']')
        .and_then(|c| c.rsplit_once(" ["))
        .filter(|(_, code)| hex(code, 4))
        .map_or(class, |(name, _)| name);
    slot_ok
        && class.starts_with(|c: char| c.is_ascii_uppercase() || c.is_ascii_digit())
        && class
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '-' | '/' | '(' | ')'))
        && !device.trim().is_empty()
}

/// A row of `dkms status` (dell/dkms `dkms status`): the module and its
/// version (`nvidia/535.113.01`, or `nvidia, 535.113.01` before dkms
/// 2.8.5), the kernel, the architecture, and its state: `nvidia/535.113.01,
/// 6.2.0-33-generic, x86_64: installed` (batch S's 1188,
/// https://github.com/canonical/nvidia-graphics-drivers/issues/61).
fn is_dkms_status_row(text: &str) -> bool {
    let Some((head, state)) = text.trim().rsplit_once(": ") else {
        return false;
    };
    let known_state = ["installed", "built", "added", "broken"]
        .iter()
        .any(|s| state.starts_with(s));
    let fields: Vec<&str> = head.split(", ").collect();
    let word = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+' | b'~'))
    };
    let module_ok = match fields.as_slice() {
        [module, kernel, arch] => {
            module
                .split_once('/')
                .is_some_and(|(m, v)| word(m) && word(v))
                && word(kernel)
                && word(arch)
        }
        [module, version, kernel, arch] => {
            word(module) && word(version) && word(kernel) && word(arch)
        }
        _ => false,
    };
    known_state && module_ok
}

/// A line of Slurm's own programs, by the program's name that Slurm's log
/// puts in front of every line it prints to a terminal (src/common/log.c:
/// the program's name, then `error: `, `debug:  `, `debug2: ` … or nothing
/// for info): `srun: debug:  task 2 done`, `srun: Force Terminated
/// StepId=6053.0`, `slurmstepd: error: …`. The lines that say why a step
/// ended are catalog rows (catalogs/stacks-slurm.toml), read before this.
fn is_slurm_client_line(text: &str) -> bool {
    const PROGRAMS: [&str; 6] = [
        "srun: ",
        "slurmstepd: ",
        "salloc: ",
        "sbatch: ",
        "sattach: ",
        "scancel: ",
    ];
    let t = text.trim_start();
    t.starts_with('s')
        && PROGRAMS.iter().any(|p| {
            t.strip_prefix(p).is_some_and(|rest| {
                rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '*')
            })
        })
}

/// A field of a Kubernetes container status that says no more than its
/// grammar (`kubectl get pod -o yaml`, k8s.io/api core/v1 `ContainerStatus`
/// and `ContainerStateTerminated`): `containerID: containerd://0f30…`,
/// `imageID: …@sha256:…`, `startedAt: "2025-12-17T10:56:35Z"`,
/// `finishedAt: …`, `restartCount: 3`. The fields that say why a container
/// ended (`exitCode`, `reason`) are catalog rows.
fn is_pod_status_field(text: &str) -> bool {
    // The key is before the first `: `, and no key holds one: the line
    // starts with a key and `: ` (not a search of every unknown line).
    const KEYS: [&str; 5] = [
        "containerID",
        "imageID",
        "startedAt",
        "finishedAt",
        "restartCount",
    ];
    let text = text.trim();
    let Some((key, value)) = KEYS.iter().find_map(|&key| {
        let value = text.strip_prefix(key)?.strip_prefix(": ")?;
        Some((key, value))
    }) else {
        return false;
    };
    let value = value.trim_matches('"');
    match key {
        "containerID" => ["containerd://", "docker://", "cri-o://"]
            .iter()
            .any(|scheme| value.starts_with(scheme)),
        "imageID" => value.contains("@sha256:"),
        "startedAt" | "finishedAt" => {
            let b = value.as_bytes();
            b.len() >= 20
                && b[4] == b'-'
                && b[10] == b'T'
                && value.ends_with('Z')
                && b[..4].iter().all(u8::is_ascii_digit)
        }
        "restartCount" => !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()),
        _ => false,
    }
}

/// A configuration file's setting, `snake_case_key = value` (an INI file
/// such as lmdeploy's TurboMind `config.ini`: `cache_max_entry_count =
/// 12`): a key with an underscore, one value, nothing else.
fn is_setting_line(text: &str) -> bool {
    // A byte's search first: most lines have no `=`.
    if memchr::memchr(b'=', text.as_bytes()).is_none() {
        return false;
    }
    let Some((key, value)) = text.trim().split_once(" = ") else {
        return false;
    };
    key.contains('_')
        && key.starts_with(|c: char| c.is_ascii_lowercase())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !value.is_empty()
        && !value.contains(char::is_whitespace)
}

/// llama.cpp's and ggml's log lines, which start with the function that
/// prints them (`LLAMA_LOG_INFO("%s: …", __func__)`: `ggml_cuda_init: found
/// 1 CUDA devices:`, `load_backend: loaded CUDA backend from …`,
/// `llm_load_tensors: CPU model buffer size = …`, the server's `main:
/// binding port with default address family`), and ggml_cuda_init's
/// device lines (`  Device 0: Orin, compute capability 8.7, VMM: yes`).
/// Asked after the server parser and the catalogs, which read the ones
/// that say something.
fn is_ggml_line(text: &str) -> bool {
    const FAMILIES: [&str; 7] = [
        "ggml_",
        "llm_load_",
        "llama_",
        "load_",
        "print_info",
        "clip_",
        "main",
    ];
    // A byte's search first: most lines have no `:`.
    if memchr::memchr(b':', text.as_bytes()).is_none() {
        return false;
    }
    let t = text.trim_start();
    if let Some(rest) = t.strip_prefix("Device ") {
        return rest.split_once(": ").is_some_and(|(n, d)| {
            n.bytes().all(|b| b.is_ascii_digit()) && d.contains(", compute capability ")
        });
    }
    let Some((func, _)) = t.split_once(": ") else {
        return false;
    };
    // A family ending in `_` is a prefix; the others are whole names.
    FAMILIES.iter().any(|f| {
        if f.ends_with('_') {
            func.starts_with(f)
        } else {
            func == *f
        }
    }) && func
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// A cheap test before the unit grammar's regex: its messages start with a
/// unit name and `: ` (`ollama.service: …`) or with a job verb.
fn may_be_pid1(text: &str) -> bool {
    let first = text.split(' ').next().unwrap_or_default();
    (first.ends_with(':') && first.contains('.'))
        || matches!(
            first,
            "Starting"
                | "Started"
                | "Stopping"
                | "Stopped"
                | "Reloading"
                | "Reloaded"
                | "Failed"
                | "Timed"
                | "Dependency"
                | "Assertion"
        )
}

/// What kind of machine output an unrecognised line looks like, by cheap
/// tests on its shape: a table row, a stack frame, a log record (a time
/// or a level in front), `key=value` or `key: value` settings, a hex dump,
/// a progress bar, JSON. `None` when no test knows (it is still machine
/// output: prose was told apart before).
pub fn family(text: &str) -> Option<&'static str> {
    let t = text.trim();
    let b = t.as_bytes();
    let first = *b.first()?;
    if t.contains("%|") || t.contains("it/s]") || t.contains("B/s]") {
        return Some("progress bar");
    }
    if t.contains('│') || t.matches('|').count() >= 2 || t.starts_with("+-") {
        return Some("table row");
    }
    if t.starts_with("at ") && t.contains('(')
        || t.starts_with("[bt]")
        || t.starts_with("[<")
        || (first == b'#' && b.get(1).is_some_and(u8::is_ascii_digit) && t.contains(" 0x"))
        || t.starts_with("File \"")
        || t.split_whitespace().any(|w| {
            let w = w.trim_start_matches('?');
            w.contains("+0x") && w.contains('/')
        })
    {
        return Some("stack frame");
    }
    if first == b'{' || t.starts_with("[{") {
        return Some("json");
    }
    let timed = |s: &[u8]| {
        s.len() >= 8
            && s[..8]
                .iter()
                .all(|c| c.is_ascii_digit() || matches!(c, b'-' | b'/' | b':' | b' ' | b'.' | b'T'))
            && s[..8].iter().filter(|c| c.is_ascii_digit()).count() >= 4
            && s[..8].iter().any(|c| matches!(c, b'-' | b'/' | b':'))
    };
    let words: Vec<&str> = t.split_whitespace().take(4).collect();
    let level = words.iter().any(|w| {
        matches!(
            w.trim_matches(|c: char| !c.is_ascii_alphabetic()),
            "INFO" | "WARN" | "WARNING" | "ERROR" | "DEBUG" | "TRACE" | "FATAL" | "CRITICAL"
        )
    });
    if timed(b) || (first == b'[' && timed(&b[1..])) || level {
        return Some("log record");
    }
    let hex = t
        .split_whitespace()
        .filter(|w| w.len() >= 4 && w.bytes().all(|c| c.is_ascii_hexdigit()))
        .count();
    if hex >= 3 && hex * 2 >= t.split_whitespace().count() {
        return Some("hex dump");
    }
    if t.contains('=') && !t.contains(' ') || words.first().is_some_and(|w| w.contains('=')) {
        return Some("key=value");
    }
    if words.first().is_some_and(|w| w.ends_with(':')) && words.len() >= 2 {
        return Some("key: value");
    }
    None
}

use super::prose::{is_annotation, is_elision, is_heading, is_prose};

/// A Kaldi program's own echo of its command line on stderr
/// (kaldi-asr/kaldi src/util/parse-options.cc, `ParseOptions::Read`: each
/// argument escaped and followed by a space, unless `--print-args=false`):
/// a program's hyphenated name (`nnet3-copy`), its `--option=value`s, its
/// positional arguments, and the trailing space.
fn is_kaldi_command_echo(text: &str) -> bool {
    let Some(line) = text.strip_suffix(' ') else {
        return false;
    };
    let mut words = line.split(' ');
    let Some(program) = words.next() else {
        return false;
    };
    let named = program.contains('-')
        && program.starts_with(|c: char| c.is_ascii_lowercase())
        && program
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let (mut options, mut positional) = (0, false);
    for word in words {
        if word.is_empty() {
            return false;
        }
        let Some(option) = word.strip_prefix("--") else {
            positional = true;
            continue;
        };
        let Some((key, _)) = option.split_once('=') else {
            return false;
        };
        let key_ok = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        // Options come before the positional arguments.
        if positional || !key_ok {
            return false;
        }
        options += 1;
    }
    named && options > 0
}

/// A field of the dead actor Ray's `ActorDiedError` lists under its first
/// line (ray-project/ray python/ray/exceptions.py, `ActorDiedError`:
/// `\tclass_name: …`, `\tactor_id: …`, then, each when known, `\tpid:`,
/// `\tname:`, `\tnamespace:`, `\tip:`), indented: `Some(true)` for the
/// `class_name` line, which opens the list, `Some(false)` for the others.
fn ray_actor_field(text: &str) -> Option<bool> {
    if !text.starts_with([' ', '\t']) {
        return None;
    }
    let (key, value) = text.trim().split_once(": ")?;
    if value.is_empty() || value.contains(char::is_whitespace) {
        return None;
    }
    match key {
        "class_name" => Some(true),
        "actor_id" => value
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
            .then_some(false),
        "pid" => value.bytes().all(|b| b.is_ascii_digit()).then_some(false),
        "name" | "namespace" | "ip" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServerEventKind;
    use crate::source::{KeptLines, SourceId, Span};

    /// `prefilter`: a line is read in full only where an anchor of the
    /// parsers' is in it, as `rootcause analyze` reads.
    fn read_all(text: &str, except: Except, prefilter: bool) -> (Facts, Tally) {
        let anchors = crate::ingest::Anchors::new(crate::ingest::FACT_ANCHORS);
        let mut facts = Facts::default();
        let mut kept = KeptLines::default();
        let mut reader = LineReader::new(except);
        for (i, t) in text.lines().enumerate() {
            let line = Line {
                frame: &crate::ingest::frame::NO_FRAME,
                span: Span {
                    source: SourceId(0),
                    line: i as u32 + 1,
                },
                text: t,
            };
            let mut out = Out {
                facts: &mut facts,
                kept: &mut kept,
            };
            let hot = !prefilter || anchors.matches(t);
            reader.read(&line, hot, &mut out);
        }
        let tally = reader.finish(&mut facts);
        (facts, tally)
    }

    /// A config echo (meta-llama/llama-stack-apps#15) and Gin's debug-mode
    /// hint (msys2/MINGW-packages#20882) are read, what follows them is not
    /// the echo's, and an exception after the echo is still the server
    /// parser's.
    #[test]
    fn config_echoes_and_gin_hints_are_read_errors_after_them_too() {
        let text = "Yaml config:
------------------------
inference_config:
  impl_config:
    impl_type: inline
    max_batch_size: 1
 - using env:   export GIN_MODE=release
 - using code:  gin.SetMode(gin.ReleaseMode)
Listening on :::5000
  max_seq_len: 16384
RuntimeError: CUDA error: out of memory";
        let (facts, tally) = read_all(text, Except::Nothing, false);
        let listed: Vec<u32> = tally.listed.iter().map(|l| l.line).collect();
        // `Listening on :::5000` is a server's start-up line (a catalog
        // row): only the stray `key: value` after it is left unread.
        assert_eq!(listed, vec![10], "{:?}", tally.listed);
        assert!(
            facts
                .server_events
                .iter()
                .any(|e| e.span.line == 11 && matches!(e.kind, ServerEventKind::Exception(_))),
            "{:?}",
            facts.server_events
        );
    }

    /// nvidia-smi's message wrapped at 80 columns (NVIDIA/NVSentinel#1690,
    /// batch R 1109) is read to its sentence's end; a person's note under a
    /// whole catalog line (fixtures/real/1000) and a line after a short one
    /// are not the message's.
    #[test]
    fn a_catalog_message_wrapped_at_a_terminals_width_is_read_to_its_end() {
        let wrapped = "1 device is currently being used by one or more other processes (e.g. Fabric
Manager, CUDA application, graphics application such as an X server, or a
monitoring application such as another instance of nvidia-smi). Please first kill
all processes using this device and all compute applications running in the
system.
exit=255";
        let (_, tally) = read_all(wrapped, Except::Nothing, false);
        let listed: Vec<u32> = tally.listed.iter().map(|l| l.line).collect();
        assert_eq!(listed, vec![6], "{:?}", tally.listed);
        let whole =
            "HIP error: operation not permitted on an event last recorded in a capturing stream
\u{2192} scheduler aborts (SIGABRT, exit code -6)
GPU 00000000:1A:00.0 was successfully reset.
exit=0";
        let (_, tally) = read_all(whole, Except::Nothing, false);
        let listed: Vec<u32> = tally.listed.iter().map(|l| l.line).collect();
        assert_eq!(listed, vec![2, 4], "{:?}", tally.listed);
    }

    #[test]
    fn prose_is_a_sentence_without_machine_tokens() {
        for yes in [
            "After running the command below I get:",
            "Any ideas?",
            "Here is the output of nvidia-smi:",
            "I have 2 GPUs and the second one is busy.",
            "Thanks in advance!",
        ] {
            assert!(is_prose(yes), "{yes}");
        }
        for no in [
            "Killed",
            "No devices were found",
            "Segmentation fault (core dumped)",
            "Failed to initialize NVML: Driver/library version mismatch",
            "INFO: Started server process [4242]",
            "  File \"x.py\", line 1, in f",
            "max_total_num_tokens=187432 is the value",
            "at 09:38:52 the server is down",
            "+-----------------------------------------------------------------------------+",
            "A",
            "ValueError: the value is wrong",
            "Start-Date: 2021-04-24  06:50:54",
        ] {
            assert!(!is_prose(no), "{no}");
        }
    }

    /// Unrecognised lines say what they look like (lines of public
    /// threads where cited, else written to the shape).
    #[test]
    fn unread_lines_name_their_family_when_a_cheap_test_can() {
        for (line, want) in [
            // DCGM's user guide (`dcgmi discovery -l`).
            (
                "| GPU ID | Device Information                                                   |",
                Some("table row"),
            ),
            (
                "    at com.example.Main.run(Main.java:12)",
                Some("stack frame"),
            ),
            (
                "  [bt] (0) /usr/lib/libfoo.so(+0x1234) [0x7f0000001234]",
                Some("stack frame"),
            ),
            // https://github.com/talos-rpi5/talos-builder/issues/11
            (" dump_backtrace.part.0+0xe4/0x100", Some("stack frame")),
            // https://github.com/gpustack/gpustack/issues/1953
            (
                "2025-05-01T02:51:44+00:00 - gpustack.worker.backends.base - INFO - Preparing model files...",
                Some("log record"),
            ),
            (
                "0000000000000000 ffffffffffffffff 0000000000000001 ffff000000000000",
                Some("hex dump"),
            ),
            // https://github.com/InternLM/lmdeploy/issues/2229
            ("max_batch_size = 128", None),
            ("model_source: hf_model", Some("key: value")),
            ("cache_max_entry_count=8", Some("key=value")),
            // tqdm's README.
            (
                "76%|████████████████████████        | 7568/10000 [00:33<00:10, 229.00it/s]",
                Some("progress bar"),
            ),
            ("something nobody knows 0x1f", None),
        ] {
            assert_eq!(family(line), want, "{line}");
        }
    }

    #[test]
    fn a_persons_headings_are_prose_and_a_programs_labels_are_not() {
        // fixtures/real/997 (sgl-project/sglang#1093) and
        // 1010 (vllm-project/vllm#44751).
        for yes in ["Command\u{ff1a}", "Error Log:", "orphaned procs:"] {
            assert!(is_heading(yes), "{yes}");
        }
        for no in [
            "Traceback (most recent call last):",
            "[setup] nvidia-smi -L:",
            "  Processes:",
            "Password: hunter2",
            "ValueError:",
            "a b:",
            "One two three four:",
            "GPU 0:",
            "CUDA_VISIBLE_DEVICES:",
            // kubectl describe's blocks (fixtures/real/660, 962).
            "Events:",
            "Containers:",
        ] {
            assert!(!is_heading(no), "{no}");
        }
    }

    #[test]
    fn elisions_and_redactions_are_a_persons_marks() {
        // fixtures/real/783, 714, 744.
        for yes in [
            "...",
            "[...]",
            "xxxxxxxxx",
            "…",
            "(...)",
            "[snip]",
            "...snip...",
            "****",
        ] {
            assert!(is_elision(yes), "{yes}");
        }
        for no in [
            "..",
            "x",
            "[1] 12",
            "snip",
            "... 3 more",
            "exit",
            "**",
            "[rank0]: ...",
        ] {
            assert!(!is_elision(no), "{no}");
        }
    }

    #[test]
    fn annotations_are_prose_and_machine_comments_are_not() {
        // fixtures/real/101: a note between a log and the syslog below it.
        for yes in [
            "# meanwhile, output in /var/log/syslog",
            "# this is what the journal shows after the restart",
            "  # and here is the output of nvidia-smi:",
            // fixtures/real/924 (NVIDIA/nvidia-docker#747).
            "// In the HOST",
        ] {
            assert!(is_annotation(yes), "{yes}");
        }
        for no in [
            // vLLM's own lines (fixtures/real/014, 067).
            "# GPU blocks: 1478, # CPU blocks: 512",
            "# GPU blocks: 1478",
            "# nvidia-smi",
            "# cat /var/log/syslog",
            "#!/bin/bash",
            "meanwhile, output in /var/log/syslog",
            "# /usr/bin/python3 /opt/serve.py --port 8000",
            "# at 09:38:52 the server is down",
            "//usr/bin/env",
        ] {
            assert!(!is_annotation(no), "{no}");
        }
        let (_, tally) = read_all(
            "# meanwhile, output in /var/log/syslog\n# GPU blocks: 1478\n",
            Except::Nothing,
            false,
        );
        assert_eq!((tally.prose, tally.unrecognized), (1, 1));
    }

    #[test]
    fn unrecognised_messages_are_noted_for_the_findings() {
        let mut facts = Facts::default();
        let mut kept = KeptLines::default();
        let mut reader = LineReader::new(Except::Nothing);
        let lines = [
            "zz frobnicator 0x1f refused the widget",
            "something nobody knows 0x1f",
            "zz frobnicator 0x2e refused the widget",
        ];
        for (i, text) in lines.iter().enumerate() {
            let span = Span {
                source: SourceId(0),
                line: i as u32 + 1,
            };
            // The stream keeps anchored lines as messages before reading them.
            if text.contains("frobnicator") {
                facts.messages.push(crate::model::Message {
                    span,
                    text: (*text).to_owned(),
                    pid: None,
                });
            }
            let mut out = Out {
                facts: &mut facts,
                kept: &mut kept,
            };
            reader.read(&Line::bare(span, text), true, &mut out);
        }
        let tally = reader.finish(&mut facts);
        assert_eq!(tally.unrecognized, 3);
        assert_eq!(tally.anchored, [1, 3]);
    }

    #[test]
    fn bare_lines_meet_every_recogniser() {
        let paste = "\
RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74, local_gpu_memory=93.72, local_gpu_memory * 0.9=84.35
kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001
ollama.service: Main process exited, code=exited, status=1/FAILURE
After running the command below I get:
something nobody knows 0x1f
";
        for prefilter in [false, true] {
            let (facts, tally) = read_all(paste, Except::Nothing, prefilter);
            assert!(matches!(
                facts.server_events[0].kind,
                ServerEventKind::MemoryImbalance(_)
            ));
            assert_eq!(facts.kernel_events.len(), 1);
            let pid1: Vec<_> = facts.journal.iter().filter(|e| e.is_pid1()).collect();
            assert_eq!(pid1.len(), 1);
            assert_eq!(pid1[0].unit.as_deref(), Some("ollama.service"));
            assert_eq!(pid1[0].span.line, 3);
            assert_eq!((tally.unrecognized, tally.prose), (1, 1));
            assert_eq!(
                tally
                    .listed
                    .iter()
                    .map(|l| (l.line, l.kind))
                    .collect::<Vec<_>>(),
                [(4, LineKind::Prose), (5, LineKind::Unrecognized)]
            );
        }
    }

    #[test]
    fn lines_that_say_what_they_are_by_their_grammar_are_read() {
        // Real lines (fixtures/real/620, 636, 675, 605, 663, 624, 638, 486).
        let read = [
            "[0]bond0:192.168.1.161<0>",
            "[12]veth6163fba:fe80::b878:6cff:fe52:abe2%veth6163fba<0> ",
            " memory.required.full=\"23.4 GiB\" memory.required.partial=\"17.8 GiB\" memory.required.kv=\"944.0 MiB\"",
            " projector.weights=\"806.2 MiB\" projector.graph=\"1.0 GiB\"",
            "ggml_cuda_init: found 1 CUDA devices:",
            "  Device 0: Orin, compute capability 8.7, VMM: yes",
            "load_backend: loaded CUDA backend from /usr/local/lib/ollama/cuda_jetpack6/libggml-cuda.so",
            "main: binding port with default address family",
            "                     [+] Running 38/38",
            "Error: mkdir /home/user: permission denied",
            "Error: ShardCannotStart",
            "cache_max_entry_count = 12",
            "Runner processes detected          : 3",
            // The same grammars under docker compose's service prefix, and
            // compose's own line for a service's end (batch J 857, Tabby's
            // `docker-compose logs`).
            "tabby_1  | ggml_init_cublas: found 1 CUDA devices:",
            "tabby_1  |   Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6",
            "llama-cpp-1  | cache_max_entry_count = 12",
            "tabby_tabby_1 exited with code 1",
            // compose's task lines under its `[+] Running 3/0` head
            // (batch Q 1069, nagaraj-real/localaipilot-api#8: Windows'
            // `-` spinner while creating, `✔` once done).
            " ✔ Network localaipilot-api_llm-network  Created                                                  0.0s ",
            " ✔ Volume \"localaipilot-api_ragdir\"      Created                                                  0.0s ",
            " - Container llm-api-container           Creating                                                 0.0s ",
            // A container's status as `kubectl get pod -o yaml` prints it
            // (batch J 847, ray-project/kuberay).
            "containerID: containerd://0f30d47b321c9d9482bc6b78f2292196f7156194f5d2ea02b12eaeb2b395a1b3",
            "finishedAt: \"2025-12-17T10:56:44Z\"",
            "      startedAt: \"2025-12-17T10:56:35Z\"",
            "    restartCount: 3",
            // srun's own lines around a cancelled step (batch L 926,
            // https://github.com/IGNF/myria3d/issues/123).
            "srun: debug:  task 2 done",
            "srun: launch/slurm: _task_finish: Received task exit notification for 1 task of StepId=6053.0 (status=0x000f).",
            "srun: Force Terminated StepId=6053.0",
            // Open MPI's frame around a `show_help` message under mpirun
            // (batch M 953, https://github.com/triton-inference-server/
            // tensorrtllm_backend/issues/275).
            "--------------------------------------------------------------------------",
        ];
        for line in read {
            let (_, tally) = read_all(line, Except::Nothing, false);
            assert_eq!(tally.unrecognized, 0, "{line:?}");
            assert_eq!(tally.prose, 0, "{line:?}");
        }
        // Near misses: a sentence after `Error: `, a lone
        // `[0]` or a `main:` that is not the function's own is unread, a
        // `key = value` with spaces in its value is no setting.
        for line in [
            "Error: the server crashed when I started it again",
            "[0] bond0",
            "maintenance: window at 10:00",
            "max_batch_size = 8 on two GPUs",
            "tabby_1  | then it hung for a while",
            "- Container restarts twice and then stops",
            "the server exited with code red",
            "startedAt: yesterday, after the upgrade",
            "-- then --",
        ] {
            let (_, tally) = read_all(line, Except::Nothing, false);
            assert_eq!(tally.prose + tally.unrecognized, 1, "{line:?}");
        }
    }

    /// rpyc's server log under SGLang 0.1
    /// (https://github.com/sgl-project/sglang/issues/227); a sentence that
    /// starts the same way is not one.
    #[test]
    fn an_rpc_servers_connection_log_is_read() {
        let paste = "\
server started on [0.0.0.0]:10007
accepted ('127.0.0.1', 37850) with fd 29
welcome ('127.0.0.1', 37850)
welcome to the cluster, you have 3 GPUs
";
        let (_, tally) = read_all(paste, Except::Nothing, false);
        assert_eq!(tally.listed.iter().map(|l| l.line).collect::<Vec<_>>(), [4]);
    }

    /// systemd's line with its journal prefix cut (`: ollama.service: …`)
    /// is still PID 1's message about the unit: the catalog finds it.
    #[test]
    fn a_pid1_line_cut_before_its_unit_is_read() {
        let (facts, tally) = read_all(
            ": ollama.service: Failed with result 'exit-code'.\n",
            Except::Nothing,
            false,
        );
        let pid1: Vec<_> = facts.journal.iter().filter(|e| e.is_pid1()).collect();
        assert_eq!(pid1.len(), 1);
        assert_eq!(pid1[0].unit.as_deref(), Some("ollama.service"));
        assert_eq!(
            pid1[0].message,
            "ollama.service: Failed with result 'exit-code'."
        );
        assert_eq!(tally.unrecognized, 0);
    }

    /// systemd's exit report with the journal prefix cut up to and with
    /// the unit (`: Main process exited, …`, fixtures/real/624,
    /// ollama/ollama#9945) is PID 1's message whose unit the correlator
    /// finds; so is the same report with nothing left of the prefix (a
    /// variant). A line that only looks alike is not.
    #[test]
    fn a_pid1_line_cut_with_its_unit_is_read_without_one() {
        for (paste, message) in [
            (
                ": Main process exited, code=exited, status=1/FAILURE\n",
                "Main process exited, code=exited, status=1/FAILURE",
            ),
            (
                "Main process exited, code=killed, status=9/KILL\n",
                "Main process exited, code=killed, status=9/KILL",
            ),
        ] {
            let (facts, _) = read_all(paste, Except::Nothing, false);
            let pid1: Vec<_> = facts.journal.iter().filter(|e| e.is_pid1()).collect();
            assert_eq!(pid1.len(), 1, "{paste}");
            assert_eq!(pid1[0].unit, None);
            assert_eq!(pid1[0].message, message);
        }
        let (facts, _) = read_all(
            ": worker exited, code 3, status ok\n",
            Except::Nothing,
            false,
        );
        assert!(facts.journal.is_empty());
    }

    #[test]
    fn the_segment_parser_is_not_asked_twice() {
        // A line only the kernel parser reads (an Xid line would be read by
        // the catalogs too).
        let (facts, tally) = read_all(
            "NVRM: GPU at PCI:0000:dc:00: GPU-5d1c1a36-6e5b-4b16-b5b0-83f2e9a9c2b1",
            Except::Kernel,
            false,
        );
        assert!(facts.kernel_events.is_empty());
        assert_eq!(tally.unrecognized, 1);
    }

    /// Ray's ActorDiedError fields as batch P's 1050 shows them
    /// (AgentR1/Agent-R1#33), the head read by the server parser: read
    /// after `class_name`, not alone.
    #[test]
    fn rays_dead_actor_fields_are_read_after_class_name() {
        let fields = "        class_name: TaskRunner\n        actor_id: 8d1498767d305748d59d87da01000000\n        pid: 319017\n        namespace: 1109301e-e25e-4e12-9ae4-1dd5fc7468e4\n        ip: 10.44.139.116\n";
        let (_, tally) = read_all(fields, Except::Nothing, false);
        assert_eq!(tally.unrecognized, 0);
        let (_, tally) = read_all(
            "        namespace: default\n        ip: 10.44.139.116\n",
            Except::Nothing,
            false,
        );
        assert_eq!(tally.unrecognized, 2);
    }

    /// fixtures/real/1015 (kaldi-asr/kaldi#3375): `nnet3-copy`'s echo of its
    /// command line among nnet3-train's records; a sentence, a command
    /// without options, or one without the trailing space is not one.
    #[test]
    fn a_kaldi_programs_command_echo_is_read() {
        assert!(is_kaldi_command_echo(
            "nnet3-copy --learning-rate=0.00297519534251 --scale=1.0 exp/nnet3/tdnn_sp/3.mdl - "
        ));
        for no in [
            "nnet3-copy --learning-rate=0.00297519534251 --scale=1.0 exp/nnet3/tdnn_sp/3.mdl -",
            "nnet3-copy exp/nnet3/tdnn_sp/3.mdl - ",
            "Run the training again ",
            "nnet3-copy --scale=1.0 a  b ",
            "nnet3-copy a --scale=1.0 ",
        ] {
            assert!(!is_kaldi_command_echo(no), "{no}");
        }
    }

    /// `sinfo`, `lspci` and `dkms status` rows (batch S's 1152 and 1188,
    /// verbatim) are read; sentences and other tables are not.
    #[test]
    fn host_listing_rows() {
        for row in [
            "speedy*   up   mix   6:00:00    gpu:8  gpu:8     hoth      18/46/0/64",
            "normal    up   drain 5-00:00:00 gpu:8  gpu:0     dagobah   0/0/64/64",
            "debug*       up   infinite      1   idle node1",
        ] {
            assert!(is_sinfo_row(row), "{row}");
        }
        for row in [
            "1c:00.0 VGA compatible controller: NVIDIA Corporation TU102GL [Quadro RTX 6000/8000] (rev ff)",
            "1a:00.3 Serial bus controller [0c80]: NVIDIA Corporation TU102 USB Type-C UCSI Controller (rev a1)",
            "0000:3b:00.0 3D controller: NVIDIA Corporation GA100 [A100 PCIe 40GB] (rev a1)",
        ] {
            assert!(is_lspci_row(row), "{row}");
        }
        for row in [
            "nvidia/535.113.01, 6.2.0-33-generic, x86_64: installed",
            "nvidia, 470.57.02, 5.4.0-80-generic, x86_64: installed",
        ] {
            assert!(is_dkms_status_row(row), "{row}");
        }
        for other in [
            "the node is up and running 6:00:00 hours now",
            "gpu up to 5 minutes at 10:00",
            "12:30:00 Error: the GPU is gone",
            "ab:cd.e Thing: x",
            "1c:00.0 is the card: it reads all ones",
            "nvidia/535, it is installed: yes",
            "note: installed",
        ] {
            assert!(
                !is_sinfo_row(other) && !is_lspci_row(other) && !is_dkms_status_row(other),
                "{other}"
            );
        }
    }

    /// Rich's records (batch S's 1199, verbatim): the heads give their
    /// message's column and the wrapped lines under it continue them; a
    /// line at another indentation, and a level word without the caller's
    /// place, do not.
    #[test]
    fn rich_records_and_their_wrapped_lines() {
        let head =
            "INFO     2024-01-12 16:09:39,441 infinity_emb INFO: model     select_model.py:81";
        assert_eq!(rich_head(head), Some(9));
        assert_eq!(
            rich_head(
                "INFO     2024-01-12 16:09:39,443 infinity_emb INFO:         batch_handler.py:385"
            ),
            Some(9)
        );
        assert!(rich_continues(
            "         warmed up, between 0.74-54.98 embeddings/sec at                        ",
            9
        ));
        assert!(rich_continues(
            "         to batch requests.                                                     ",
            9
        ));
        assert!(rich_continues(
            "                 1.50     ms tokenization                ",
            9
        ));
        assert!(!rich_continues("    indented less", 9));
        for other in [
            "INFO     the server started",
            "INFO: model loaded   select_model.py:81",
            "INFO  2024-01-12 x   select_model.py:81",
        ] {
            assert_eq!(rich_head(other), None, "{other}");
        }
    }
}
