//! What an interactive shell shows between a paste's outputs by itself,
//! read so that it is not counted as output nobody understands; it makes
//! no fact:
//! - a background job's number and PID, `[1] 3044530`: bash (`jobs.c`,
//!   `describe_pid`: `[%d] %d`) and zsh (`jobs.c`, `printjob`) print it
//!   when `&` starts a job (zsh lists every PID of a pipeline);
//! - `date`'s own line: coreutils' default format, `%a %b %e %H:%M:%S %Z
//!   %Y` (`Thu Apr 10 12:17:06 CEST 2025`), and its locales' orders
//!   (`Thu Apr 10 12:17:06 AM CEST 2025`, `Tue 04 Mar 2025 10:11:12 AM
//!   UTC`), `asctime`'s form without a zone (`Fri Mar  3 11:52:29 2017`);
//! - a program's answer to `--version` or a version query a person typed,
//!   a name and a version alone: `Python 3.7.3` (CPython's `--version`;
//!   Anaconda's adds its name, `Python 3.6.7 :: Anaconda, Inc.`),
//!   `Ubuntu 16.04.3`, `fairseq '0.9.0'` and `'1.6.0'` (a Python REPL's
//!   repr of `__version__`), `v0.6.5`;
//! - a password prompt left on its line: `Password:` (sudo's prompt on
//!   macOS, PAM's password prompt) and `[sudo] password for alice:`
//!   (sudo's `passprompt` on Linux, `[sudo] password for %p: `).
//!
//! And the few words of a common command's answer that a paste shows
//! under its prompt, read by their own grammar:
//! - `uname -a`: `Linux host 3.13.0-116-generic #163-Ubuntu SMP Fri Mar 31
//!   14:13:22 UTC 2017 x86_64 x86_64 x86_64 GNU/Linux` (coreutils
//!   src/uname.c: the kernel's name, the node, the release, the version
//!   (`#N…`), the machine and the rest, the operating system last);
//! - a path alone, as `find`, `which`, `ls -d` or `readlink -f` print one
//!   a line: absolute, two parts at least, no space;
//! - a container's full ID alone, 64 hexadecimal digits, as `docker run -d`
//!   and `docker create` print it (moby/moby's `stringid`);
//! - `watch`'s head over each refresh, `Every 2.0s: nvidia-smi   host: Wed
//!   Aug  6 22:29:18 2025` (procps-ng src/watch.c: `"Every %.1fs: "`, the
//!   command, the host and the time at the right edge);
//! - docker's hint under a usage error, `See 'docker run --help'.`
//!   (docker/cli cli/required.go and cli/cobra.go: `"See '%s --help'."`).

/// Whether `text` is a line the shell printed by itself, or a common
/// command's short answer.
pub(super) fn is_shell_note(text: &str) -> bool {
    is_job_started(text)
        || is_date_output(text)
        || is_version_answer(text)
        || is_password_prompt(text)
        || is_uname_all(text)
        || is_path_alone(text)
        || is_container_id(text)
        || is_help_hint(text)
        || is_watch_head(text)
}

/// `Every 2.0s: nvidia-smi` and what `watch` puts at the right of it.
fn is_watch_head(text: &str) -> bool {
    text.strip_prefix("Every ")
        .and_then(|rest| rest.split_once("s: "))
        .is_some_and(|(interval, command)| {
            !interval.is_empty()
                && interval.bytes().all(|b| b.is_ascii_digit() || b == b'.')
                && command.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '.' || c == '/')
        })
}

/// `Linux host 5.15.0-91-generic #101-Ubuntu SMP … x86_64 GNU/Linux`: the
/// kernel's name, a node, a release that starts with a digit, a version
/// word that starts with `#`, and the operating system last.
fn is_uname_all(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    matches!(words.as_slice(), ["Linux", _node, release, version, .., os]
        if release.starts_with(|c: char| c.is_ascii_digit())
            && release.contains('.')
            && version.starts_with('#')
            && (*os == "GNU/Linux" || *os == "Linux"))
}

