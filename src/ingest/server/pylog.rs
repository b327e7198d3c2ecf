//! Lines that other Python code in a serving process writes, in the shapes
//! the standard library and common tools give them: the `logging` module's
//! usual formats (`2025-03-27 21:33:31,320 - INFO - flashinfer.jit: …`,
//! the cookbook's `%(asctime)s - %(name)s - %(levelname)s - %(message)s`,
//! `basicConfig`'s `INFO:root:…`), tqdm progress bars, and the shell's
//! report of a job it started that a signal ended (`./run.sh: line 22:
//! 103525 Killed   python -m sglang.launch_server …`).

use std::sync::LazyLock;

use chrono::NaiveDate;
use regex::Regex;

use super::time_of_day;
use crate::model::Timestamp;

/// `2025-03-27 21:33:31,320 - INFO - flashinfer.jit: message` and
/// `2025-03-27 21:33:31,320 - flashinfer.jit - INFO - message`; logging's
/// `asctime` puts a comma before the milliseconds.
static ASCTIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9])\x20(?P<hms>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?:,(?P<ms>[0-9]{3}))?
        \x20-\x20(?:(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\x20-\x20(?P<name>[0-9A-Za-z_.]+):\x20?
        |(?P<name2>[0-9A-Za-z_.]+)\x20-\x20(?P<level2>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\x20-\x20?)
        (?P<msg>.*)$",
    )
    .expect("asctime regex")
});

/// `basicConfig`'s default `LEVEL:logger:message`.
static BASIC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<name>[A-Za-z_][0-9A-Za-z_.]*):(?P<msg>.*)$",
    )
    .expect("basicConfig regex")
});

/// tqdm: `desc:  42%|████▎     | 10/23 [00:05<00:07,  1.9it/s]`, the bar
/// cut anywhere by a terminal; vLLM's weight loading prints `50% Completed
/// | 1/2 [...]` instead of a bar; a notebook's copy (Colab, Jupyter) drops
/// the bar and keeps `vocab.json: 100% 2.78M/2.78M [00:01<00:00, 1.84MB/s]`.
static TQDM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[^|]*:\s*)?\s*[0-9]{1,3}%(?:(?:\x20Completed\x20)?\|[^|]*(?:\|\s*[0-9]+/[0-9]+(?:\s*\[[^\]]*\]?)?.*)?|\s+[0-9.]+[kMGTP]?(?:B|it)?/[0-9.]+[kMGTP]?(?:B|it)?\s*\[[0-9:]+<[0-9:?]+,\s*[^\]]*\])\s*$")
        .expect("tqdm regex")
});

/// tqdm with no total (an iterator without a length, a diffusion
/// pipeline's steps in some versions): `2it [00:25, 12.97s/it]`,
/// `desc: 45it [00:03, 14.2it/s, loss=0.1]` (tqdm/std.py format_meter():
/// `{l_bar}{n_fmt}{unit} [{elapsed}, {rate_fmt}{postfix}]` when `total` is
/// None; the rate `?it/s` before the second update).
static TQDM_NO_TOTAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:[^\[|]*:\s*)?[0-9]+(?:\.[0-9]+)?[kMGTP]?(?:it|B|[A-Za-z]+)\x20
        \[(?:[0-9]+:)?[0-9]{2}:[0-9]{2},\s*(?:[0-9]+(?:\.[0-9]+)?|\?)[kMGTP]?[A-Za-z]*/[A-Za-z]+(?:,[^\]]*)?\]\s*$",
    )
    .expect("tqdm without a total regex")
});

/// bash's report of a job a signal ended: `./run.sh: line 22: 103525
/// Killed    python -m …`, and `103525 Segmentation fault (core dumped) …`.
/// bash pads the PID to five columns (jobs.c `%5ld`): a smaller one stands
/// after more spaces (`slurm_script: line 28:  8156 Killed …`).
/// Each signal word is a fact anchor (ingest/anchors.rs).
static SHELL_JOB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:\S+:\x20line\x20[0-9]+:\x20+)?(?P<pid>[0-9]+)\x20
        (?P<signal>Killed|Terminated|Aborted(?:\x20\(core\x20dumped\))?|Segmentation\x20fault(?:\x20\(core\x20dumped\))?|Bus\x20error(?:\x20\(core\x20dumped\))?|Illegal\x20instruction(?:\x20\(core\x20dumped\))?)
        \x20+(?P<cmd>\S.*)$",
    )
    .expect("shell job regex")
});

