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

/// An Xid's code, its GPU's index, and its bus id when no index is known.
type XidKey = (u32, Option<u32>, Option<String>);

impl Inventory {
    pub fn of(incident: &Incident) -> Inventory {
        let mut inv = Inventory::default();
        // Xids first: each GPU lists its own.
        let mut xids: BTreeMap<XidKey, (u32, BTreeSet<u32>)> = BTreeMap::new();
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

#[cfg(test)]
mod tests {
    use crate::source::{Source, SourceMap};

    fn analysis(text: &str) -> crate::Analysis {
        let mut sources = SourceMap::default();
        sources.add(Source::new("paste", text.as_bytes()));
        crate::analyze(sources)
    }

    #[test]
    fn a_healthy_snapshot_still_has_its_inventory() {
        let a = analysis(
            "index, uuid, name, memory.used [MiB], memory.total [MiB]\n\
             4, GPU-bb3cdc90-8130-ed6c-9db3-d58a6f1c1ee5, NVIDIA A100-SXM4-40GB, 39399 MiB, 40960 MiB\n\
             \n\
             gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n\
             GPU-bb3cdc90-8130-ed6c-9db3-d58a6f1c1ee5, 93051, text-generation-launcher, 39399 MiB\n",
        );
        let report = a.report();
        assert!(report.findings().is_empty(), "{:?}", report.findings());
        let inv = &report.inventory;
        assert_eq!(inv.gpus.len(), 1);
        assert_eq!(inv.gpus[0].index, 4);
        assert_eq!(inv.gpus[0].total_mib, Some(40960));
        assert_eq!(inv.processes.len(), 1);
        assert_eq!(inv.processes[0].gpu, Some(4));
        assert!(inv.pids.contains(&93051));
        let json = super::super::json::render(&report);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let text = super::super::text::render(&report, Default::default());
        assert!(text.contains("\nInventory\n"), "{text}");
        assert!(
            text.contains("PID 93051 text-generation-launcher 39,399 MiB on GPU 4"),
            "{text}"
        );
        assert_eq!(v["inventory"]["pids"], serde_json::json!([93051]));
        assert_eq!(v["inventory"]["gpus"], serde_json::json!([4]));
    }

    #[test]
    fn units_list_their_pids_and_an_empty_input_has_none() {
        let a = analysis(
            "May 12 07:02:11 ct200 systemd[1]: Started ddtree-qwen.service - DDTree.\n\
             May 12 07:02:19 ct200 python3[20629]: [2026-05-12 07:02:19] server_args=ServerArgs(model_path='/m', tp_size=1, port=30000)\n",
        );
        let report = a.report();
        let unit = report
            .inventory
            .units
            .iter()
            .find(|u| u.name == "ddtree-qwen.service")
            .expect("unit listed");
        assert_eq!(unit.pids, vec![20629]);
        let empty = analysis("");
        assert!(empty.report().inventory.is_empty());
    }
}
