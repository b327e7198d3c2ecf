//! Detection of what a terminal shows around command output: `ps` listings,
//! shell prompts, and which tool's output the command at a prompt names.
//!
//! A prompt is `user@host:dir# cmd` (bash, zsh), `[root@host dir]# cmd`
//! (RHEL's bash), `user@host dir (branch)> cmd` (fish), `(venv) ` in front
//! of any of these, a bare `$ cmd` or `# cmd`, `PS C:\> cmd` (PowerShell),
//! `>>> code` (Python) and `In [3]: code` (IPython). The command typed there
//! ([`command_hint`]) says which format follows; the segmenter uses it for
//! output under the prompt that no line of its own marks, and a strong line
//! of another format still wins.

use super::{Class, gated, holds, literal, re};
use crate::ingest::Format;

// Any column layout (`ps -eo …`, `ps alx`'s `F UID PID …`): upper-case
// titles with a PID among them, the command last.
literal!(PID, "PID");
gated!(
    PS_HEADER,
    |l| holds(l, &PID),
    r"^\s*(?:(?:[A-Z%][A-Z0-9%_]*)\s+)*PID\s.*\b(?:CMD|COMMAND|ARGS)\s*$"
);
// A process row; `ps m` prints its threads with `-` for the PID.
re!(PS_ROW, r"^\s*(?:\S+\s+)?(?:[0-9]+|-)\s+\S");
// The prompt, captured up to where the command starts; `cmd` is empty for
// a prompt with nothing typed (only the `user@host` forms).
// Also: `user@host$` with no directory, zsh's `%n@%m[%~]%#` (TrueNAS:
// `root@truenas[/]#`), bash's own `\s-\v\$` when no profile set one
// (`bash-5.1#`), and oh-my-zsh's default theme, `➜  dir` (robbyrussell:
// an arrow, the directory's name, maybe `git:(branch)` and `✗`), and
// starship's two lines, `user@host in ~ as 🧙` then `❯ cmd` (maybe after a
// glyph of the theme), and a git prompt's branch between the directory and
// the sign (bash-git-prompt, `__git_ps1`: `user@host ~/dir [master*]$`,
// `user@host ~/dir (main)$`); and RHEL's `[root@host dir]#` as GitHub's
// e-mail replies print it, its `[user@host` taken for an address and
// redacted (`***@***.*** ~]# ps -aux | grep 1395`, ai4d-iasc/trixie#92);
// and the first of MSYS2's and Git for Windows' two lines, `user@host
// MINGW64 ~/dir` (the environment's name, `$MSYSTEM`, between the host and
// the directory: msys2/MSYS2-packages filesystem/bash.bashrc's PS1,
// msys2/MINGW-packages#20882 shows `CLANGARM64`), `$ cmd` below it.
literal!(SH_DASH, "sh-");
gated!(
    SHELL_PROMPT,
    |l| {
        let t = l.trim_end();
        // `@`, the first byte of `➜` and `❯`, bash's `sh-`, a virtualenv alone.
        memchr::memchr2(b'@', 0xE2, l.as_bytes()).is_some()
            || holds(l, &SH_DASH)
            || t.ends_with("env)")
            || t.ends_with("base)")
    },
    r"(?x)^(?:\(?[0-9A-Za-z_.-]+\)\x20+)*
    (?:
        \S+@\S+:\S*\s?[\#$%]
      | \[\S+@\S+(?:\x20[^\]]*)?\][\#$%]
      | \*\*\*@\*\*\*\.\*\*\*\x20[^\]\s]*\][\#$%]
      | \S+@\S+\x20\S+(?:\x20\([^)]*\))?>
      | \S+@\S+\x20(?:[~/]\S*|[0-9A-Za-z_.-]+)\x20[\#%]
      | \S+@\S+\x20(?:[~/]\S*|[0-9A-Za-z_.-]+)\x20[\[(][^\])\s]*[\])]\x20?[\#$%]
      | [0-9A-Za-z_.-]+@[0-9A-Za-z_.-]+(?:\[[^\]\s]*\])?[\#$%]
      | (?:bash|sh|zsh)-[0-9]+(?:\.[0-9]+)*[\#$]
      | ➜\x20+\S+(?:\x20git:\([^)]*\))?(?:\x20✗)?
      | (?:\S{1,2}\x20+)?❯
      | [0-9A-Za-z_.-]+@[0-9A-Za-z_.-]+\x20in\x20[~/]\S*(?:\x20(?:on|via|as|is|took)\x20\S+)*\s*$
      | [0-9A-Za-z_.-]+@[0-9A-Za-z_.-]+\x20(?:MINGW64|MINGW32|MSYS|UCRT64|CLANG64|CLANG32|CLANGARM64)\x20[~/]\S*\s*$
      | \((?:base|venv|\.venv|env)\)\s*$
    )(?:\x20+(?P<cmd>\S.*)|\s*$)"
);
// After a bare `$ ` or `# ` (maybe after the directory alone, as a prompt
// of `PS1='\w\$ '` shows it: `~$ nvtop`, `/opt/app# ls`, or after the host
// and the directory, `PS1='\h:\w\$ '`: `gx10-99a1:~$ lms server start`), a command: a lowercase word or a path, maybe
// after `VAR=value` assignments (vLLM prints `# GPU blocks: 1952, …`);
// or the `$ ` prompt alone, the command's output over (a `#` alone is
// too often a comment's); PowerShell's `PS C:\> cmd` and cmd.exe's
// `C:\Users\win>cmd` (no space after its `>`; `(venv) ` before it when a
// virtualenv is active, its activate.bat's prompt). A paste indented as a whole indents its `$ `
// prompts too (a `#` indented is a code comment's).
gated!(
    BARE_PROMPT,
    |l| {
        let b = l.as_bytes();
        matches!(b.first(), Some(b'~' | b'/' | b'$' | b'#' | b'P' | b'>' | b'I'))
            || memchr::memchr(b'$', b).is_some()
            // cmd.exe's `C:\Users\win>`, maybe after a virtualenv's `(venv) `.
            || (b.len() > 3 && b[0].is_ascii_uppercase() && b[1] == b':' && b[2] == b'\\')
            || (b.first() == Some(&b'(') && memchr::memmem::find(b, b":\\").is_some())
    },
    r"^(?:(?:(?:[0-9A-Za-z_.-]+:(?:~[0-9A-Za-z_./-]*|/[0-9A-Za-z_./-]*)|~[0-9A-Za-z_./-]*|/[0-9A-Za-z_./-]*)?[$#]|\s+\$) +(?P<cmd>(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*[a-z./~][0-9A-Za-z_./+-]*(?:\s.*)?)|(?:PS [A-Z]:\\[^>]*> |(?:\([0-9A-Za-z_.-]+\) )?[A-Z]:\\[^>]*>|>>> |In \[[0-9]+\]: )(?P<code>\S.*)|\$ *)$"
);

