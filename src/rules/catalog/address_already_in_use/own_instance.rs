//! A failed bind on the server's own port with no other program shown
//! holding it: the holder is most likely an instance of the same server.
//! Two readings, by what the paste shows before the failed bind, in the same
//! input:
//! - *a stop that did not take*: the server's unit whose `ExecStop=`
//!   exited with success right before the `ExecStart=` whose bind failed
//!   (`restarted.rs`), the server's own closing or restarting
//!   lines (gradio's `Closing server running on port: 3000`, a web UI's
//!   `Restarting UI...`, another gunicorn master's `Handling signal: term`),
//!   or its app refusing to quit (osascript's `Ollama
//!   got an error: User canceled. (-128)`), or the server serving that port
//!   earlier in the same log (uvicorn's `Uvicorn running on
//!   http://0.0.0.0:8000`, llama-server's `server is listening on`): the
//!   holder is its own earlier instance, a stale serving instance;
//! - *an instance running*: the port is a serving program's default and
//!   the paste shows that program running beside the failed bind: its unit
//!   `active` (a `systemctl status` whose name or processes are the
//!   program's), a process of it in a `ps` listing, or Ollama's desktop app
//!   starting its own server (`started ollama server with pid N`): a second
//!   copy of the same server, a stale serving instance;
//! - *published before*: an earlier detached `docker run` of the paste
//!   publishing the same host port (`published.rs`), its container running;
//! - *still answering*: a request answered after the failed bind, in the
//!   same log (an access line, `127.0.0.1 - - […] "POST /json/status
//!   HTTP/1.1" 200 -`): a server of this log kept the port and serves, the
//!   program's earlier instance (an in-place restart that never stopped
//!   it), a stale serving instance, whether or not the port is known;
//! - *the port alone*: the port is a serving program's default (the
//!   programs' table, `correlate/serving/programs.rs`): the finding stays a
//!   port in use, and names that program as the likely holder and how it is
//!   stopped.
//!
//! A holder a socket listing or a command line names is not this module's:
//! `same_server.rs` reads a holder of the same stack, and a holder of
//! another program stays a port in use.

use super::super::stale_serving_process::titles::{DEFAULT_PORTS, classify, defaults_on};
use crate::correlate::Incident;
use crate::model::{Listener, Message};
use crate::rules::{Action, Category, Finding};
use crate::source::Span;

/// A row (catalogs/stacks-bind.toml) that shows a server asked to stop or
/// restart.
struct Stop {
    id: &'static str,
    /// What its line says of the earlier instance (the evidence's note).
    note: &'static str,
    /// The headline's clause: what the paste shows.
    shows: &'static str,
    /// A close or a restart is the cause only when the new start follows
    /// it; an app that refuses to quit shows its server running whenever
    /// it is asked.
    must_precede: bool,
    /// The program whose stop it is (the programs' table's `stack`), when
    /// the row is one program's; else the app its line names.
    stack: Option<&'static str>,
    /// How that program's earlier instance is stopped, when the programs'
    /// table does not say (it is no serving program with a default port).
    how: Option<&'static str>,
    /// The line names the process that stops (`[<pid>]`): a stop of the
    /// master whose own bind failed is that master giving up, not an
    /// earlier instance, and does not count.
    other_process: bool,
}

const STOPS: &[Stop] = &[
    Stop {
        id: "stacks-bind.gunicorn-master-stopping",
        note: "an earlier gunicorn master was told to stop: it holds its socket until it and its workers have exited",
        shows: "the paste shows an earlier gunicorn master of it handling a stop signal before the new master's start, a restart that did not wait for the old master and its workers to let the port go",
        must_precede: true,
        stack: None,
        how: Some(
            "`kill -TERM` the old master (`pgrep -af gunicorn`) and wait for its workers to exit; under supervisor, `stopasgroup=true` and a `stopwaitsecs` above gunicorn's `graceful_timeout`",
        ),
        other_process: true,
    },
    Stop {
        id: "stacks-bind.gradio-closing-server",
        note: "the server closed its port to restart",
        shows: "the paste shows it closing its server for a restart, and the relaunch came before the old server let the port go",
        must_precede: true,
        stack: Some("Gradio"),
        how: None,
        other_process: false,
    },
    Stop {
        id: "stacks-bind.webui-restarting-ui",
        note: "the web UI restarted itself in the same process",
        shows: "the paste shows the web UI restarting itself in the same process, and the relaunch came before the old server let the port go",
        must_precede: true,
        stack: Some("Gradio"),
        how: None,
        other_process: false,
    },
    Stop {
        id: "web-servers.litespeed-child-shutting-down",
        note: "the server's earlier process was still shutting down gracefully",
        shows: "the paste shows its earlier process still shutting down gracefully around the new start, a restart that raced the old instance for the port",
        must_precede: false,
        stack: None,
        how: None,
        other_process: false,
    },
    Stop {
        id: "stacks-bind.cherrypy-respawning",
        note: "CherryPy re-executed the process: its previous incarnation's server still held the port",
        shows: "the paste shows CherryPy re-spawning the process (its autoreloader or a restart) after it had served, and the new incarnation's bind came before the old server's socket was closed",
        must_precede: true,
        stack: None,
        how: Some(
            "stop the engine (and so its HTTP server) before the re-exec, or turn the autoreloader off where the code does not change (`engine.autoreload.on = False`)",
        ),
        other_process: false,
    },
    Stop {
        id: "stacks-bind.osascript-quit-canceled",
        note: "the app refused to quit: its server keeps running",
        shows: "the paste shows its app refusing to quit, so the server it runs still listens",
        must_precede: false,
        stack: None,
        how: None,
        other_process: false,
    },
];

