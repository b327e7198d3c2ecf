//! Processes of one run that outlived their siblings: two process tables of
//! one paste, the later a strict part of the earlier, where processes of
//! one program (the ranks of a job, the workers of a server) left and
//! others stayed with their memory. The run was stopped (Ctrl+C, a kill of
//! its launcher); the ones still listed are its leftovers.

use std::collections::BTreeSet;

use super::META;
use crate::correlate::Incident;
use crate::model::{GpuProcessRecord, ProcessListing};
use crate::rules::support::{confidence, mib};
use crate::rules::{Action, Finding};

/// Memory a survivor must still hold: a loaded model or a job's working
/// set, not a context.
const LOADED_MIB: u64 = 1024;

/// The process rows of each table, in input order.
fn tables(incident: &Incident) -> Vec<(&ProcessListing, Vec<&GpuProcessRecord>)> {
    let facts = &incident.facts;
    let mut out: Vec<(&ProcessListing, Vec<&GpuProcessRecord>)> = facts
        .process_listings
        .iter()
        .map(|l| (l, Vec::new()))
        .collect();
    for r in &facts.gpu_processes {
        let table = out
            .iter_mut()
            .rev()
            .find(|(l, _)| l.span.source == r.span.source && l.span.line < r.span.line);
        if let Some((_, rows)) = table {
            rows.push(r);
        }
    }
    out
}

/// Findings for the processes of a run that a later table still lists
/// after their siblings left; `named` are PIDs another part of the rule
/// already reported.
pub(super) fn survivors(incident: &Incident, named: &BTreeSet<u32>) -> Vec<Finding> {
    let tables = tables(incident);
    let mut out = Vec::new();
    for pair in tables.windows(2) {
        let ((_, before), (_, after)) = (&pair[0], &pair[1]);
        let pids_before: BTreeSet<u32> = before.iter().map(|r| r.pid).collect();
        let pids_after: BTreeSet<u32> = after.iter().map(|r| r.pid).collect();
        // The same run, later and smaller: nothing new started.
        if after.is_empty()
            || !pids_after.is_subset(&pids_before)
            || pids_after.len() >= pids_before.len()
        {
            continue;
        }
        let gone: Vec<&GpuProcessRecord> = before
            .iter()
            .copied()
            .filter(|r| !pids_after.contains(&r.pid))
            .collect();
        // A survivor is a sibling of a process that left (the same
        // program) and still holds a loaded amount of memory.
        let left: Vec<&GpuProcessRecord> = after
            .iter()
            .copied()
            .filter(|r| {
                !named.contains(&r.pid)
                    && r.used_mib.is_some_and(|m| m >= LOADED_MIB)
                    && gone.iter().any(|g| g.name == r.name)
            })
            .collect();
        if left.is_empty() {
            continue;
        }
        out.push(finding(&gone, &left));
    }
    out
}

fn finding(gone: &[&GpuProcessRecord], left: &[&GpuProcessRecord]) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let pids: Vec<String> = left.iter().map(|r| r.pid.to_string()).collect();
    let gone_pids: Vec<String> = gone.iter().map(|r| r.pid.to_string()).collect();
    let program = &left[0].name;
    for g in gone
        .iter()
        .filter(|g| left.iter().any(|l| l.name == g.name))
    {
        f.entities.pids.insert(g.pid);
        f.evidence(
            g.span,
            format!(
                "PID {} `{}` ran here, and the later table no longer lists it",
                g.pid, g.name
            ),
        );
    }
    let mut held = 0;
    for r in left {
        f.entities.pids.insert(r.pid);
        if let Some(gpu) = r.gpu_index {
            f.entities.gpus.insert(gpu);
        }
        held += r.used_mib.unwrap_or(0);
        f.evidence(
            r.span,
            format!(
                "PID {} `{}` is still listed with {}{}",
                r.pid,
                r.name,
                r.used_mib.map_or(String::new(), |m| format!("{m}MiB")),
                r.gpu_index
                    .map_or(String::new(), |g| format!(" on GPU {g}"))
            ),
        );
    }
    let gpus: Vec<String> = f.entities.gpus.iter().map(|g| format!("GPU {g}")).collect();
    let on = if gpus.is_empty() {
        String::new()
    } else {
        format!(" on {}", gpus.join(", "))
    };
    f.condition(
        "a later process table lists part of an earlier one: the run stopped",
        true,
    );
    f.condition(
        "the processes still listed are siblings of those that left (the same program)",
        true,
    );
    f.condition(
        "their parent is gone (missing: ps -o pid,ppid,lstart,args -p PID)",
        false,
    );
    f.title = format!(
        "PID{} {} of a stopped run still hold{} {}{on}",
        if left.len() == 1 { "" } else { "s" },
        pids.join(", "),
        if left.len() == 1 { "s" } else { "" },
        mib(Some(held))
    );
    f.headline = format!(
        "The later process table no longer lists PID{} {} but still lists {} `{program}` PID{} {} holding {}{on}: the run was stopped and {} outlived {} {}, keeping {} memory (inferred from the two tables; a process's parent settles it).",
        if gone_pids.len() == 1 { "" } else { "s" },
        gone_pids.join(", "),
        if left.len() == 1 {
            "its sibling"
        } else {
            "its siblings"
        },
        if left.len() == 1 { "" } else { "s" },
        pids.join(", "),
        mib(Some(held)),
        if left.len() == 1 { "it" } else { "they" },
        if left.len() == 1 { "its" } else { "their" },
        if gone_pids.len() == 1 {
            "sibling"
        } else {
            "siblings"
        },
        if left.len() == 1 { "its" } else { "their" },
    );
    f.chain
        .push(format!("{} stays in use{on}", mib(Some(held))));
    f.chain.push(format!(
        "PID{} {} outlived the run that started {}",
        if left.len() == 1 { "" } else { "s" },
        pids.join(", "),
        if left.len() == 1 { "it" } else { "them" }
    ));
    f.explanation = "The processes of one run (the ranks of a job, the workers of a server) go together. A later table that lists some of them without the others shows the run stopped and these did not: a worker that did not get the signal (Ctrl+C reaches the foreground process group only), or one stuck in a CUDA call. Its memory stays held until it exits.".to_owned();
    push_actions(&mut f, &pids);
    f.confidence = confidence(&f, 0.4, 0.8);
    f
}