// A command pasted without its prompt, maybe indented: a launcher people
// type (maybe after `sudo` and `VAR=value` assignments) and an argument, or
// a pager on a path (`sudo cat /proc/77637/stack`). Programs print
// `python3: can't open file …` with a colon, so an argument must follow.
// A notebook cell runs one through the shell after a `!` (Jupyter, Colab:
// `!python examples/chat.py -m …`, `!nvidia-smi`). The launcher may be
// named by a relative path (`./ollama --version`, `./build/bin/llama-server`;
// an absolute one is as often `ps`'s answer, `/usr/bin/python3 app.py`);
// Meta's `llama` CLI by its subcommand (`llama inference start`).
gated!(
    BARE_COMMAND,
    may_be_bare_command,
    r"^\s*!?(?:sudo\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:(?:\./(?:[0-9A-Za-z_.-]+/)*)?(?:python(?:3(?:\.[0-9]+)?)?|torchrun|vllm|docker(?:-compose)?|nvidia-docker|podman|mpirun|srun|deepspeed|accelerate|trtllm-serve|trtllm-build|ollama|jupyter|llama\s+(?:stack|inference|model|download)|nvidia-smi|journalctl|systemctl|dmesg|kubectl|ssh|dcgmi|nvtop|nvitop|squeue|sinfo|scontrol|rocm-smi|fuser|ps|pgrep|pkill|kill|lsof|netstat|ss|curl|wget|text-generation-launcher|llama-server|local-ai|lmdeploy|dynamo|gpustack|\.?/[0-9A-Za-z_./-]+\.sh)(?:\s+(?:-{1,2}[0-9A-Za-z_-]|[0-9A-Za-z_./~${\x22'-]).*|\s*)|(?:cat|head|tail|less)\s+(?:-\S+\s+)*[/~$]\S*(?:\s.*)?)$"
);

