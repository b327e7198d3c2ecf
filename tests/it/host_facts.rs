//! The host's own captures (kernel log, `nvidia-smi -q`, `systemctl show`,
//! `/proc/PID/cgroup`) joined with the rest: an Xid's bus id finds its GPU,
//! cgroup files and `MainPID=` tie PIDs to units, health finds its GPU.

use rootcause::correlate::OwnerBasis;
use rootcause::source::{Source, SourceMap};

use crate::support::analyze;

fn sources(inputs: &[(&str, &str)]) -> SourceMap {
    let mut map = SourceMap::new();
    for (name, text) in inputs {
        map.add(Source::new(*name, text.as_bytes()));
    }
    map
}

const QUERY_GPU: &str = "\
index, uuid, pci.bus_id, memory.used [MiB], memory.total [MiB]
0, GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 00000000:18:00.0, 1026 MiB, 81559 MiB
1, GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566, 00000000:3B:00.0, 55286 MiB, 81559 MiB
";

#[test]
fn an_xid_finds_its_gpu_by_bus_id() {
    let out = analyze(sources(&[
        ("nvidia-smi-query-gpu.csv", QUERY_GPU),
        (
            "dmesg.txt",
            "[ 8712.345679] NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus.\n",
        ),
    ]));
    let incident = &out.analysis.incident;
    let (event, xid) = incident.xids().next().expect("an Xid");
    assert_eq!((event.span.line, xid.code), (1, 79));
    let gpu = incident
        .gpu_by_bus_id(xid.bus_id.as_deref().unwrap())
        .expect("GPU at 0000:3b:00.0");
    assert_eq!(gpu.index, 1);
    assert_eq!(
        incident.gpu_by_bus_id("0000:3b:00").map(|g| g.index),
        Some(1)
    );
    assert_eq!(
        incident.gpu_by_bus_id("00000000:18:00.0").map(|g| g.index),
        Some(0)
    );
    assert!(incident.gpu_by_bus_id("0000:5d:00.0").is_none());
    assert!(incident.gpu_by_bus_id("garbage").is_none());
}

#[test]
fn without_smi_bus_ids_the_kernel_maps_bus_to_uuid() {
    let out = analyze(sources(&[
        (
            "nvidia-smi-query-gpu.csv",
            "index, uuid\n0, GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14\n1, GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566\n",
        ),
        (
            "kern.log",
            "Jun  1 12:00:03 gpu-node-7 kernel: [ 8712.345677] NVRM: GPU at PCI:0000:3b:00: GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566\n",
        ),
    ]));
    let incident = &out.analysis.incident;
    assert_eq!(
        incident.gpu_by_bus_id("0000:3b:00.0").map(|g| g.index),
        Some(1)
    );
}

#[test]
fn cgroup_files_and_show_tie_pids_to_units() {
    let out = analyze(sources(&[
        (
            "cgroup.txt",
            "\
/proc/4318/cgroup:0::/system.slice/sglang.service
/proc/77101/cgroup:0::/user.slice/user-1000.slice/session-3.scope
/proc/51234/cgroup:0::/system.slice/docker-4f6c1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f.scope
",
        ),
        (
            "show.txt",
            "Id=ddtree-qwen.service\nMainPID=20629\nActiveState=active\n",
        ),
        (
            "journal.txt",
            "Nov 27 09:30:02 ct200 systemd[1]: Started ddtree-qwen.service - DDTree.\nNov 27 09:30:03 ct200 python3[4318]: hello\n",
        ),
    ]));
    let incident = &out.analysis.incident;
    let owner = |pid| {
        incident
            .owner(pid)
            .map(|o| (o.unit.as_str(), o.basis, o.span.line))
    };
    // The cgroup file beats the journal-order guess that would say ddtree.
    assert_eq!(
        owner(4318),
        Some(("sglang.service", OwnerBasis::ProcCgroup, 1))
    );
    assert_eq!(
        owner(20629),
        Some(("ddtree-qwen.service", OwnerBasis::ShowMainPid, 2))
    );
    // Sessions and containers are owners, but not units to act on.
    assert_eq!(owner(77101), None);
    assert_eq!(owner(51234), None);
    let unit = &incident.units["ddtree-qwen.service"];
    assert_eq!(unit.properties, Some(0));
}

#[test]
fn smi_query_health_joins_its_gpu() {
    let out = analyze(sources(&[
        ("nvidia-smi-query-gpu.csv", QUERY_GPU),
        (
            "nvidia-smi-q.txt",
            "\
==============NVSMI LOG==============
Attached GPUs                             : 8
GPU 00000000:3B:00.0
    GPU UUID                              : GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566
    Remapped Rows
        Pending                           : Yes
",
        ),
    ]));
    let incident = &out.analysis.incident;
    let gpu = incident.gpu(1).expect("GPU 1");
    let pending: Vec<(bool, u32)> = incident
        .health_of(gpu)
        .filter_map(|h| h.remapped_rows_pending.as_ref())
        .map(|r| (r.value, r.span.line))
        .collect();
    assert_eq!(pending, vec![(true, 6)]);
    assert_eq!(incident.health_of(incident.gpu(0).unwrap()).count(), 0);
}
