//! The inventory every report carries, whether anything failed or not: the
//! GPUs (index, model, memory, UUID, bus id), the processes on them, the
//! units with their PIDs, and the Xids per GPU. A read-only view built once
//! from the incident, so renderers never reach into `correlate`.

use std::collections::{BTreeMap, BTreeSet};

use crate::correlate::Incident;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Inventory {
    /// Sorted by index.
    pub gpus: Vec<InventoryGpu>,
    /// GPUs the inputs name only by PCI bus id (a kernel Xid line), sorted.
    pub gpu_bus_ids: Vec<String>,
    /// Processes on GPUs, sorted by GPU then PID.
    pub processes: Vec<InventoryProcess>,
    /// Sorted by name.
    pub units: Vec<InventoryUnit>,
    /// One entry per (code, GPU, bus id), sorted.
    pub xids: Vec<InventoryXid>,
    /// Every PID the inventory names: on a GPU, in a unit, in an Xid line,
    /// writing a server's log.
    pub pids: BTreeSet<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InventoryGpu {
    pub index: u32,
    pub name: Option<String>,
    pub used_mib: Option<u64>,
    pub total_mib: Option<u64>,
    pub uuid: Option<String>,
    pub bus_id: Option<String>,
    /// The Xid codes the kernel reported for this GPU, sorted, once each.
    pub xids: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InventoryProcess {
    pub pid: u32,
    pub name: String,
    pub used_mib: Option<u64>,
    /// `None` when the capture named no GPU (compute-apps without a UUID).
    pub gpu: Option<u32>,
    pub unit: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InventoryUnit {
    pub name: String,
    pub pids: Vec<u32>,
    /// `ActiveState` from `systemctl status`/`show`, when captured.
    pub active_state: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InventoryXid {
    pub code: u32,
    pub gpu: Option<u32>,
    pub bus_id: Option<String>,
    pub count: u32,
    /// The PIDs the Xid lines name, sorted.
    pub pids: Vec<u32>,
}

impl Inventory {
    pub fn of(incident: &Incident) -> Inventory {
        let mut inv = Inventory::default();
        // Xids first: each GPU lists its own.
        let mut xids: BTreeMap<(u32, Option<u32>, Option<String>), (u32, BTreeSet<u32>)> =
            BTreeMap::new();
        for (_, x) in incident.xids() {
            let gpu = x
                .bus_id
                .as_deref()
                .and_then(|b| incident.gpu_by_bus_id(b))
                .map(|g| g.index);
            let bus = if gpu.is_some() {
                None
            } else {
                x.bus_id.clone()
            };
            let entry = xids.entry((x.code, gpu, bus)).or_default();
            entry.0 += 1;
            entry.1.extend(x.pid);
        }
        for ((code, gpu, bus_id), (count, pids)) in xids {
            inv.pids.extend(&pids);
            if let Some(b) = &bus_id {
                if !inv.gpu_bus_ids.contains(b) {
                    inv.gpu_bus_ids.push(b.clone());
                }
            }
            inv.xids.push(InventoryXid {
                code,
                gpu,
                bus_id,
                count,
                pids: pids.into_iter().collect(),
            });
        }
        inv.gpu_bus_ids.sort();
        for g in &incident.gpus {
            let mut codes: Vec<u32> = inv
                .xids
                .iter()
                .filter(|x| x.gpu == Some(g.index))
                .map(|x| x.code)
                .collect();
            codes.dedup();
            inv.gpus.push(InventoryGpu {
                index: g.index,
                name: g.name.clone(),
                used_mib: g.memory_used_mib,
                total_mib: g.memory_total_mib,
                uuid: g.uuid.clone(),
                bus_id: g.bus_id.clone(),
                xids: codes,
            });
        }
        for p in &incident.gpu_processes {
            inv.pids.insert(p.pid);
            inv.processes.push(InventoryProcess {
                pid: p.pid,
                name: p.name.clone(),
                used_mib: p.used_mib,
                gpu: p.gpu,
                unit: incident.owner(p.pid).map(|o| o.unit.clone()),
            });
        }
        let mut units: BTreeMap<String, (BTreeSet<u32>, Option<String>)> = BTreeMap::new();
        for name in incident.units.keys() {
            units.entry(name.clone()).or_default();
        }
        for (pid, o) in &incident.owners {
            units.entry(o.unit.clone()).or_default().0.insert(*pid);
        }
        for s in &incident.facts.unit_statuses {
            let entry = units.entry(s.unit.clone()).or_default();
            entry.0.extend(s.main_pid);
            if s.active_state.is_some() {
                entry.1.clone_from(&s.active_state);
            }
        }
        for (name, (pids, active_state)) in units {
            inv.pids.extend(&pids);
            inv.units.push(InventoryUnit {
                name,
                pids: pids.into_iter().collect(),
                active_state,
            });
        }
        inv.pids.extend(
            incident
                .facts
                .server_events
                .iter()
                .filter_map(|e| e.pid)
                .filter(|p| *p > 1),
        );
        inv
    }

    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
            && self.gpu_bus_ids.is_empty()
            && self.processes.is_empty()
            && self.units.is_empty()
            && self.xids.is_empty()
            && self.pids.is_empty()
    }

    /// Every Xid code, once each, sorted.
    pub fn xid_codes(&self) -> Vec<u32> {
        let codes: BTreeSet<u32> = self.xids.iter().map(|x| x.code).collect();
        codes.into_iter().collect()
    }
}
