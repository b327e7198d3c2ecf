//! Format detection: split one input into segments of one format each.
//!
//! Each line is classified on its own: a line that only one format can
//! produce ("strong") starts or continues a segment of that format; any other
//! line (blank lines, traceback bodies, `CGroup:` tree branches, CSV rows)
//! continues the current segment. A pasted jumble therefore falls apart into
//! its pieces, and a file of one format stays one segment.
//!
//! The command at a shell prompt names the tool whose output follows
//! (`shell::command_hint`): output under the prompt that no strong line
//! marks is read as that tool's. Detection only decides structure: a line
//! in a segment whose parser cannot read it, or in no known format, still
//! meets every line-level recogniser (`ingest::recognize`).

use super::frame::Frame;
use super::{Format, Segment};
use crate::source::{Source, SourceId, clean_line};

pub(super) enum Class {
    /// Only `Format` writes lines like this.
    Strong(Format, &'static str),
    /// Belongs to whatever segment is open.
    Continue,
}

mod coredumpctl;
mod env;
mod gpustat;
mod journal;
mod kernel;
mod lsmod;
mod nvidia;
mod packages;
mod procfs;
mod provenance;
mod server;
mod shell;
mod ss;
mod systemd;
#[cfg(test)]
mod tests_host;

pub(super) use provenance::{Provenance, is_host_output};
pub(super) use shell::{Continuation, command as prompt_command, is_prompt};

impl Segmenter {
    /// Whether `line` is, for certain, a strong line of the open segment's
    /// format ([`continues_as`]): a journal, SGLang or dmesg line on its
    /// fast path, which no frame stands in front of (they start with their
    /// own time), or an nvidia-smi table's row or border (no frame starts
    /// with `|` or `+`); [`Segmenter::line`] takes it as it would.
    pub(super) fn continues_fast(&self, line: &str) -> bool {
        self.hint.is_none()
            && self
                .open
                .as_ref()
                .is_some_and(|s| continues_as(line, s.format))
    }

    /// Line `n`, which [`Self::continues_fast`] said continues the open
    /// segment: what [`Segmenter::line`] would do with it, without testing
    /// it again.
    pub(super) fn line_continues(&mut self, n: u32) -> Step {
        if let Some(s) = &mut self.open {
            s.last_line = n;
        }
        Step::Continue
    }
}

/// Sniffers in priority order: the first that claims a line wins. Journal
/// first, because a journal line may carry any other format inside it.
type Sniffer = fn(&str, Option<Format>) -> Option<Class>;
const SNIFFERS: &[Sniffer] = &[
    journal::sniff,
    env::sniff,
    kernel::sniff,
    server::sniff,
    nvidia::sniff,
    gpustat::sniff,
    ss::sniff,
    lsmod::sniff,
    coredumpctl::sniff,
    systemd::sniff,
    procfs::sniff,
    packages::sniff,
    shell::sniff,
];

/// Defines a lazily compiled regex; a bad pattern fails the first test that
/// touches it.
macro_rules! re {
    ($name:ident, $pattern:expr) => {
        static $name: std::sync::LazyLock<regex::Regex> =
            std::sync::LazyLock::new(|| regex::Regex::new($pattern).expect($pattern));
    };
}
pub(super) use re;

/// Defines a literal that sniffers look for in every line: a memmem finder
/// built once. `str::contains` builds its searcher on each call (about 130
/// instructions, more than a short line's scan), and the sniffers of a
/// segment without a fast path ask every line (issue 23: most of a raw
/// llama.cpp log's sniffing cost).
macro_rules! literal {
    ($name:ident, $text:expr) => {
        static $name: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new($text));
    };
}
pub(super) use literal;

/// Whether `line` holds `literal` (see [`literal!`]).
pub(super) fn holds(line: &str, literal: &memchr::memmem::Finder<'_>) -> bool {
    literal.find(line.as_bytes()).is_some()
}

/// A regex behind a cheap necessary condition: a byte test (a byte at a
/// position, a literal every match holds) that every line the regex
/// matches passes, so that a line of another format pays the test, not the
/// regex. The sniffers run on every line of a segment without a fast path
/// (a raw traceback's frames pay them all); what is recognised does not
/// change: `every_gate_lets_through_what_its_regex_matches` tests each
/// gate on every fixture line.
pub(super) trait Gate: Sync {
    /// The cheap test every line the regex matches passes.
    fn gate(&self, line: &str) -> bool;
    /// The regex, compiled on first use.
    fn regex(&self) -> &'static regex::Regex;

    fn is_match(&self, line: &str) -> bool {
        self.gate(line) && self.regex().is_match(line)
    }

    fn captures<'h>(&self, line: &'h str) -> Option<regex::Captures<'h>> {
        if self.gate(line) {
            self.regex().captures(line)
        } else {
            None
        }
    }
}

/// Any [`Gate`], for the test that looks at them all.
#[cfg(test)]
pub(super) type Gated = dyn Gate;

