//! `container-killed-137`: a container ended with exit code 137 (SIGKILL)
//! and nothing in the inputs says who sent it (no `OOMKilled` reason, no
//! failed probe, no kernel or cAdvisor OOM line): most likely its memory
//! limit, at a confidence that says the kill itself is unexplained.

use crate::correlate::Incident;
use crate::rules::support::round2;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::SourceId;

pub static RULE: ContainerKilled137 = ContainerKilled137;

pub struct ContainerKilled137;

/// A container's exit code 137 as kubectl, KServe and Flyte print it
/// (catalogs/stacks-k8s.toml).
const EXIT_137: &str = "stacks-k8s.exit-code-137";

/// What explains a SIGKILL by itself: the OOMKilled reason, a failed probe
/// (the kubelet's kill), cAdvisor's OOM event. Their rows tell the story.
const EXPLAINED_BY: &[&str] = &[
    "stacks-k8s.oomkilled",
    "stacks-k8s.liveness-probe-failed",
    "stacks-k8s.cadvisor-oom-event",
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
}