/// [`BARE_COMMAND`]'s gate: its first word (after white space and a
/// notebook's `!`) is `sudo`, an assignment, a path, `python…` or one of
/// the launchers and pagers the regex names, whole. A log line that starts
/// with another word (llama.cpp's `slot update_slots: …`, `srv
/// log_server_r: …`) pays a byte scan and a length switch, not the regex.
fn may_be_bare_command(line: &str) -> bool {
    let rest = line.trim_start();
    let rest = rest.strip_prefix('!').unwrap_or(rest);
    // Any byte past ASCII ends the word too: the regex's `\s` is Unicode's.
    let end = rest
        .bytes()
        .position(|c| c.is_ascii_whitespace() || !c.is_ascii())
        .unwrap_or(rest.len());
    let word = &rest[..end];
    match word.as_bytes().first() {
        Some(b'.' | b'/') => true,
        Some(b'A'..=b'Z' | b'_') => memchr::memchr(b'=', word.as_bytes()).is_some(),
        Some(b'p') if word.starts_with("python") => true,
        Some(_) => matches!(
            word,
            "sudo"
                | "torchrun"
                | "vllm"
                | "docker"
                | "docker-compose"
                | "nvidia-docker"
                | "podman"
                | "mpirun"
                | "srun"
                | "deepspeed"
                | "accelerate"
                | "trtllm-serve"
                | "trtllm-build"
                | "ollama"
                | "jupyter"
                | "llama"
                | "nvidia-smi"
                | "journalctl"
                | "systemctl"
                | "dmesg"
                | "kubectl"
                | "ssh"
                | "dcgmi"
                | "nvtop"
                | "nvitop"
                | "squeue"
                | "sinfo"
                | "scontrol"
                | "rocm-smi"
                | "fuser"
                | "ps"
                | "pgrep"
                | "pkill"
                | "kill"
                | "lsof"
                | "netstat"
                | "ss"
                | "curl"
                | "wget"
                | "text-generation-launcher"
                | "llama-server"
                | "local-ai"
                | "lmdeploy"
                | "dynamo"
                | "gpustack"
                | "cat"
                | "head"
                | "tail"
                | "less"
        ),
        None => false,
    }
}

// A prompt drawn as `> ` (a quoted reply, a PowerShell-style prompt) or
// zsh's bare `% `, in front of a command [`BARE_COMMAND`] knows: a quoted
// kernel or log line after `> `, a sentence after `% `, is not one.
fn quoted_command(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("> ")
        .or_else(|| line.strip_prefix("% "))?;
    BARE_COMMAND.is_match(rest).then(|| rest.trim())
}

pub(super) fn sniff(line: &str, current: Option<Format>) -> Option<Class> {
    use Class::*;
    if PS_HEADER.is_match(line) {
        return Some(Strong(Format::Ps, "ps header row"));
    }
    if is_prompt(line) {
        return Some(Strong(Format::ShellPrompt, "shell prompt and command"));
    }
    // `top -b`'s summary opens its listing; its other summary lines
    // (`%Cpu(s): …`, `MiB Mem : …`) stand between it and the table.
    let top = line.trim_start().starts_with("top - ") && crate::ingest::ps::is_top_summary(line);
    if top {
        return Some(Strong(Format::Ps, "top's summary line"));
    }
    if current == Some(Format::Ps)
        && !PS_ROW.is_match(line)
        && !line.trim().is_empty()
        && !crate::ingest::ps::is_top_summary(line)
    {
        // A ps listing ends at the first line that is not a process row.
        return Some(Strong(
            Format::Unknown,
            "text after a ps listing that no format matched",
        ));
    }
    None
}

/// Whether `line` is a shell prompt, with or without a command.
pub(in crate::ingest) fn is_prompt(line: &str) -> bool {
    SHELL_PROMPT.is_match(line)
        // nccl-tests' `# ` starts its report's lines (`# nThread 1 nGpus
        // 8 …`), not root's prompt.
        || (BARE_PROMPT.is_match(line)
            && !(line.starts_with('#') && crate::ingest::nccl_tests::is_line(line)))
        || bare_command(line)
        || quoted_command(line).is_some()
}

/// A command pasted without its prompt ([`BARE_COMMAND`]), but not a row
/// of `lsof -i` that starts with a command's name (`ollama  2233 ollama
/// 3u  IPv4 … TCP localhost:11434 (LISTEN)`): that is output, the socket
/// and its holder.
fn bare_command(line: &str) -> bool {
    literal!(IPV4, " IPv4 ");
    literal!(IPV6, " IPv6 ");
    literal!(TCP, " TCP ");
    literal!(UDP, " UDP ");
    // The command first: most lines fail its gate, and a row must match it
    // to be mistaken for one.
    BARE_COMMAND.is_match(line)
        && !((holds(line, &IPV4) || holds(line, &IPV6)) && (holds(line, &TCP) || holds(line, &UDP)))
}

/// Where a command typed at a prompt stands at the end of one of its
/// lines: over, or going on on the next line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(in crate::ingest) enum Continuation {
    /// The command is over.
    #[default]
    Over,
    /// `… \`: the next line goes on with it.
    Backslash,
    /// A quote left open (`curl … -d '{` and the JSON body on the next
    /// lines, up to `}'`): the lines up to the one that closes it are the
    /// command's; `lines` of them so far.
    Quote { quote: u8, lines: u8 },
}

/// A quote left open takes at most this many lines: a stray apostrophe
/// (`echo it's`) must not swallow the output after it.
const QUOTED_LINES: u8 = 32;

