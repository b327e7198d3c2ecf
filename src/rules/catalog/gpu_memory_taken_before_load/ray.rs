//! Ray Tune's `wait_for_gpu` at a trial's start: `Waiting for GPU util to
//! reach 0.01. Util: 0.781` is the GPU's memory use (a fraction of the
//! total) before the trial has loaded anything. Logged again and again
//! with the use far above the target, or ended by its give-up (`GPU memory
//! was not freed.`), it is memory another process holds: most often the
//! previous trial's workers, which did not let go of the GPU.

use crate::correlate::Incident;
use crate::rules::{Action, Finding, Severity};

/// wait_for_gpu's poll line.
const WAIT: &str = "stacks-ray.wait-for-gpu";
/// wait_for_gpu's give-up.
const GAVE_UP: &str = "stacks-ray.wait-for-gpu-gave-up";
/// The poll's own words, counted per line: a terminal that lost the
/// newlines runs several workers' records together on one line.
const RECORD: &str = "Waiting for GPU util to reach";
/// The memory use, as a fraction of the GPU, worth a finding: less is a
/// display, a context, a previous trial still draining.
const HELD: f64 = 0.2;
/// Polls from which a wait is no longer a previous trial letting go.
const POLLS: usize = 2;

/// The finding for a trial that waited on a GPU whose memory another
/// process held.
pub(super) fn held_before_trial(incident: &Incident) -> Option<Finding> {
    let mut polls = 0;
    let mut lines = Vec::new();
    let mut top: Option<(f64, &str, &str)> = None;
    for (m, h) in incident.known(WAIT) {
        let (Some(util), Some(target)) = (h.get("util"), h.get("target")) else {
            continue;
        };
        let Ok(share) = util.parse::<f64>() else {
            continue;
        };
        polls += m.text.matches(RECORD).count().max(1);
        lines.push((m, util));
        if top.is_none_or(|(s, _, _)| share > s) {
            top = Some((share, util, target));
        }
    }
    let gave_up = incident.known(GAVE_UP).next();
    let (share, util, target) = top?;
    if share < HELD || (polls < POLLS && gave_up.is_none()) {
        return None;
    }
    let mut f = super::finding();
    for &(m, util) in lines.iter().take(3) {
        f.evidence_marked(
            m.span,
            format!("before the trial loaded anything, {util} of the GPU's memory was in use"),
            util,
        );
    }
    if let Some((m, _)) = gave_up {
        f.evidence(m.span, "wait_for_gpu gave up: the memory was never freed");
    }
    f.condition(
        format!(
            "the GPU's memory use at the trial's start ({:.0}%) is well above wait_for_gpu's target ({target})",
            share * 100.0
        ),
        true,
    );
    let stuck = f.condition(
        format!("wait_for_gpu polled {polls} times or gave up: the memory was not draining"),
        polls >= POLLS || gave_up.is_some(),
    );
    if !stuck {
        f.severity = Severity::Warning;
    }
    let held = format!("{:.0}%", share * 100.0);
    f.title = format!(
        "GPU memory already held when a Ray Tune trial started: {held} in use, wait_for_gpu waiting for {target}"
    );
    f.headline = format!(
        "A new Ray Tune trial found {held} of its GPU's memory in use before it loaded anything (wait_for_gpu: Waiting for GPU util to reach {target}. Util: {util}){}: another process holds it, most likely the previous trial's workers that did not exit.",
        if gave_up.is_some() {
            ", and wait_for_gpu gave up"
        } else {
            ", poll after poll"
        }
    );
    f.chain
        .push("the new trial waits for, or fails to get, its GPU".to_owned());
    f.chain.push(
        "the previous trial's workers (or another process) still hold the GPU's memory".to_owned(),
    );
    f.explanation = "wait_for_gpu runs at a trial's start, before the trial allocates anything, and logs the GPU's memory use (GPUtil's memoryUtil, a fraction of the total) while it is above the target: what is in use then belongs to other processes. A previous trial that is still shutting down drains within a poll or two; use that stays put means its workers (a TorchTrainer's RayTrainWorker actors) or another program still hold the GPU.".to_owned();
    f.actions.push(Action::advice(
        "list the processes on the GPU and stop the previous trial's leftovers (`ray stop` between runs), or fix the trainable's shutdown so its workers exit",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.confidence = crate::rules::support::confidence(&f, 0.5, 0.75);
    Some(f)
}

#[cfg(test)]
mod tests {
    const RULE: &str = "gpu-memory-taken-before-load";

    /// https://github.com/ray-project/ray/issues/32725 (batch S 1172): two
    /// polls run together on one line, 78.1% in use against 0.01.
    #[test]
    fn repeated_polls_far_above_the_target_are_memory_held_by_another_process() {
        let paste = "(RayTrainWorker pid=142525) 2023-02-21 17:55:54,271     INFO util.py:549 -- Waiting for GPU util to reach 0.01. Util: 0.781       (RayTrainWorker pid=142525) 2023-02-21 17:55:59,372     INFO util.py:549 -- Waiting for GPU util to reach 0.01. Util: 0.781\n";
        let f = crate::testing::findings_of(RULE, paste);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].headline.contains("78% of its GPU's memory"),
            "{}",
            f[0].headline
        );
        assert!(
            f[0].conditions.iter().all(|c| c.met),
            "{:?}",
            f[0].conditions
        );
    }

    /// One poll is a previous trial still letting go; a poll under a fifth
    /// of the GPU is a display or a context: neither is a finding.
    #[test]
    fn one_poll_or_a_small_use_is_not_read() {
        let one = "(RayTrainWorker pid=142525) 2023-02-21 17:55:54,271     INFO util.py:549 -- Waiting for GPU util to reach 0.01. Util: 0.781\n";
        assert!(crate::testing::findings_of(RULE, one).is_empty());
        let small = one.replace("0.781", "0.052");
        let two = format!("{small}{small}");
        assert!(crate::testing::findings_of(RULE, &two).is_empty());
    }
}
