//! A failed bind whose port another instance of the same server holds: the
//! listener a socket listing (`lsof -i`, `ss -ltnp`, `netstat -tlnp`) or a
//! process's command line names is a process of the failing server's own
//! stack (the serving stacks' names, stale_serving_process/titles.rs). The
//! failing server is known by its own bind line (SGLang's, llama.cpp's), or
//! else by the port: the listener's stack's default port (Ollama's 11434)
//! is what a second start of that server binds. Not a second program on the
//! port, but a second instance of the server (a service started at boot, a
//! run left behind): a stale serving instance
//! (fixtures/real/662, ollama/ollama#707).

use super::super::stale_serving_process::titles::{classify, default_port_of};
use crate::correlate::Incident;
use crate::model::{Listener, PsRecord};
use crate::rules::{Action, Category, Finding};

/// The bind rows that name their server, and its stack.
const BIND_STACKS: &[(&str, &str)] = &[
    ("stacks-sglang.port-not-available", "SGLang"),
    ("stacks-llamacpp.bind-failed", "llama.cpp"),
];

/// Who holds the port, each as its PID (where known) and its command
/// line or name: the process started with the port, a socket listing's
/// rows (their ps rows' command lines where the inputs list their PIDs),
/// then the holder the bind line names itself (SGLang's
/// `process.name()='sglang'`, with its `pid=` where the line is whole).
fn holders<'a>(
    incident: &'a Incident,
    listener: Option<&'a PsRecord>,
    sockets: &[&'a Listener],
) -> Vec<(Option<u32>, &'a str)> {
    // The holder's command line: its ps row where the inputs list its PID,
    // else the name the socket listing prints.
    let holders =
        listener
            .map(|l| (l.pid, l.cmd.as_str()))
            .into_iter()
            .chain(sockets.iter().filter_map(|l| {
                let pid = l.pid?;
                let cmd = incident
                    .facts
                    .ps
                    .iter()
                    .find(|r| r.pid == pid)
                    .map(|r| r.cmd.as_str())
                    .or(l.process.as_deref())?;
                Some((pid, cmd))
            }));
    // The holder the bind line names itself (SGLang's `process.name()=
    // 'sglang'`, with its `pid=` where the line is whole).
    let named = BIND_STACKS.iter().flat_map(|(id, _)| {
        incident.known(id).filter_map(|(_, hit)| {
            let holder = hit.get("holder")?;
            Some((hit.get("pid").and_then(|p| p.parse().ok()), holder))
        })
    });
    holders
        .map(|(pid, cmd)| (Some(pid), cmd))
        .chain(named)
        .collect()
}

