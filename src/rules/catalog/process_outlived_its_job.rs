//! `process-outlived-its-job`: a batch scheduler asked for a user's jobs
//! lists none, while a process listing shows that user's job programs
//! (Python, an MPI or torch launcher's ranks, a model server) started days
//! before: processes that outlived their job, still holding the node
//! (fixtures/real/870: `qstat -u luirink` printing
//! nothing above two `yank run --mpi` ranks started `May11`).

mod schedulers;

use schedulers::{Age, EmptyQuery, age_of, empty_queries, is_job_program, owner};

use crate::correlate::Incident;
use crate::model::PsRecord;
use crate::rules::support::{COMPUTE_APPS, confidence};
use crate::rules::{Action, Category, Finding, Rule, RuleMeta, Severity};

pub static RULE: ProcessOutlivedItsJob = ProcessOutlivedItsJob;

pub struct ProcessOutlivedItsJob;

static META: RuleMeta = RuleMeta {
    id: "process-outlived-its-job",
    category: Category::StaleServingInstance,
    severity: Severity::Error,
    summary: "a batch scheduler lists no job of a user while a process listing shows that user's job programs started days before: processes that outlived their job",
    anchors: &[],
    doc: r#"
## What it means
The paste asks a batch scheduler for one user's jobs (`qstat -u USER`,
`squeue -u USER`) and gets none: nothing at all, or only the header the
tool prints anyway. Beside it, a process listing (`ps aux` rows, `ps -u
USER -o pid,lstart,cmd`) shows that user's job programs (Python, `mpirun`
or `torchrun` ranks, a model server) started on an earlier day: `ps`
prints a date (`May11`) or a year instead of a time of day for a process
older than a day, an elapsed time with days (`2-03:04:05`), or a full
`lstart` date at least a day before the inputs' own latest time. No job
owns them: they outlived the job that started them and keep the node's
CPUs, memory and GPUs from the jobs the scheduler places there next.

A start time alone proves nothing (servers run for months): the rule
needs the scheduler's empty answer for the processes' owner. An `lstart`
date with no time in the inputs to compare it with (a log line, nvidia-smi's
date) says nothing of the process's age, and is not read as one.

## Why it happens
The job ended (time limit, cancel, a rank's crash) but the scheduler's
epilogue did not reap every process it started: MPI ranks started
through `ssh` or `mpirun` outside the scheduler's process tracking
(Torque without cpusets, Slurm without `proctrack/cgroup`), or daemons
a job left behind on purpose (a model server started with `nohup`).

## How to confirm
`ps -o pid,ppid,lstart,etimes,args -p PIDS` on the node (a PPID of 1 or
of `sshd`/`orted` outside any job), the scheduler's own view (`qstat -n`,
`squeue -w NODE`, `sacct -u USER -S DATE` for the job that ran them) and
`nvidia-smi --query-compute-apps=pid,used_memory --format=csv` for what
they hold.

## How to fix
End the leftover processes (SIGTERM, then SIGKILL), as their owner or an
administrator, and check the node's GPUs and memory are free. Make the
scheduler reap what its jobs start: Slurm's `ProctrackType=proctrack/cgroup`
with `TaskPlugin=task/cgroup`, Torque's cpusets, or an epilogue that kills
the job user's processes; launch MPI through the scheduler's own launcher
(`srun`, `mpiexec` built with the scheduler's TM/PMI support).

## Safety
Advice only: the rule names the processes and the commands to check them;
whether they belong to no job is for the scheduler's full view to settle.
"#,
};

/// A process the rule names, with how its age was read.
struct Leftover<'a> {
    record: &'a PsRecord,
    /// Whether its age was read against the inputs' own clock (an `lstart`
    /// date), not from the start column's own form (a date, days elapsed).
    against_clock: bool,
}

impl Rule for ProcessOutlivedItsJob {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        let commands = &incident.facts.typed_commands;
        let queries = empty_queries(commands);
        if queries.is_empty() {
            return;
        }
        // The inputs' own latest time, to compare an `lstart` date with.
        let latest = incident.times.values().map(|t| t.utc_seconds()).max();
        for query in &queries {
            let leftovers: Vec<Leftover<'_>> = incident
                .facts
                .ps
                .iter()
                .filter(|p| is_job_program(&p.cmd, p.ppid))
                .filter(|p| owner(p, commands).as_deref() == Some(query.user.as_str()))
                .filter_map(|p| leftover(p, latest))
                .collect();
            if !leftovers.is_empty() {
                out.push(finding(query, &leftovers));
            }
        }
    }
}

