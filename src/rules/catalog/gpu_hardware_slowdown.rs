//! `gpu-hardware-slowdown`: `nvidia-smi -q` lists a hardware slowdown
//! among a GPU's clock event (throttle) reasons: `HW Power Brake Slowdown`
//! (the platform asserts the board's power-brake input), `HW Thermal
//! Slowdown` (the GPU reached its slowdown temperature), or the umbrella
//! `HW Slowdown` alone. Clocks are cut by half or more with no Xid.

use crate::correlate::Incident;
use crate::model::{GpuHealth, Reading, celsius};
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

`nvidia-smi -q -d TEMPERATURE` prints the GPU's temperature beside its
limits (`GPU Current Temp`, `GPU Max Operating Temp`, `GPU Slowdown
Temp`): a GPU at (within 2 C of) its max operating or slowdown temperature
is held there by the driver (`SW Thermal Slowdown : Active`), with or
without a hardware slowdown. A max operating temperature 20 C or more
below the slowdown temperature is a limit the platform set (a laptop's
firmware, thermald or DPTF), not the chip's.

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
putting load back; a platform's low limit is raised in its own thermal
configuration (thermald's mode, the firmware's profile). Neither is fixed by restarting the server.

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
            } else if let Some(f) = thermal_limit(incident, h) {
                out.push(f);
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

/// How close to a limit, in °C, a GPU's temperature counts as at it: the
/// driver holds the clocks down from about there.
const AT_LIMIT_C: i32 = 2;

/// A max operating temperature this far below the slowdown temperature is
/// not the chip's own limit but one the platform set (a laptop's firmware,
/// thermald or DPTF through the driver).
const PLATFORM_GAP_C: i32 = 20;

/// A GPU at (or within [`AT_LIMIT_C`] of) its max operating or its
/// slowdown temperature, as `nvidia-smi -q -d TEMPERATURE` prints them:
/// the driver is holding its clocks down, with or without a hardware
/// slowdown engaged. Joined to `SW Thermal Slowdown : Active` when the
/// capture shows the clock event reasons.
fn thermal_limit(incident: &Incident, h: &GpuHealth) -> Option<Finding> {
    let current = h.temperature.as_ref()?;
    let now = celsius(&current.value)?;
    fn limit(r: &Option<Reading<String>>) -> Option<(&Reading<String>, i32)> {
        r.as_ref()
            .and_then(|r| celsius(&r.value).filter(|c| *c > 0).map(|c| (r, c)))
    }
    let (max_op, slowdown) = (
        limit(&h.max_operating_temperature),
        limit(&h.slowdown_temperature),
    );
    fn at(l: Option<(&Reading<String>, i32)>, now: i32) -> Option<(&Reading<String>, i32)> {
        l.filter(|(_, c)| now >= c - AT_LIMIT_C)
    }
    let (limit_row, _) = at(max_op, now).or(at(slowdown, now))?;
    let gpu = xid::gpu_at(incident, h.bus_id.as_deref());
    let index = gpu.index.or(h.index);
    let short = match index {
        Some(i) => format!("GPU {i}"),
        None => gpu.short(),
    };
    let limit_name = if max_op.is_some_and(|(r, _)| std::ptr::eq(r, limit_row)) {
        "max operating temperature"
    } else {
        "slowdown temperature"
    };
    let platform = match (max_op, slowdown) {
        (Some((_, m)), Some((_, s))) if s - m >= PLATFORM_GAP_C => Some((m, s)),
        _ => None,
    };
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.evidence_marked(
        current.span,
        format!("{short}: its temperature is {}", current.value),
        current.value.as_str(),
    );
    f.evidence_marked(
        limit_row.span,
        format!("{short}: its {limit_name} is {}", limit_row.value),
        limit_row.value.as_str(),
    );
    if let (Some((r, _)), true) = (slowdown, limit_name != "slowdown temperature") {
        f.evidence_marked(
            r.span,
            format!("{short}: its slowdown temperature is {}", r.value),
            r.value.as_str(),
        );
    }
    if let Some(span) = h.sw_thermal_slowdown {
        f.evidence_marked(
            span,
            format!("{short}: SW Thermal Slowdown is active: the driver holds the clocks down for temperature"),
            "Active",
        );
    }
    let clock = clocks(&mut f, h, &short);
    f.condition(
        format!("{short}'s temperature is at its {limit_name} (within {AT_LIMIT_C} C)"),
        true,
    );
    let confirmed = f.condition(
        "the clock event reasons show the thermal slowdown active",
        h.sw_thermal_slowdown.is_some(),
    );
    let low = f.condition(
        "the SM clock shown is under half its maximum",
        clock.is_some_and(|(sm, max)| max.is_some_and(|m| sm * 2 < m)),
    );
    f.condition(
        format!("the max operating temperature is {PLATFORM_GAP_C} C or more below the slowdown temperature: a limit the platform set"),
        platform.is_some(),
    );
    thermal_story(
        &mut f,
        &short,
        index,
        (&current.value, &limit_row.value),
        limit_name,
        platform,
    );
    if let Some(i) = index {
        f.entities.gpus.insert(i);
    }
    f.confidence = match (confirmed || low, platform.is_some()) {
        (true, _) => 0.8,
        (false, true) => 0.7,
        (false, false) => 0.6,
    };
    Some(f)
}

/// The thermal-limit finding's title, headline, story and steps: `temps`
/// are the current temperature and the limit it is at, as printed;
/// `platform` the max operating and slowdown temperatures when far apart.
fn thermal_story(
    f: &mut Finding,
    short: &str,
    index: Option<u32>,
    temps: (&str, &str),
    limit_name: &str,
    platform: Option<(i32, i32)>,
) {
    let (now, printed) = temps;
    f.title = format!(
        "{short} is held at its thermal limit ({} of {printed})",
        now
    );
    f.headline = match platform {
        Some(_) => format!(
            "{} runs at its max operating temperature ({} of {printed}), far below its slowdown temperature: the driver throttles it to stay under a limit the platform set (a laptop's firmware, thermald or DPTF), not the chip's own. Work on it runs slower; no Xid is logged for it.",
            capitalised(short),
            now
        ),
        None => format!(
            "{} runs at its {limit_name} ({} of {printed}): the driver throttles its clocks to stay under it. Work on it runs slower; no Xid is logged for it.",
            capitalised(short),
            now
        ),
    };
    f.chain.push(format!(
        "{short}'s clocks are held down: its work runs slower"
    ));
    f.chain
        .push(format!("it is at its {limit_name}: {} of {printed}", now));
    match platform {
        Some((m, s)) => f.chain.push(format!(
            "its max operating temperature ({m} C) is {} C below its slowdown temperature ({s} C): the platform lowered it (firmware, thermald/DPTF)",
            s - m
        )),
        None => f
            .chain
            .push("the GPU runs hot: cooling, airflow or its power limit".to_owned()),
    }
    f.explanation = "nvidia-smi prints a GPU's temperature beside its limits: above the max operating temperature the driver lowers the clocks (SW Thermal Slowdown), at the slowdown temperature the hardware halves them (HW Thermal Slowdown). A GPU sitting at a limit is being throttled; on a laptop the max operating temperature is the platform's setting and can be far below the chip's own.".to_owned();
    let on = index.map_or(String::new(), |i| format!(" -i {i}"));
    f.actions.push(Action::advice(
        "read the clock event reasons and the temperature under load: SW or HW Thermal Slowdown active confirms the throttle",
        Some(&format!("nvidia-smi -q{on} -d PERFORMANCE,TEMPERATURE")),
    ));
    if platform.is_some() {
        f.actions.push(Action::advice(
            "check the platform's thermal configuration, which sets the GPU's max operating temperature (thermald's mode and its configuration, the firmware's DPTF or performance profile); compare the limit with thermald stopped",
            Some("systemctl status thermald"),
        ));
    } else {
        f.actions.push(Action::advice(
            "check the GPU's cooling: its fans, the airflow through the chassis, the inlet temperature",
            None,
        ));
    }
}

#[cfg(test)]
mod tests {
    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// intel/thermal_daemon#300 (batch L's 923): a GeForce MX330 at 56 C
    /// against a max operating temperature of 57 C.
    const MX330: &str = "==============NVSMI LOG==============\n\nTimestamp                                 : Sat May  8 13:25:04 2021\nDriver Version                            : 465.27\nCUDA Version                              : 11.3\n\nAttached GPUs                             : 1\nGPU 00000000:2D:00.0\n    Temperature\n        GPU Current Temp                  : 56 C\n        GPU Shutdown Temp                 : 102 C\n        GPU Slowdown Temp                 : 97 C\n        GPU Max Operating Temp            : 57 C\n        GPU Target Temperature            : N/A\n";

    #[test]
    fn a_gpu_at_its_max_operating_temperature_is_throttled_by_a_platform_limit() {
        let f = findings(MX330);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, crate::rules::Category::XidOther);
        assert!(f[0].headline.contains("57 C"), "{}", f[0].headline);
        assert!(f[0].headline.contains("platform"), "{}", f[0].headline);
        // The clock event reasons confirm it.
        let confirmed = MX330.replace(
            "    Temperature\n",
            "    Clocks Event Reasons\n        SW Thermal Slowdown               : Active\n    Temperature\n",
        );
        let c = findings(&confirmed);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].confidence > f[0].confidence);
    }

    #[test]
    fn a_cool_gpu_or_one_without_limits_is_no_finding() {
        assert!(findings(&MX330.replace(": 56 C", ": 40 C")).is_empty());
        assert!(findings(&MX330.replace(": 57 C", ": N/A")).is_empty());
        // A data-centre GPU under load, a few degrees under its limit.
        let h100 = MX330
            .replace(": 56 C", ": 80 C")
            .replace(": 57 C", ": 87 C")
            .replace(": 97 C", ": 90 C");
        assert!(findings(&h100).is_empty());
    }
}
