//! Small helpers every rule file uses: finding lines by signature and
//! describing units, so that rule files hold only their own logic.

pub mod holders;
pub mod server;
pub mod vllm;

use regex::{Captures, Regex};

use crate::correlate::{Incident, UnitEventKind};
use crate::model::Message;
use crate::source::Span;
use std::sync::LazyLock;

/// Every kept line matching `re`, with its captures, in input order.
pub fn matches<'a>(
    incident: &'a Incident,
    re: &'a Regex,
) -> impl Iterator<Item = (&'a Message, Captures<'a>)> + 'a {
    incident
        .facts
        .messages
        .iter()
        .filter_map(move |m| re.captures(&m.text).map(|c| (m, c)))
}

/// The first line per distinct masked text: the same message from eight
/// ranks or two captures is cited once, with a count.
pub fn distinct<'a>(hits: impl Iterator<Item = &'a Message>) -> Vec<(&'a Message, usize)> {
    let mut out: Vec<(&Message, usize, String)> = Vec::new();
    for m in hits {
        let key = super::unknown::template(&m.text);
        match out.iter_mut().find(|(_, _, k)| *k == key) {
            Some(entry) => entry.1 += 1,
            None => out.push((m, 1, key)),
        }
    }
    out.into_iter().map(|(m, n, _)| (m, n)).collect()
}

/// The span of the first event of `kind` for `unit`, if PID 1 logged one.
pub fn unit_event(
    incident: &Incident,
    unit: &str,
    pred: impl Fn(&UnitEventKind) -> bool,
) -> Option<Span> {
    incident
        .units
        .get(unit)?
        .events
        .iter()
        .find(|e| pred(&e.kind))
        .map(|e| e.span)
}

/// Rounds a confidence to two decimals so reports stay stable.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A confidence from the met conditions: `base` with none, `top` with all.
pub fn confidence(f: &super::Finding, base: f64, top: f64) -> f64 {
    let total = f.conditions.len().max(1) as f64;
    let met = f.conditions.iter().filter(|c| c.met).count() as f64;
    round2(base + (top - base) * met / total)
}

/// `55,286 MiB`; `unknown MiB` for absent values.
pub fn mib(value: Option<u64>) -> String {
    match value {
        Some(v) => {
            let digits = v.to_string();
            let mut out = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i) % 3 == 0 {
                    out.push(',');
                }
                out.push(c);
            }
            format!("{out} MiB")
        }
        None => "an unknown amount of memory".to_owned(),
    }
}

static NOTHING_TO_DO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"NV_WARN_NOTHING_TO_DO|NVSwitch devices? (?:were )?not found|No NVSwitch")
        .expect("regex")
});

/// Why the Fabric Manager is irrelevant on this host, when the inputs show
/// it: its own "nothing to do", or GPUs that are PCIe boards.
pub fn fabric_manager_irrelevant(incident: &Incident) -> Option<(Span, String)> {
    if let Some((m, _)) = matches(incident, &NOTHING_TO_DO).next() {
        return Some((
            m.span,
            "the Fabric Manager found no NVSwitch to manage".to_owned(),
        ));
    }
    let pcie = |name: &str| {
        ["PCIe", "RTX", "L40", "L4", "A10", "A16", "T4", "A40"]
            .iter()
            .any(|m| name.contains(m))
    };
    let gpus = &incident.gpus;
    if gpus.is_empty() || !gpus.iter().all(|g| g.name.as_deref().is_some_and(pcie)) {
        return None;
    }
    let first = &gpus[0];
    Some((
        *first.spans.first()?,
        format!(
            "the GPUs are PCIe boards ({}), not NVSwitch-connected",
            first.name.as_deref().unwrap_or("")
        ),
    ))
}

/// `the driver …` → `The driver …`, for headlines built from titles.
pub fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|first| first.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