/// `p` as a leftover when its start says it is a day old or more: by the
/// start column's own form, or an `lstart` date a day or more before the
/// inputs' latest time.
fn leftover(p: &PsRecord, latest: Option<i64>) -> Option<Leftover<'_>> {
    let against_clock = match age_of(p) {
        Age::Days => false,
        Age::Since(start) if latest.is_some_and(|now| now - start >= 86_400) => true,
        Age::Since(_) | Age::Recent => return None,
    };
    Some(Leftover {
        record: p,
        against_clock,
    })
}

/// A start or elapsed time as `ps` printed it, its inner spacing folded.
fn start_of(p: &PsRecord) -> String {
    p.started
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// How the row shows its age: `started May11`, or `running for
/// 12-03:11:52` when the listing has only an elapsed column.
fn since(p: &PsRecord) -> String {
    match p.elapsed.is_some() && p.elapsed == p.started {
        true => format!("running for {}", start_of(p)),
        false => format!("started {}", start_of(p)),
    }
}

fn finding(query: &EmptyQuery<'_>, leftovers: &[Leftover<'_>]) -> Finding {
    let mut f = Finding::new(META.id, META.category, META.severity);
    let user = &query.user;
    let listed = match query.command.output_lines {
        0 => "prints nothing".to_owned(),
        _ => "prints only its header".to_owned(),
    };
    f.evidence_marked(
        query.command.span,
        format!(
            "{} lists no job of {user}: `{}` {listed}",
            query.scheduler.name, query.command.command
        ),
        query.command.command.clone(),
    );
    for l in leftovers {
        let p = l.record;
        f.entities.pids.insert(p.pid);
        let program: String = p.cmd.chars().take(120).collect();
        f.evidence_marked(
            p.span,
            format!("PID {} of {user}, {}: {program}", p.pid, since(p)),
            start_of(p),
        );
    }
    let pids: Vec<String> = leftovers.iter().map(|l| l.record.pid.to_string()).collect();
    let starts: Vec<String> = {
        let mut s: Vec<String> = leftovers.iter().map(|l| since(l.record)).collect();
        s.dedup();
        s
    };
    let one = leftovers.len() == 1;
    let clocked = leftovers.iter().any(|l| l.against_clock);
    f.condition(
        format!(
            "the scheduler ({}) lists no job of {user}",
            query.scheduler.name
        ),
        true,
    );
    f.condition(
        format!("a process listing shows job programs of {user}"),
        true,
    );
    f.condition(
        "their start is a day or more before the listing (a date in ps's start column, days elapsed, or an lstart a day before the inputs' latest time)",
        true,
    );
    f.condition(
        "the listing is of the node the jobs ran on (missing: the node's name beside it)",
        false,
    );
    f.title = format!(
        "PID{} {} of {user} outlived {} job: the scheduler lists none",
        if one { "" } else { "s" },
        pids.join(", "),
        if one { "its" } else { "their" },
    );
    f.headline = format!(
        "{} lists no job of {user} (`{}` {listed}), yet the process listing shows {user}'s PID{} {} running ({}){}: {} of a job that ended, still holding the node's CPUs, memory and any GPUs {} opened.",
        query.scheduler.name,
        query.command.command,
        if one { "" } else { "s" },
        pids.join(", "),
        starts.join(", "),
        if clocked {
            ", a day or more before the inputs' latest time"
        } else {
            ", a day or more before the listing"
        },
        if one {
            "a leftover process"
        } else {
            "leftover processes"
        },
        if one { "it" } else { "they" },
    );
    f.chain.push(format!(
        "the node is busy with {user}'s processes while {user} has no job"
    ));
    f.chain.push(format!(
        "PID{} {} outlived the job that started {}",
        if one { "" } else { "s" },
        pids.join(", "),
        if one { "it" } else { "them" }
    ));
    f.explanation = "A batch scheduler reaps a job's processes when the job ends, if it tracks them: ranks started through mpirun or ssh outside its tracking, or a server started with nohup, survive the job. A process of a user the scheduler lists no job for, started days before, is such a survivor.".to_owned();
    advise(&mut f, &pids, user);
    f.confidence = confidence(&f, 0.4, 0.85);
    f
}

/// The steps: check each process and what it holds, then end them.
fn advise(f: &mut Finding, pids: &[String], user: &str) {
    f.actions.push(Action::advice(
        "check each process's parent, start and command on the node (a PPID of 1, or of sshd/orted outside any job, is a leftover)",
        Some(&format!(
            "ps -o pid,ppid,user,lstart,etimes,args -p {}",
            pids.join(",")
        )),
    ));
    f.actions.push(Action::advice(
        "see what they hold on the GPUs",
        Some(COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        format!(
            "end {user}'s leftover processes (SIGTERM, then SIGKILL) once the scheduler's full view confirms no job of theirs runs on the node, and make its epilogue reap what jobs start (Slurm's proctrack/cgroup, Torque's cpusets)"
        ),
        None,
    ));
}

#[cfg(test)]
mod tests;
