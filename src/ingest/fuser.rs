//! `fuser -v FILE…` (psmisc): who has a file open, one row per process
//! under a `USER PID ACCESS COMMAND` header, the file's name on its first
//! row only (alone on a line when longer than the column):
//!
//! ```text
//!                      USER        PID ACCESS COMMAND
//! /dev/nvidia0:        ubuntu     4411 F...m python
//!                      ubuntu     4412 F...m python
//! ```
//!
//! A row on a device node (`/dev/nvidia0`, `/dev/nvidiactl`, `/dev/kfd`)
//! is a [`DeviceHolder`]: the process has the driver open, on that GPU for
//! `/dev/nvidiaN`. Rows say what they are without their header (the
//! access letters), so a row pasted alone is read too.

use std::sync::LazyLock;

use regex::Regex;

use crate::model::{DeviceHolder, Facts};
use crate::source::Span;

/// psmisc src/fuser.c print_matches(): the header, `%*s USER        PID
/// ACCESS COMMAND` (a name field of 20 blanks before it).
static HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^USER\s+PID\s+ACCESS\s+COMMAND$").expect("fuser header regex"));

/// A row: the file (first row of a file only), the user, the PID, the
/// five access letters (`c` cwd, `e` executable, `f`/`F` open / open for
/// writing, `r` root, `m` mapped, `.` where not), the command.
static ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:(?P<file>\S+?):\s+)?(?P<user>[A-Za-z_][0-9A-Za-z_.-]*)\s+(?P<pid>[0-9]+)\s+(?P<access>[.cefFrm]{5})\s+(?P<cmd>\S.*)$",
    )
    .expect("fuser row regex")
});

/// `/dev/nvidia0`: the GPU a device node is.
static GPU_NODE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^/dev/nvidia(?P<gpu>[0-9]+)$").expect("gpu node regex"));

/// The one device node a typed `fuser` command names (`fuser -v
/// /dev/nvidia0 2>&1 | grep -E "1816382|1816505"`): a filter may cut the
/// row that names the file, so its rows take it. None for a glob or
/// several files.
pub(crate) fn one_node(command: &str) -> Option<String> {
    let words: Vec<&str> = command
        .split_whitespace()
        .take_while(|w| !matches!(*w, "|" | ";" | "&&" | "||"))
        .collect();
    let at = words
        .iter()
        .position(|w| w.rsplit('/').next() == Some("fuser"))?;
    let files: Vec<&str> = words[at + 1..]
        .iter()
        .copied()
        .filter(|w| !w.starts_with('-') && !w.contains('>'))
        .collect();
    match files.as_slice() {
        [one] if one.starts_with("/dev/") && !one.contains(['*', '?', '[']) => {
            Some((*one).to_owned())
        }
        _ => None,
    }
}

/// Whether trimmed `t` is fuser's header or one of its rows; a row on a
/// device node is recorded in `facts` (a row without its file takes the
/// file of the row just above it, else `typed`: the one node the prompt's
/// `fuser` names).
pub(crate) fn line(t: &str, span: Span, facts: &mut Facts, typed: Option<&str>) -> bool {
    if t.starts_with("USER") {
        return HEADER.is_match(t);
    }
    // Access letters always hold dots: `F...m`, `..c..`.
    if memchr::memmem::find(t.as_bytes(), b"..").is_none() {
        return false;
    }
    let Some(c) = ROW.captures(t) else {
        return false;
    };
    let file = match c.name("file") {
        Some(f) => f.as_str().to_owned(),
        None => match facts.device_holders.last() {
            Some(h) if h.span.source == span.source && h.span.line + 1 == span.line => {
                h.file.clone()
            }
            _ => match typed {
                Some(f) => f.to_owned(),
                None => return true,
            },
        },
    };
    let Ok(pid) = c["pid"].parse::<u32>() else {
        return true;
    };
    if file.starts_with("/dev/") {
        let gpu = GPU_NODE.captures(&file).and_then(|g| g["gpu"].parse().ok());
        facts.device_holders.push(DeviceHolder {
            file,
            gpu,
            user: c["user"].to_owned(),
            pid,
            access: c["access"].to_owned(),
            command: c["cmd"].trim().to_owned(),
            span,
        });
    }
    true
}

#[cfg(test)]
mod tests {
    use super::line;
    use crate::model::Facts;
    use crate::source::{SourceId, Span};

    fn read(text: &str) -> (Facts, Vec<bool>) {
        let mut facts = Facts::default();
        let read = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                let span = Span {
                    source: SourceId(0),
                    line: i as u32 + 1,
                };
                line(l.trim(), span, &mut facts, None)
            })
            .collect();
        (facts, read)
    }

    /// A typed `fuser` over one node, its rows filtered by `grep` (the
    /// file's row cut): the command names the file. A glob names none.
    #[test]
    fn a_filtered_listing_takes_the_file_its_command_names() {
        assert_eq!(
            super::one_node("fuser -v /dev/nvidia0 2>&1 | grep -E \"1816382|1816505\"").as_deref(),
            Some("/dev/nvidia0")
        );
        assert_eq!(super::one_node("sudo fuser -v /dev/nvidia*"), None);
        assert_eq!(super::one_node("fuser -v /dev/nvidia0 /dev/nvidia1"), None);
        let mut facts = Facts::default();
        let span = Span {
            source: SourceId(0),
            line: 2,
        };
        assert!(line(
            "alice  4412 F...m python",
            span,
            &mut facts,
            Some("/dev/nvidia0")
        ));
        assert_eq!(facts.device_holders[0].gpu, Some(0));
    }

    /// dmlc/gluon-nlp#338: `sudo fuser -v /dev/nvidia*` on a p3.2xlarge,
    /// a dangling notebook kernel (4411) on GPU 0 and the driver's nodes.
    #[test]
    fn reads_the_holders_of_each_device_node() {
        let text = "                     USER        PID ACCESS COMMAND
/dev/nvidia0:        ubuntu     4411 F...m python
/dev/nvidiactl:      ubuntu     4411 F...m python
/dev/nvidia-uvm:     ubuntu     4411 F.... python
";
        let (facts, read) = read(text);
        assert_eq!(read, [true, true, true, true]);
        let h = &facts.device_holders;
        assert_eq!(h.len(), 3);
        assert_eq!(
            (h[0].gpu, h[0].pid, h[0].command.as_str()),
            (Some(0), 4411, "python")
        );
        assert_eq!((h[1].file.as_str(), h[1].gpu), ("/dev/nvidiactl", None));
        assert_eq!(h[2].access, "F....");
    }

    /// A second process on the same file prints no file name (a public
    /// shell notes page: `fuser -v /path/to/cron.lock`): both rows are
    /// read; a file that is no device node is not a holder of a GPU.
    #[test]
    fn rows_of_another_file_are_read_and_not_recorded() {
        let text = "cron.lock:           root       7836 f.... flock
                     root       7837 f.... php
";
        let (facts, read) = read(text);
        assert_eq!(read, [true, true]);
        assert!(facts.device_holders.is_empty());
    }

    #[test]
    fn other_lines_are_not_rows() {
        let (facts, read) =
            read("tcp 0 0 0.0.0.0:80 0.0.0.0:* LISTEN 737/nginx\nloading... done\n");
        assert_eq!(read, [false, false]);
        assert!(facts.device_holders.is_empty());
    }
}
