//! A GPU process whose `ps` row says it is stopped (`STAT` `T`: stopped by
//! job control, Ctrl+Z or SIGSTOP; `t`: stopped by a debugger): it keeps
//! its CUDA context, and so all its GPU memory, while it runs nothing.
//! nvidia-smi's process row names the PID and its memory; the `ps` row of
//! the same PID (`thomased 1395 … pts/2 Tl May25 147:37 python train.py …`)
//! says it is stopped and since when. The join of the two is the finding
//! (batch Q 1071, trixie's cn119: a training run stopped for a week holds
//! 25 GB of GPU 0).

use crate::correlate::{GpuProcess, Incident};
use crate::model::PsRecord;
use crate::rules::support::mib;
use crate::rules::{Action, Finding};

use super::META;

/// Whether a `ps` STAT says stopped: `T` (job control) or `t` (tracing).
fn stopped(r: &PsRecord) -> bool {
    r.stat.as_deref().is_some_and(|s| s.starts_with(['T', 't']))
}

/// The GPU processes with memory whose `ps` row says stopped, each with
/// its row.
fn held(incident: &Incident) -> Vec<(&GpuProcess, &PsRecord)> {
    incident
        .gpu_processes
        .iter()
        .filter(|p| p.used_mib.is_some_and(|m| m > 0))
        .filter_map(|p| {
            let r = incident
                .facts
                .ps
                .iter()
                .find(|r| r.pid == p.pid && stopped(r))?;
            Some((p, r))
        })
        .collect()
}

/// One finding for the stopped processes that hold GPU memory, if any.
pub(super) fn finding(incident: &Incident) -> Option<Finding> {
    let held = held(incident);
    if held.is_empty() {
        return None;
    }
    let mut f = Finding::new(META.id, META.category, META.severity);
    let mut parts = Vec::new();
    for (p, r) in &held {
        let on = super::name_holder(&mut f, p);
        let used = mib(p.used_mib);
        if let Some(span) = p.spans.first() {
            f.evidence(*span, format!("PID {} holds {used}{on}", p.pid));
        }
        let state = r.stat.as_deref().unwrap_or("T");
        let since = crate::rules::support::ps::started(r);
        let user = r
            .user
            .as_deref()
            .map(|u| format!(" of user {u}"))
            .unwrap_or_default();
        let program = r
            .cmd
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        f.evidence(
            r.span,
            format!(
                "ps: PID {} (`{program}`{user}) is in state {state}: stopped, not running{since}",
                p.pid
            ),
        );
        parts.push(format!(
            "PID {} (`{program}`{user}, state {state}{since}) holds {used}{on}",
            p.pid
        ));
    }
    f.condition("nvidia-smi lists the process with GPU memory", true);
    f.condition("ps says it is stopped (state T or t)", true);
    let pids: Vec<String> = held.iter().map(|(p, _)| p.pid.to_string()).collect();
    let pids = pids.join(",");
    f.title = if held.len() == 1 {
        format!("GPU memory held by a stopped process: {}", parts[0])
    } else {
        format!("GPU memory held by {} stopped processes", held.len())
    };
    f.headline = format!(
        "{}: stopped (Ctrl+Z, SIGSTOP or a debugger), it runs nothing but keeps its CUDA context and all its GPU memory, so new jobs on that GPU find the memory taken. Resume it to let it finish, or end it once its owner (or the scheduler) confirms no live job needs it.",
        parts.join("; ")
    );
    f.chain
        .push("the GPU memory it holds is not available to new jobs".to_owned());
    f.chain.push(
        "the process that holds it is stopped, not running: its memory stays allocated until it resumes and exits, or is killed".to_owned(),
    );
    f.explanation = "A stopped process (`T` in ps's STAT: job control's Ctrl+Z or SIGSTOP; `t`: stopped by a debugger) keeps everything it allocated, its CUDA context and GPU memory included, for as long as it stays stopped: a training run suspended and forgotten holds its GPU for days. Its START column says since when it exists.".to_owned();
    f.actions.push(Action::advice(
        "check each process: its state, owner, start time and command (and, on a shared node, that the scheduler runs no job for it)",
        Some(&format!("ps -o pid,user,stat,lstart,etime,cmd -p {pids}")),
    ));
    f.actions.push(Action::advice(
        "resume it to let it finish (kill -CONT), or end it after its owner agrees: a stopped process acts on SIGTERM only once continued",
        Some(&format!(
            "kill -CONT {pids}; kill -TERM {pids}   # after checking they are no live job's"
        )),
    ));
    f.actions.push(Action::advice(
        "confirm the GPU's memory is free again",
        Some("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"),
    ));
    f.confidence = 0.7;
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// ai4d-iasc/trixie#92 (batch Q 1071): nvidia-smi's process row of PID
    /// 1395 and `ps -aux`'s row of the same PID, stopped (`Tl`) since May25.
    const TABLE: &str = "+-----------------------------------------------------------------------------+\n\
| Processes:                                                                  |\n\
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |\n\
|        ID   ID                                                   Usage      |\n\
|=============================================================================|\n\
|    0   N/A  N/A      1395      C   python                          25081MiB |\n\
+-----------------------------------------------------------------------------+\n\n";
    const PS: &str = "thomased  1395  1.7 14.4 89506440 28604880 pts/2 Tl May25 147:37 python train.py --model=TransformerSeq2Set --model_type=seq2set --times=1 --dataset=kp20k --device=cuda:0\n";

    #[test]
    fn a_stopped_process_on_a_gpu_holds_its_memory() {
        let f = findings(&format!("{TABLE}{PS}"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::GpuMemoryHeldByOtherProcess);
        assert_eq!(
            f[0].entities.pids.iter().copied().collect::<Vec<_>>(),
            [1395]
        );
        assert_eq!(f[0].entities.gpus.iter().copied().collect::<Vec<_>>(), [0]);
        assert!(f[0].headline.contains("May25"), "{}", f[0].headline);
        assert!(f[0].headline.contains("Tl"), "{}", f[0].headline);
    }

    /// The same process running (`Sl`), or stopped but on no GPU, is not
    /// this finding.
    #[test]
    fn a_running_holder_or_a_stopped_process_off_the_gpu_is_not() {
        assert!(findings(&format!("{TABLE}{}", PS.replace(" Tl ", " Sl "))).is_empty());
        assert!(findings(&format!("{TABLE}{}", PS.replace("  1395 ", "  1396 "))).is_empty());
    }
}
