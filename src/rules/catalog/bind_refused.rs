//! `bind-refused`: a server's bind failure recognised by its structure (Go's
//! `listen tcp ADDR:PORT: bind: <text>`, asyncio's and uvicorn's `[Errno N]
//! error while attempting to bind on address (…): <text>`, Python's
//! `[WinError 10013] <text>`), whatever the OS's words after it; those words
//! are data rows (`stacks-bind.os-*`) that say why: the port taken, the port
//! reserved or forbidden, the address not this host's. The English
//! EADDRINUSE wordings are `address-already-in-use`'s (which finds the
//! holder); this rule reads every other bind failure.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{distinct, listen};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: BindRefused = BindRefused;

pub struct BindRefused;

/// The shapes of a failed bind (catalogs/stacks-bind.toml), each with its
/// `why` (the OS's text) and, where printed, its `host` and `port`.
const SHAPES: &[&str] = &[
    "stacks-bind.go-listen-bind",
    "stacks-bind.asyncio-bind-failed",
    "stacks-bind.winerror-socket",
    "stacks-bind.krita-could-not-bind",
    "stacks-bind.node-listen-error",
    "stacks-bind.node-listen-error-json",
];

/// A property of a Node.js system error inspected over several lines
/// (`  code: 'EADDRINUSE',`, `  syscall: 'listen',`, `  address: '::',`,
/// `  port: 11434`): joined into one failed bind around its `syscall`.
const NODE_PROPERTY: &str = "stacks-bind.node-error-property";

/// How far from its `syscall: 'listen'` line an inspected error's other
/// properties stand (Node prints code, errno, syscall, address, port).
const NODE_SPREAD: u32 = 4;

/// What the OS's text says, by the row it is (catalogs/stacks-bind.toml).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Why {
    /// EADDRINUSE, WSAEADDRINUSE (10048): another socket has the port.
    InUse,
    /// WSAEACCES (10013): the port is reserved (an excluded range) or
    /// forbidden to this process.
    Forbidden,
    /// EADDRNOTAVAIL, WSAEADDRNOTAVAIL (10049): no interface of the host
    /// holds the address.
    NoAddress,
    /// Words no row knows: still a failed bind.
    Other,
}

/// The OS-text rows and what each says.
const TEXTS: &[(&str, Why)] = &[
    ("stacks-bind.os-eaddrinuse", Why::InUse),
    ("stacks-bind.os-wsaeacces", Why::Forbidden),
    ("stacks-bind.os-eaddrnotavail", Why::NoAddress),
];

/// Which OS text `why` is: a code's symbolic name as libuv prints it
/// (Node.js's `code: 'EADDRINUSE'`), which is the row's `name` (libuv
/// translates Winsock's `WSAE…` to the same `E…` name), else the OS's
/// words, by the catalogs' rows.
fn why_of(why: &str) -> Why {
    let catalogs = crate::catalogs::catalogs();
    let named = |id: &str| {
        catalogs
            .row(id)
            .and_then(|r| r.name.as_deref())
            .is_some_and(|n| n == why || n.strip_prefix("WSA") == Some(why))
    };
    if let Some((_, w)) = TEXTS.iter().find(|(id, _)| named(id)) {
        return *w;
    }
    let hits = catalogs.hits(why);
    TEXTS
        .iter()
        .find(|(id, _)| hits.iter().any(|h| h.row.is_some_and(|r| r.id == *id)))
        .map_or(Why::Other, |(_, w)| *w)
}

