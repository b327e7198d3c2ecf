//! Small helpers every rule file uses: finding lines by signature and
//! describing units, so that rule files hold only their own logic.

use regex::{Captures, Regex};

use crate::correlate::{Incident, UnitEventKind};
use crate::model::Message;
use crate::source::Span;

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
