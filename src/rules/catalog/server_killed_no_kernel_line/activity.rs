//! What the killed process was doing, by its last lines before the kill:
//! loading a model (a diffusion UI's loader: ComfyUI's `model_type FLOW`,
//! AUTOMATIC1111's `Loading weights [...] from`, diffusers' pipeline bar;
//! any program reading a model's weights or checkpoint: tensorrtx's
//! `Loading weights: yolov5s.wts`, fairseq2's `Using the cached checkpoint
//! of the model '…'`), building an engine from one (TensorRT's builder's
//! memory figures at the end of a build), or working through a loop
//! (tqdm's bar in iterations: a sampler's steps, `2it [00:25,
//! 12.97s/it]`). All are catalog rows (`catalogs/startup.toml`,
//! `catalogs/stacks-trtllm.toml`) that are not start-up stages: a
//! diffusion UI loads models for every job, any program may load one.

use crate::correlate::Incident;
use crate::rules::{Action, Finding};
use crate::source::Span;

/// A diffusion UI, or any program, loading a model.
const LOADING: &[&str] = &[
    "startup.diffusion-model-loading",
    "startup.model-weights-loading",
];
/// TensorRT's builder at the end of an engine build.
const BUILDING: &str = "stacks-trtllm.engine-build-memory";
/// A diffusion UI done moving a model to the GPU: the job's work is next.
const LOADED: &str = "startup.diffusion-model-loaded";
/// tqdm's bar over iterations, at least one done.
const ITERATING: &str = "startup.iteration-progress";

/// How many lines before the kill its last words may stand: the kill
/// report follows what the process printed last, a blank line or a line
/// of another writer (a supervisor's, a script's echo) at most between.
const WINDOW: u32 = 3;

/// What the process was doing when it was killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Activity {
    /// Loading a model's weights (its line).
    Loading(Span),
    /// Building an engine from a model (TensorRT's builder's figures).
    Building(Span),
    /// Working: a loop's bar, or a model just loaded for a job (its line).
    Working(Span),
    /// A loop's bar at its total, nothing after it: the loop was done and
    /// the step after it (a diffusion sampler's model offloaded to host
    /// memory, vectors built from what was read, the result decoded or
    /// saved) was under way when the kill came.
    Finished(Span),
}

impl Activity {
    /// The last line before the kill at `kill` (or the kill's own line,
    /// when the report is glued to the bar) that says what the process
    /// was doing, within [`WINDOW`] lines of it in the same input.
    pub fn before(incident: &Incident, kill: Span) -> Option<Activity> {
        let near = |s: Span| s.source == kill.source && s <= kill && kill.line - s.line <= WINDOW;
        let last = |ids: &[&'static str]| {
            ids.iter()
                .flat_map(|id| incident.known(id))
                .map(|(m, _)| m.span)
                .filter(|s| near(*s))
                .max()
        };
        let loading = last(LOADING)
            .map(Activity::Loading)
            .into_iter()
            .chain(last(&[BUILDING]).map(Activity::Building))
            .max_by_key(|a| a.span());
        // A bar still counting, or one at its total (a loop finished):
        // the process was at work in the step after it, at a lower
        // reading (the bar does not say what that step was).
        let bar = incident
            .known(ITERATING)
            .filter(|(m, _)| near(m.span))
            .max_by_key(|(m, _)| m.span);
        // A download's bar at its total (`Downloading: 100%|…| 2/2`) says
        // only that files arrived, not that work began: not read.
        let finished = bar.filter(|(m, hit)| {
            matches!((hit.get("done"), hit.get("total")), (Some(done), Some(total)) if done == total)
                && !m.text.to_ascii_lowercase().contains("download")
        });
        let counting = bar
            .filter(|(_, hit)| match (hit.get("done"), hit.get("total")) {
                (Some(done), Some(total)) => done != total,
                _ => true,
            })
            .map(|(m, _)| m.span);
        let working = last(&[LOADED])
            .max(counting)
            .map(Activity::Working)
            .or_else(|| finished.map(|(m, _)| Activity::Finished(m.span)));
        match (loading, working) {
            (Some(l), Some(w)) => Some(if w.span() > l.span() { w } else { l }),
            (l, w) => l.or(w),
        }
    }

