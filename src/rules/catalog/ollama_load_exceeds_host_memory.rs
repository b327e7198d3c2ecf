//! `ollama-load-exceeds-host-memory`: Ollama's own plan for a load puts
//! more of the model in host RAM than the host has free (its `system
//! memory` line): the part not offloaded to the GPU (`memory.required.full`
//! less `memory.required.partial`) fills free RAM and swap, and the
//! kernel's OOM killer ends the runner. Read from the plan whole or wrapped
//! over several lines where a paste broke it.

use crate::correlate::Incident;
use crate::model::Message;
use crate::rules::support::{confidence, kernel_oom_killed};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

use super::gpu_memory_taken_before_load::{Size, attr, size};

pub static RULE: OllamaLoadExceedsHostMemory = OllamaLoadExceedsHostMemory;

pub struct OllamaLoadExceedsHostMemory;

/// A load's plan (`msg=offload …`, `msg="offload to cuda"`).
const PLAN: &str = "stacks-ollama.memory-plan";
/// The host's memory as the scheduler saw it (`msg="system memory"`).
const SYSTEM: &str = "stacks-ollama.system-memory";
/// Ollama's own refusal when the host part does not fit: its finding says it.
const REFUSED: &str = "stacks-ollama.requires-more-system-memory";
/// The runner killed by a signal (`llama runner process has terminated:
/// signal: killed`).
const KILLED: &str = "stacks-ollama.runner-killed";

/// The host part of the load, as a share of free RAM and swap, from which
/// the load leaves the host no room: what is left is less than a tenth.
const FULL_SHARE: f64 = 0.9;

/// How many lines a wrapped record spans at most.
const WRAP: u32 = 8;

static META: RuleMeta = RuleMeta {
    id: "ollama-load-exceeds-host-memory",
    category: Category::HostOomKiller,
    severity: Severity::Error,
    summary: "Ollama's plan puts more of the model in host RAM than the host has free: the OOM killer ends the runner",
    // A plan wrapped where it was quoted keeps its head (`msg=offload`)
    // and its figures (`memory.required.full=`) on lines of their own.
    anchors: &["msg=offload", "memory.required.full"],
    doc: r#"
## What it means
Ollama prints its plan for every load: how many of the model's layers go
on the GPU and what the load needs (`msg=offload … layers.model=49
layers.offload=4 … memory.required.full="68.3 GiB"
memory.required.partial="10.9 GiB"`), and the host's memory as the
scheduler saw it (`msg="system memory" total="62.6 GiB" free="59.1 GiB"
free_swap="215.1 MiB"`). What the full load needs beyond the part placed
on the GPU stays in host RAM (for `offload to cpu`, all of it). When that
part takes nine tenths or more of the free RAM and swap, the load leaves
the host nothing to spare: the kernel's OOM killer ends the runner, the
biggest process, as soon as anything else asks for memory (macOS, whose
swap grows on demand, lets the load start and kills it the same way).
The plan may be wrapped over several lines where it was pasted; its
figures are read from the whole record.

## Why it happens
A model bigger than the GPU runs mostly on the CPU: a large model on a
small card, a long context (`num_ctx`) whose KV cache grows the plan, or
a GPU other programs already fill. Ollama refuses a load whose host part
exceeds free RAM and swap (`model requires more system memory`), but not
one that only just fits.

## How to confirm
The kernel logs the kill: `journalctl -k | grep -i -e oom -e 'killed
process'` around the load (`Out of memory: Killed process PID (ollama)`);
`free -h` for the host's memory.

## How to fix
A smaller model or quantisation, a smaller context (`num_ctx`), more
layers on the GPU (free the GPU, or a larger card), more RAM or swap.

## Safety
Advice only: nothing is stopped or killed.
"#,
};

/// A plan's figures, read from its record (one line or wrapped).
struct Plan<'a> {
    /// The line the record starts on (its journal head carries the PID).
    head: &'a Message,
    /// The line that prints `memory.required.full`.
    figures: &'a Message,
    full: Size<'a>,
    partial: Size<'a>,
    offload: Option<&'a str>,
    model: Option<&'a str>,
}

/// The host's memory at the load.
struct Host<'a> {
    msg: &'a Message,
    total: Option<Size<'a>>,
    free: Size<'a>,
    swap: Option<Size<'a>>,
}

impl Rule for OllamaLoadExceedsHostMemory {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // The kernel's own account, or Ollama's refusal, tells it better.
        if kernel_oom_killed(incident) || incident.known(REFUSED).next().is_some() {
            return;
        }
        for plan in plans(incident) {
            let Some(host) = host_at(incident, plan.head.span) else {
                continue;
            };
            let cpu = plan.full.gib - plan.partial.gib;
            let room = host.free.gib + host.swap.as_ref().map_or(0.0, |s| s.gib);
            if room <= 0.0 || cpu < FULL_SHARE * room {
                continue;
            }
            out.push(finding(incident, &plan, &host, cpu, room));
            // One load explains the kill; the first that overfills.
            return;
        }
    }
}

