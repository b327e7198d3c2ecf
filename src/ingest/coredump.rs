//! `coredumpctl info` (and `coredumpctl gdb`'s header, the same block):
//! one core dump per block of right-aligned `Key: value` fields, from
//! `PID: 3776 (ollama_llama_se)` down to `Message: Process 3776
//! (ollama_llama_se) of user 61547 dumped core.` and the message's
//! indented lines (modules, the stack trace). Each block becomes a
//! [`CoreDump`]: the PID, the signal, the time, the unit and the command of
//! a process that died by a signal and left a core (systemd
//! src/coredump/coredumpctl.c, `print_info()`). `coredumpctl list`'s table
//! (`TIME PID UID GID SIG COREFILE EXE`, `PRESENT` before v233) gives one
//! per row: the time, PID, signal and executable (`print_list()`).

use nom::Parser;
use nom::bytes::complete::{tag, take_till1, take_while1};
use nom::character::complete::{char, digit1, space0};
use nom::combinator::{all_consuming, opt};
use nom::sequence::delimited;

use super::Line;
use crate::model::{CoreDump, Facts};

/// A field line: the key (letters, spaces, `-`, right-aligned by
/// coredumpctl) and its value (empty for a blank `Message:`).
pub(crate) fn field(line: &str) -> Option<(&str, &str)> {
    let (rest, (_, key, _)) = (
        space0::<&str, nom::error::Error<&str>>,
        take_while1(|c: char| c.is_ascii_alphabetic() || c == ' ' || c == '-'),
        char(':'),
    )
        .parse(line)
        .ok()?;
    let key = key.trim_end();
    // A key is a word or a few (`Command Line`, `Size on Disk`), never a
    // sentence: coredumpctl's longest is 13 bytes.
    if key.is_empty() || key.len() > 16 || key.split(' ').count() > 3 {
        return None;
    }
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    Some((key, rest.trim()))
}

/// `3776 (ollama_llama_se)` (`PID:`) or `6 (ABRT)` (`Signal:`): a number
/// and the name in brackets.
fn number_and_name(value: &str) -> Option<(u32, &str)> {
    let (_, (n, _, name)) = all_consuming((
        digit1::<&str, nom::error::Error<&str>>,
        char(' '),
        delimited(char('('), opt(take_till1(|c| c == ')')), tag(")")),
    ))
    .parse(value)
    .ok()?;
    Some((n.parse().ok()?, name.unwrap_or("")))
}

/// `coredumpctl list`'s header: `TIME  PID  UID  GID SIG COREFILE  EXE`
/// (`PRESENT` before v233, ` SIZE` after `EXE` from v248).
pub(crate) fn is_list_header(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.len() >= 6
        && words[..5] == ["TIME", "PID", "UID", "GID", "SIG"]
        && words[5..].contains(&"EXE")
}

/// A row of `coredumpctl list`: `Sun 2017-01-22 14:04:30 CET  1749  1001
/// 100  11 present  /usr/bin/gnome-shell`: the time, PID, UID, GID, signal
/// (a number, or a name), whether the core is kept, the executable and
/// maybe its size.
fn list_row(line: &Line<'_>) -> Option<CoreDump> {
    let (time, rest) = super::journal_time::split_full(line.text.trim_start())?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let [pid, uid, gid, sig, rest @ ..] = &words[..] else {
        return None;
    };
    let pid: u32 = pid.parse().ok()?;
    if uid.parse::<u32>().is_err() || gid.parse::<u32>().is_err() {
        return None;
    }
    const KEPT: [&str; 8] = [
        "present",
        "missing",
        "none",
        "error",
        "inaccessible",
        "truncated",
        "journal",
        "*",
    ];
    let exe = match rest {
        [kept, exe, ..] if KEPT.contains(kept) => exe,
        [exe, ..] => exe,
        [] => return None,
    };
    let (signal, signal_name) = match sig.parse::<u32>() {
        Ok(n) => (Some(n), None),
        Err(_) if sig.bytes().all(|b| b.is_ascii_uppercase()) => {
            (None, Some(sig.trim_start_matches("SIG").to_owned()))
        }
        Err(_) => return None,
    };
    Some(CoreDump {
        pid,
        comm: None,
        signal,
        signal_name,
        time: Some(time),
        unit: None,
        executable: exe.starts_with('/').then(|| (*exe).to_owned()),
        command_line: None,
        span: line.span,
        signal_span: Some(line.span),
        unit_span: None,
    })
}

