//! `stale-notebook-server`: earlier Jupyter notebook servers still running.
//! A notebook server whose port is taken does not fail: it logs `The port N
//! is already in use, trying another port.` and serves on the next one, so
//! the earlier server (and its kernels, with whatever GPU memory they hold)
//! goes on unseen; `jupyter notebook list` shows several servers at once.
//! Both are read from catalogs/web-servers.toml. A port-taken line printed
//! under a typed `jupyter notebook list` is the list command's own probe
//! (notebook 4.0), not a server start.

use std::collections::BTreeSet;

use crate::catalogs::Hit;
use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::distinct;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: StaleNotebookServer = StaleNotebookServer;

pub struct StaleNotebookServer;

/// `The port N is already in use, trying another port.`
const TAKEN: &str = "web-servers.jupyter-port-taken";
/// The URL a server serves on (its start-up banner, or a list row).
const URL: &str = "web-servers.jupyter-server-url";
/// A row of `jupyter notebook list`.
const LISTED: &str = "web-servers.jupyter-list-row";
/// `jupyter notebook stop` found no runtime file.
const NONE_RUNNING: &str = "web-servers.jupyter-no-running-servers";
/// `jupyter notebook stop PORT` asked a server to shut down.
const STOPPING: &str = "web-servers.jupyter-stop-shutting-down";

static META: RuleMeta = RuleMeta {
    id: "stale-notebook-server",
    category: Category::StaleServingInstance,
    severity: Severity::Error,
    summary: "earlier Jupyter notebook servers still run: the new one moved to another port, or the list shows several",
    anchors: &[
        "is already in use, trying another",
        "/?token=",
        "There are no running servers",
        "Shutting down server on port",
    ],
    doc: r#"
## What it means
A Jupyter notebook server found its port taken (`The port 8888 is already
in use, trying another port.`, logged at info level) and serves on the
next free one; or `jupyter notebook list` shows two servers or more. The
servers it collided with are earlier notebook servers still running, each
with its kernels, and a kernel that used the GPU keeps its memory until
its server stops.

The finding names every port found taken and the port the new server went
to (its `is running at` URL), or every listed server's port. Where
`jupyter notebook stop` says `There are no running servers` although a
port was taken, the earlier server is one Jupyter no longer tracks (its
runtime file removed, another environment or user): only its process can
stop it.

A port-taken line printed by `jupyter notebook list` (or `stop`) typed at
the prompt above it is no start: notebook 4.0's subcommands probed the port
of the very server they list (jupyter/notebook#717, fixed in 4.1), and is
not read.

## Why it happens
A terminal closed with its server running, a Ctrl-C not confirmed (the
server asks before it stops), a notebook started again from another
environment: each leaves a server behind, and each new start walks one
port further.

## How to confirm
`jupyter notebook list` (`jupyter server list`) shows the servers Jupyter
knows; `lsof -iTCP:8888 -sTCP:LISTEN` or `ss -ltnp 'sport = :8888'` names
the process on a port the list does not show.

## How to fix
Stop the earlier servers (`jupyter notebook stop PORT`, or the process the
port's listing names), then start one server on the port you use.

## Safety
Advice only: a server on the port may be another user's.
"#,
};

/// A port a line names, with the line.
type Port<'a> = (&'a Message, u16);

fn port_of(hit: &Hit<'_>) -> Option<u16> {
    hit.get("port")?.parse().ok()
}

impl Rule for StaleNotebookServer {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let listed: Vec<Port<'_>> = incident
            .known(LISTED)
            .filter_map(|(m, h)| Some((m, port_of(h)?)))
            .collect();
        let taken: Vec<Port<'_>> = incident
            .known(TAKEN)
            .filter(|(m, _)| !printed_by_list(incident, m))
            .filter_map(|(m, h)| Some((m, port_of(h)?)))
            .collect();
        let mut f = Finding::new(META.id, META.category, META.severity);
        if !taken.is_empty() {
            moved(&mut f, incident, &taken, &listed);
        } else if distinct_ports(&listed).len() >= 2 {
            several(&mut f, incident, &listed);
        } else if let Some((m, _)) = incident
            .known(TAKEN)
            .find(|(m, _)| printed_by_list(incident, m))
        {
            out.push(probe(m));
            return;
        } else {
            return;
        }
        out.push(f);
    }
}