/// Every plan whose figures the input shows, in input order.
fn plans(incident: &Incident) -> Vec<Plan<'_>> {
    let mut out: Vec<Plan<'_>> = Vec::new();
    for (msg, _) in incident.known(PLAN) {
        let (head, lines) = record(incident, msg);
        if out.iter().any(|p| p.head.span == head.span) {
            continue;
        }
        let find = |key: &str| {
            lines
                .iter()
                .find_map(|m| attr(&m.text, key).map(|v| (*m, v)))
        };
        let (Some((figures, full)), Some((_, partial))) = (
            find("memory.required.full"),
            find("memory.required.partial"),
        ) else {
            continue;
        };
        let (Some(full), Some(partial)) = (size(full), size(partial)) else {
            continue;
        };
        out.push(Plan {
            head,
            figures,
            full,
            partial,
            offload: find("layers.offload").map(|(_, v)| v),
            model: find("layers.model").map(|(_, v)| v),
        });
    }
    out.sort_by_key(|p| p.head.span);
    out
}

/// The kept lines of the record `msg` belongs to: back to the line that
/// opens it (the one with `msg=`), on over the lines that continue it,
/// while they are consecutive and open no record of their own.
fn record<'a>(incident: &'a Incident, msg: &'a Message) -> (&'a Message, Vec<&'a Message>) {
    let messages = &incident.facts.messages;
    let at = |span: Span| {
        messages
            .binary_search_by_key(&span, |m| m.span)
            .ok()
            .map(|i| &messages[i])
    };
    let line = |m: &Message, d: i64| Span {
        source: m.span.source,
        line: (i64::from(m.span.line) + d).max(1) as u32,
    };
    let opens = |m: &Message| m.text.contains("msg=");
    let mut head = msg;
    for _ in 0..WRAP {
        if opens(head) || head.span.line <= 1 {
            break;
        }
        match at(line(head, -1)) {
            Some(prev) => head = prev,
            None => break,
        }
    }
    if !opens(head) {
        head = msg;
    }
    let mut lines = vec![head];
    let mut last = head;
    while lines.len() < WRAP as usize {
        match at(line(last, 1)) {
            Some(next) if !opens(next) => {
                lines.push(next);
                last = next;
            }
            _ => break,
        }
    }
    if !lines.iter().any(|m| m.span == msg.span) {
        lines.push(msg);
    }
    (head, lines)
}

/// The host's memory line of the same input nearest the plan: the last
/// before it, else the first after (a paste may quote them in any order).
fn host_at(incident: &Incident, plan: Span) -> Option<Host<'_>> {
    let lines: Vec<&Message> = incident
        .known(SYSTEM)
        .map(|(m, _)| m)
        .filter(|m| m.span.source == plan.source)
        .collect();
    let msg = lines
        .iter()
        .rev()
        .find(|m| m.span < plan)
        .or_else(|| lines.iter().find(|m| m.span > plan))?;
    Some(Host {
        msg,
        total: attr(&msg.text, "total").and_then(size),
        free: attr(&msg.text, "free").and_then(size)?,
        swap: attr(&msg.text, "free_swap").and_then(size),
    })
}

fn finding(incident: &Incident, plan: &Plan<'_>, host: &Host<'_>, cpu: f64, room: f64) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let layers = match (plan.offload, plan.model) {
        (Some(o), Some(m)) => format!(", {o} of {m} layers"),
        _ => String::new(),
    };
    if plan.head.span != plan.figures.span {
        f.evidence(
            plan.head.span,
            "Ollama's plan for the load (wrapped over the next lines)",
        );
    }
    f.evidence_marked(
        plan.figures.span,
        format!(
            "the full load needs {}; {} of it goes on the GPU{layers}: about {cpu:.1} GiB stays in host RAM",
            plan.full.text, plan.partial.text
        ),
        plan.full.text,
    );
    let swap = host
        .swap
        .as_ref()
        .map(|s| format!(" and {} of swap", s.text))
        .unwrap_or_default();
    let total = host
        .total
        .as_ref()
        .map(|t| format!(" of {}", t.text))
        .unwrap_or_default();
    f.evidence_marked(
        host.msg.span,
        format!("the host at the load: {} free{total}{swap}", host.free.text),
        host.free.text,
    );
    let killed = incident
        .known(KILLED)
        .map(|(m, _)| m.span)
        .find(|s| s.source == plan.figures.span.source && *s > plan.head.span);
    if let Some(k) = killed {
        f.evidence(k, "the runner was then killed by a signal (SIGKILL)");
    }
    f.condition(
        "the plan's host part takes nine tenths or more of free RAM and swap",
        true,
    );
    f.condition("the runner was killed by a signal", killed.is_some());
    f.condition(
        "a kernel line names the OOM killer (journalctl -k, dmesg)",
        false,
    );
    let left = room - cpu;
    f.title = format!(
        "Ollama's load puts about {cpu:.1} GiB in host RAM with {} free: the host runs out of memory (OOM killer)",
        host.free.text
    );
    f.headline = format!(
        "Ollama's plan needs {} for the model and puts {} of it on the GPU{layers}, leaving about {cpu:.1} GiB for host RAM, which had {} free{swap}: {}, so the kernel's OOM killer ends the runner (the kernel's own lines are not in the inputs).",
        plan.full.text,
        plan.partial.text,
        host.free.text,
        if left > 0.0 {
            format!("about {left:.1} GiB is left for everything else")
        } else {
            format!("{:.1} GiB more than there is", -left)
        }
    );
    f.explanation = "What a load does not place on the GPU stays in host memory; when that fills free RAM and swap, the kernel kills the biggest process, the runner.".to_owned();
    f.chain
        .push("Ollama's runner was killed while loading or running the model".to_owned());
    f.chain.push(format!(
        "its plan left about {cpu:.1} GiB of the model in host RAM, with {} free{swap}",
        host.free.text
    ));
    f.chain.push(
        "host memory ran out: the kernel's OOM killer (not confirmed: no kernel line in the inputs)"
            .to_owned(),
    );
    f.actions.push(Action::advice(
        "Confirm the kill: the kernel logs the OOM killer's choice around the load; check the host's memory",
        Some("journalctl -k | grep -i -e oom -e 'killed process'; free -h"),
    ));
    f.actions.push(Action::advice(
        format!(
            "Make the load fit: a smaller model or quantisation, a smaller context (num_ctx), more layers on the GPU, or more RAM or swap (the full load needs {})",
            plan.full.text
        ),
        None,
    ));
    f.confidence = confidence(&f, 0.35, 0.65);
    f
}

