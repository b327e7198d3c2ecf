//! `ollama-model-stuck-stopping`: `ollama ps` shows a model `Stopping...`
//! and nothing in the paste is still using it: the runner never finished
//! unloading, and Ollama's scheduler waits on it (a hang).
//!
//! The rule in words. Ollama prints `Stopping...` in UNTIL for a model
//! whose expiry has passed (its keep-alive ran out, or `ollama stop` set
//! it) and that the scheduler has not unloaded yet. The scheduler unloads
//! a model only once its requests end, so the same row is also what a
//! long generation shows after `ollama stop` (ollama/ollama#7606,
//! fixtures/real/783: a `curl … /api/generate … &` started before the stop
//! keeps gemma3:4b `Stopping...` for 16 minutes, as designed). So:
//! - a row `Stopping...` is a runner stuck unloading when the paste shows
//!   no request in flight (fixtures 914: the row and a hanging `ollama
//!   stop`; 928: the row beside a journal of short embedding requests; 929:
//!   the row of the one model split between CPU and GPU among five);
//! - it is not, when the paste shows one: a request to the server typed in
//!   the background before the row (`… &`, or the shell's `[1] PID` job
//!   line after it), or a generation (`/api/generate`, `/api/chat`,
//!   `/v1/…completions`) logged by Gin after the row;
//! - beside a failed bind of Ollama's port it is address-already-in-use's
//!   (`address_already_in_use/stuck_stopping.rs`): the old instance holds
//!   the port.

use std::sync::LazyLock;

use regex::Regex;

use crate::catalogs::Hit;
use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::listen;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

pub static RULE: OllamaModelStuckStopping = OllamaModelStuckStopping;

pub struct OllamaModelStuckStopping;

/// `ollama ps`'s row of a model `Stopping...`.
const ROW: &str = "stacks-ollama.ps-model-stopping";
/// `ollama ps`'s row of a model still within its keep-alive.
const LOADED: &str = "stacks-ollama.ps-model-loaded";
/// Gin's access line (`[GIN] … | 200 | 1m2s | … | POST "/api/chat"`).
const GIN: &str = "stacks-ollama.gin-request";

/// A command typed at a prompt that sends the server a request: curl or
/// wget on its API, `ollama run`.
static REQUEST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:\b(?:curl|wget|http|Invoke-RestMethod|Invoke-WebRequest)\b.*/(?:api/(?:generate|chat|embed)|v1/)|\bollama\s+run\b)")
        .expect("request regex")
});

/// The shell's report of a job started in the background (`[1] 3044530`).
static JOB: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*\[[0-9]+\]\s+[0-9]+\s*$").expect("job regex"));

/// The routes on which a request generates tokens.
const GENERATES: &[&str] = &[
    "/api/generate",
    "/api/chat",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/messages",
];

