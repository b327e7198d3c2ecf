//! A failed bind whose port is held by the server's own previous instance,
//! caught stopping: `ollama ps` shows a model `Stopping...` (Ollama unloads
//! it and exits only when its requests end) or `systemctl status` shows the
//! server's unit `deactivating` (its processes did not exit on SIGTERM).
//! The old instance never finished stopping and still holds the port: a
//! hang, not a second program on the port. Neither state alone is a
//! failure: a long generation keeps a model `Stopping...` until it ends.

use super::super::stale_serving_process::titles::default_port_of;
use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::{Action, Category, Finding};
use crate::source::Span;

/// What shows the previous instance stuck stopping.
struct Stuck {
    /// The lines that show it, each with what it says.
    evidence: Vec<(Span, String)>,
    /// Its PID, when the inputs name it.
    pid: Option<u32>,
    /// The unit, when it is one.
    unit: Option<String>,
    /// A few words for the headline: what is stuck.
    what: String,
}

/// Rewrites the failed bind's finding `f` when the server's previous
/// instance is seen stopping: `port` is the port that failed, `binds` the
/// failed binds' lines.
pub(super) fn apply(f: &mut Finding, incident: &Incident, port: Option<&str>, binds: &[&Message]) {
    let Some(stuck) =
        ollama_stopping(incident, port, binds).or_else(|| unit_deactivating(incident, port, binds))
    else {
        return;
    };
    for (span, note) in &stuck.evidence {
        f.evidence(*span, note.clone());
    }
    f.entities.pids.extend(stuck.pid);
    f.entities.units.extend(stuck.unit.clone());
    f.category = Category::ServerHang;
    f.condition(
        "the server's previous instance is seen still stopping",
        true,
    );
    let port_text = port.map(|p| format!(" {p}")).unwrap_or_default();
    f.title =
        format!("the previous instance never finished stopping and still holds port{port_text}");
    f.headline = format!(
        "The server could not bind port{port_text} because its previous instance never finished stopping: {}. That instance is hung and still holds the port; stop it (changing the port only hides the hang).",
        stuck.what
    );
    // In place of "another process listens there": which one, and why.
    f.chain.pop();
    f.chain
        .push("its previous instance never finished stopping and still holds it".to_owned());
    f.explanation = "A server that is asked to stop (a model unloading, a unit sent SIGTERM) releases its port only when it exits. One that never finishes stopping (requests still in flight, a thread blocked in the GPU driver) keeps the port, and every new start fails to bind it.".to_owned();
    let target = stuck.pid.map_or("PID".to_owned(), |p| p.to_string());
    // In place of "stop it if it is a leftover; otherwise another port":
    // it is the leftover, and another port would leave it hung.
    f.actions.pop();
    f.actions.push(Action::advice(
        "that process is the hung old instance: record where it waits (a Go server such as Ollama prints its goroutines and exits on SIGQUIT; py-spy dump for a Python one), then stop it, with SIGKILL if SIGTERM is not enough; do not move the new one to another port",
        Some(&format!("kill -QUIT {target}  # or: py-spy dump --pid {target}; kill {target}")),
    ));
    f.confidence = 0.6;
}

/// `ollama ps` rows `Stopping...` beside a failed bind of Ollama's port
/// (or of a Go `listen tcp` line, what `ollama serve` prints, when the
/// port is not Ollama's default).
fn ollama_stopping(incident: &Incident, port: Option<&str>, binds: &[&Message]) -> Option<Stuck> {
    let rows: Vec<&Message> = incident
        .known("stacks-ollama.ps-model-stopping")
        .map(|(m, _)| m)
        .collect();
    if rows.is_empty() {
        return None;
    }
    // `ollama ps` names no port: Ollama's default one (`OLLAMA_HOST` unset,
    // the serving stacks' table of default ports) is the one it holds.
    let ours = port.is_none_or(|p| p.parse().is_ok_and(|p| default_port_of("Ollama", p)))
        || binds.iter().any(|m| m.text.contains("listen tcp"));
    if !ours {
        return None;
    }
    let model = incident
        .known("stacks-ollama.ps-model-stopping")
        .find_map(|(_, h)| h.get("model").map(str::to_owned))
        .unwrap_or_else(|| "a model".to_owned());
    Some(Stuck {
        evidence: rows
            .iter()
            .map(|m| (m.span, "the model is still unloading (`Stopping...`): the old server has not let go of it".to_owned()))
            .collect(),
        pid: None,
        unit: None,
        what: format!("`ollama ps` shows {model} `Stopping...`"),
    })
}

/// A unit `deactivating` whose processes were started on the port, or
/// whose own journal lines are the failed bind.
fn unit_deactivating(incident: &Incident, port: Option<&str>, binds: &[&Message]) -> Option<Stuck> {
    incident.facts.unit_statuses.iter().find_map(|s| {
        if s.active_state.as_deref() != Some("deactivating") {
            return None;
        }
        // Its processes' command lines (the `CGroup:` tree, a `ps` row of
        // its main PID) name the port.
        let on_port = port.is_some_and(|p| {
            s.cgroup.iter().any(|m| names_port(&m.cmdline, p))
                || incident
                    .facts
                    .ps
                    .iter()
                    .any(|r| Some(r.pid) == s.main_pid && names_port(&r.cmd, p))
        });
        let its_own = binds.iter().any(|b| {
            incident
                .facts
                .journal
                .iter()
                .any(|e| e.span == b.span && e.unit.as_deref() == Some(s.unit.as_str()))
        });
        if !on_port && !its_own {
            return None;
        }
        let sub = s.sub_state.as_deref().unwrap_or("deactivating");
        Some(Stuck {
            evidence: vec![(
                s.active_span.unwrap_or(s.span),
                format!(
                    "{} is still stopping ({sub}): its processes have not exited",
                    s.unit
                ),
            )],
            pid: s.main_pid,
            unit: Some(s.unit.clone()),
            what: format!("{} is still `deactivating ({sub})`", s.unit),
        })
    })
}

