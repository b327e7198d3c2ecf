//! `vllm-insufficient-free-memory`: vLLM refused to start because another
//! process held GPU memory (`Free memory on device … is less than desired
//! GPU memory utilization`), or its memory profiling saw another process
//! release memory; names the holder and frees the GPU when its unit is known.

mod profiled;
mod sibling;
#[cfg(test)]
mod tests;

use crate::rules::support::server::cite_target;
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Incident, UnitEventKind};
use crate::model::{Framework, ServerEvent};
use crate::rules::support::holders::{Holder, Holders, held_mib};
use crate::rules::support::server::{events_at, flag_action, floor2, fraction, launch_args};
use crate::rules::support::{confidence, distinct, matches, mib};
use crate::rules::{Action, ActionKind, Category, Finding, Rule, RuleMeta, Safety, Severity};
use crate::source::Span;

pub static RULE: VllmInsufficientFreeMemory = VllmInsufficientFreeMemory;

pub struct VllmInsufficientFreeMemory;

static FREE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Free memory on device(?: (?P<dev>\S+))? \((?P<free>[0-9.]+)/(?P<total>[0-9.]+) GiB\) on startup is less than desired GPU memory utilization \((?P<util>[0-9.]+), (?P<req>[0-9.]+) GiB\)",
    )
    .expect("free memory regex")
});
/// The failing worker's own CUDA context is already counted as used when
/// vLLM measures; a holder accounts for the rest within this much (GiB).
const RECONCILE_GIB: f64 = 1.5;
/// A shortfall this small (GiB) is the worker's own CUDA context, not a
/// holder: nothing else is needed to explain it.
const SHORTFALL_GIB: f64 = 0.5;
/// A utilization this close to 1 leaves no room for the CUDA context.
const UTIL_TOO_HIGH: f64 = 0.97;

static META: RuleMeta = RuleMeta {
    id: "vllm-insufficient-free-memory",
    category: Category::GpuMemoryHeldByOtherProcess,
    severity: Severity::Critical,
    summary: "vLLM refused to start: another process holds memory on its GPU",
    anchors: &[
        "on startup is less than desired GPU memory utilization",
        "Error in memory profiling",
        // The figures' second half, on its own line where a paste wrapped
        // the message.
        "current free memory",
        "currently used memory",
    ],
    doc: r#"
## What it means
At start-up each vLLM worker checks that the GPU's free memory covers
`gpu_memory_utilization x total`, and stops otherwise: `ValueError: Free
memory on device (4.12/79.19 GiB) on startup is less than desired GPU memory
utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU
memory used by other processes.` A related failure, `Error in memory
profiling. Initial free memory …, current free memory …`, means free memory
*rose* while vLLM profiled: another process released memory at the same time.

## Why it happens
1. Another process holds memory on the GPU: another workload, or a leftover
   of a previous vLLM run (an orphaned `VLLM::EngineCore` or `VLLM::Worker`
   whose server was killed without its children).
2. Two vLLM instances share the GPU and each wants 90 % of it.
3. `--gpu-memory-utilization` is so close to 1 that the CUDA context alone
   breaks it.

## How to confirm
`total - free` (GiB) should match the memory nvidia-smi lists for the
holders on that GPU (MiB / 1024), within about 1.5 GiB of the worker's own
CUDA context. The holder's unit comes from `systemctl status` (CGroup tree,
Main PID) or the journal; a leftover has PPID 1 in `ps` and systemd may have
logged it as left over.

## How to fix
Stop the holder's unit after confirming whose it is (a leftover of this
service may be ended; someone else's job is their call), make sure its PIDs
are gone, wait until the GPU's memory is released, then restart vLLM and
verify it comes up. Or lower `--gpu-memory-utilization` so that
`utilization x total` fits the free memory.

## Safety
Stopping a unit and signalling a process need confirmation; the script
re-checks each PID's start time, command line and unit before any signal,
escalates to SIGKILL only after SIGTERM and a grace period, and checks the
GPU's UUID before waiting for its memory.
"#,
};

impl Rule for VllmInsufficientFreeMemory {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        if let Some(f) = free_memory(incident) {
            out.push(f);
        } else if let Some(f) = profiling(incident) {
            out.push(f);
        }
    }
}