/// zsh's report of a job a signal ended: `[1]    9301 killed     python3
/// scripts/dream.py` (the job number, `+`/`-` for the current job, the PID,
/// zsh's lower-case signal words, the command). zsh words a signal its own
/// way (Src/signames2.awk: `killed`, `terminated`, `abort`, `segmentation
/// fault`, `bus error`, `illegal hardware instruction`); [`bash_words`]
/// turns them into bash's. A progress bar's carriage returns can leave the
/// job number at the end of the line before (`…1.86s/it][1] ` then `60190
/// killed     python main.py`): the rest still says it all, by zsh's
/// lower-case word and the padding after it (two spaces at least).
static ZSH_JOB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:\[[0-9]+\]\x20+[+-]?\x20*(?P<pid>[0-9]+)\x20+
        (?P<signal>killed|terminated|abort|segmentation\x20fault|bus\x20error|illegal\x20hardware\x20instruction)(?P<core>\x20\(core\x20dumped\))?
        \x20+
        |(?P<pid2>[0-9]+)\x20+(?P<signal2>killed|terminated|abort|segmentation\x20fault|bus\x20error|illegal\x20hardware\x20instruction)(?P<core2>\x20\(core\x20dumped\))?
        \x20{2,})(?P<cmd>\S.*)$",
    )
    .expect("zsh job regex")
});

/// A job report with no PID: bash's job table (`[1]+  Killed
/// python server.py`) and zsh's foreground job (`zsh: killed     python3
/// server.py`).
static JOB_NO_PID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:\[[0-9]+\][+-]?\x20+|zsh:\x20)
        (?P<signal>Killed|Terminated|Aborted|Segmentation\x20fault|Bus\x20error|Illegal\x20instruction|killed|terminated|abort|segmentation\x20fault|bus\x20error|illegal\x20hardware\x20instruction)(?:\x20\(core\x20dumped\))?
        \x20+\S",
    )
    .expect("job without a PID regex")
});

/// A job report that names the PID but no command: `./scripts/on_sd_start.sh:
/// line 118: 7080 killed` (Easy Diffusion's start script,
/// https://github.com/easydiffusion/easydiffusion/issues/102, batch L 901
/// shows it): the script and line of bash's report, the signal word in
/// either case, nothing after it.
static JOB_NO_COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\S+:\x20line\x20[0-9]+:\x20+(?P<pid>[0-9]+)\x20
        (?P<signal>Killed|killed|Terminated|terminated)\s*$",
    )
    .expect("job without a command regex")
});

/// fish's report of a job a signal ended: `fish: Job 1, 'python3 train.py
/// --p…' terminated by signal SIGKILL (Forced quit)` (fish's proc.rs, the
/// job's command cut to the terminal's width, the signal's name and fish's
/// description of it). fish names no PID.
static FISH_JOB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^fish:\x20Job\x20[0-9]+,\x20'.*'\x20terminated\x20by\x20signal\x20(?P<sig>SIG[A-Z0-9]+)\x20\([^)]*\)\s*$",
    )
    .expect("fish job regex")
});

/// bash's words for the signals fish names by their `SIG` names.
fn bash_words_of_signal(name: &str) -> Option<&'static str> {
    Some(match name {
        "SIGKILL" => "Killed",
        "SIGTERM" => "Terminated",
        "SIGABRT" => "Aborted",
        "SIGSEGV" => "Segmentation fault",
        "SIGBUS" => "Bus error",
        "SIGILL" => "Illegal instruction",
        _ => return None,
    })
}

/// bash's words for a signal zsh words its own way; bash's words unchanged.
fn bash_words(zsh: &str) -> &str {
    match zsh {
        "killed" => "Killed",
        "terminated" => "Terminated",
        "abort" => "Aborted",
        "segmentation fault" => "Segmentation fault",
        "bus error" => "Bus error",
        "illegal hardware instruction" => "Illegal instruction",
        other => other,
    }
}