/// `/lib/modules/3.13.0-88-generic/kernel/drivers/video/nvidia.ko`.
fn is_path_alone(text: &str) -> bool {
    let t = text.trim();
    t.len() > 1
        && t.starts_with('/')
        && !t.contains(char::is_whitespace)
        && t[1..].trim_end_matches('/').contains('/')
        && t.bytes().all(|b| b.is_ascii_graphic())
        && !t.contains(':')
}

/// `d51083f64d230fe8d32d6083c20cfee4438b5634be4cdd9e59f0b5e456dc9098`.
fn is_container_id(text: &str) -> bool {
    let t = text.trim();
    t.len() == 64
        && t.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `See 'docker run --help'.`
fn is_help_hint(text: &str) -> bool {
    text.trim()
        .strip_prefix("See '")
        .and_then(|rest| rest.strip_suffix(" --help'."))
        .is_some_and(|command| {
            command.starts_with(|c: char| c.is_ascii_lowercase())
                && command
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b' ' | b'-' | b'_'))
        })
}

/// `Password:`, `[sudo] password for alice:`: nothing else on the line.
fn is_password_prompt(text: &str) -> bool {
    let t = text.trim();
    t == "Password:"
        || t.strip_prefix("[sudo] password for ")
            .and_then(|user| user.strip_suffix(':'))
            .is_some_and(|user| !user.is_empty() && !user.contains(char::is_whitespace))
}

/// At most two words of a name, then one version (`1.6`, `3.7.3`,
/// `2.1.0+cu118`, `v0.6.5`, maybe quoted): nothing else on the line.
fn is_version_answer(text: &str) -> bool {
    // Anaconda's (and Intel's) Python names its distributor after the
    // version (`Python 3.6.7 :: Anaconda, Inc.`, `:: Continuum Analytics,
    // Inc.`, `:: Anaconda custom (64-bit)`).
    let text = match text.split_once(" :: ") {
        Some((answer, vendor))
            if answer.starts_with("Python ")
                && ["Anaconda", "Continuum Analytics", "Intel Corporation"]
                    .iter()
                    .any(|v| vendor.starts_with(v)) =>
        {
            answer
        }
        _ => text,
    };
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some((version, name)) = words.split_last() else {
        return false;
    };
    let name_ok = name.len() <= 2
        && name.iter().all(|w| {
            w.starts_with(|c: char| c.is_ascii_alphabetic())
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
        });
    let unquoted = version.trim_matches(|c| c == '\'' || c == '"');
    let v = unquoted.strip_prefix('v').unwrap_or(unquoted);
    // A version alone is one only when quoted or marked (`'1.6.0'`,
    // `v0.6.5`): a bare `10.0.0.1` may be an address.
    if name.is_empty() && v.len() == version.len() {
        return false;
    }
    let (numbers, _local) = v.split_once('+').unwrap_or((v, ""));
    let parts: Vec<&str> = numbers.split('.').collect();
    let numeric = (2..=4).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()));
    name_ok && numeric && text.len() <= 80
}

fn digits(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_digit())
}

/// `[1] 3044530`, `[2] 811 812`.
fn is_job_started(text: &str) -> bool {
    let Some((job, pids)) = text
        .trim()
        .strip_prefix('[')
        .and_then(|r| r.split_once("] "))
    else {
        return false;
    };
    digits(job, 3) && !pids.is_empty() && pids.split(' ').all(|pid| digits(pid, 10))
}

const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A weekday first, then exactly one month name, day, `HH:MM:SS` and
/// four-digit year in any order, with at most an AM/PM and a zone
/// (`CEST`, `UTC`, `+0200`) beside them: nothing else.
fn is_date_output(text: &str) -> bool {
    let mut words = text.split_whitespace();
    let Some(first) = words.next() else {
        return false;
    };
    if !WEEKDAYS.contains(&first.trim_end_matches(',')) {
        return false;
    }
    let (mut month, mut day, mut time, mut year, mut extra) = (0, 0, 0, 0, 0);
    for word in words {
        let word = word.trim_end_matches(',');
        if MONTHS.contains(&word) {
            month += 1;
        } else if digits(word, 2) && (1..=31).contains(&word.parse::<u8>().unwrap_or(0)) {
            day += 1;
        } else if digits(word, 4) && word.len() == 4 {
            year += 1;
        } else if is_clock(word) {
            time += 1;
        } else if matches!(word, "AM" | "PM") || is_zone(word) {
            extra += 1;
        } else {
            return false;
        }
    }
    (month, day, time, year) == (1, 1, 1, 1) && extra <= 2
}

