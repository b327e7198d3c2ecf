//! Whether a unit's failure is part of GPU serving. rootcause diagnoses
//! model servers on GPU hosts; a host's other units (a storage daemon, a
//! cloud agent) fail too, and their failures are real, but on a host whose
//! inputs show no GPU and no model server, nothing ties them to what
//! rootcause is for. Such a finding stays in the report, as a warning,
//! with the condition that says why.

use crate::correlate::{Incident, is_gpu_software, is_serving, is_serving_stack};
use crate::model::{Framework, KernelEventKind, ServerEventKind};
use crate::rules::{Category, Finding, Severity};

/// What a unit finding says when nothing ties it to GPU serving.
pub const UNRELATED: &str = "nothing in the inputs shows a GPU or a model server, and nothing ties the unit to one (its name, its processes, its lines): a host failure outside GPU serving";

/// Lowers `f` to a warning when it is about units, none of its units is
/// part of a serving stack, the inputs show no GPU and no model server at
/// all, and they are not about that unit alone (a paste of one unit's
/// status or journal and nothing else asks about that unit: its failure
/// is the answer, whatever the unit runs).
pub fn mark_unrelated_units(incident: &Incident, f: &mut Finding) {
    let about_units = matches!(
        f.category,
        Category::UnitCrashLoop
            | Category::UnitExitedZeroNoRestart
            | Category::StaleServingInstance
            | Category::ServerException
            | Category::ServerHang
            | Category::Unknown
    );
    if !about_units
        || f.severity > Severity::Error
        || f.entities.units.is_empty()
        || !f.entities.gpus.is_empty()
        || !f.entities.gpu_bus_ids.is_empty()
        || !f.entities.xid.is_empty()
        || f.entities.units.iter().any(|u| serves_gpus(incident, u))
        || shows_gpu_serving(incident)
        || about_one_unit(incident, f)
    {
        return;
    }
    f.condition(UNRELATED, true);
    f.severity = Severity::Warning;
}

/// Whether every unit the inputs name is the finding's one unit: the
/// paste is that unit's `systemctl status` or journal alone. The
/// instances of one template (`x@a.service`, `x@b.service`) are one unit
/// here: one unit file; so are a service and the socket, timer or path
/// unit of its name that starts it (`x.socket` triggers `x.service`).
fn about_one_unit(incident: &Incident, f: &Finding) -> bool {
    fn template(u: &str) -> &str {
        let u = u.split_once('@').map_or(u, |(t, _)| t);
        [".service", ".socket", ".timer", ".path"]
            .iter()
            .find_map(|kind| u.strip_suffix(kind))
            .unwrap_or(u)
    }
    let mine: std::collections::BTreeSet<&str> =
        f.entities.units.iter().map(|u| template(u)).collect();
    // Every unit the inputs name: PID 1's, the journal's (a line systemd
    // wrote about a unit it has no other event of), the owners' and the
    // status blocks'.
    let mut named = incident
        .units
        .keys()
        .chain(incident.unit_lines.values())
        .chain(incident.owners.values().map(|o| &o.unit))
        .chain(incident.facts.unit_statuses.iter().map(|s| &s.unit))
        .peekable();
    mine.len() == 1 && named.peek().is_some() && named.all(|u| mine.contains(template(u)))
}

/// Whether `unit` is part of a GPU serving stack by its name (any dotted
/// part: `snap.llama-cpp.llama-server.service`), or by the names and
/// command lines of the processes tied to it.
pub fn serves_gpus(incident: &Incident, unit: &str) -> bool {
    let name = unit
        .strip_suffix(".service")
        .or_else(|| unit.strip_suffix(".scope"))
        .unwrap_or(unit);
    if name
        .split(['.', '@'])
        .any(|part| is_serving_stack(part) || is_serving(part, None))
    {
        return true;
    }
    let pids = incident.unit_pids.get(unit);
    let own = |pid: u32| pids.is_some_and(|p| p.contains(&pid));
    incident
        .facts
        .journal
        .iter()
        .any(|j| j.unit.as_deref() == Some(unit) && is_serving_stack(&j.identifier))
        || incident
            .facts
            .ps
            .iter()
            .any(|r| own(r.pid) && is_serving(&r.cmd, r.ppid))
        || incident
            .facts
            .unit_statuses
            .iter()
            .filter(|s| s.unit == unit)
            .flat_map(|s| &s.cgroup)
            .any(|m| is_serving(&m.cmdline, None))
}

