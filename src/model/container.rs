//! A container's state as its runtime records it: `docker inspect`'s
//! `State` (status, exit code, whether the kernel's OOM killer ended it,
//! its PID and times), the command it ran and the GPUs it was given; and
//! a container as `docker ps` lists it, its ages as the daemon words them.

use crate::source::Span;

/// One container object of `docker inspect` (or its `State` alone, as `-f
/// '{{json .State}}'` prints it). Each field is `None` (or empty) where the
/// paste does not show it; field names are moby's `api/types/container`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    /// The first line of the object read.
    pub span: Span,
    /// The last line read of it (its closing bracket, or where the paste
    /// stops).
    pub end: Span,
    /// The line of each `State` field read (`Status`, `OOMKilled`, `Dead`,
    /// `Pid`, `ExitCode`, `Error`, `StartedAt`, `FinishedAt`), by its key,
    /// so that what a field says is cited on its own line.
    pub lines: Vec<(&'static str, Span)>,
    /// `Id`: the container's full ID.
    pub id: Option<String>,
    /// `Name`: `/name`, as the daemon stores it.
    pub name: Option<String>,
    /// `State.Status`: `created`, `running`, `paused`, `restarting`,
    /// `removing`, `exited`, `dead`.
    pub status: Option<String>,
    pub running: Option<bool>,
    /// `State.OOMKilled`: the runtime's record of an OOM kill in the
    /// container's memory cgroup during its last run.
    pub oom_killed: Option<bool>,
    pub dead: Option<bool>,
    /// `State.Pid`: 0 when it is not running.
    pub pid: Option<u32>,
    pub exit_code: Option<i64>,
    /// `State.Error`: the daemon's error starting it, when not empty.
    pub error: Option<String>,
    /// `State.StartedAt`, `State.FinishedAt`, RFC 3339 as printed
    /// (`0001-01-01T00:00:00Z` for never).
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// `Path` and `Args`, else `Config.Cmd`: the command it runs.
    pub command: Vec<String>,
    /// `Config.Image` (the name it was run from), else `Image` (its ID).
    pub image: Option<String>,
    /// `HostConfig.Runtime` (`runc`, `nvidia`).
    pub runtime: Option<String>,
    /// `HostConfig.DeviceRequests`' GPUs: each `DeviceIDs` entry (an index
    /// or a `GPU-…` UUID), or `all` for `Count: -1` (`--gpus all`), or the
    /// count (`--gpus 2`).
    pub gpus: Vec<String>,
}

impl ContainerState {
    /// A container object begun at `span`, nothing read yet.
    pub fn new(span: Span) -> ContainerState {
        ContainerState {
            span,
            end: span,
            lines: Vec::new(),
            id: None,
            name: None,
            status: None,
            running: None,
            oom_killed: None,
            dead: None,
            pid: None,
            exit_code: None,
            error: None,
            started_at: None,
            finished_at: None,
            command: Vec::new(),
            image: None,
            runtime: None,
            gpus: Vec::new(),
        }
    }

    /// The line of the `State` field `key`, where the paste shows it.
    pub fn line_of(&self, key: &str) -> Option<Span> {
        self.lines.iter().find(|(k, _)| *k == key).map(|(_, s)| *s)
    }

    /// Whether `span` is one of the object's lines.
    pub fn holds(&self, span: Span) -> bool {
        span.source == self.span.source && (self.span.line..=self.end.line).contains(&span.line)
    }
}

/// One row of `docker ps` (`docker compose ps`): the container's name, how
/// long ago it was created (`CREATED`: `16 minutes ago`) and its `STATUS` as
/// the daemon words it (moby's `container.State.String()`: `Up 10 seconds`,
/// `Restarting (1) 44 seconds ago`, `Exited (137) 2 hours ago`, `Created`),
/// with the durations read back from docker/go-units' `HumanDuration`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRow {
    pub span: Span,
    /// `NAMES` (`NAME` in `docker compose ps`).
    pub name: String,
    /// `CREATED`, in seconds: the lower bound of the daemon's wording
    /// (`16 minutes ago` is 960; `About a minute ago`, 60).
    pub created_ago: Option<u64>,
    /// `STATUS` as printed.
    pub status: String,
    /// How long it has been up, in seconds, when it runs (`Up 10
    /// seconds`, with or without a health or `(Paused)` note).
    pub up_for: Option<u64>,
    /// The exit code of its last run while the daemon restarts it
    /// (`Restarting (1) 44 seconds ago`: its restart policy acting).
    pub restarting: Option<i64>,
    /// The exit code of its last run when it is stopped (`Exited (137) 2
    /// hours ago`).
    pub exited: Option<i64>,
}