/// `12:17:06`.
fn is_clock(word: &str) -> bool {
    let parts: Vec<&str> = word.split(':').collect();
    parts.len() == 3 && parts.iter().all(|p| p.len() == 2 && digits(p, 2))
}

/// `CEST`, `UTC`, `+0200`, `-05`.
fn is_zone(word: &str) -> bool {
    let letters = (2..=5).contains(&word.len()) && word.bytes().all(|b| b.is_ascii_uppercase());
    let offset = word
        .strip_prefix(['+', '-'])
        .is_some_and(|n| digits(n, 4) && (n.len() == 2 || n.len() == 4));
    letters || offset
}

#[cfg(test)]
mod tests {
    use super::is_shell_note;

    #[test]
    fn job_numbers_and_date_lines_are_the_shells() {
        for yes in [
            // fixtures/real/783 (ollama/ollama#7606).
            "[1] 3044530",
            "Thu Apr 10 12:17:06 AM CEST 2025",
            // The same `date` in coreutils' C locale, en_GB's order, and
            // asctime's form (nvidia-smi's header, fixtures/real 726).
            "Thu Apr 10 00:17:06 CEST 2025",
            "Tue 04 Mar 2025 10:11:12 AM UTC",
            "Fri Mar  3 11:52:29 2017",
            "[2] 811 812",
            // fixtures/real/792 (facebookresearch/fairseq).
            "Python 3.7.3",
            "'1.6.0'",
            "fairseq '0.9.0'",
            "Ubuntu 16.04.3",
            "torch 2.1.0+cu118",
            // batch P 1053 (pytorch/pytorch#15638): Anaconda's `--version`.
            "Python 3.6.7 :: Anaconda, Inc.",
            // batch I 807 (ollama/ollama, macOS `sudo osascript …`).
            "Password:",
            "[sudo] password for alice:",
            // batch R 1125 (NVIDIA/nvidia-docker#365): `uname -a` and
            // `find /lib/modules/ -name "*nvidia*"`.
            "Linux <hostname> 3.13.0-116-generic #163-Ubuntu SMP Fri Mar 31 14:13:22 UTC 2017 x86_64 x86_64 x86_64 GNU/Linux",
            "/lib/modules/3.13.0-88-generic/kernel/drivers/video/nvidia.ko",
            "/lib/modules/3.13.0-116-generic/kernel/drivers/video/nvidia",
            // batch R 1107 (docker/docs#13140): `docker run -d`'s ID, and
            // docker's hint under an error.
            "d51083f64d230fe8d32d6083c20cfee4438b5634be4cdd9e59f0b5e456dc9098",
            "See 'docker run --help'.",
            // batch R 1117 (nv-legate/cupynumeric#1222).
            "Every 2.0s: nvidia-smi                                                                                                       50:00c2f6697: Wed Aug  6 22:29:18 2025",
        ] {
            assert!(is_shell_note(yes), "{yes}");
        }
        for no in [
            "[1]+  Killed                  python3 server.py",
            "[0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
            "[1] 3044530 extra",
            "Thu Apr 10 12:17:06 2025 nvidia-smi",
            "Thu Apr 10 12:17:06 AM CEST",
            "Mon Tue Wed",
            "[rank0]: 12",
            "Error: exit status 2 1.0",
            "GPU 0: 12.5",
            "10.0.0.1",
            "1.6.0",
            "CUDA Version 12.2 is too old",
            "Password: hunter2",
            "[sudo] password for the node is wrong:",
            "Python 3.6.7 :: and then it hung",
            "numpy 1.2.3 :: Anaconda, Inc.",
            "Linux is great and 5.15 works #1 GNU/Linux? no",
            "/",
            "/dev/nvidia0: No such file or directory",
            "/usr/bin/python3 server.py",
            "d51083f64d230fe8d32d6083c20cfee4438b5634be4cdd9e59f0b5e456dc909",
            "See 'docker run --help' for more.",
            "Every time it runs: the GPU hangs",
        ] {
            assert!(!is_shell_note(no), "{no}");
        }
    }
}