/// Whether `m` is output of a `jupyter notebook list` (`stop`, `jupyter
/// server list`) typed at the prompt above it: notebook 4.0's subcommands
/// set up the whole server application, port probe included, and log the
/// port taken by the very server they list (jupyter/notebook#717, fixed in
/// 4.1). No server started there, so the line says nothing of a stale one.
fn printed_by_list(incident: &Incident, m: &Message) -> bool {
    let typed = &incident.facts.typed_commands;
    typed.iter().enumerate().any(|(i, c)| {
        let next = typed
            .get(i + 1)
            .filter(|n| n.span.source == c.span.source)
            .map(|n| n.span.line);
        let words: Vec<&str> = c.command.split_whitespace().collect();
        let jupyter = words.iter().position(|w| w.starts_with("jupyter"));
        let sub = jupyter
            .and_then(|j| words.get(j + 1..))
            .is_some_and(|rest| {
                rest.iter()
                    .find(|w| !matches!(**w, "notebook" | "server" | "lab") && !w.starts_with('-'))
                    .is_some_and(|w| matches!(*w, "list" | "stop"))
            });
        sub && c.span.source == m.span.source && c.prints_line(m.span.line, next)
    })
}

/// The list command's own port probe, read as such: no failure, and the
/// line's catalog row says no more.
fn probe(m: &Message) -> Finding {
    let mut f = Finding::new(META.id, META.category, Severity::Info);
    f.evidence(
        m.span,
        "printed by the `jupyter notebook list` typed above it: the command's own port probe, no server start",
    );
    f.condition("the line is output of a list or stop command", true);
    f.title = "Jupyter's list command probed the port of the server it lists".to_owned();
    f.headline = "The port-taken line is output of `jupyter notebook list`, whose notebook 4.0 version probes the port of the very server it lists (jupyter/notebook#717, fixed in 4.1): no server was started or refused, and one server on the port is no stale one.".to_owned();
    f.explanation = "Notebook 4.0's subcommands set up the whole server application, port probe included; the server they collide with is the one they list.".to_owned();
    f.confidence = 0.5;
    f
}

