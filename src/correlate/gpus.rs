//! One view of the GPUs across every nvidia-smi capture: table rows and CSV
//! rows merged by index, compute-app rows mapped from UUID to index.

use std::collections::BTreeMap;

use crate::model::{BusId, Facts};
use crate::source::Span;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Gpu {
    pub index: u32,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub bus_id: Option<String>,
    pub memory_used_mib: Option<u64>,
    pub memory_total_mib: Option<u64>,
    /// The last `GPU-Util` the captures show (`59%`): a GPU that computes
    /// runs a live job, whoever's it is.
    pub utilization_pct: Option<u32>,
    /// The last `Compute M.` cell the tables show, as printed.
    pub compute_mode: Option<String>,
    /// The line that showed the last memory figures and compute mode.
    pub usage_span: Option<Span>,
    /// Every line that described this GPU.
    pub spans: Vec<Span>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GpuProcess {
    /// `None` when the capture named no GPU (compute-apps without a UUID).
    pub gpu: Option<u32>,
    pub pid: u32,
    pub name: String,
    pub name_truncated: bool,
    pub used_mib: Option<u64>,
    pub spans: Vec<Span>,
}

pub fn merge(facts: &Facts) -> (Vec<Gpu>, Vec<GpuProcess>) {
    let mut by_index: BTreeMap<u32, Gpu> = BTreeMap::new();
    // CSV rows without an index (a query that did not ask for it) join on
    // UUID or bus id once the indexed rows are known.
    let (indexed, unindexed): (Vec<_>, Vec<_>) = facts.gpus.iter().partition(|g| g.index.is_some());
    for r in indexed {
        let index = r.index.unwrap_or_default();
        let g = by_index.entry(index).or_insert_with(|| Gpu {
            index,
            ..Gpu::default()
        });
        fill(g, r);
    }
    for r in unindexed {
        let same = |g: &&mut Gpu| {
            (r.uuid.is_some() && g.uuid == r.uuid) || (r.bus_id.is_some() && g.bus_id == r.bus_id)
        };
        if let Some(g) = by_index.values_mut().find(same) {
            fill(g, r);
        }
    }
    let gpus: Vec<Gpu> = by_index.into_values().collect();

    let mut procs: BTreeMap<(Option<u32>, u32), GpuProcess> = BTreeMap::new();
    for p in &facts.gpu_processes {
        let gpu = p.gpu_index.or_else(|| {
            let uuid = p.gpu_uuid.as_ref()?;
            gpus.iter()
                .find(|g| g.uuid.as_ref() == Some(uuid))
                .map(|g| g.index)
        });
        let entry = procs.entry((gpu, p.pid)).or_insert_with(|| GpuProcess {
            gpu,
            pid: p.pid,
            name: p.name.clone(),
            name_truncated: p.name_truncated,
            used_mib: None,
            spans: Vec::new(),
        });
        // A table row cut at 100000 MiB has no value; the CSV row fills it.
        entry.used_mib = entry.used_mib.or(p.used_mib);
        // The CSV never truncates names either.
        if entry.name_truncated && !p.name_truncated && !p.name.starts_with('[') {
            entry.name = p.name.clone();
            entry.name_truncated = false;
        }
        entry.spans.push(p.span);
    }
    // A row that named no GPU (compute-apps queried without `gpu_uuid`) is
    // the same process as the PID's row on a known GPU when there is only
    // one such row.
    let unplaced: Vec<u32> = procs
        .keys()
        .filter(|(gpu, _)| gpu.is_none())
        .map(|(_, pid)| *pid)
        .collect();
    for pid in unplaced {
        let placed: Vec<(Option<u32>, u32)> = procs
            .keys()
            .filter(|(gpu, p)| gpu.is_some() && *p == pid)
            .copied()
            .collect();
        if let [key] = placed.as_slice() {
            if let Some(loose) = procs.remove(&(None, pid)) {
                let entry = procs.get_mut(key).expect("key listed above");
                entry.used_mib = entry.used_mib.or(loose.used_mib);
                if entry.name_truncated && !loose.name_truncated && !loose.name.starts_with('[') {
                    entry.name = loose.name;
                    entry.name_truncated = false;
                }
                entry.spans.extend(loose.spans);
            }
        }
    }
    (gpus, procs.into_values().collect())
}

fn fill(g: &mut Gpu, r: &crate::model::GpuRecord) {
    g.uuid = g.uuid.take().or_else(|| r.uuid.clone());
    if g.name.is_none() || r.name.is_some() && !r.name_truncated {
        g.name = r.name.clone().or(g.name.take());
    }
    g.bus_id = g.bus_id.take().or_else(|| r.bus_id.clone());
    g.memory_used_mib = g.memory_used_mib.or(r.memory_used_mib);
    g.memory_total_mib = g.memory_total_mib.or(r.memory_total_mib);
    g.utilization_pct = r.utilization_pct.or(g.utilization_pct);
    g.compute_mode = r.compute_mode.clone().or(g.compute_mode.take());
    g.usage_span = r.usage_span.or(g.usage_span);
    g.spans.extend(r.span);
}

/// A PCI address as numbers, so `00000000:3B:00.0`, `0000:3b:00.0` and the
/// kernel's function-less `0000:3b:00` compare equal (a GPU is function 0).
pub fn bus_key(bus_id: &str) -> Option<BusId> {
    BusId::parse(bus_id)
}
