//! `container-killed-137`: a container ended with exit code 137 (SIGKILL)
//! and nothing in the inputs says who sent it (no `OOMKilled` reason, no
//! failed probe, no kernel or cAdvisor OOM line): most likely its memory
//! limit, at a confidence that says the kill itself is unexplained; and a
//! container `kubectl describe` shows restarted again and again under a
//! memory limit with no reason shown, the same story at a lower one.

use crate::correlate::Incident;
use crate::rules::support::round2;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::SourceId;

pub static RULE: ContainerKilled137 = ContainerKilled137;

pub struct ContainerKilled137;

/// A container's exit code 137 as kubectl, KServe and Flyte print it
/// (catalogs/stacks-k8s.toml).
const EXIT_137: &str = "stacks-k8s.exit-code-137";

/// What explains a SIGKILL by itself: the OOMKilled reason (kubectl's, or
/// docker inspect's `"OOMKilled": true`), a failed probe (the kubelet's
/// kill), cAdvisor's OOM event. Their rows tell the story.
const EXPLAINED_BY: &[&str] = &[
    "stacks-k8s.oomkilled",
    "stacks-k8s.liveness-probe-failed",
    "stacks-k8s.cadvisor-oom-event",
    "stacks-containers.inspect-state-oomkilled",
];

static META: RuleMeta = RuleMeta {
    id: "container-killed-137",
    category: Category::HostOomKiller,
    severity: Severity::Error,
    summary: "a container ended with exit code 137 (SIGKILL) and no reason, probe or OOM line explains it: most likely its memory limit",
    // The catalog row's anchors, which `rules::anchors` adds for every run.
    anchors: &[],
    doc: r#"
## What it means
Exit code 137 is 128 + 9: the container's process was killed by SIGKILL.
Kubernetes names the killer only when it knows it: `Reason: OOMKilled`
when the memory cgroup killed the container's main process, events of a
failed liveness or startup probe when the kubelet killed it. Here the
reason is `Error` (or none) and nothing else in the inputs names a
killer (kubectl's `Exit Code: 137`, KServe's `exitCode: 137`, Flyte's
`terminated with exit code (137). Reason [Error]`). The most common
sender is still the memory limit: the cgroup's OOM killer took a child
process (a model loader, a worker), the main process died of it, and the
runtime did not mark the container OOMKilled (kubernetes/kubernetes#19825).

A `kubectl describe pod` that shows no last state at all (older kubectl
printed none; a describe taken while the container runs again) but a
`Restart Count` of 3 or more under a `Limits:` memory quantity is read the
same way, at a lower confidence: a container that keeps ending under a
memory limit is most often OOM-killed at it; its `lastState` settles it.

## Why it happens
The container's memory limit (`resources.limits.memory`) is below what
the workload needs: weights loaded in host memory, tokenizers, a JIT
compile, several workers. Less often: a preemption, an operator's
`kill -9`, a supervisor's timeout.

## How to confirm
`kubectl describe pod POD` (Last State, the memory limit, the events:
`OOMKilling`, probe failures); `kubectl get events`; the node's kernel log
(`journalctl -k | grep -i -e oom -e 'killed process'`: `Memory cgroup out
of memory: Killed process …`).

## How to fix
Raise the container's memory limit to what the workload needs, or lower
what it keeps in host memory.

## Safety
Advice only.
"#,
};

impl Rule for ContainerKilled137 {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // The kernel's own account of an OOM kill explains every death.
        if crate::rules::support::kernel_oom_killed(incident) {
            return;
        }
        let mut seen: Vec<SourceId> = Vec::new();
        for (m, hit) in incident.known(EXIT_137) {
            let source = m.span.source;
            // Flyte's line carries its own reason.
            if hit.get("reason").is_some_and(|r| r == "OOMKilled") || seen.contains(&source) {
                continue;
            }
            if explained(incident, source) {
                continue;
            }
            seen.push(source);
            let mut f = Finding::new(META.id, META.category, META.severity);
            f.evidence(
                m.span,
                "the container ended with exit code 137: killed by SIGKILL (128 + 9), with no reason given",
            );
            f.condition("the container's exit code is 137 (SIGKILL)", true);
            f.condition(
                "no OOMKilled reason, failed probe or OOM line names the killer",
                true,
            );
            f.condition(
                "a kernel or kubelet line names the OOM killer (journalctl -k, the pod's events)",
                false,
            );
            f.confidence = round2(0.4);
            f.title =
                "a container was killed by SIGKILL (exit code 137) with no reason: most likely its memory limit"
                    .to_owned();
            f.headline = "The container was killed by SIGKILL (exit code 137) and nothing names the killer: most likely its memory limit (the cgroup's OOM killer, which the runtime did not report as OOMKilled).".to_owned();
            f.explanation = "Kubernetes marks a memory-limit kill OOMKilled only when the cgroup killed the container's main process; a child killed for memory, or a runtime that does not report it, leaves reason Error and exit code 137. With no failed probe and no other killer in the inputs, the memory limit is the likeliest sender; the pod's events and the node's kernel log settle it.".to_owned();
            f.chain.push("the container was killed".to_owned());
            f.chain
                .push("something sent it SIGKILL: exit code 137, no reason given".to_owned());
            f.chain.push(
                "most likely the memory cgroup's OOM killer at the container's limit (not confirmed)"
                    .to_owned(),
            );
            f.actions.push(Action::advice(
                "confirm who killed it: the pod's last state, memory limit and events, and the node's kernel log",
                Some("kubectl describe pod POD; kubectl get events --field-selector involvedObject.name=POD; journalctl -k | grep -i -e oom -e 'killed process'"),
            ));
            f.actions.push(Action::advice(
                "if it was the memory limit: raise resources.limits.memory to what the workload needs, or lower what it keeps in host memory",
                None,
            ));
            out.push(f);
        }
        restarts_under_limit(incident, &seen, out);
    }
}