/// Whether the inputs show a GPU or a model server anywhere: a GPU or a GPU
/// process, an NVIDIA kernel line, a line of a serving framework or about
/// CUDA, NCCL or PyTorch's distributed runtime, a catalog row of GPU or
/// serving software (its `gpu` mark: the kernel's NVRM, Xid, NVLink and GSP
/// rows, and whole catalogs such as CUDA's, NCCL's and the serving
/// stacks'; not a container runtime's or Kubernetes'), a serving process,
/// or GPU software's own lines.
pub fn shows_gpu_serving(incident: &Incident) -> bool {
    !incident.gpus.is_empty()
        || !incident.gpu_processes.is_empty()
        || incident.facts.kernel_events.iter().any(|e| {
            matches!(
                e.kind,
                KernelEventKind::Xid(_) | KernelEventKind::FellOffBus { .. }
            )
        })
        || incident.facts.server_events.iter().any(|e| {
            e.framework != Framework::Unknown
                || matches!(
                    e.kind,
                    ServerEventKind::CudaOom(_)
                        | ServerEventKind::Nccl(_)
                        | ServerEventKind::TorchDist(_)
                        | ServerEventKind::VllmFailure(_)
                        | ServerEventKind::MemoryImbalance(_)
                )
        })
        || incident
            .known
            .iter()
            .any(|k| k.hit.row.is_some_and(|r| r.gpu))
        || incident.facts.ps.iter().any(|r| is_serving(&r.cmd, r.ppid))
        || incident
            .facts
            .journal
            .iter()
            .any(|j| is_gpu_software(&j.identifier))
}

#[cfg(test)]
mod tests {
    use crate::catalogs::catalogs;

    /// Whether a kernel row is the NVIDIA driver's by what it prints: a
    /// wording or sample that names NVRM, an Xid, NVLink or GSP, or a code
    /// of one of its tables (the Xids, NV_STATUS), which its wrappers print.
    fn printed_by_the_driver(
        catalog: &crate::catalogs::Catalog,
        row: &crate::catalogs::Row,
    ) -> bool {
        const WORDS: [&str; 6] = ["nvrm", "nvidia", "xid", "nvlink", "gsp", "sxid"];
        let says = |text: &str| {
            let lower = text.to_ascii_lowercase();
            WORDS.iter().any(|w| lower.contains(w))
        };
        row.wordings.iter().any(|w| says(&w.pattern))
            || row.samples.iter().any(|s| says(&s.line))
            || catalog
                .wrappers
                .iter()
                .any(|w| w.rows.as_deref().is_some_and(|p| row.id.starts_with(p)))
    }

    #[test]
    fn every_kernel_row_of_the_nvidia_driver_and_only_those_is_marked_gpu() {
        let kernel = catalogs()
            .list
            .iter()
            .find(|c| c.id == "kernel")
            .expect("the kernel catalog");
        let wrong: Vec<String> = kernel
            .rows
            .iter()
            .filter(|r| r.gpu != printed_by_the_driver(kernel, r))
            .map(|r| format!("{} (gpu = {})", r.id, r.gpu))
            .collect();
        assert!(
            wrong.is_empty(),
            "kernel rows whose `gpu` mark is wrong: {wrong:?}"
        );
        assert!(kernel.rows.iter().any(|r| r.gpu) && kernel.rows.iter().any(|r| !r.gpu));
    }

    #[test]
    fn gpu_catalogs_are_marked_whole_and_host_ones_are_not() {
        for c in &catalogs().list {
            let all = c.rows.iter().all(|r| r.gpu);
            let none = c.rows.iter().all(|r| !r.gpu);
            match c.id.as_str() {
                // Mixed: the kernel's NVRM rows and its OOM killer's; the
                // symptom classes of the GPU and of the host; DKMS's GPU
                // module builds and any module's.
                "kernel" | "symptoms" | "dkms" => {}
                "systemd" | "stacks-containers" | "stacks-k8s" | "stacks-slurm" | "oom-daemons"
                | "windows" | "supervisors" | "stacks-celery" | "rust" | "web-servers" => {
                    assert!(none, "{}: a host catalog's row is marked gpu", c.id)
                }
                _ => assert!(
                    all,
                    "{}: a GPU serving catalog's row is not marked gpu",
                    c.id
                ),
            }
        }
    }
}
