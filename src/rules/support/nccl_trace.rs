//! NCCL's trace of a failure: after a `NCCL WARN` line, the same thread
//! prints each function the error code went back up through (`NCCL INFO
//! init.cc:1462 -> 1`). The last frame in `init.cc` is the step of the
//! communicator's initialisation that returned the code to its caller:
//! the line a reader quotes for "where NCCL's init failed".

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;

/// NCCL's own prefix, `host:pid:tid [cudaDev]`.
static PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[\s:>\]])(?P<thread>[A-Za-z0-9][0-9A-Za-z_.-]*:[0-9]+:[0-9]+) \[[0-9]+\]")
        .expect("nccl prefix")
});

/// A frame of the trace in NCCL's init (`init.cc:1462 -> 1`, under any
/// source path).
static INIT_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"NCCL INFO (?:[^\s:]*/)?init\.cc:[0-9]+ -> [0-9]+").expect("init frame")
});

/// The `host:pid:tid` of an NCCL line.
fn thread(text: &str) -> Option<&str> {
    PREFIX
        .captures(text)
        .and_then(|c| c.name("thread"))
        .map(|m| m.as_str())
}

/// The last `init.cc` frame of the trace under the WARN line `warn`: the
/// same thread's lines after it in the same input, up to its next WARN.
pub fn last_init_frame<'a>(incident: &'a Incident, warn: &Message) -> Option<&'a Message> {
    let me = thread(&warn.text)?;
    let start = incident
        .facts
        .messages
        .partition_point(|m| m.span <= warn.span);
    let mut last = None;
    for m in &incident.facts.messages[start..] {
        if m.span.source != warn.span.source {
            break;
        }
        if thread(&m.text) != Some(me) {
            continue;
        }
        if m.text.contains("NCCL WARN") {
            break;
        }
        if INIT_FRAME.is_match(&m.text) {
            last = Some(m);
        }
    }
    last
}

/// The part of the frame's line a reader quotes: `init.cc:1462 -> 1`.
pub fn frame_text(m: &Message) -> Option<&str> {
    INIT_FRAME
        .find(&m.text)
        .map(|f| f.as_str().trim_start_matches("NCCL INFO "))
        .map(|f| f.rsplit('/').next().unwrap_or(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVIDIA/nccl#1488 (node23, an H100 NVSwitch node) and fixtures of a
    /// TensorFlow build's NCCL (`external/nccl_archive/src/init.cc`): the
    /// thread and the frame as a reader quotes them.
    #[test]
    fn the_thread_and_the_init_frame_are_read() {
        assert_eq!(
            thread("node23:12098:12141 [2] NCCL INFO init.cc:1462 -> 1"),
            Some("node23:12098:12141")
        );
        let frame = |t: &str| {
            INIT_FRAME.find(t).map(|f| {
                f.as_str()
                    .trim_start_matches("NCCL INFO ")
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
        };
        assert_eq!(
            frame("node23:12098:12141 [2] NCCL INFO init.cc:1462 -> 1").as_deref(),
            Some("init.cc:1462 -> 1")
        );
        assert_eq!(
            frame("hai-a100-3:3778851:3779883 [4] NCCL INFO external/nccl_archive/src/init.cc:878 -> 2").as_deref(),
            Some("init.cc:878 -> 2")
        );
        assert_eq!(
            frame("node23:12098:12141 [2] NCCL INFO group.cc:75 -> 1 [Async thread]"),
            None
        );
    }
}