/// bash's report of a foreground job a signal ended: the signal's words
/// alone on the line (`Illegal instruction (core dumped)`, `Segmentation
/// fault (core dumped)`), or after the script and line (`./run.sh: line 3:`);
/// a `$ ` in front is a person's, who pasted every line of the terminal
/// after one (`$  Killed`, google/gemma.cpp#30): no command is named
/// `Killed`.
static SHELL_FOREGROUND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^(?:\$\x20+)?(?:\S+:\x20line\x20[0-9]+:\x20)?
        (?P<signal>Killed|Aborted|Segmentation\x20fault|Bus\x20error|Illegal\x20instruction)(?:\x20\(core\x20dumped\))?\s*$",
    )
    .expect("shell foreground job regex")
});

/// Whether `text` is bash's report of a foreground job a signal ended.
pub(super) fn shell_foreground(text: &str) -> bool {
    SHELL_FOREGROUND.is_match(text)
}

/// The signal's words of bash's report of a foreground job (`Killed`),
/// alone on its line or glued to the progress bar the job was drawing
/// (`Loading checkpoint shards:  38%|██▊ | 3/8 [00:02<00:03,  1.28it/s]Killed`:
/// tqdm ends its line with `\r`, so the shell's report follows on it).
pub(super) fn shell_foreground_or_glued(text: &str) -> Option<&str> {
    shell_foreground_signal(text)
        .or_else(|| {
            let c = JOB_NO_PID.captures(text)?;
            Some(bash_words(c.name("signal")?.as_str()))
        })
        .or_else(|| {
            let bar = text.strip_suffix("Killed")?;
            (bar.ends_with(']') && is_progress_bar(bar)).then_some("Killed")
        })
        .or_else(|| {
            // Every line that reaches here would run the regex: fish's own
            // prefix first.
            if !text.starts_with("fish: Job ") {
                return None;
            }
            let c = FISH_JOB.captures(text)?;
            bash_words_of_signal(c.name("sig")?.as_str())
        })
}

/// The signal's words of bash's report of a foreground job (`Killed`).
pub(super) fn shell_foreground_signal(text: &str) -> Option<&str> {
    SHELL_FOREGROUND
        .captures(text)
        .and_then(|c| c.name("signal"))
        .map(|m| m.as_str())
}

/// The `warnings` module's `path.py:129: UserWarning: message`; the source
/// line it quotes follows, indented two spaces. A message that starts with
/// a new line (Hydra's `version_base` warning) leaves the line ending in
/// `UserWarning: ` and stands on the lines below it, before the source line
/// (Lib/warnings.py `_formatwarnmsg_impl`: `f"{filename}:{lineno}:
/// {category}: {message}\n"`, then `  {line.strip()}\n`).
static WARNING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\S+\.py:[0-9]+: (?P<category>[A-Z][0-9A-Za-z_]*Warning):(?: (?P<msg>.*))?$")
        .expect("warnings regex")
});

/// The message of a `warnings` line (empty when it is on the lines below).
pub(super) fn warning(text: &str) -> Option<&str> {
    if !text.contains("Warning:") {
        return None;
    }
    WARNING
        .captures(text)
        .map(|c| c.name("msg").map_or("", |m| m.as_str()))
}

/// A `logging` line: its time (when printed) and its message.
pub(super) struct LogLine<'t> {
    pub time: Option<Timestamp>,
    pub message: &'t str,
}

pub(super) fn parse_logging(text: &str) -> Option<LogLine<'_>> {
    let first = *text.as_bytes().first()?;
    if first.is_ascii_digit() {
        let c = ASCTIME.captures(text)?;
        let date = NaiveDate::parse_from_str(&c["date"], "%Y-%m-%d").ok()?;
        let time = time_of_day(&c["hms"], c.name("ms").map(|m| m.as_str()))?;
        let message = c.name("msg").map_or("", |m| m.as_str());
        return Some(LogLine {
            time: Some(Timestamp {
                local: date.and_time(time),
                offset_secs: None,
                year_known: true,
            }),
            message,
        });
    }
    if first.is_ascii_uppercase() {
        let c = BASIC.captures(text)?;
        return Some(LogLine {
            time: None,
            message: c.name("msg").map_or("", |m| m.as_str()),
        });
    }
    None
}

