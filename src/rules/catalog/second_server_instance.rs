//! `second-server-instance`: two instances of one server in the inputs, each
//! printing the KV-cache budget it found at start-up: the later one found
//! (almost) nothing where the earlier one found plenty, because the earlier
//! instance still holds its share of the device and the later one counts it
//! as its own use.

use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: SecondServerInstance = SecondServerInstance;

pub struct SecondServerInstance;

/// The rows whose lines state a start-up KV-cache budget, and the unit of
/// each row's figure.
const BUDGETS: &[(&str, Unit)] = &[
    ("stacks-vllm.ascend-available-memory", Unit::Bytes),
    ("stacks-vllm.memory-profiling", Unit::Gib),
];

/// Rows that say an engine failed at start-up.
const FAILED: &[&str] = &[
    "stacks-vllm.enginecore-failed-to-start",
    "stacks-vllm.engine-core-init-failed",
];

/// An earlier budget at least this large (GiB) is an instance that holds
/// memory worth counting.
const MIN_FIRST_GIB: f64 = 1.0;
/// The later budget is at most this share of the earlier one.
const DROP_SHARE: f64 = 0.25;

#[derive(Clone, Copy)]
enum Unit {
    Bytes,
    Gib,
}

static META: RuleMeta = RuleMeta {
    id: "second-server-instance",
    category: Category::GpuMemoryHeldByOtherProcess,
    severity: Severity::Error,
    summary: "a second instance of a server found no room for its KV cache: the first instance holds the device's memory",
    anchors: &[],
    doc: r#"
## What it means
Two instances of the same server (two `EngineCore_DP0` processes with
different PIDs) print the KV-cache budget each found at start-up: vLLM
Ascend's `Available memory: 23106324992, total memory: 65452113920`, vLLM's
`Available KV cache memory: 18.83 GiB`. The first found room; the second,
started while the first was running, found none (`Available memory: 0`) and
failed. The budget is `gpu_memory_utilization x total - peak use`, and the
peak counts every byte in use on the device: the first instance's weights
and KV cache are charged to the second.

## Why it happens
1. Two servers started on one GPU or NPU, each with its own
   `--gpu-memory-utilization`: the second sees the first's memory as its own
   use (vLLM before the fix of PR #18974, vLLM Ascend).
2. A restart of the server while the old instance had not yet exited.

## How to confirm
`nvidia-smi` (`npu-smi info` on Ascend) lists both processes on the device
and their memory; the first instance's PID is in its log prefix.

## How to fix
Give each instance its own device, or start them one after the other with
utilization fractions that add up to less than 1 and a version that counts
only its own memory; if the first instance is a leftover of a restart, wait
until it has exited.

## Safety
Advice only: the first instance is usually a working server.
"#,
};

/// A writer's tag in a line's prefix: `(EngineCore_DP0 pid=3052)`,
/// `(VllmWorker rank=0 pid=2120280)`.
static WRITER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\((?P<name>[A-Za-z_][A-Za-z0-9_]*(?: rank=[0-9]+)?) pid=(?P<pid>[0-9]+)\)")
        .expect("writer regex")
});

/// One instance's start-up budget.
struct Budget<'a> {
    msg: &'a Message,
    /// The writer's name and rank, without its PID.
    writer: String,
    pid: u32,
    gib: f64,
    /// The figure as printed.
    text: String,
    total: Option<f64>,
}

fn gib(value: &str, unit: Unit) -> Option<f64> {
    let n: f64 = value.replace(',', "").parse().ok()?;
    Some(match unit {
        Unit::Bytes => n / (1024.0 * 1024.0 * 1024.0),
        Unit::Gib => n,
    })
}