#[cfg(test)]
mod tests {
    fn found(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// ollama/ollama#10739 (fixtures/real/617), as the maintainer quoted
    /// it: the plan wrapped over six lines, the host's memory over two,
    /// the later line first.
    const WRAPPED: &str = r#"May 16 17:44:49 Debian ollama[6012]: time=2025-05-16T17:44:49.187+02:00 level=INFO source=server.go:168 msg=offload
 library=cuda layers.requested=-1 layers.model=49 layers.offload=4 layers.split="" memory.available="[11.4 GiB]"
 memory.gpu_overhead="0 B" memory.required.full="68.3 GiB" memory.required.partial="10.9 GiB" memory.required.kv="2.2 GiB"
 memory.required.allocations="[10.9 GiB]" memory.weights.total="60.6 GiB" memory.weights.repeating="59.8 GiB"
 memory.weights.nonrepeating="809.3 MiB" memory.graph.full="2.0 GiB" memory.graph.partial="2.0 GiB"
 projector.weights="1.6 GiB" projector.graph="0 B"

May 16 17:44:49 Debian ollama[6012]: time=2025-05-16T17:44:49.091+02:00 level=INFO source=server.go:135
 msg="system memory" total="62.6 GiB" free="59.1 GiB" free_swap="215.1 MiB"
"#;

    #[test]
    fn a_wrapped_plan_that_fills_host_memory_is_the_oom_reading() {
        let f = found(WRAPPED);
        assert_eq!(f.len(), 1, "{f:?}");
        let f = &f[0];
        assert!(f.headline.contains("68.3 GiB"), "{}", f.headline);
        assert!(f.headline.contains("59.1 GiB"), "{}", f.headline);
        assert!(f.entities.pids.contains(&6012), "{:?}", f.entities);
        let lines: Vec<u32> = f.evidence.iter().map(|e| e.span.line).collect();
        assert_eq!(lines, [1, 3, 9]);
    }

    /// The same grammar on one line each, the `offload to cpu` form of
    /// 0.5 (ollama/ollama#8571: 172.7 GiB planned in host RAM with 50.1 GiB
    /// free), and a variant that fits (the same plan with 128 GiB free) or
    /// whose GPU takes the model.
    #[test]
    fn a_plan_on_one_line_reads_the_same_and_a_fitting_one_is_no_finding() {
        let mac = r#"time=2025-01-29T06:36:08.359-05:00 level=INFO source=server.go:104 msg="system memory" total="64.0 GiB" free="50.1 GiB" free_swap="0 B"

time=2025-01-29T06:36:08.360-05:00 level=INFO source=memory.go:356 msg="offload to cpu" layers.requested=0 layers.model=62 layers.offload=0 layers.split="" memory.available="[50.1 GiB]" memory.gpu_overhead="0 B" memory.required.full="172.7 GiB" memory.required.partial="0 B" memory.required.kv="38.1 GiB" memory.required.allocations="[990.7 MiB]" memory.weights.total="167.5 GiB" memory.weights.repeating="166.8 GiB" memory.weights.nonrepeating="725.0 MiB" memory.graph.full="2.2 GiB" memory.graph.partial="3.0 GiB"
"#;
        let f = found(mac);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].headline.contains("172.7 GiB"), "{}", f[0].headline);
        let roomy = mac.replace(r#"free="50.1 GiB""#, r#"free="250.1 GiB""#);
        assert!(found(&roomy).is_empty());
        let on_gpu = WRAPPED.replace(
            r#"memory.required.partial="10.9 GiB""#,
            r#"memory.required.partial="68.3 GiB""#,
        );
        assert!(found(&on_gpu).is_empty());
    }
}