/// `kubectl describe pod`'s fields (catalogs/stacks-k8s.toml).
const RESTART_COUNT: &str = "stacks-k8s.describe-restart-count";
const RESOURCES_HEADING: &str = "stacks-k8s.describe-resources-heading";
const MEMORY_QUANTITY: &str = "stacks-k8s.describe-memory-quantity";

/// Restarts at least this many are a loop, not a one-off.
const MIN_RESTARTS: u32 = 3;

/// The memory limit `kubectl describe` shows in `source`: a `memory:` line
/// whose heading above it is `Limits:` (not `Requests:`).
fn memory_limit(incident: &Incident, source: SourceId) -> Option<(&crate::model::Message, String)> {
    let headings: Vec<(u32, bool)> = incident
        .known(RESOURCES_HEADING)
        .filter(|(m, _)| m.span.source == source)
        .map(|(m, hit)| (m.span.line, hit.get("heading") == Some("Limits")))
        .collect();
    incident
        .known(MEMORY_QUANTITY)
        .filter(|(m, _)| m.span.source == source)
        .find(|(m, _)| {
            headings
                .iter()
                .rev()
                .find(|(line, _)| *line < m.span.line)
                .is_some_and(|(_, limits)| *limits)
        })
        .and_then(|(m, hit)| Some((m, hit.get("quantity")?.to_owned())))
}

