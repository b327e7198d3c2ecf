//! A job the shell stopped (Ctrl-Z: `[1]+  Stopped  mesa runserver`), the
//! same command typed again, and the new run failing on what the stopped
//! one holds: its port (a failed bind or listen) or its GPU memory. Ctrl-Z
//! suspends a program, it does not end it: the stopped process is a
//! leftover of the same server. Advice only: the shell's job number, not a
//! PID the inputs show, names it.

use super::META;
use crate::correlate::Incident;
use crate::model::{Message, TypedCommand};
use crate::rules::support::confidence;
use crate::rules::{Action, Category, Finding};
use crate::source::Span;

/// The shell's report of a stopped job (catalogs/supervisors.toml).
const ROW: &str = "supervisors.shell-job-stopped";

/// A traceback frame's code that binds or listens (`self.listen(self.port)`,
/// `self.socket.bind(self.server_address)`): the new run failing on its
/// port, even where the paste is cut before the exception's own line.
pub(super) const LISTENS: [&str; 2] = [".listen(", ".bind("];

/// What a stopped process holds that a new run of it needs.
const HELD: [Category; 3] = [
    Category::PortInUse,
    Category::CudaOom,
    Category::GpuMemoryHeldByOtherProcess,
];

/// The findings for the stopped jobs whose command was run again and failed.
pub(super) fn stopped_jobs(incident: &Incident) -> Vec<Finding> {
    let mut out = Vec::new();
    for (m, hit) in incident.known(ROW) {
        let Some(cmd) = hit.get("cmd") else {
            continue;
        };
        // The same command typed again after the stop, in the same input.
        let Some(again) = incident.facts.typed_commands.iter().find(|t| {
            t.span.source == m.span.source && t.span > m.span && same_command(&t.command, cmd)
        }) else {
            continue;
        };
        let Some(failed) = failure_after(incident, again.span) else {
            continue;
        };
        let pid = hit.get("pid").and_then(|p| p.parse::<u32>().ok());
        out.push(finding(m, hit.get("job"), pid, cmd, again, failed));
    }
    out
}

