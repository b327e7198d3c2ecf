//! `startup-stalled-after-worker-init`: a model server's log ends right after
//! its worker processes came up, with no error: a start-up that froze. On a
//! restart the usual cause is the previous instance, still holding the GPUs.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, distinct, matches};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: StartupStalledAfterWorkerInit = StartupStalledAfterWorkerInit;

pub struct StartupStalledAfterWorkerInit;

/// One line per worker process as it comes up: PyTorch's allocator warning
/// when `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` meets a platform
/// without it (`[W214 15:20:56.97 CUDAAllocatorConfig.h:28] Warning:
/// expandable_segments not supported on this platform (function
/// operator())`), and vLLM v0's `Worker ready; awaiting tasks`.
static WORKER_UP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"expandable_segments not supported on this platform|Worker ready; awaiting tasks")
        .expect("regex")
});

/// A failure anywhere: then that failure is the story, not a stall.
static FAILURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\berror\b|Traceback|exception|out of memory|killed|SIGKILL|SIGTERM|died|core dumped|timed? ?out")
        .expect("regex")
});

/// `(VllmWorkerProcess pid=1876891)`.
static PROCESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\([A-Za-z][0-9A-Za-z_.-]* pid=(?P<pid>[0-9]+)\)").expect("regex")
});

static META: RuleMeta = RuleMeta {
    id: "startup-stalled-after-worker-init",
    category: Category::ServerHang,
    severity: Severity::Error,
    summary: "the server's start-up stopped right after its workers came up, with no error: likely a previous instance still holds the GPUs",
    anchors: &[
        "expandable_segments not supported on this platform",
        "Worker ready; awaiting tasks",
    ],
    doc: r#"
## What it means
The log of a multi-process model server (vLLM, SGLang) ends right after each
worker process came up: one `expandable_segments not supported on this
platform` warning per process (PyTorch, when `PYTORCH_CUDA_ALLOC_CONF`
asks for expandable segments), or vLLM v0's `Worker ready; awaiting tasks`
per worker, and then nothing: no weight loading, no error, no exit. The
start-up froze. The warnings themselves are harmless.

## Why it happens
Most often on a restart: the previous instance's workers survived the end of
its script or unit (`process group has NOT been destroyed` on the previous
exit), still hold the GPUs' memory and the NCCL/shared-memory resources, and
the new workers wait on them. Also: a stuck NCCL initialisation (P2P or
network trouble between the GPUs), or a GPU in a bad state.

## How to confirm
What is missing is the state of the host: `nvidia-smi
--query-compute-apps=pid,used_memory --format=csv` lists processes still on
the GPUs; `ps -eo pid,ppid,lstart,cmd | grep -i vllm` shows workers older
than the current start (PPID 1: orphans). `py-spy dump --pid PID` on a new
worker shows where it waits.

## How to fix
Stop the leftover processes once confirmed as the old instance (start time
before the current start, same command line), then start again. Run the
server under a unit with `KillMode=control-group` so its workers end with it.

## Safety
Advice only: nothing in a log names the leftover processes; the report
names the commands that would.

## Seen in
- https://github.com/vllm-project/vllm/issues/13294 (restart after 0.6.6: the `expandable_segments` warnings, then nothing; leftover vLLM processes, `ps -ef | grep vllm`): `pos-vllm-0.7-expandable-segments-restart`
- https://github.com/EleutherAI/lm-evaluation-harness/issues/3093 (`Worker ready; awaiting tasks` forever): `pos-vllm-v0-workers-ready`
"#,
};

impl Rule for StartupStalledAfterWorkerInit {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let ups: Vec<&Message> = matches(incident, &WORKER_UP).map(|(m, _)| m).collect();
        // At least two processes came up: a multi-process server.
        if ups.len() < 2 {
            return;
        }
        // Any failure in the inputs tells its own story.
        if incident
            .facts
            .messages
            .iter()
            .any(|m| !WORKER_UP.is_match(&m.text) && FAILURE.is_match(&m.text))
        {
            return;
        }
        let last = ups[ups.len() - 1].span;
        // The log must end there: no later line that carries a time, a
        // server event or an anchor in the same input.
        let later = |s: crate::source::Span| s.source == last.source && s > last;
        let continued = incident.facts.messages.iter().any(|m| later(m.span))
            || incident.facts.server_events.iter().any(|e| later(e.span))
            || incident.facts.line_times.iter().any(|(s, _)| later(*s));
        if continued {
            return;
        }
        // Another process on the GPUs answers it better (the holder rules).
        let holders = !incident.gpu_processes.is_empty();
        let pids: BTreeSet<u32> = ups
            .iter()
            .filter_map(|m| PROCESS.captures(&m.text)?["pid"].parse().ok())
            .collect();
        let mut f = Finding::new(META.id, META.category, META.severity);
        f.occurrences = ups.len() as u32;
        for (m, n) in distinct(ups.iter().copied()).into_iter().take(2) {
            f.evidence(m.span, format!("a worker process came up ({n}x)"));
        }
        f.evidence_once(
            last,
            "the log ends here: no weight loading, no error, no exit",
        );
        f.entities.pids.extend(pids.iter().copied());
        f.condition(
            format!(
                "{} worker processes came up, then the log ends without an error",
                ups.len()
            ),
            true,
        );
        f.condition("the processes on the GPUs are known (nvidia-smi)", holders);
        f.condition(
            "the host's process list is known (ps)",
            !incident.facts.ps.is_empty(),
        );
        f.title = format!(
            "start-up stopped after {} worker processes came up, with no error",
            ups.len()
        );
        f.headline = format!(
            "The server's start-up froze right after its {} worker processes came up: no weight loading, no error. On a restart this is usually a previous instance (e.g. leftover vllm workers) still holding the GPUs; ps and nvidia-smi would settle it.",
            ups.len()
        );
        f.chain
            .push("the new server never finished starting".to_owned());
        f.chain.push(format!(
            "its {} worker processes came up and then logged nothing more",
            ups.len()
        ));
        f.chain.push("likely: the previous instance's workers still hold the GPUs (or NCCL initialisation is stuck); missing: the processes on the GPUs".to_owned());
        f.explanation = "The warnings are harmless; what matters is that nothing follows them. The log cannot say which process holds the GPUs: the process list and nvidia-smi can.".to_owned();
        f.actions.push(Action::advice(
            "list what still runs on the GPUs",
            Some("nvidia-smi --query-compute-apps=pid,used_memory --format=csv"),
        ));
        f.actions.push(Action::advice(
            "look for leftover workers of a previous run (started before this start, often with PPID 1)",
            Some("ps -eo pid,ppid,lstart,stat,cmd | grep -iE 'vllm|sglang' | grep -v grep"),
        ));
        f.actions.push(Action::advice(
            "stop only processes confirmed to be the previous instance, then start the server again; if nothing is left over, dump a new worker's stack (py-spy dump --pid PID) to see where it waits",
            None,
        ));
        f.confidence = confidence(&f, 0.3, 0.6);
        out.push(f);
    }
}
