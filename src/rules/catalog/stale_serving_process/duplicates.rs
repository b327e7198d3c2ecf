//! Several copies of one serving command on one GPU, each holding memory:
//! all but one are left over from earlier runs.

use std::collections::{BTreeMap, BTreeSet};

use super::{META, first_word};
use crate::correlate::{GpuProcess, Incident, is_serving};
use crate::rules::support::{confidence, mib};
use crate::rules::{Action, Finding, Severity};

/// Memory a copy of a server must hold to count: a loaded model, not a
/// process that only opened a context.
const LOADED_MIB: u64 = 1024;

/// A command line as a viewer cut it on the left (`..../bin/ollama runner
/// --model /h`, `.../bin/ollama runner …`): from its program's base name on.
fn same_command(cmd: &str) -> &str {
    let cmd = cmd.trim();
    let first_end = cmd.find(char::is_whitespace).unwrap_or(cmd.len());
    let base = cmd[..first_end].rfind('/').map_or(0, |i| i + 1);
    &cmd[base..]
}

/// Several copies of one serving command on one GPU, each holding memory
/// (nvtop's or `--query-compute-apps`' rows with full command lines): one
/// server runs one of them; the others are left over from earlier runs (a
/// benchmark that started its own server and never stopped its runners, a
/// restart that did not end the old instance). Which one is current the
/// rows do not say; start times do (`ps -o lstart,etimes`), so the finding
/// is an inference that names the command that settles it, and scripts no
/// signal.
pub(super) fn duplicates(incident: &Incident, named: &BTreeSet<u32>) -> Vec<Finding> {
    let mut groups: BTreeMap<(u32, &str), Vec<&GpuProcess>> = BTreeMap::new();
    for g in &incident.gpu_processes {
        let (Some(gpu), Some(used)) = (g.gpu, g.used_mib) else {
            continue;
        };
        // A bare executable name (nvidia-smi's table) says nothing of the
        // arguments: two models served by one program look alike there.
        if used < LOADED_MIB || named.contains(&g.pid) || !is_serving(&g.name, None) {
            continue;
        }
        groups
            .entry((gpu, same_command(&g.name)))
            .or_default()
            .push(g);
    }
    let mut out = Vec::new();
    for ((gpu, cmd), copies) in groups {
        if copies.len() < 2 {
            continue;
        }
        out.push(finding(incident, gpu, cmd, &copies, None));
    }
    out.extend(backend_copies(incident, named));
    out
}

/// Serving products that run one backend process per loaded model, by a
/// mark of their backends' command lines: LocalAI's gRPC backends
/// (`…/backend-assets/grpc/llama-cpp-avx2`, its Python backends under
/// `backend/python/`).
const ONE_BACKEND_PER_MODEL: &[(&str, &str)] = &[
    ("backend-assets/grpc/", "LocalAI"),
    ("backend/python/", "LocalAI"),
];

/// The product whose backend runs on `gpu`, and that backend's row.
fn backend_product(incident: &Incident, gpu: u32) -> Option<(&'static str, &GpuProcess)> {
    incident.gpu_processes.iter().find_map(|g| {
        let (_, product) = ONE_BACKEND_PER_MODEL
            .iter()
            .find(|(mark, _)| g.gpu == Some(gpu) && g.name.contains(mark))?;
        Some((*product, g))
    })
}

/// Rows a process table names by the executable alone (`python`), on a GPU
/// where a product that runs one backend per loaded model runs a backend:
/// two or more of one name holding exactly the same memory, a model's
/// worth, are the same model's backend loaded again, and all but one are
/// left over (mudler/LocalAI#2866: backends its watchdog no longer tracks
/// keep their memory). A bare name alone, elsewhere, may be a healthy
/// server's workers (one model per worker), and is not read.
fn backend_copies(incident: &Incident, named: &BTreeSet<u32>) -> Vec<Finding> {
    let mut groups: BTreeMap<(u32, &str, u64), Vec<&GpuProcess>> = BTreeMap::new();
    for g in &incident.gpu_processes {
        let (Some(gpu), Some(used)) = (g.gpu, g.used_mib) else {
            continue;
        };
        if used < LOADED_MIB || named.contains(&g.pid) || is_serving(&g.name, None) {
            continue;
        }
        groups
            .entry((gpu, same_command(&g.name), used))
            .or_default()
            .push(g);
    }
    let mut out = Vec::new();
    for ((gpu, cmd, used), copies) in groups {
        if copies.len() < 2 {
            continue;
        }
        let Some((product, backend)) = backend_product(incident, gpu) else {
            continue;
        };
        let why = format!(
            "each holds exactly {used}MiB, beside {product}'s backend `{}` (PID {}): {product} runs one backend process per loaded model, so identical ones are the same model loaded again",
            backend.name, backend.pid
        );
        out.push(finding(incident, gpu, cmd, &copies, Some(why)));
    }
    out
}

