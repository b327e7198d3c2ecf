//! `address-already-in-use`: a server could not bind its port; tells a live
//! listener from a port left behind by a crash and from the torch.distributed
//! store port.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Incident, UnitEventKind};
use crate::rules::support::{confidence, distinct, listen, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: AddressAlreadyInUse = AddressAlreadyInUse;

pub struct AddressAlreadyInUse;

/// The HTTP server (uvicorn/asyncio), ZMQ, NCCL and SGLang's own wait.
static BIND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        \[Errno\x2098\]\x20error\x20while\x20attempting\x20to\x20bind\x20on\x20address\x20\('(?P<host>[^']*)',\x20(?P<port>[0-9]+)\)
        | (?P<plain>\[Errno\x2098\]\x20Address\x20already\x20in\x20use)
        | ZMQError:\x20Address\x20already\x20in\x20use(?:\x20\(addr='(?P<zmq>[^']+)'\))?
        | NCCL\x20WARN\x20.*bind\x20failed:\x20Address\x20already\x20in\x20use
        | (?P<name>\S+)\x20at\x20(?P<waitport>[0-9]+)\x20is\x20not\x20available\x20in\x20[0-9]+\x20seconds",
    )
    .expect("bind regex")
});

/// torch.distributed's TCPStore (the rendezvous port, MASTER_PORT / --nccl-port).
static STORE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:port: (?P<port>[0-9]+), useIpv6: \S+, )?code: -98, name: EADDRINUSE|failed to bind to \[::\]:(?P<old>[0-9]+) \(errno: 98",
    )
    .expect("store regex")
});

static META: RuleMeta = RuleMeta {
    id: "address-already-in-use",
    category: Category::PortInUse,
    severity: Severity::Critical,
    summary: "a server could not bind its port: another process (often its own previous run) holds it",
    anchors: &[
        "Address already in use",
        "address already in use",
        "EADDRINUSE",
        "is not available in",
        // The other wordings (Go, Node, Rust, macOS, Windows): support/listen.rs.
        "Only one usage of each socket address",
        "Errno 48",
        "Errno 10048",
        "WinError 10048",
    ],
    doc: r#"
## What it means
The server could not listen on its HTTP port, its ZMQ ports or the
torch.distributed store port (`[Errno 98] Address already in use`,
`EADDRINUSE`), and exited.

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
        let binds: Vec<_> = matches(incident, &BIND).collect();
        let stores: Vec<_> = matches(incident, &STORE).collect();
        let listens = listen::failures(incident);
        if binds.is_empty() && stores.is_empty() && listens.is_empty() {
            return;
        }
        let store = !stores.is_empty();
        let port: Option<String> = stores
            .iter()
            .find_map(|(_, c)| {
                c.name("port")
                    .or(c.name("old"))
                    .map(|m| m.as_str().to_owned())
            })
            .or_else(|| {
                binds.iter().find_map(|(_, c)| {
                    c.name("port")
                        .or(c.name("waitport"))
                        .map(|m| m.as_str().to_owned())
                })
            })
            .or_else(|| listens.iter().find_map(|l| l.port.clone()));
        let mut f = Finding::new(META.id, META.category, META.severity);
        let lines = binds
            .iter()
            .map(|(m, _)| *m)
            .chain(stores.iter().map(|(m, _)| *m))
            .chain(listens.iter().map(|l| l.message));
        for (m, n) in distinct(lines) {
            f.evidence(m.span, format!("the bind failed ({n}x)"));
        }
        let what = if store {
            "the torch.distributed store port".to_owned()
        } else if binds.iter().any(|(_, c)| c.name("zmq").is_some()) {
            "an internal ZMQ port".to_owned()
        } else {
            "its HTTP port".to_owned()
        };
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
        f.condition("the port number is known", port.is_some());
        f.condition("a listening process is identified", listener.is_some());
        f.title = format!("{what}{port_text} is already in use");
        f.headline = match listener {
            Some(l) => format!(
                "The server could not bind {what}{port_text}: PID {} (`{}`) was started on the same port.",
                l.pid,
                l.cmd.split_whitespace().next().unwrap_or("")
            ),
            None => {
                format!("The server could not bind {what}{port_text}: another process holds it.")
            }
        };
        f.chain.push(format!(
            "the server exited because it could not bind {what}{port_text}"
        ));
        f.chain.push(match (listener, recent_crash) {
            (Some(l), _) => format!("PID {} listens there", l.pid),
            (None, true) => "a previous run of the service died moments before: its processes or socket may linger".to_owned(),
            (None, false) => "another process listens there".to_owned(),
        });
        f.explanation = if store {
            "The rendezvous store of torch.distributed (MASTER_PORT, SGLang --nccl-port / dist_init_addr) could not listen: usually a previous instance still alive, or two instances given the same port.".to_owned()
        } else {
            "Usually a previous instance, or one of its children, still listens; or two services share the port.".to_owned()
        };
        let probe = match &port {
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
        f.confidence = confidence(&f, 0.75, 0.97);
        out.push(f);
    }
}
