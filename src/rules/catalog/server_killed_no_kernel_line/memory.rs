//! What says, besides the kernel, that a process the shell reports
//! `Killed` died for memory: a cgroup manager or an OOM daemon announcing
//! an OOM kill in the same output (Slurm's step cgroup, systemd-oomd), or
//! the process's own warning that it took a large share of the host's
//! memory just before (TensorFlow's CPU allocator).

use crate::correlate::Incident;
use crate::rules::support::capitalise;
use crate::rules::{Action, Finding};
use crate::source::Span;

/// Catalog rows in which something other than the kernel announces an
/// OOM kill without naming the victim's PID: the shell's report of the
/// kill names it.
const ANNOUNCED: &[&str] = &[
    "stacks-slurm.step-oom-kill-events",
    "stacks-slurm.srun-task-out-of-memory",
    "systemd.oomd-killed",
    "systemd.oomd-killed-for-pressure",
    "systemd.oomd-killed-for-swap",
];

/// A process's own warning that one allocation took a large share of the
/// host's memory.
const ALLOCATION: &str = "stacks-tf.allocation-exceeds-system-memory";

/// The memory evidence around one kill.
#[derive(Clone, Copy, Default)]
pub(super) struct Memory {
    /// The announcement nearest the kill in the same input, and its row.
    pub announced: Option<(Span, &'static str)>,
    /// The last allocation warning before the kill in the same input.
    pub warned: Option<Span>,
}

impl Memory {
    /// What the inputs say of memory around the kill at `kill`.
    pub fn of(incident: &Incident, kill: Span) -> Memory {
        let announced = ANNOUNCED
            .iter()
            .flat_map(|id| {
                incident
                    .known(id)
                    .map(move |(m, _)| (m.span, *id))
                    .filter(|(s, _)| s.source == kill.source)
            })
            .min_by_key(|(s, _)| (s.line.abs_diff(kill.line), s.line));
        let warned = incident
            .known(ALLOCATION)
            .map(|(m, _)| m.span)
            .filter(|s| s.source == kill.source && *s < kill)
            .max();
        Memory { announced, warned }
    }

    pub fn any(&self) -> bool {
        self.announced.is_some() || self.warned.is_some()
    }

    /// The note on the kill's own line, when the memory evidence says more
    /// than the shell's report alone.
    pub fn kill_note(&self, pid: Option<u32>) -> Option<String> {
        let job = pid.map_or_else(|| "the job".to_owned(), |p| format!("job {p}"));
        if self.announced.is_some() {
            return Some(format!(
                "the shell reports {job} Killed: SIGKILL from outside, with no traceback"
            ));
        }
        self.warned.map(|_| {
            format!("the shell reports {job} Killed right after it warned of a large allocation of host memory: SIGKILL from outside, with no traceback")
        })
    }

    /// Cites the announcement and the warning, with what each says.
    pub fn cite(&self, f: &mut Finding) {
        if let Some((span, id)) = self.announced {
            f.evidence(span, format!("{} reports an OOM kill in the same output: the kernel killed a process of the job's memory cgroup", announcer(id)));
        }
        if let Some(span) = self.warned {
            f.evidence(
                span,
                "the process's own warning just before: one allocation above its share of the system's memory (TensorFlow's CPU allocator)",
            );
        }
        if self.announced.is_some() {
            f.condition(
                "a cgroup manager or OOM daemon reports an OOM kill in the same output (Slurm, systemd-oomd)",
                true,
            );
        }
    }

    /// The finding's words and advice where the memory evidence decides
    /// them; the confidence it gives, if any.
    pub fn explain(&self, f: &mut Finding, pid: Option<u32>) -> Option<f64> {
        let who = pid.map_or_else(|| "the process".to_owned(), |p| format!("process {p}"));
        if let Some((_, id)) = self.announced {
            let by = announcer(id);
            f.title =
                format!("{who} was killed by the OOM killer inside its job's memory limit ({by})");
            f.headline = format!(
                "{} was Killed (SIGKILL) and {by} reports an OOM kill in the same output: the job outgrew the memory it was given, and the kernel's OOM killer killed it inside its cgroup.",
                capitalise(&who)
            );
            f.explanation = "A job's memory cgroup (Slurm's --mem, a unit's MemoryMax=, a slice systemd-oomd watches) caps what its processes may hold; when they outgrow it, the kernel's OOM killer kills one of them inside the cgroup. The kernel's own lines go to the node's log, not the job's output: the manager's line and the shell's `Killed` are what the job sees.".to_owned();
            if let Some(last) = f.chain.last_mut() {
                *last = format!(
                    "the kernel's OOM killer, inside the job's memory cgroup ({by} says so)"
                );
            }
            f.actions.clear();
            f.actions.push(Action::advice(
                "Compare what the job used with what it asked for (Slurm: the step OUT_OF_MEMORY, MaxRSS near ReqMem)",
                Some("sacct -j JOBID --format=JobID,State,MaxRSS,ReqMem,Elapsed"),
            ));
            f.actions.push(Action::advice(
                "Ask for more memory (#SBATCH --mem=…, --mem-per-gpu=…; MemoryMax= for a unit) or make the job hold less host memory (fewer loader workers, weights memory-mapped, smaller shards at once)",
                None,
            ));
            return Some(0.8);
        }
        if self.warned.is_some() {
            f.title = format!(
                "{who} was killed by SIGKILL after a large host-memory allocation, most likely by the host's OOM killer"
            );
            f.headline = format!(
                "{} was Killed (SIGKILL) right after it warned that one allocation exceeded its share of the system's memory: most likely the kernel's OOM killer; the kernel's lines are not in the inputs.",
                capitalise(&who)
            );
            f.actions
                .retain(|a| !a.describe().starts_with("If it was the OOM killer"));
            f.actions.push(Action::advice(
                "If it was the OOM killer: give the container or VM more memory (Docker Desktop's VM has a memory limit of its own) or add swap, and watch the process's memory while it builds its model",
                Some("docker stats --no-stream; free -h; dmesg -T | grep -i -e oom -e 'killed process'"),
            ));
            return Some(0.4);
        }
        None
    }
}

/// Who announced the kill, by its row.
fn announcer(id: &str) -> &'static str {
    match id {
        "stacks-slurm.step-oom-kill-events" => "slurmstepd",
        "stacks-slurm.srun-task-out-of-memory" => "srun",
        _ => "systemd-oomd",
    }
}
