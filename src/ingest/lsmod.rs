//! `lsmod` (and `cat /proc/modules` formatted the same way): one loaded
//! kernel module per row, `nvidia_uvm  1527808  4` or `nvidia  56717312
//! 188 nvidia_uvm,nvidia_modeset`, under an optional `Module  Size  Used by`
//! header. Each row becomes a [`KernelModule`]: which NVIDIA modules are
//! loaded and how many references hold them.

use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use crate::model::{Facts, KernelModule};

/// A row: a module name, its size, its use count, and the dependent
/// modules (comma-separated, maybe with a trailing comma) or `-`, maybe
/// followed by `[permanent]`.
pub(crate) static ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<name>[a-z][a-z0-9_]*)\s+(?P<size>[0-9]{3,12})\s+(?P<used>[0-9]{1,6})(?:\s+(?P<users>[a-z0-9_]+(?:,[a-z0-9_]+)*,?|-))?(?:\s+\[permanent\])?$",
    )
    .expect("lsmod row regex")
});

static HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^Module\s+Size\s+Used by$").expect("lsmod header regex"));

/// Whether `line` is an `lsmod` header or row.
pub(crate) fn is_lsmod_line(line: &str) -> bool {
    let t = line.trim();
    (t.starts_with("Module") && HEADER.is_match(t)) || (may_be_row(t) && ROW.is_match(t))
}

/// How every row [`ROW`] matches starts and ends (a module's name, then a
/// count, a user or `[permanent]`): the detector asks every line of a
/// segment without a fast path, and a traceback's lines fail this first.
pub(crate) fn may_be_row(t: &str) -> bool {
    t.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
        && super::line::second_word_starts_with_digit(t)
        && matches!(
            t.as_bytes().last(),
            Some(b'a'..=b'z' | b'0'..=b'9' | b'_' | b',' | b'-' | b']')
        )
}

/// Parses one segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut unrecognized = 0;
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() || HEADER.is_match(text) {
            continue;
        }
        let Some(c) = ROW.captures(text) else {
            unrecognized += 1;
            continue;
        };
        let (Ok(size), Ok(used)) = (c["size"].parse(), c["used"].parse()) else {
            unrecognized += 1;
            continue;
        };
        let users = c
            .name("users")
            .map(|u| {
                u.as_str()
                    .split(',')
                    .filter(|s| !s.is_empty() && *s != "-")
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        facts.kernel_modules.push(KernelModule {
            name: c["name"].to_owned(),
            size,
            used,
            users,
            span: line.span,
        });
    }
    unrecognized
}

#[cfg(test)]
mod tests {
    use super::*;

    /// https://github.com/akash-network/support/issues/209 (`lsmod |grep
    /// nvidia`, no header).
    #[test]
    fn rows_with_and_without_users() {
        let c = ROW
            .captures("nvidia              56717312  188 nvidia_uvm,nvidia_modeset")
            .unwrap();
        assert_eq!(&c["name"], "nvidia");
        assert_eq!(&c["used"], "188");
        assert_eq!(&c["users"], "nvidia_uvm,nvidia_modeset");
        assert!(is_lsmod_line("nvidia_uvm           1527808  4"));
        assert!(is_lsmod_line("Module                  Size  Used by"));
        assert!(is_lsmod_line("nvidia_drm             77824  0"));
        for no in [
            "Process 101553 has 1.19 GiB memory in use.",
            "GPU 0 12345 3",
            "nvidia-smi 535 1",
            "total 12 3 extra words here",
        ] {
            assert!(!is_lsmod_line(no), "{no}");
        }
    }
}