static META: RuleMeta = RuleMeta {
    id: "ollama-model-stuck-stopping",
    category: Category::ServerHang,
    severity: Severity::Error,
    summary: "`ollama ps` shows a model `Stopping...` with no request in flight: its runner never finished unloading",
    anchors: &[],
    doc: r#"
## What it means
`ollama ps` shows a model `Stopping...` (its keep-alive expired, or
`ollama stop` asked for it) and nothing in the inputs is still using it:
the runner never finished unloading. Ollama's scheduler waits for it, so
the model keeps its memory, `ollama stop` does not return and loading
another model waits behind it.

The same row is what a long generation shows after `ollama stop`: the
scheduler unloads a model only once its requests end (ollama/ollama#7606).
So the rule stands down when the inputs show a request in flight: a
request to the server typed in the background before the row (`curl …
/api/generate … &`, `ollama run … &`, the shell's `[1] PID` job line), or a
generation (`/api/generate`, `/api/chat`, `/v1/…completions`) logged by Gin
after the row. Beside a failed bind of Ollama's port the row is
`address-already-in-use`'s (the old instance still holds the port).

## Why it happens
1. The runner hangs on its way out (a GPU call that does not return, a
   model split between CPU and GPU that is slow to free).
2. A request the inputs do not show is still generating (a client with no
   timeout, a model that lost coherence and never stops).

## How to confirm
`ollama ps` again a minute later: still `Stopping...`; the server's log
(`journalctl -u ollama`, server.log) shows no request running on it.

## How to fix
Restart the Ollama server (`sudo systemctl restart ollama`, or quit and
reopen the app). Before restarting, capture where it waits: the server's
log with `OLLAMA_DEBUG=1`, and `kill -QUIT PID` (a Go server prints its
goroutines). A model split between CPU and GPU is worth fitting on the GPU
(fewer loaded models, `OLLAMA_MAX_LOADED_MODELS`, a smaller `num_ctx`).

## Safety
Advice only: restarting the server ends every request it serves.
"#,
};

/// A row of `ollama ps`: the model, its size and where it sits.
struct PsRow<'a> {
    msg: &'a Message,
    model: &'a str,
    size: Option<&'a str>,
    processor: Option<&'a str>,
}

impl<'a> PsRow<'a> {
    fn of(msg: &'a Message, hit: &'a Hit<'static>) -> Option<PsRow<'a>> {
        Some(PsRow {
            msg,
            model: hit.get("model")?,
            size: hit.get("size"),
            processor: hit.get("processor"),
        })
    }

    /// `69%/31% CPU/GPU`: the share of the model in system memory.
    fn split(&self) -> Option<&'a str> {
        self.processor.filter(|p| p.contains('/'))
    }
}

impl Rule for OllamaModelStuckStopping {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let stuck: Vec<PsRow> = incident
            .known(ROW)
            .filter_map(|(m, h)| PsRow::of(m, h))
            .collect();
        let Some(first) = stuck.first() else {
            return;
        };
        // A failed bind beside it: the old instance holds the port
        // (address-already-in-use says so).
        if !listen::failures(incident).is_empty() {
            return;
        }
        if in_flight(incident, first.msg.span).is_some() {
            return;
        }
        out.push(finding(incident, &stuck));
    }
}

/// What shows a request still running when `ollama ps` printed the row at
/// `row`: a request typed in the background before it, or a generation
/// logged after it.
fn in_flight(incident: &Incident, row: Span) -> Option<Span> {
    let background = incident.facts.typed_commands.iter().find(|c| {
        let cmd = c.command.trim_end();
        c.span.source == row.source
            && c.span < row
            && REQUEST.is_match(cmd)
            && (cmd.ends_with('&') || c.first_output.as_deref().is_some_and(|o| JOB.is_match(o)))
    });
    if let Some(c) = background {
        return Some(c.span);
    }
    incident
        .known(GIN)
        .find(|(m, h)| {
            m.span > row
                && h.get("path")
                    .is_some_and(|p| GENERATES.iter().any(|g| p.starts_with(g)))
        })
        .map(|(m, _)| m.span)
}

