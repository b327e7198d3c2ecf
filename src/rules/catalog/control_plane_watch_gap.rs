//! `control-plane-watch-gap`: a control plane's worker lost its watch on
//! the server and re-listed the instances it runs: an instance deleted while
//! the watch was down gets no DELETED event on the replay, so its serving
//! process is never stopped and keeps its GPU (GPUStack's worker,
//! fixtures/real/649).

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{COMPUTE_APPS, confidence, distinct};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: ControlPlaneWatchGap = ControlPlaneWatchGap;

pub struct ControlPlaneWatchGap;

/// A worker's watch on its server failed (catalogs/stacks-gpustack.toml).
const LOST: &str = "stacks-gpustack.watch-failed";
/// The replay after the reconnect: an instance the worker still runs.
const RESYNC: &str = "stacks-gpustack.instance-already-running";

static META: RuleMeta = RuleMeta {
    id: "control-plane-watch-gap",
    category: Category::StaleServingInstance,
    severity: Severity::Error,
    summary: "a control plane's worker lost its watch on the server and re-listed its instances: one deleted in the gap keeps running with its GPU",
    anchors: &[],
    doc: r#"
## What it means
A worker of a control plane that starts model instances (GPUStack: vLLM,
SGLang, llama-box) follows the server through a watch. The watch dropped
(`Error watching model instances: watch timeout`) and, after the
reconnect, the worker re-listed the instances the server replays
(`Model instance NAME is already running. Skipping start.`). The replay
holds only the instances that exist now: one deleted or moved while the
watch was down (a replica released, a model stopped) never reaches the
worker as a deletion, so its serving process is never stopped and keeps
its GPU memory. The server counts the GPUs free; the next instance
scheduled there fails or waits.

The finding is inferred from the control plane's own lines: the process
table is not in them, so the leftover is not named. It is an error at a
lower confidence that names the commands that settle it.

## Why it happens
A network throttle or an overloaded server between worker and server
(gpustack/gpustack#2595, #5933). The server's replay after a reconnect
sends CREATED for existing rows only (gpustack/gpustack commit dd02f1f6:
"DELETED events for gone-during-gap items are never observed").

## How to confirm
On the worker, the serving processes with their start times
(`ps -eo pid,ppid,lstart,etimes,args`, GPUStack's `gpustack_model_instance_<id>`
titles and their `vllm serve`/`llama-box` children) and what holds each GPU
(`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`),
against the instances the server lists for this worker: a process whose
instance the server no longer lists is the leftover.

## How to fix
Stop the leftover (its instance process and its serving child), then check
its GPU memory is freed. Restarting the worker re-syncs it. Newer GPUStack
reaps instances the server no longer reports after a reconnect (`Reaping
stale model instance …`), and `GPUSTACK_MODEL_INSTANCE_STATE_RECONCILE_INTERVAL`
turns on a periodic check against the server.

## Safety
Advice only: which process is the leftover the lines do not say.
"#,
};

impl Rule for ControlPlaneWatchGap {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let lost: Vec<&Message> = incident.known(LOST).map(|(m, _)| m).collect();
        let Some(first_lost) = lost.iter().map(|m| m.span).min() else {
            return;
        };
        // The re-listing after the watch dropped: same input, later lines.
        let resync: Vec<(&Message, &str)> = incident
            .known(RESYNC)
            .filter(|(m, _)| m.span.source == first_lost.source && m.span.line > first_lost.line)
            .map(|(m, c)| (m, c.get("instance").unwrap_or("?")))
            .collect();
        if resync.is_empty() {
            return;
        }
        let lost: Vec<&Message> = lost
            .into_iter()
            .filter(|m| m.span.source == first_lost.source && m.span.line < resync[0].0.span.line)
            .collect();
        out.push(finding(incident, &lost, &resync));
    }
}

/// Why the watch failed, as the line says (`watch timeout`).
fn why(incident: &Incident, m: &Message) -> String {
    incident
        .known(LOST)
        .find(|(k, _)| k.span == m.span)
        .and_then(|(_, c)| c.get("why"))
        .unwrap_or("")
        .trim()
        .to_owned()
}

