//! Detection of `dmesg` output in each of its time formats, and of bare
//! kernel lines (`dmesg -t`, grep output). `journalctl -k` and kern.log are
//! journal-shaped and left to the journal sniffer.

use super::{Class, re};
use crate::ingest::Format;

// `[ 8712.345678] ` (or reltime's `[  +0.000012] `, `[Jun  1 12:00] `);
// printk prints six digits of fraction, some kernels and tools three. The
// `<4>` of `dmesg -r` and the `kern  :warn  : ` of `-x` are frames, peeled
// before detection (`ingest::frame`).
re!(
    UPTIME,
    r"^\[(?:\s*\+?[0-9]+\.(?:[0-9]{6}|[0-9]{3})(?:\s*<[\s0-9.]*>)?|[A-Z][a-z]{2} +[0-9]{1,2} [0-9][0-9]:[0-9][0-9])\] "
);
re!(
    CTIME,
    r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] [0-9]{4}\] "
);
// `dmesg --time-format iso`, also with `-x`'s `kern  :warn  : ` (what
// `dmesg --decode --time-format=iso` prints).
re!(
    ISO,
    r"^[0-9]{4}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9],[0-9]{6}[+-][0-9][0-9]:[0-9][0-9] "
);
// Also under a bare `kernel: ` (a syslog line whose time and host were cut
// off), with or without the uptime rsyslog keeps after it.
re!(
    BARE,
    r"^(?:kernel: +(?:\[\s*[0-9]+\.[0-9]+\] )?)?(?:NVRM: |.{1,15} invoked oom-killer: gfp_mask=|(?:Out of memory|Memory cgroup out of memory): Kill|oom-kill:constraint=|oom_reaper: reaped process )"
);

/// A `dmesg` line with its time in brackets (see `continues_as` in the
/// parent module).
pub(super) fn is_bracketed(line: &str) -> bool {
    plain_uptime(line.as_bytes()) || UPTIME.is_match(line) || CTIME.is_match(line)
}

/// `[ 8712.345678] `, read by position: the common form of [`UPTIME`]
/// (what `dmesg` prints), so that most kernel lines need no regex. Each run
/// of digits is counted eight bytes at a time ([`digit_run`]): every line of
/// a kernel log asks.
fn plain_uptime(bytes: &[u8]) -> bool {
    let Some((&b'[', bytes)) = bytes.split_first() else {
        return false;
    };
    let mut at = 0;
    while bytes.get(at) == Some(&b' ') {
        at += 1;
    }
    let whole = digit_run(bytes, at);
    if whole == 0 || bytes.get(at + whole) != Some(&b'.') {
        return false;
    }
    at += whole + 1;
    let fraction = digit_run(bytes, at);
    (fraction == 6 || fraction == 3) && bytes.get(at + fraction..at + fraction + 2) == Some(b"] ")
}

/// How many ASCII digits `bytes` holds in a row from `from`: eight bytes
/// tested at a time (`aggregate::digit_bytes`), the last few one by one.
fn digit_run(bytes: &[u8], from: usize) -> usize {
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let other = !crate::ingest::aggregate::digit_bytes(u64::from_le_bytes(word))
            & 0x8080_8080_8080_8080;
        if other != 0 {
            return at - from + (other.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at - from
        + bytes
            .get(at..)
            .unwrap_or_default()
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
}

pub(super) fn sniff(line: &str, _current: Option<Format>) -> Option<Class> {
    let first = line.as_bytes().first().copied().unwrap_or(0);
    if (first == b'[' && (UPTIME.is_match(line) || CTIME.is_match(line)))
        || (first.is_ascii_digit() && ISO.is_match(line))
    {
        return Some(Class::Strong(
            Format::Dmesg,
            "[uptime] / [ctime] / ISO kernel timestamp (dmesg)",
        ));
    }
    (holds_bare_word(line.as_bytes()) && BARE.is_match(line)).then_some(Class::Strong(
        Format::Dmesg,
        "NVRM or OOM-killer line without a timestamp (dmesg -t)",
    ))
}

/// Whether `bytes` holds one of the words each of [`BARE`]'s messages
/// holds (`NVRM: `, `oom`, `of memory`): every line of a segment without a
/// fast path asks, so each word is a SIMD substring search. An
/// Aho-Corasick automaton over the three cost more than the rest of the
/// segmenter together (issue 18's 2M distinct error lines): its rare-byte
/// prefilter stops at every `o` and `m` of an ordinary message.
fn holds_bare_word(bytes: &[u8]) -> bool {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;
    static NVRM: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("NVRM: "));
    static OOM: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("oom"));
    static OF_MEMORY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("of memory"));
    OOM.find(bytes).is_some() || OF_MEMORY.find(bytes).is_some() || NVRM.find(bytes).is_some()
}

