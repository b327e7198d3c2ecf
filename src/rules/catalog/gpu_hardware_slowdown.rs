//! `gpu-hardware-slowdown`: `nvidia-smi -q` lists a hardware slowdown
//! among a GPU's clock event (throttle) reasons: `HW Power Brake Slowdown`
//! (the platform asserts the board's power-brake input), `HW Thermal
//! Slowdown` (the GPU reached its slowdown temperature), or the umbrella
//! `HW Slowdown` alone. Clocks are cut by half or more with no Xid.

use crate::correlate::Incident;
use crate::model::GpuHealth;
use crate::rules::support::confidence;
use crate::rules::xid;
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: GpuHardwareSlowdown = GpuHardwareSlowdown;

pub struct GpuHardwareSlowdown;

const UMBRELLA: &str = "HW Slowdown";
const POWER_BRAKE: &str = "HW Power Brake Slowdown";
const THERMAL: &str = "HW Thermal Slowdown";

static META: RuleMeta = RuleMeta {
    id: "gpu-hardware-slowdown",
    category: Category::XidOther,
    severity: Severity::Error,
    summary: "nvidia-smi shows a hardware slowdown active (power brake or thermal): the GPU's clocks are cut by half or more",
    anchors: &[],
    doc: r#"
## What it means
`nvidia-smi -q` lists why a GPU's clocks are below their maximum (`Clocks
Event Reasons`, `Clocks Throttle Reasons` before driver 535). `HW Slowdown :
Active` means the hardware cut the core clocks by a factor of two or more;
its sub-reason says why: `HW Power Brake Slowdown : Active` is an external
power-brake signal asserted by the platform (its power supply or its BMC),
`HW Thermal Slowdown : Active` the GPU at its hardware slowdown temperature.
The server keeps running, several times slower, and nothing in the kernel
log says so: no Xid is written for it.

## Why it happens
Power brake: the chassis does not know or support the GPU model (a BMC's
power table without its PCI ids, as Dell's iDRAC for an unlisted V100), a
failed or missing power supply, or a power-budget event. Thermal: failing
fans, blocked airflow, a missing or misplaced heatsink, a hot inlet. NVIDIA
notes the umbrella reason can also show briefly during a clock or P-state
change, so `HW Slowdown` alone, without its sub-reason, is weaker evidence.

## How to confirm
Repeat the query under load: `nvidia-smi -q -d PERFORMANCE,CLOCK,TEMPERATURE,POWER`,
or follow it with `nvidia-smi --query-gpu=index,clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_power_brake_slowdown,clocks_event_reasons.hw_thermal_slowdown,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv -l 1`
(`clocks_throttle_reasons.…` before driver 535). For a power brake, the
BMC's event log (`ipmitool sel list`, iDRAC or iLO) and the power supplies'
state; for a thermal slowdown, temperatures and fans.

## How to fix
Power brake: fix the platform: a supported GPU for the chassis (or its BMC
configuration), working and sufficient power supplies, the GPU's power
cables. Thermal: restore the cooling (fans, airflow, heatsink) before
putting load back. Neither is fixed by restarting the server.

## Safety
Advice only: nothing here is a process to stop.
"#,
};

impl Rule for GpuHardwareSlowdown {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        for h in &incident.facts.gpu_health {
            if !h.hw_slowdowns.is_empty() {
                out.push(finding(incident, h));
            }
        }
    }
}

fn finding(incident: &Incident, h: &GpuHealth) -> Finding {
    let gpu = xid::gpu_at(incident, h.bus_id.as_deref());
    let index = gpu.index.or(h.index);
    let short = match index {
        Some(i) => format!("GPU {i}"),
        None => gpu.short(),
    };
    let active = |name: &str| h.hw_slowdowns.iter().any(|r| r.value == name);
    let (power_brake, thermal) = (active(POWER_BRAKE), active(THERMAL));
    let mut f = Finding::new(META.id, META.category, META.severity);
    for r in &h.hw_slowdowns {
        let what = match r.value {
            POWER_BRAKE => "the platform asserts the GPU's power brake",
            THERMAL => "the GPU reached its hardware slowdown temperature",
            _ => "the hardware cut the core clocks by half or more",
        };
        f.evidence_marked(
            r.span,
            format!("{short}: {} is active: {what}", r.value),
            "Active",
        );
    }
    let clock = clocks(&mut f, h, &short);
    f.condition(format!("{short}: a hardware slowdown is active"), true);
    let named = f.condition(
        "its cause is named (power brake or thermal), not the umbrella reason alone",
        power_brake || thermal,
    );
    let low = f.condition(
        "the SM clock shown is under half its maximum",
        clock.is_some_and(|(sm, max)| max.is_some_and(|m| sm * 2 < m)),
    );
    if !named {
        f.severity = Severity::Warning;
    }
    let clock_text = clock.map_or(String::new(), |(sm, max)| match max {
        Some(m) => format!(" (SM clock {sm} MHz of {m} MHz)"),
        None => format!(" (SM clock {sm} MHz)"),
    });
    let (cause, chain) = if power_brake {
        (
            "an external power brake: the platform (its power supply or BMC) asserts the board's power-brake input",
            "the platform asserts the power brake (an unsupported GPU for the chassis's BMC, a failed or insufficient power supply)",
        )
    } else if thermal {
        (
            "a hardware thermal slowdown: the GPU reached its slowdown temperature",
            "the GPU overheats (fans, airflow, heatsink or inlet temperature)",
        )
    } else {
        (
            "a hardware slowdown whose sub-reason the capture does not show (temperature, a power brake or a power-draw trip; it can also show briefly during a clock change)",
            "temperature, an external power brake or a power-draw trip engaged the slowdown",
        )
    };
    f.title = format!("{short}'s clocks are cut by {}", names(h));
    f.headline = format!(
        "{} runs with its clocks cut by {cause}{clock_text}. Work on it runs several times slower; no Xid is logged for it, and restarting the server does not clear it.",
        capitalised(&short)
    );
    f.chain.push(format!(
        "{short}'s core clocks are cut by half or more: its work runs slower"
    ));
    f.chain.push(chain.to_owned());
    f.explanation = "nvidia-smi's clock event reasons say why the clocks are below their maximum; the hardware slowdowns are the ones the GPU cannot lift by itself: the platform's power brake, the GPU's own thermal protection. A software power cap or an idle GPU is not one of them.".to_owned();
    advise(&mut f, index, power_brake, thermal);
    if let Some(i) = index {
        f.entities.gpus.insert(i);
    }
    f.confidence = confidence(&f, 0.45, if low { 0.85 } else { 0.8 });
    f
}

/// `a GPU` at the start of a sentence.
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or(String::new(), |c| {
        c.to_uppercase().chain(chars).collect::<String>()
    })
}

/// The clocks nvidia-smi printed for this GPU (MHz): cited when shown.
fn clocks(f: &mut Finding, h: &GpuHealth, short: &str) -> Option<(u32, Option<u32>)> {
    let mhz = |text: &str| text.strip_suffix(" MHz")?.trim().parse::<u32>().ok();
    let sm = h.sm_clock.as_ref()?;
    let sm_mhz = mhz(&sm.value)?;
    let max = h
        .max_sm_clock
        .as_ref()
        .and_then(|m| mhz(&m.value).map(|v| (m, v)));
    f.evidence_marked(
        sm.span,
        format!("{short}: the SM clock reads {}", sm.value),
        sm.value.as_str(),
    );
    if let Some((m, _)) = max {
        f.evidence_marked(
            m.span,
            format!("{short}: its maximum SM clock is {}", m.value),
            m.value.as_str(),
        );
    }
    Some((sm_mhz, max.map(|(_, v)| v)))
}

/// `HW Slowdown and HW Power Brake Slowdown`, as printed.
fn names(h: &GpuHealth) -> String {
    let mut v: Vec<&str> = Vec::new();
    for r in &h.hw_slowdowns {
        if !v.contains(&r.value) {
            v.push(r.value);
        }
    }
    // The umbrella says less than its sub-reason: name the sub-reason.
    if v.len() > 1 {
        v.retain(|n| *n != UMBRELLA);
    }
    v.join(" and ")
}

fn advise(f: &mut Finding, index: Option<u32>, power_brake: bool, thermal: bool) {
    let on = index.map_or(String::new(), |i| format!(" -i {i}"));
    f.actions.push(Action::advice(
        "repeat the query under load: a slowdown that stays active is not a clock change caught in passing",
        Some(&format!(
            "nvidia-smi{on} --query-gpu=index,clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_power_brake_slowdown,clocks_event_reasons.hw_thermal_slowdown,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv -l 1"
        )),
    ));
    if power_brake || !thermal {
        f.actions.push(Action::advice(
            "read the BMC's event log and the power supplies' state; check that the chassis supports this GPU model and that its power cables are seated",
            Some("ipmitool sel list"),
        ));
    }
    if thermal || !power_brake {
        f.actions.push(Action::advice(
            "check the GPU's temperature, its fans and the airflow through the chassis before putting load back",
            Some(&format!("nvidia-smi -q{on} -d TEMPERATURE,PERFORMANCE")),
        ));
    }
}