fn finding(incident: &Incident, lost: &[&Message], resync: &[(&Message, &str)]) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let mut reasons: Vec<String> = Vec::new();
    for (m, n) in distinct(lost.iter().copied()) {
        let why = why(incident, m);
        let times = if n > 1 {
            format!(" ({n}x)")
        } else {
            String::new()
        };
        f.evidence_marked(
            m.span,
            format!("the worker's watch on the server failed{times}: {why}"),
            why.clone(),
        );
        if !why.is_empty() && !reasons.contains(&why) {
            reasons.push(why);
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for (m, name) in resync {
        f.evidence_marked(
            m.span,
            format!("after the reconnect the server replays instance {name}, which the worker still runs: it skips its start"),
            *name,
        );
        if !names.contains(name) {
            names.push(name);
        }
    }
    let failures = lost.len();
    f.condition(
        format!(
            "the worker's watch on the server failed ({failures} time{})",
            if failures == 1 { "" } else { "s" }
        ),
        true,
    );
    f.condition(
        "the worker re-listed its instances after the failure (the server's replay)",
        true,
    );
    f.condition(
        "a serving process whose instance the server no longer lists (missing: ps -eo pid,ppid,lstart,etimes,args on the worker)",
        false,
    );
    f.condition(
        "GPU memory held with no instance scheduled (missing: nvidia-smi --query-compute-apps)",
        false,
    );
    let why = if reasons.is_empty() {
        String::new()
    } else {
        format!(": {}", reasons.join(", "))
    };
    f.title = format!(
        "The worker lost its watch on the server{why}; an instance deleted in the gap may still run"
    );
    f.headline = format!(
        "The control plane's worker lost its watch on the server ({failures} failure{}{why}) and re-listed the instances it runs ({}: already running, start skipped); the server's replay after a reconnect holds only the instances that still exist, so one deleted or moved while the watch was down is never stopped here and keeps its GPU memory (inferred from the worker's lines: the process table settles it).",
        if failures == 1 { "" } else { "s" },
        names.join(", ")
    );
    f.chain
        .push("the GPUs the server counts free are still in use on the worker".to_owned());
    f.chain.push(
        "an instance's serving process outlived its deletion: the worker never got the deletion"
            .to_owned(),
    );
    f.chain.push(format!(
        "the worker's watch on the server dropped{why} and the replay after the reconnect carries no deletions"
    ));
    f.explanation = "A control plane's worker starts and stops serving processes as the server's watch tells it. A watch that drops and reconnects gets the objects that exist now, as creations; a deletion made in the gap is never sent, so the worker keeps running the deleted instance's process (gpustack/gpustack commit dd02f1f6). The lines show the gap and the re-listing; the process table on the worker shows which process is left.".to_owned();
    f.actions.push(Action::advice(
        "on the worker, list the serving processes with their start times: an instance process whose instance the server no longer lists for this worker is the leftover",
        Some("ps -eo pid,ppid,lstart,etimes,args | grep -E 'gpustack_model_instance_|vllm|sglang|llama-box'"),
    ));
    f.actions.push(Action::advice(
        "see which process holds each GPU",
        Some(COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "stop the leftover (its instance process and its serving child) and check the memory is freed, or restart the worker so that it re-syncs; newer GPUStack reaps instances the server no longer reports after a reconnect (GPUSTACK_MODEL_INSTANCE_STATE_RECONCILE_INTERVAL adds a periodic check); fix the network path between worker and server",
        None,
    ));
    f.confidence = confidence(&f, 0.3, 0.85);
    f
}

#[cfg(test)]
mod tests {
    use super::META;
    use crate::testing::findings_of;

    /// fixtures/real/649 (gpustack/gpustack#5933), verbatim.
    const REAL: &str = "\
2026-07-24 12:09:55.380439+08:00 - gpustack.worker.model_file_manager - ERROR - Failed to watch model files: watch timeout
2026-07-24 12:10:45.495045+08:00 - gpustack.worker.model_file_manager - ERROR - Failed to watch model files: watch timeout
2026-07-24 12:10:55.970757+08:00 - gpustack.worker.serve_manager - ERROR - Error watching model instances: watch timeout
2026-07-24 12:11:01.143548+08:00 - gpustack.worker.serve_manager - WARNING - Model instance Qwen3-Embedding-WA01V is already running. Skipping start.
2026-07-24 12:11:01.145233+08:00 - gpustack.worker.serve_manager - WARNING - Model instance Qwen3-Embedding-EVBAw is already running. Skipping start.
";

    #[test]
    fn a_watch_gap_then_a_relisting_is_an_instance_left_running() {
        let f = findings_of(META.id, REAL);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, META.severity);
        assert!(
            f[0].headline.contains("Qwen3-Embedding-WA01V"),
            "{}",
            f[0].headline
        );
        assert!(f[0].headline.contains("watch timeout"), "{}", f[0].headline);
        // Partial evidence: no process table.
        assert!(f[0].confidence < 0.6, "{}", f[0].confidence);
        assert_eq!(f[0].evidence.len(), 4, "{:?}", f[0].evidence);
        assert!(
            f[0].actions
                .iter()
                .all(|a| a.safety == crate::rules::Safety::AdvisoryOnly)
        );
    }

    /// The next such paste: the models watch reset by the network instead
    /// of timing out, one instance re-listed (the upstream f-strings of
    /// gpustack/worker/serve_manager.py with another exception text,
    /// assembled, not copied); and the lines that alone prove nothing.
    #[test]
    fn variants_and_near_misses() {
        let reset = "\
2025-11-02 08:14:07,512 - gpustack.worker.serve_manager - ERROR - Error watching models: Server disconnected without sending a response.
2025-11-02 08:14:13,020 - gpustack.worker.serve_manager - WARNING - Model instance qwen2.5-7b-instruct-xK2pq is already running. Skipping start.
";
        let f = findings_of(META.id, reset);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].headline.contains("qwen2.5-7b-instruct-xK2pq"));
        assert!(f[0].headline.contains("Server disconnected"));
        // A re-listing with no watch failure before it: a normal start.
        let only_resync: String = REAL.lines().skip(3).map(|l| format!("{l}\n")).collect();
        assert!(findings_of(META.id, &only_resync).is_empty());
        // A watch failure with no re-listing after it: nothing shows the
        // worker came back with a gap.
        let only_lost: String = REAL.lines().take(3).map(|l| format!("{l}\n")).collect();
        assert!(findings_of(META.id, &only_lost).is_empty());
        // The re-listing before the failure does not count.
        let reversed: String = REAL.lines().rev().map(|l| format!("{l}\n")).collect();
        assert!(findings_of(META.id, &reversed).is_empty());
    }
}
