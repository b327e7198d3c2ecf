//! The inventory every report carries, whether anything failed or not: the
//! GPUs (index, model, memory, UUID, bus id), the processes on them, the
//! units with their PIDs, the server processes the logs name, the
//! containers `docker inspect` shows, and the Xids per GPU. A read-only view built once
//! from the incident, so renderers never reach into `correlate`.

use std::collections::{BTreeMap, BTreeSet};

use crate::correlate::Incident;
use crate::model::{ContainerState, ServerEventKind, Uvicorn};
use crate::source::Span;

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
    /// Model-server processes the inputs name off the GPU tables: a `ps`
    /// row running a server, a unit's `MainPID=`, uvicorn's `Started server
    /// process [N]`, a shell's `N Killed …` report; sorted by PID.
    pub servers: Vec<InventoryServer>,
    /// Every PID the inventory names: on a GPU, in a unit, in an Xid line,
    /// writing a server's log, holding a listening socket, in `servers`, a
    /// running container's.
    pub pids: BTreeSet<u32>,
    /// The containers `docker inspect` shows, in input order.
    pub containers: Vec<InventoryContainer>,
}

/// One container as `docker inspect` records it: what a reader needs to
/// know whether it runs, and if not how it ended, each as printed.
#[derive(Debug, Clone, PartialEq)]
pub struct InventoryContainer {
    /// `Name` without its `/`, else the ID's first 12 characters (as
    /// `docker ps` shows it), else `None` (a State object alone).
    pub name: Option<String>,
    pub status: Option<String>,
    /// The host PID of its init, while it runs.
    pub pid: Option<u32>,
    /// When it is not running: how it ended.
    pub exit_code: Option<i64>,
    pub oom_killed: bool,
    pub dead: bool,
    pub error: Option<String>,
    /// RFC 3339 as printed; `None` for Docker's zero time (never).
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// Its object's first line, cited.
    pub span: Span,
    /// The server it runs as its init, where another format names it: a
    /// server's own line written by PID 1 (`Started server process [1]`)
    /// beside the only container of the inputs, or a server process whose
    /// PID is the container's. Listed here, not again under `servers`.
    pub server: Option<InventoryServer>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InventoryServer {
    pub pid: u32,
    /// The command line when one is known, else what the line calls it.
    pub name: String,
    /// How the inputs name it: `ps`, `MainPID`, `uvicorn`, `shell`.
    pub seen: &'static str,
    pub unit: Option<String>,
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
    /// For a GPU no GPU record shows, what named it (`its process rows`,
    /// `an idle nvidia-smi pmon row`, `a test harness's memory summary`, the
    /// title of a catalog row whose line names it by index).
    pub named_by: Option<&'static str>,
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
                named_by: None,
            });
        }
        // A GPU named only by a process row (`nvidia-smi pmon`, a process
        // table whose GPU rows were not pasted) is still one of the host's.
        // So is one an idle `pmon` row or a test harness's memory summary
        // names.
        let listed: BTreeSet<u32> = inv.gpus.iter().map(|g| g.index).collect();
        let rows = incident
            .gpu_processes
            .iter()
            .filter_map(|p| Some((p.gpu?, "its process rows")));
        let mentions = incident.facts.gpu_mentions.iter().map(|m| (m.index, m.by));
        // A catalog line that names a GPU by its index (DCGM's `GPU 0's
        // NvLink link 0 is currently down`, ggml's `current device: 0`).
        let cataloged = incident.known.iter().filter_map(|k| {
            let row = k.hit.row?;
            let named = k.hit.get("gpu").or_else(|| k.hit.get("device"))?;
            Some((named.trim().parse::<u32>().ok()?, row.title.as_str()))
        });
        let mut only_named: BTreeMap<u32, &'static str> = BTreeMap::new();
        for (index, by) in rows.chain(mentions).chain(cataloged) {
            if !listed.contains(&index) {
                only_named.entry(index).or_insert(by);
            }
        }
        for (index, by) in only_named {
            inv.gpus.push(InventoryGpu {
                index,
                name: None,
                used_mib: None,
                total_mib: None,
                uuid: None,
                bus_id: None,
                xids: Vec::new(),
                named_by: Some(by),
            });
        }
        inv.gpus.sort_by_key(|g| g.index);
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
        for name in incident.units.keys().chain(incident.unit_lines.values()) {
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
        // A server's own line written by PID 1 (`(APIServer pid=1)`) is a
        // container's: there the server is the init process. PID 1 of a
        // journal is systemd.
        let pid1: BTreeSet<_> = incident
            .facts
            .journal
            .iter()
            .filter(|j| j.pid == Some(1))
            .map(|j| j.span)
            .collect();
        inv.pids.extend(
            incident
                .facts
                .server_events
                .iter()
                .filter(|e| e.pid != Some(1) || !pid1.contains(&e.span))
                .filter_map(|e| e.pid)
                .filter(|p| *p > 0),
        );
        // The writer a kept line's own prefix names, PID 1 included: there
        // it is a container's server (`(APIServer pid=1) INFO …`).
        inv.pids
            .extend(incident.facts.messages.iter().filter_map(|m| m.pid));
        // What a test harness says it left alive.
        inv.pids
            .extend(incident.facts.leftover_pids.iter().map(|(p, _)| *p));
        // The processes that hold a listening socket (`ss -ltnp`, `netstat
        // -ntlp`'s `1/python3`: a container's server is its PID 1, `lsof`).
        inv.pids
            .extend(incident.facts.listeners.iter().filter_map(|l| l.pid));
        // The PIDs of GPU software that wrote to the journal (a unit's
        // start script, a server), not of every daemon of the host.
        inv.pids.extend(
            incident
                .facts
                .journal
                .iter()
                .filter(|j| crate::correlate::is_gpu_software(&j.identifier))
                .filter_map(|j| j.pid)
                .filter(|p| *p > 1),
        );
        inv.servers = servers(incident);
        inv.pids.extend(inv.servers.iter().map(|s| s.pid));
        inv.containers = containers(incident, &mut inv.servers);
        inv.pids.extend(inv.containers.iter().filter_map(|c| c.pid));
        inv
    }

    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
            && self.gpu_bus_ids.is_empty()
            && self.processes.is_empty()
            && self.units.is_empty()
            && self.xids.is_empty()
            && self.servers.is_empty()
            && self.pids.is_empty()
            && self.containers.is_empty()
    }

    /// Every Xid code, once each, sorted.
    pub fn xid_codes(&self) -> Vec<u32> {
        let codes: BTreeSet<u32> = self.xids.iter().map(|x| x.code).collect();
        codes.into_iter().collect()
    }
}

