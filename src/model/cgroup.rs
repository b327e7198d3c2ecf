//! `/proc/PID/cgroup`: which cgroup, and so which unit, container, pod or
//! login session, a process belongs to.

use crate::source::Span;

/// Who a cgroup path belongs to (docs/formats/procfs.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupOwner {
    /// A system unit: `/system.slice/sglang.service` (also below it, with
    /// `Delegate=yes`), `run-u12.service`, a `.scope` that is not a container.
    SystemUnit(String),
    /// A unit of a user's manager: `/user.slice/user-1000.slice/user@1000.service/app.slice/x.service`.
    UserUnit {
        uid: Option<u32>,
        unit: String,
    },
    /// A login session: `/user.slice/user-1000.slice/session-3.scope` (a
    /// shell, tmux, nohup).
    Session {
        uid: Option<u32>,
        scope: String,
    },
    /// `docker-<id>.scope`, `/docker/<id>`, `libpod-<id>.scope`.
    Container {
        runtime: String,
        id: String,
    },
    /// A Kubernetes pod's container (systemd or cgroupfs driver).
    KubernetesPod {
        /// With dashes, as `kubectl` prints it.
        pod_uid: String,
        qos: Option<String>,
        container_id: Option<String>,
    },
    /// `/init.scope`: PID 1.
    Init,
    /// `/`: read inside a container's cgroup namespace, where the owner is
    /// not visible.
    NamespaceRoot,
    Unknown,
}

/// The cgroup of one process, from the most telling line of its
/// `/proc/PID/cgroup` (the unified `0::` line, or v1's `name=systemd`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcCgroup {
    /// `None` when the capture did not say whose file it was
    /// (`cat /proc/self/cgroup`, lines without a prompt).
    pub pid: Option<u32>,
    pub path: String,
    pub owner: CgroupOwner,
    pub span: Span,
}