pub(super) fn is_progress_bar(text: &str) -> bool {
    let b = text.as_bytes();
    (memchr::memchr(b'%', b).is_some() && TQDM.is_match(text))
        || (b
            .last()
            .is_some_and(|c| *c == b']' || c.is_ascii_whitespace())
            && memchr::memmem::find(b, b" [").is_some()
            && TQDM_NO_TOTAL.is_match(text))
}

/// A job the shell reports ended by a signal: PID, the signal as bash
/// words it, the command.
pub(super) struct ShellJob<'t> {
    pub pid: u32,
    pub signal: &'t str,
    pub command: &'t str,
}

pub(super) fn shell_job(text: &str) -> Option<ShellJob<'_>> {
    zsh_job(text)
        .or_else(|| glued_zsh_job(text))
        .or_else(|| bash_job(text))
}

/// zsh's job report glued to the progress bar the job was drawing: tqdm
/// ends its line with `\r`, so the report follows on it (`Loading
/// checkpoint shards:   0%|…| 0/3 [00:00<?, ?it/s][1]    26478 killed
/// python test.py`, https://github.com/baichuan-inc/Baichuan2/issues/138).
fn glued_zsh_job(text: &str) -> Option<ShellJob<'_>> {
    let at = memchr::memmem::find(text.as_bytes(), b"][")?;
    let (bar, job) = text.split_at(at + 1);
    if !is_progress_bar(bar) {
        return None;
    }
    zsh_job(job)
}

fn zsh_job(text: &str) -> Option<ShellJob<'_>> {
    if let Some(c) = ZSH_JOB.captures(text) {
        let words = bash_words(c.name("signal").or(c.name("signal2"))?.as_str());
        return Some(ShellJob {
            pid: c.name("pid").or(c.name("pid2"))?.as_str().parse().ok()?,
            signal: match (words, c.name("core").or(c.name("core2")).is_some()) {
                ("Aborted", true) => "Aborted (core dumped)",
                ("Segmentation fault", true) => "Segmentation fault (core dumped)",
                ("Bus error", true) => "Bus error (core dumped)",
                ("Illegal instruction", true) => "Illegal instruction (core dumped)",
                (w, _) => w,
            },
            command: c.name("cmd")?.as_str().trim_end(),
        });
    }
    None
}