/// Defines a [`Gate`]: `gated!(NAME, |line| test, pattern)`, then
/// `NAME.is_match(line)`. Each is a type of its own, not a static holding a
/// function pointer: the gate is called directly and inlined, which a
/// pointer in a static (an indirect call per gate, some twenty a line for a
/// line no sniffer claims) is not.
macro_rules! gated {
    ($name:ident, $gate:expr, $pattern:expr) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        struct $name;

        impl super::Gate for $name {
            #[inline]
            fn gate(&self, line: &str) -> bool {
                let gate: fn(&str) -> bool = $gate;
                gate(line)
            }

            fn regex(&self) -> &'static regex::Regex {
                static RE: std::sync::LazyLock<regex::Regex> =
                    std::sync::LazyLock::new(|| regex::Regex::new($pattern).expect($pattern));
                &RE
            }
        }

        #[allow(dead_code)]
        impl $name {
            #[inline]
            fn is_match(&self, line: &str) -> bool {
                super::Gate::is_match(self, line)
            }

            #[inline]
            fn captures<'h>(&self, line: &'h str) -> Option<regex::Captures<'h>> {
                super::Gate::captures(self, line)
            }
        }
    };
}
pub(super) use gated;

/// The first byte of `line` after its leading white space (Unicode's, as
/// a regex's `\s` means it), if any.
pub(super) fn first_after_space(line: &str) -> Option<u8> {
    line.trim_start().as_bytes().first().copied()
}

fn sniff(line: &str, current: Option<Format>) -> Class {
    SNIFFERS
        .iter()
        .find_map(|sniff| sniff(line, current))
        .unwrap_or(Class::Continue)
}

/// Whether `line` is a Python exception line (`RuntimeError: …`) that the
/// sniffers before the server's let pass: in a segment that carries such
/// content (a traceback, a server log: [`server::carries_content`]) the
/// server sniffer reads it as content, and [`sniff`] says it continues. A
/// traceback segment is mostly such lines when one error repeats with a
/// different name each time (issue 18's `distinct-2m.log`); they skip the
/// server sniffer's tests, the prefixes of every other format it knows.
/// Whatever segment is open, the sniffers before the server's let such a
/// line pass or not alike (they look at the open segment only for lines
/// that start with `{`, a space or `-`), so this is a function of the line
/// alone, which the reading thread works out ([`Segmenter::line`]).
pub(super) fn content_line(line: &str) -> bool {
    server::exception_line(line) == Some(true)
        && SNIFFERS[..SERVER]
            .iter()
            .all(|sniff| sniff(line, None).is_none())
}

/// Why lines of a known logger's records are a segment of their own.
const LOGGER_RECORDS: &str = "a known logger's records (their frame) beside a command's report";

/// Where the server sniffer stands in [`SNIFFERS`].
const SERVER: usize = 3;

/// Whether `line` is, for certain, a strong line of `format` that every
/// sniffer before that format's lets pass: the cheap test that keeps a big
/// journal or server log from going through every sniffer on every line.
/// Never true where [`SNIFFERS`] would say otherwise (tested below).
pub(super) fn continues_as(line: &str, format: Format) -> bool {
    let bytes = line.as_bytes();
    match format {
        // A digit first: no JSON, json-pretty, verbose header or field.
        Format::JournalShortIso => {
            bytes.first().is_some_and(u8::is_ascii_digit) && journal::is_short_iso(line)
        }
        // A month name first: none of the weekday-led modes, nor a digit.
        Format::JournalShort => {
            bytes.first().is_some_and(u8::is_ascii_uppercase)
                && !matches!(
                    bytes.get(..3),
                    Some(b"Mon" | b"Tue" | b"Wed" | b"Thu" | b"Fri" | b"Sat" | b"Sun")
                )
                && journal::is_short(line)
        }
        // `[2026-…` is neither a monotonic journal line nor a kernel one;
        // an NCCL line stamped the same way is left to the sniffers.
        Format::SglangLog => {
            static NCCL: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
                std::sync::LazyLock::new(|| memchr::memmem::Finder::new("NCCL"));
            bytes.first() == Some(&b'[') && NCCL.find(bytes).is_none() && server::is_sglang(line)
        }
        // Of the sniffers before the kernel's, only the journal's monotonic
        // modes claim a line that starts with `[`.
        Format::Dmesg => {
            bytes.first() == Some(&b'[')
                && kernel::is_bracketed(line)
                && !journal::claims_bracketed(line)
        }
        // A `|…|` row or a `+---+` border: the nvidia-smi sniffer claims
        // it for the table (or lets it continue one), and of the sniffers
        // before it only the kernel's bare OOM line could start with any
        // byte. No frame starts with `|` or `+`; a spelled escape code
        // (`[0m`) is left to the peeler.
        Format::NvidiaSmiTable => {
            let text = line.trim_end();
            let t = text.as_bytes();
            static OOM: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
                std::sync::LazyLock::new(|| memchr::memmem::Finder::new("invoked oom-killer"));
            static SPELLED: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
                std::sync::LazyLock::new(|| memchr::memmem::Finder::new("[0m"));
            let row = || {
                t.len() >= 2
                    && t.last() == Some(&b'|')
                    && OOM.find(t).is_none()
                    && SPELLED.find(t).is_none()
            };
            let border = || {
                t.len() >= 22
                    && t.last() == Some(&b'+')
                    && t.iter().all(|b| matches!(b, b'-' | b'=' | b'+'))
            };
            // An in-table rule (`|----+----+`): bars and dashes only, which
            // no sniffer claims.
            let rule = || {
                t.len() >= 3
                    && t.last() == Some(&b'+')
                    && t.iter().all(|b| matches!(b, b'-' | b'=' | b'+' | b'|'))
            };
            match t.first() {
                Some(b'|') => row() || rule(),
                Some(b'+') => border(),
                _ => false,
            }
        }
        _ => false,
    }
}