/// Whether `line` can only be `coredumpctl info`'s: its `PID: N (comm)`
/// head, its `Signal: N (NAME)`, its storage path or its message.
pub(crate) fn is_strong(line: &str) -> bool {
    let t = line.trim_start();
    let may = (t.starts_with("TIME ") && is_list_header(t))
        || t.starts_with("PID: ")
        || t.starts_with("Signal: ")
        || t.starts_with("Storage: /var/lib/systemd/coredump/")
        || t.starts_with("Coredump: /var/lib/systemd/coredump/")
        || (t.starts_with("Message: Process ") && t.contains(" dumped core"));
    may && match field(line) {
        Some(("PID", v)) | Some(("Signal", v)) => number_and_name(v).is_some(),
        Some(_) => true,
        None => t.starts_with("TIME "),
    }
}

/// Reads one segment; returns the lines it did not recognise (their
/// indices), which go on to the line-level recognisers.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut missed = Vec::new();
    let mut open: Option<CoreDump> = None;
    // Inside the `Message:` field: its indented lines are the message's.
    let mut in_message = false;
    for (i, line) in lines.iter().enumerate() {
        let text = line.text;
        if text.trim().is_empty() {
            continue;
        }
        if is_list_header(text) {
            continue;
        }
        if let Some(c) = list_row(line) {
            facts.line_times.extend(c.time.map(|t| (c.span, t)));
            facts.core_dumps.push(c);
            continue;
        }
        let indented = text.starts_with("  ") || text.starts_with('\t');
        let Some((key, value)) = field(text).filter(|_| !in_message || !message_body(text)) else {
            if in_message && indented {
                continue;
            }
            missed.push(i);
            continue;
        };
        in_message = false;
        if key == "PID" {
            let Some((pid, comm)) = number_and_name(value) else {
                missed.push(i);
                continue;
            };
            facts.core_dumps.extend(open.take());
            open = Some(CoreDump {
                pid,
                comm: (!comm.is_empty()).then(|| comm.to_owned()),
                signal: None,
                signal_name: None,
                time: None,
                unit: None,
                executable: None,
                command_line: None,
                span: line.span,
                signal_span: None,
                unit_span: None,
            });
            continue;
        }
        // A field before any `PID:` head is no core dump's.
        let Some(c) = open.as_mut() else {
            missed.push(i);
            continue;
        };
        match key {
            "Signal" => match number_and_name(value) {
                Some((n, name)) => {
                    c.signal = Some(n);
                    c.signal_name = (!name.is_empty()).then(|| name.to_owned());
                    c.signal_span = Some(line.span);
                }
                None => missed.push(i),
            },
            "Timestamp" => {
                if let Some((t, _)) = super::journal_time::split_full(value) {
                    c.time = Some(t);
                    facts.line_times.push((c.span, t));
                }
            }
            "Unit" => {
                c.unit = Some(value.to_owned());
                c.unit_span = Some(line.span);
            }
            "Executable" => c.executable = Some(value.to_owned()),
            "Command Line" => c.command_line = Some(value.to_owned()),
            "Message" => in_message = true,
            _ => {}
        }
    }
    facts.core_dumps.extend(open);
    missed
}