/// Docker's zero time: a container never started, or not yet finished.
const NEVER: &str = "0001-01-01T00:00:00Z";

/// The containers of [`Inventory::containers`], each taking from `servers`
/// the server it runs as its init (see [`InventoryContainer::server`]).
fn containers(incident: &Incident, servers: &mut Vec<InventoryServer>) -> Vec<InventoryContainer> {
    let records = &incident.facts.containers;
    let mut out: Vec<InventoryContainer> = records.iter().map(container).collect();
    for c in &mut out {
        let host_pid = c.pid;
        let is_init =
            |s: &InventoryServer| host_pid == Some(s.pid) || (s.pid == 1 && records.len() == 1);
        if let Some(i) = servers.iter().position(is_init) {
            c.server = Some(servers.remove(i));
        }
    }
    out
}

fn container(r: &ContainerState) -> InventoryContainer {
    let time = |t: &Option<String>| t.clone().filter(|t| t != NEVER);
    let running = r.running == Some(true) || r.status.as_deref() == Some("running");
    InventoryContainer {
        name: r
            .name
            .as_deref()
            .map(|n| n.trim_start_matches('/').to_owned())
            .or_else(|| r.id.as_deref().map(|id| id.chars().take(12).collect())),
        status: r.status.clone(),
        pid: r.pid.filter(|p| running && *p > 0),
        exit_code: r.exit_code.filter(|_| !running),
        oom_killed: r.oom_killed == Some(true),
        dead: r.dead == Some(true),
        error: r.error.clone(),
        started_at: time(&r.started_at),
        finished_at: time(&r.finished_at).filter(|_| !running),
        span: r.span,
        server: None,
    }
}