impl Continuation {
    /// Whether `line` is a line of the command: after `\`, any; inside a
    /// quote, any but a new prompt (the person typed another command: the
    /// quote was a stray one).
    pub(in crate::ingest) fn takes(self, line: &str) -> bool {
        match self {
            Continuation::Over => false,
            Continuation::Backslash => true,
            Continuation::Quote { .. } => !is_prompt(line),
        }
    }

    /// Where the command stands after `line`, one of its lines (its first
    /// when `self` is [`Continuation::Over`]): quotes are followed as the
    /// shell does (nothing is special inside `'…'`; a backslash escapes
    /// outside quotes and inside `"…"`; an unquoted `#` starting a word
    /// begins a comment).
    pub(in crate::ingest) fn after(self, line: &str) -> Continuation {
        let (mut open, lines) = match self {
            Continuation::Quote { quote, lines } => (Some(quote), lines),
            _ => (None, 0),
        };
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            match open {
                None if c == b'\\' => i += 1,
                None if c == b'#' && (i == 0 || bytes[i - 1].is_ascii_whitespace()) => break,
                None if c == b'\'' || c == b'"' => open = Some(c),
                Some(b'"') if c == b'\\' => i += 1,
                Some(quote) if c == quote => open = None,
                _ => {}
            }
            i += 1;
        }
        match open {
            Some(quote) if lines < QUOTED_LINES => Continuation::Quote {
                quote,
                lines: lines + 1,
            },
            Some(_) => Continuation::Over,
            None if line.trim_end().ends_with(" \\") || line.trim_end() == "\\" => {
                Continuation::Backslash
            }
            None => Continuation::Over,
        }
    }
}

/// The command typed at a prompt line, if `line` is one.
pub(in crate::ingest) fn command(line: &str) -> Option<&str> {
    let Some(c) = SHELL_PROMPT
        .captures(line)
        .or_else(|| BARE_PROMPT.captures(line))
    else {
        return bare_command(line)
            .then(|| line.trim())
            .or_else(|| quoted_command(line));
    };
    c.name("cmd")
        .or_else(|| c.name("code"))
        .map(|m| m.as_str().trim())
}

/// The command typed at prompt `line` when its output is read by it: a
/// `ps` whose `-o` list names the columns (`ps -eo pid,lstart,etimes,args |
/// grep vllm`), or an `nvidia-smi --query-gpu=` list (`--format=csv,noheader`),
/// which a paste may show without the header row.
pub(super) fn reads_by_command(line: &str) -> Option<&str> {
    let command = command(line)?;
    let reads = match command_hint(line)?.0 {
        Format::Ps => crate::ingest::ps::typed_columns(command).is_some(),
        Format::NvidiaSmiQueryGpu => crate::ingest::nvidia_smi_csv::typed_fields(command).is_some(),
        _ => false,
    };
    reads.then_some(command)
}

/// Whether the command at prompt `line` is a tool that prints JSON of its
/// own (any named tool but `journalctl` and the pagers it may be read
/// through): a bare `{` under it opens that JSON, not a journal record.
pub(super) fn prints_own_json(line: &str) -> bool {
    let Some(command) = command(line) else {
        return false;
    };
    !command.contains("journalctl")
        && remote(command)
            .split_whitespace()
            .find(|w| !matches!(*w, "sudo" | "env" | "watch" | "time" | "command"))
            .is_some_and(|tool| {
                let tool = tool.rsplit('/').next().unwrap_or(tool);
                !matches!(
                    tool,
                    "cat" | "less" | "more" | "head" | "tail" | "jq" | "zcat"
                )
            })
}

