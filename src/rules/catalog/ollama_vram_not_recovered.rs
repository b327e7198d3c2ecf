//! `ollama-vram-not-recovered`: Ollama waited for an unloaded runner's GPU
//! memory to come back (`gpu VRAM usage didn't recover within timeout`,
//! naming the runner's PID and VRAM), and the next load then went to the
//! CPU, wholly or in part: the earlier runner still held the GPU. Or the
//! server's own memory query around it was refused with CUDA's
//! device-unavailable code (`cuda driver library failed to get device
//! context 46`): another process (the earlier runner) held the GPU.

use crate::catalogs::Via;
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
/// CUDA's device-unavailable code (46) …
const UNAVAILABLE: &str = "cuda.devices-unavailable";
/// … as Ollama's own GPU memory query prints it (catalogs/cuda.toml).
const QUERY: &str = "cuda.wrapper.ollama-device-context";

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
after it, or the server's own memory query refused beside it: Ollama
0.1.34 – 0.12.3 reads the GPU's free memory through a CUDA context of its
own, and `cuda driver library failed to get device context 46` (printed
with no newline, so the journal glues the next record to the code:
`… context 46time=2024-…`) is CUDA_ERROR_DEVICE_UNAVAILABLE: the GPU
refuses a new context because another process holds it (an exclusive
compute mode, or a runner that has not let go). Then the scheduler cannot
see what is free, and may load another model where there is no room
(ollama#6637).

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
            out.extend(refused(incident, &list));
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

/// Ollama's own GPU memory queries refused with CUDA's device-unavailable
/// code (46), in the input of a warning: the GPU held by another process.
fn refused(incident: &Incident, list: &[Warning<'_>]) -> Option<Finding> {
    let w = list.first()?;
    let queries: Vec<&Message> = incident
        .known(UNAVAILABLE)
        .filter(|(m, hit)| {
            m.span.source == w.msg.span.source
                && matches!(hit.via, Via::Wrapper(x) if x.id == QUERY)
        })
        .map(|(m, _)| m)
        .collect();
    let first = *queries.first()?;
    // Critical, as CUDA's code alone is (catalogs/cuda.toml); the warning
    // beside it makes the reading surer than the code's alone.
    let mut f = Finding::new(META.id, META.category, Severity::Critical);
    f.occurrences = u32::try_from(queries.len()).unwrap_or(u32::MAX);
    // The server whose query was refused: the journal line's writer.
    let server = incident.journal_writer(first.span).filter(|p| *p > 1);
    let who = match server {
        Some(p) => format!("Ollama's server (PID {p})"),
        None => "Ollama's server".to_owned(),
    };
    f.entities.pids.extend(server);
    f.evidence_marked(
        first.span,
        format!(
            "{who} could not open a CUDA context to read the GPU's free memory: `failed to get device context 46` is CUDA_ERROR_DEVICE_UNAVAILABLE, the GPU busy or unavailable ({}x)",
            queries.len()
        ),
        "device context 46",
    );
    f.evidence_marked(
        w.msg.span,
        "the scheduler: gpu VRAM usage didn't recover within timeout after an unload: the memory was still held",
        "didn't recover within timeout",
    );
    if let Some(p) = w.pid {
        f.entities.pids.insert(p);
    }
    f.condition(
        "Ollama's own GPU memory query was refused with CUDA error 46 (device unavailable)",
        true,
    );
    f.condition(
        "Ollama said an unloaded runner's VRAM did not recover",
        true,
    );
    f.condition(
        "the process that holds the GPU is listed (missing: nvidia-smi)",
        false,
    );
    f.title = format!(
        "the GPU refuses {who}'s own memory query (device context 46) and an unloaded runner's VRAM did not recover: another process holds the GPU"
    );
    f.headline = format!(
        "{who} cannot open a CUDA context to read the GPU's memory (failed to get device context 46: busy or unavailable) and its scheduler says an unloaded runner's VRAM didn't recover within timeout: another process, most likely an earlier Ollama runner still loaded or unloading, holds the GPU, so the scheduler plans loads without knowing what is free."
    );
    f.chain.push(
        "Ollama's scheduler cannot read the GPU's free memory and may load a model where there is no room".to_owned(),
    );
    f.chain.push(
        "another process (an earlier runner) holds the GPU, which refuses Ollama a new context"
            .to_owned(),
    );
    f.explanation = "Ollama reads a GPU's free memory through a CUDA context of its own; CUDA error 46 refuses that context while another process holds the GPU (an exclusive compute mode, or a runner that has not exited), and the VRAM-recovery warning says an unloaded runner's memory had not come back.".to_owned();
    f.actions.push(Action::advice(
        "list the GPU's processes and its compute mode: an earlier runner still holding it, or Exclusive_Process refusing a second context",
        Some(
            "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; nvidia-smi -q -d COMPUTE",
        ),
    ));
    f.actions.push(Action::advice(
        "stop the old model (ollama stop MODEL) or wait for its runner to exit; keep one model loaded at a time (OLLAMA_MAX_LOADED_MODELS=1) on a GPU that cannot hold two; set the compute mode back to Default (nvidia-smi -c 0) where it is exclusive",
        Some("ollama ps"),
    ));
    f.confidence = confidence(&f, 0.7, 0.95);
    Some(f)
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

    /// ollama#6637 (Ollama 0.3.9, journal): the server's own memory query
    /// refused with error 46, its C helper's message glued to the next
    /// record, beside the VRAM-recovery warning: the GPU held by another
    /// process, the server named by its journal PID.
    const REFUSED_0_3: &str = r#"Sep 04 14:30:10 FORGE ollama[1461072]: cuda driver library failed to get device context 46time=2024-09-04T14:30:10.470-04:00 level=WARN source=gpu.go:400 msg="error looking up nvidia GPU memory"
Sep 04 14:30:11 FORGE ollama[1461072]: time=2024-09-04T14:30:11.469-04:00 level=WARN source=sched.go:647 msg="gpu VRAM usage didn't recover within timeout" seconds=5.000829377 model=/usr/share/ollama/.ollama/models/blobs/sha256-8169bd33ad1351c56755330bd6f1cf5696de6ac297420024fa8aebae5656b0e2
Sep 04 14:30:11 FORGE ollama[1461072]: cuda driver library failed to get device context 46time=2024-09-04T14:30:11.470-04:00 level=WARN source=gpu.go:400 msg="error looking up nvidia GPU memory"
"#;

    #[test]
    fn the_servers_refused_memory_query_beside_the_warning_is_a_held_gpu() {
        let f = findings_of(super::META.id, REFUSED_0_3);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert!(f[0].entities.pids.contains(&1461072), "{f:#?}");
        assert_eq!(f[0].occurrences, 2);
        crate::testing::cites_line_saying(&f[0], 2, "didn't recover");
    }

    /// The refusal with another code (ollama#8647's 999, an unknown
    /// error) is no held GPU; nor is code 46 without the warning (the
    /// CUDA error's own finding says it).
    #[test]
    fn another_code_or_no_warning_is_no_finding() {
        let unknown = REFUSED_0_3.replace("context 46time", "context 999time");
        assert!(findings_of(super::META.id, &unknown).is_empty());
        let alone: String = REFUSED_0_3
            .lines()
            .filter(|l| !l.contains("sched.go"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(findings_of(super::META.id, &alone).is_empty());
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