fn distinct_ports(ports: &[Port<'_>]) -> Vec<u16> {
    let mut seen = BTreeSet::new();
    ports
        .iter()
        .map(|(_, p)| *p)
        .filter(|p| seen.insert(*p))
        .collect()
}

fn list(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The new server moved past taken ports: name them and where it went.
fn moved(f: &mut Finding, incident: &Incident, taken: &[Port<'_>], listed: &[Port<'_>]) {
    let ports = distinct_ports(taken);
    for (m, n) in distinct(taken.iter().map(|(m, _)| *m)).into_iter().take(3) {
        f.evidence(m.span, format!("the port was taken ({n}x)"));
    }
    let last = taken.iter().map(|(m, _)| m.span).max();
    // The URL the new server printed after the last taken port (not a
    // list row, which is another server).
    let went = incident
        .known(URL)
        .filter(|(m, _)| {
            last.is_some_and(|l| m.span.source == l.source && m.span > l)
                && !listed.iter().any(|(r, _)| r.span == m.span)
        })
        .find_map(|(m, h)| Some((m, port_of(h)?)));
    if let Some((m, p)) = went {
        f.evidence(m.span, format!("the new server serves on port {p} instead"));
    }
    let untracked = incident.known(NONE_RUNNING).next().map(|(m, _)| m);
    if let Some(m) = untracked {
        f.evidence(
            m.span,
            "Jupyter has no runtime file of the server that holds the port",
        );
    }
    let n = ports.len();
    let held = list(&ports);
    f.condition(
        format!("the notebook server found port(s) {held} taken and moved on"),
        true,
    );
    f.condition(
        "the port's holder is named (a list row or a socket listing)",
        false,
    );
    let servers = if n == 1 {
        "an earlier notebook server still holds it".to_owned()
    } else {
        format!("{n} earlier notebook servers still hold them")
    };
    let to = went
        .map(|(_, p)| format!(", and the new server moved to {p}"))
        .unwrap_or_default();
    f.title = format!("port(s) {held} held by earlier Jupyter servers");
    f.headline = format!(
        "Jupyter found port(s) {held} already in use{to}: {servers}, with its kernels (and any GPU memory they hold).{}",
        if untracked.is_some() {
            " `jupyter notebook stop` does not know it, so only its process can stop it."
        } else {
            ""
        }
    );
    f.chain
        .push(format!("the notebook server started on another port{to}"));
    f.chain
        .push(format!("port(s) {held} were taken: {servers}"));
    f.explanation = "A notebook server whose port is taken moves to the next one instead of failing; the server it collided with, most often the user's own earlier one, keeps running with its kernels.".to_owned();
    let first = ports[0];
    advise(f, first);
    f.confidence = if untracked.is_some() { 0.7 } else { 0.6 };
}

/// `jupyter notebook list` shows several servers: name them.
fn several(f: &mut Finding, incident: &Incident, listed: &[Port<'_>]) {
    let ports = distinct_ports(listed);
    for (m, p) in listed.iter().take(6) {
        f.evidence(m.span, format!("a notebook server runs on port {p}"));
    }
    let stop = incident.known(STOPPING).next().map(|(m, _)| m);
    if let Some(m) = stop {
        f.evidence(m.span, "a stop command was run on one of them");
    }
    let held = list(&ports);
    f.condition(
        format!("jupyter notebook list shows {} servers", ports.len()),
        true,
    );
    f.title = format!("{} Jupyter servers running (ports {held})", ports.len());
    f.headline = format!(
        "{} Jupyter notebook servers are running at once, on ports {held}: servers of earlier sessions never shut down, each with its kernels (and any GPU memory they hold).",
        ports.len()
    );
    f.chain.push(format!(
        "{} notebook servers are running (ports {held})",
        ports.len()
    ));
    f.chain
        .push("earlier sessions' servers were never shut down".to_owned());
    f.explanation = "Each notebook server started and not stopped (a closed terminal, an unconfirmed Ctrl-C) keeps running with its kernels; the list shows every one whose runtime file remains.".to_owned();
    advise(f, ports[0]);
    f.confidence = if stop.is_some() { 0.6 } else { 0.5 };
}

fn advise(f: &mut Finding, port: u16) {
    f.actions.push(Action::advice(
        "list the notebook servers Jupyter knows, and the process on the port",
        Some(&format!(
            "jupyter notebook list; jupyter server list; lsof -iTCP:{port} -sTCP:LISTEN"
        )),
    ));
    f.actions.push(Action::advice(
        "stop the servers you no longer use (`jupyter notebook stop PORT`, or by the PID the port's listing names when Jupyter does not know it), then start one server on the port you use",
        None,
    ));
}

#[cfg(test)]
mod tests {
    use crate::rules::{Category, Severity};

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// https://github.com/ipython/ipykernel/issues/488: the new server
    /// moves from 8888 to 8889, and `jupyter notebook stop 8888` knows no
    /// server: the taken port, where the new one went and the untracked
    /// holder are all cited.
    #[test]
    fn a_taken_port_names_the_earlier_server_and_where_the_new_one_went() {
        let text = "Starting new server\n\
[I 16:42:01.552 NotebookApp] The port 8888 is already in use, trying another port.\n\
[I 16:42:01.559 NotebookApp] Serving notebooks from local directory: /Users/bhaskarn\n\
[I 16:42:01.559 NotebookApp] The Jupyter Notebook is running at:\n\
[I 16:42:01.559 NotebookApp] http://localhost:8889/?token=a4878d9ce97369c99772a2622d6a31bfd6bee4ef9cc8ac8c\n\
(env_datascience) bhaskarn@macbookpro:~$ jupyter notebook stop 8888\n\
There are no running servers\n";
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::StaleServingInstance);
        assert!(f[0].severity <= Severity::Error);
        let lines: Vec<u32> = f[0].evidence.iter().map(|e| e.span.line).collect();
        assert_eq!(lines, [2, 5, 7], "{f:?}");
        assert!(f[0].headline.contains("8888") && f[0].headline.contains("8889"));
    }

    /// https://github.com/jupyter/notebook/issues/1007 (notebook 4.0's
    /// `random` wording, the URL on the banner's own line) and
    /// https://github.com/jupyter/notebook/issues/4573 (LabApp walking five
    /// ports): every taken port is named.
    #[test]
    fn every_taken_port_is_named_in_both_wordings() {
        let old = "[user@ip-xxx-xx-xx-xxx notebook]$ [I 08:39:27.901 NotebookApp] The port 9999 is already in use, trying another random port.\n\
[I 08:39:27.901 NotebookApp] The port 10000 is already in use, trying another random port.\n\
[I 08:39:27.902 NotebookApp] The port 10001 is already in use, trying another random port.\n\
[I 08:39:27.905 NotebookApp] The Jupyter Notebook is running at: https://[all ip addresses on your system]:10002/\n";
        let f = findings(old);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].headline.contains("9999, 10000, 10001"),
            "{}",
            f[0].headline
        );
        assert!(
            f[0].headline.contains("moved to 10002"),
            "{}",
            f[0].headline
        );
        let lab = "[I 16:06:04.323 LabApp] The port 8888 is already in use, trying another port.\n\
[I 16:06:04.324 LabApp] The port 8889 is already in use, trying another port.\n\
[I 16:06:04.324 LabApp] The port 8890 is already in use, trying another port.\n\
[I 16:06:04.325 LabApp] The port 8891 is already in use, trying another port.\n\
[I 16:06:04.325 LabApp] The port 8892 is already in use, trying another port.\n";
        let f = findings(lab);
        assert!(
            f[0].headline.contains("8888, 8889, 8890, 8891, 8892"),
            "{}",
            f[0].headline
        );
    }

    /// https://github.com/jupyter/notebook/issues/2844: four servers
    /// listed; one listed server (a healthy list) is no finding.
    #[test]
    fn a_list_of_several_servers_names_them_and_one_is_nothing() {
        let list = "jupyter notebook list\n\
http://localhost:8889/?token=blah :: /Users/me/storyfit/data-mining/research\n\
http://localhost:8891/?token=blah2 :: /Users/me/storyfit/data-mining\n\
http://localhost:8890/?token=blah23 :: /Users/me/storyfit/data-mining/research\n\
http://localhost:8888/?token=blah54 :: /Users/me/storyfit/data-mining/research\n\
jupyter notebook stop 8888\n\
Shutting down server on port 8888 ...\n";
        let f = findings(list);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].headline.contains("8889, 8891, 8890, 8888"),
            "{}",
            f[0].headline
        );
        let one = "jupyter notebook list\n\
http://localhost:8889/?token=blah :: /Users/me/storyfit/data-mining/research\n";
        assert!(findings(one).is_empty());
    }

    /// jupyter/notebook#717 (notebook 4.0.6), reduced: `jupyter notebook
    /// list` logs the port taken by the one server it lists. Assembled from
    /// other threads' lines: the prompt and row of jupyter/notebook#2844,
    /// the taken line of jupyter/notebook#1007. The same line with no list
    /// typed above it is still a start that moved.
    #[test]
    fn the_list_subcommands_own_port_probe_is_no_start() {
        let listed = "$ jupyter notebook list\n\
[I 08:39:27.901 NotebookApp] The port 8888 is already in use, trying another random port.\n\
Currently running servers:\n\
http://localhost:8888/?token=blah54 :: /Users/me/storyfit/data-mining/research\n";
        let f = findings(listed);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Info);
        let all = crate::testing::analyze_paste(listed).diagnosis.findings;
        assert!(all.iter().all(|f| f.severity == Severity::Info), "{all:?}");
        let started = "$ jupyter notebook\n\
[I 08:39:27.901 NotebookApp] The port 8888 is already in use, trying another random port.\n";
        assert_eq!(findings(started).len(), 1);
    }
}