/// Whether a command line names `port`: `--port 8080`, `--port=8080`,
/// `0.0.0.0:8080`.
fn names_port(cmd: &str, port: &str) -> bool {
    cmd.split(|c: char| c.is_whitespace() || c == '=' || c == ':')
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| {
            w[1] == port
                && (w[0].ends_with("port")
                    || w[0].contains('.')
                    || w[0].is_empty()
                    || w[0] == "localhost")
        })
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of("address-already-in-use", text)
    }

    /// ollama/ollama#14364 (batch H's 785): `ollama ps` shows the model
    /// `Stopping...` and every restart fails to bind 11434.
    const STUCK: &str = "$ ollama ps\n\
NAME            ID              SIZE     PROCESSOR    CONTEXT    UNTIL\n\
gpt-oss:120b    a951a23b46a1    89 GB    100% GPU     131072     Stopping...\n\
Error: listen tcp 127.0.0.1:11434: bind: address already in use\n";

    #[test]
    fn a_model_stuck_stopping_beside_a_failed_bind_is_a_hang() {
        let f = findings(STUCK);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::ServerHang);
        assert!(
            f[0].headline.contains("gpt-oss:120b `Stopping...`"),
            "{}",
            f[0].headline
        );
        crate::testing::cites_line(&f[0], 3);
    }

    /// The next paste: ollama#7606's older table (no CONTEXT column) beside
    /// ollama#10311's failed bind (both verbatim; the combination is ours).
    #[test]
    fn the_older_table_joins_too() {
        let text = "NAME         ID              SIZE      PROCESSOR    UNTIL       \n\
gemma3:4b    c0494fe00251    6.4 GB    100% GPU     Stopping...    \n\
Error: listen tcp 127.0.0.1:11434: bind: address already in use\n";
        let f = findings(text);
        assert_eq!(f[0].category, Category::ServerHang, "{f:?}");
    }

    /// `Stopping...` alone is a model unloading once its request ends
    /// (ollama#7606, batch H's negative 783): no bind failure, no finding;
    /// and a failed bind of another program's port (uvicorn on 8080,
    /// BrainDriveAI/OpenWebUI_CondaInstaller#1) stays a port conflict.
    #[test]
    fn stopping_alone_or_another_port_is_not_a_hang() {
        let row = "gemma3:4b    c0494fe00251    6.4 GB    100% GPU     Stopping...    \n";
        assert!(findings(row).is_empty());
        let other = format!(
            "{row}ERROR:    [Errno 10048] error while attempting to bind on address ('0.0.0.0', 8080): only one usage of each socket address (protocol/network address/port) is normally permitted\n"
        );
        let f = findings(&other);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::PortInUse);
    }

    /// A unit still `deactivating (stop-sigterm)` whose main process was
    /// started with `--port 8080` (gpustack/gpustack#154, fixtures/real/453)
    /// beside a failed bind of 8080 (BrainDriveAI/OpenWebUI_CondaInstaller#1):
    /// both verbatim, the combination is ours. On another port (vllm#8204's
    /// 44319), a port conflict as before.
    #[test]
    fn a_unit_stuck_deactivating_on_the_port_holds_it() {
        // Real newlines, not `\` continuations: the block's fields keep
        // their indentation.
        let status = "root     2982989  0.8  0.2 725864 145284 ?       Ssl  12:02   0:04 /home/sophia/.local/share/pipx/venvs/gpustack/bin/python /home/sophia/.local/bin/gpustack start --port 8080 --worker-port 10152 --bootstrap-password 123456 --system-reserved {\"gpu_memory\":3,\"memory\":2} --debug

● gpustack.service - GPUStack Service
     Loaded: loaded (/etc/systemd/system/gpustack.service; enabled; vendor preset: enabled)
     Active: deactivating (stop-sigterm) since Wed 2024-08-07 12:11:53 GMT; 12s ago
   Main PID: 2982989 (gpustack)

";
        let bind = "ERROR:    [Errno 10048] error while attempting to bind on address ('0.0.0.0', 8080): only one usage of each socket address (protocol/network address/port) is normally permitted\n";
        let f = findings(&format!("{status}{bind}"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::ServerHang);
        assert!(f[0].entities.units.contains("gpustack.service"));
        assert!(f[0].entities.pids.contains(&2982989));
        // vllm-project/vllm#8204's failed bind of 44319.
        let elsewhere = "  | [2024-09-05T00:38:34Z] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 44319): [errno 98] address already in use\n";
        let f = findings(&format!("{status}{elsewhere}"));
        assert_eq!(f[0].category, Category::PortInUse, "{f:?}");
    }
}