fn budgets(incident: &Incident) -> Vec<Budget<'_>> {
    let mut out = Vec::new();
    for (row, unit) in BUDGETS {
        for (msg, hit) in incident.known(row) {
            let Some(w) = WRITER.captures(&msg.text) else {
                continue;
            };
            let (value, total) = match unit {
                Unit::Bytes => (hit.get("avail"), hit.get("total")),
                // The row's other wordings print the total or a time.
                Unit::Gib if hit.matched.contains("Available KV cache memory") => {
                    (hit.get("gib"), None)
                }
                Unit::Gib => continue,
            };
            let (Some(value), Some(pid)) = (value, w["pid"].parse().ok()) else {
                continue;
            };
            let Some(g) = gib(value, *unit) else {
                continue;
            };
            let text = match unit {
                Unit::Bytes => format!("Available memory: {value}"),
                Unit::Gib => format!("{value} GiB"),
            };
            out.push(Budget {
                msg,
                writer: w["name"].to_owned(),
                pid: msg.pid.unwrap_or(pid),
                gib: g,
                text,
                total: total.and_then(|t| gib(t, *unit)),
            });
        }
    }
    out.sort_by_key(|b| b.msg.span);
    out
}

/// The first pair (earlier, later) of one writer's name with different
/// PIDs where the later budget fell to a fraction of the earlier one.
fn pair<'b, 'a>(list: &'b [Budget<'a>]) -> Option<(&'b Budget<'a>, &'b Budget<'a>)> {
    list.iter().enumerate().find_map(|(i, later)| {
        list[..i].iter().find_map(|first| {
            let same_device = match (first.total, later.total) {
                (Some(a), Some(b)) => (a - b).abs() < 0.01,
                _ => true,
            };
            let fell = first.gib >= MIN_FIRST_GIB && later.gib <= DROP_SHARE * first.gib;
            (first.writer == later.writer && first.pid != later.pid && same_device && fell)
                .then_some((first, later))
        })
    })
}