/// The holders' context for the failing vLLM run.
fn holders_for<'a>(incident: &'a Incident, event: Option<&'a ServerEvent>) -> Holders<'a> {
    Holders::of_run(incident, event, Framework::Vllm)
}

/// vLLM's `Free memory on device … is less than desired GPU memory
/// utilization`: the finding that names the holder, blames the utilization
/// itself, or says the holder is not in the inputs.
fn free_memory(incident: &Incident) -> Option<Finding> {
    let hits: Vec<_> = matches(incident, &FREE).collect();
    let (first, c) = hits.first()?;
    let free: f64 = c["free"].parse().ok()?;
    let total: f64 = c["total"].parse().ok()?;
    let util: f64 = c["util"].parse().ok()?;
    let requested: f64 = c["req"].parse().ok()?;
    // As printed: `0.995` is not `0.99`.
    let util_text = c["util"].to_owned();
    let used = total - free;
    let shortfall = (requested - free).max(0.0);
    let event = events_at(incident, first.span).next();
    let holders = holders_for(incident, event);
    let args = launch_args(incident, Framework::Vllm);
    let tp = args.as_ref().and_then(|(a, _)| a.tp_size).unwrap_or(1);
    // The worker's GPU: `cuda:N`, else its rank (CUDA ordinals, right
    // without CUDA_VISIBLE_DEVICES), else any GPU of the server.
    let device = named_device(c).or_else(|| event.and_then(|e| e.rank.and_then(|r| r.tp)));
    let group: Vec<u32> = (0..tp.max(device.map_or(0, |d| d + 1))).collect();
    let held = match device {
        Some(d) => holders
            .most_held([d], 512)
            .or_else(|| holders.most_held(group.iter().copied(), 512)),
        None => holders.most_held(group.iter().copied(), 512),
    };

    let mut f = Finding::new(META.id, META.category, META.severity);
    f.occurrences = hits.len() as u32;
    // The figures as vLLM printed them (`(0.9, 71.24 GiB)`): the reader
    // finds them on the line.
    let (free_text, total_text, req_text) = (&c["free"], &c["total"], &c["req"]);
    for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(2) {
        f.evidence(
            m.span,
            format!(
                "only {free_text} of {total_text} GiB was free; vLLM wanted ({util_text}, {req_text} GiB), the utilization times the total ({n}x)"
            ),
        );
    }
    let unit = cite_target(&mut f, &holders.target);
    if let Some(u) = &unit {
        cite_leftovers(incident, &mut f, u);
    }
    if let Some(pid) = event.and_then(|e| e.pid) {
        f.entities.pids.insert(pid);
    }
    // The GPU the message names (`cuda:1`).
    if let Some(d) = named_device(c) {
        f.entities.gpus.insert(d);
    }
    let who = unit.clone().unwrap_or_else(|| "the vLLM server".to_owned());
    f.chain.push(format!(
        "{who} failed at start-up: {free:.2} of {total:.2} GiB free, less than gpu_memory_utilization {util_text} x total = {requested:.2} GiB"
    ));
    f.condition("vLLM reported too little free memory at start-up", true);
    // The largest utilization the free memory allows, keeping 1 GiB spare.
    let fits = floor2((free - 1.0).max(0.0) / total);
    let r = Refusal {
        incident,
        at: first.span,
        unit: unit.as_deref(),
        who: &who,
        free,
        total,
        util,
        util_text: &util_text,
        requested,
        used,
        shortfall,
        fits,
    };
    let stage = sibling::sibling(incident, &first.text, first.span, used);
    match held {
        Some((gpu, list)) => {
            let name = holders.report(&mut f, gpu, &list, &group);
            blame_holder(&r, &mut f, gpu, &list, &name);
        }
        None if stage.is_some() => blame_stages(&r, &mut f, stage.as_ref().expect("checked")),
        None if (util >= UTIL_TOO_HIGH && used <= 2.0) || shortfall <= SHORTFALL_GIB => {
            blame_fraction(&r, &mut f);
        }
        None => unseen_holder(&r, &mut f),
    }
    f.confidence = confidence(&f, 0.6, 0.97);
    Some(f)
}

/// Returns the GPU vLLM's message names (`Free memory on device cuda:1`).
fn named_device(c: &regex::Captures) -> Option<u32> {
    c.name("dev")
        .and_then(|d| d.as_str().strip_prefix("cuda:"))
        .and_then(|d| d.parse::<u32>().ok())
}