static META: RuleMeta = RuleMeta {
    id: "bind-refused",
    category: Category::PortInUse,
    severity: Severity::Error,
    summary: "a server could not bind its address: the OS's reason (port taken, port reserved or forbidden, address not on this host) read from its own words, in any language",
    anchors: &[],
    doc: r#"
## What it means
The server could not listen: Go's `listen tcp 127.0.0.1:11434: bind:
<text>`, asyncio's (uvicorn's) `[Errno N] error while attempting to bind on
address ('HOST', PORT): <text>` or Python's `[WinError 10013] <text>`. The
text is the operating system's (strerror, or Windows' FormatMessage in the
system's language) and says why:
- *the port is taken* (EADDRINUSE, WSAEADDRINUSE 10048: `address already in
  use`, `Only one usage of each socket address … is normally permitted`,
  and its translations): another process listens there;
- *the port is reserved or forbidden* (WSAEACCES 10013: `An attempt was made
  to access a socket in a way forbidden by its access permissions`): on
  Windows, a port inside an excluded range (Hyper-V, WSL, Docker, WinNAT),
  a `netsh portproxy` rule, or a firewall or security product;
- *the address is not this host's* (EADDRNOTAVAIL, WSAEADDRNOTAVAIL 10049:
  `cannot assign requested address`): the configured host (OLLAMA_HOST,
  `--host`) names an IP no interface holds, or the network was not up yet.

Node.js says the same with libuv's code: `listen EACCES: permission
denied 127.0.0.1:1234`, the error serialised as JSON
(`{"code":"EACCES",…,"syscall":"listen","address":"127.0.0.1","port":1234}`)
or inspected over several lines (`code: 'EADDRINUSE',` … `syscall:
'listen',` … `port: 11434`), joined into one failed bind. `EADDRINUSE` is
the port taken; `EACCES` the port refused (on Windows an excluded range,
on Linux and macOS a port below 1024 without privileges).

A text no row knows is still a failed bind on that port, at a lower
confidence.

## Why it happens
A second instance or a leftover; an excluded port range or a proxy rule
on Windows; a host address copied from another machine or a network that
comes up after the service.

## How to confirm
Port taken: `ss -ltnp 'sport = :PORT'` (Linux), `netstat -ano | findstr
:PORT` (Windows). Reserved: `netsh interface ipv4 show excludedportrange
protocol=tcp`, `netsh interface portproxy show all`. Address: `ip -br
addr` (Linux), `ipconfig` (Windows).

## How to fix
Stop what holds the port, or pick a port outside the excluded ranges (or
restart WinNAT: `net stop winnat`, `net start winnat`), or bind an address
the host has (`0.0.0.0`) and order the unit after `network-online.target`.

## Safety
Advice only.
"#,
};

/// One failed bind: its line, the OS's reason and where.
struct Bind<'a> {
    message: &'a Message,
    why: Why,
    text: String,
    host: Option<String>,
    port: Option<String>,
}

impl Rule for BindRefused {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let binds = binds(incident);
        // One finding per reason and address, in order of first line.
        let mut groups: Vec<Vec<&Bind>> = Vec::new();
        for b in &binds {
            match groups
                .iter_mut()
                .find(|g| (g[0].why, &g[0].host, &g[0].port) == (b.why, &b.host, &b.port))
            {
                Some(g) => g.push(b),
                None => groups.push(vec![b]),
            }
        }
        for g in groups {
            out.push(finding(&g));
        }
    }
}

/// Every failed bind in one of the shapes that the port rule does not read
/// (its English EADDRINUSE wordings), in input order.
fn binds(incident: &Incident) -> Vec<Bind<'_>> {
    let theirs: Vec<_> = listen::failures(incident)
        .into_iter()
        .map(|l| l.message.span)
        .collect();
    let mut out: Vec<Bind<'_>> = Vec::new();
    for id in SHAPES {
        for (m, c) in incident.known(id) {
            if theirs.contains(&m.span) || out.iter().any(|b| b.message.span == m.span) {
                continue;
            }
            let text = c.get("why").unwrap_or_default().trim();
            let text = text.trim_end_matches(['.', '。']).to_owned();
            out.push(Bind {
                message: m,
                why: why_of(&text),
                text,
                host: c.get("host").map(str::to_owned),
                port: c.get("port").map(str::to_owned),
            });
        }
    }
    for b in node_objects(incident) {
        if !theirs.contains(&b.message.span)
            && !out.iter().any(|o| o.message.span == b.message.span)
        {
            out.push(b);
        }
    }
    // A Python error already read as the port rule's own row.
    out.retain(|b| {
        !incident.known.iter().any(|k| {
            incident.facts.messages[k.message].span == b.message.span
                && k.hit.row.is_some_and(|r| {
                    r.rule.as_deref() == Some("address-already-in-use")
                        && !r.id.starts_with("stacks-bind.os-")
                })
        })
    });
    out.sort_by_key(|b| b.message.span);
    out
}

/// Node's inspected system errors whose syscall is `listen`: each joined
/// with the code, address and port printed around it, cited at its code
/// line (the syscall's when no code is printed).
fn node_objects(incident: &Incident) -> Vec<Bind<'_>> {
    let props: Vec<_> = incident.known(NODE_PROPERTY).collect();
    let mut out = Vec::new();
    for (m, hit) in &props {
        if hit.get("syscall") != Some("listen") {
            continue;
        }
        let near = |s: crate::source::Span| {
            s.source == m.span.source && s.line.abs_diff(m.span.line) <= NODE_SPREAD
        };
        let get = |key: &str| {
            props
                .iter()
                .filter(|(p, _)| near(p.span))
                .find_map(|(p, h)| h.get(key).map(|v| (*p, v.to_owned())))
        };
        let code = get("code");
        let text = code
            .as_ref()
            .map_or_else(|| "listen failed".to_owned(), |(_, c)| c.clone());
        out.push(Bind {
            message: code.as_ref().map_or(*m, |(p, _)| *p),
            why: why_of(&text),
            text,
            host: get("host").map(|(_, h)| h),
            port: get("port").map(|(_, p)| p),
        });
    }
    out
}

/// Who refused a port: Windows' WSAEACCES, or libuv's EACCES, which any
/// system reports (with the port, for a holder's check).
enum Refused<'a> {
    Windows,
    AnySystem { port: &'a str },
}

/// The chain, explanation and advice for a port the system refuses; for
/// libuv's EACCES also a holder's check and the privileged ports of Linux
/// and macOS.
fn forbidden(f: &mut Finding, by: Refused<'_>) {
    f.chain.push("the port is reserved by Windows (an excluded range, a portproxy rule) or refused by a firewall or security product".to_owned());
    f.explanation = "WSAEACCES (10013) on bind: not a listener of the same port but a reservation: Windows' excluded port ranges (reserved by Hyper-V, WSL or Docker, often after an update, and moved by WinNAT at each boot), a `netsh interface portproxy` rule on the address, or a product that filters sockets.".to_owned();
    if let Refused::AnySystem { port } = by {
        f.explanation.push_str(" libuv reports it as EACCES (errno -4092 on Windows); on Linux and macOS EACCES on listen is a port below 1024 asked for without privileges.");
        f.actions.push(Action::advice(
            "see whether another program holds the port (Windows, then Linux and macOS)",
            Some(&format!(
                "netstat -ano | findstr :{port}; ss -ltnp 'sport = :{port}'"
            )),
        ));
    }
    f.actions.push(Action::advice(
        "list the excluded port ranges and the portproxy rules",
        Some("netsh interface ipv4 show excludedportrange protocol=tcp & netsh interface portproxy show all"),
    ));
    f.actions.push(Action::advice(
        "pick a port outside the excluded ranges (OLLAMA_HOST, --port), delete the portproxy rule, or restart WinNAT to release the reservation (as administrator)",
        Some("net stop winnat & net start winnat"),
    ));
}

/// Cites each distinct line of the group, with its count.
fn cite(f: &mut Finding, g: &[&Bind]) {
    let text = &g[0].text;
    for (m, n) in distinct(g.iter().map(|b| b.message)) {
        let times = if n > 1 {
            format!(" ({n}x)")
        } else {
            String::new()
        };
        f.evidence_marked(m.span, format!("the bind failed{times}: {text}"), text);
    }
}

/// The finding for the binds of one reason and address.
fn finding(g: &[&Bind]) -> Finding {
    let b = g[0];
    // An address the host lacks is often harmless (uvicorn trying `::1` in
    // a container without IPv6, fixtures/real/073): a warning; the unit's
    // death, if any, is the error.
    let severity = if b.why == Why::NoAddress {
        Severity::Warning
    } else {
        META.severity
    };
    let mut f = Finding::new(META.id, META.category, severity);
    cite(&mut f, g);
    let addr = match (&b.host, &b.port) {
        (Some(h), Some(p)) if !h.is_empty() => format!("{h}:{p}"),
        (_, Some(p)) => format!("port {p}"),
        _ => "its address".to_owned(),
    };
    let port = b.port.as_deref().unwrap_or("PORT");
    f.condition(format!("the server failed to bind {addr}"), true);
    f.condition("the OS's reason is a known one", b.why != Why::Other);
    f.chain
        .push(format!("the server exited: it could not bind {addr}"));
    match b.why {
        Why::InUse => {
            f.title = format!("{addr} is already in use");
            f.headline = format!(
                "The server could not bind {addr}: another process listens there (the OS said: {}).",
                b.text
            );
            f.chain.push(
                "another process (often a running instance of the same server) holds the port"
                    .to_owned(),
            );
            f.explanation = "EADDRINUSE (WSAEADDRINUSE on Windows): a socket already listens on the port, usually the server itself already running (a service, a tray app) or a leftover.".to_owned();
            f.actions.push(Action::advice(
                "find the process that listens on the port (Linux, then Windows)",
                Some(&format!(
                    "ss -ltnp 'sport = :{port}'; netstat -ano | findstr :{port}"
                )),
            ));
            f.actions.push(Action::advice(
                "use the instance that runs, or stop it (quit it from the tray, stop its service) before starting another; otherwise give this one another port",
                None,
            ));
            f.confidence = 0.85;
        }
        Why::Forbidden if b.text == "EACCES" => {
            // libuv's code (Node.js): EACCES on any system.
            f.title = format!("{addr} is reserved or forbidden (EACCES)");
            f.headline = format!(
                "The server could not bind {addr}: the system refused the port (EACCES, permission denied): on Windows a port inside an excluded port range (Hyper-V, WSL, Docker, WinNAT) or held by a portproxy rule, which no listener listing shows; on Linux and macOS a port below 1024 without privileges."
            );
            forbidden(&mut f, Refused::AnySystem { port });
            f.confidence = 0.8;
        }
        Why::Forbidden => {
            f.title = format!("{addr} is reserved or forbidden (WSAEACCES)");
            f.headline = format!(
                "The server could not bind {addr}: Windows forbids the port (WSAEACCES: {}); it lies in an excluded port range (Hyper-V, WSL, Docker, WinNAT) or a portproxy rule or security product holds it, which no listener listing shows.",
                b.text
            );
            forbidden(&mut f, Refused::Windows);
            f.confidence = 0.8;
        }
        Why::NoAddress => {
            let host = b.host.as_deref().unwrap_or("the address");
            f.title = format!("{host} is not an address of this host");
            f.headline = format!(
                "The server could not bind {addr}: no interface of this host holds {host} (EADDRNOTAVAIL: {}); the configured host (OLLAMA_HOST, --host) names another machine's IP, or the network was not up yet.",
                b.text
            );
            f.chain
                .push(format!("no interface of this host holds {host}"));
            f.explanation = "EADDRNOTAVAIL: bind() asked for an IP address this host does not have: a host setting copied from elsewhere, a DHCP address that changed, or a service started before its network.".to_owned();
            f.actions.push(Action::advice(
                "list the addresses this host holds",
                Some("ip -br addr"),
            ));
            f.actions.push(Action::advice(
                "bind 0.0.0.0 or an address listed there; for a systemd unit, order it after the network: After=network-online.target and Wants=network-online.target",
                None,
            ));
            f.confidence = 0.85;
        }
        Why::Other => {
            f.title = format!("could not bind {addr}");
            f.headline = format!("The server could not bind {addr}: {}.", b.text);
            f.chain.push(format!("the OS refused the bind: {}", b.text));
            f.explanation = "A failed bind whose reason text no catalog row knows (a translation not yet listed, or another errno).".to_owned();
            f.actions.push(Action::advice(
                "see what listens on the port and whether the address is this host's",
                Some(&format!("ss -ltnp 'sport = :{port}'; ip -br addr")),
            ));
            f.confidence = 0.55;
        }
    }
    f.occurrences = g.len() as u32;
    f
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    fn one(text: &str) -> crate::rules::Finding {
        let mut f = findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{text}\n{f:#?}");
        f.remove(0)
    }

    /// libuv's codes name the OS-text rows by their `name` (Winsock's
    /// `WSAE…` as libuv translates it); words no row knows stay `Other`.
    #[test]
    fn libuv_codes_are_the_rows_names() {
        use super::{Why, why_of};
        assert!(why_of("EADDRINUSE") == Why::InUse);
        assert!(why_of("EACCES") == Why::Forbidden);
        assert!(why_of("EADDRNOTAVAIL") == Why::NoAddress);
        assert!(why_of("ECONNRESET") == Why::Other);
        assert!(why_of("address already in use") == Why::InUse);
    }

    /// ollama #4999, #2627: WSAEACCES in Go's shape, a reserved port.
    #[test]
    fn a_forbidden_port_is_a_reservation_not_a_listener() {
        let f = one(
            "Error: listen tcp 127.0.0.1:11434: bind: An attempt was made to access a socket in a way forbidden by its access permissions.\n",
        );
        assert!(
            f.title.contains("127.0.0.1:11434 is reserved"),
            "{}",
            f.title
        );
        assert!(format!("{:?}", f.actions).contains("excludedportrange"));
        // The next paste: asyncio's shape, in Chinese (zhenxun_bot #734).
        let f = one(
            "06-01 01:26:50 [ERROR] uvicorn | [Errno 10013] error while attempting to bind on address ('127.0.0.1', 5432): 以一种访问权限不允许的方式做了一个访问套接字的尝试。\n",
        );
        assert!(
            f.title.contains("127.0.0.1:5432 is reserved"),
            "{}",
            f.title
        );
        // Python's own, no address (osint_toolkit #3).
        let f = one(
            "ERROR:    [WinError 10013] An attempt was made to access a socket in a way forbidden by its access permissions\n",
        );
        assert!(f.title.contains("reserved"), "{}", f.title);
    }

    /// lmstudio-bug-tracker#106 (JSON) and lmstudio-js#336 (the message):
    /// Node's EACCES on listen, LM Studio's default port.
    #[test]
    fn node_eacces_on_listen_is_a_refused_port() {
        let f = one(
            "[ERROR] Error starting server {\"code\":\"EACCES\",\"errno\":-4092,\"syscall\":\"listen\",\"address\":\"127.0.0.1\",\"port\":1234}\n",
        );
        assert_eq!(f.title, "127.0.0.1:1234 is reserved or forbidden (EACCES)");
        crate::testing::advises(&f, "findstr :1234");
        crate::testing::advises(&f, "excludedportrange");
        let f =
            one("Error starting server Error: listen EACCES: permission denied 127.0.0.1:1234\n");
        assert_eq!(f.title, "127.0.0.1:1234 is reserved or forbidden (EACCES)");
    }

    /// Gimer-Studios/APIMyLlama#1: Node's error object inspected over
    /// several lines, EADDRINUSE on Ollama's port (its closing brace left
    /// out).
    #[test]
    fn node_inspected_error_object_is_one_failed_bind() {
        let text = "\
Emitted 'error' event on Server instance at:
    at emitErrorNT (net.js:1337:8)
    at processTicksAndRejections (internal/process/task_queues.js:84:21) {
  code: 'EADDRINUSE',
  errno: 'EADDRINUSE',
  syscall: 'listen',
  address: '::',
  port: 11434
";
        let f = one(text);
        assert_eq!(f.title, ":::11434 is already in use");
        crate::testing::cites_line(&f, 4);
        // An inspected error of another syscall is no failed bind.
        let other = text.replace("'listen'", "'connect'");
        assert!(findings_of(super::META.id, &other).is_empty());
    }

    /// krita-ai-diffusion #616 and #774: the plugin's rewrite of its
    /// ComfyUI server's bind error (no errno; its help link after the
    /// OS's text), taken and refused, in Simplified and Traditional Chinese;
    /// and the same OS texts in the other display languages, by shape.
    #[test]
    fn krita_plugin_bind_error_in_any_language() {
        let f = one(
            "2024-04-15 00:57:57,995 WARNING Failed to launch/connect server at startup: Error during server startup: Could not bind on address ('127.0.0.1', 8188): 通常每个套接字地址(协议/网络地址/端口)只允许使用一次。. <a href='https://github.com/Acly/krita-ai-diffusion/wiki/Common-Issues'>More information...</a>\n",
        );
        assert_eq!(f.title, "127.0.0.1:8188 is already in use");
        assert!(!f.headline.contains("<a href"), "{}", f.headline);
        let f = one(
            "2024-06-10 22:03:17,454 WARNING Failed to launch/connect server at startup: Error during server startup: Could not bind on address ('127.0.0.1', 8188): 嘗試存取通訊端被拒絕，因為存取權限不足。. <a href='https://github.com/Acly/krita-ai-diffusion/wiki/Common-Issues'>More information...</a>\n",
        );
        assert!(
            f.title.contains("127.0.0.1:8188 is reserved"),
            "{}",
            f.title
        );
        // uvicorn's `[Errno 10048] error while attempting to bind` in any
        // language is the address-already-in-use rule's (its samples).
        for (line, title) in [
            (
                "[GIN-debug] [ERROR] listen tcp 127.0.0.1:8080: bind: Normalerweise darf jede Socketadresse (Protokoll, Netzwerkadresse oder Anschluss) nur jeweils einmal verwendet werden.\n",
                "127.0.0.1:8080 is already in use",
            ),
            (
                "PermissionError: [WinError 10013] アクセス許可で禁じられた方法でソケットにアクセスしようとしました。\n",
                "reserved",
            ),
        ] {
            let f = one(line);
            assert!(f.title.contains(title), "{line}: {}", f.title);
        }
    }

    /// ollama #8261: WSAEADDRINUSE in Turkish.
    #[test]
    fn a_localized_address_in_use() {
        let f = one(
            "Error: listen tcp 127.0.0.1:11434: bind: Normal olarak her yuva adresi (iletişim kuralı/ağ adresi/bağlantı noktası) için yalnızca bir kullanıma izin veriliyor.\n",
        );
        assert_eq!(f.title, "127.0.0.1:11434 is already in use");
        // The English wording is the port rule's, not this one's.
        assert!(
            findings_of(
                super::META.id,
                "Error: listen tcp 127.0.0.1:11434: bind: address already in use\n"
            )
            .is_empty()
        );
    }

    /// ollama #14367 (Go) and llama-cpp-python #77 (uvicorn, IPv6):
    /// EADDRNOTAVAIL, an address the host does not hold.
    #[test]
    fn an_address_the_host_does_not_hold() {
        let f = one(
            "Feb 22 17:12:20 user1-WS ollama[178780]: Error: listen tcp 192.168.1.33:11434: bind: cannot assign requested address\n",
        );
        assert_eq!(f.title, "192.168.1.33 is not an address of this host");
        let f = one(
            "ERROR:    [Errno 99] error while attempting to bind on address ('::1', 8000, 0, 0): cannot assign requested address\n",
        );
        assert_eq!(f.title, "::1 is not an address of this host");
    }

    /// Words no row knows after `bind:` are still a failed bind, lower.
    #[test]
    fn unknown_words_after_bind_are_still_a_failed_bind() {
        // mmatczuk/go-http-tunnel #122: EACCES on a privileged port.
        let f = one("failed to start HTTP: listen tcp :80: bind: permission denied\n");
        assert_eq!(f.title, "could not bind port 80");
        assert!(f.confidence < 0.7);
        // A port named in passing is no failure.
        assert!(
            findings_of(
                super::META.id,
                "time=2025-04-17 level=INFO msg=\"Listening on 127.0.0.1:11434 (version 0.6.5)\"\n"
            )
            .is_empty()
        );
    }
}
