//! Several per-instance processes of one serving product alive at once
//! (GPUStack's `gpustack_model_instance_<id>`): the product runs one per
//! model instance it serves and starts the instance's backend server as
//! its child, so wrappers with no backend beside them are most likely
//! instances it stopped without ending their process (gpustack/gpustack
//! #4060: six of them after a single-replica model was started and stopped
//! over and over, fixtures/real/698). The titles are
//! `programs::INSTANCE_TITLES`.

use std::collections::{BTreeMap, BTreeSet};

use super::META;
use crate::correlate::Incident;
use crate::correlate::programs::{InstanceTitle, classify, instance_title};
use crate::model::PsRecord;
use crate::rules::support::confidence;
use crate::rules::{Action, Finding, Severity};

/// One product's title and its instance processes (id, row).
type Group<'a> = (&'static InstanceTitle, Vec<(u64, &'a PsRecord)>);

/// Findings for the products with more than one instance process in the
/// listings; `named` are PIDs another part of the rule already reported.
pub(super) fn instances(incident: &Incident, named: &BTreeSet<u32>) -> Vec<Finding> {
    let mut groups: BTreeMap<&'static str, Group<'_>> = BTreeMap::new();
    for p in &incident.facts.ps {
        if named.contains(&p.pid) {
            continue;
        }
        let Some((title, id)) = instance_title(&p.cmd) else {
            continue;
        };
        let (_, rows) = groups.entry(title.stack).or_insert((title, Vec::new()));
        // A paste that lists the processes twice: each PID once.
        if !rows.iter().any(|(_, r)| r.pid == p.pid) {
            rows.push((id, p));
        }
    }
    // The backend servers the listings show (vLLM, SGLang, llama.cpp, …):
    // what a live instance process runs as its child.
    let backends: Vec<&PsRecord> = incident
        .facts
        .ps
        .iter()
        .filter(|p| classify(&p.cmd).is_some())
        .collect();
    groups
        .into_values()
        .filter(|(_, rows)| rows.len() >= 2)
        .map(|(title, mut rows)| {
            rows.sort_by_key(|(id, _)| *id);
            finding(title, &rows, &backends)
        })
        .collect()
}

fn finding(title: &InstanceTitle, rows: &[(u64, &PsRecord)], backends: &[&PsRecord]) -> Finding {
    // Without a backend beside them the wrappers serve nothing: an error,
    // at a low confidence (the listing may be cut). With backends they may
    // all be live instances: a warning.
    let severity = if backends.is_empty() {
        META.severity
    } else {
        Severity::Warning
    };
    let mut f = Finding::new(META.id, META.category, severity);
    let stack = title.stack;
    let pids: Vec<String> = rows.iter().map(|(_, r)| r.pid.to_string()).collect();
    for (id, r) in rows {
        f.entities.pids.insert(r.pid);
        f.evidence(
            r.span,
            format!("PID {} is {stack}'s process for model instance {id}", r.pid),
        );
    }
    for b in backends.iter().take(3) {
        f.evidence(b.span, format!("PID {} is a backend server", b.pid));
    }
    let (first, last) = (rows[0].0, rows[rows.len() - 1].0);
    let latest = rows[rows.len() - 1].1.pid;
    f.condition(
        format!(
            "{} {stack} instance processes are alive at once",
            rows.len()
        ),
        true,
    );
    f.condition(
        "no backend server (vLLM, SGLang, llama.cpp, …) runs beside them in the listing",
        backends.is_empty(),
    );
    f.condition(
        format!(
            "the instances {stack} lists as running are compared (missing: {})",
            title.list
        ),
        false,
    );
    f.condition(
        format!(
            "parents and ages tell the leaked processes from the live one (missing: ps -o pid,ppid,etimes,args -p {})",
            pids.join(",")
        ),
        false,
    );
    f.title = format!(
        "{} {stack} model instance processes alive at once (PIDs {}): instances stopped without their process",
        rows.len(),
        pids.join(", ")
    );
    let beside = if backends.is_empty() {
        " and no backend server runs beside them"
    } else {
        ""
    };
    f.headline = format!(
        "{} {stack} model instance processes are alive at once (PIDs {}, instances {first} to {last}){beside}: {stack} runs one such process per instance it serves, so those it no longer lists as running are instances it stopped without ending their process, each keeping its memory (inferred: the listing does not say which instances {stack} runs; the highest id, {last} (PID {latest}), is the latest started).",
        rows.len(),
        pids.join(", "),
    );
    f.chain.push(format!(
        "{} {stack} instance processes hold host memory, and GPU memory where their backend loaded a model",
        rows.len()
    ));
    f.chain.push(format!(
        "{stack} stopped instances without ending their processes"
    ));
    f.explanation = format!(
        "{stack} starts one process per model instance (titled with the instance's id), which starts the instance's backend server as its child. Stopping an instance must end that process; one that survives keeps its memory, so after instances are stopped and started again several such processes pile up on the worker."
    );
    f.actions.push(Action::advice(
        "tell the live instance processes from the leaked ones: their parent (the worker) and their age",
        Some(&format!("ps -o pid,ppid,etimes,args -p {}", pids.join(","))),
    ));
    f.actions.push(Action::advice(
        format!(
            "compare the instance ids with the instances {stack} lists as running: {}",
            title.list
        ),
        None,
    ));
    f.actions.push(Action::advice(
        "stop the processes of instances it does not list (not the live one), then check that their memory is freed",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        format!("upgrade {stack}: an instance process left after its instance stopped is a bug of the release (gpustack/gpustack#4060)"),
        None,
    ));
    f.confidence = confidence(&f, 0.2, 0.6);
    f
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// fixtures/real/698 (gpustack/gpustack#4060, a maintainer's
    /// reproduction): `ps aux --sort=-%mem | head -n 10` through awk.
    const REAL: &str = "\
USER       PID        0.00 MB COMMAND
root       57704    780.16 MB /usr/local/bin/envoy -c etc/istio/proxy/envoy-rev.json --drain-time-s 45 --drain-strategy immediate --local-address-ip-version v4 --file-flush-interval-msec
root       57586    510.43 MB /usr/bin/python /usr/local/bin/gpustack start
root       57730    369.01 MB gpustack_worker
root       71610    363.38 MB gpustack_model_instance_1299
root       70667    363.34 MB gpustack_model_instance_1199
root       71888    363.33 MB gpustack_model_instance_1330
root       69202    363.32 MB gpustack_model_instance_1044
root       73798    363.32 MB gpustack_model_instance_1542
root       74081    363.32 MB gpustack_model_instance_1574
";

    #[test]
    fn six_instance_processes_without_a_backend() {
        let f = findings_of(super::META.id, REAL);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
            [69202, 70667, 71610, 71888, 73798, 74081]
        );
        assert_eq!(f[0].severity, super::META.severity);
        assert!(f[0].confidence <= 0.5, "{}", f[0].confidence);
        assert!(
            f[0].headline.contains("1574 (PID 74081)"),
            "{}",
            f[0].headline
        );
    }

    /// The same wrappers beside a backend server each (the command line of
    /// vLLM's API server; assembled, not copied): they may all be live, a
    /// warning; one wrapper alone is none.
    #[test]
    fn with_backends_a_warning_and_one_alone_none() {
        let with = format!(
            "{REAL}root       75001   2210.00 MB /usr/bin/python3 -m vllm.entrypoints.openai.api_server --port 40001\n"
        );
        let f = findings_of(super::META.id, &with);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, crate::rules::Severity::Warning);
        let one: String = REAL.lines().take(5).map(|l| format!("{l}\n")).collect();
        assert!(findings_of(super::META.id, &one).is_empty());
    }
}