/// Cites systemd's lines that found a process left over from an earlier
/// run of `unit`.
fn cite_leftovers(incident: &Incident, f: &mut Finding, unit: &str) {
    for e in incident.units.get(unit).map_or(&[][..], |x| &x.events) {
        if let UnitEventKind::LeftOverProcess { pid } = e.kind {
            f.evidence(
                e.span,
                format!("systemd found PID {pid} left over from an earlier run of {unit}"),
            );
        }
    }
}

/// vLLM's refusal to start, as the verdicts word it and act on it: its
/// figures (GiB), the line that prints them, and who refused.
#[derive(Clone, Copy)]
struct Refusal<'a> {
    incident: &'a Incident,
    at: Span,
    unit: Option<&'a str>,
    who: &'a str,
    free: f64,
    total: f64,
    util: f64,
    /// The utilization as printed: `0.995` is not `0.99`.
    util_text: &'a str,
    requested: f64,
    /// total - free.
    used: f64,
    /// How much less was free than requested.
    shortfall: f64,
    /// The largest utilization the free memory allows, keeping 1 GiB spare.
    fits: f64,
}

/// Words the verdict that `name` holds `list` on GPU `gpu` (reported
/// already), checks that it accounts for the memory in use, and pushes a
/// utilization that fits beside it.
fn blame_holder(r: &Refusal, f: &mut Finding, gpu: u32, list: &[Holder<'_>], name: &str) {
    let Refusal {
        incident,
        at,
        unit,
        who,
        free,
        total,
        requested,
        used,
        fits,
        ..
    } = *r;
    let held = held_mib(list);
    let held_gib = held as f64 / 1024.0;
    let reconciled = (used - held_gib).abs() <= RECONCILE_GIB;
    f.condition(
        format!(
            "total - free = {used:.2} GiB matches the holder's {} = {held_gib:.2} GiB (within {RECONCILE_GIB} GiB)",
            mib(Some(held))
        ),
        reconciled,
    );
    let stale = f.category == Category::StaleServingInstance;
    let what = if stale {
        "a leftover serving process, "
    } else {
        ""
    };
    f.title = format!("GPU {gpu} is held by {what}{name} with {}", mib(Some(held)));
    f.headline = format!(
        "GPU {gpu} is held by {what}{name} with {}, so {who} found only {free:.2} GiB free and refused to start.",
        mib(Some(held))
    );
    f.explanation = format!(
        "vLLM needs gpu_memory_utilization x total = {requested:.2} GiB free before it loads anything. {used:.2} GiB of the GPU was in use{}.{}",
        if reconciled {
            format!(
                ", which the holder's {held_gib:.2} GiB accounts for (the rest is vLLM's own CUDA context)"
            )
        } else {
            format!(
                "; the holder's {held_gib:.2} GiB does not account for all of it: look for more holders"
            )
        },
        if stale {
            " It is a leftover of a serving process, not a workload of its own."
        } else {
            ""
        }
    );
    if fits >= 0.5 && !stale {
        let action = flag_action(
            incident,
            f,
            unit,
            "--gpu-memory-utilization",
            &fraction(fits),
            format!(
                "if {name} must keep the GPU: {} x {total:.2} GiB fits the {free:.2} GiB free",
                fraction(fits)
            ),
            [at],
        );
        f.actions.push(action);
    }
}

/// Words the verdict that the utilization itself is at fault (too close to
/// 1, or short by no more than a CUDA context) and pushes one that fits.
fn blame_fraction(r: &Refusal, f: &mut Finding) {
    let Refusal {
        incident,
        at,
        unit,
        who,
        free,
        total,
        util,
        util_text,
        requested,
        used,
        shortfall,
        fits,
    } = *r;
    f.category = Category::MemFractionMisconfigured;
    if util >= UTIL_TOO_HIGH {
        f.condition(
            format!("gpu_memory_utilization {util_text} leaves no room for the CUDA context"),
            true,
        );
        f.title = format!("--gpu-memory-utilization {util_text} is too close to 1");
        f.headline = format!(
            "{who} asked for {util_text} of the GPU, more than is ever free next to its own CUDA context; no other process is involved."
        );
        f.explanation = "The CUDA context and the driver take a few hundred MiB before vLLM measures; a utilization near 1 can never be satisfied.".to_owned();
    } else {
        // Numbers before blame: vLLM's message suggests other
        // processes, but a shortfall this small is the worker's own
        // CUDA context (its size grows with the PyTorch/CUDA build).
        f.condition(
            format!(
                "the shortfall, {requested:.2} - {free:.2} = {shortfall:.2} GiB, is no more than a CUDA context ({SHORTFALL_GIB} GiB)"
            ),
            true,
        );
        f.title = format!(
            "--gpu-memory-utilization {util_text} is {shortfall:.2} GiB too high for this GPU"
        );
        f.headline = format!(
            "{who} asked for gpu_memory_utilization {util_text} = {requested:.2} GiB but {free:.2} GiB was free: {shortfall:.2} GiB short, about the size of its own CUDA context; no other process is needed to explain it."
        );
        f.explanation = format!(
            "vLLM's message blames other processes, but the numbers do not: {used:.2} GiB of {total:.2} GiB was in use when it measured, and the target missed by only {shortfall:.2} GiB, what the worker's own CUDA context and PyTorch's allocator take (more with newer PyTorch/CUDA builds). Lower the target fraction, or pin the PyTorch build that fit."
        );
    }
    let action = flag_action(
        incident,
        f,
        unit,
        "--gpu-memory-utilization",
        &fraction(fits.min(0.95)),
        "leave room for the CUDA context",
        [at],
    );
    f.actions.push(action);
}

/// Words the verdict that the refusing stage's fraction does not fit beside
/// a sibling stage of the same deployment that holds the memory in use
/// (numbers first: its model load accounts for most of `total - free`);
/// pushes a utilization that fits beside it.
fn blame_stages(r: &Refusal, f: &mut Finding, s: &sibling::Sibling) {
    let Refusal {
        incident,
        at,
        unit,
        who,
        free,
        total,
        util_text,
        requested,
        used,
        fits,
        ..
    } = *r;
    f.category = Category::MemFractionMisconfigured;
    let gib = s.gib;
    let stage = &s.stage;
    f.evidence(
        s.span,
        format!("Stage-{stage} of the same deployment loaded {gib:.2} GiB on the GPU"),
    );
    f.condition(
        format!(
            "total - free = {used:.2} GiB is mostly Stage-{stage}'s model ({gib:.2} GiB; the rest its CUDA context)"
        ),
        true,
    );
    f.chain.push(format!(
        "Stage-{stage} of the same deployment shares the GPU and holds {gib:.2} GiB"
    ));
    f.title = format!(
        "gpu_memory_utilization {util_text} does not fit beside the deployment's own Stage-{stage}"
    );
    f.headline = format!(
        "{who} asked for gpu_memory_utilization ({util_text}, {requested:.2} GiB) of a GPU it shares with its own Stage-{stage}, which holds {gib:.2} GiB: only {free:.2} of {total:.2} GiB was free, so the stage refused to start."
    );
    f.explanation = format!(
        "The memory in the way belongs to the same deployment, not to a foreign process: Stage-{stage}'s model ({gib:.2} GiB) accounts for most of the {used:.2} GiB in use. Stages that share a GPU must be given fractions that sum below 1; this stage's {util_text} leaves no room for its sibling."
    );
    if fits >= 0.1 {
        let action = flag_action(
            incident,
            f,
            unit,
            "--gpu-memory-utilization",
            &fraction(fits),
            format!(
                "this stage's fraction beside Stage-{stage}: {} x {total:.2} GiB fits the {free:.2} GiB free",
                fraction(fits)
            ),
            [at],
        );
        f.actions.push(action);
    }
}

/// Words the verdict that a process the inputs do not show holds the
/// memory; pushes how to find it and a utilization that fits.
fn unseen_holder(r: &Refusal, f: &mut Finding) {
    let Refusal {
        incident,
        at,
        unit,
        who,
        free,
        total,
        used,
        fits,
        ..
    } = *r;
    f.condition("a holder is visible in nvidia-smi's process list", false);
    f.title = format!("{used:.2} GiB of the GPU was held by a process the inputs do not show");
    f.headline = format!(
        "{used:.2} GiB of the GPU was already in use when {who} started, by a process the inputs do not show, so it refused to start."
    );
    f.explanation = "No process in the nvidia-smi capture accounts for the memory: the holder runs in another container, or exited before the snapshot.".to_owned();
    f.actions.push(Action::advice(
        "list the processes on the GPU from the host, outside any container",
        Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
    ));
    if fits >= 0.5 {
        let action = flag_action(
            incident,
            f,
            unit,
            "--gpu-memory-utilization",
            &fraction(fits),
            format!(
                "{} x {total:.2} GiB fits the {free:.2} GiB free",
                fraction(fits)
            ),
            [at],
        );
        f.actions.push(action);
    }
}

fn profiling(incident: &Incident) -> Option<Finding> {
    let hits = profiled::hits(incident);
    let (first, c) = hits.first()?;
    let event = events_at(incident, first.span).next();
    let holders = holders_for(incident, event);
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.occurrences = hits.len() as u32;
    for (m, n) in distinct(hits.iter().map(|(m, _)| *m)).into_iter().take(2) {
        f.evidence(
            m.span,
            format!("the free memory changed while vLLM profiled ({n}x)"),
        );
    }
    if let Some(tail) = c.tail {
        f.evidence(tail, "the error's second figure, wrapped onto this line");
    }
    let unit = holders.target.as_ref().map(|t| t.0.clone());
    if let Some(u) = &unit {
        f.entities.units.insert(u.clone());
    }
    let who = unit.clone().unwrap_or_else(|| "the vLLM server".to_owned());
    let (init, cur) = (&c.init, &c.cur);
    f.chain.push(format!(
        "{who} failed at start-up: its memory profiling saw the GPU's memory change ({} {init} at the start, {cur} after)",
        if c.kind == "free" { "free" } else { "used" }
    ));
    f.chain
        .push("another process on the GPU released memory while vLLM profiled".to_owned());
    f.condition("vLLM's memory profiling saw free memory rise", true);
    // A unit that stopped around the same time released it.
    let when = incident.time_of(first.span).or(event.and_then(|e| e.time));
    let stopped = incident.units.iter().find_map(|(name, u)| {
        if unit.as_deref() == Some(name.as_str()) {
            return None;
        }
        u.events.iter().find_map(|e| {
            let t = incident.time_of(e.span)?;
            let near = when.is_some_and(|w| (t.utc_seconds() - w.utc_seconds()).abs() <= 180);
            let stop = matches!(
                e.kind,
                UnitEventKind::Stopped
                    | UnitEventKind::Deactivated
                    | UnitEventKind::MainProcessExited { .. }
            );
            (near && stop).then_some((name.as_str(), e.span))
        })
    });
    f.condition("another unit stopped at the same time", stopped.is_some());
    if let Some((name, span)) = stopped {
        f.entities.units.insert(name.to_owned());
        f.evidence(
            span,
            format!("{name} stopped at the same time and released its GPU memory"),
        );
        f.chain.push(format!("{name} stopped at the same time"));
    }
    f.title = "another process released GPU memory while vLLM profiled".to_owned();
    f.headline = match stopped {
        Some((name, _)) => format!(
            "{who} failed its memory profiling because {name} stopped and released GPU memory at the same time; start vLLM once the GPU is settled."
        ),
        None => format!(
            "{who} failed its memory profiling because another process on the GPU released memory at the same time; start vLLM once the GPU is settled."
        ),
    };
    f.explanation = "vLLM sizes its KV cache from the memory it sees used during a profiling run; memory another process frees meanwhile makes the numbers inconsistent, and vLLM refuses to guess.".to_owned();
    f.actions.push(Action::advice(
        "make sure nothing else starts or stops on these GPUs while vLLM starts (wait until the old instance has fully exited)",
        Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv"),
    ));
    if let Some(u) = unit
        .as_deref()
        .and_then(|u| crate::model::UnitName::new(u).ok())
    {
        let span: Span = first.span;
        f.actions.push(
            Action::new(
                ActionKind::RestartUnit { unit: u.clone() },
                Safety::Safe,
                format!("start {u} again now that the GPU is settled"),
            )
            .with_evidence([span]),
        );
        f.actions.push(
            Action::new(
                ActionKind::VerifyUnitActive {
                    unit: u,
                    timeout_secs: 180,
                },
                Safety::Safe,
                "the unit must come up and stay up",
            )
            .with_evidence([span]),
        );
    }
    f.confidence = confidence(&f, 0.6, 0.9);
    Some(f)
}
