//! `gpu-pod-unschedulable`: Kubernetes' scheduler found no node with a
//! free `nvidia.com/gpu` for a pod (`0/6 nodes are available: 6
//! Insufficient nvidia.com/gpu`), which stays Pending: the GPUs are
//! allocated to other pods (a workload left by an earlier run, another
//! job), unless the nodes do not advertise them at all
//! (fixtures/real/666).

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, distinct};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: GpuPodUnschedulable = GpuPodUnschedulable;

pub struct GpuPodUnschedulable;

/// The scheduler's reason (catalogs/stacks-k8s.toml).
const SHORT: &str = "stacks-k8s.insufficient-gpu";
/// `kubectl get pods`' row of a Pending pod.
const PENDING: &str = "stacks-k8s.pod-pending";
/// The device plugin's own lines: a GPU it took out of service explains
/// the shortage better than another pod.
const PLUGIN: &[&str] = &[
    "stacks-k8s.device-plugin-xid-critical",
    "stacks-k8s.device-plugin-device-unhealthy",
];

static META: RuleMeta = RuleMeta {
    id: "gpu-pod-unschedulable",
    category: Category::GpuMemoryHeldByOtherProcess,
    severity: Severity::Error,
    summary: "a pod stays Pending: no node has a free nvidia.com/gpu, allocated to other pods (a leftover workload) unless the nodes do not advertise them",
    anchors: &[],
    doc: r#"
## What it means
The scheduler could place the pod on no node: `0/6 nodes are available: 6
Insufficient nvidia.com/gpu`. Each node counted there has fewer free
`nvidia.com/gpu` than the pod requests. On a cluster whose GPU nodes
advertise their GPUs, they are allocated to other pods: a serving workload
left by an earlier run (a test's deployment that was not deleted), another
job. The pod stays Pending and is retried (`x57 over 15m`).

The scheduler's line does not say which pods hold the GPUs, nor whether
the nodes advertise any: the finding is an error at a lower confidence
that names the commands that settle it. When every node is short it says
so; when other reasons share the count (`1 node(s) were unschedulable`),
fewer nodes were candidates.

## Why it happens
A workload that should have been deleted (garbage-collected) still runs
on the GPU nodes; more replicas than GPUs; a request larger than a node
has. Not advertised: the device plugin is not running on the node (no
`nvidia.com/gpu` under Capacity), or it marked the GPUs unhealthy.

## How to confirm
`kubectl describe nodes` (each GPU node's `nvidia.com/gpu` under
Capacity, Allocatable and Allocated resources), then the pods on those
nodes: `kubectl get pods -A -o wide --field-selector spec.nodeName=NODE`.

## How to fix
Delete the workload that should be gone (its Deployment or Job, not only
the pod, which would come back), or lower the replicas or the GPU
request; when the nodes advertise no GPU, fix the device plugin.

## Safety
Advice only: which pod to delete the inputs do not say.
"#,
};

impl Rule for GpuPodUnschedulable {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let lines: Vec<(&Message, Option<Counts>)> = incident
            .known(SHORT)
            .map(|(m, c)| (m, Counts::read(c.get("nodes"), c.get("short"))))
            .collect();
        if lines.is_empty() {
            return;
        }
        let pending: Vec<(&Message, &str)> = incident
            .known(PENDING)
            .map(|(m, c)| (m, c.get("pod").unwrap_or("?")))
            .collect();
        let plugin: Vec<&Message> = PLUGIN
            .iter()
            .flat_map(|id| incident.known(id).map(|(m, _)| m))
            .collect();
        out.push(finding(&lines, &pending, &plugin));
    }
}

/// How many nodes the scheduler weighed and how many of them were short
/// of a free GPU.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Counts {
    nodes: u32,
    short: u32,
}

impl Counts {
    fn read(nodes: Option<&str>, short: Option<&str>) -> Option<Counts> {
        Some(Counts {
            nodes: nodes?.parse().ok()?,
            short: short?.parse().ok()?,
        })
    }
}

