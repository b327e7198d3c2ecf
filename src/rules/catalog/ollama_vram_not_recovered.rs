//! `ollama-vram-not-recovered`: Ollama waited for an unloaded runner's GPU
//! memory to come back (`gpu VRAM usage didn't recover within timeout`,
//! naming the runner's PID and VRAM), and the next load then went to the
//! CPU, wholly or in part: the earlier runner still held the GPU.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

use super::gpu_memory_taken_before_load::{attr, size};

pub static RULE: OllamaVramNotRecovered = OllamaVramNotRecovered;

pub struct OllamaVramNotRecovered;

const ROW: &str = "stacks-ollama.vram-not-recovered";
/// Where a load's compute graph went (`backend=CPU`).
const GRAPH: &str = "stacks-ollama.compute-graph";
/// A load's plan (`offload to cuda … layers.offload=0`, `offload to cpu`).
const PLAN: &str = "stacks-ollama.memory-plan";
/// The loader's summary (`offloaded 11/33 layers to GPU`).
const LOADED: &str = "stacks-llamacpp.layers-offloaded";

static META: RuleMeta = RuleMeta {
    id: "ollama-vram-not-recovered",
    category: Category::GpuMemoryHeldByOtherProcess,
    severity: Severity::Error,
    summary: "an unloaded Ollama runner's GPU memory did not come back, and the next load went to the CPU",
    anchors: &[],
    doc: r#"
## What it means
When Ollama unloads a runner to make room it waits a few seconds for the
GPU's free memory to return. `msg="gpu VRAM usage didn't recover within
timeout"` says it did not: the runner it names (`runner.pid=41`,
`runner.vram="45.8 GiB"`) or another process still held the memory. When
the next load is then placed on the CPU (`msg="compute graph"
backend=CPU`, a plan with `layers.offload=0`, `offloaded 11/33 layers to
GPU`), the held memory is why.
Alone, the warning is common and harmless: this rule needs the CPU load
after it.

## Why it happens
1. The earlier runner has not exited yet (a large model takes time to
   free, or the runner hangs on its way out).
2. Another program took the memory meanwhile.
3. The driver's free-memory figure lags (`failed to get device context`
   lines around it).

## How to confirm
`nvidia-smi` right after the load: the runner's PID still listed with its
memory; `ollama ps` shows which models Ollama keeps loaded.

## How to fix
Unload the old model (`ollama stop MODEL`, a shorter `keep_alive`) and load
the new one again; if the old runner does not exit, restart the Ollama
service.

## Safety
Advice only: no process is signalled; restarting the service is left to
the operator.
"#,
};

/// One warning: the runner it names and what it held.
struct Warning<'a> {
    msg: &'a Message,
    pid: Option<u32>,
    vram: Option<&'a str>,
}

fn warnings(incident: &Incident) -> Vec<Warning<'_>> {
    incident
        .known(ROW)
        .map(|(msg, _)| Warning {
            msg,
            pid: attr(&msg.text, "runner.pid").and_then(|p| p.parse().ok()),
            vram: attr(&msg.text, "runner.vram"),
        })
        .collect()
}

/// The first line after `after` that says a load went to the CPU, wholly
/// or in part, and what it says.
fn cpu_load<'a>(incident: &'a Incident, after: &Message) -> Option<(&'a Message, String)> {
    let graph = incident.known(GRAPH).filter_map(|(m, _)| {
        let backend = attr(&m.text, "backend")?;
        backend
            .eq_ignore_ascii_case("cpu")
            .then(|| (m, "its compute graph was put on the CPU".to_owned()))
    });
    let plan = incident.known(PLAN).filter_map(|(m, _)| {
        let offload = attr(&m.text, "layers.offload").and_then(|v| v.parse::<u32>().ok());
        let model = attr(&m.text, "layers.model").and_then(|v| v.parse::<u32>().ok());
        if m.text.contains("msg=\"offload to cpu\"") {
            return Some((m, "its plan put no layer on the GPU".to_owned()));
        }
        match (offload, model) {
            (Some(o), Some(n)) if o < n => {
                Some((m, format!("its plan put {o} of {n} layers on the GPU")))
            }
            _ => None,
        }
    });
    let loaded = incident.known(LOADED).filter_map(|(m, hit)| {
        let gpu: u32 = hit.get("ngl")?.parse().ok()?;
        let all: u32 = hit.get("layers")?.parse().ok()?;
        (gpu < all).then(|| (m, format!("it put {gpu} of {all} layers on the GPU")))
    });
    // A GPU backend's graph after the warning: the load did reach the GPU.
    let on_gpu = incident.known(GRAPH).any(|(m, _)| {
        m.span > after.span
            && attr(&m.text, "backend").is_some_and(|b| !b.eq_ignore_ascii_case("cpu"))
    });
    if on_gpu {
        return None;
    }
    graph
        .chain(plan)
        .chain(loaded)
        .filter(|(m, _)| m.span > after.span)
        .min_by_key(|(m, _)| m.span)
}

