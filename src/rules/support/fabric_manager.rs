//! The Fabric Manager's unit as systemd reported its end, and why the
//! Fabric Manager is irrelevant on a host: shared by the three Fabric
//! Manager rules (`fabric-manager-mismatch`, `fabric-manager-no-nvswitch`,
//! `fabric-manager-start-failure`) and by `unit-exit-nonzero`, which gives
//! way to them.

use crate::correlate::Incident;
use crate::model::Message;
use crate::source::Span;

/// How systemd reported the end of `nvidia-fabricmanager.service`: the
/// systemd catalog's rows (catalogs/systemd.toml) for the unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricManagerUnitEnd {
    /// `Main process exited, code=<how>, …`: whether `how` is `exited`.
    MainExited { code: bool },
    /// `Control process exited, …` (its ExecStart of type forking, or the
    /// start script).
    ControlExited,
    /// `Failed with result '…'.`
    FailedWithResult,
    /// A start job's `Failed to start …`, naming the unit
    /// (`nvidia-fabricmanager.service - …`, systemd ≥ 249) or only its
    /// description (`NVIDIA fabric manager service`, ≤ 248).
    FailedToStart { by_unit: bool },
}

/// The Fabric Manager's unit's ends that PID 1 reported, in input order.
pub fn fabric_manager_unit_ends(
    incident: &Incident,
) -> impl Iterator<Item = (&Message, FabricManagerUnitEnd)> {
    const UNIT: &str = "nvidia-fabricmanager.service";
    incident.known.iter().filter_map(move |k| {
        let row = k.hit.row?;
        let of_unit = k.hit.get("unit") == Some(UNIT);
        let end = match row.id.as_str() {
            "systemd.main-process-exited" if of_unit => FabricManagerUnitEnd::MainExited {
                code: k.hit.get("how") == Some("exited"),
            },
            "systemd.control-process-exited" if of_unit => FabricManagerUnitEnd::ControlExited,
            // The wrapper that names each `systemd.result-*` row.
            _ if of_unit
                && matches!(k.hit.via, crate::catalogs::Via::Wrapper(w)
                    if w.id == "systemd.wrapper.failed-with-result") =>
            {
                FabricManagerUnitEnd::FailedWithResult
            }
            // Its first wording: `Failed to start <what>`.
            "systemd.job-failed" if matches!(k.hit.via, crate::catalogs::Via::Wording(0)) => {
                let what = k.hit.get("what")?;
                if what.starts_with("nvidia-fabricmanager") {
                    FabricManagerUnitEnd::FailedToStart { by_unit: true }
                } else if what.starts_with("NVIDIA fabric manager") {
                    FabricManagerUnitEnd::FailedToStart { by_unit: false }
                } else {
                    return None;
                }
            }
            _ => return None,
        };
        Some((&incident.facts.messages[k.message], end))
    })
}

/// Why the Fabric Manager is irrelevant on this host, when the inputs show
/// it: its own "nothing to do", or GPUs that are PCIe boards.
pub fn fabric_manager_irrelevant(incident: &Incident) -> Option<(Span, String)> {
    // Its own refusal to query the NVSwitch driver with NV_WARN_NOTHING_TO_DO
    // (catalogs/fabricmanager.toml), or the driver's status alone
    // (catalogs/kernel.toml).
    let nothing_to_do = incident
        .known("fabricmanager.nvswitch-query-failed")
        .filter(|(_, hit)| {
            hit.get("msg")
                .is_some_and(|msg| msg.contains("NV_WARN_NOTHING_TO_DO"))
        })
        .chain(incident.known("kernel.nvrm-warn-nothing-to-do"))
        .min_by_key(|(m, _)| m.span);
    if let Some((m, _)) = nothing_to_do {
        return Some((
            m.span,
            "the Fabric Manager found no NVSwitch to manage".to_owned(),
        ));
    }
    let pcie = |name: &str| {
        ["PCIe", "RTX", "L40", "L4", "A10", "A16", "T4", "A40"]
            .iter()
            .any(|m| name.contains(m))
    };
    let gpus = &incident.gpus;
    if gpus.is_empty() || !gpus.iter().all(|g| g.name.as_deref().is_some_and(pcie)) {
        return None;
    }
    let first = &gpus[0];
    Some((
        *first.spans.first()?,
        format!(
            "the GPUs are PCIe boards ({}), not NVSwitch-connected",
            first.name.as_deref().unwrap_or("")
        ),
    ))
}

