//! `address-already-in-use`: a server could not bind its port; tells a live
//! listener from a port left behind by a crash and from the torch.distributed
//! store port, and a port its own previous instance holds while stuck
//! stopping (`stuck_stopping.rs`), held by another instance of the same
//! server (`same_server.rs`), or, with no holder named, by the server's own
//! earlier instance or on its default port (`own_instance.rs`).

mod cut_bind;
mod own_instance;
mod same_server;
mod store;
mod stuck_stopping;

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Incident, UnitEventKind};
use crate::model::{Listener, Message, PsRecord};
use crate::rules::support::{confidence, distinct, listen, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: AddressAlreadyInUse = AddressAlreadyInUse;

pub struct AddressAlreadyInUse;

/// Where a failed bind was: the server's own (HTTP) port, an internal ZMQ
/// queue, or torch.distributed's rendezvous store.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Port {
    Http,
    Zmq,
    Store,
}

/// The catalog rows that are a failed bind (catalogs/stacks-*.toml), and
/// whose port each is.
const ROWS: &[(&str, Port)] = &[
    ("stacks-bind.python-errno-98", Port::Http),
    ("stacks-bind.uvicorn-bind-errno-98", Port::Http),
    ("stacks-bind.zmq-address-in-use", Port::Zmq),
    ("stacks-sglang.port-not-available", Port::Http),
    ("stacks-llamacpp.bind-failed", Port::Http),
    ("stacks-torch.tcpstore-eaddrinuse", Port::Store),
    // The store's only under a traceback frame creating it (`binds`).
    ("stacks-torch.c10d-bare-eaddrinuse", Port::Http),
    ("stacks-containers.port-already-allocated", Port::Http),
    ("stacks-bind.werkzeug-port-in-use", Port::Http),
    ("stacks-bind.gunicorn-connection-in-use", Port::Http),
    ("stacks-bind.gradio-port-in-use", Port::Http),
    ("stacks-bind.gradio-no-empty-port", Port::Http),
    ("stacks-bind.triton-socket-in-use", Port::Http),
    ("stacks-bind.grpc-no-address-added", Port::Http),
    ("web-servers.apache-make-sock-in-use", Port::Http),
    ("web-servers.litespeed-cant-listen", Port::Http),
    ("web-servers.nginx-bind-failed", Port::Http),
    ("stacks-bind.cheroot-no-socket", Port::Http),
    ("stacks-bind.fastdeploy-port-in-use", Port::Http),
];

/// Rows whose line, printed beside a failed bind that names no port (a
/// listener named only by its configuration name: OpenLiteSpeed's
/// `Can't listen at address adminListener`), gives the port of the same
/// listener (catalogs/web-servers.toml).
const COMPANION_PORTS: &[&str] = &["web-servers.litespeed-listener-failed"];

/// Rows of what a server printed after its failed bind, as it gave up
/// (gunicorn's `Can't connect to ('', 9000)` after its five tries,
/// Apache's `no listening sockets available, shutting down`,
/// OpenLiteSpeed's `failed to start listener`, `Fatal error in
/// configuration, exit!`, its control script's `litespeed is not
/// running.`, nginx's `still could not bind()` after its five tries): cited as what the failed bind led to.
const AFTERMATH: &[&str] = &[
    "stacks-bind.gunicorn-cant-connect",
    "web-servers.litespeed-listener-failed",
    "web-servers.apache-no-listening-sockets",
    "web-servers.lswsctrl-status",
    "web-servers.nginx-still-could-not-bind",
];

/// NCCL's socket transport: its WARN lines are NCCL's catalog's.
static NCCL_BIND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"NCCL WARN .*bind failed: Address already in use").expect("nccl bind regex")
});

/// A failed bind: its line, where it was, and the port it names.
struct Bind<'a> {
    message: &'a Message,
    port: Port,
    number: Option<String>,
    /// The port's name where the line gives it (SGLang's `metrics_port`,
    /// `http_port`, `nccl_port`: its own ServerArgs field).
    label: Option<String>,
}

