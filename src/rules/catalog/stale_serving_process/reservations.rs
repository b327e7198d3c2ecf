//! GPU reservations held by runs that are gone: canhazgpu's status table
//! (`chg status`, catalogs/stacks-canhazgpu.toml) with a `RUN` reservation
//! whose heartbeat is older than two of its intervals while the card shows
//! no usage (`no usage detected`). A `chg run` sends a heartbeat every 60
//! seconds while its command lives; one killed (`kill -9`) sends none, and
//! its GPUs stay reserved, blocking every other user, until the heartbeat
//! timeout expires them. A row with a fresh heartbeat, or with memory and
//! processes on the card, is a live job.

use super::META;
use crate::correlate::Incident;
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};

/// The table's rows.
const ROW: &str = "stacks-canhazgpu.status-row";
/// canhazgpu's heartbeat interval (internal/types/types.go), in seconds.
const INTERVAL_SECS: u64 = 60;
/// Heartbeats missed from which the run no longer sends them.
const MISSED: u64 = 2;
/// What the table's validation column says of a card with nothing on it.
const IDLE: &str = "no usage detected";

/// `0h 4m 7s` (canhazgpu's FormatDuration) in seconds.
fn secs(text: &str) -> Option<u64> {
    let mut total = 0;
    let mut any = false;
    for part in text.split_whitespace() {
        let (n, unit) = part.split_at(part.find(|c: char| !c.is_ascii_digit())?);
        let n: u64 = n.parse().ok()?;
        total += n * match unit {
            "h" => 3600,
            "m" => 60,
            "s" => 1,
            _ => return None,
        };
        any = true;
    }
    any.then_some(total)
}

/// The heartbeat's age in a row's text after its status
/// (`… │ RUN  │ heartbeat 0h 4m 7s ago  │ no usage detected │ -`).
fn heartbeat(rest: &str) -> Option<(&str, u64)> {
    let after = &rest[rest.find("heartbeat ")? + "heartbeat ".len()..];
    let ago = after[..after.find(" ago")?].trim();
    Some((ago, secs(ago)?))
}

/// The finding for the RUN reservations whose run is gone.
pub(super) fn dead_runs(incident: &Incident) -> Option<Finding> {
    let mut dead = Vec::new();
    let mut live = 0;
    for (m, hit) in incident.known(ROW) {
        let (Some(gpu), Some(rest)) = (hit.get("gpu"), hit.get("rest")) else {
            continue;
        };
        let run = rest.split(['│', ' ']).any(|w| w == "RUN");
        let Some((ago, age)) = heartbeat(rest).filter(|_| run) else {
            continue;
        };
        if age >= MISSED * INTERVAL_SECS && rest.contains(IDLE) {
            dead.push((m, gpu, ago));
        } else {
            live += 1;
        }
    }
    if dead.is_empty() {
        return None;
    }
    let mut f = Finding::new(META.id, META.category, META.severity);
    let mut gpus = Vec::new();
    for (m, gpu, ago) in &dead {
        f.evidence_marked(
            m.span,
            format!("GPU {gpu}: reserved by a run whose last heartbeat was {ago} ago, and the card shows {IDLE}"),
            format!("heartbeat {ago} ago"),
        );
        if let Ok(g) = gpu.parse() {
            f.entities.gpus.insert(g);
        }
        gpus.push(*gpu);
    }
    let list = gpus.join(",");
    let one = gpus.len() == 1;
    let which = if one { "GPU" } else { "GPUs" };
    let (runs, cards, stay) = if one {
        (
            "a run that is gone: a stale heartbeat, nothing on the card",
            "card shows",
            "stays",
        )
    } else {
        (
            "runs that are gone: stale heartbeats, nothing on the cards",
            "cards show",
            "stay",
        )
    };
    f.condition(
        format!("the RUN reservations' heartbeats are older than {MISSED} of canhazgpu's 60-second intervals"),
        true,
    );
    f.condition(format!("the {cards} {IDLE}"), true);
    f.condition("live runs beside them still send heartbeats", live > 0);
    f.title = format!("{which} {list} reserved by {runs}");
    f.headline = format!(
        "canhazgpu still lists {which} {list} as IN_USE by RUN reservations whose heartbeat stopped minutes ago while the cards show no usage: the runs that reserved them are gone (killed, or their chg process died), and their reservations block everyone until the heartbeat timeout expires them."
    );
    f.chain
        .push("the runs holding the reservations ended without releasing them".to_owned());
    f.chain.push(format!(
        "{which} {list} {stay} reserved with nothing running on {}",
        if one { "it" } else { "them" }
    ));
    f.explanation = "A `chg run` keeps its reservation alive with a heartbeat every 60 seconds while its command runs; a run killed with SIGKILL, or whose host process died, sends none and cannot release, so its GPUs stay IN_USE until the heartbeat timeout (5 minutes). Rows with fresh heartbeats and memory in use are live jobs.".to_owned();
    f.actions.push(Action::advice(
        "release the dead runs' reservations now (their owner, or wait for the heartbeat timeout)",
        Some(&format!("chg release --gpu-ids {list}")),
    ));
    f.actions.push(Action::advice(
        "stop runs with Ctrl-C or SIGTERM rather than kill -9, so that chg releases their GPUs",
        None,
    ));
    f.confidence = confidence(&f, 0.6, 0.8);
    Some(f)
}

