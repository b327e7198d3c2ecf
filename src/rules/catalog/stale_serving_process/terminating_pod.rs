//! A pod watch (`kubectl get pods -w`) where a server pod of the old
//! revision stays `Terminating` while pods of the new revision are created
//! and deleted within seconds: the controller that rolls the server out
//! counts the terminating pod as a live replica, finds one too many and
//! deletes the newcomer, over and over until the old pod is gone
//! (kubeai-project/kubeai#442, fixed by #659: pods with a deletion
//! timestamp were counted). The old pod is the stale instance the rollout
//! trips over. The rows are kubectl's (`NAME READY STATUS RESTARTS AGE`,
//! k8s.io/kubectl's pod printer); a Deployment's pod is named
//! `<owner>-<revision hash>-<suffix>`.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::META;
use crate::correlate::Incident;
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding};
use crate::source::Span;

/// The statuses whose rows the rule reads (kept by the prefilter).
pub(super) const ANCHORS: [&str; 1] = ["Terminating"];

/// A new pod deleted this young (its `AGE` on its `Terminating` row) never
/// got to serve: the controller took it back.
const YOUNG_SECS: u64 = 10;

/// A row of `kubectl get pods` (with `-w`, one a change): name, ready,
/// status, restarts (`1 (51s ago)` from Kubernetes 1.25's printer), age.
static POD_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<name>[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)\s+[0-9]+/[0-9]+\s+(?P<status>[A-Za-z:]+)\s+[0-9]+(?: \([^)]*\))?\s+(?P<age>[0-9]+[smhdy][0-9smhdy]*)\s*$")
        .expect("pod row regex")
});

/// `<owner>-<revision hash>-<suffix>`: a pod a ReplicaSet (or a controller
/// naming its pods the same way) created.
static REVISION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<owner>[a-z0-9][-a-z0-9.]*)-(?P<hash>[a-z0-9]{6,10})-[a-z0-9]{5}$")
        .expect("revision regex")
});

struct Row<'a> {
    span: Span,
    name: &'a str,
    owner: &'a str,
    hash: &'a str,
    status: &'a str,
    age: Option<u64>,
}

/// kubectl's age (`4s`, `3m26s`, `2d5h`) in seconds.
fn age(text: &str) -> Option<u64> {
    let mut total = 0u64;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u64 = number.parse().ok()?;
        number.clear();
        total += n * match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'y' => 31_536_000,
            _ => return None,
        };
    }
    number.is_empty().then_some(total)
}

fn rows(incident: &Incident) -> Vec<Row<'_>> {
    incident
        .facts
        .messages
        .iter()
        .filter_map(|m| {
            let c = POD_ROW.captures(m.text.trim())?;
            let name = c.name("name")?.as_str();
            let r = REVISION.captures(name)?;
            Some(Row {
                span: m.span,
                name,
                owner: r.name("owner")?.as_str(),
                hash: r.name("hash")?.as_str(),
                status: c.name("status")?.as_str(),
                age: age(c.name("age")?.as_str()),
            })
        })
        .collect()
}

/// The findings for old pods still terminating while their replacements
/// are deleted young.
pub(super) fn terminating_pods(incident: &Incident) -> Vec<Finding> {
    let rows = rows(incident);
    let mut out = Vec::new();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for old in rows.iter().filter(|r| r.status == "Terminating") {
        if !done.insert(old.name) {
            continue;
        }
        // Pods of another revision of the same owner, deleted young after
        // the old pod began terminating.
        let mut churned: Vec<&Row<'_>> = Vec::new();
        for r in &rows {
            let young = r.age.is_some_and(|a| a <= YOUNG_SECS);
            if r.span.source == old.span.source
                && r.owner == old.owner
                && r.hash != old.hash
                && r.status == "Terminating"
                && young
                && r.span > old.span
                && !churned.iter().any(|c| c.name == r.name)
            {
                churned.push(r);
            }
        }
        let Some(first) = churned.first() else {
            continue;
        };
        // The old pod still terminating after a newcomer was taken back.
        let Some(still) = rows
            .iter()
            .filter(|r| r.name == old.name && r.status == "Terminating" && r.span > first.span)
            .map(|r| r.span)
            .max()
        else {
            continue;
        };
        out.push(finding(old, &churned, still));
    }
    out
}