/// Two command lines alike but for the spaces between their words.
fn same_command(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

/// The first line after `after`, in its input, where the new run fails on
/// what the stopped one holds: a catalog row of a failed bind or of GPU
/// memory, or a traceback frame that binds or listens (the paste may be cut
/// before the exception).
fn failure_after(incident: &Incident, after: Span) -> Option<Span> {
    let here = |s: Span| s.source == after.source && s > after;
    let known = incident
        .known
        .iter()
        .filter(|k| {
            k.hit
                .row
                .and_then(|r| r.category)
                .is_some_and(|c| HELD.contains(&c))
        })
        .map(|k| incident.facts.messages[k.message].span)
        .filter(|s| here(*s))
        .min();
    let frame = incident
        .facts
        .messages
        .iter()
        .filter(|m| here(m.span) && LISTENS.iter().any(|l| m.text.contains(l)))
        .map(|m| m.span)
        .min();
    [known, frame].into_iter().flatten().min()
}

fn finding(
    stopped: &Message,
    job: Option<&str>,
    pid: Option<u32>,
    cmd: &str,
    again: &TypedCommand,
    failed: Span,
) -> Finding {
    let mut f = Finding::new(META.id, Category::StaleServingInstance, META.severity);
    let job_ref = job.map_or_else(|| "the stopped job".to_owned(), |j| format!("job [{j}]"));
    f.evidence_marked(
        stopped.span,
        format!("the shell stopped {job_ref} (`{cmd}`): suspended by Ctrl-Z, not ended"),
        "Stopped",
    );
    f.evidence(
        again.span,
        format!("`{cmd}` started again while {job_ref} was still stopped"),
    );
    f.evidence(
        failed,
        "the new run failed on what the stopped one holds (its port, its GPU memory)",
    );
    f.entities.pids.extend(pid);
    f.condition("the shell reports the job stopped, not done", true);
    f.condition("the same command was run again after the stop", true);
    f.condition(
        "the new run failed binding its port or taking GPU memory",
        true,
    );
    let printed = again
        .first_output
        .as_deref()
        .map(|o| format!(" (it printed `{}`)", o.trim()))
        .unwrap_or_default();
    f.title = format!("`{cmd}` run again while its earlier run is stopped (Ctrl-Z), not ended");
    f.headline = format!(
        "`{cmd}` was started again while {job_ref} of the same command was only stopped (Ctrl-Z suspends a program, it does not end it), and the new run failed{printed}: the stopped process still holds its port and any GPU memory it had."
    );
    f.chain.push(format!("the new `{cmd}` failed"));
    f.chain.push(format!(
        "{job_ref}, its earlier run, was suspended by Ctrl-Z and still holds what it had (its listening port, its GPU memory)"
    ));
    f.explanation = "Ctrl-Z sends SIGTSTP: the program stops where it is and keeps every socket, file and GPU context it has; the shell lists it as a stopped job until it is resumed or killed.".to_owned();
    let target = job.map_or_else(|| "%1".to_owned(), |j| format!("%{j}"));
    f.actions.push(Action::advice(
        format!("end {job_ref} in the shell that stopped it: resume it and quit it (`fg`, then Ctrl-C), or kill it (a stopped process acts on SIGTERM once continued); then start `{cmd}` once"),
        Some(&format!("jobs -l; kill {target}; kill -CONT {target}")),
    ));
    f.confidence = confidence(&f, 0.55, 0.8);
    f
}

#[cfg(test)]
mod tests {
    use crate::rules::Category;

    fn findings(text: &str) -> Vec<crate::rules::Finding> {
        crate::testing::findings_of(super::META.id, text)
    }

    /// https://github.com/mesa/mesa/issues/597 (real case batch-u/1294):
    /// the visualization server suspended with Ctrl-Z, the same command
    /// typed again, its listen failing (the paste is cut inside the
    /// traceback).
    const MESA: &str = "^Z\n\
        [1]+  Stopped                 mesa runserver\n\
        (venv_path) uos@uos-VirtualBox:~/model_path$ mesa runserver\n\
        Interface starting at http://127.0.0.1:8521\n\
        Traceback (most recent call last):\n  File \"/venv_path/bin/mesa\", line 8, in <module>\n    sys.exit(cli())\n\
        \x20 File \"/venv_path/lib/python3.8/site-packages/mesa/visualization/ModularVisualization.py\", line 333, in launch\n    self.listen(self.port)\n";

    #[test]
    fn a_stopped_job_run_again_holds_its_own_port() {
        let f = findings(MESA);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].category, Category::StaleServingInstance);
        assert!(f[0].headline.contains("8521"), "{}", f[0].headline);
        assert!(f[0].headline.contains("job [1]"), "{}", f[0].headline);
    }

    /// Another command after the stop, the same one that did not fail, or
    /// one that failed for a reason of its own (a REPL stopped and
    /// started again, then a TypeError, in a student's notes) is no
    /// collision.
    #[test]
    fn another_command_or_another_failure_is_none() {
        let other = MESA.replace("model_path$ mesa runserver", "model_path$ python other.py");
        assert!(findings(&other).is_empty());
        let fine = "[1]+  Stopped                 mesa runserver\n\
            (venv_path) uos@uos-VirtualBox:~/model_path$ mesa runserver\n\
            Interface starting at http://127.0.0.1:8521\n";
        assert!(findings(fine).is_empty());
        let repl = "[1]+  Stopped                 python3\n\
            zackary@Zackary-Ubuntu:~/Desktop/python_stack/python/fundamentals$ python3\n\
            Traceback (most recent call last):\n  File \"<stdin>\", line 1, in <module>\n\
            TypeError: can only concatenate str (not \"int\") to str\n";
        assert!(findings(repl).is_empty());
    }
}