/// Why the Fabric Manager did not start, as its own start-up lines say it
/// (catalogs/fabricmanager.toml), beyond its unit's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotStartedWhy {
    /// Its start-up check: a kernel module it needs (`ib_umad` on NVL5+)
    /// is not loaded.
    ModuleMissing { module: String },
    /// It could not configure every GPU and NVSwitch and exited.
    FabricNotConfigured,
    /// Its start script was called with an option it does not take
    /// (`Unknown option: X` over the script's usage).
    ScriptMisused { option: String },
    /// Its start script reports that the program it ran failed.
    ProgramFailed { command: String },
}

/// One line saying the Fabric Manager did not start, and why.
#[derive(Debug, Clone)]
pub struct NotStarted<'a> {
    pub message: &'a Message,
    /// The part of the line that says it (the row's match, or the start
    /// script's option error).
    pub matched: String,
    pub why: NotStartedWhy,
}

/// The start script's option error (`Unknown option: /usr/share/…`), the
/// line it prints just before its usage.
pub const UNKNOWN_OPTION: &str = "Unknown option: ";

/// The Fabric Manager's own lines that say it did not start, in input
/// order. The start script's usage counts only under its `Unknown option`
/// line; a program failure only where the Fabric Manager is not irrelevant
/// on the host (no NVSwitch: its failure harms nothing).
pub fn fabric_manager_not_started(incident: &Incident) -> Vec<NotStarted<'_>> {
    let mut out: Vec<NotStarted<'_>> = Vec::new();
    for (m, hit) in incident.known("fabricmanager.precheck-kernel-module-missing") {
        let module = hit.get("module").unwrap_or("a kernel module").to_owned();
        out.push(NotStarted {
            message: m,
            matched: hit.matched.trim().to_owned(),
            why: NotStartedWhy::ModuleMissing { module },
        });
    }
    for (m, hit) in incident.known("fabricmanager.fabric-nodes-not-configured") {
        out.push(NotStarted {
            message: m,
            matched: hit.matched.trim().to_owned(),
            why: NotStartedWhy::FabricNotConfigured,
        });
    }
    for (banner, _) in incident.known("fabricmanager.start-script-usage") {
        let before =
            incident.facts.messages.iter().find(|m| {
                m.span.source == banner.span.source && m.span.line + 1 == banner.span.line
            });
        if let Some(m) = before
            && let Some((_, option)) = m.text.split_once(UNKNOWN_OPTION)
        {
            out.push(NotStarted {
                message: m,
                matched: format!("{UNKNOWN_OPTION}{option}").trim().to_owned(),
                why: NotStartedWhy::ScriptMisused {
                    option: option.trim().to_owned(),
                },
            });
        }
    }
    if fabric_manager_irrelevant(incident).is_none() {
        for (m, hit) in incident.known("fabricmanager.start-script-program-failed") {
            let command = hit
                .get("command")
                .unwrap_or("the Fabric Manager")
                .to_owned();
            out.push(NotStarted {
                message: m,
                matched: hit.matched.trim().to_owned(),
                why: NotStartedWhy::ProgramFailed { command },
            });
        }
    }
    out.sort_by_key(|n| n.message.span);
    out
}

/// The start script's progress lines nearest before `at` in its input
/// (`Detected NVL5+ system`, a driver container's `Starting NVIDIA fabric
/// manager daemon for NVLink5+...`): what it was doing when it stopped.
pub fn fabric_manager_progress_before(incident: &Incident, at: Span) -> Option<&Message> {
    const PROGRESS: [&str; 3] = [
        "Detected NVL5+ system",
        "Detected Pre-NVL5 system",
        "Starting NVIDIA fabric manager daemon",
    ];
    incident
        .facts
        .messages
        .iter()
        .filter(|m| m.span.source == at.source && m.span < at && at.line - m.span.line <= 20)
        .filter(|m| PROGRESS.iter().any(|p| m.text.contains(p)))
        .max_by_key(|m| m.span)
}
