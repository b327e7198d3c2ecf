//! A server's main thread parked in a lock wait, by macOS `sample`'s call
//! graph (`Facts::call_graph`): in every sample of the main thread, its
//! stack runs through the program's serve routine (`server.serve`) and
//! ends in a lock or condition wait (`__ulock_wait2`, `__psynch_cvwait`),
//! and no thread of the sample sits where a listening server idles
//! (`kevent`, `accept`, `select`, `poll`). The server is stuck on its way
//! up, before its listener: a wait nobody signals (batch S's 1195,
//! https://github.com/ddalcu/mlx-serve/issues/186). A main thread that
//! waits while another thread accepts connections is a server at work; an
//! idle server's main thread in `kevent` or `accept` is no finding.

use super::META;
use crate::correlate::Incident;
use crate::model::CallGraphLine;
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};

/// Where a thread waits for a lock, a condition or another thread.
const LOCK_WAITS: &[&str] = &[
    "__ulock_wait",
    "__ulock_wait2",
    "__psynch_cvwait",
    "__psynch_mutexwait",
    "__psynch_rw_rdlock",
    "__psynch_rw_wrlock",
    "semaphore_wait_trap",
    "__semwait_signal",
    "_pthread_join",
];

/// Where a listening server's threads idle: waiting for a connection or
/// an event on its sockets.
const LISTENING: &[&str] = &[
    "kevent",
    "kevent64",
    "kevent_id",
    "__accept",
    "accept",
    "__select",
    "select",
    "poll",
    "__recvfrom",
    "recvfrom",
];

/// A routine of a program's serving path, by its name.
fn serves(symbol: &str) -> bool {
    let s = symbol.to_ascii_lowercase();
    ["serve", "server", "listen", "http"]
        .iter()
        .any(|w| s.contains(w))
}

/// One thread of the graph: its head and its frames, in order.
struct Thread<'a> {
    head: &'a CallGraphLine,
    frames: Vec<&'a CallGraphLine>,
}

fn threads(incident: &Incident) -> Vec<Thread<'_>> {
    let mut out: Vec<Thread<'_>> = Vec::new();
    for line in &incident.facts.call_graph {
        if line.thread {
            out.push(Thread {
                head: line,
                frames: Vec::new(),
            });
        } else if let Some(t) = out
            .last_mut()
            .filter(|t| t.head.span.source == line.span.source)
        {
            t.frames.push(line);
        }
    }
    out
}

/// The main thread's stack in all its samples, and the findings it makes.
pub(super) fn sampled(incident: &Incident) -> Option<Finding> {
    let threads = threads(incident);
    let main = threads
        .iter()
        .find(|t| t.head.text.contains("com.apple.main-thread"))
        .or_else(|| threads.first())?;
    let total = main.head.samples;
    // The frames every sample passed through, from the outermost in.
    let mut path: Vec<&CallGraphLine> = Vec::new();
    for f in &main.frames {
        if f.samples != total {
            continue;
        }
        if path.last().is_none_or(|p| f.depth > p.depth) {
            path.push(f);
        }
    }
    let leaf = *path.last()?;
    if !LOCK_WAITS.contains(&leaf.text.as_str()) {
        return None;
    }
    let serve = *path[..path.len() - 1]
        .iter()
        .rev()
        .find(|f| serves(&f.text))?;
    let listening = threads
        .iter()
        .flat_map(|t| &t.frames)
        .any(|f| LISTENING.contains(&f.text.as_str()));
    if listening {
        return None;
    }
    Some(finding(main, serve, leaf, total))
}