/// The rows (catalogs/stacks-bind.toml) of a server saying, on its own
/// failed bind, that another copy of it is running (Zulip's run-dev:
/// `ERROR: You probably have another server running!!!`).
const SAID: &[&str] = &["stacks-bind.another-server-running"];

/// The start-up rows (catalogs/startup.toml) whose line names the address
/// the server listens on: an earlier instance that served the port.
const SERVED: &[&str] = &[
    "startup.uvicorn-startup-complete",
    "startup.llama-server-listening",
    "stacks-bind.python-http-server-serving",
];

/// How the paste shows the earlier instance.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// A stop or restart that did not take.
    Stopped,
    /// The port served before the failed bind.
    Served,
    /// The same server running beside it (its unit, its process, its app).
    Running,
    /// The server itself says another copy of it holds the port.
    Said,
    /// A request answered after the failed bind, in the same log.
    Answered,
    /// An earlier detached container run publishing the same port.
    Published,
}

/// What the paste shows of the earlier instance before the failed bind.
struct Earlier {
    /// The lines, each with what it says.
    lines: Vec<(Span, String)>,
    /// How it is seen.
    seen: Seen,
    /// The headline's clause.
    shows: &'static str,
    /// How the program whose instance it is is stopped, when known.
    stop: Option<&'static str>,
    /// The earlier instance's processes its lines name (OpenLiteSpeed's
    /// `[Child: N]`): the holder's.
    pids: Vec<u32>,
}

/// Rewrites the failed bind's finding `f` when the port's holder is most
/// likely the same server: `port` is the port that failed, `binds` the
/// failed binds' lines, `http` whether it is the server's own (HTTP) port,
/// `named` whether a listing or a command line names the holder.
pub(super) fn apply(
    f: &mut Finding,
    incident: &Incident,
    port: Option<&str>,
    binds: &[&Message],
    http: bool,
    named: bool,
) {
    if f.category != Category::PortInUse || !http || named {
        return;
    }
    let Some(first) = binds.iter().map(|m| m.span).min() else {
        return;
    };
    let windows = binds.iter().any(|m| windows_wording(&m.text));
    let Some(number) = port.and_then(|p| p.parse::<u16>().ok()) else {
        // No port named: a request answered after the failed bind still
        // says a server of this log holds it.
        if let Some(e) = answered(incident, first) {
            let probe = if windows {
                "netstat -ano | findstr LISTENING"
            } else {
                "ss -ltnp  # or: lsof -iTCP -sTCP:LISTEN -P -n"
            };
            stale(f, None, e, probe);
        }
        return;
    };
    let probe = if windows {
        format!("netstat -ano | findstr :{number}")
    } else {
        format!("lsof -i :{number}  # or: ss -ltnp 'sport = :{number}'")
    };
    let defaults: Vec<_> = defaults_on(number).collect();
    let stacks = defaults
        .iter()
        .map(|d| d.stack)
        .collect::<Vec<_>>()
        .join(" or ");
    let stop = defaults.first().map(|d| d.stop);
    let seen = said(incident, first)
        .or_else(|| earlier(incident, number, first))
        .or_else(|| restarted::stopped_unit(incident, binds))
        .or_else(|| published::earlier_run(incident, number, first))
        .or_else(|| answered(incident, first))
        .or_else(|| running(incident, number));
    match seen {
        Some(e) => stale(f, Some(number), e, &probe),
        None if !defaults.is_empty() => {
            f.condition(
                format!("port {number} is the default port of {stacks}"),
                true,
            );
            f.headline = format!(
                "The server could not bind its HTTP port {number}: another process holds it. {number} is the default port of {stacks}: most likely an instance of it already runs there (a service, a tray or menu-bar app, or a run left behind). Find it and stop it, or use it, rather than moving to another port."
            );
            // What the chain said of the holder stays (a run that died
            // moments before); the default port is added to it.
            let said = f.chain.pop().unwrap_or_default();
            f.chain.push(format!(
                "{said}: {number} is {stacks}'s default port, so most likely an instance of it"
            ));
            advise(f, &probe, stop);
        }
        None => {}
    }
}