/// The finding for the copies of one command on one GPU.
fn finding(
    incident: &Incident,
    gpu: u32,
    cmd: &str,
    copies: &[&GpuProcess],
    why: Option<String>,
) -> Finding {
    // The rest of the GPU: the job that has to share it.
    let others: Vec<&GpuProcess> = incident
        .gpu_processes
        .iter()
        .filter(|o| o.gpu == Some(gpu) && !copies.iter().any(|c| c.pid == o.pid))
        .collect();
    // With other work on the GPU the copies take its memory: an error.
    // Alone they may be a server's own (two models of one program).
    let severity = if others.is_empty() {
        Severity::Warning
    } else {
        META.severity
    };
    let mut f = Finding::new(META.id, META.category, severity);
    f.entities.gpus.insert(gpu);
    let held: u64 = copies.iter().filter_map(|g| g.used_mib).sum();
    let pids: Vec<String> = copies.iter().map(|g| g.pid.to_string()).collect();
    for g in copies {
        f.entities.pids.insert(g.pid);
        if let Some(span) = g.spans.first() {
            f.evidence(
                *span,
                format!(
                    "PID {} `{cmd}` holds {} on GPU {gpu}",
                    g.pid,
                    mib(g.used_mib)
                ),
            );
        }
    }
    for o in others.iter().take(3) {
        f.entities.pids.insert(o.pid);
        if let Some(span) = o.spans.first() {
            f.evidence(
                *span,
                format!("PID {} on the same GPU holds {}", o.pid, mib(o.used_mib)),
            );
        }
    }
    let program = first_word(cmd);
    f.condition(
        format!(
            "{} copies of one serving command hold memory on GPU {gpu}",
            copies.len()
        ),
        true,
    );
    match &why {
        None => {
            f.condition(
                "the rows show the whole command lines (not cut by the viewer)",
                !copies.iter().any(|g| g.name_truncated),
            );
        }
        Some(why) => {
            f.condition(why.clone(), true);
        }
    }
    f.condition(
        "start times or parents tell the current copy from the leftovers (missing: ps -o pid,ppid,lstart,etimes,cmd)",
        false,
    );
    f.title = format!(
        "{} copies of `{program}` on GPU {gpu} (PIDs {}): leftovers of earlier runs",
        copies.len(),
        pids.join(", ")
    );
    f.headline = headline(gpu, cmd, copies.len(), &pids, held, why.as_deref());
    if !others.is_empty() {
        f.chain.push(format!(
            "the other work on GPU {gpu} gets only what the copies leave"
        ));
    }
    f.chain.push(format!(
        "{} copies of one `{program}` command hold {} on GPU {gpu}",
        copies.len(),
        mib(Some(held))
    ));
    f.chain
        .push("all but one of them outlived the runs that started them".to_owned());
    f.explanation = "A model server (or its runner) loads a model once per command line; identical copies on one GPU, each with a model's worth of memory, are earlier instances that nothing stopped. Whatever runs next on the GPU gets only what they leave, and may fall back to the CPU or fail to start.".to_owned();
    push_actions(&mut f, &pids);
    f.confidence = confidence(&f, 0.4, 0.7);
    f
}

/// The headline: why the copies are leftovers, with the reason identical
/// bare-named rows are copies (`why`) where they are.
fn headline(
    gpu: u32,
    cmd: &str,
    n: usize,
    pids: &[String],
    held: u64,
    why: Option<&str>,
) -> String {
    match why {
        None => format!(
            "GPU {gpu} holds {} copies of the same serving command `{cmd}` (PIDs {}), {} between them: a server runs one copy of each, so the others are most likely left over from earlier runs and keep their memory (inferred: the rows do not show which copy is current).",
            n,
            pids.join(", "),
            mib(Some(held))
        ),
        Some(why) => format!(
            "GPU {gpu} holds {} `{cmd}` processes (PIDs {}), {} between them; {why}: all but one are most likely left over and keep their memory (inferred: the rows do not show which copy is current).",
            n,
            pids.join(", "),
            mib(Some(held))
        ),
    }
}

/// The steps: tell the current copy from the leftovers, stop those, make
/// the starter stop what it starts.
fn push_actions(f: &mut Finding, pids: &[String]) {
    f.actions.push(Action::advice(
        "tell the current copy from the leftovers by their start times and parents",
        Some(&format!(
            "ps -o pid,ppid,user,lstart,etimes,cmd -p {}",
            pids.join(",")
        )),
    ));
    f.actions.push(Action::advice(
        "stop the leftover copies (not the one the current server uses), then check that their memory is freed",
        Some(crate::rules::support::COMPUTE_APPS),
    ));
    f.actions.push(Action::advice(
        "make whatever starts the server stop it and its children when it is done (a test harness, a script, a unit with KillMode=control-group)",
        None,
    ));
}

#[cfg(test)]
mod tests {
    use super::same_command;
    use crate::correlate::is_serving;

    #[test]
    fn copies_cut_differently_on_the_left_are_one_command() {
        // nvtop's rows in https://github.com/phoronix-test-suite/openbenchmarking/issues/77
        let a = "..../bin/ollama runner --ollama-engine --model /h";
        let b = ".../bin/ollama runner --ollama-engine --model /h";
        assert_eq!(same_command(a), same_command(b));
        assert_eq!(same_command(a), "ollama runner --ollama-engine --model /h");
        assert!(is_serving(a, None));
        // The job the row's author cut is no serving command: not a copy.
        assert!(!is_serving("...snip....", None));
        // nvidia-smi's table names the executable only: two models served
        // by one program look alike there, so a bare name is no copy.
        assert!(!is_serving("/usr/local/bin/ollama", None));
    }
}