/// The rows whose `name` capture is the port's own name.
const NAMED_PORTS: &[&str] = &[
    "stacks-sglang.port-not-available",
    "stacks-bind.fastdeploy-port-in-use",
];

/// Every failed bind the catalogs' rows (and NCCL's WARN) read, in input
/// order. A ZMQ error counts as ZMQ's only where it names its address.
fn binds(incident: &Incident) -> Vec<Bind<'_>> {
    let mut out: Vec<Bind<'_>> = ROWS
        .iter()
        .flat_map(|(id, port)| {
            incident.known(id).map(move |(message, hit)| {
                let port = match port {
                    Port::Zmq if hit.get("addr").is_none() => Port::Http,
                    _ if *id == store::BARE && store::under_frame(incident, message) => Port::Store,
                    p => *p,
                };
                // `port: 29500`, or the store's `[::]:29500`.
                let number = hit.get("port").map(str::to_owned).or_else(|| {
                    hit.get("addr")
                        .filter(|_| port == Port::Store)
                        .and_then(|a| a.rsplit(':').next())
                        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                        .map(str::to_owned)
                });
                let label = NAMED_PORTS
                    .contains(id)
                    .then(|| hit.get("name"))
                    .flatten()
                    .filter(|n| n.contains("port"))
                    .map(str::to_owned);
                Bind {
                    message,
                    port,
                    number,
                    label,
                }
            })
        })
        .chain(matches(incident, &NCCL_BIND).map(|(message, _)| Bind {
            message,
            port: Port::Http,
            number: None,
            label: None,
        }))
        .collect();
    out.sort_by_key(|b| b.message.span);
    // One line two rows read (uvicorn's own wording and Python's errno 98
    // by its number) is one failed bind, with what either row took of it.
    out.dedup_by(|later, kept| {
        if later.message.span != kept.message.span {
            return false;
        }
        if kept.number.is_none() {
            kept.number = later.number.take();
        }
        if kept.label.is_none() {
            kept.label = later.label.take();
        }
        if kept.port == Port::Http {
            kept.port = later.port;
        }
        true
    });
    out
}