/// Whether a failed bind's words are Windows' (WSAEADDRINUSE, 10048, or
/// the OS's text in another language): `netstat -ano` finds the holder.
fn windows_wording(text: &str) -> bool {
    text.contains("10048")
        || text.contains("Only one usage")
        || text.contains("only one usage")
        || !text.is_ascii()
}

/// The lines of the failed bind's input (at `first`) that show an earlier
/// instance on `port`: a stop before it (its port, where it names one, is
/// `port`), an app that refused to quit whose server's default port is
/// `port`, or a start-up line before it that served `port`.
fn earlier(incident: &Incident, port: u16, first: Span) -> Option<Earlier> {
    let before = |m: &Message| m.span.source == first.source && m.span.line < first.line;
    let here = |m: &Message| m.span.source == first.source;
    let mut lines: Vec<(Span, String)> = Vec::new();
    let mut first_stop: Option<(Span, &Stop, Option<&'static str>)> = None;
    let mut pids: Vec<u32> = Vec::new();
    let binders = binders(incident);
    for stop in STOPS {
        for (m, hit) in incident.known(stop.id) {
            let pid = hit.get("pid").and_then(|p| p.parse::<u32>().ok());
            if stop.other_process && pid.is_none_or(|p| binders.contains(&p)) {
                continue;
            }
            let when = if stop.must_precede {
                before(m)
            } else {
                here(m)
            };
            let on_port = hit.get("port").is_none_or(|p| p.parse() == Ok(port));
            // The app a refused quit names is a program whose default port
            // is this one.
            let program = match hit.get("app") {
                Some(app) => {
                    match defaults_on(port).find(|d| d.stack.eq_ignore_ascii_case(app.trim())) {
                        Some(d) => Some(d.stack),
                        None => continue,
                    }
                }
                None => stop.stack,
            };
            if !(when && on_port) {
                continue;
            }
            lines.push((m.span, stop.note.to_owned()));
            pids.extend(pid);
            if first_stop.is_none_or(|(s, _, _)| m.span < s) {
                first_stop = Some((m.span, stop, program));
            }
        }
    }
    if let Some((_, stop, program)) = first_stop {
        lines.sort_by_key(|(s, _)| *s);
        return Some(Earlier {
            lines,
            seen: Seen::Stopped,
            shows: stop.shows,
            stop: program
                .and_then(|p| DEFAULT_PORTS.iter().find(|d| d.stack == p))
                .map(|d| d.stop)
                .or(stop.how),
            pids,
        });
    }
    for id in SERVED {
        for (m, hit) in incident.known(id) {
            // Its `port`, or the port of its URL (`word`).
            let served = hit
                .get("port")
                .or_else(|| hit.get("word").and_then(|url| url.rsplit(':').next()))
                .map(|p| p.trim_end_matches(|c: char| !c.is_ascii_digit()))
                .is_some_and(|p| p.parse() == Ok(port));
            if before(m) && served {
                lines.push((
                    m.span,
                    format!("the server served port {port} earlier in this log"),
                ));
            }
        }
    }
    lines.sort_by_key(|(s, _)| *s);
    (!lines.is_empty()).then_some(Earlier {
        lines,
        seen: Seen::Served,
        shows: "the paste shows it serving the port before this start",
        stop: None,
        pids: Vec::new(),
    })
}

/// The processes whose own bind failed, as their lines name them
/// (gunicorn's master in its `[PID] [ERROR] Connection in use` head).
fn binders(incident: &Incident) -> Vec<u32> {
    BINDERS
        .iter()
        .flat_map(|id| incident.known(id))
        .filter_map(|(_, hit)| hit.get("master")?.parse().ok())
        .collect()
}

/// The failed-bind rows (catalogs/stacks-bind.toml) whose line names the
/// process that failed (`master`).
const BINDERS: &[&str] = &["stacks-bind.gunicorn-connection-in-use"];

/// The server's own words, in the failed bind's input (at `first`), that
/// another copy of it is running: it names the holder itself.
fn said(incident: &Incident, first: Span) -> Option<Earlier> {
    let lines: Vec<(Span, String)> = SAID
        .iter()
        .flat_map(|id| incident.known(id))
        .filter(|(m, _)| m.span.source == first.source)
        .map(|(m, _)| {
            (
                m.span,
                "the server itself says another copy of it is running".to_owned(),
            )
        })
        .collect();
    (!lines.is_empty()).then_some(Earlier {
        lines,
        seen: Seen::Said,
        shows: "the server itself says another copy of it is running",
        stop: None,
        pids: Vec::new(),
    })
}

/// The catalog row of an HTTP server's access line
/// (catalogs/web-servers.toml): a request it answered.
const ACCESS: &str = "web-servers.http-access-line";

/// A request answered (a status below 400) after the failed bind at
/// `first`, in its input: a server of this log still serves, the one that
/// kept the port (pyLoad's in-place restart: the old web server, never
/// stopped, answers the UI's next poll while the new one cannot bind).
fn answered(incident: &Incident, first: Span) -> Option<Earlier> {
    let (m, hit) = incident.known(ACCESS).find(|(m, hit)| {
        m.span.source == first.source
            && m.span > first
            && hit
                .get("status")
                .and_then(|s| s.parse::<u16>().ok())
                .is_some_and(|s| s < 400)
    })?;
    let request = hit.get("request").unwrap_or("a request");
    let status = hit.get("status").unwrap_or("");
    Some(Earlier {
        lines: vec![(
            m.span,
            format!(
                "after the failed bind, a server of this log still answered `{request}` ({status}): the instance that kept the port"
            ),
        )],
        seen: Seen::Answered,
        shows: "the paste shows a request answered after the failed bind, by the server that kept the port",
        stop: None,
        pids: Vec::new(),
    })
}

/// An instance of the program whose default port `port` is, shown running
/// in the inputs: its unit active, a process of it listed, or (Ollama)
/// its desktop app starting its own server. Nothing names it the port's
/// holder, but a second start of the same server on its default port
/// collides with it.
fn running(incident: &Incident, port: u16) -> Option<Earlier> {
    let defaults: Vec<_> = defaults_on(port).collect();
    let program = |cmd: &str| {
        classify(cmd).and_then(|(e, _)| defaults.iter().find(|d| d.stack == e.stack).copied())
    };
    let unit = incident.facts.unit_statuses.iter().find_map(|s| {
        if s.active_state.as_deref() != Some("active") {
            return None;
        }
        let by_name = defaults
            .iter()
            .find(|d| {
                s.unit
                    .trim_end_matches(".service")
                    .eq_ignore_ascii_case(d.stack)
            })
            .copied();
        let d = by_name.or_else(|| s.cgroup.iter().find_map(|m| program(&m.cmdline)))?;
        Some((
            s.active_span.unwrap_or(s.span),
            format!(
                "{} is active: {} already runs as a service",
                s.unit, d.stack
            ),
            d,
        ))
    });
    let listed = || {
        incident.facts.ps.iter().find_map(|r| {
            let d = program(&r.cmd)?;
            Some((r.span, format!("PID {} is {} running", r.pid, d.stack), d))
        })
    };
    let app = || {
        let d = defaults.iter().find(|d| d.stack == "Ollama").copied()?;
        let (m, hit) = incident.known("stacks-ollama.app-started-server").next()?;
        let pid = hit.get("pid").unwrap_or("?");
        Some((
            m.span,
            format!("Ollama's app started its own server (PID {pid})"),
            d,
        ))
    };
    let (span, note, d) = unit.or_else(listed).or_else(app)?;
    Some(Earlier {
        lines: vec![(span, note)],
        seen: Seen::Running,
        shows: "the paste shows the same server already running beside it",
        stop: Some(d.stop),
        pids: Vec::new(),
    })
}

/// The finding as a stale serving instance: the server's own earlier
/// instance, seen stopping or serving before, still holds `port` (its
/// port, where no line names it).
fn stale(f: &mut Finding, port: Option<u16>, e: Earlier, probe: &str) {
    let port = port.map_or_else(|| "its port".to_owned(), |p| format!("port {p}"));
    for (span, note) in &e.lines {
        f.evidence(*span, note.clone());
    }
    f.category = Category::StaleServingInstance;
    f.entities.pids.extend(e.pids.iter().copied());
    let (seen, chain) = match e.seen {
        Seen::Stopped => (
            "the server was asked to stop or restart before the failed bind",
            "its own earlier instance, asked to stop, had not let the port go",
        ),
        Seen::Served => (
            "the server served this port earlier in the same log",
            "its own earlier instance, which served the port before, still holds it",
        ),
        Seen::Running => (
            "the same server, whose default port this is, is shown running beside the failed bind",
            "another instance of the same server, already running, holds it",
        ),
        Seen::Said => (
            "the server's own error says another copy of it is running",
            "another instance of the same server, still running, holds it",
        ),
        Seen::Answered => (
            "a request was answered after the failed bind, in the same log",
            "its own earlier server, still answering requests, holds it",
        ),
        Seen::Published => (
            "an earlier detached run of a container published the same host port in this paste",
            "the earlier run's container, still running, holds it",
        ),
    };
    f.condition(seen, true);
    f.title = format!("{port} is still held by the server's own earlier instance");
    f.headline = format!(
        "The server could not bind {port} because its own earlier instance still holds it: {}. Stop that instance through what runs it and start once; another port would leave two copies running.",
        e.shows
    );
    f.chain.pop();
    f.chain.push(chain.to_owned());
    f.explanation = "A server releases its port only when its listening socket closes: a restart inside the same process (a web UI's Restart or Reload UI), an app that refuses to quit, or a run left behind keeps the old server on the port, and every new start fails to bind it. The holder is not another program but the server itself.".to_owned();
    advise(f, probe, e.stop);
    f.confidence = if matches!(e.seen, Seen::Stopped | Seen::Said) {
        0.7
    } else {
        0.6
    };
}

/// In place of "find the process; stop it if it is a leftover, otherwise
/// another port": find it by the platform's tool, stop it through what
/// runs it.
fn advise(f: &mut Finding, probe: &str, stop: Option<&str>) {
    f.actions.clear();
    f.actions.push(Action::advice(
        "find the process that listens on the port",
        Some(probe),
    ));
    f.actions.push(Action::advice(
        match stop {
            Some(how) => format!(
                "if it is an instance of the same server, use it or stop it through what runs it ({how}) before starting again; move to another port only if the holder is another program"
            ),
            None => "if it is an instance of the same server, use it or stop it through what runs it (Ctrl-C in its console, its app's Quit, `systemctl stop` or `docker stop`) before starting again; move to another port only if the holder is another program".to_owned(),
        },
        None,
    ));
}

/// Python's bind rows (catalogs/stacks-bind.toml): the failing program is
/// a Python one.
const PYTHON_BINDS: &[&str] = &[
    "stacks-bind.python-errno-98",
    "stacks-bind.uvicorn-bind-errno-98",
    "stacks-bind.gradio-port-in-use",
    "stacks-bind.gradio-no-empty-port",
    "stacks-bind.werkzeug-port-in-use",
    "stacks-bind.cheroot-no-socket",
];

/// A holder that is PID 1 running the same interpreter as the failing
/// Python server (`netstat`'s `1/python3`): in a container, PID 1 is the
/// image's own command, most likely the same server already serving there,
/// and the failed start a second copy. The finding stays a port in use (the
/// second copy is the mistake, nothing is stale); it says so, and that
/// killing PID 1 stops the container.
pub(super) fn container_main(f: &mut Finding, incident: &Incident, sockets: &[&Listener]) {
    if f.category != Category::PortInUse
        || !PYTHON_BINDS
            .iter()
            .any(|id| incident.known(id).next().is_some())
    {
        return;
    }
    let Some(holder) = sockets.iter().find(|l| {
        l.pid == Some(1)
            && l.process
                .as_deref()
                .is_some_and(|p| p.starts_with("python"))
    }) else {
        return;
    };
    let name = holder.process.as_deref().unwrap_or("python");
    f.condition(
        format!("the holder is PID 1 (`{name}`), a container's main process, running Python like the failing server"),
        true,
    );
    f.headline = format!(
        "The server could not bind port {}: PID 1 (`{name}`) listens there. PID 1 is the container's main process, the command its image starts: most likely the same server already running, and this start a second copy.",
        holder.port
    );
    f.chain.pop();
    f.chain.push(format!(
        "PID 1 (`{name}`), the container's own main process, already listens there: most likely the same server"
    ));
    f.actions.pop();
    f.actions.push(Action::advice(
        "use the server PID 1 already runs on this port, or start the second copy on another port; do not kill PID 1, which stops the container",
        None,
    ));
}

mod published;
mod restarted;

#[cfg(test)]
mod tests;