/// [`segment`], unless the user named the format (`--format-hint`): then
/// the whole input is one segment of it.
pub fn segment_as(id: SourceId, source: &Source, hint: Option<Format>) -> Vec<Segment> {
    let mut segmenter = Segmenter::new(id, hint);
    let mut peeler = super::frame::Peeler::new();
    let mut segments = Vec::new();
    let summary = source.for_each_line(&mut |_| {}, &mut |n, raw| {
        let cleaned = clean_line(raw);
        let peeled = match hint {
            None => peeler.peel(&cleaned),
            Some(_) => super::frame::Peeled::bare(&cleaned),
        };
        if let Step::Start {
            closed: Some(closed),
        } = segmenter.line(n, &peeled.body, &peeled.frame, None)
        {
            segments.push(closed);
        }
    });
    segments.extend(segmenter.finish(summary.lines));
    segments
}

/// Splits `source` into segments of one format each. Always covers every
/// line exactly once.
pub fn segment(id: SourceId, source: &Source) -> Vec<Segment> {
    segment_as(id, source, None)
}

/// What one more line does to the segments.
pub(super) enum Step {
    /// It belongs to the open segment (or, before the first strong line,
    /// waits to join the first segment).
    Continue,
    /// It starts a new segment; `closed`, the one before, ended on the line
    /// above. Lines waiting for the first strong line join the new one.
    Start { closed: Option<Segment> },
}

/// Lines that may wait for the first strong line to say their format:
/// beyond this many, or [`PENDING_BYTES`] of them, they are an unknown
/// segment of their own. Waiting lines are held (ingest feeds them to the
/// first segment's reader), so an input with no strong line at all must not
/// be held whole.
pub(super) const PENDING_LINES: u32 = 4096;
pub(super) const PENDING_BYTES: usize = 4 << 20;

/// Splits an input into segments as its lines arrive, one at a time.
pub(super) struct Segmenter {
    id: SourceId,
    hint: Option<Format>,
    open: Option<Segment>,
    /// Lines seen before the first strong line join the first segment.
    pending_start: Option<u32>,
    /// How many lines, and bytes, wait so.
    pending_lines: u32,
    pending_bytes: usize,
    /// The last waiting line that is a known logger's record (its frame
    /// says so): the waiting lines up to it are a log, not the head of a
    /// command's report that comes next.
    pending_record: Option<u32>,
    /// What the command at the open prompt segment says follows it.
    after_prompt: Option<(Format, &'static str)>,
    /// Whether the last line was (part of) a command that goes on (`… \`,
    /// a quote left open).
    continued: shell::Continuation,
    /// The command at the open prompt prints its own JSON (`dcgmi health
    /// -j`, `kubectl get -o json`): a bare `{` under it is no journal.
    own_json: bool,
    /// The command typed at the open prompt, when its output is read by it
    /// (`ps -eo pid,lstart,args` names the columns of rows with no header).
    prompt_command: Option<String>,
    /// That command, when the open segment is its output.
    open_command: Option<String>,
}

impl Segmenter {
    pub(super) fn new(id: SourceId, hint: Option<Format>) -> Segmenter {
        Segmenter {
            id,
            hint,
            open: None,
            pending_start: None,
            pending_lines: 0,
            pending_bytes: 0,
            pending_record: None,
            after_prompt: None,
            continued: shell::Continuation::Over,
            own_json: false,
            prompt_command: None,
            open_command: None,
        }
    }

    /// The command typed at the prompt above the open segment, when the
    /// segment is its output and is read by it (`ps -o …`).
    pub(super) fn typed_command(&self) -> Option<&str> {
        self.open_command.as_deref()
    }

    /// Whether the user named the format (`--format-hint`): lines are then
    /// read as they are, frames and all.
    pub(super) fn hinted(&self) -> bool {
        self.hint.is_some()
    }

    /// The segment the last line went to, if one is open.
    pub(super) fn open(&self) -> Option<&Segment> {
        self.open.as_ref()
    }

