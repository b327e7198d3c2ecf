//! A unit's previous run still alive when it starts again, shown by systemd
//! alone: `UNIT: Found left-over process N (COMM) in control group while
//! starting unit. Ignoring.` (the row `systemd.left-over-process`). The
//! main part of the rule needs the process's `ps` row with a server's
//! worker title; this line is evidence by itself: PID 1 found the process
//! of the earlier run in the unit's control group, so that run never
//! stopped, and the new one starts beside it (its port, its GPU memory).

use std::collections::{BTreeMap, BTreeSet};

use super::META;
use crate::correlate::Incident;
use crate::rules::support::confidence;
use crate::rules::{Action, Finding};
use crate::source::Span;

/// The row of PID 1's line (catalogs/systemd.toml).
const LEFT_OVER: &str = "systemd.left-over-process";

/// One unit's left-over processes, each with its command name and line.
type Found<'a> = BTreeMap<&'a str, Vec<(u32, &'a str, Span)>>;

/// Findings for the units PID 1 found a previous run's process in, other
/// than the PIDs `named` already reported.
pub(super) fn left_over(incident: &Incident, named: &BTreeSet<u32>) -> Vec<Finding> {
    let mut units: Found<'_> = BTreeMap::new();
    for (m, hit) in incident.known(LEFT_OVER) {
        let (Some(unit), Some(pid)) = (
            hit.get("unit"),
            hit.get("pid").and_then(|p| p.parse::<u32>().ok()),
        ) else {
            continue;
        };
        if named.contains(&pid) {
            continue;
        }
        let found = units.entry(unit).or_default();
        if !found.iter().any(|(p, _, _)| *p == pid) {
            found.push((pid, hit.get("comm").unwrap_or_default(), m.span));
        }
    }
    units
        .into_iter()
        .map(|(unit, found)| finding(incident, unit, &found))
        .collect()
}

fn finding(incident: &Incident, unit: &str, found: &[(u32, &str, Span)]) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    f.entities.units.insert(unit.to_owned());
    for (pid, comm, span) in found {
        f.entities.pids.insert(*pid);
        f.evidence(
            *span,
            format!("systemd found PID {pid} ({comm}) of {unit}'s previous run in its control group while starting it"),
        );
    }
    let listed: Vec<String> = found
        .iter()
        .map(|(pid, comm, _)| format!("PID {pid} ({comm})"))
        .collect();
    let listed = listed.join(", ");
    // The process table shows it alive: more than PID 1's word at start.
    let alive = found
        .iter()
        .any(|(pid, _, _)| incident.facts.ps.iter().any(|p| p.pid == *pid));
    f.condition(
        format!("PID 1 found {listed} of {unit}'s previous run when it started the unit again"),
        true,
    );
    f.condition(
        "the process table shows it still running (missing: ps -o pid,ppid,lstart,args -p PID)",
        alive,
    );
    f.title = format!("{unit}'s previous run is still running ({listed})");
    f.headline = format!(
        "{unit} was started again while its previous run's {listed} was still in its control group: that run never stopped (the unit's KillMode leaves processes behind, or one hung), and the new run starts beside it, next to the port and the GPU memory the old one holds."
    );
    f.explanation = format!(
        "When a unit starts, systemd checks its control group; a process there belongs to the previous run, which was not ended when the unit stopped (KillMode=process or none ends the main process only, or a process did not die). systemd logs it and starts the new run anyway, so two instances of {unit} run at once."
    );
    f.chain.push(format!("{unit} started again"));
    f.chain
        .push(format!("{listed} of its previous run still runs beside it"));
    let pids: Vec<String> = found.iter().map(|(p, _, _)| p.to_string()).collect();
    f.actions.push(Action::advice(
        "check that the left-over process still runs and what it holds",
        Some(&format!(
            "ps -o pid,ppid,lstart,args -p {}; systemctl status {unit}",
            pids.join(",")
        )),
    ));
    f.actions.push(Action::advice(
        format!("stop {unit}, end the left-over process by its PID (SIGTERM, then SIGKILL) and start the unit again"),
        None,
    ));
    f.actions.push(Action::advice(
        format!("let stopping {unit} end all of its processes: KillMode=control-group (the default) or mixed"),
        Some(&format!("systemctl show -p KillMode {unit}")),
    ));
    f.confidence = confidence(&f, 0.5, 0.8);
    f
}

#[cfg(test)]
mod tests {
    use crate::rules::Severity;
    use crate::testing::findings_of;

    /// systemd's own two lines (batch K 888, archlinuxcn's parsoid
    /// thread): the previous run's process, named with its unit. The paste
    /// is about that one unit, so its failure is an error although nothing
    /// in it is GPU serving (`support::scope`); beside another unit that
    /// nothing ties to GPU serving it is a warning. The same lines of a
    /// model server's unit are an error.
    #[test]
    fn a_left_over_process_at_start_is_the_previous_run() {
        let paste = "\
systemd[1]: parsoid.service: Found left-over process 1080 (node) in control group while starting unit. Ignoring.
systemd[1]: This usually indicates unclean termination of a previous run, or service implementation deficiencies.
";
        let f = findings_of(super::META.id, paste);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].entities.pids.contains(&1080));
        assert!(f[0].entities.units.contains("parsoid.service"));
        assert!(
            f[0].headline.contains("PID 1080 (node)"),
            "{}",
            f[0].headline
        );
        let beside = format!(
            "{paste}systemd[1]: cron.service: Main process exited, code=exited, status=1/FAILURE\n"
        );
        let f = findings_of(super::META.id, &beside);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
        let served = paste
            .replace("parsoid", "vllm")
            .replace("(node)", "(python3)");
        let f = findings_of(super::META.id, &served);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].confidence < 0.7, "{}", f[0].confidence);
    }

    /// The next such paste: Ollama's runner left in ollama.service's group
    /// at a restart, with the journal's prefix (the row's sample layout,
    /// assembled, not copied), and its `ps` row: both runners of the unit
    /// are named once, at a higher confidence.
    #[test]
    fn runners_left_in_a_serving_unit_are_named_once() {
        let paste = "\
Mar 02 10:01:12 gpu1 systemd[1]: ollama.service: Found left-over process 2211 (ollama_llama_se) in control group while starting unit. Ignoring.
Mar 02 10:01:12 gpu1 systemd[1]: ollama.service: Found left-over process 2212 (ollama_llama_se) in control group while starting unit. Ignoring.
Mar 02 10:01:12 gpu1 systemd[1]: ollama.service: Found left-over process 2211 (ollama_llama_se) in control group while starting unit. Ignoring.
$ ps -eo pid,ppid,args
    PID    PPID COMMAND
   2211       1 /usr/lib/ollama/runners/cuda_v12/ollama_llama_server --model /usr/share/ollama/.ollama/models/blobs/sha256-6a0746a1ec1a --port 41003
";
        let f = findings_of(super::META.id, paste);
        let ours: Vec<_> = f
            .iter()
            .filter(|f| f.entities.units.contains("ollama.service"))
            .collect();
        assert_eq!(ours.len(), 1, "{f:?}");
        assert_eq!(
            ours[0].entities.pids.iter().copied().collect::<Vec<_>>(),
            [2211, 2212]
        );
        assert_eq!(ours[0].severity, Severity::Error);
        assert!(ours[0].confidence >= 0.8, "{}", ours[0].confidence);
        // The hint line alone is no finding.
        let hint = "systemd[1]: This usually indicates unclean termination of a previous run, or service implementation deficiencies.\n";
        assert!(findings_of(super::META.id, hint).is_empty());
    }
}