/// A line of the message's body that looks like a field (`Module
/// libfoo.so from rpm …` does not, but `Stack trace of thread 3219:` does).
fn message_body(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("Stack trace of thread") || t.starts_with("Module ") || t.starts_with('#')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> (Facts, Vec<usize>) {
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let missed = read(&lines, &mut facts);
        (facts, missed)
    }

    /// https://github.com/ollama/ollama/issues/5352 (the runner's abort,
    /// its last `Module` line left out).
    #[test]
    fn an_info_block_is_one_core_dump() {
        let (facts, missed) = run(concat!(
            "           PID: 3776 (ollama_llama_se)\n",
            "           UID: 61547 (ollama)\n",
            "           GID: 61547 (ollama)\n",
            "        Signal: 6 (ABRT)\n",
            "     Timestamp: Fri 2024-06-28 12:19:15 AEST (1min 3s ago)\n",
            "  Command Line: /tmp/ollama3483777596/runners/cuda_v12/ollama_llama_server --model /var/lib/ollama/models/blobs/sha256-e84ed7399c82fbf7dbd6cdef3f12d356c3cdb5512e5d8b2a9898080cbcdd72e5 --ctx-size 2048 --b>\n",
            "    Executable: /tmp/ollama3483777596/runners/cuda_v12/ollama_llama_server\n",
            " Control Group: /system.slice/ollama.service\n",
            "          Unit: ollama.service\n",
            "         Slice: system.slice\n",
            "       Boot ID: bba51a07162c412d9a05f2b6cb3cd45d\n",
            "    Machine ID: dcf2fcf728b7460d8f2ef435eaecf8e0\n",
            "      Hostname: nixos\n",
            "       Storage: /var/lib/systemd/coredump/core.ollama_llama_se.61547.bba51a07162c412d9a05f2b6cb3cd45d.3776.1719541155000000.zst (inaccessible)\n",
            "       Message: Process 3776 (ollama_llama_se) of user 61547 dumped core.\n",
            "                \n",
            "                Module /tmp/ollama3483777596/runners/cuda_v12/ollama_llama_server without build-id.\n",
        ));
        assert!(missed.is_empty(), "{missed:?}");
        let [c] = &facts.core_dumps[..] else {
            panic!("{:?}", facts.core_dumps)
        };
        assert_eq!(
            (c.pid, c.comm.as_deref(), c.signal, c.signal_name.as_deref()),
            (3776, Some("ollama_llama_se"), Some(6), Some("ABRT"))
        );
        assert_eq!(c.unit.as_deref(), Some("ollama.service"));
        assert_eq!(c.span.line, 1);
        assert_eq!(c.signal_span.map(|s| s.line), Some(4));
        assert!(c.time.is_some());
        assert!(
            c.executable
                .as_deref()
                .is_some_and(|e| e.ends_with("ollama_llama_server"))
        );
    }

    /// https://github.com/abrt/abrt/issues/1656 (a user unit, the stack
    /// trace under the message; cut after its first frame).
    #[test]
    fn the_message_body_and_newer_fields_are_read() {
        let (facts, missed) = run(concat!(
            "           PID: 3219 (will_segfault)\n",
            "        Signal: 11 (SEGV)\n",
            "          Unit: user@1000.service\n",
            "     User Unit: vte-spawn-5bdca802-2875-4464-9245-0266a414b601.scope\n",
            "  Size on Disk: 16.5K\n",
            "      build-id: 5aa9119f2f1080ede76b0b17fb0103a9b1393990\n",
            "       Message: Process 3219 (will_segfault) of user 1000 dumped core.\n",
            "                \n",
            "                Module libwillcrash.so from rpm will-crash-0.13.5-5.fc40.aarch64\n",
            "                Stack trace of thread 3219:\n",
            "                #0  0x0000aaaaca9d02dc crash.constprop.0 (will_segfault + 0x102dc)\n",
            "Failed to retrieve COREDUMP_EXE field: No such file or directory\n",
        ));
        assert_eq!(missed, [11]);
        assert_eq!(facts.core_dumps.len(), 1);
        assert_eq!(facts.core_dumps[0].signal, Some(11));
    }

    /// https://github.com/systemd/systemd/issues/4554 (two dumps of one
    /// PID, `[...]` the poster's).
    #[test]
    fn list_rows() {
        let (facts, missed) = run(concat!(
            "TIME                            PID   UID   GID SIG COREFILE EXE\n",
            "[...]\n",
            "Sun 2017-01-22 14:04:30 CET    1749  1001   100  11 present  /usr/bin/gnome-shell\n",
            "Wed 2017-01-25 00:50:15 CET    1749  1001   100  11 present  /usr/bin/gnome-shell\n",
        ));
        assert_eq!(missed, [1]);
        assert_eq!(facts.core_dumps.len(), 2);
        let c = &facts.core_dumps[0];
        assert_eq!((c.pid, c.signal), (1749, Some(11)));
        assert_eq!(c.executable.as_deref(), Some("/usr/bin/gnome-shell"));
        assert!(c.time.is_some());
        assert!(is_strong(
            "TIME                            PID   UID   GID SIG COREFILE EXE"
        ));
    }

    #[test]
    fn strong_lines_and_garbage() {
        assert!(is_strong("           PID: 32567 (Xorg)"));
        assert!(is_strong("        Signal: 6 (ABRT)"));
        assert!(is_strong(
            "       Message: Process 1077 (Compositor) of user 1000 dumped core."
        ));
        for no in [
            "PID: 1234",
            "Signal: received SIGTERM",
            "  PID: abc (x)",
            "Message: hello",
        ] {
            assert!(!is_strong(no), "{no}");
        }
        for garbage in [
            "PID: 99999999999999 (x)",
            "Signal:",
            ":::",
            "  PID: 1 (",
            "Unit: x",
        ] {
            let _ = run(garbage);
        }
    }
}