/// Rewrites the failed bind's finding `f` when the process that holds
/// `port` (`listener`, started with the port, or a socket row of
/// `sockets`) is another instance of the failing server.
pub(super) fn apply(
    f: &mut Finding,
    incident: &Incident,
    port: Option<&str>,
    listener: Option<&PsRecord>,
    sockets: &[&Listener],
) {
    if f.category != Category::PortInUse {
        return;
    }
    let Some(number) = port.and_then(|p| p.parse::<u16>().ok()) else {
        return;
    };
    let holders = holders(incident, listener, sockets);
    let failing: Vec<&str> = BIND_STACKS
        .iter()
        .filter(|(id, _)| incident.known(id).next().is_some())
        .map(|(_, stack)| *stack)
        .collect();
    let Some((pid, stack, by_port, cmd)) = holders.into_iter().find_map(|(pid, cmd)| {
        let (e, _) = classify(cmd)?;
        if failing.contains(&e.stack) {
            Some((pid, e.stack, false, cmd))
        } else if failing.is_empty() && default_port_of(e.stack, number) {
            Some((pid, e.stack, true, cmd))
        } else {
            None
        }
    }) else {
        return;
    };
    f.category = Category::StaleServingInstance;
    f.entities.pids.extend(pid);
    let pid = pid.map_or_else(|| "its holder".to_owned(), |p| format!("PID {p}"));
    let holder = if pid.starts_with("PID") {
        pid.clone()
    } else {
        format!("the process named `{cmd}`")
    };
    f.condition(
        format!("the process that holds port {number} ({holder}) is {stack}"),
        true,
    );
    f.condition(
        if by_port {
            format!("the failing server is {stack}: port {number} is {stack}'s default")
        } else {
            format!("the failing server is {stack}: its own bind error says so")
        },
        true,
    );
    f.title = format!("port {number} is held by another instance of {stack} ({holder})");
    f.headline = format!(
        "The server could not bind port {number}: {holder} holds it, and it is {stack} itself{}. Another instance of the same server already runs there (a service started at boot, or one left from an earlier run): use it, or stop it before starting this one.",
        if by_port {
            format!(" ({number} is {stack}'s default port, so the failing start is {stack} too)")
        } else {
            String::new()
        }
    );
    // In place of "another process listens there": which one.
    f.chain.pop();
    f.chain.push(format!(
        "another instance of {stack} ({holder}) already listens there"
    ));
    f.explanation = format!(
        "A server binds its port once; a second start of the same server on the same host finds the port taken by the first. The first is either the one meant to serve (a service the installer enabled, a container's published port) or an earlier run left behind; either way the new start is the duplicate. The process that holds port {number} is {stack}, like the one that failed."
    );
    // In place of "stop it if it is a leftover; otherwise another port".
    f.actions.pop();
    f.actions.push(Action::advice(
        format!(
            "{holder} is another instance of {stack}: check whether it is the one meant to serve (a service's main PID, a container) or a leftover (PPID 1, started before this run); use it, or stop it (its unit or container if it has one) before starting a new one"
        ),
        Some(&match pid.strip_prefix("PID ") {
            Some(p) => format!("ps -o pid,ppid,lstart,args -p {p}; systemctl status {p}"),
            None => format!(
                "ss -ltnp 'sport = :{number}'; ps -eo pid,ppid,lstart,args | grep -i {}",
                stack.to_lowercase()
            ),
        }),
    ));
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;
    use crate::testing::findings_of;

    fn category_of(text: &str) -> Option<Category> {
        findings_of("address-already-in-use", text)
            .first()
            .map(|f| f.category)
    }

    /// fixtures/real/662 (ollama/ollama#707): `ollama serve`'s bind error
    /// beside `lsof -i :11434`'s row of the installed service.
    const REAL_662: &str = "Error: listen tcp 127.0.0.1:11434: bind: address already in use\nollama  2233 ollama    3u  IPv4  37563      0t0  TCP localhost:11434 (LISTEN)\n";

    #[test]
    fn the_port_held_by_the_same_server_is_a_stale_instance() {
        assert_eq!(category_of(REAL_662), Some(Category::StaleServingInstance));
        let found = findings_of("address-already-in-use", REAL_662);
        let f = found.first().expect("the finding");
        assert!(f.entities.pids.contains(&2233));
        assert!(f.title.contains("Ollama"), "{}", f.title);
    }

    /// Variants: the same row with another program on the port is a port in
    /// use; SGLang's own bind error beside `ss -ltnp`'s row of an SGLang
    /// server (SGLang's wording, catalogs/stacks-sglang.toml; the `ss` row's
    /// layout is fixtures/real/678's; assembled, not copied) is a stale
    /// instance on any port.
    #[test]
    fn other_holders_and_other_stacks() {
        let other = REAL_662.replace("ollama  2233 ollama", "nginx   2233 www-data");
        assert_eq!(category_of(&other), Some(Category::PortInUse));
        let sglang = "ValueError: http_port at 31000 is not available in 30 seconds.\nLISTEN   0        2048             0.0.0.0:31000           0.0.0.0:*       users:((\"python3\",pid=40410,fd=20))\nroot       40410       1  9 09:12 ?        00:03:10 python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --port 31000\n";
        assert_eq!(category_of(sglang), Some(Category::StaleServingInstance));
        // The failing server is SGLang; the holder is Ollama: not the same.
        let mixed = "ValueError: http_port at 11434 is not available in 30 seconds.\nollama  2233 ollama    3u  IPv4  37563      0t0  TCP localhost:11434 (LISTEN)\n";
        assert_eq!(category_of(mixed), Some(Category::PortInUse));
    }

    /// SGLang's own wait names the port's holder by its process name
    /// (batch O's 1018, https://github.com/gpustack/gpustack/issues/5842):
    /// `sglang` is a leftover SGLang, and the port is called what the
    /// line calls it. A holder of another name (`python3`, a repository's
    /// note on the same message) says no more than a port in use.
    #[test]
    fn the_holder_sglangs_own_error_names() {
        let line = "ValueError: metrics_port at 40290 is not available in 30 seconds. metrics_port is used by a process already. process.name()='sglang' process.cmdline()=\n";
        let found = findings_of("address-already-in-use", line);
        let f = found.first().expect("the finding");
        assert_eq!(f.category, Category::StaleServingInstance, "{f:?}");
        assert!(f.title.contains("SGLang"), "{}", f.title);
        assert!(
            f.conditions
                .iter()
                .any(|c| c.text.contains("metrics_port 40290")),
            "{:?}",
            f.conditions
        );
        let python = line.replace("'sglang'", "'python3'");
        assert_eq!(category_of(&python), Some(Category::PortInUse));
    }
}
