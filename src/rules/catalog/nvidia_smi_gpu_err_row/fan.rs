//! One GPU's fan cell read as `ERR!` while the other GPUs of the same
//! model in the same table read theirs: the board answers for its
//! temperature and power, not for a fan its twins report, so the fan or
//! its tachometer has failed. A lone GPU's fan `ERR!`, or a power cell's,
//! stays a possible misread (the rule's doc).

use crate::correlate::{Gpu, Incident};
use crate::model::Message;
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding, Severity};

use super::{META, SENSORS_UNREAD};

/// The GPU's sensor line when its first cell, the fan, reads `ERR!` and
/// fewer than [`SENSORS_UNREAD`] cells do (more is the whole GPU unread).
fn fan_unread<'a>(incident: &'a Incident, gpu: &Gpu) -> Option<&'a Message> {
    let span = gpu.usage_span?;
    let messages = &incident.facts.messages;
    let m = messages
        .binary_search_by_key(&span, |m| m.span)
        .ok()
        .map(|i| &messages[i])?;
    let cell = m.text.trim_start().strip_prefix('|')?;
    let fan = cell.split_whitespace().next()?;
    (fan == "ERR!" && m.text.matches("ERR!").count() < SENSORS_UNREAD).then_some(m)
}

/// Whether `gpu`'s sensor line was read and holds no `ERR!` (lines with
/// one are kept as messages): its fan read a figure.
fn fan_read(incident: &Incident, gpu: &Gpu) -> bool {
    gpu.usage_span.is_some_and(|span| {
        !incident
            .facts
            .messages
            .binary_search_by_key(&span, |m| m.span)
            .is_ok_and(|i| incident.facts.messages[i].text.contains("ERR!"))
    })
}

pub(super) fn findings(incident: &Incident) -> Vec<Finding> {
    let mut out = Vec::new();
    for gpu in &incident.gpus {
        let Some(sensors) = fan_unread(incident, gpu) else {
            continue;
        };
        if super::xid_on_its_bus(incident, gpu) {
            continue;
        }
        // Its twins: the other GPUs of the same model whose fans read.
        let twins: Vec<&Gpu> = incident
            .gpus
            .iter()
            .filter(|g| g.index != gpu.index && g.name.is_some() && g.name == gpu.name)
            .filter(|g| fan_read(incident, g))
            .collect();
        if twins.is_empty() {
            continue;
        }
        out.push(finding(gpu, sensors, &twins));
    }
    out
}

fn finding(gpu: &Gpu, sensors: &Message, twins: &[&Gpu]) -> Finding {
    let n = gpu.index;
    let bus = gpu.bus_id.as_deref().unwrap_or("its bus");
    let model = gpu.name.as_deref().unwrap_or("GPU");
    let mut f = Finding::new(META.id, Category::XidOther, Severity::Error);
    f.entities.gpus.insert(n);
    if let Some(b) = &gpu.bus_id {
        f.entities.gpu_bus_ids.insert(b.clone());
    }
    if let Some(row) = gpu.spans.first() {
        f.evidence(*row, format!("GPU {n} ({model}) at {bus}"));
    }
    f.evidence_marked(
        sensors.span,
        format!("nvidia-smi cannot read GPU {n}'s fan (ERR!), yet reads its temperature and power"),
        "ERR!",
    );
    let names: Vec<String> = twins.iter().map(|g| format!("GPU {}", g.index)).collect();
    if let Some(span) = twins.first().and_then(|g| g.usage_span) {
        f.evidence(
            span,
            format!(
                "the other GPUs of the same model ({}) read their fans",
                names.join(", ")
            ),
        );
    }
    f.condition(format!("GPU {n}'s fan cell reads ERR!"), true);
    f.condition(
        format!(
            "the other GPUs of the same model read their fans ({})",
            names.join(", ")
        ),
        true,
    );
    f.condition(
        "the kernel log names the GPU's Xid or a thermal slowdown (missing: dmesg -T | grep -i xid)",
        false,
    );
    f.title = format!(
        "GPU {n} ({bus}): its fan reads ERR! while the other GPUs of its model read theirs"
    );
    f.headline = format!(
        "nvidia-smi reads ERR! for GPU {n}'s fan (bus {bus}) while {} of the same model read their fans: the fan or its tachometer has most likely failed; the card will throttle or shut down as it heats.",
        names.join(", ")
    );
    f.chain.push(format!(
        "GPU {n} runs hot, throttles or drops out under load"
    ));
    f.chain.push(
        "its fan no longer reports a speed to the driver (ERR!) while its twins' fans do"
            .to_owned(),
    );
    f.explanation = "nvidia-smi prints ERR! in a cell whose NVML query failed. A fan that cannot be read on one card while identical cards beside it report theirs is a failed fan, fan connector or tachometer, not a driver fault.".to_owned();
    f.actions.push(Action::advice(
        format!("read GPU {n}'s fan, temperature and slowdown reasons"),
        Some(&format!(
            "nvidia-smi -q -i {n} -d TEMPERATURE,PERFORMANCE,POWER | grep -iE 'fan|temp|slowdown'"
        )),
    ));
    f.actions.push(Action::advice(
        "look for an Xid or a thermal event on that GPU in the kernel log",
        Some("dmesg -T | grep -iE 'xid|thermal'"),
    ));
    f.actions.push(Action::advice(
        format!(
            "drain GPU {n} and check its fan physically (spinning, cable seated); replace the fan or the board if it stays ERR!"
        ),
        None,
    ));
    f.confidence = confidence(&f, 0.3, 0.6).min(0.5);
    f
}