/// The steps: check each survivor's parent, then end it and check its
/// memory is freed; stop the next run by its process group.
fn push_actions(f: &mut Finding, pids: &[String]) {
    f.actions.push(Action::advice(
        "check that each process still listed is a leftover: PPID 1 or its launcher gone, started with the stopped run",
        Some(&format!("ps -o pid,ppid,stat,lstart,args -p {}", pids.join(","))),
    ));
    f.actions.push(Action::advice(
        "then end it (SIGTERM, then SIGKILL) and check that its memory is freed; state D means it is stuck in the driver and needs a GPU reset",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "stop the run by its process group next time, so that every worker goes with it",
        Some("kill -TERM -- -PGID"),
    ));
}

#[cfg(test)]
mod tests {
    use super::META;
    use crate::rules::Severity;
    use crate::testing::findings_of;

    /// https://github.com/Megvii-BaseDetection/YOLOX/issues/958 (fixtures/real/661):
    /// the process table before and after Ctrl+C.
    const CTRL_C: &str = "\
+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|    0   N/A  N/A     52573      C   ...a3/envs/yolovx/bin/python    29347MiB |
|    1   N/A  N/A     52574      C   ...a3/envs/yolovx/bin/python    29347MiB |
+-----------------------------------------------------------------------------+
BUT when I use \"Ctrl+C\" to stop training, one gpu memory still using,as bellow,
+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|    1   N/A  N/A     52574      C   ...a3/envs/yolovx/bin/python    29347MiB |
+-----------------------------------------------------------------------------+
";

    #[test]
    fn a_rank_still_listed_after_its_sibling_left_is_a_leftover() {
        let f = findings_of(META.id, CTRL_C);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].entities.pids.contains(&52574));
        assert!(f[0].entities.gpus.contains(&1));
        assert!(f[0].evidence.iter().any(|e| e.note.contains("29347MiB")));
        // Advice only: the paste does not show the parent.
        assert!(
            f[0].actions
                .iter()
                .all(|a| a.safety == crate::rules::Safety::AdvisoryOnly)
        );
    }

    /// `text` with the last `from` (the later table's) replaced by `to`.
    fn in_later_table(from: &str, to: &str) -> String {
        let at = CTRL_C.rfind(from).expect("the later table has it");
        format!("{}{to}{}", &CTRL_C[..at], &CTRL_C[at + from.len()..])
    }

    #[test]
    fn variants_of_the_two_tables() {
        // Varies 661's rows: four ranks, two still listed after the stop.
        let four = CTRL_C
            .replacen(
                "|    1   N/A  N/A     52574      C   ...a3/envs/yolovx/bin/python    29347MiB |\n",
                "|    1   N/A  N/A     52574      C   ...a3/envs/yolovx/bin/python    29347MiB |\n|    2   N/A  N/A     52575      C   ...a3/envs/yolovx/bin/python    29347MiB |\n|    3   N/A  N/A     52576      C   ...a3/envs/yolovx/bin/python    29347MiB |\n",
                1,
            )
            .replace(
                "|    1   N/A  N/A     52574      C   ...a3/envs/yolovx/bin/python    29347MiB |\n+---",
                "|    1   N/A  N/A     52574      C   ...a3/envs/yolovx/bin/python    29347MiB |\n|    3   N/A  N/A     52576      C   ...a3/envs/yolovx/bin/python    29347MiB |\n+---",
            );
        let f = findings_of(META.id, &four);
        assert_eq!(f.len(), 1, "{f:?}");
        let pids: Vec<u32> = f[0].entities.pids.iter().copied().collect();
        assert!(pids.contains(&52574) && pids.contains(&52576), "{pids:?}");
        // The later table lists a new process: another run, not a leftover.
        let new = in_later_table(
            "|    1   N/A  N/A     52574      C   ...a3/envs/yolovx/bin/python    29347MiB |\n+---",
            "|    1   N/A  N/A     52574      C   ...a3/envs/yolovx/bin/python    29347MiB |\n|    0   N/A  N/A     60001      C   ...a3/envs/yolovx/bin/python    29347MiB |\n+---",
        );
        assert!(findings_of(META.id, &new).is_empty());
        // The same table twice: nothing left.
        let same = in_later_table(
            "|    1   N/A  N/A     52574      C   ...a3/envs/yolovx/bin/python    29347MiB |\n+---",
            "|    0   N/A  N/A     52573      C   ...a3/envs/yolovx/bin/python    29347MiB |\n|    1   N/A  N/A     52574      C   ...a3/envs/yolovx/bin/python    29347MiB |\n+---",
        );
        assert!(findings_of(META.id, &same).is_empty());
    }
}