    /// Classifies line `n`: `line` is its text under its frames, `frame`
    /// what they said ([`crate::ingest::frame`]); `content`, when known,
    /// is [`content_line`] of `line`.
    pub(super) fn line(
        &mut self,
        n: u32,
        line: &str,
        frame: &Frame,
        content: Option<bool>,
    ) -> Step {
        if let Some(format) = self.hint {
            return match &mut self.open {
                Some(s) => {
                    s.last_line = n;
                    Step::Continue
                }
                None => {
                    self.open = Some(Segment {
                        source: self.id,
                        format,
                        first_line: n,
                        last_line: n,
                        why: "named by --format-hint",
                    });
                    Step::Start { closed: None }
                }
            };
        }
        let current = self.open.as_ref().map(|s| s.format);
        // A command typed over several lines (`… \`, a quoted JSON body)
        // is one prompt.
        if self.continued.takes(line) && current == Some(Format::ShellPrompt) {
            self.continued = self.continued.after(line);
            if let Some(s) = &mut self.open {
                s.last_line = n;
            }
            return Step::Continue;
        }
        let mut class = if current.is_some_and(|f| continues_as(line, f)) {
            Class::Continue
        } else if frame.kernel && current != Some(Format::Dmesg) {
            // Only the kernel's log frames a line so (a kmsg record,
            // `dmesg --decode`, talosctl dmesg): whatever its text says.
            Class::Strong(
                Format::Dmesg,
                "a kernel log record's frame (/dev/kmsg, dmesg --decode, talosctl dmesg)",
            )
        } else if frame.kernel
            // A kernel record in dmesg's segment; an exception line where
            // the server sniffer would read it as content.
            || current.is_some_and(server::carries_content)
                && content.unwrap_or_else(|| content_line(line))
        {
            Class::Continue
        } else {
            match sniff(line, current) {
                // A known logger's record (TGI's tracing, Python logging's
                // head) below a command's report is a log pasted after it,
                // not a line of the report: it starts a segment of its own,
                // read line by line as that logger's records.
                Class::Continue if frame.record && current.is_some_and(is_host_output) => {
                    Class::Strong(Format::Unknown, LOGGER_RECORDS)
                }
                class => class,
            }
        };
        // A bare `{` opens `journalctl -o json-pretty` output only under a
        // prompt that may have printed it.
        if let (Class::Strong(Format::JournalJson, _), Some(Format::ShellPrompt), true) =
            (&class, current, self.own_json)
        {
            if line.trim_end() == "{" {
                class = Class::Continue;
            }
        }
        // Under a prompt, the first output no strong line claims is the
        // output of the command typed there.
        let mut from_prompt = false;
        // A `ps` whose `-o` list names the columns claims its rows even when
        // they are strong ps lines of their own (a headerless `lstart` row).
        if let (Class::Strong(Format::Ps, _), Some(Format::ShellPrompt), Some(_)) =
            (&class, current, &self.prompt_command)
        {
            class = Class::Continue;
        }
        if let (Class::Continue, Some(Format::ShellPrompt), Some((format, why))) =
            (&class, current, self.after_prompt)
        {
            if !line.trim().is_empty() {
                class = Class::Strong(format, why);
                from_prompt = true;
            }
        }
        if let Class::Strong(format, _) = class {
            self.after_prompt = match format {
                Format::ShellPrompt => shell::command_hint(line),
                _ => None,
            };
            if format == Format::ShellPrompt {
                self.prompt_command = shell::reads_by_command(line).map(str::to_owned);
            }
            self.continued = match format {
                Format::ShellPrompt => shell::Continuation::Over.after(line),
                _ => shell::Continuation::Over,
            };
            self.own_json = format == Format::ShellPrompt && shell::prints_own_json(line);
        }
        match class {
            Class::Strong(format, why)
                if Some(format) != current || format == Format::ShellPrompt =>
            {
                self.open_command = if from_prompt {
                    self.prompt_command.take()
                } else {
                    None
                };
                let record = self.pending_record.take();
                let mut first_line = self.pending_start.take().unwrap_or(n);
                let mut closed = None;
                // Waiting lines that include a known logger's records are a
                // log pasted above a command's report: they are a segment
                // of their own, not the report's head (a block's shape
                // changes where the report starts).
                // The lines after the last record (a blank line, the
                // report's date) stay the report's head.
                if let (Some(last), true, None) = (record, is_host_output(format), &self.open) {
                    closed = Some(Segment {
                        source: self.id,
                        format: Format::Unknown,
                        first_line,
                        last_line: last,
                        why: LOGGER_RECORDS,
                    });
                    first_line = last + 1;
                }
                let replaced = self.open.replace(Segment {
                    source: self.id,
                    format,
                    first_line,
                    last_line: n,
                    why,
                });
                Step::Start {
                    closed: replaced.or(closed),
                }
            }
            _ => {
                match &mut self.open {
                    Some(s) => s.last_line = n,
                    None => {
                        let first_line = *self.pending_start.get_or_insert(n);
                        if frame.record {
                            self.pending_record = Some(n);
                        }
                        self.pending_lines += 1;
                        self.pending_bytes += line.len();
                        if self.pending_lines >= PENDING_LINES
                            || self.pending_bytes >= PENDING_BYTES
                        {
                            self.pending_start = None;
                            self.pending_record = None;
                            self.open = Some(Segment {
                                source: self.id,
                                format: Format::Unknown,
                                first_line,
                                last_line: n,
                                why: "no line of a known format in its first lines",
                            });
                            return Step::Start { closed: None };
                        }
                    }
                }
                Step::Continue
            }
        }
    }