fn finding(
    lines: &[(&Message, Option<Counts>)],
    pending: &[(&Message, &str)],
    plugin: &[&Message],
) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let counts = lines.iter().find_map(|(_, c)| *c);
    for (m, n) in distinct(lines.iter().map(|(m, _)| *m)) {
        let times = if n > 1 {
            format!(" ({n}x)")
        } else {
            String::new()
        };
        f.evidence_marked(
            m.span,
            format!("the scheduler found no node with a free nvidia.com/gpu{times}"),
            "Insufficient nvidia.com/gpu",
        );
    }
    let mut pods: Vec<&str> = Vec::new();
    for (m, pod) in pending {
        f.evidence_marked(m.span, format!("pod {pod} is Pending"), *pod);
        if !pods.contains(pod) {
            pods.push(pod);
        }
    }
    for m in plugin {
        f.evidence(
            m.span,
            "the device plugin took a GPU out of service: fewer GPUs to allocate",
        );
    }
    let every = counts.is_some_and(|c| c.short == c.nodes && c.nodes > 0);
    f.condition(
        "the scheduler found no free nvidia.com/gpu for the pod",
        true,
    );
    f.condition(
        match counts {
            Some(c) => format!(
                "every node weighed was short of a free GPU ({} of {})",
                c.short, c.nodes
            ),
            None => "every node weighed was short of a free GPU".to_owned(),
        },
        every,
    );
    f.condition(
        "the device plugin took no GPU out of service",
        plugin.is_empty(),
    );
    f.condition(
        "the nodes advertise their GPUs and other pods hold them (missing: kubectl describe nodes, Allocated resources)",
        false,
    );
    let subject = match pods.as_slice() {
        [] => "The pod".to_owned(),
        [one] => format!("Pod {one}"),
        many => format!("Pods {}", many.join(", ")),
    };
    let nodes = match counts {
        Some(c) if every => format!("all {} nodes", c.nodes),
        Some(c) => format!("{} of {} nodes", c.short, c.nodes),
        None => "the nodes".to_owned(),
    };
    f.title = format!("{subject} cannot be scheduled: no free nvidia.com/gpu on {nodes}");
    f.headline = format!(
        "{subject} stays Pending: the scheduler found no free nvidia.com/gpu on {nodes} (Insufficient nvidia.com/gpu); the GPUs are allocated to other pods, often a serving workload of an earlier run that was never deleted, unless the nodes do not advertise them (the device plugin): the nodes' allocated resources settle it."
    );
    f.chain.push(format!("{subject} is not scheduled"));
    f.chain.push(format!("no free nvidia.com/gpu on {nodes}"));
    f.chain.push(
        "other pods hold the GPUs (a leftover workload, another job), or the nodes advertise none"
            .to_owned(),
    );
    f.explanation = "Kubernetes hands out whole GPUs (nvidia.com/gpu, advertised by NVIDIA's device plugin) to pods at scheduling time. `Insufficient nvidia.com/gpu` counts the nodes whose free GPUs are fewer than the pod requests: their GPUs are allocated to pods that run there, or the node advertises none.".to_owned();
    f.actions.push(Action::advice(
        "see each GPU node's nvidia.com/gpu: Capacity and Allocatable (advertised), Allocated resources (taken)",
        Some("kubectl describe nodes | grep -E '^Name:|nvidia.com/gpu'"),
    ));
    f.actions.push(Action::advice(
        "list the pods on a GPU node and find the workload that should be gone (an earlier run's server)",
        Some("kubectl get pods -A -o wide --field-selector spec.nodeName=NODE"),
    ));
    f.actions.push(Action::advice(
        "delete that workload by its owner (Deployment, Job), not only its pod; when no node advertises nvidia.com/gpu, fix the device plugin instead",
        Some("kubectl -n kube-system get pods -l name=nvidia-device-plugin-ds -o wide"),
    ));
    f.confidence = confidence(&f, 0.3, 0.8);
    f
}

#[cfg(test)]
mod tests {
    use super::META;
    use crate::testing::findings_of;

    /// fixtures/real/666 (kubeflow/kubeflow#794), verbatim.
    const REAL: &str = "\
NAME                                READY     STATUS    RESTARTS   AGE
inception-gpu-v1-74fc6fd6cf-ft226   0/1       Pending   0          15m

pending 
Events:
  Type     Reason            Age                From               Message
  ----     ------            ----               ----               -------
  Warning  FailedScheduling  2s (x57 over 15m)  default-scheduler  0/6 nodes are available: 6 Insufficient nvidia.com/gpu.
";

    #[test]
    fn every_node_short_of_a_gpu_names_the_pending_pod() {
        let f = findings_of(META.id, REAL);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, META.severity);
        assert!(
            f[0].headline.contains("inception-gpu-v1-74fc6fd6cf-ft226"),
            "{}",
            f[0].headline
        );
        assert!(f[0].headline.contains("all 6 nodes"), "{}", f[0].headline);
        assert!(f[0].confidence < 0.7, "{}", f[0].confidence);
    }

    /// The next such paste: `kubectl get pods -A` (a namespace column) and
    /// a cluster where one node is cordoned (the row's sample from
    /// NVIDIA/k8s-device-plugin#119 under a pod row of the same grammar,
    /// assembled, not copied): fewer nodes short, a lower confidence.
    #[test]
    fn a_namespaced_listing_and_other_reasons() {
        let other = "\
NAMESPACE   NAME                          READY   STATUS    RESTARTS   AGE
serving     vllm-llama-7b-5d9c7b8f6-q2x8z  0/1     Pending   0          3m
 Warning FailedScheduling  40s (x2 over 40s)  default-scheduler  0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable.
";
        let f = findings_of(META.id, other);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].headline.contains("vllm-llama-7b-5d9c7b8f6-q2x8z"));
        assert!(f[0].headline.contains("1 of 2 nodes"), "{}", f[0].headline);
        let all = findings_of(META.id, REAL);
        assert!(f[0].confidence < all[0].confidence);
        // A Pending pod with no scheduling failure: nothing.
        let pending_only = "NAME                                READY     STATUS    RESTARTS   AGE\ninception-gpu-v1-74fc6fd6cf-ft226   0/1       Pending   0          15m\n";
        assert!(findings_of(META.id, pending_only).is_empty());
    }
}
