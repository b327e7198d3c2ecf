//! `server-older-than-client`: a CLI reports its own version beside the
//! version of the server that answered it, and the server is the older of
//! the two: the process serving is a previous install's, still running
//! after the binary was replaced (an upgrade without a restart, a second
//! install beside the first).

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: ServerOlderThanClient = ServerOlderThanClient;

pub struct ServerOlderThanClient;

/// One program whose CLI prints the server's version and then its own when
/// they differ: the two catalog rows, and what to tell the operator.
struct Pair {
    product: &'static str,
    /// The server's version as the CLI prints it (`ollama version is X`).
    server: &'static str,
    /// The CLI's own version, printed only when it differs (`Warning:
    /// client version is Y`).
    client: &'static str,
    /// How to find the process that answered.
    check: &'static str,
    /// How to put the new server in its place.
    fix: &'static str,
}

const PAIRS: &[Pair] = &[Pair {
    product: "Ollama",
    server: "stacks-ollama.server-version",
    client: "stacks-ollama.client-version-differs",
    check: "pgrep -fa ollama; ss -ltnp 'sport = :11434'",
    fix: "stop the old Ollama server (`systemctl restart ollama` under systemd, quit the menu-bar or tray app, or end the old `ollama serve`) so the newly installed one starts, then run `ollama -v` again: no warning when both agree",
}];

/// The CLI prints the two lines one after the other (`versionHandler`);
/// a paste may put a blank line or a prompt between them.
const MAX_GAP: u32 = 2;

static META: RuleMeta = RuleMeta {
    id: "server-older-than-client",
    category: Category::StaleServingInstance,
    severity: Severity::Error,
    summary: "the server that answered the CLI is older than the CLI just installed: a previous install's server still runs",
    anchors: &[],
    doc: r#"
## What it means
Some CLIs ask the running server for its version and print their own
beside it when the two differ: Ollama's `ollama -v` prints `ollama version
is 0.1.31` (the server's) and then `Warning: client version is 0.1.38`
(its own). A server older than the client is the process of a previous
install that is still running and still answering on the port: the new
binary is on disk, the old one serves. Requests then get the old server's
behaviour (a model that `requires a newer version of Ollama`, an API the
new client expects missing).

## Why it happens
1. An upgrade replaced the binary but did not restart the service (an
   install script run while the old server kept running, a package
   upgrade without a restart).
2. Two installs side by side (a native server beside a container, a
   menu-bar app beside a manual `ollama serve`): the CLI reaches the
   older one.

## How to confirm
Find the process listening on the server's port and its binary's
version: `pgrep -fa ollama; ss -ltnp 'sport = :11434'`.

## How to fix
Stop the old server and start the new one (restart the service, quit the
old app), then check that the CLI no longer warns.

## Safety
Advice only: no process is signalled.
"#,
};

/// `0.1.38`, `v0.5.11`, `0.1.32-rc1` as numbers to compare; the
/// pre-release suffix is ignored.
fn version(text: &str) -> Option<Vec<u64>> {
    let text = text.trim().trim_start_matches('v');
    let core = text.split(['-', '+']).next()?;
    let parts: Option<Vec<u64>> = core.split('.').map(|p| p.parse().ok()).collect();
    parts.filter(|p| !p.is_empty())
}

/// The server line printed just before a client line, in the same input.
fn server_before<'a>(
    incident: &'a Incident,
    pair: &Pair,
    client: &Message,
) -> Option<(&'a Message, &'a str)> {
    incident
        .known(pair.server)
        .filter(|(m, _)| {
            m.span.source == client.span.source
                && m.span.line < client.span.line
                && client.span.line - m.span.line <= MAX_GAP
        })
        .filter_map(|(m, hit)| hit.get("version").map(|v| (m, v)))
        .last()
}

impl Rule for ServerOlderThanClient {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for pair in PAIRS {
            let found = incident.known(pair.client).find_map(|(c, hit)| {
                let client = hit.get("version")?;
                let (s, server) = server_before(incident, pair, c)?;
                (version(server)? < version(client)?).then_some((s, server, c, client))
            });
            let Some((s, server, c, client)) = found else {
                continue;
            };
            out.push(finding(pair, s, server, c, client));
        }
    }
}

fn finding(pair: &Pair, s: &Message, server: &str, c: &Message, client: &str) -> Finding {
    let product = pair.product;
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.evidence_marked(
        s.span,
        format!("the {product} server that answered is version {server}"),
        server,
    );
    f.evidence_marked(
        c.span,
        format!("the {product} CLI is version {client}, newer than the server it reached"),
        client,
    );
    f.condition("the CLI printed the server's version and its own", true);
    f.condition("the server's version is older than the client's", true);
    f.title =
        format!("an older {product} server ({server}) still answers the newer client ({client})");
    f.headline = format!(
        "The {product} server that answered is version {server}, older than the client {client}: a previous install's server is still running and serving, while the new binary is installed but not running."
    );
    f.chain.push(format!(
        "the CLI {client} reached a server at version {server}"
    ));
    f.chain.push(format!(
        "the old {product} server was never stopped when the new one was installed, and still holds the port"
    ));
    f.explanation = format!(
        "{product}'s CLI asks the server at its address for its version and warns when it is not its own; an older server is the process of the previous install, still running."
    );
    f.actions.push(Action::advice(
        format!("find the process that answered on {product}'s port"),
        Some(pair.check),
    ));
    f.actions.push(Action::advice(pair.fix, None));
    f.confidence = 0.75;
    f
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    #[test]
    fn an_older_server_than_the_client_is_a_stale_instance() {
        // ollama/ollama#4471: the install script upgraded the binary only.
        let f = findings_of(
            super::META.id,
            "$ ollama --version\nollama version is 0.1.31\nWarning: client version is 0.1.38\n",
        );
        assert_eq!(f.len(), 1);
        assert!(f[0].headline.contains("0.1.31") && f[0].headline.contains("0.1.38"));
        // ollama/ollama#11592: 0.5.11 against 0.10.0 compares as numbers.
        let f = findings_of(
            super::META.id,
            "ollama version is 0.5.11\nWarning: client version is 0.10.0\n",
        );
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn no_server_or_a_newer_server_is_not() {
        // ollama/ollama (fixtures/real/448): no server answered at all.
        let none = "Warning: could not connect to a running Ollama instance\nWarning: client version is 0.3.4\n";
        assert!(findings_of(super::META.id, none).is_empty());
        // An old CLI reaching a newer server: the CLI is stale, not the server.
        let newer = "ollama version is 0.6.5\nWarning: client version is 0.5.7\n";
        assert!(findings_of(super::META.id, newer).is_empty());
        // The server's version alone.
        assert!(findings_of(super::META.id, "ollama version is 0.7.0\n").is_empty());
    }

    #[test]
    fn versions_compare_as_numbers() {
        assert!(super::version("0.5.11") < super::version("0.10.0"));
        assert!(super::version("v0.1.32-rc1") == super::version("0.1.32"));
        assert!(super::version("abc").is_none());
    }
}
