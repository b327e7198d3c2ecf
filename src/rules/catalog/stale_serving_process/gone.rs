//! What shows an orphaned worker's server gone, beyond PPID 1: the
//! server's own exit in the inputs (uvicorn's `Finished server process
//! [N]`), or a command line run from a serving product's own environment
//! (`…/venvs/gpustack/bin/python`), whose worker has no business outliving
//! it. Either makes the orphan a failure rather than a curiosity.

use crate::correlate::{Incident, is_serving_stack};
use crate::model::{ServerEventKind, Uvicorn};
use crate::source::Span;

/// A model server's exit the inputs log: its PID and the line. Of several,
/// the one whose PID is closest below `orphan`'s (a server starts before
/// its workers), else the last.
pub(super) fn server_exit(incident: &Incident, orphan: u32) -> Option<(u32, Span)> {
    let exits = incident
        .facts
        .server_events
        .iter()
        .filter_map(|e| match e.kind {
            ServerEventKind::Uvicorn(Uvicorn::FinishedProcess { pid }) => Some((pid, e.span)),
            _ => None,
        });
    let below = exits
        .clone()
        .filter(|(pid, _)| *pid < orphan)
        .max_by_key(|(pid, span)| (*pid, std::cmp::Reverse(*span)));
    below.or_else(|| exits.clone().next_back())
}

/// The serving product whose environment `cmd`'s program runs from: a
/// path component of its first word (`/root/.local/pipx/venvs/gpustack/bin/python`
/// → `gpustack`). A bare `python3` or a project's own `.venv` names none.
pub(super) fn serving_env(cmd: &str) -> Option<&str> {
    let program = cmd.split_whitespace().next()?;
    let mut dirs: Vec<&str> = program.split('/').collect();
    dirs.pop();
    dirs.into_iter()
        .filter(|d| !d.is_empty() && !d.starts_with('.'))
        .find(|d| is_serving_stack(d) && !is_runtime(d))
}

/// A container runtime or orchestrator: serving stacks by
/// [`is_serving_stack`], but no path a model server's Python lives under.
fn is_runtime(dir: &str) -> bool {
    [
        "docker",
        "containerd",
        "kubelet",
        "crio",
        "podman",
        "k3s",
        "rke2",
    ]
    .iter()
    .any(|r| dir.to_ascii_lowercase().starts_with(r))
}

#[cfg(test)]
mod tests {
    use super::serving_env;
    use crate::rules::Severity;
    use crate::testing::findings_of;

    /// https://github.com/gpustack/gpustack/issues/204 (fixtures/real/697):
    /// `ps -ef` twice after GPUStack's uninstall on macOS.
    const UNINSTALLED: &str = "\
ps -ef | grep gpustack
    0  9525     1   0 Tue05PM ??         0:00.02 /Users/seal/.local/pipx/venvs/gpustack/bin/python -c from multiprocessing.resource_tracker import main;main(6)
    0  9526     1   0 Tue05PM ??        11:00.35 /Users/seal/.local/pipx/venvs/gpustack/bin/python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=7, pipe_handle=9) --multiprocessing-fork
  501 24836 24747   0 10:19AM ttys005    0:00.00 grep --color=auto --exclude-dir=.bzr --exclude-dir=CVS --exclude-dir=.git --exclude-dir=.hg --exclude-dir=.svn --exclude-dir=.idea --exclude-dir=.tox gpustack
(base)
ps -ef | grep gpustack
    0  9525     1   0 Tue05PM ??         0:00.02 /Users/seal/.local/pipx/venvs/gpustack/bin/python -c from multiprocessing.resource_tracker import main;main(6)
    0  9526     1   0 Tue05PM ??        11:04.78 /Users/seal/.local/pipx/venvs/gpustack/bin/python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=7, pipe_handle=9) --multiprocessing-fork
";

    /// https://github.com/vllm-project/vllm-omni/issues/2768
    /// (fixtures/real/664): the API server's exit, then its workers with
    /// PPID 1.
    const SERVER_EXITED: &str = "\
(APIServer pid=58847) INFO:     Application shutdown complete.
(APIServer pid=58847) INFO:     Finished server process [58847]

still remain processes:
root      59106      1  0 03:59 pts/1    00:00:00 /workspace/.venv/bin/python3 -c from multiprocessing.resource_tracker import main;main(45)
root      59370      1 99 03:59 pts/1    00:16:50 /workspace/.venv/bin/python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=46, pipe_handle=53) --multiproce
";

    #[test]
    fn orphans_from_a_serving_products_environment_are_an_error_listed_once() {
        let f = findings_of(super::super::META.id, UNINSTALLED);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        let pids: Vec<u32> = f[0].entities.pids.iter().copied().collect();
        assert_eq!(pids, vec![9525, 9526]);
        // Each PID once in the title, the later listing cited as such.
        assert_eq!(
            f[0].title,
            "leftover server workers PIDs 9525, 9526 (python multiprocessing)"
        );
        crate::testing::cites_line_saying(&f[0], 8, "listed again");
        // Variant: the same rows from a vLLM virtual environment.
        let vllm = UNINSTALLED.replace(
            "/Users/seal/.local/pipx/venvs/gpustack/bin/python",
            "/opt/vllm-venv/bin/python3",
        );
        let f = findings_of(super::super::META.id, &vllm);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        // A project's own environment, no GPU and no server's exit: the
        // orphans stay a warning.
        let own = UNINSTALLED.replace(
            "/Users/seal/.local/pipx/venvs/gpustack/bin/python",
            "/Users/seal/project/.venv/bin/python",
        );
        let f = findings_of(super::super::META.id, &own);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
    }

    #[test]
    fn orphans_after_their_servers_logged_exit_are_an_error() {
        let f = findings_of(super::super::META.id, SERVER_EXITED);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Error);
        assert!(f[0].entities.pids.contains(&59370));
        assert!(
            f[0].entities.pids.contains(&58847),
            "the server that exited: {:?}",
            f[0].entities
        );
        assert!(f[0].headline.contains("PID 58847"), "{}", f[0].headline);
        // Without the exit line the same rows stay a warning.
        let rows: String = SERVER_EXITED
            .lines()
            .skip(3)
            .map(|l| format!("{l}\n"))
            .collect();
        let f = findings_of(super::super::META.id, &rows);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Warning);
    }

    #[test]
    fn a_serving_products_environment_by_its_path() {
        // fixtures/real/697: `ps -ef` on macOS after GPUStack's uninstall.
        let real = "/Users/seal/.local/pipx/venvs/gpustack/bin/python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=7, pipe_handle=9) --multiprocessing-fork";
        assert_eq!(serving_env(real), Some("gpustack"));
        // Variant: the same worker from a vLLM virtual environment on Linux.
        let variant = "/opt/vllm-env/bin/python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=46, pipe_handle=53) --multiprocessing-fork";
        assert_eq!(serving_env(variant), Some("vllm-env"));
        // fixtures/real/664: a project's own `.venv` names no product.
        let project =
            "/workspace/.venv/bin/python3 -c from multiprocessing.spawn import spawn_main";
        assert_eq!(serving_env(project), None);
        assert_eq!(serving_env("python3 -c from multiprocessing.spawn"), None);
        // An argument naming a product is no environment.
        assert_eq!(serving_env("/usr/bin/python3 /opt/gpustack/x.py"), None);
        // A container runtime's path is no serving product's environment.
        assert_eq!(
            serving_env("/var/lib/docker/overlay2/x/usr/bin/python3 -c"),
            None
        );
    }
}