fn finding(main: &Thread<'_>, serve: &CallGraphLine, leaf: &CallGraphLine, total: u64) -> Finding {
    let program = serve.image.as_deref().unwrap_or("the program");
    let (routine, wait) = (serve.text.as_str(), leaf.text.as_str());
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.evidence(
        main.head.span,
        format!("the main thread, sampled {total} times"),
    );
    f.evidence(
        serve.span,
        format!("in every sample it is inside {routine} ({program}): the server's serving path"),
    );
    f.evidence(
        leaf.span,
        format!("and waits in {wait}: a lock or condition wait, the same in all {total} samples"),
    );
    f.condition(
        format!("the main thread sits in {wait} under {routine} in all {total} samples"),
        true,
    );
    f.condition(
        "no thread of the sample waits on a socket (kevent, accept, select, poll): nothing listens",
        true,
    );
    f.condition(
        "a second sample later shows the same stack (missing)",
        false,
    );
    f.title = format!(
        "{program}'s main thread is parked in {wait} under {routine}: the server hangs at start-up"
    );
    f.headline = format!(
        "{program} is stuck: in all {total} samples its main thread waits in {wait} (a lock or condition nobody signals) inside {routine}, and no thread waits for connections, so the server never opened its listener."
    );
    f.chain.push(format!(
        "{program} does not answer: no thread of it waits for connections"
    ));
    f.chain.push(format!(
        "its main thread waits in {wait} inside {routine} in every sample"
    ));
    f.explanation = format!(
        "macOS `sample` records where each thread is, many times a second. A thread that is in the same frame in every sample is not making progress; {wait} is a wait for a lock, a condition variable or another thread. A server whose main thread blocks there inside {routine} before any thread accepts connections is a start-up deadlock or a wait on work that never finishes (a model's preparation, a worker that died), not a slow load (a load would show the thread computing)."
    );
    f.actions.push(Action::advice(
        "sample the process again a while later: the same stack confirms no progress",
        Some("sample PID 5 -mayDie"),
    ));
    f.actions.push(Action::advice(
        "check that nothing listens yet",
        Some("lsof -nP -a -p PID -iTCP -sTCP:LISTEN"),
    ));
    f.actions.push(Action::advice(
        format!("report the hang to {program}'s maintainers with both samples and the last log lines, and try a newer release; a start-up that needs a model's preparation step may work without it (another model, another path)"),
        None,
    ));
    f.confidence = confidence(&f, 0.5, 0.7);
    f
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// Batch S's 1195 (mlx-serve's `sample`, verbatim): the main thread in
    /// `__ulock_wait2` under `server.serve` in all 1740 samples.
    const PARKED: &str = "\
Call graph:
    1740 Thread_96991399   DispatchQueue_1: com.apple.main-thread  (serial)
    + 1740 start  (in dyld) + 6992  [0x183553e00]
    +   1740 main  (in mlx-serve) + 844  [0x10428c7ac]
    +     1740 main.main  (in mlx-serve) + 46492  [0x1042872ac]
    +       1740 server.serve  (in mlx-serve) + 2096  [0x1041ae9e4]
    +         1740 __ulock_wait2  (in libsystem_kernel.dylib) + 8  [0x1838dbc98]
    1740 Thread_96991400
    + 1740 start_wqthread  (in libsystem_pthread.dylib) + 8  [0x18390cc10]
";

    #[test]
    fn a_main_thread_parked_in_its_serve_routine() {
        let f = findings_of(super::META.id, PARKED);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].title.contains("__ulock_wait2"), "{}", f[0].title);
        assert!(f[0].title.contains("server.serve"), "{}", f[0].title);
    }

    /// The same server idle and listening (its main thread in `kevent`),
    /// or waiting while another thread accepts connections: no finding.
    /// The lines are the real ones with the leaf or a thread changed
    /// (assembled, not copied).
    #[test]
    fn an_idle_or_listening_server_is_no_finding() {
        let idle = PARKED.replace(
            "__ulock_wait2  (in libsystem_kernel.dylib) + 8",
            "kevent  (in libsystem_kernel.dylib) + 8",
        );
        assert!(findings_of(super::META.id, &idle).is_empty());
        let accepting = PARKED.replace(
            "    + 1740 start_wqthread  (in libsystem_pthread.dylib) + 8  [0x18390cc10]",
            "    + 1740 __accept  (in libsystem_kernel.dylib) + 8  [0x18390cc10]",
        );
        assert!(findings_of(super::META.id, &accepting).is_empty());
    }
}
