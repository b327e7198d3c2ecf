//! A Go program's goroutine dump among a unit's last lines: where it
//! crashed. The runtime prints the goroutine that was running first
//! (`goroutine 130 [running]:`, runtime/traceback.go), each frame as its
//! function's call and then, indented, `/path/file.go:LINE +0xPC`; the
//! first frame outside the runtime's own (`runtime.`, `panic(`) is the
//! program's code that panicked or faulted. A paste that lost the
//! `panic: …` line above the dump still has it.

use std::sync::LazyLock;

use regex::Regex;

use super::*;

/// The header of the goroutine that was running when the program died.
static RUNNING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^goroutine [0-9]+ \[running\]:[ \t]*$").expect("goroutine header regex")
});

/// A frame's place: an absolute path to a `.go` file and its line, after
/// the runtime's indentation (a tab, spaces, or syslog's `#011`).
static PLACE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[ \t]|#011)*(?P<place>/[^ \t]+\.go:[0-9]+)(?: \+0x[0-9a-f]+)?[ \t]*$")
        .expect("go place regex")
});

/// Where a unit's Go program crashed, as its dump says.
pub(super) struct GoCrash {
    /// `goroutine 130 [running]:`.
    pub header: Span,
    /// The first frame of the program's own code: its call and its place.
    pub call: Option<Span>,
    pub place: Span,
    /// `github.com/docker/docker/plugin/executor/containerd.(*Executor).Create`.
    pub function: String,
    /// `/go/src/github.com/docker/docker/plugin/executor/containerd/containerd.go:71`.
    pub at: String,
}

impl GoCrash {
    /// Cites the dump's header and the frame where it crashed.
    pub fn cite(&self, f: &mut Finding, unit: &str) {
        f.evidence(
            self.header,
            format!("{unit}'s program printed a Go goroutine dump: the goroutine that was running when it died"),
        );
        if let Some(call) = self.call {
            f.evidence(
                call,
                format!("the first frame of its own code: {}", self.function),
            );
        }
        f.evidence_marked(
            self.place,
            format!("where it crashed: {}", self.at),
            self.at.clone(),
        );
    }

    /// The crash in words, for the headline and the chain.
    pub fn said(&self) -> String {
        format!(
            "a Go goroutine dump: it crashed at {} in {}",
            self.at, self.function
        )
    }
}

/// The last goroutine dump the run's processes (`pids`) wrote before the
/// exit at `exit`, and its first frame outside Go's runtime.
pub(super) fn of(
    incident: &Incident,
    pids: &std::collections::BTreeSet<u32>,
    exit: Span,
) -> Option<GoCrash> {
    let lines: Vec<&crate::model::JournalEntry> = incident
        .facts
        .journal
        .iter()
        .filter(|e| {
            e.span.source == exit.source
                && e.span.line < exit.line
                && e.pid.is_some_and(|p| pids.contains(&p))
        })
        .collect();
    let start = lines.iter().rposition(|e| RUNNING.is_match(&e.message))?;
    let header = lines[start];
    let frames = &lines[start + 1..];
    let mut call: Option<&crate::model::JournalEntry> = None;
    for e in frames.iter().filter(|e| e.pid == header.pid) {
        if let Some(c) = PLACE.captures(&e.message) {
            let function = call.map(|c| function_of(&c.message)).unwrap_or_default();
            if function.starts_with("runtime.") || function.starts_with("panic(") {
                call = None;
                continue;
            }
            return Some(GoCrash {
                header: header.span,
                call: call.map(|c| c.span),
                place: e.span,
                function: if function.is_empty() {
                    "an unnamed function".to_owned()
                } else {
                    function
                },
                at: c["place"].to_owned(),
            });
        }
        if e.message.trim_start().starts_with("goroutine ") {
            break;
        }
        call = Some(e);
    }
    None
}

/// A frame's function without its arguments: `pkg.(*T).Method(0xc0…)` →
/// `pkg.(*T).Method`.
fn function_of(call: &str) -> String {
    let call = call.trim();
    let call = call.strip_prefix("created by ").unwrap_or(call);
    // The arguments open at the last `(` that is not a method's `(*T)`.
    match call.rfind('(') {
        Some(i) if !call[i..].starts_with("(*") => call[..i].to_owned(),
        _ => call.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frames_function_loses_its_arguments_not_its_receiver() {
        assert_eq!(
            function_of("github.com/docker/docker/plugin.(*Manager).enable(0xc00085c000, 0x1)"),
            "github.com/docker/docker/plugin.(*Manager).enable"
        );
        assert_eq!(
            function_of("main.lookupNamedContainer(0xc208048460, 0x0, 0x0)"),
            "main.lookupNamedContainer"
        );
        assert_eq!(
            function_of("runtime.panic(0x6c7940, 0x89ef53)"),
            "runtime.panic"
        );
    }
}