/// A container restarted again and again under a memory limit, where the
/// paste shows no termination reason or exit code at all (old kubectl
/// printed none; a describe taken while the container runs again): a likely
/// OOM kill at the limit, to confirm from the container's last state.
fn restarts_under_limit(incident: &Incident, seen: &[SourceId], out: &mut Vec<Finding>) {
    let mut done: Vec<SourceId> = seen.to_vec();
    for (m, hit) in incident.known(RESTART_COUNT) {
        let source = m.span.source;
        let Some(count) = hit.get("count").and_then(|c| c.parse::<u32>().ok()) else {
            continue;
        };
        if count < MIN_RESTARTS
            || done.contains(&source)
            || explained(incident, source)
            || incident
                .known(EXIT_137)
                .any(|(e, _)| e.span.source == source)
        {
            continue;
        }
        let Some((limit_line, limit)) = memory_limit(incident, source) else {
            continue;
        };
        done.push(source);
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.evidence(
            m.span,
            format!("Restart Count: {count}: the container was restarted {count} times"),
        );
        f.evidence(
            limit_line.span,
            format!("its memory limit is {limit} (Limits: memory)"),
        );
        f.condition(
            format!("the container was restarted {count} times (at least {MIN_RESTARTS})"),
            true,
        );
        f.condition(format!("it runs under a memory limit of {limit}"), true);
        f.condition(
            "a termination reason (OOMKilled) or exit code 137 is shown for its last run",
            false,
        );
        f.confidence = round2(0.45);
        f.title = format!(
            "a container restarted {count} times under a {limit} memory limit, with no reason shown: most likely OOM-killed at its limit"
        );
        f.headline = format!(
            "The container was restarted {count} times (Restart Count) under a memory limit of {limit}, and the paste shows no reason for its ends: most likely the cgroup's OOM killer at that limit, each time (not confirmed: the last state is not shown)."
        );
        f.explanation = "A container that keeps ending while it runs under a memory limit is most often killed by the memory cgroup's OOM killer when it reaches the limit; kubectl records that as the last state's Reason: OOMKilled and Exit Code: 137, which this describe does not show (older kubectl printed no last state; a describe taken while the container runs again shows State: Running). A failed probe or a crash would be the other stories: the events and the last state tell them apart.".to_owned();
        f.chain
            .push(format!("the container was restarted {count} times"));
        f.chain
            .push("each run ended, with no reason shown in the paste".to_owned());
        f.chain.push(format!(
            "most likely the memory cgroup's OOM killer at its {limit} limit (not confirmed)"
        ));
        f.actions.push(Action::advice(
            "confirm how its last run ended: OOMKilled and exit code 137 are the memory limit",
            Some("kubectl get pod POD -o jsonpath='{.status.containerStatuses[*].lastState}'; journalctl -k | grep -i -e oom -e 'killed process' on the node"),
        ));
        f.actions.push(Action::advice(
            "if it was the memory limit: raise resources.limits.memory to what the workload needs, or fix what grows (a leak)",
            None,
        ));
        out.push(f);
    }
}