fn bash_job(text: &str) -> Option<ShellJob<'_>> {
    if let Some(c) = SHELL_JOB.captures(text) {
        return Some(ShellJob {
            pid: c["pid"].parse().ok()?,
            signal: c.name("signal")?.as_str(),
            command: c.name("cmd")?.as_str().trim_end(),
        });
    }
    // A line without bash's `: line N:` is no such report: skip the regex.
    if !text.contains(": line ") {
        return None;
    }
    let c = JOB_NO_COMMAND.captures(text)?;
    Some(ShellJob {
        pid: c["pid"].parse().ok()?,
        signal: bash_words(c.name("signal")?.as_str()),
        command: "",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real lines: flashinfer under SGLang
    /// (https://github.com/sgl-project/sglang/pull/4826), the cookbook
    /// format, `basicConfig`'s default.
    #[test]
    fn logging_formats() {
        let l = parse_logging(
            "2025-03-27 21:33:31,320 - INFO - flashinfer.jit: Prebuilt kernels not found, using JIT backend",
        )
        .expect("asctime - level - name");
        assert_eq!(l.message, "Prebuilt kernels not found, using JIT backend");
        assert_eq!(
            l.time.map(|t| t.local.to_string()).as_deref(),
            Some("2025-03-27 21:33:31.320")
        );
        let l = parse_logging("2024-06-01 12:00:00,001 - vllm.worker - ERROR - boom")
            .expect("asctime - name - level");
        assert_eq!(l.message, "boom");
        let l = parse_logging("WARNING:root:CUDA out of memory").expect("basicConfig");
        assert_eq!((l.time, l.message), (None, "CUDA out of memory"));
        for not in [
            "2025-03-27 21:33:31 something else",
            "INFO 06-01 12:00:00 [x.py:1] hi",
            "INFO:     127.0.0.1:1 - \"GET / HTTP/1.1\" 200 OK",
            "ValueError: x",
        ] {
            assert!(parse_logging(not).is_none(), "{not}");
        }
    }

    /// SGLang's CUDA graph capture bar, whole and cut by the terminal
    /// (https://github.com/sgl-project/sglang/pull/4826).
    #[test]
    fn progress_bars() {
        for bar in [
            "Capturing batches (avail_mem=12.55 GB):   0%|          | 0/23 [00:00<?, ?it/s]",
            "Capturing batches (avail_mem=9.72 GB): 100%|██████████| 23/23 [00:04<00:00,  5.19it/s]",
            "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.10s/it]",
            "Capturing batches (avail_mem=9.72 GB): 100%|████████████",
            " 42%|████▎     | 10/23",
            // A notebook's copy, bar dropped
            // (https://github.com/vllm-project/vllm/issues/9990).
            "tokenizer_config.json: 100% 7.23k/7.23k [00:00<00:00, 22.8MB/s]",
            "vocab.json: 100% 2.78M/2.78M [00:01<00:00, 1.84MB/s]",
            // No total: stable_diffusion.openvino's steps (batch L 902,
            // https://github.com/bes-dev/stable_diffusion.openvino/issues/8).
            "2it [00:25, 12.97s/it]",
            "0it [00:00, ?it/s]",
        ] {
            assert!(is_progress_bar(bar), "{bar}");
        }
        for not in [
            "GPU 0 is 100% busy",
            "| 0 NVIDIA H100 | 100% |",
            "50% done",
            "memory: 100% 7/8 used",
            "2 items [see below]",
            "rank 0 [00:25, done]",
        ] {
            assert!(!is_progress_bar(not), "{not}");
        }
    }

    /// A warning and the source line under it
    /// (https://github.com/dstackai/dstack/issues/2348).
    #[test]
    fn warnings_lines() {
        assert_eq!(
            warning(
                "/opt/conda/envs/workflow/lib/python3.9/site-packages/torch/cuda/__init__.py:129: UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount()."
            ),
            Some("CUDA initialization: Unexpected error from cudaGetDeviceCount().")
        );
        assert_eq!(warning("UserWarning: no path"), None);
        assert_eq!(warning("x.py:1: not a Warning: category"), None);
    }

    /// bash's job report (https://github.com/sgl-project/sglang/issues/6888).
    #[test]
    fn fish_and_commandless_job_reports() {
        // fish (batch L 902, https://github.com/bes-dev/stable_diffusion.openvino/issues/8
        // as its case records it) and a commandless report (batch L 901).
        assert_eq!(
            shell_foreground_or_glued(
                "fish: Job 1, 'python3 stable_diffusion.py --p…' terminated by signal SIGKILL (Forced quit)"
            ),
            Some("Killed")
        );
        assert_eq!(
            shell_foreground_or_glued(
                "fish: Job 1, './build/app' terminated by signal SIGSEGV (Address boundary error)"
            ),
            Some("Segmentation fault")
        );
        assert_eq!(
            shell_foreground_or_glued("fish: Job 1, 'x' terminated by signal SIGUSR1 (Custom)"),
            None
        );
        let j = shell_job("./scripts/on_sd_start.sh: line 118: 7080 killed").expect("no command");
        assert_eq!((j.pid, j.signal, j.command), (7080, "Killed", ""));
        // Prose that merely says a job was killed is not a report.
        assert!(shell_job("the job 7080 killed itself").is_none());
        assert!(shell_job("line 118: 7080 killed").is_none());
    }

    #[test]
    fn shell_job_reports() {
        let j = shell_job("./run.sh: line 22: 103525 Killed                  python -m sglang.launch_server --host 0.0.0.0 --port 8188 --tp-size 2").expect("killed");
        assert_eq!(
            (j.pid, j.signal, j.command),
            (
                103525,
                "Killed",
                "python -m sglang.launch_server --host 0.0.0.0 --port 8188 --tp-size 2"
            )
        );
        let j = shell_job("4242 Segmentation fault (core dumped) python3 serve.py").expect("segv");
        assert_eq!(
            (j.pid, j.signal),
            (4242, "Segmentation fault (core dumped)")
        );
        let j =
            shell_job("./start.sh: line 3: 2211 Illegal instruction (core dumped) ollama serve")
                .expect("sigill");
        assert_eq!(j.signal, "Illegal instruction (core dumped)");
        // zsh's job report (https://github.com/invoke-ai/InvokeAI/issues/342,
        // batch G 746) and the next paste's variant of it with `+`.
        let j = shell_job("[1]    9301 killed     python3 scripts/dream.py").expect("zsh");
        assert_eq!(
            (j.pid, j.signal, j.command),
            (9301, "Killed", "python3 scripts/dream.py")
        );
        let j = shell_job("[2]  + 4711 segmentation fault (core dumped)  ./llama-server -m m.gguf")
            .expect("zsh segv");
        assert_eq!(
            (j.pid, j.signal),
            (4711, "Segmentation fault (core dumped)")
        );
        assert!(shell_job("[1]    9301 running    python3 x.py").is_none());
        // Glued to the bar the job was drawing
        // (https://github.com/baichuan-inc/Baichuan2/issues/138); a bar
        // with no report after it, or brackets that are no bar, are not.
        let j = shell_job("Loading checkpoint shards:   0%|                                                                                                                                                      | 0/3 [00:00<?, ?it/s][1]    26478 killed     python test.py").expect("glued zsh");
        assert_eq!(
            (j.pid, j.signal, j.command),
            (26478, "Killed", "python test.py")
        );
        assert!(
            shell_job("Loading checkpoint shards:   0%|          | 0/3 [00:00<?, ?it/s][1] ")
                .is_none()
        );
        assert!(shell_job("[INFO][1]    26478 killed     python test.py").is_none());
        // Without a PID: bash's job table, zsh's foreground job (variants
        // of the same reports).
        assert_eq!(
            shell_foreground_or_glued("[1]+  Killed                  python server.py"),
            Some("Killed")
        );
        assert_eq!(
            shell_foreground_or_glued("zsh: killed     python3 server.py"),
            Some("Killed")
        );
        assert_eq!(
            shell_foreground_or_glued("[1]+  Done  python server.py"),
            None
        );
        assert!(shell_job("12 apples").is_none());
        assert!(shell_job("line 22: Killed x").is_none());
        // bash's PID padded to five columns in a Slurm batch script
        // (batch-j/842).
        let j = shell_job("/var/spool/slurmd/job00191/slurm_script: line 28:  8156 Killed                  python3 main.py --prop hform --epochs 400")
            .expect("padded pid");
        assert_eq!(
            (j.pid, j.signal, j.command),
            (8156, "Killed", "python3 main.py --prop hform --epochs 400")
        );
        // zsh's report whose `[1]` a progress bar's carriage return left on
        // the line before (batch-j/860), and the next paste's variant; a
        // sentence that starts with a number and `killed` is not one.
        let j = shell_job("60190 killed     python main.py").expect("zsh, no job number");
        assert_eq!(
            (j.pid, j.signal, j.command),
            (60190, "Killed", "python main.py")
        );
        let j = shell_job("4321 killed     llama-server -m models/q4.gguf").expect("zsh variant");
        assert_eq!((j.pid, j.command), (4321, "llama-server -m models/q4.gguf"));
        assert!(shell_job("3 killed processes were restarted").is_none());
    }

    /// A foreground job's report (https://github.com/ollama/ollama/issues/2000):
    /// only the signal's words, nothing after them.
    #[test]
    fn shell_foreground_reports() {
        for line in [
            "Illegal instruction (core dumped)",
            "Segmentation fault (core dumped)",
            "Killed",
            "./run.sh: line 7: Illegal instruction",
            // google/gemma.cpp#30: every line of the paste after a `$ `.
            "$  Killed",
        ] {
            assert!(shell_foreground(line), "{line}");
            assert!(shell_foreground_signal(line).is_some(), "{line}");
        }
        assert_eq!(shell_foreground_signal("Killed"), Some("Killed"));
        // https://github.com/chatchat-space/Langchain-Chatchat/issues/35
        let glued = "Loading checkpoint shards:  38%|██████▊           | 3/8 [00:02<00:03,  1.28it/s]Killed";
        assert_eq!(shell_foreground_or_glued(glued), Some("Killed"));
        assert!(
            shell_foreground_or_glued(
                "Loading checkpoint shards:  38%|██████▊           | 3/8 [00:02<00:03,  1.28it/s]"
            )
            .is_none()
        );
        for not in [
            "Illegal instruction in kernel x",
            "Killed process 12 (python)",
            "Segfault",
            "$ Killed process 12",
        ] {
            assert!(!shell_foreground(not), "{not}");
        }
    }
}