    /// A loop finished just before the kill: the weakest reading.
    pub fn finished(self) -> bool {
        matches!(self, Activity::Finished(_))
    }

    pub fn span(self) -> Span {
        match self {
            Activity::Loading(s)
            | Activity::Building(s)
            | Activity::Working(s)
            | Activity::Finished(s) => s,
        }
    }

    /// Loading a model or building an engine from one: the process held
    /// the model in host memory.
    pub fn loading(self) -> bool {
        matches!(self, Activity::Loading(_) | Activity::Building(_))
    }

    /// The note on the kill's report.
    pub fn kill_note(pid: Option<u32>) -> String {
        let job = pid.map_or_else(|| "the job".to_owned(), |p| format!("job {p}"));
        format!("the shell reports {job} Killed: SIGKILL from outside, with no traceback")
    }

    /// Cites the line, unless it is the kill's own; for a model loading,
    /// the other loading lines of the window before it too (FramePack's
    /// `Offloading … to preserve memory: 8 GB` two lines above its last
    /// `Unloaded … as complete.`): each moved weights into host memory.
    pub fn cite(self, incident: &Incident, f: &mut Finding, kill: Span) {
        if self.span() == kill {
            return;
        }
        if let Activity::Loading(last) = self {
            let mut earlier: Vec<Span> = LOADING
                .iter()
                .flat_map(|id| incident.known(id))
                .map(|(m, _)| m.span)
                .filter(|s| s.source == kill.source && *s < last && kill.line - s.line <= WINDOW)
                .collect();
            earlier.sort();
            earlier.dedup();
            for s in earlier {
                f.evidence(s, "a model being loaded into memory before the kill");
            }
        }
        f.evidence(
            self.span(),
            match self {
                Activity::Loading(_) => {
                    "its last line before the kill: a model being loaded into memory"
                }
                Activity::Building(_) => {
                    "its last line before the kill: TensorRT's builder's memory figures at the end of an engine build (its own accounting, not a failure); the engine is then serialised from host memory"
                }
                Activity::Working(_) => {
                    "its last line before the kill: work under way (a loop's progress, a model just loaded for a job)"
                }
                Activity::Finished(_) => {
                    "its last line before the kill: a loop's bar at its total, so the step after the loop was under way"
                }
            },
        );
    }

    /// The finding's words for a kill in the middle of this activity, and
    /// the checks that settle it in a container or a VM.
    pub fn explain(self, f: &mut Finding, pid: Option<u32>) {
        let who = pid.map_or_else(|| "The process".to_owned(), |p| format!("Process {p}"));
        let (doing, title) = match self {
            Activity::Loading(_) => ("while it loaded a model", "loading a model"),
            Activity::Building(_) => (
                "at the end of a TensorRT engine build",
                "building a TensorRT engine",
            ),
            Activity::Working(_) => (
                "while it worked (its last line is a loop's progress or a model just loaded)",
                "at work",
            ),
            Activity::Finished(_) => (
                "right after a loop finished (its bar at its total), in the step after it (a diffusion sampler's model moved to host memory, the result decoded or saved)",
                "after a loop finished",
            ),
        };
        f.title = format!(
            "{} was killed by SIGKILL {title}, with no error of its own: most likely the OOM killer",
            pid.map_or_else(|| "a process".to_owned(), |p| format!("process {p}"))
        );
        f.headline = format!(
            "{who} was Killed (SIGKILL) {doing}, with no error of its own: most likely the kernel's OOM killer, the host's RAM (or the container's or VM's memory limit) exhausted; the kernel's lines are not in the inputs."
        );
        if let Some(first) = f.chain.first_mut() {
            *first = format!("{} was Killed {doing}", who.to_lowercase());
        }
        if self.finished() {
            f.actions.push(Action::advice(
                "Ask the kernel whether its OOM killer killed the process after the loop: a bar at its total says only that the next step had begun",
                Some("dmesg -T | grep -i -E 'killed process|out of memory'"),
            ));
        }
        f.actions.push(Action::advice(
            "If it ran in a container, ask Docker whether its OOM killer ended it, and read the memory limit (under WSL2 or Docker Desktop, the VM's memory: `memory=` in .wslconfig)",
            Some("docker inspect -f '{{.State.OOMKilled}} {{.HostConfig.Memory}}' CONTAINER; free -h"),
        ));
    }
}