#[cfg(test)]
mod tests {
    /// https://github.com/russellb/canhazgpu/issues/30: two killed test
    /// runs keep GPUs 0 and 1; GPUs 2 and 4 are live jobs.
    const STATUS: &str = " GPU │ STATUS      │ USER          │ DURATION   │ TYPE │ DETAILS                 │ VALIDATION           │ MODEL                       \n\
─────┼─────────────┼───────────────┼────────────┼──────┼─────────────────────────┼──────────────────────┼─────────────────────────────\n \
0   │ ● IN_USE    │ HDCharles     │ 0h 3m 9s   │ RUN  │ heartbeat 0h 3m 8s ago  │ no usage detected    │ -                           \n \
1   │ ● IN_USE    │ HDCharles     │ 0h 9m 8s   │ RUN  │ heartbeat 0h 4m 7s ago  │ no usage detected    │ -                           \n \
2   │ ● IN_USE    │ user          │ 6h 57m 41s │ RUN  │ heartbeat 0h 0m 41s ago │ 74608MB, 1 processes │ /mnt/nvme4/tms/moonlight-v2 \n \
4   │ ● IN_USE    │ userA         │ 1h 32m 36s │ RUN  │ heartbeat 0h 0m 35s ago │ 61438MB, 1 processes │ Qwen/Qwen3-30B-A3B          \n";

    #[test]
    fn a_run_reservation_with_a_stale_heartbeat_and_an_idle_card_is_a_dead_run() {
        let f = crate::testing::findings_of(super::META.id, STATUS);
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].entities.gpus.iter().copied().collect::<Vec<u32>>(),
            [0, 1]
        );
        assert!(
            f[0].conditions.iter().all(|c| c.met),
            "{:?}",
            f[0].conditions
        );
    }

    /// A fresh heartbeat on an idle card is a run still starting; a stale
    /// one on a busy card is not this rule's (the card is in use).
    #[test]
    fn a_fresh_heartbeat_or_a_busy_card_is_a_live_run() {
        let fresh = STATUS
            .replace("heartbeat 0h 3m 8s ago ", "heartbeat 0h 0m 8s ago ")
            .replace("heartbeat 0h 4m 7s ago ", "heartbeat 0h 0m 7s ago ");
        assert!(crate::testing::findings_of(super::META.id, &fresh).is_empty());
        let busy = STATUS.replace("no usage detected   ", "8452MB, 1 processes");
        assert!(crate::testing::findings_of(super::META.id, &busy).is_empty());
    }

    #[test]
    fn canhazgpu_s_durations() {
        assert_eq!(super::secs("0h 4m 7s"), Some(247));
        assert_eq!(super::secs("6h 57m 41s"), Some(25061));
        assert_eq!(super::secs("soon"), None);
    }
}