impl Rule for SecondServerInstance {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let list = budgets(incident);
        let Some((first, later)) = pair(&list) else {
            return;
        };
        // The later instance's own failure, after its budget line.
        let failed = FAILED
            .iter()
            .flat_map(|row| incident.known(row))
            .map(|(m, _)| m)
            .find(|m| {
                m.span > later.msg.span
                    && WRITER
                        .captures(&m.text)
                        .and_then(|w| w["pid"].parse::<u32>().ok())
                        .is_some_and(|p| p == later.pid)
            });
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.evidence_marked(
            first.msg.span,
            format!(
                "instance {} (PID {}) found {:.1} GiB for its KV cache and kept it",
                first.writer, first.pid, first.gib
            ),
            first.pid.to_string(),
        );
        f.evidence_marked(
            later.msg.span,
            format!(
                "a second {} (PID {}) found {:.1} GiB: the first one's memory counted as its own",
                later.writer, later.pid, later.gib
            ),
            later.text.clone(),
        );
        if let Some(m) = failed {
            f.evidence(m.span, format!("PID {} failed to start", later.pid));
        }
        f.entities.pids.insert(first.pid);
        f.entities.pids.insert(later.pid);
        let drop = first.gib - later.gib;
        f.condition(
            "two processes of one server name, with different PIDs, printed their start-up budgets",
            true,
        );
        // Numbers before blame: what the first holds (at least its KV cache)
        // covers what the second lost.
        f.condition(
            format!(
                "the first instance's KV cache alone ({:.1} GiB) covers the second's shortfall ({drop:.1} GiB)",
                first.gib
            ),
            first.gib + 0.05 >= drop,
        );
        f.condition(
            "the second instance failed to start after it",
            failed.is_some(),
        );
        f.title = format!(
            "a second instance of the server (PID {}) found no room: the first (PID {}) holds the device",
            later.pid, first.pid
        );
        f.headline = format!(
            "A second {} (PID {}) found {} for its KV cache where the first (PID {}) had found {:.1} GiB: the first instance still holds its share of the device, and the second counts that memory as its own use.",
            later.writer, later.pid, later.text, first.pid, first.gib
        );
        f.chain.push(format!(
            "the second instance (PID {}) had no memory left for its KV cache{}",
            later.pid,
            if failed.is_some() {
                " and failed to start"
            } else {
                ""
            }
        ));
        f.chain.push(format!(
            "the first instance (PID {}) holds its weights and {:.1} GiB of KV cache on the same device",
            first.pid, first.gib
        ));
        f.explanation = "The start-up budget is gpu_memory_utilization x the device's total minus the peak use measured while profiling, and that peak counts every byte in use on the device: an instance started beside another charges the other's memory to itself. The first instance is the holder, not the model's size.".to_owned();
        f.actions.push(Action::advice(
            format!(
                "list the processes on the device and their memory: the first instance (PID {}) should be there",
                first.pid
            ),
            Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv   # npu-smi info on Ascend"),
        ));
        f.actions.push(Action::advice(
            "give each instance its own device, or start them one after the other with gpu-memory-utilization fractions that add up to less than 1; if the first is a leftover of a restart, wait until it has exited; do not stop a working first instance to make room",
            None,
        ));
        f.confidence = confidence(&f, 0.55, 0.8);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// vllm-ascend issue 5917, verbatim: EngineCore 3052 found 21.5 GiB,
    /// EngineCore 4146, started 85 s later on the same NPU, found 0.
    const ASCEND: &str = "[mineru] ^[[0;36m(EngineCore_DP0 pid=3052)^[[0;0m INFO 01-15 06:46:16 [worker_v1.py:270] Available memory: 23106324992, total memory: 65452113920
[mineru] ^[[0;36m(EngineCore_DP0 pid=3052)^[[0;0m INFO 01-15 06:46:16 [kv_cache_utils.py:1286] GPU KV cache size: 1,880,320 tokens

[mineru] ^[[0;36m(EngineCore_DP0 pid=4146)^[[0;0m INFO 01-15 06:47:41 [worker_v1.py:270] Available memory: 0, total memory: 65452113920
[mineru] ^[[0;36m(EngineCore_DP0 pid=4146)^[[0;0m ERROR 01-15 06:47:41 [core.py:843] EngineCore failed to start.
";

    #[test]
    fn the_second_ascend_instance_names_the_first_as_holder() {
        let f = findings_of(super::META.id, ASCEND);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.pids.contains(&3052));
        assert!(
            f[0].headline.contains("Available memory: 0"),
            "{}",
            f[0].headline
        );
        assert!(
            f[0].conditions.iter().all(|c| c.met),
            "{:#?}",
            f[0].conditions
        );
    }

    /// The same grammar from vLLM's own V1 worker: the real line of vLLM
    /// PR 21728 (`Available KV cache memory: 18.83 GiB`, pid 2120280), and
    /// a second writer of the same name with another PID whose budget is
    /// `0.00 GiB` (the figure varied, the grammar kept).
    #[test]
    fn a_second_vllm_worker_instance_is_read_the_same_way() {
        let text = "(VllmWorker rank=0 pid=2120280) INFO 07-28 23:02:27 [gpu_worker.py:255] Available KV cache memory: 18.83 GiB
(VllmWorker rank=0 pid=2131544) INFO 07-28 23:04:02 [gpu_worker.py:255] Available KV cache memory: 0.00 GiB
";
        let f = findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.pids.contains(&2120280));
    }

    /// Near misses: ranks of one server (different names) on their own
    /// GPUs, and a restart that found the same budget again.
    #[test]
    fn ranks_of_one_server_and_a_clean_restart_are_not_a_second_instance() {
        let ranks = "(VllmWorker rank=0 pid=2120280) INFO 07-28 23:02:27 [gpu_worker.py:255] Available KV cache memory: 18.83 GiB
(VllmWorker rank=1 pid=2120281) INFO 07-28 23:02:27 [gpu_worker.py:255] Available KV cache memory: 0.00 GiB
";
        assert!(findings_of(super::META.id, ranks).is_empty());
        let restart = ASCEND.replace("Available memory: 0,", "Available memory: 23106324992,");
        assert!(findings_of(super::META.id, &restart).is_empty());
    }
}