fn finding(old: &Row<'_>, churned: &[&Row<'_>], still: Span) -> Finding {
    let mut f = Finding::new(META.id, Category::StaleServingInstance, META.severity);
    let name = old.name;
    f.evidence_marked(
        old.span,
        format!("{name}, the old revision's pod, is terminating"),
        "Terminating",
    );
    for c in churned.iter().take(4) {
        f.evidence(
            c.span,
            format!(
                "{}, a pod of the new revision, is deleted {}s after its creation, before it served",
                c.name,
                c.age.unwrap_or(0)
            ),
        );
    }
    f.evidence(still, format!("{name} is still terminating after that"));
    f.condition(
        format!("{name} was still terminating when the new pods were deleted"),
        true,
    );
    f.condition(
        "more than one new pod was created and deleted young (a loop)",
        churned.len() > 1,
    );
    let names: Vec<&str> = churned.iter().map(|c| c.name).collect();
    f.title = format!("pod {name} still terminating while its replacements are deleted");
    f.headline = format!(
        "The rollout trips over {name}: the old pod is still Terminating while the new revision's pods ({}) are created and deleted within seconds. The controller counts the terminating pod as a live replica, finds one too many and deletes the newcomer, until the old pod is gone.",
        names.join(", ")
    );
    f.chain
        .push("the new server pods are deleted as soon as they are created".to_owned());
    f.chain.push(format!(
        "{name}, still terminating, is counted as a replica: the rollout sees one pod too many"
    ));
    f.explanation = "A pod being deleted keeps running until its containers stop (its grace period, its preStop hook, a finalizer); a controller that counts it as a replica while it terminates scales the new revision down to make room.".to_owned();
    f.actions.push(Action::advice(
        format!("see why {name} takes long to terminate (its grace period, a finalizer, a node that does not answer); once its server has stopped, remove it, and upgrade the controller so that it does not count terminating pods"),
        Some(&format!(
            "kubectl get pod {name} -o jsonpath='{{.metadata.deletionTimestamp}} {{.metadata.finalizers}}'; kubectl describe pod {name}; kubectl delete pod {name} --grace-period=0 --force"
        )),
    ));
    f.confidence = confidence(&f, 0.45, 0.65);
    f
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// https://github.com/kubeai-project/kubeai/issues/442 (real case
    /// batch-t/1245): the old pod terminating, two new pods created and
    /// deleted within seconds, the old one still terminating.
    const KUBEAI: &str = "k get pods -w\n\
        NAME                        READY   STATUS    RESTARTS      AGE\n\
        model-dev-d947b5fdb-fv5vf   0/1     Running   1 (51s ago)   3m26s\n\
        model-dev-d947b5fdb-fv5vf   1/1     Terminating   1 (101s ago)   4m16s\n\
        model-dev-84c68ccdc9-d9mvk   0/1     Pending       0              0s\n\
        model-dev-84c68ccdc9-d9mvk   0/1     ContainerCreating   0              1s\n\
        model-dev-84c68ccdc9-d9mvk   0/1     Terminating         0              4s\n\
        model-dev-84c68ccdc9-wcggd   0/1     Pending             0              0s\n\
        model-dev-84c68ccdc9-wcggd   0/1     Running             0              2s\n\
        model-dev-d947b5fdb-fv5vf    0/1     Terminating         1 (108s ago)   4m23s\n\
        model-dev-84c68ccdc9-wcggd   0/1     Terminating         0              3s\n";

    #[test]
    fn an_old_pod_terminating_while_new_ones_are_deleted_young() {
        let f = findings(KUBEAI);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::StaleServingInstance);
        assert!(
            f[0].title.contains("model-dev-d947b5fdb-fv5vf"),
            "{}",
            f[0].title
        );
    }

    /// An ordinary rolling update: the new pod runs, the old one
    /// terminates; nothing is deleted young.
    #[test]
    fn a_rollout_whose_new_pod_stays_is_none() {
        let text = "NAME                        READY   STATUS    RESTARTS      AGE\n\
            model-dev-84c68ccdc9-d9mvk   0/1     Pending       0              0s\n\
            model-dev-84c68ccdc9-d9mvk   1/1     Running       0              40s\n\
            model-dev-d947b5fdb-fv5vf    1/1     Terminating   1 (101s ago)   4m16s\n\
            model-dev-d947b5fdb-fv5vf    0/1     Terminating   1 (108s ago)   4m23s\n";
        assert!(findings(text).is_empty());
        assert_eq!(super::age("3m26s"), Some(206));
        assert_eq!(super::age("2d5h"), Some(190_800));
    }
}
