//! `stale-serving-process`: model-server worker processes that outlived
//! their server: re-parented to PID 1, left behind by systemd, or stuck.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use crate::correlate::{Incident, UnitEvent, UnitEventKind};
use crate::rules::{Category, Finding, Rule, RuleMeta, Severity};
use crate::source::Span;

mod beside_unit;
mod copies;
mod duplicates;
mod engines;
mod finding;
mod generations;
mod gone;
mod instances;
mod killed_parent;
mod left_over;
mod managed;
mod reservations;
mod runners;
mod stopped_job;
mod survivors;
mod terminating_pod;
pub(crate) mod titles;
mod upgraded;
use duplicates::duplicates;
use finding::finding;

pub static RULE: StaleServingProcess = StaleServingProcess;

pub struct StaleServingProcess;

static META: RuleMeta = RuleMeta {
    id: "stale-serving-process",
    category: Category::StaleServingInstance,
    severity: Severity::Error,
    summary: "worker processes of a model server outlived their server and still hold resources",
    // PID 1's lines are the catalog rows `systemd.process-remains` and
    // `systemd.left-over-process`.
    // A teardown at the prompt (`pkill`, `killall`, `ray stop`): engines.rs.
    // A bind or listen in a traceback after a stopped job: stopped_job.rs.
    anchors: &[
        "[nvidia_uvm]",
        "[nvidia]",
        "/stack",
        "pkill",
        "killall",
        "ray stop",
        stopped_job::LISTENS[0],
        stopped_job::LISTENS[1],
        terminating_pod::ANCHORS[0],
        upgraded::CELLAR,
    ],
    doc: r#"
## What it means
A worker of a model server (`sglang::scheduler_TP3`, `VLLM::EngineCore`,
`VLLM::Worker_TP1`) is still alive although its server is gone: `ps` shows it
re-parented to PID 1, or systemd logged `Unit process N remains running
after unit stopped` / `Found left-over process N`. It keeps its GPU memory
and ports, so the next start of a server fails.

## Why it happens
`KillMode=process` (or `none`) in the unit, a server started by hand with
`nohup` and killed without its process group, or a worker stuck in the
driver (`D` state) after a GPU fault, which no signal can end.

## How to confirm
`ps -eo pid,ppid,lstart,stat,cmd`: PPID 1, a start time older than the
current server, state `D` when stuck (`cat /proc/PID/stack` shows where).
nvidia-smi lists the PID with memory; its siblings (same title, nearby PIDs)
belong to the same orphaned server.

## How to fix
Terminate the leftover after checking it still is the process the report
names; wait until its GPU memory is released. A process in `D` state, or one
whose kernel stack (`/proc/PID/stack`) is inside the NVIDIA driver
(`[nvidia_uvm]`), cannot be killed: SIGKILL waits until the driver call
returns. Find the GPU fault (`dmesg`: Xid, UVM errors), then reset the GPU or
reboot, and upgrade the driver.

Python `multiprocessing` workers (`spawn_main … --multiprocessing-fork`)
re-parented to PID 1 beside a GPU with memory in use and no process table
are reported as likely holders, at a lower confidence: the process table
(`nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv`)
settles it. Inside a container whose PID 1 is the server itself, PPID 1 is
normal and proves nothing. Use `KillMode=control-group` (the
default) so that stopping the unit ends every process of the server.

Copies of one serving command on one GPU (nvtop's rows, or a process
table with full command lines), each holding a model's worth of memory, are
leftovers too: one server runs one copy of each. Which copy is current the
rows do not say, so the finding is a warning that names the command that
settles it (`ps -o pid,ppid,lstart,etimes,cmd`) and scripts no signal.
nvidia-smi's table names the executable only (`python`), which alone says
nothing of the model; beside a backend of a product that runs one backend
process per loaded model (LocalAI's `backend-assets/grpc/…`), two or more
rows of one name holding exactly the same memory are that model loaded
again, and read the same way. Elsewhere identical `python` rows may be a
healthy server's workers, and are not read.

Two process tables of one paste, the later listing only part of the
earlier, are a run that stopped: processes of one program that the later
table still lists after their siblings left (a rank that kept its memory
after Ctrl+C) are its leftovers. The finding names them with the `ps`
command that settles it and scripts no signal.

Two runners of one model in a server that runs one runner per loaded
model (Ollama's `ollama runner --model <blob>`, before 0.4
`ollama_llama_server`) are a reload the server lost track of: the older
keeps its memory. With full start times (`lstart`) the finding names the
latest load and is an error; without them, a warning. It scripts no
signal: `ollama ps` and the runners' `--port` settle which one serves.

Several per-instance processes of one serving product alive at once
(GPUStack's `gpustack_model_instance_<id>`, one per model instance it
serves, each starting the instance's backend server as its child) with no
backend server beside them in the listing are instances it stopped without
ending their process: an error at a low confidence, since a listing may be
cut; beside backend servers they may all be live, a warning. The instances
the product lists as running settle it (GPUStack's `/v2/model-instances`),
with `ps -o pid,ppid,etimes,args`; the finding scripts no signal.

A job the shell stopped (Ctrl-Z: bash's `[1]+  Stopped  mesa runserver`,
zsh's `zsh: suspended  python app.py`) is suspended, not ended: it keeps
its port and its GPU memory. The same command typed again at the prompt
and failing on either (a failed bind, a traceback frame that binds or
listens even where the paste is cut before the exception, a CUDA
out-of-memory) is an error naming the job: `fg` and Ctrl-C, or `kill %1`,
end it. It scripts no signal: the job number is only the shell's.

A pod watch (`kubectl get pods -w`) where a pod of the old revision stays
`Terminating` while pods of the new revision (`<owner>-<hash>-<suffix>`, a
newer hash) are created and deleted within ten seconds is a rollout whose
controller counts the terminating pod as a live replica and deletes the
newcomer (kubeai-project/kubeai#442): an error naming the old pod, higher
when more than one newcomer went; its deletion timestamp and finalizers
say why it lingers.

A GPU reservation tool's table that still lists a run's GPUs as reserved
after the run is gone is the same leftover one level up: canhazgpu's `chg
status` row `IN_USE … RUN … heartbeat 0h 4m 7s ago … no usage detected`
(a `chg run` sends a heartbeat every 60 seconds while its command lives)
with the heartbeat two intervals old and nothing on the card is a run killed
without releasing (`kill -9`); its GPUs stay reserved until the heartbeat
timeout. The finding names those GPUs and `chg release --gpu-ids`; rows with
fresh heartbeats or memory in use are live jobs.

Serving stacks run their engines under names of their own (vLLM's
`VLLM::EngineCore` and `VLLM::Worker_TP0`, SGLang's `sglang::scheduler_TP0`,
`sgl_diffusion::scheduler_U0`, `ollama runner`, TGI's
`text-generation-server`, LM Studio's `.internal/utils/node`). A teardown in
the inputs by the server's name (`pkill -9 sglang`, `pkill -f vllm`,
`killall python`, `ray stop`) that such a name escapes leaves the engine
alive after its server: an engine listed with no front end of its stack
beside it (no API server, launcher or app) is then an error naming its PID
and GPUs. It scripts no signal. Without a teardown a lone engine on a GPU
is no finding: a live server's engines look the same in a GPU table.

systemd's `Found left-over process N (COMM) in control group while
starting unit` is evidence by itself, with no process table: the unit's
previous run never stopped and the new run starts beside it. It is an
error naming the PIDs and the unit, stronger when a `ps` row shows the
process still running, with the unit's `KillMode` as the fix; it scripts
no signal.

A web server's master (`gunicorn`, `uvicorn`, `hypercorn`, `daphne`,
`uwsgi`, `waitress-serve`) re-parented to PID 1 while a process manager
(supervisord, circus, PM2's daemon) runs beside it as a process of its own
is an instance the manager no longer runs: left behind when the manager
stopped its program without the process group (`stopasgroup`/`killasgroup`
off), or started by hand. It is an error naming the PID, with the `ss` and
`supervisorctl status` that settle it; it scripts no signal. With the
manager as PID 1 (a container) or a master started with `--daemon` nothing
is reported.

A server killed at the prompt by its PID (`kill 1816382`) while a process
tree of the paste (`pstree -p`, `ps -ef`) shows a child of it holding the
GPU (fuser's `F...m` on `/dev/nvidia0`, a GPU process row: vLLM's
`VLLM::EngineCore`) leaves that child running: a signal to one PID reaches
that process only. A parent usually ends its children on its way out, so
the finding is a warning, and an error when the paste asks about the child
again after the kill (`ps -fp CHILD`); it names the child, its parent and
its GPU, advises a kill of the process group, and scripts no signal.

In a listing with PPIDs (`ps -ef`), processes that run the very command
line of a live web server's master (`gunicorn`, `uvicorn`, `uwsgi` …, the
parent of workers with that command line) but have PPID 1 and no child of
their own are neither its workers nor a master: an earlier instance's
orphaned worker, or an extra instance started beside the service (with
SO_REUSEPORT both accept on its port). An error naming them, with the
`ps`/`ss` that settles which; it scripts no signal.

One server's command line listed several times (`ps -eo
pid,ppid,lstart,etime,args`, `ps -ef`, `ps -o pid,etime,args`), each copy an
instance of its own (none is another's child) and started at a different
time, is a server started again while its earlier instances still ran: the
newest copy is the live one, the older ones leftovers. A server is typed by
its command line (`serve`, `server`, `--port`, a web or model server's
name); paths (a per-run directory), ports and options without a value do
not tell copies apart. Instances, not a worker pool: with PPIDs shown each
copy has PPID 1 (a worker's parent is its master, a managed server's its
manager); without them each copy has a port of its own. Leftovers, not a
planned set: all copies serve one endpoint (one port, or none named), or
their command lines run from a test harness's per-run directories
(pytest's `pytest-of-USER/pytest-3/`) — an error naming the older copies;
or, with ports of their own, each later start took a higher port, as a
start does when the earlier instance still holds its own — at a lower
confidence. The newest start must stand a minute apart from the rest. It
names the older PIDs with their start and elapsed times as printed, advises
the `ps`/`ss` that settles which copy clients reach, and scripts no signal.

A daemon still running the release it was started from after an
upgrade: a running process's executable in a versioned install directory
(Homebrew's `Cellar/orch/0.73.13/bin/orch`, an `lsof` `txt` row or a `ps`
command line) older than the release the program's own version command
typed in the paste answers (`orch version`, `ollama -v`). The restart
after the upgrade missed it and it still serves the old release; a tool
that tracks its service by a PID file may call that service dead. An
error naming the PID; no signal is scripted.

A unit's daemon running twice: `systemctl status` shows the unit active,
its Main PID and its whole `CGroup:` tree, and a process listing shows
another process of the same program (`cron` beside the unit's
`/usr/sbin/cron -n`) under PID 1 and in no control group shown. It was
started beside the unit (by hand, by a script): systemd does not track it,
stopping the unit leaves it running, and both do the daemon's work. An
error naming it and the unit, with `cat /proc/PID/cgroup` to settle it;
no signal is scripted. Template units (`getty@tty1`) and interpreters
(`python`, `bash`) are not read.

PPID 1 alone makes a bare `multiprocessing` worker a warning; it is an
error when the inputs log its server's exit (uvicorn's `Finished server
process [N]`), when it runs from a serving product's own environment
(`…/venvs/gpustack/bin/python`), or when it bears a serving framework's
worker title. A paste that lists the processes twice names each once and
cites the later rows as "still running".

## Safety
Terminating needs confirmation; the script re-checks the PID's command line
and unit before any signal and escalates to SIGKILL only after SIGTERM and a
grace period.
"#,
};

/// A Python `multiprocessing` child: a server's spawned worker (vLLM,
/// Dynamo, SGLang's data-parallel ranks) or its resource tracker. Re-parented
/// to PID 1 its parent, the server, is gone.
const SPAWN_MARKS: &[&str] = &[
    "from multiprocessing.spawn import spawn_main",
    "--multiprocessing-fork",
    "from multiprocessing.resource_tracker import main",
];

/// A kernel stack frame in the NVIDIA driver (`/proc/PID/stack`).
static DRIVER_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*\[<[0-9a-fx]+>\]\s+(?P<fn>[0-9A-Za-z_.]+)\+0x[0-9a-f]+/0x[0-9a-f]+\s+\[(?P<module>nvidia(?:_uvm|_modeset|_drm)?)\]")
        .expect("stack frame regex")
});
static PROC_STACK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"/proc/(?P<pid>[0-9]+)/stack").expect("proc stack regex"));

/// Lines of a kernel stack that follow their `cat /proc/PID/stack`.
const STACK_REACH: u32 = 40;

/// One leftover process and why it is one.
struct Leftover<'a> {
    pid: u32,
    cmd: &'a str,
    span: Span,
    ppid: Option<u32>,
    stat: Option<&'a str>,
    started: Option<&'a str>,
    /// Only nvidia-smi lists it: a sibling (same title, nearby PID) of a
    /// proven leftover.
    sibling_of: Option<u32>,
    /// Its rows in later listings of the same paste: still alive then.
    again: Vec<Span>,
}

/// Which kind of worker a command line is: its title, or the
/// multiprocessing marker.
fn family(cmd: &str) -> Option<&'static str> {
    // Titles of worker processes (titles.rs): their parent is a server.
    if let Some(t) = titles::worker_title(cmd) {
        return Some(t);
    }
    SPAWN_MARKS
        .iter()
        .any(|m| cmd.contains(m))
        .then_some("python multiprocessing")
}

impl Rule for StaleServingProcess {
    fn meta(&self) -> &RuleMeta {
        &META
    }

    fn check(&self, incident: &Incident, out: &mut Vec<Finding>) {
        // Inside a container PID 1 may be the server itself: then PPID 1 is
        // its children's normal parent, not a sign of an orphan.
        let pid1_is_server = incident.facts.ps.iter().any(|p| {
            p.pid == 1
                && (["python", "vllm", "sglang", "dynamo", "ray"]
                    .iter()
                    .any(|m| p.cmd.contains(m))
                    || titles::is_server(&p.cmd))
        });
        let stacks = driver_stacks(incident);
        let mut families: BTreeMap<&'static str, Vec<Leftover<'_>>> = BTreeMap::new();
        for p in &incident.facts.ps {
            let Some(fam) = family(&p.cmd) else { continue };
            let orphan = p.ppid == Some(1) && !pid1_is_server;
            let stuck = p.stat.as_deref().is_some_and(|s| s.starts_with('D'))
                || stacks.iter().any(|s| s.pid == Some(p.pid));
            if orphan || left_over_by_systemd(incident, p.pid).is_some() || stuck {
                families.entry(fam).or_default().push(Leftover {
                    pid: p.pid,
                    cmd: &p.cmd,
                    span: p.span,
                    ppid: p.ppid,
                    stat: p.stat.as_deref(),
                    started: p.started.as_deref(),
                    sibling_of: None,
                    again: Vec::new(),
                });
            }
        }
        // Workers nvidia-smi lists with the same title as a proven leftover,
        // PIDs close to it, and no ps row that gives them a live parent:
        // the rest of the same orphaned server.
        for (fam, members) in families.iter_mut() {
            let Some(anchor) = members.first().map(|m| m.pid) else {
                continue;
            };
            if !titles::is_worker_title(fam) {
                once_each(members);
                continue;
            }
            let known: BTreeSet<u32> = members.iter().map(|m| m.pid).collect();
            for g in &incident.gpu_processes {
                let near = g.pid.abs_diff(anchor) <= 64;
                let in_ps = incident.facts.ps.iter().any(|r| r.pid == g.pid);
                if near && !in_ps && !known.contains(&g.pid) && g.name.starts_with(*fam) {
                    if let Some(span) = g.spans.first() {
                        members.push(Leftover {
                            pid: g.pid,
                            cmd: &g.name,
                            span: *span,
                            ppid: None,
                            stat: None,
                            started: None,
                            sibling_of: Some(anchor),
                            again: Vec::new(),
                        });
                    }
                }
            }
            once_each(members);
        }
        let mut named: BTreeSet<u32> = BTreeSet::new();
        for (fam, members) in families {
            if !members.is_empty() {
                named.extend(members.iter().map(|m| m.pid));
                out.push(finding(incident, fam, &members, &stacks));
            }
        }
        out.extend(duplicates(incident, &named));
        out.extend(survivors::survivors(incident, &named));
        out.extend(runners::runners(incident, &named));
        out.extend(instances::instances(incident, &named));
        out.extend(engines::engines(incident, &named));
        out.extend(killed_parent::killed_parents(incident, &named));
        out.extend(managed::managed(incident, &named));
        out.extend(stopped_job::stopped_jobs(incident));
        out.extend(terminating_pod::terminating_pods(incident));
        out.extend(reservations::dead_runs(incident));
        out.extend(upgraded::upgraded(incident));
        // PID 1's word alone, for the PIDs no part above reported.
        let reported = |out: &Vec<Finding>| -> BTreeSet<u32> {
            out.iter()
                .filter(|f| f.rule == META.id)
                .flat_map(|f| f.entities.pids.iter().copied())
                .chain(named.iter().copied())
                .collect()
        };
        let before = reported(out);
        out.extend(copies::copies(incident, &before));
        let before = reported(out);
        out.extend(generations::generations(incident, &before));
        let before = reported(out);
        out.extend(beside_unit::beside_units(incident, &before));
        let before = reported(out);
        out.extend(left_over::left_over(incident, &before));
    }
}

/// Each leftover once, by PID: a paste that lists the processes twice
/// (`ps` before and after an uninstall) keeps the later rows as `again`.
fn once_each(members: &mut Vec<Leftover<'_>>) {
    members.sort_by_key(|m| (m.pid, m.span));
    let mut out: Vec<Leftover<'_>> = Vec::with_capacity(members.len());
    for m in members.drain(..) {
        match out.last_mut() {
            Some(prev) if prev.pid == m.pid => prev.again.push(m.span),
            _ => out.push(m),
        }
    }
    *members = out;
}

/// A kernel stack with frames in the NVIDIA driver, and whose it is.
struct DriverStack {
    /// From the `/proc/PID/stack` line above it; `None` when not shown.
    pid: Option<u32>,
    frames: Vec<Span>,
    modules: BTreeSet<String>,
}

fn driver_stacks(incident: &Incident) -> Vec<DriverStack> {
    let messages = &incident.facts.messages;
    // The `cat /proc/PID/stack` lines, once: few, in input order.
    let headers: Vec<(Span, u32)> = messages
        .iter()
        .filter_map(|h| Some((h.span, PROC_STACK.captures(&h.text)?["pid"].parse().ok()?)))
        .collect();
    let mut out: Vec<DriverStack> = Vec::new();
    for m in messages {
        let Some(c) = DRIVER_FRAME.captures(&m.text) else {
            continue;
        };
        let pid = headers
            .iter()
            .rev()
            .find(|(h, _)| {
                h.source == m.span.source
                    && h.line < m.span.line
                    && m.span.line - h.line <= STACK_REACH
            })
            .map(|(_, pid)| *pid);
        match out.iter_mut().find(|s| {
            s.pid == pid
                && s.frames
                    .last()
                    .is_some_and(|l| l.source == m.span.source && m.span.line - l.line <= 2)
        }) {
            Some(s) => {
                s.frames.push(m.span);
                s.modules.insert(c["module"].to_owned());
            }
            None => out.push(DriverStack {
                pid,
                frames: vec![m.span],
                modules: BTreeSet::from([c["module"].to_owned()]),
            }),
        }
    }
    out
}

/// The systemd event that left `pid` behind (`remains running`, `left-over
/// process`), if any.
fn left_over_by_systemd(incident: &Incident, pid: u32) -> Option<&UnitEvent> {
    incident.units.values().flat_map(|u| &u.events).find(|e| {
        matches!(e.kind, UnitEventKind::RemainsRunning { pid: p } | UnitEventKind::LeftOverProcess { pid: p } if p == pid)
    })
}

pub(super) fn first_word(cmd: &str) -> &str {
    cmd.split_whitespace().next().unwrap_or(cmd)
}

/// Names each of `rows`' PIDs and cites its line with `note(row, started)`
/// (`started`: [`crate::rules::support::ps::started`]).
fn cite_rows(
    f: &mut Finding,
    rows: &[&crate::model::PsRecord],
    note: impl Fn(&crate::model::PsRecord, &str) -> String,
) {
    for p in rows {
        f.entities.pids.insert(p.pid);
        f.evidence(p.span, note(p, &crate::rules::support::ps::started(p)));
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::findings_of;

    /// SGLang-diffusion's renamed scheduler (fixtures/real/742's
    /// row, `ps -eo pid,comm,args`) with the PPID 1 its author reports: the
    /// header and PPID column are assembled, not copied. Its real paste
    /// shows no parent, and no finding.
    #[test]
    fn a_renamed_diffusion_scheduler_orphaned() {
        let orphan = "    PID    PPID COMMAND         COMMAND\n3636386       1 sgl_diffusion:: sgl_diffusion::scheduler_U0\n";
        let f = findings_of(super::META.id, orphan);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].entities.pids.contains(&3636386));
        let real = "$ ps -eo pid,comm,args | grep sgl_diffusion\n3636386 sgl_diffusion:: sgl_diffusion::scheduler_U0\n";
        assert!(findings_of(super::META.id, real).is_empty());
    }
}