impl Rule for OllamaVramNotRecovered {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let list = warnings(incident);
        let Some((w, (load, how))) = list
            .iter()
            .find_map(|w| cpu_load(incident, w.msg).map(|l| (w, l)))
        else {
            return;
        };
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = list.len() as u32;
        let runner = match (w.pid, w.vram) {
            (Some(p), Some(v)) => format!("the previous runner (PID {p}, {v} of VRAM)"),
            (Some(p), None) => format!("the previous runner (PID {p})"),
            (None, Some(v)) => format!("the previous runner ({v} of VRAM)"),
            (None, None) => "the previous runner".to_owned(),
        };
        let note = format!("{runner} had not released the GPU's memory within the timeout");
        match w.pid {
            Some(p) => f.evidence_marked(w.msg.span, note, format!("runner.pid={p}")),
            None => f.evidence(w.msg.span, note),
        }
        f.evidence(load.span, format!("the next load went to the CPU: {how}"));
        if let Some(p) = w.pid {
            f.entities.pids.insert(p);
        }
        f.condition(
            "Ollama said an unloaded runner's VRAM did not recover",
            true,
        );
        f.condition("the next load went to the CPU", true);
        // Numbers before blame: the held VRAM covers what the new load
        // needed, where its plan says.
        let need = incident
            .known(PLAN)
            .filter(|(m, _)| m.span > w.msg.span)
            .find_map(|(m, _)| attr(&m.text, "memory.required.full").and_then(size));
        let vram = w.vram.and_then(size);
        f.condition(
            "the runner's VRAM covers the new load's need (where its plan says)",
            matches!((vram, need), (Some(v), Some(n)) if v.gib >= n.gib),
        );
        f.title = format!("the GPU was still held by {runner}: the next load went to the CPU");
        f.headline = format!(
            "Ollama waited for {runner} to release the GPU, the memory did not come back in time, and the next load went to the CPU ({how}): the GPU was still held."
        );
        f.chain
            .push(format!("the next load went to the CPU, slower: {how}"));
        f.chain.push(format!(
            "{runner} still held the GPU's memory when the load was planned"
        ));
        f.explanation = "Ollama plans each load from the GPU memory free at that moment; a runner that has not yet let go of its memory leaves too little, and the new model goes to the CPU.".to_owned();
        let check = match w.pid {
            Some(p) => format!(
                "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; ps -o pid,etime,args -p {p}"
            ),
            None => crate::rules::support::COMPUTE_APPS.to_owned(),
        };
        f.actions.push(Action::advice(
            "check whether the previous runner still holds the GPU",
            Some(&check),
        ));
        f.actions.push(Action::advice(
            "unload the old model first (ollama stop MODEL, or a shorter keep_alive) and load the new one again; if the old runner does not exit, restart the Ollama service",
            Some("ollama ps"),
        ));
        f.confidence = confidence(&f, 0.5, 0.8);
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// Ollama issue 11812, verbatim (the first line of the paste, and the
    /// load's compute graph on the CPU).
    const WARN_0_11: &str = r#"time=2025-08-08T14:28:48.816Z level=WARN source=sched.go:685 msg="gpu VRAM usage didn't recover within timeout" seconds=5.256447526 runner.size="76.6 GiB" runner.vram="45.8 GiB" runner.parallel=1 runner.pid=41 runner.model=/root/.ollama/models/blobs/sha256-90a618fe6ff21b09ca968df959104eb650658b0bef0faef785c18c2795d993e3
time=2025-08-08T14:28:48.863Z level=INFO source=ggml.go:672 msg="compute graph" backend=CPU buffer_type=CPU size="4.0 GiB"
"#;

    #[test]
    fn the_runner_that_kept_the_gpu_is_named() {
        let f = findings_of(super::META.id, WARN_0_11);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.pids.contains(&41));
        assert!(f[0].title.contains("45.8 GiB"), "{}", f[0].title);
    }

    /// The older wording (issue 7941: `model=`, no runner PID, under
    /// syslog) followed by a plan that put none of 41 layers on the GPU
    /// (issue 8310's plan line): the same mechanism, read the same way.
    #[test]
    fn the_older_wording_and_a_zero_layer_plan_are_read_too() {
        let text = r#"Dec  5 10:34:30 localhost ollama: time=2024-12-05T10:34:30.066+08:00 level=WARN source=sched.go:646 msg="gpu VRAM usage didn't recover within timeout" seconds=5.032960268 model=/data/ollama/models/blobs/sha256-667b0c1932bc6ffc593ed1d03f895bf2dc8dc6df21db3042284a6f4416b06a29
time=2025-01-05T16:44:53.336+02:00 level=INFO source=memory.go:356 msg="offload to cuda" projector.weights="1.8 GiB" projector.graph="2.8 GiB" layers.requested=-1 layers.model=41 layers.offload=0 layers.split="" memory.available="[3.5 GiB]" memory.gpu_overhead="0 B" memory.required.full="6.2 GiB"
"#;
        let f = findings_of(super::META.id, text);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.pids.is_empty());
    }

    /// The warning alone (fixtures/real/064) or followed by a load on the
    /// GPU is Ollama's ordinary wait, not a finding.
    #[test]
    fn the_warning_alone_or_a_gpu_load_after_it_is_no_finding() {
        let alone =
            "level=WARN source=sched.go:646 msg=\"gpu VRAM usage didn't recover within timeout\"\n";
        assert!(findings_of(super::META.id, alone).is_empty());
        let on_gpu = WARN_0_11.replace(
            "backend=CPU buffer_type=CPU",
            "backend=CUDA0 buffer_type=CUDA0",
        );
        assert!(findings_of(super::META.id, &on_gpu).is_empty());
    }
}