/// What the failed port is, as the report says it: the store's, an
/// internal ZMQ port, the port as the server names it (a metrics or NCCL
/// port is not the one clients use), else the HTTP port.
fn port_name(binds: &[Bind<'_>], store: bool) -> String {
    if store {
        "the torch.distributed store port".to_owned()
    } else if binds.iter().any(|b| b.port == Port::Zmq) {
        "an internal ZMQ port".to_owned()
    } else if let Some(label) = binds.iter().find_map(|b| b.label.as_deref()) {
        // The port as the server names it: a metrics or NCCL port is
        // not the one clients use.
        match label {
            "port" | "http_port" => "its HTTP port".to_owned(),
            _ => format!("its {label}"),
        }
    } else {
        "its HTTP port".to_owned()
    }
}

static META: RuleMeta = RuleMeta {
    id: "address-already-in-use",
    category: Category::PortInUse,
    severity: Severity::Critical,
    summary: "a server could not bind its port: another process (often its own previous run) holds it",
    anchors: &[
        // The catalogs' rows (stacks-bind, -torch, -sglang, -llamacpp) bring
        // their own anchors; these are NCCL's WARN and the wordings
        // support/listen.rs reads (Go, Node, Rust, macOS, Windows).
        "Address already in use",
        "EADDRINUSE",
        "Only one usage of each socket address",
        "Errno 48",
        "Errno 10048",
        "WinError 10048",
        // Go's listen error cut before its reason (support/listen.rs).
        "listen tcp",
    ],
    doc: r#"
## What it means
The server could not listen on its HTTP port, its ZMQ ports or the
torch.distributed store port (`[Errno 98] Address already in use`,
`EADDRINUSE`), and exited. A web server in front of it says so in its
own words: gunicorn's `Connection in use: ('HOST', PORT)` (host `''` is
every address), five times a second apart before its `Can't connect to
('HOST', PORT)`; Apache's `(98)Address already in use: make_sock: could not bind
to address HOST:PORT`, nginx's `[emerg] bind() to HOST:PORT failed (98:
Address already in use)` (five tries half a second apart, then `still could
not bind()`), OpenLiteSpeed's `Can't listen at address NAME:
Address already in use!` (its port from the `failed to start listener on
address *:PORT` line printed just after).

A Go server's listen error cut before its reason (`failed to listen:
listen tcp4 0.0.`) counts only beside a socket listing that shows one port
and names its holder, at a lower confidence.

When the inputs show the server's previous instance still stopping
(`ollama ps` with a model `Stopping...` beside a failed bind of Ollama's
port, or the server's unit `deactivating` while a start on its port fails),
the finding is a hang (category `server-hang`): the old instance never
finished stopping and still holds the port. Neither state alone is a
failure.

When the process that holds the port is the failing server's own stack
(the bind error is SGLang's or llama.cpp's and so is the holder, or the port
is the holder's default: `lsof` shows `ollama` on 11434 beside Ollama's
`listen tcp 127.0.0.1:11434: bind: address already in use`), the finding is
a stale serving instance: another instance of the same server already runs
there (a service started at boot, a run left behind), and the new start is
the duplicate.

When no holder is named, what the paste shows before the failed bind, in
the same input, decides: the server's own stop or restart (gradio's
`Closing server running on port: 3000`, a web UI's `Restarting UI...`,
another gunicorn master than the one that failed handling a stop signal,
`[5155] [INFO] Handling signal: term`;
OpenLiteSpeed's `[Child: N] Start shutting down gracefully ...` around the
new start, a restart that raced the old instance), its app refusing to quit (osascript's `Ollama got an error: User canceled.
(-128)`), or the server serving the same port earlier in the log
(`Uvicorn running on http://0.0.0.0:8000`, Python's `Serving HTTP on
0.0.0.0 port 8000 ...`) make the finding a stale serving
instance (0.7 for a stop, 0.6 for a port served before): its own earlier
instance still holds the port. So does a `systemctl status` of the server's
unit whose `ExecStop=` exited with success before the `ExecStart=` whose
process printed the failed bind (`nginx[20640]: … bind() to 0.0.0.0:80
failed`): the unit had an instance running, and its stop did not reach it.
So does an earlier detached `docker run` of the paste publishing the same
host port (`-d … -p 8080:80`) before the run whose publish failed.
A Python traceback cut inside the frame that binds
(`self.socket.bind(self.server_address)`, nothing after but deeper frames)
counts as the failed bind only after the same console's line that the
server served, or was about to bind, a port. So does the program whose default port it
is shown running beside the failed bind (0.6): its unit `active` in a
`systemctl status` (`ollama.service`, or a unit whose processes are the
program's), a process of it in a `ps` listing, or Ollama's desktop app
starting its own server (`started ollama server with pid N`). A failed bind on a serving program's default
port alone (Ollama's 11434, ComfyUI's 8188, vLLM's 8000) stays a port in
use, naming that program as the likely holder and how it is stopped (its
tray or menu-bar app, `systemctl stop`, Ctrl-C in its console) rather than
moving the port.

## Why it happens
A previous instance (or its children) still runs and listens; two services
are configured with the same port; or the port sits in the ephemeral range
and another program grabbed it. Under `Restart=always` this makes a fast
crash loop.

## How to confirm
`ss -ltnp 'sport = :PORT'` names the listening process; `ps` shows whether it
is a leftover of the same service.

## How to fix
Stop the leftover when it is yours (the stale-process finding scripts that),
otherwise change the port (`--port`, `--nccl-port`, `MASTER_PORT`).

## Safety
Advice only: the listener may belong to someone else.
"#,
};

impl Rule for AddressAlreadyInUse {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let binds = binds(incident);
        let mut listens = listen::failures(incident);
        keep_reasoned(incident, &mut listens, binds.is_empty());
        if binds.is_empty() && listens.is_empty() {
            return;
        }
        let cut = binds.is_empty() && listens.iter().all(|l| l.reasonless());
        let unsaid = cut && listens.iter().any(|l| l.unsaid);
        let store = binds.iter().any(|b| b.port == Port::Store);
        let launched = launcher_port(incident, &binds);
        // The store's port first (it names the rendezvous), then the
        // server's own, then what the other runtimes' wordings say.
        let port: Option<String> = binds
            .iter()
            .filter(|b| b.port == Port::Store)
            .chain(binds.iter().filter(|b| b.port != Port::Store))
            .find_map(|b| b.number.clone())
            .or_else(|| listens.iter().find_map(|l| l.port.clone()))
            .or_else(|| companion_port(incident, &binds))
            .or_else(|| listing_port(incident))
            .or_else(|| launched.map(|(_, p)| p.to_owned()));
        let mut f = Finding::new(META.id, META.category, META.severity);
        let lines: Vec<&Message> = binds
            .iter()
            .map(|b| b.message)
            .chain(listens.iter().map(|l| l.message))
            .collect();
        for (m, n) in distinct(lines.iter().copied()) {
            f.evidence(m.span, format!("the bind failed ({n}x)"));
        }
        cite_launcher(&mut f, launched, port.as_deref());
        cite_aftermath(&mut f, incident, &binds);
        let what = port_name(&binds, store);
        let port_text = port.as_deref().map(|p| format!(" {p}")).unwrap_or_default();
        // A process on this host started with this port: a live listener.
        let listener = port.as_deref().and_then(|p| {
            // `--port 30000`, `--master-port=29500`, `nccl_port=…`, `MASTER_PORT=…`.
            let flag = Regex::new(&format!(r"(?i)\S*port(?:=|\s+){p}\b")).ok()?;
            incident.facts.ps.iter().find(|r| flag.is_match(&r.cmd))
        });
        if let Some(l) = listener {
            f.evidence(l.span, format!("PID {} was started with this port", l.pid));
            f.entities.pids.insert(l.pid);
        }
        // A socket listing's row on the port (`ss -ltnp`, `netstat -ntlp`'s
        // `427249/docker-proxy`, `lsof`): the process that holds it.
        let sockets = socket_holders(incident, port.as_deref());
        for l in &sockets {
            let who = l.process.as_deref().unwrap_or("a process");
            f.evidence(l.span, format!("{who} listens on port {}", l.port));
            f.entities.pids.extend(l.pid);
        }
        // The unit died moments before: its socket may still linger.
        let recent_crash = incident.units.values().any(|u| {
            u.events.iter().any(|e| {
                matches!(
                    e.kind,
                    UnitEventKind::MainProcessExited { .. } | UnitEventKind::ScheduledRestart(_)
                )
            })
        });
        f.condition(format!("the server failed to bind {what}{port_text}"), true);
        if unsaid {
            f.condition(
                "the error says why the listen failed (the program prints no reason)",
                false,
            );
        } else if cut {
            f.condition(
                "the error says why the listen failed (the line is cut before its reason)",
                false,
            );
        }
        f.condition("the port number is known", port.is_some());
        f.condition(
            "a listening process is identified",
            listener.is_some() || !sockets.is_empty(),
        );
        f.title = format!("{what}{port_text} is already in use");
        let bind = format!("{what}{port_text}");
        f.headline = headline(&bind, listener, &sockets);
        f.chain.push(format!(
            "the server exited because it could not bind {bind}"
        ));
        let holder = listener
            .map(|l| l.pid)
            .or(sockets.iter().find_map(|l| l.pid));
        f.chain.push(match (holder, recent_crash) {
            (Some(pid), _) => format!("PID {pid} listens there"),
            (None, true) => "a previous run of the service died moments before: its processes or socket may linger".to_owned(),
            (None, false) => "another process listens there".to_owned(),
        });
        advise(&mut f, store, port.as_deref());
        f.confidence = confidence(&f, 0.75, 0.97);
        let http = !store && binds.iter().all(|b| b.port == Port::Http);
        refine(&mut f, incident, &port, &lines, listener, &sockets, http);
        out.push(f);
    }
}

/// What the inputs say of the holder, each reading in turn (the first that
/// changes the category ends the others): the previous instance stuck
/// stopping, another instance of the same server named holding the port,
/// the server's own earlier instance or default port with no holder named,
/// a container's PID 1 of the same interpreter. `http`: the failed port is
/// the server's own.
fn refine(
    f: &mut Finding,
    incident: &Incident,
    port: &Option<String>,
    lines: &[&Message],
    listener: Option<&PsRecord>,
    sockets: &[&Listener],
    http: bool,
) {
    let port = port.as_deref();
    stuck_stopping::apply(f, incident, port, lines);
    same_server::apply(f, incident, port, listener, sockets);
    let named = listener.is_some() || !sockets.is_empty();
    own_instance::apply(f, incident, port, lines, http, named);
    own_instance::container_main(f, incident, sockets);
}

/// What the finding explains and advises: find the listener, stop it when
/// it is this service's leftover.
fn advise(f: &mut Finding, store: bool, port: Option<&str>) {
    f.explanation = if store {
        "The rendezvous store of torch.distributed (MASTER_PORT, SGLang --nccl-port / dist_init_addr) could not listen: usually a previous instance still alive, or two instances given the same port.".to_owned()
    } else {
        "Usually a previous instance, or one of its children, still listens; or two services share the port.".to_owned()
    };
    let probe = match port {
        Some(p) => format!("ss -ltnp 'sport = :{p}'"),
        None => "ss -ltnp".to_owned(),
    };
    f.actions.push(Action::advice(
        "find the process that listens on the port",
        Some(&probe),
    ));
    f.actions.push(Action::advice(
        "stop it if it is a leftover of this service; otherwise give the server another port",
        None,
    ));
}

/// The finding's headline: who holds `bind` (`its HTTP port 8000`), by
/// its command line (a process started with the port) or by a socket
/// listing's row on it, when known.
fn headline(bind: &str, listener: Option<&PsRecord>, sockets: &[&Listener]) -> String {
    if let Some(l) = listener {
        return format!(
            "The server could not bind {bind}: PID {} (`{}`) was started on the same port.",
            l.pid,
            l.cmd.split_whitespace().next().unwrap_or("")
        );
    }
    match sockets.iter().find_map(|l| Some((l.pid?, l))) {
        Some((pid, l)) => format!(
            "The server could not bind {bind}: PID {pid} (`{}`) listens there.",
            l.process.as_deref().unwrap_or("?")
        ),
        None => format!("The server could not bind {bind}: another process holds it."),
    }
}

/// The rows of a socket listing that listen on `port` and name their
/// process, one per PID, in input order.
fn socket_holders<'a>(incident: &'a Incident, port: Option<&str>) -> Vec<&'a Listener> {
    let Some(port) = port.and_then(|p| p.parse::<u16>().ok()) else {
        return Vec::new();
    };
    let mut seen = std::collections::BTreeSet::new();
    incident
        .facts
        .listeners
        .iter()
        .filter(|l| l.port == port)
        .filter(|l| l.pid.is_some_and(|p| seen.insert(p)))
        .collect()
}

/// Cites what the server printed as it gave up after its failed bind, in
/// the same input within a few lines after it (and, above a bare store
/// bind, the traceback frame creating the store).
fn cite_aftermath(f: &mut Finding, incident: &Incident, binds: &[Bind<'_>]) {
    let store = binds.iter().filter(|b| b.port == Port::Store);
    store::cite_frame(f, incident, store.map(|b| b.message));
    let Some(first) = binds.iter().map(|b| b.message.span).min() else {
        return;
    };
    let after = |m: &&Message| {
        m.span.source == first.source && m.span.line > first.line && m.span.line <= first.line + 10
    };
    let mut lines: Vec<&Message> = AFTERMATH
        .iter()
        .flat_map(|id| incident.known(id).map(|(m, _)| m))
        .filter(after)
        .collect();
    lines.sort_by_key(|m| m.span);
    lines.dedup_by_key(|m| m.span);
    for m in lines {
        f.evidence(m.span, "what the failed bind led to: the server gave up");
    }
}

/// None printed: the port a line of the same server gives for the listener
/// that failed, in the failed bind's input within a few lines after it
/// (OpenLiteSpeed's `failed to start listener on address *:7080!`).
fn companion_port(incident: &Incident, binds: &[Bind<'_>]) -> Option<String> {
    let first = binds.iter().map(|b| b.message.span).min()?;
    COMPANION_PORTS
        .iter()
        .flat_map(|id| incident.known(id))
        .filter(|(m, _)| {
            m.span.source == first.source
                && m.span.line >= first.line
                && m.span.line <= first.line + 5
        })
        .find_map(|(_, hit)| hit.get("port").map(str::to_owned))
}

/// None printed (or cut): the one port the paste's socket listing shows
/// (`ss -ltnp 'sport = :8080'`), when it names its holder.
fn listing_port(incident: &Incident) -> Option<String> {
    only_port_holders(incident)
        .first()
        .map(|l| l.port.to_string())
}

/// None printed: the port a launcher said, before the failed bind (at
/// `first`) in the same input, it was about to bind itself (Zulip's run-dev: `Starting
/// Zulip services on ports: web proxy: 9991, …`, its proxy's port first),
/// or the port the same server said it served (CherryPy's `Serving HTTP on
/// http://0.0.0.0:8080/` before its re-spawned incarnation's bind failed).
fn launcher_port<'a>(incident: &'a Incident, binds: &[Bind<'_>]) -> Option<(Span, &'a str)> {
    launcher_port_at(incident, binds.iter().map(|b| b.message.span).min()?)
}

/// The same, before `first`.
fn launcher_port_at(incident: &Incident, first: Span) -> Option<(Span, &str)> {
    LAUNCHER_PORTS
        .iter()
        .flat_map(|id| incident.known(id))
        .filter(|(m, _)| m.span.source == first.source && m.span < first)
        .filter_map(|(m, hit)| Some((m.span, hit.get("port")?)))
        .max_by_key(|(s, _)| *s)
}

/// Cites the launcher's port list when it gave the port that failed.
fn cite_launcher(f: &mut Finding, launched: Option<(Span, &str)>, port: Option<&str>) {
    if let Some((span, p)) = launched
        && port == Some(p)
    {
        f.evidence(
            span,
            format!("the server said before it that it binds or serves port {p}"),
        );
    }
}

/// A launcher's list of the ports it starts its services on, and a
/// server's line that it serves a port (catalogs/stacks-bind.toml).
const LAUNCHER_PORTS: &[&str] = &[
    "stacks-bind.launcher-ports",
    "stacks-bind.cherrypy-serving",
    "stacks-bind.python-http-server-serving",
];

/// The listeners that name their process when the paste's socket listings
/// show one port only, one per PID: the holders of the port a failure
/// names none of. Listings of several ports name nobody.
/// Keeps a line that says a listen failed but not why only where a listing
/// names its port's holder (of the one port listed, when it names none).
/// With no other failed bind (`alone`), adds a traceback cut in the frame
/// that binds, after a line that gave the port (`cut_bind.rs`).
fn keep_reasoned<'a>(
    incident: &'a Incident,
    listens: &mut Vec<listen::ListenFailure<'a>>,
    alone: bool,
) {
    let one_port_held = !only_port_holders(incident).is_empty();
    listens.retain(|l| {
        !l.reasonless()
            || match l.port.as_deref() {
                Some(p) => !socket_holders(incident, Some(p)).is_empty(),
                None => one_port_held,
            }
    });
    if alone && listens.is_empty() {
        let served = |at| launcher_port_at(incident, at).map(|(_, p)| p.to_owned());
        listens.extend(cut_bind::failure(incident, served));
    }
}

fn only_port_holders(incident: &Incident) -> Vec<&Listener> {
    let mut ports = incident.facts.listeners.iter().map(|l| l.port);
    match ports.next() {
        Some(first) if ports.all(|p| p == first) => {
            socket_holders(incident, Some(&first.to_string()))
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
