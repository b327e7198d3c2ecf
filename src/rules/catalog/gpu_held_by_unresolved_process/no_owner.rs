//! A GPU viewer's row with memory in use and no owner: nvtop prints `N/A`
//! for the command (and the user) of a PID it cannot read, a process that
//! is gone from this PID namespace (`kill` answers "No such process") while
//! the driver still accounts its memory. The memory is held by whoever
//! still has the GPU's context: `fuser -v /dev/nvidiaN` in the same paste
//! names them, the processes that map the GPU's device node (`F...m`) and
//! are not the desktop or a monitor (Xorg, gnome-shell, nvtop itself):
//! the dead run's children that outlived their parent. Advice only.

use std::collections::BTreeSet;

use super::{META, name_holder};
use crate::correlate::{GpuProcess, Incident};
use crate::model::DeviceHolder;
use crate::rules::support::{COMPUTE_APPS, confidence};
use crate::rules::{Action, Finding, Severity};

/// What nvtop prints for a process it cannot read.
const NO_NAME: &str = "N/A";

/// Programs that open every GPU's node without being a job: the display
/// server, desktop shells and compositors, and the GPU viewers.
const DESKTOP: &[&str] = &[
    "Xorg",
    "X",
    "Xwayland",
    "gnome-shell",
    "kwin_x11",
    "kwin_wayland",
    "plasmashell",
    "cinnamon",
    "compiz",
    "nvtop",
    "nvitop",
    "nvidia-smi",
    "nvidia-persistenced",
    "gpustat",
];

fn is_desktop(command: &str) -> bool {
    let first = command.split_whitespace().next().unwrap_or(command);
    let base = first.rsplit('/').next().unwrap_or(first);
    DESKTOP.contains(&base)
}

/// The finding for the ownerless rows, with fuser's likely holders.
pub(super) fn finding(incident: &Incident) -> Option<Finding> {
    let rows: Vec<&GpuProcess> = incident
        .gpu_processes
        .iter()
        .filter(|p| p.name.trim() == NO_NAME && p.used_mib.is_some_and(|m| m > 0))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let gpus: BTreeSet<u32> = rows.iter().filter_map(|p| p.gpu).collect();
    let holders = holders(incident, &rows, &gpus);
    // nvtop also prints `N/A` for live processes it cannot read (another
    // container's; the open kernel modules at low load, Syllo/nvtop#364):
    // alone the row is a warning, with fuser's holders an error.
    let severity = if holders.is_empty() {
        Severity::Warning
    } else {
        META.severity
    };
    let mut f = Finding::new(META.id, META.category, severity);
    let mut parts = Vec::new();
    for p in &rows {
        let on = name_holder(&mut f, p);
        // The figure as the row prints it, for a search.
        let printed = p.used_mib.map_or(String::new(), |m| format!("{m}MB"));
        parts.push(format!("PID {} ({printed}{on})", p.pid));
        if let Some(span) = p.spans.first() {
            f.evidence(
                *span,
                format!(
                    "PID {} holds {printed}{on}, but the viewer shows no user and no command for it (`{NO_NAME}`): a process it cannot read",
                    p.pid
                ),
            );
        }
    }
    for h in &holders {
        f.entities.pids.insert(h.pid);
        f.evidence(
            h.span,
            format!(
                "PID {} ({}, user {}) has {} mapped (`{}`): a likely holder",
                h.pid, h.command, h.user, h.file, h.access
            ),
        );
    }
    f.condition(
        "a GPU viewer accounts memory to a process whose user and command it cannot read",
        true,
    );
    f.condition(
        "fuser names processes, other than the desktop and the viewers, that map the GPU's device node",
        !holders.is_empty(),
    );
    f.condition(
        "their parent is gone (missing: ps -o pid,ppid,stat,lstart,args -p PIDS)",
        false,
    );
    let gpu_list: Vec<String> = gpus.iter().map(|g| format!("GPU {g}")).collect();
    f.title = format!(
        "{} memory held by a process the viewer cannot read",
        gpu_list.join(", ")
    );
    let names: Vec<String> = holders
        .iter()
        .map(|h| format!("{} ({})", h.pid, h.command))
        .collect();
    f.headline = if holders.is_empty() {
        format!(
            "{} hold{} GPU memory with no user and no command (`{NO_NAME}`): a process gone from this PID namespace whose memory the driver still accounts, held by whoever still has its CUDA context (its children, or a process in another container); `fuser -v /dev/nvidia*` names them.",
            parts.join(", "),
            if rows.len() == 1 { "s" } else { "" }
        )
    } else {
        format!(
            "{} hold{} GPU memory with no user and no command (`{NO_NAME}`): the process is gone, and {} process(es) still map the GPU's device node (PIDs {}): most likely children of the dead run that outlived their parent and keep its memory; end them, not the PID the viewer shows.",
            parts.join(", "),
            if rows.len() == 1 { "s" } else { "" },
            holders.len(),
            names.join(", ")
        )
    };
    f.chain
        .push(format!("{} memory is not free", gpu_list.join(", ")));
    f.chain.push(
        "the process the viewer names is gone; processes that still map the GPU hold its memory"
            .to_owned(),
    );
    f.explanation = "nvtop prints `N/A` for the user and command of a PID it cannot read: the process exited (or lives in another PID namespace) while the driver still accounts memory to its context. A CUDA context is released when every process that shares it has exited, so children of the run (data-loader or multiprocessing workers) that outlived their parent keep it; fuser on the GPU's device node lists them beside the desktop (Xorg, the compositor) and the viewer, which open every GPU.".to_owned();
    push_actions(&mut f, &holders);
    f.confidence = confidence(&f, 0.45, 0.8);
    Some(f)
}

/// The steps: check the processes that map the GPU, end those of the dead
/// run.
fn push_actions(f: &mut Finding, holders: &[&DeviceHolder]) {
    let pids: Vec<String> = holders.iter().map(|h| h.pid.to_string()).collect();
    f.actions.push(Action::advice(
        "check the processes that map the GPU: their parent (1 when orphaned), state and start time",
        Some(&if pids.is_empty() {
            "fuser -v /dev/nvidia*".to_owned()
        } else {
            format!("ps -o pid,ppid,stat,lstart,args -p {}", pids.join(","))
        }),
    ));
    f.actions.push(Action::advice(
        "end those of the dead run (not the desktop, not the PID the viewer shows: it no longer exists), then check that the memory is freed",
        Some(COMPUTE_APPS),
    ));
}

/// fuser's rows on `gpus`' nodes that map the device, one per PID, not the
/// desktop's nor a viewer's, and not the ownerless PIDs themselves.
fn holders<'a>(
    incident: &'a Incident,
    rows: &[&GpuProcess],
    gpus: &BTreeSet<u32>,
) -> Vec<&'a DeviceHolder> {
    // fuser's rows on those GPUs' nodes that map the device, by PID, not
    // the desktop's nor a viewer's, and not the ownerless PIDs themselves.
    let mut holders: Vec<&'a DeviceHolder> = Vec::new();
    for h in &incident.facts.device_holders {
        let on_gpu = h.gpu.is_some_and(|g| gpus.contains(&g));
        let mapped = h.access.ends_with('m');
        let listed = rows.iter().any(|r| r.pid == h.pid);
        if on_gpu
            && mapped
            && !listed
            && !is_desktop(&h.command)
            && !holders.iter().any(|x| x.pid == h.pid)
        {
            holders.push(h);
        }
    }
    holders
}