#[cfg(test)]
mod fast_tests {
    use super::*;

    /// The positional test claims only what the regex does.
    #[test]
    fn plain_uptime_is_a_case_of_the_regex() {
        for line in [
            "[ 8712.345678] NVRM: Xid",
            "[    2.345678] usb 1-1: new",
            "[12.345] x",
            "[ 8712.34567] x",
            "[ 8712.3456789] x",
            "[.345678] x",
            "[ 8712.345678]x",
            "[ 8712.345678",
            "[",
            "[ ",
        ] {
            if plain_uptime(line.as_bytes()) {
                assert!(UPTIME.is_match(line), "{line}");
            }
        }
        assert!(plain_uptime(b"[ 8712.345678] NVRM: Xid"));
        assert!(!plain_uptime(b"[ 8712.3456789] x"));
    }

    /// The first [`plain_uptime`], each run of digits counted byte by
    /// byte: the oracle of the one that counts eight at a time.
    fn plain_uptime_by_bytes(bytes: &[u8]) -> bool {
        if bytes.first() != Some(&b'[') {
            return false;
        }
        let mut at = 1;
        while bytes.get(at) == Some(&b' ') {
            at += 1;
        }
        let digits = bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 || bytes.get(at + digits) != Some(&b'.') {
            return false;
        }
        at += digits + 1;
        let fraction = bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        (fraction == 6 || fraction == 3)
            && bytes.get(at + fraction..at + fraction + 2) == Some(b"] ")
    }

    /// The eight-at-a-time count of digits answers as the byte-by-byte one:
    /// on every line of the real incidents that starts with `[`, and on
    /// uptimes of every length with each of their bytes changed to a digit,
    /// a space, a `.`, a `]`, a letter or a byte past ASCII, or cut there.
    #[test]
    fn the_uptime_read_eight_bytes_at_a_time_is_the_byte_by_byte_one() {
        let real = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("fixtures/real");
        let mut lines: Vec<Vec<u8>> = Vec::new();
        for case in std::fs::read_dir(real).into_iter().flatten().flatten() {
            if let Ok(text) = std::fs::read_to_string(case.path().join("input.log")) {
                lines.extend(
                    text.lines()
                        .filter(|l| l.starts_with('['))
                        .map(|l| l.as_bytes().to_vec()),
                );
            }
        }
        let real = lines.len();
        assert!(real > 300, "{real}");
        for spaces in ["", " ", "    "] {
            for whole in ["1", "12345", "1234567", "12345678", "123456789012"] {
                for fraction in ["123", "123456", "1234567", "12", ""] {
                    let base = format!("[{spaces}{whole}.{fraction}] NVRM: Xid");
                    for at in 0..base.len() {
                        for b in [b'7', b' ', b'.', b']', b'a', 0xe9] {
                            let mut line = base.clone().into_bytes();
                            line[at] = b;
                            lines.push(line);
                        }
                        lines.push(base.as_bytes()[..at].to_vec());
                    }
                    lines.push(base.into_bytes());
                }
            }
        }
        let mut plain = 0;
        for line in &lines {
            assert_eq!(
                plain_uptime(line),
                plain_uptime_by_bytes(line),
                "{:?}",
                String::from_utf8_lossy(line)
            );
            plain += usize::from(plain_uptime(line));
        }
        assert!(plain > 100, "{plain} of {}", lines.len());
    }

    /// The word test lets through every line [`BARE`] claims, and stops
    /// an ordinary message.
    #[test]
    fn the_word_test_is_necessary_for_a_bare_kernel_line() {
        for line in [
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
            "kernel: NVRM: GPU at PCI:0000:3b:00: GPU-5b1e0c3a",
            "kernel: [ 8712.345678] NVRM: Xid (PCI:0000:3b:00): 48",
            "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0",
            "Out of memory: Killed process 4242 (python3) total-vm:123kB",
            "Memory cgroup out of memory: Killed process 4242 (python3)",
            "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0",
            "oom_reaper: reaped process 4242 (python3), now anon-rss:0kB",
        ] {
            assert!(BARE.is_match(line), "{line}");
            assert!(holds_bare_word(line.as_bytes()), "{line}");
        }
        for line in [
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "torch.OutOfMemoryError: CUDA out of memory.",
        ] {
            assert_eq!(
                holds_bare_word(line.as_bytes()),
                line.contains("of memory"),
                "{line}"
            );
            assert!(!BARE.is_match(line), "{line}");
        }
    }
}