fn finding(incident: &Incident, stuck: &[PsRow]) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let names: Vec<String> = stuck.iter().map(|r| r.model.to_owned()).collect();
    let models = names.join(", ");
    for r in stuck {
        let at = match (r.size, r.processor) {
            (Some(s), Some(p)) => format!(" ({s}, {p})"),
            _ => String::new(),
        };
        f.evidence(
            r.msg.span,
            format!(
                "{}{at} is `Stopping...`: its expiry has passed and it is still not unloaded",
                r.model
            ),
        );
    }
    let loaded: Vec<PsRow> = incident
        .known(LOADED)
        .filter_map(|(m, h)| PsRow::of(m, h))
        .collect();
    let stop = incident
        .facts
        .typed_commands
        .iter()
        .find(|c| c.command.trim_start().starts_with("ollama stop"));
    if let Some(c) = stop {
        f.evidence(
            c.span,
            "`ollama stop` asked for the unload (it waits until the runner exits)",
        );
    }
    // The server's PID, where its journal lines name it (`ollama[1640479]:`).
    let server = incident
        .facts
        .journal
        .iter()
        .find(|e| e.identifier == "ollama" && e.pid.is_some());
    if let Some(e) = server {
        f.entities.pids.extend(e.pid);
        f.evidence(e.span, "the Ollama server's own log line (its PID)");
    }
    f.condition(format!("`ollama ps` shows {models} `Stopping...`"), true);
    f.condition(
        "no request is seen in flight (none typed in the background before the row, no generation logged after it)",
        true,
    );
    f.condition("no failed bind of the server's port beside it", true);
    let split = stuck.iter().find_map(|r| r.split().map(|p| (r.model, p)));
    f.title =
        format!("{models} is stuck `Stopping...`: its Ollama runner never finished unloading");
    let others = match loaded.len() {
        0 => String::new(),
        n => format!(
            " {n} other model{} stay loaded beside it.",
            if n == 1 { "" } else { "s" }
        ),
    };
    let split_text = split
        .map(|(m, p)| {
            format!(
                " {m} is split between system memory and the GPU ({p}), the slowest kind of runner to free."
            )
        })
        .unwrap_or_default();
    f.headline = format!(
        "`ollama ps` shows {models} `Stopping...` with no request in flight: the runner never finished unloading, and Ollama's scheduler waits on it, so `ollama stop` and the next load hang behind it.{split_text}{others} Restart the Ollama server, and capture its log with OLLAMA_DEBUG=1 if it happens again."
    );
    f.chain
        .push(format!("{models} does not unload and keeps its memory"));
    f.chain
        .push("Ollama's scheduler waits for a runner that never finishes unloading".to_owned());
    f.explanation = "Ollama unloads a model once its keep-alive has passed and its requests have ended; `ollama ps` shows `Stopping...` meanwhile. A generation still running keeps that state for as long as it runs (ollama/ollama#7606); with none running, the state never ending means the runner hangs on its way out, and the scheduler, which loads one model at a time, waits on it.".to_owned();
    actions(&mut f, split, server.and_then(|e| e.pid));
    f.confidence = 0.55;
    f
}