/// The server processes of [`Inventory::servers`], the first way each PID
/// is named winning, in this order: a `ps` row, a unit's `MainPID=`, a
/// shell's job report, uvicorn's start line.
fn servers(incident: &Incident) -> Vec<InventoryServer> {
    let mut out: BTreeMap<u32, InventoryServer> = BTreeMap::new();
    let unit = |pid: u32| incident.owner(pid).map(|o| o.unit.clone());
    // PID 1 only where a server's own line names it (uvicorn's `Started
    // server process [1]`): a container's init, the server itself.
    let mut add = |pid: u32, name: String, seen: &'static str, u: Option<String>| {
        if pid > 1 || (pid == 1 && seen == "uvicorn") {
            out.entry(pid).or_insert(InventoryServer {
                pid,
                name,
                seen,
                unit: u.or_else(|| unit(pid)),
            });
        }
    };
    for r in &incident.facts.ps {
        if crate::correlate::is_serving(&r.cmd, r.ppid) {
            add(r.pid, r.cmd.clone(), "ps", None);
        }
    }
    for p in &incident.facts.unit_properties {
        if let Some(pid) = p.main_pid {
            let name = p
                .exec_start
                .clone()
                .unwrap_or_else(|| "main process".to_owned());
            add(pid, name, "MainPID", p.unit.clone());
        }
    }
    let cmd = |pid: u32| incident.cmdlines.get(&pid).map(|c| c.text.clone());
    for e in &incident.facts.server_events {
        match &e.kind {
            ServerEventKind::ShellJobSignaled { pid, command, .. } => {
                add(*pid, command.clone(), "shell", e.unit.clone());
            }
            ServerEventKind::Uvicorn(Uvicorn::StartedProcess { pid }) => {
                let name = cmd(*pid).unwrap_or_else(|| "API server process".to_owned());
                add(*pid, name, "uvicorn", e.unit.clone());
            }
            _ => {}
        }
    }
    out.into_values().collect()
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
    fn a_gpu_named_only_by_a_process_row_is_listed() {
        // https://github.com/huggingface/text-generation-inference/issues/955:
        // the process row of a 470-series table, without its GPU rows.
        let a = analysis(
            "NVIDIA-SMI 470.141.03   Driver Version: 470.141.03   CUDA Version: 11.4\n\
             \n\
             |    4   N/A  N/A     93051      C   /opt/conda/bin/python3.9        39399MiB |\n",
        );
        let inv = a.report().inventory.clone();
        assert_eq!(inv.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [4]);
        assert_eq!(inv.gpus[0].total_mib, None);
        assert!(inv.pids.contains(&93051));
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
            text.contains("PID 93051 text-generation-launcher 39399 MiB on GPU 4"),
            "{text}"
        );
        assert_eq!(v["inventory"]["pids"], serde_json::json!([93051]));
        assert_eq!(v["inventory"]["gpus"], serde_json::json!([4]));
    }

    /// A server named only by its logs: uvicorn's start line
    /// (sgl-project/sglang#2522), a shell's job report
    /// (sgl-project/sglang#6888), a `ps` row; the host's own daemons stay out.
    #[test]
    fn servers_the_logs_name_are_listed_and_the_hosts_daemons_are_not() {
        let a = analysis(
            "[2024-12-13 01:45:02] INFO:     Started server process [3831493]\n\
             ./run.sh: line 22: 103525 Killed                  python -m sglang.launch_server --host 0.0.0.0 --port 8188 --tp-size 2\n",
        );
        let inv = &a.report().inventory;
        let pids: Vec<u32> = inv.servers.iter().map(|s| s.pid).collect();
        assert_eq!(pids, vec![103525, 3831493]);
        assert_eq!(inv.servers[0].seen, "shell");
        assert!(inv.pids.contains(&3831493) && inv.pids.contains(&103525));
        let text = super::super::text::render(&a.report(), Default::default());
        assert!(
            text.contains("PID 103525 python -m sglang.launch_server"),
            "{text}"
        );

        let a = analysis(
            "USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND\n\
             root         811  0.0  0.0  15436  9216 ?        Ss   09:00   0:00 sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups\n\
             root         812  0.0  0.0   7284  2816 ?        Ss   09:00   0:00 /usr/sbin/cron -f -P\n\
             ollama      9516  0.1  0.2 2370868 21388 ?       Ssl  12:11   0:00 /usr/local/bin/ollama serve\n",
        );
        let inv = &a.report().inventory;
        assert_eq!(inv.pids.iter().copied().collect::<Vec<_>>(), vec![9516]);
        assert_eq!(inv.servers[0].seen, "ps");
    }

    /// A container's init is its server: vLLM's `(APIServer pid=1)`
    /// (fixtures/real/468) and uvicorn's `Started server process [1]`
    /// (fixtures/real/487); a journal's PID 1 is systemd, never listed.
    #[test]
    fn a_containers_pid_1_is_listed_when_the_server_names_it() {
        let a = analysis(
            "(APIServer pid=1) INFO 06-01 09:22:53 [api_server.py:596] Starting vLLM server on http://0.0.0.0:8000\n",
        );
        assert!(a.report().inventory.pids.contains(&1));
        let a = analysis("INFO:     Started server process [1]\n");
        let inv = &a.report().inventory;
        assert_eq!(inv.servers.iter().map(|s| s.pid).collect::<Vec<_>>(), [1]);
        let a = analysis(
            "May 12 07:02:11 ct200 systemd[1]: Started ddtree-qwen.service - DDTree.\n\
             May 12 07:02:19 ct200 systemd[1]: ddtree-qwen.service: Main process exited, code=exited, status=1/FAILURE\n",
        );
        assert!(!a.report().inventory.pids.contains(&1));
    }

    /// The containers `docker inspect` shows: the State object of
    /// fixtures/real/1040 (kudarap/dotagiftx#123), and a whole object,
    /// named (docker/for-linux#1019), each with how it ended and its line.
    #[test]
    fn containers_are_listed_with_how_they_ended_and_their_line() {
        let state = include_str!(
            "../../fixtures/real/1040-dotagiftx-server-container-exited-inspect-state-memory-limit/input.log"
        );
        let a = analysis(state);
        let report = a.report();
        let [c] = report.inventory.containers.as_slice() else {
            panic!("{:?}", report.inventory.containers);
        };
        assert_eq!(
            (
                c.name.as_deref(),
                c.status.as_deref(),
                c.pid,
                c.exit_code,
                c.oom_killed
            ),
            (None, Some("exited"), None, Some(137), true)
        );
        assert_eq!(
            c.finished_at.as_deref(),
            Some("2026-03-10T20:14:03.658991947Z")
        );
        let text = super::super::text::render(&report, Default::default());
        assert!(
            text.contains("  a container (exited): exit code 137, OOMKilled, started 2026-03-10T19:51:02.31277242Z, finished 2026-03-10T20:14:03.658991947Z  [paste:1]"),
            "{text}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&super::super::json::render(&report)).unwrap();
        let j = &v["inventory"]["containers"][0];
        assert_eq!(
            (&j["line"], &j["exit_code"], &j["oom_killed"]),
            (
                &serde_json::json!("paste:1"),
                &serde_json::json!(137),
                &serde_json::json!(true)
            )
        );

        let a = analysis(include_str!(
            "../../fixtures/rules/process-died/pos-docker-inspect-container-exited-139/inspect.txt"
        ));
        let text = super::super::text::render(&a.report(), Default::default());
        assert!(
            text.contains("  container pedantic_sinoussi (exited): exit code 139, started"),
            "{text}"
        );
    }

    /// A server's own line written by PID 1 beside the only container of
    /// the inputs is that container's init: one entry, the container's.
    /// (In one paste, the inspect's JSON and a log line are still read as
    /// one JSON segment, whose other lines are unread.)
    /// The State object of fixtures/real/1040 and uvicorn's start line of
    /// fixtures/real/487.
    #[test]
    fn a_containers_pid_1_server_is_joined_to_its_container() {
        let state = include_str!(
            "../../fixtures/real/1040-dotagiftx-server-container-exited-inspect-state-memory-limit/input.log"
        );
        // Two inputs: the container's logs and its inspect.
        let mut sources = SourceMap::default();
        sources.add(Source::new(
            "logs",
            "INFO:     Started server process [1]\n".as_bytes(),
        ));
        sources.add(Source::new("inspect", state.as_bytes()));
        let a = crate::analyze(sources);
        let inv = a.report().inventory.clone();
        assert!(inv.servers.is_empty(), "{:?}", inv.servers);
        let [c] = inv.containers.as_slice() else {
            panic!("{:?}", inv.containers);
        };
        assert_eq!(c.server.as_ref().map(|s| s.pid), Some(1));
        assert!(inv.pids.contains(&1));
        let text = super::super::text::render(&a.report(), Default::default());
        assert!(
            text.contains("its server PID 1 API server process"),
            "{text}"
        );
        assert!(!text.contains("uvicorn's server process"), "{text}");
    }

    /// The processes that hold a listening socket: `netstat -ntlp` inside
    /// a container, where the server is PID 1 (fixtures/real/618,
    /// vllm-project/vllm), and `lsof`'s rows under `grep -n`
    /// (fixtures/real/648, sgl-project/sglang).
    #[test]
    fn the_processes_holding_a_listening_socket_are_listed() {
        let a = analysis(
            "docker exec -it vllm-openai netstat -ntlp\n\
             Active Internet connections (only servers)\n\
             Proto Recv-Q Send-Q Local Address           Foreign Address         State       PID/Program name\n\
             tcp        0      0 172.17.0.2:37769        0.0.0.0:*               LISTEN      1/python3\n",
        );
        assert!(a.report().inventory.pids.contains(&1));
        let a = analysis(
            "61:python3   101769   70u  IPv4 544355      0t0  TCP *:8080 (LISTEN)\n\
             62:sglang::s 101870   81u  IPv6 545040      0t0  TCP *:8889 (LISTEN)\n",
        );
        let pids = &a.report().inventory.pids;
        assert!(pids.contains(&101769) && pids.contains(&101870), "{pids:?}");
    }

    /// GPUs only an idle `pmon` row or a harness's summary names
    /// (fixtures/real/503, 508), and the PIDs a harness left alive.
    #[test]
    fn gpus_and_pids_a_harness_or_pmon_names_are_listed() {
        let a = analysis(
            "# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command \n\
             # Idx           #    C/G      %      %      %      %      %      %    name \n\
             \x20   0    3182341     C      8      2      -      -      -      -    python3.12     \n\
             \x20   1          -     -      -      -      -      -      -      -    -              \n\
             \n\
             OmniServer stopping...\n\
             Warning: Processes still alive: [30951, 30954]\n\
             [GPU Memory Status] Current usage:\n\
             \x20 GPU 2: 0.5GiB/79.6GiB (0.7%)\n",
        );
        let inv = a.report().inventory.clone();
        let gpus: Vec<(u32, Option<&str>)> =
            inv.gpus.iter().map(|g| (g.index, g.named_by)).collect();
        assert_eq!(
            gpus,
            [
                (0, Some("its process rows")),
                (1, Some("an idle nvidia-smi pmon row")),
                (2, Some("a test harness's memory summary"))
            ]
        );
        assert!(inv.pids.contains(&30951) && inv.pids.contains(&30954));
        let text = super::super::text::render(&a.report(), Default::default());
        assert!(
            text.contains("GPU 1: named only by an idle nvidia-smi pmon row"),
            "{text}"
        );
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