/// Whether `source` names the killer itself: an OOMKilled reason, a failed
/// probe, cAdvisor's OOM event.
fn explained(incident: &Incident, source: SourceId) -> bool {
    EXPLAINED_BY
        .iter()
        .any(|id| incident.known(id).any(|(m, _)| m.span.source == source))
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// flyteorg/flyte#2376: a task pod over its 200Mi limit.
    const FLYTE: &str = "[1/1] currentAttempt done. Last Error: USER::Pod failed. No message received from kubernetes.\n[f8107735c673549d7acd-n0-0] terminated with exit code (137). Reason [Error]. Message: \n.\n";

    #[test]
    fn exit_137_with_no_reason_is_most_likely_the_memory_limit() {
        let f = findings(FLYTE);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::HostOomKiller);
        assert!(f[0].confidence < 0.5, "{}", f[0].confidence);
        // KServe's status of the same kind of kill (kserve/kserve#2290).
        let kserve = "      lastFailureInfo:\n        exitCode: 137\n";
        assert_eq!(findings(kserve).len(), 1);
    }

    /// kubernetes/kubernetes#10861: `kubectl describe pod` of a leaking
    /// container under a 50Mi limit, five restarts, no reason printed.
    const DESCRIBE_2015: &str = "Containers:\n  simmemleak:\n    Image:\tsaadali/simmemleak\n    Limits:\n      cpu:\t\t100m\n      memory:\t\t50Mi\n    State:\t\tRunning\n      Started:\t\tTue, 07 Jul 2015 12:54:41 -0700\n    Ready:\t\tFalse\n    Restart Count:\t5\n";

    #[test]
    fn restarts_under_a_memory_limit_with_no_reason_are_a_likely_oom_kill() {
        let f = findings(DESCRIBE_2015);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::HostOomKiller);
        assert!(f[0].confidence < 0.5, "{}", f[0].confidence);
        assert!(f[0].headline.contains("50Mi"), "{}", f[0].headline);
        // Fewer restarts are not a loop.
        let once = DESCRIBE_2015.replace("Restart Count:\t5", "Restart Count:\t1");
        assert!(findings(&once).is_empty());
        // A memory request is not a limit (the same lines with the heading
        // changed: assembled, not copied).
        let request = DESCRIBE_2015.replace("Limits:", "Requests:");
        assert!(findings(&request).is_empty());
    }

    #[test]
    fn restarts_with_their_reason_shown_are_that_reason() {
        // operator-framework/operator-sdk-samples#156: the last state says
        // OOMKilled: the OOMKilled row tells it (restarts raised to 5 here:
        // assembled, not copied).
        let describe = "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n    Restart Count:  5\n    Limits:\n      cpu:     100m\n      memory:  90Mi\n";
        assert!(findings(describe).is_empty());
    }

    #[test]
    fn a_named_killer_is_its_own_story() {
        // Flyte's own reason says OOMKilled (assembled from its format,
        // not copied): the OOMKilled row tells it.
        let oom = FLYTE.replace("Reason [Error]", "Reason [OOMKilled]");
        assert!(findings(&oom).is_empty());
        // gimlet-io/gimlet#649: kubectl's last state with the reason.
        let describe =
            "Last State:     Terminated\n  Reason:       OOMKilled\n  Exit Code:    137\n";
        assert!(findings(describe).is_empty());
        // The kubelet killed it for a failed probe (assembled: the events of
        // llm-d/llm-d-inference-sim#45 above an exit code).
        let probe = "  Warning  Unhealthy               25m (x3 over 25m)     kubelet                  Liveness probe failed: HTTP probe failed with statuscode: 404\n      Exit Code:    137\n";
        assert!(findings(probe).is_empty());
    }

    /// docker inspect's State: `"OOMKilled": true` (kudarap/dotagiftx#123,
    /// batch P 1040) is the runtime's own record, its row's finding, and
    /// this rule says nothing; `"OOMKilled": false` beside exit code 137
    /// (AbdBarho/stable-diffusion-webui-docker#457) is the unattributed
    /// SIGKILL this rule reads.
    #[test]
    fn docker_inspect_state_says_whether_the_runtime_saw_the_oom_kill() {
        let state = |oom: &str| {
            format!(
                "        \"State\": {{\n            \"Status\": \"exited\",\n            \"Running\": false,\n            \"Paused\": false,\n            \"Restarting\": false,\n            \"OOMKilled\": {oom},\n            \"Dead\": false,\n            \"Pid\": 0,\n            \"ExitCode\": 137,\n            \"Error\": \"\",\n            \"StartedAt\": \"2023-05-08T08:03:05.553904873Z\",\n            \"FinishedAt\": \"2023-05-08T08:05:05.514785974Z\"\n        }},\n"
            )
        };
        let unattributed = findings(&state("false"));
        assert_eq!(unattributed.len(), 1, "{unattributed:?}");
        assert_eq!(unattributed[0].category, Category::HostOomKiller);
        assert!(findings(&state("true")).is_empty());
        let all = crate::testing::analyze_paste(&state("true"))
            .diagnosis
            .findings;
        assert_eq!(all[0].category, Category::HostOomKiller, "{all:?}");
        assert!(all[0].confidence >= 0.8, "{}", all[0].confidence);
    }
}