fn actions(f: &mut Finding, split: Option<(&str, &str)>, pid: Option<u32>) {
    f.actions.push(Action::advice(
        "check that it stays `Stopping...` and that no client is still generating on it (a client with no timeout keeps it so)",
        Some("ollama ps; sleep 60; ollama ps"),
    ));
    let target = pid.map_or("$(pgrep -f 'ollama serve')".to_owned(), |p| p.to_string());
    f.actions.push(Action::advice(
        "before restarting, record where the server waits: a Go server prints its goroutines to its log on SIGQUIT (and exits); keep OLLAMA_DEBUG=1 in its environment for the next time",
        Some(&format!("kill -QUIT {target}")),
    ));
    f.actions.push(Action::advice(
        "restart the Ollama server (the service, or quit and reopen the app on macOS and Windows), and update Ollama if it recurs",
        Some("sudo systemctl restart ollama"),
    ));
    if let Some((model, p)) = split {
        f.actions.push(Action::advice(
            format!(
                "{model} runs partly from system memory ({p}): fit it on the GPU (fewer models loaded at once with OLLAMA_MAX_LOADED_MODELS, a smaller num_ctx)"
            ),
            None,
        ));
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;
    use crate::testing::findings_of;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        findings_of(super::META.id, text)
    }

    /// ollama/ollama#12179 (batch L's 929), verbatim: five models loaded,
    /// phi4:14b split 69%/31% CPU/GPU and `Stopping...`.
    const REAL_929: &str = "# ollama ps
NAME                        ID              SIZE      PROCESSOR          CONTEXT    UNTIL
llama-guard3:latest         46f211c3d866    15 GB     100% GPU           8192       59 minutes from now
mxbai-embed-large:latest    468836162de7    1.2 GB    100% GPU           512        50 minutes from now
llama3.1:8b                 46e0c10c039e    15 GB     100% GPU           8192       33 minutes from now
gpt-oss:20b                 f2b8351c629c    21 GB     100% GPU           8192       29 minutes from now
phi4:14b                    ac896e5b8b34    26 GB     69%/31% CPU/GPU    8192       Stopping...
";

    #[test]
    fn a_model_stopping_with_nothing_running_is_a_hang() {
        let f = findings(REAL_929);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::ServerHang);
        assert!(f[0].title.contains("phi4:14b"), "{}", f[0].title);
        assert!(
            f[0].headline.contains("69%/31% CPU/GPU"),
            "{}",
            f[0].headline
        );
        assert!(
            f[0].headline.contains("4 other models"),
            "{}",
            f[0].headline
        );
        assert!(f[0].evidence.iter().any(|e| e.span.line == 7));
    }

    /// ollama/ollama#10831 (batch L's 928), verbatim: the journal's short
    /// embedding requests are no generation in flight; the server's PID is
    /// its journal ident's.
    #[test]
    fn embeddings_logged_beside_it_are_not_in_flight() {
        let text = "arturo@thinkpad:~$ ollama ps
NAME                        ID              SIZE      PROCESSOR    UNTIL              
mxbai-embed-large:latest    468836162de7    1.2 GB    100% GPU     3 minutes from now    
gemma3:27b                  a418f5838eaf    23 GB     100% GPU     Stopping...           

May 23 08:51:16 ai-machine ollama[1640479]: [GIN] 2025/05/23 - 08:51:16 | 200 |   50.643792ms |       10.1.0.10 | POST     \"/api/embeddings\"
May 23 08:51:16 ai-machine ollama[1640479]: decode: cannot decode batches with this context (use llama_encode() instead)
";
        let f = findings(text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.pids.contains(&1640479));
        assert!(f[0].title.contains("gemma3:27b"), "{}", f[0].title);
        // A generation logged after the row (ollama/ollama#7024's access
        // line, verbatim): a request was running.
        let chat = format!(
            "{text}9月 28 23:37:31 ubuntu-homaer ollama[27605]: [GIN] 2024/09/28 - 23:37:31 | 200 | 10.729482469s |   192.168.2.210 | POST     \"/api/generate\"\n"
        );
        assert!(findings(&chat).is_empty());
    }

    /// ollama/ollama#7606 (fixtures/real/783), verbatim: a generation
    /// started in the background before `ollama stop` keeps the model
    /// `Stopping...` until it ends; no finding. Without the background
    /// request, the same row is a hang.
    #[test]
    fn a_request_started_in_the_background_is_in_flight() {
        let text = "$ ollama ps
NAME    ID    SIZE    PROCESSOR    UNTIL 
$ curl -s localhost:11434/api/generate -d '{\"model\":\"gemma3:4b\",\"prompt\":'\"$((echo write a story based on the following text: ; head -8000 /etc/dictionaries-common/words) | jq -sR)\"',\"options\":{\"num_ctx\":32768}}' -o /dev/null &
[1] 3044530
$ ollama stop gemma3:4b ; date
Thu Apr 10 12:17:06 AM CEST 2025
$ while : ; do ollama ps ; date ; sleep 1m ; done
...
NAME         ID              SIZE      PROCESSOR    UNTIL       
gemma3:4b    c0494fe00251    6.4 GB    100% GPU     Stopping...    
Thu Apr 10 12:33:40 AM CEST 2025
...
";
        assert!(findings(text).is_empty());
        let start = text.find("$ curl").expect("curl");
        let end = text.find("$ ollama stop").expect("stop");
        let alone = format!("{}{}", &text[..start], &text[end..]);
        let f = findings(&alone);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].title.contains("gemma3:4b"), "{}", f[0].title);
    }

    /// ollama/ollama#14364 (fixtures/real/785): the row beside a failed
    /// bind of 11434 is address-already-in-use's, not this rule's.
    #[test]
    fn beside_a_failed_bind_it_is_the_bind_rules() {
        let text = "$ ollama ps\n\
NAME            ID              SIZE     PROCESSOR    CONTEXT    UNTIL\n\
gpt-oss:120b    a951a23b46a1    89 GB    100% GPU     131072     Stopping...\n\
Error: listen tcp 127.0.0.1:11434: bind: address already in use\n";
        assert!(findings(text).is_empty());
    }
}