/// The format the output of the command at prompt `line` has, and why:
/// the last stage of a pipeline decides (`dmesg -T | grep NVRM` is dmesg,
/// `… | grep` keeps its input's format); `sudo`, `env` and `watch` are
/// looked through.
pub(super) fn command_hint(line: &str) -> Option<(Format, &'static str)> {
    let command = command(line)?;
    let mut hint = None;
    for stage in command.split('|') {
        let words: Vec<&str> = remote(stage)
            .split_whitespace()
            .skip_while(|w| matches!(*w, "sudo" | "env" | "watch" | "time" | "command" | "-n"))
            .collect();
        let Some(&tool) = words.first() else {
            continue;
        };
        let tool = tool.rsplit('/').next().unwrap_or(tool);
        // `python -m gpustat` runs the module as the tool.
        let (tool, words) = match words.as_slice() {
            [python, "-m", module, ..] if python.starts_with("python") => (*module, &words[2..]),
            _ => (tool, &words[..]),
        };
        let has = |flag: &str| words.iter().any(|w| w.starts_with(flag));
        let stage_hint = match tool {
            "nvidia-smi" | "nvidia-smi.exe" => Some(if has("--query-compute-apps") {
                (
                    Format::NvidiaSmiComputeApps,
                    "output of `nvidia-smi --query-compute-apps` at the prompt above",
                )
            } else if has("--query-gpu") {
                (
                    Format::NvidiaSmiQueryGpu,
                    "output of `nvidia-smi --query-gpu` at the prompt above",
                )
            } else if has("pmon") {
                (
                    Format::NvidiaSmiPmon,
                    "output of `nvidia-smi pmon` at the prompt above",
                )
            } else if has("-q") && (has("-x") || has("--xml")) {
                (
                    Format::NvidiaSmiQXml,
                    "output of `nvidia-smi -q -x` at the prompt above",
                )
            } else if has("-q") || has("--query") {
                (
                    Format::NvidiaSmiQ,
                    "output of `nvidia-smi -q` at the prompt above",
                )
            } else if has("-L") || has("--list-gpus") || has("nvlink") {
                (
                    Format::NvidiaSmiList,
                    "output of `nvidia-smi -L` / `nvidia-smi nvlink` at the prompt above",
                )
            } else {
                (
                    Format::NvidiaSmiTable,
                    "output of `nvidia-smi` at the prompt above",
                )
            }),
            "nvidia-ctk" if words.contains(&"cdi") && words.contains(&"list") => Some((
                Format::NvidiaCtkCdiList,
                "output of `nvidia-ctk cdi list` at the prompt above",
            )),
            "ps" => Some((Format::Ps, "output of `ps` at the prompt above")),
            "lsmod" => Some((Format::Lsmod, "output of `lsmod` at the prompt above")),
            // `list` is the default command; `dump` writes the core itself.
            "coredumpctl" if !has("dump") => Some((
                Format::Coredumpctl,
                "output of `coredumpctl` at the prompt above",
            )),
            "gpustat" => Some((Format::Gpustat, "output of `gpustat` at the prompt above")),
            "dmesg" => Some((Format::Dmesg, "output of `dmesg` at the prompt above")),
            "journalctl" if has("-k") || has("--dmesg") => Some((
                Format::Dmesg,
                "output of `journalctl -k` at the prompt above",
            )),
            "journalctl" if words.windows(2).any(|w| w == ["-o", "cat"]) || has("--output=cat") => {
                Some((
                    Format::JournalCat,
                    "output of `journalctl -o cat` at the prompt above",
                ))
            }
            "journalctl" => Some((
                Format::JournalShort,
                "output of `journalctl` at the prompt above",
            )),
            "systemctl" if words.contains(&"cat") => Some((
                Format::SystemdUnitFile,
                "output of `systemctl cat` at the prompt above",
            )),
            "cat" | "less" | "more" | "vi" | "vim" | "nano"
                if words.iter().any(|w| {
                    w.ends_with(".service") || w.ends_with(".socket") || w.ends_with(".timer")
                }) =>
            {
                Some((
                    Format::SystemdUnitFile,
                    "a unit file shown at the prompt above",
                ))
            }
            "systemctl" if words.contains(&"show") => Some((
                Format::SystemctlShow,
                "output of `systemctl show` at the prompt above",
            )),
            "systemctl" if words.contains(&"status") => Some((
                Format::SystemctlStatus,
                "output of `systemctl status` at the prompt above",
            )),
            "cat"
                if words
                    .iter()
                    .any(|w| w.starts_with("/proc/") && w.ends_with("/cgroup")) =>
            {
                Some((
                    Format::ProcCgroup,
                    "output of `cat /proc/PID/cgroup` at the prompt above",
                ))
            }
            _ => None,
        };
        // `grep`, `head`, `tail`, `less` and the like keep their input's format.
        if stage_hint.is_some()
            || !matches!(
                tool,
                "grep"
                    | "egrep"
                    | "head"
                    | "tail"
                    | "less"
                    | "more"
                    | "cat"
                    | "tee"
                    | "sort"
                    | "uniq"
                    | "cut"
            )
        {
            hint = stage_hint;
        }
    }
    hint
}

/// The command `ssh [options] host command …` runs on the host, which
/// names the output as if typed there; any other stage as it is.
fn remote(stage: &str) -> &str {
    let trimmed = stage.trim_start();
    let Some(mut rest) = trimmed
        .strip_prefix("sudo ")
        .map(str::trim_start)
        .unwrap_or(trimmed)
        .strip_prefix("ssh ")
    else {
        return stage;
    };
    // Options, those that take a value with it, then the host.
    let mut value = false;
    loop {
        rest = rest.trim_start();
        let word = rest.split_whitespace().next().unwrap_or_default();
        if word.is_empty() {
            return rest;
        }
        let is_option = word.starts_with('-');
        let takes = is_option && word.len() == 2 && "bcDEeFIiJLlmOopQRSWw".contains(&word[1..]);
        rest = &rest[word.len()..];
        if value || is_option {
            value = takes;
            continue;
        }
        return rest;
    }
}