    /// The last segment: the open one, or, when no line was strong, one
    /// unknown segment over every line.
    pub(super) fn finish(self, line_count: u32) -> Option<Segment> {
        if let Some(first_line) = self.pending_start {
            return Some(Segment {
                source: self.id,
                format: Format::Unknown,
                first_line,
                last_line: line_count,
                why: "no line matched a known format",
            });
        }
        self.open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::fixture_lines;

    fn formats(text: &str) -> Vec<(Format, u32, u32)> {
        let source = Source::new("t", text.as_bytes());
        segment(SourceId(0), &source)
            .into_iter()
            .map(|s| (s.format, s.first_line, s.last_line))
            .collect()
    }

    /// A command pasted without its prompt, over several `\` lines, is one
    /// prompt; what follows is its output (fixtures/real/062,
    /// https://github.com/NVIDIA/TensorRT-LLM/issues/1670, cut).
    #[test]
    fn a_command_without_prompt_and_its_continuations_are_one_prompt() {
        let paste = "python3 build.py --model_dir ${base_model}  --dtype float16 \\\n      --use_gpt_attention_plugin float16  \\\n      --tp_size 2\nnvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\n";
        assert_eq!(
            formats(paste),
            vec![
                (Format::ShellPrompt, 1, 3),
                (Format::ShellPrompt, 4, 4),
                (Format::NvidiaSmiTable, 5, 5),
            ]
        );
        // Output that only mentions a launcher is not a command.
        assert!(!is_prompt(
            "python3: can't open file 'serve.py': [Errno 2] No such file or directory"
        ));
        assert!(!is_prompt(
            "docker: Error response from daemon: could not select device driver"
        ));
    }

    #[test]
    fn a_single_format_file_is_one_segment() {
        let log = "[2026-11-27 09:38:52 TP1] Scheduler hit an exception: Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nRuntimeError: boom\n";
        assert_eq!(formats(log), vec![(Format::SglangLog, 1, 3)]);
    }

    /// A log of a known logger's records pasted above (or below) a
    /// command's report is a segment of its own, not the report's head
    /// (batch L's 912, https://github.com/huggingface/text-generation-inference/issues/1838,
    /// cut; the `ps` rows assembled).
    #[test]
    fn a_logger_s_records_beside_a_report_are_their_own_segment() {
        let tgi = "2024-05-01T01:17:02.618817Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready... rank=1\n2024-05-01T01:17:02.619736Z  INFO shard-manager: text_generation_launcher: Waiting for shard to be ready... rank=0\n\n";
        let table = "Wed May  1 03:37:22 2024       \n+-----------------------------------------------------------------------------------------+\n| NVIDIA-SMI 550.54.14              Driver Version: 550.54.14      CUDA Version: 12.4     |\n|-----------------------------------------+------------------------+----------------------+\n";
        let above = formats(&format!("{tgi}{table}"));
        assert_eq!(above[0], (Format::Unknown, 1, 2), "{above:?}");
        assert_eq!(above[1].0, Format::NvidiaSmiTable, "{above:?}");
        assert_eq!(above[1].1, 3, "{above:?}");
        // Below the report, the records start their own segment too.
        let below = formats(&format!("{table}{tgi}"));
        assert_eq!(below[0].0, Format::NvidiaSmiTable, "{below:?}");
        assert_eq!(below[1], (Format::Unknown, 5, 7), "{below:?}");
        // Plain lines above a report stay its head (a title, a date).
        let plain = formats(&format!("my server's GPUs:\n{table}"));
        assert_eq!(plain, vec![(Format::NvidiaSmiTable, 1, 5)], "{plain:?}");
    }

    #[test]
    fn a_paste_falls_apart_into_its_pieces() {
        let paste = "\
root@ct200:~# nvidia-smi
Fri Nov 27 09:41:12 2026       
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.172.08             Driver Version: 570.172.08     CUDA Version: 12.8     |
+-----------------------------------------------------------------------------------------+

root@ct200:~# journalctl -u sglang-k26
Nov 27 09:38:40 ct200 systemd[1]: Started sglang-k26.service - SGLang.
● ddtree-qwen.service - DDTree
     Loaded: loaded (/etc/systemd/system/ddtree-qwen.service; enabled; preset: enabled)
     CGroup: /system.slice/ddtree-qwen.service
             └─20629 /opt/ddtree/venv/bin/python3 serve.py
[2026-11-27 09:38:52 TP1] Scheduler hit an exception: Traceback (most recent call last):
RuntimeError: boom
";
        assert_eq!(
            formats(paste),
            vec![
                (Format::ShellPrompt, 1, 1),
                (Format::NvidiaSmiTable, 2, 6),
                (Format::ShellPrompt, 7, 7),
                (Format::JournalShort, 8, 8),
                (Format::SystemctlStatus, 9, 12),
                (Format::SglangLog, 13, 14),
            ]
        );
    }

    /// A `-q` section pasted alone (https://github.com/leptonai/gpud/pull/80).
    #[test]
    fn a_smi_q_section_without_its_report_is_smi_q() {
        let section = "    Remapped Rows\n        Correctable Error                 : 0\n        Uncorrectable Error               : 4\n        Pending                           : Yes\n";
        assert_eq!(formats(section), vec![(Format::NvidiaSmiQ, 1, 4)]);
        assert_eq!(
            formats("        Pending Page Blacklist            : No\n"),
            vec![(Format::NvidiaSmiQ, 1, 1)]
        );
    }

    #[test]
    fn csv_queries_are_told_apart() {
        assert_eq!(
            formats(
                "index, uuid, memory.used [MiB], memory.total [MiB]\n0, GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 1026 MiB, 81559 MiB\n"
            ),
            vec![(Format::NvidiaSmiQueryGpu, 1, 2)]
        );
        assert_eq!(
            formats(
                "GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 4318, sglang::scheduler_TP0, 1018 MiB\n"
            ),
            vec![(Format::NvidiaSmiComputeApps, 1, 1)]
        );
    }

    #[test]
    fn every_journalctl_mode_in_one_paste() {
        let paste = "\
root@gpu-node-7:~# journalctl -u sglang -o json-pretty -n 1
{
	\"_PID\" : \"4242\",
	\"MESSAGE\" : \"hello\"
}
root@gpu-node-7:~# journalctl -o verbose -n 1
Sat 2024-06-01 12:00:01.000000 UTC [s=3263;i=1;b=a1b2;m=7270e0;t=619d2d6fd1240;x=fbfc]
    _PID=1
    MESSAGE=Started sglang.service - SGLang inference server.
░░ Subject: A start job for unit sglang.service has finished successfully
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
Sat 2024-06-01 12:01:00.000000 UTC [s=3263;i=8;b=0f1e;m=200b20;t=619d2da815700;x=b911]
    MESSAGE=Accepted publickey for root
Sat 2024-06-01 12:00:03 UTC gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79
Sat 2024-06-01 12:00:04 UTC gpu-node-7 sglang.service[4242]: Traceback (most recent call last):
                                                               File \"x.py\", line 1, in <module>
Sat 2024-06-01 12:00:05 UTC gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79
[    9.000100] gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79
-- Boot 0f1e2d3c4b5a69788796a5b4c3d2e1f0 --
[    9.500000 <    0.499900 >] gpu-node-7 python3[4242]: x
1717243204.000100 gpu-node-7 python3[4242]: x
";
        assert_eq!(
            formats(paste),
            vec![
                (Format::ShellPrompt, 1, 1),
                (Format::JournalJson, 2, 5),
                (Format::ShellPrompt, 6, 6),
                (Format::JournalVerbose, 7, 13),
                // A with-unit dump that starts with a kernel line reads
                // that line as short-full; both parse it the same way.
                (Format::JournalShortFull, 14, 14),
                (Format::JournalWithUnit, 15, 17),
                (Format::JournalShortMonotonic, 18, 19),
                (Format::JournalShortDelta, 20, 20),
                (Format::JournalShortUnix, 21, 21),
            ]
        );
    }

    #[test]
    fn bare_messages_and_dmesg_are_not_journal_output() {
        // `journalctl -o cat` of a server is the server's own log; dmesg
        // looks like short-monotonic without host and identifier.
        assert_eq!(
            formats(
                "[2026-11-27 09:38:52 TP1] Init torch distributed begin.\nsglang-k26.service: Main process exited, code=killed, status=9/KILL\n"
            ),
            vec![(Format::SglangLog, 1, 2)]
        );
        assert_eq!(
            formats(
                "[ 8712.345678] NVRM: Xid (PCI:0000:1a:00): 79, pid=4242\n[    2.345678] usb 1-1: new high-speed USB device\n"
            ),
            vec![(Format::Dmesg, 1, 2)]
        );
    }

    #[test]
    fn a_hint_reads_the_whole_input_as_one_format() {
        let source = Source::new("t", b"Started x.service.\n[2026-11-27 09:38:52 TP1] hi\n");
        let got: Vec<(Format, u32, u32)> =
            segment_as(SourceId(0), &source, Some(Format::JournalCat))
                .into_iter()
                .map(|s| (s.format, s.first_line, s.last_line))
                .collect();
        assert_eq!(got, vec![(Format::JournalCat, 1, 2)]);
        let empty = Source::new("e", b"");
        assert!(segment_as(SourceId(0), &empty, Some(Format::JournalCat)).is_empty());
    }

    /// Every sniffer's gated regexes, for the tests that hold the gates to
    /// their regexes.
    fn all_gated() -> Vec<(&'static str, &'static Gated)> {
        [
            nvidia::gated(),
            systemd::gated(),
            procfs::gated(),
            packages::gated(),
            shell::gated(),
        ]
        .concat()
    }

    /// Each [`Gated`] regex's byte test lets through every line the regex
    /// matches: every line of every fixture, the lines its sniffer's tests
    /// name, and the same lines with the peeler's frame left on or the
    /// line indented (a regex that allows leading space). Each regex
    /// matches some of them, so no gate goes untested.
    #[test]
    fn every_gate_lets_through_what_its_regex_matches() {
        let mut lines = fixture_lines();
        lines.extend(GATE_SAMPLES.iter().map(|l| (*l).to_owned()));
        let indented: Vec<String> = lines.iter().map(|l| format!("  {l}")).collect();
        lines.extend(indented);
        let all = all_gated();
        let mut stopped = 0usize;
        let mut untested = Vec::new();
        for (name, gated) in &all {
            let mut matched = 0;
            for line in &lines {
                if gated.regex().is_match(line) {
                    matched += 1;
                    assert!(gated.gate(line), "{name}'s gate stops {line:?}");
                } else if !gated.gate(line) {
                    stopped += 1;
                }
            }
            if matched == 0 {
                untested.push(*name);
            }
        }
        assert!(
            untested.is_empty(),
            "no sample line for {untested:?}: their gates are untested"
        );
        let rows = lines
            .iter()
            .filter(|l| crate::ingest::ps::is_headerless_row(l))
            .inspect(|l| assert!(procfs::may_be_ps_row(l), "{l:?}"))
            .count();
        assert!(rows > 0, "no ps row among the samples");
        let modules = lines
            .iter()
            .map(|l| l.trim())
            .filter(|t| crate::ingest::lsmod::ROW.is_match(t))
            .inspect(|t| assert!(crate::ingest::lsmod::may_be_row(t), "{t:?}"))
            .count();
        assert!(modules > 0, "no lsmod row among the samples");
        // The gates are worth their place: most lines never meet a regex.
        assert!(stopped > all.len() * lines.len() / 2, "{stopped}");
    }

    /// Lines the gated regexes match that the fixtures may lack: from the
    /// sniffers' own tests and the formats' documentation (docs/formats).
    const GATE_SAMPLES: &[&str] = &[
        // `head /proc/*/cgroup` (tests_host.rs, docs/formats/procfs.md).
        "==> /proc/4318/cgroup <==",
        "==> /proc/self/cgroup <==",
    ];

    /// A raw traceback's frame and source lines, which no sniffer claims,
    /// meet none of the gated regexes.
    #[test]
    fn a_traceback_frame_meets_no_gated_regex() {
        let all = all_gated();
        for line in [
            r#"  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 167, in sample_tokens"#,
            "    return self.model_runner.sample_tokens(grammar_output)",
            "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            "Traceback (most recent call last):",
        ] {
            let met: Vec<_> = all
                .iter()
                .filter(|(_, g)| g.gate(line))
                .map(|(n, _)| *n)
                .collect();
            // `return` could start `rocm-smi`; `Traceback (` a `ps` header.
            assert!(met.len() <= 1, "{line}: {met:?}");
            assert!(!procfs::may_be_ps_row(line), "{line}");
            assert!(!crate::ingest::lsmod::may_be_row(line.trim()), "{line}");
        }
    }

    /// `continues_as` claims a line only where the sniffers would: every
    /// line of every fixture and a few near misses, for each format it knows.
    #[test]
    fn the_fast_paths_agree_with_the_sniffers() {
        let mut lines: Vec<String> = [
            "[    9.000100] gpu-node-7 kernel: NVRM: Xid (PCI:0000:1a:00): 79",
            "[    8.500000 <    1.000000 >] gpu-node-7 python3[4242]: x",
            "[ 8712.345678] NVRM: Xid (PCI:0000:1a:00): 79, pid=4242",
            "[Sat Jun  1 12:00:03 2024] NVRM: Xid",
            "[2025-06-01 12:00:10] gpu-node-7:4318:4401 [0] misc/shmutils.cc:72 NCCL WARN Error",
            "[2026-11-27 09:38:52.123 DP0 TP1] Load weight begin.",
            "[2026-11-27 09:38:52 TP1]no space",
            "Sat 2024-06-01 12:00:04 UTC gpu-node-7 python3[4242]: x",
            "Jun 01 12:00:00 node vllm[4200]: INFO 06-01 12:00:00 [a.py:1] b",
            "Jun  1 12:00:00 node my wrapper[77]: a: b",
            "2024-06-01T12:00:03,345678+00:00 kernel: x",
            "2026-11-27T09:38:40+0000 ct200 python3[1]: Traceback (most recent call last):",
            "2026-11-27T09:38:40.123456789+05:30 host sshd[9]: x",
            "1717243204.000100 gpu-node-7 python3[4242]: x",
        ]
        .iter()
        .map(|l| (*l).to_owned())
        .collect();
        lines.extend(fixture_lines());
        let formats = [
            Format::JournalShortIso,
            Format::JournalShort,
            Format::SglangLog,
            Format::Dmesg,
            Format::NvidiaSmiTable,
        ];
        let mut claimed = 0;
        for line in &lines {
            for format in formats {
                if continues_as(line, format) {
                    claimed += 1;
                    match sniff(line, Some(format)) {
                        Class::Strong(f, _) if f == format => {}
                        // A table's rows continue it.
                        Class::Continue if format == Format::NvidiaSmiTable => {}
                        Class::Strong(f, _) => panic!("{line}: fast {format:?}, sniffers {f:?}"),
                        Class::Continue => panic!("{line}: fast {format:?}, sniffers continue"),
                    }
                }
            }
        }
        assert!(claimed > 500, "fast paths claimed only {claimed} lines");
    }

    /// An exception line continues a segment that carries content only
    /// where the sniffers say so: every fixture line, and exception lines
    /// that other sniffers (or the server's own prefixes) claim, in every
    /// format, with the server sniffer where [`SERVER`] says; and whether
    /// the sniffers before the server's let it pass does not depend on the
    /// segment open.
    #[test]
    fn exception_lines_continue_content_as_the_sniffers_say() {
        assert!(std::ptr::fn_addr_eq(
            SNIFFERS[SERVER],
            server::sniff as Sniffer
        ));
        let mut lines: Vec<String> = [
            "RuntimeError: CUDA error: an illegal memory access was encountered in kernel abcdefghijkl",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "ValueError: invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE)",
            "KeyError: NVRM: Xid (PCI:0000:1a:00): 79",
            "MonitorError: 2024-06-01 12:00:00 host x[1]: y",
            "RuntimeError: 12 12:00:00 host python3[4242]: x",
            "OSError: [s=abc;i=1;b=2;m=3;t=4;x=5] x",
            "Exception: gpu-node-7:4318:4401 [0] NCCL WARN Error",
            "ConnectionError: a | b",
            "_PrivateError: x",
            "PyTorchError: version: 2.1",
            "Error: not an exception name alone",
            "RuntimeError:  two spaces",
            "RuntimeError: \u{a0}non-ASCII after the colon",
        ]
        .iter()
        .map(|l| (*l).to_owned())
        .collect();
        lines.extend(fixture_lines());
        let mut fast = 0;
        for line in &lines {
            for format in [
                Format::SglangLog,
                Format::VllmLog,
                Format::NcclLog,
                Format::TorchLog,
                Format::PythonTraceback,
                Format::RayLog,
                Format::JournalShort,
                Format::ShellPrompt,
                Format::Unknown,
            ] {
                let before_server = SNIFFERS[..SERVER]
                    .iter()
                    .all(|sniff| sniff(line, Some(format)).is_none());
                assert_eq!(
                    content_line(line),
                    server::exception_line(line) == Some(true) && before_server,
                    "{line}: in {format:?}"
                );
                if server::carries_content(format) && content_line(line) {
                    fast += 1;
                    assert!(
                        matches!(sniff(line, Some(format)), Class::Continue),
                        "{line}: fast in {format:?}"
                    );
                }
            }
        }
        assert!(fast > 50, "the fast path took only {fast} lines");
    }

    #[test]
    fn the_command_at_a_prompt_names_the_output_under_it() {
        // `journalctl -o cat` output has no mark of its own; a strong line
        // of another format still starts its own segment.
        let paste = "\
$ journalctl -u ollama -o cat

Started ollama.service - Ollama Service.
ollama.service: Main process exited, code=exited, status=1/FAILURE
[ 8712.345678] NVRM: Xid (PCI:0000:1a:00): 79, pid=4242
$ squeue
JOBID PARTITION
";
        assert_eq!(
            formats(paste),
            vec![
                (Format::ShellPrompt, 1, 2),
                (Format::JournalCat, 3, 4),
                (Format::Dmesg, 5, 5),
                (Format::ShellPrompt, 6, 7),
            ]
        );
    }

    #[test]
    fn unknown_text_is_one_unknown_segment() {
        assert_eq!(formats("hello\nworld\n"), vec![(Format::Unknown, 1, 2)]);
        assert_eq!(formats(""), vec![]);
    }

    /// Lines wait for the first strong line only so long: past the limit
    /// they are an unknown segment, and the strong line starts its own
    /// (probe D7: an input with no strong line was held whole).
    #[test]
    fn lines_wait_for_a_format_only_so_long() {
        let n = PENDING_LINES;
        let mut text = "unknown line\n".repeat(n as usize + 10);
        text.push_str("[2026-11-27 09:38:52 TP1] Load weight begin.\n");
        assert_eq!(
            formats(&text),
            vec![
                (Format::Unknown, 1, n + 10),
                (Format::SglangLog, n + 11, n + 11)
            ]
        );
        let few = "unknown line\n".repeat(10) + "[2026-11-27 09:38:52 TP1] Load weight begin.\n";
        assert_eq!(formats(&few), vec![(Format::SglangLog, 1, 11)]);
    }
}