/// Each gated regex, for the test that its gate lets through every line
/// it matches.
#[cfg(test)]
pub(super) fn gated() -> Vec<(&'static str, &'static super::Gated)> {
    vec![
        ("PS_HEADER", &PS_HEADER),
        ("SHELL_PROMPT", &SHELL_PROMPT),
        ("BARE_PROMPT", &BARE_PROMPT),
        ("BARE_COMMAND", &BARE_COMMAND),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quote left open goes on to the line that closes it (a `curl -d
    /// '{` with its JSON body: fixtures/real/796,
    /// vllm-project/vllm#12664), yields to a new prompt, and gives up after
    /// [`QUOTED_LINES`]; `\\` goes on one line; quotes inside the other
    /// kind and after `#` do not count.
    #[test]
    fn a_command_goes_on_while_a_quote_is_open() {
        use Continuation::*;
        let first = Over.after(
            "curl http://localhost:5000/v1/completions -H \"Content-Type: application/json\" -d '{",
        );
        assert_eq!(
            first,
            Quote {
                quote: b'\'',
                lines: 1
            }
        );
        let body = first.after("\"model\": \"/home/bruce/Downloads/models/Qwen2.5-32B-Instruct\",");
        assert!(body.takes("\"max_tokens\": 7,"));
        assert_eq!(body.after("}'"), Over);
        assert!(!body.takes("$ nvidia-smi"));
        assert_eq!(Over.after("python3 serve.py --tp 2 \\"), Backslash);
        assert_eq!(Over.after("echo \"it's\" done"), Over);
        assert_eq!(Over.after("ls # it's a comment"), Over);
        let mut open = Over.after("echo it's");
        for _ in 0..QUOTED_LINES {
            open = open.after("more output");
        }
        assert_eq!(open, Over);
    }

    #[test]
    fn prompts_of_every_shell() {
        for (line, cmd) in [
            ("root@node4:~# dmesg -T | grep NVRM", "dmesg -T | grep NVRM"),
            ("$ nvidia-smi", "nvidia-smi"),
            (
                "(venv) user@host:~/x$ python -m sglang.launch_server --tp 2",
                "python -m sglang.launch_server --tp 2",
            ),
            (
                "[root@gpu01 ~]# systemctl status ollama",
                "systemctl status ollama",
            ),
            // The same, redacted by GitHub's e-mail reply (batch Q 1071,
            // ai4d-iasc/trixie#92).
            ("***@***.*** ~]# ps -aux | grep 1395", "ps -aux | grep 1395"),
            ("PS C:\\> nvidia-smi", "nvidia-smi"),
            (">>> import torch", "import torch"),
            (
                "(.venv) ubuntuai@ubuntuai ~/s/python (main)> python -m sglang.check_env",
                "python -m sglang.check_env",
            ),
            (
                "kgk2@bock:~$ cat /proc/driver/nvidia/version ",
                "cat /proc/driver/nvidia/version",
            ),
            (
                "In [3]: torch.cuda.mem_get_info()",
                "torch.cuda.mem_get_info()",
            ),
            // Prompts each shell's own default draws (the prompt strings of
            // bash's `\s-\v\$`, zsh's `%n@%m[%~]%#` as TrueNAS sets it,
            // oh-my-zsh's robbyrussell theme), written to their shape.
            ("bash-4.4# nvidia-smi -L", "nvidia-smi -L"),
            ("root@truenas[~]# dmesg | grep NVRM", "dmesg | grep NVRM"),
            ("(venv) ➜  ~ nvidia-smi", "nvidia-smi"),
            ("➜  vllm git:(main) ✗ nvidia-smi", "nvidia-smi"),
            ("user@gpu-box$ nvidia-smi", "nvidia-smi"),
            ("$  nvidia-smi", "nvidia-smi"),
            // cmd.exe (fixtures/real/800, ollama/ollama#4999, in another
            // folder: the tidy test reads a backslash and a letter as a
            // regex class) and a git prompt's branch (fixtures/real/726,
            // bash-git-prompt; `__git_ps1`'s `(main)$` written to its shape).
            ("C:\\ollama>ollama list", "ollama list"),
            // cmd.exe under a virtualenv (batch R 1107, docker/docs#13140).
            (
                "(venv) C:\\Users\\User\\Desktop\\python-docker\\python-docker>docker run --rm -d --network mysqlnet --name rest-server -p 5000:5000 python-docker-dev",
                "docker run --rm -d --network mysqlnet --name rest-server -p 5000:5000 python-docker-dev",
            ),
            (
                "atcold@GPU0 ~/MatchNet [master*]$ nvidia-smi ",
                "nvidia-smi",
            ),
            ("user@host ~/work (main)$ ls", "ls"),
            // Commands pasted without a prompt: batch R 1131
            // (ollama/ollama#9018), 1112 (jupyter/notebook#2844), 1128
            // (meta-llama/llama-stack-apps#15).
            ("./ollama run codeqwen:7b", "./ollama run codeqwen:7b"),
            ("jupyter notebook stop 8888", "jupyter notebook stop 8888"),
            (" llama inference start", "llama inference start"),
            (
                "curl http://localhost:8000/v1/models",
                "curl http://localhost:8000/v1/models",
            ),
        ] {
            assert!(is_prompt(line), "{line}");
            assert_eq!(command(line), Some(cmd), "{line}");
        }
        assert!(is_prompt("root@node4:~# "));
        // MSYS2's first line (batch R 1149, msys2/MINGW-packages#20882).
        assert!(is_prompt(
            "herna@SurfacePro9 CLANGARM64 /c/M_P/mingw-w64-ollama"
        ));
        assert!(!is_prompt(
            "herna@SurfacePro9 WINDOWS /c/M_P/mingw-w64-ollama"
        ));
        // `ps -o args`' answer (fixtures/real/727) is no command typed.
        assert!(!is_prompt(
            "/Users/user/.transformerlab/envs/transformerlab/bin/python /"
        ));
        // A paste indented as a whole (fixtures/real/504), and the `$ `
        // left alone after the output (zcash/zcash doc/book/src/dev/regtest.md);
        // an indented `#` stays a comment.
        assert_eq!(
            command(
                "  $ ps -eo pid,ppid,user,stat,lstart,etimes,pcpu,pmem,nlwp,args | grep '[v]llm' "
            ),
            Some("ps -eo pid,ppid,user,stat,lstart,etimes,pcpu,pmem,nlwp,args | grep '[v]llm'")
        );
        assert!(
            reads_by_command(
                "  $ ps -eo pid,ppid,user,stat,lstart,etimes,pcpu,pmem,nlwp,args | grep '[v]llm' "
            )
            .is_some()
        );
        assert!(reads_by_command("$ ps alx | grep zcashd").is_none());
        assert!(is_prompt("$ "));
        assert!(!is_prompt("    # compute the scores"));
        // Starship's two lines (fixtures/real/678), two virtualenvs
        // (fixtures/real/691), a virtualenv cut at its left
        // (fixtures/real/453), conda's `(base)` wrapped alone (697), and
        // commands pasted without their prompt (695, 697, 677).
        assert_eq!(
            command("󰛓 ❯ sudo ss -ltnp 'sport = :8080'"),
            Some("sudo ss -ltnp 'sport = :8080'")
        );
        assert!(is_prompt("dervarex@dervarex in ~ as 🧙"));
        assert_eq!(
            command(
                "(venv) (base) beast@beast-desktop:~/LINGO/Nvidia_dynamo$ dynamo run out=sglang"
            ),
            Some("dynamo run out=sglang")
        );
        assert_eq!(
            command("gpustack-test) ➜  ~ systemctl status gpustack"),
            Some("systemctl status gpustack")
        );
        assert!(is_prompt("(base)"));
        for line in [
            "pgrep ollama",
            "kill -9 1342356",
            "ps -ef | grep gpustack",
            "sudo /var/lib/gpustack/uninstall.sh",
            "text-generation-launcher --model-id mosaicml/mpt-30b-instruct",
        ] {
            assert!(is_prompt(line), "{line}");
        }
        // What programs print is not a command: `ps: …`, a sentence.
        assert!(!is_prompt("ps: error: unsupported option"));
        assert!(!is_prompt("the service was started with (base) env"));
        // An `lsof -i` row whose command is one a person types is output
        // (fixtures/real/662 and 663, ollama/ollama); lsof typed is not.
        for row in [
            "ollama  2233 ollama    3u  IPv4  37563      0t0  TCP localhost:11434 (LISTEN)",
            "ollama  226 ollama    3u  IPv4  22777      0t0  TCP localhost:11434 (LISTEN)",
        ] {
            assert!(!is_prompt(row), "{row}");
        }
        assert!(is_prompt("$ sudo lsof -i :11434"));
        assert!(is_prompt("sudo lsof -i :11434"));
        // docker compose v1's own command, and a notebook cell's shell
        // escape (batch J 856, 857).
        assert!(is_prompt("sudo docker-compose logs -f"));
        assert!(is_prompt(
            "!python examples/chat.py -m /content/exllamav2/my_model/QwQ-32B-exl2-3_0 -mode llama"
        ));
        assert!(is_prompt("!nvidia-smi"));
        assert!(!is_prompt("!important: the GPU was full"));
        // A prompt of the directory alone, `PS1='\w\$ '`
        // (https://github.com/Syllo/nvtop/issues/125).
        assert_eq!(command("~$ nvtop"), Some("nvtop"));
        assert_eq!(command("~/work$ nvidia-smi"), Some("nvidia-smi"));
        // The host and the directory, `PS1='\h:\w\$ '`
        // (https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/1720),
        // whose curl's JSON is its own, not a journal's.
        assert_eq!(
            command("gx10-99a1:~$ curl http://localhost:1234/v1/models"),
            Some("curl http://localhost:1234/v1/models")
        );
        assert!(prints_own_json(
            "gx10-99a1:~$ curl http://localhost:1234/v1/models"
        ));
        assert!(!is_prompt("Error: Failed to verify the server is running."));
        // zsh's default prompt, with and without a command (fixtures/real/043),
        // and its bare `% ` (fixtures/real/106).
        assert!(is_prompt("ceverson@Clarks-MacBook-Pro ~ %"));
        assert_eq!(command("me@mac ~/src % nvidia-smi"), Some("nvidia-smi"));
        // zsh's default `%n@%m %1~ %# ` shows the last directory's name.
        assert_eq!(command("me@mac src % nvidia-smi"), Some("nvidia-smi"));
        assert_eq!(
            command("% python -m gpustat -cpu                       "),
            Some("python -m gpustat -cpu")
        );
        // A command after a quoting `> ` (fixtures/real/029) and an
        // indented one pasted without its prompt (fixtures/real/032).
        assert_eq!(
            command("> ssh proud-dragonfly-1-host sudo journalctl -u nvidia-fabricmanager"),
            Some("ssh proud-dragonfly-1-host sudo journalctl -u nvidia-fabricmanager")
        );
        assert_eq!(
            command("      sudo cat /proc/77637/stack"),
            Some("sudo cat /proc/77637/stack")
        );
        for no in [
            "user@example.com wrote:",
            "Process 101553 has 1.19 GiB memory in use.",
            "$5 per hour",
            "[2026-11-27 09:38:52 TP1] x",
            "#!/bin/bash",
            "~$",
            "/tmp/x$ 5 per hour",
            // vLLM's own line (fixtures/real/014).
            "# GPU blocks: 1952, # CPU blocks: 2048",
            // Quoted log and kernel lines stay what they are.
            "> [  123.456] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
            "> Jul 01 22:55:07 gpu kernel: NVRM: GPU 0000:01:00.0: rm_init_adapter failed",
            "> python3: can't open file 'x.py'",
            // A percentage, a mail address, a pager's word in prose.
            "% of GPU memory in use",
            "joe@example.com is 50 %",
            "cat food is on the list",
            "      [<0>] uvm_spin_loop+0xb4/0x100 [nvidia_uvm]",
            "    vllm_config = VllmConfig(model_config)",
        ] {
            assert!(!is_prompt(no), "{no}");
        }
    }

    #[test]
    fn the_command_names_the_format_that_follows() {
        for (line, format) in [
            ("$ nvidia-smi", Some(Format::NvidiaSmiTable)),
            ("$ sudo nvidia-smi -q", Some(Format::NvidiaSmiQ)),
            ("$ nvidia-smi -q -x", Some(Format::NvidiaSmiQXml)),
            (
                "$ nvidia-smi --query-gpu=index,memory.used --format=csv,noheader",
                Some(Format::NvidiaSmiQueryGpu),
            ),
            (
                "$ nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
                Some(Format::NvidiaSmiComputeApps),
            ),
            ("root@node4:~# dmesg -T | grep NVRM", Some(Format::Dmesg)),
            ("$ sudo journalctl -k -b -1", Some(Format::Dmesg)),
            ("$ journalctl -u ollama -o cat", Some(Format::JournalCat)),
            (
                "$ journalctl -u ollama --no-pager",
                Some(Format::JournalShort),
            ),
            (
                "[root@gpu01 ~]# systemctl status ollama",
                Some(Format::SystemctlStatus),
            ),
            (
                "$ systemctl show vllm -p MainPID",
                Some(Format::SystemctlShow),
            ),
            ("$ ps aux | grep python", Some(Format::Ps)),
            (
                "$ nvidia-ctk --quiet cdi list | grep nvidia.com/gpu=",
                Some(Format::NvidiaCtkCdiList),
            ),
            ("$ cat /proc/4242/cgroup", Some(Format::ProcCgroup)),
            ("$ cat /proc/driver/nvidia/version", None),
            ("$ nvidia-smi | wc -l", None),
            (">>> import torch", None),
            ("$ squeue", None),
            (
                "> ssh proud-dragonfly-1-host sudo journalctl -u nvidia-fabricmanager",
                Some(Format::JournalShort),
            ),
            (
                "$ ssh -p 2222 -i key gpu01 nvidia-smi",
                Some(Format::NvidiaSmiTable),
            ),
            ("$ ssh gpu01", None),
            ("% nvidia-smi", Some(Format::NvidiaSmiTable)),
            ("% python -m gpustat -cpu", Some(Format::Gpustat)),
            ("$ gpustat --no-color", Some(Format::Gpustat)),
            ("$ python3 -m http.server", None),
        ] {
            assert_eq!(command_hint(line).map(|h| h.0), format, "{line}");
        }
    }
}
