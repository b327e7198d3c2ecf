//! Unit tests of the parser in this folder: every variant, with the parsed
//! fields and line numbers pinned.

use chrono::NaiveDate;

use super::*;
use crate::model::{OomKill, OomTask, Xid};
use crate::source::SourceId;

fn at(line: u32) -> Span {
    Span {
        source: SourceId(0),
        line,
    }
}

fn dmesg(text: &str) -> (Facts, u32) {
    let mut facts = Facts::default();
    let unrecognized = parse(&Line::numbered(text), &mut facts);
    (facts, unrecognized)
}

fn xids(facts: &Facts) -> Vec<(u32, &Xid)> {
    facts
        .kernel_events
        .iter()
        .filter_map(|e| match &e.kind {
            KernelEventKind::Xid(x) => Some((e.span.line, x)),
            _ => None,
        })
        .collect()
}

fn xid(
    bus: &str,
    gi: Option<u32>,
    ci: Option<u32>,
    code: u32,
    pid: Option<u32>,
    name: Option<&str>,
    message: &str,
) -> Xid {
    Xid {
        bus_id: Some(bus.to_owned()),
        gpu_instance: gi,
        compute_instance: ci,
        code,
        pid,
        name: name.map(str::to_owned),
        message: message.to_owned(),
        recovery_action: None,
    }
}

fn wall(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, micros: u32) -> chrono::NaiveDateTime {
    NaiveDate::from_ymd_opt(y, mo, d)
        .and_then(|d| d.and_hms_micro_opt(h, mi, s, micros))
        .expect("valid test date")
}

#[test]
fn every_xid_variant() {
    let (facts, unrecognized) = dmesg("\
NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus.
NVRM: Xid (PCI:0000:2A:00 GPU-I:01): 13, pid=77101, name=python, Graphics SM Warp Exception on (GPC 3, TPC 1, SM 0): Out Of Range Address
NVRM: Xid (PCI:0000:2a:00 GPU-I:02 GPU-CI:00): 31, pid='<unknown>', name=<unknown>, Ch 0000000a, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f3a_c4000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ
NVRM: Xid (PCI:0000:01:00): 79, pid=1122, GPU has fallen off the bus.
NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.
NVRM: Xid (0000:01:00): 43, pid=<unknown>, name=<unknown>, Ch 00000010
NVRM: Xid (PCI:0000:3b:00.0): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 4, subpartition 1.
NVRM: Xid (PCI:0000:c1:00): 119, pid=5140, name=nv-hostengine, Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).
NVRM: Xid (PCI:0000:c1:00): 120, pid=5140, name=nvidia-smi, GSP task timeout @ pc:0x4ba1d0c, task: 1
NVRM: Xid (PCI:0000:3b:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping, reset gpu to activate.
NVRM: Xid (PCI:0000:3b:00): 64, pid='<unknown>', name=<unknown>, Row Remapper Error: (0x00000002eebc4100) - All reserved rows for bank are remapped
NVRM: Xid (PCI:0000:3b:00): 94, pid=4318, name=sglang::schedul, Contained: SM (0x1). RST: No, D-RST: No
NVRM: Xid (PCI:0000:3b:00): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, D-RST: No
NVRM: Xid (PCI:0000:5d:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)
NVRM: Xid (PCI:0000:3b:00): 45, pid=4318, name=sglang::schedul, Ch 00000010");
    assert_eq!(unrecognized, 0);
    // Each bus as its line prints it: without the function, but line 7.
    let b3b = "0000:3b:00";
    let expected: Vec<(u32, Xid)> = vec![
        (
            1,
            xid(
                b3b,
                None,
                None,
                79,
                Some(4318),
                Some("sglang::schedul"),
                "GPU has fallen off the bus.",
            ),
        ),
        (
            2,
            xid(
                "0000:2a:00",
                Some(1),
                None,
                13,
                Some(77101),
                Some("python"),
                "Graphics SM Warp Exception on (GPC 3, TPC 1, SM 0): Out Of Range Address",
            ),
        ),
        (
            3,
            xid(
                "0000:2a:00",
                Some(2),
                Some(0),
                31,
                None,
                None,
                "Ch 0000000a, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_3 faulted @ 0x7f3a_c4000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
            ),
        ),
        (
            4,
            xid(
                "0000:01:00",
                None,
                None,
                79,
                Some(1122),
                None,
                "GPU has fallen off the bus.",
            ),
        ),
        (
            5,
            xid(
                "0000:2b:00",
                None,
                None,
                79,
                None,
                None,
                "GPU has fallen off the bus.",
            ),
        ),
        (
            6,
            xid("0000:01:00", None, None, 43, None, None, "Ch 00000010"),
        ),
        (
            7,
            xid(
                "0000:3b:00.0",
                None,
                None,
                48,
                None,
                None,
                "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 4, subpartition 1.",
            ),
        ),
        (
            8,
            xid(
                "0000:c1:00",
                None,
                None,
                119,
                Some(5140),
                Some("nv-hostengine"),
                "Timeout after 6s of waiting for RPC response from GPU1 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).",
            ),
        ),
        (
            9,
            xid(
                "0000:c1:00",
                None,
                None,
                120,
                Some(5140),
                Some("nvidia-smi"),
                "GSP task timeout @ pc:0x4ba1d0c, task: 1",
            ),
        ),
        (
            10,
            xid(
                b3b,
                None,
                None,
                63,
                None,
                None,
                "Row Remapper: New row marked for remapping, reset gpu to activate.",
            ),
        ),
        (
            11,
            xid(
                b3b,
                None,
                None,
                64,
                None,
                None,
                "Row Remapper Error: (0x00000002eebc4100) - All reserved rows for bank are remapped",
            ),
        ),
        (
            12,
            xid(
                b3b,
                None,
                None,
                94,
                Some(4318),
                Some("sglang::schedul"),
                "Contained: SM (0x1). RST: No, D-RST: No",
            ),
        ),
        (
            13,
            xid(
                b3b,
                None,
                None,
                95,
                None,
                None,
                "Uncontained: FBHUB. RST: Yes, D-RST: No",
            ),
        ),
        (
            14,
            xid(
                "0000:5d:00",
                None,
                None,
                74,
                None,
                None,
                "NVLink: fatal error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
            ),
        ),
        (
            15,
            xid(
                b3b,
                None,
                None,
                45,
                Some(4318),
                Some("sglang::schedul"),
                "Ch 00000010",
            ),
        ),
    ];
    let got: Vec<(u32, Xid)> = xids(&facts)
        .into_iter()
        .map(|(l, x)| (l, x.clone()))
        .collect();
    assert_eq!(got, expected);
    // Nothing else: an Xid line is never also a GSP or ECC notice.
    assert_eq!(facts.kernel_events.len(), 15);
}

#[test]
fn a_fall_off_the_bus_with_its_companions() {
    let (facts, unrecognized) = dmesg("\
[ 8712.345677] NVRM: GPU at PCI:0000:3b:00: GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14
[ 8712.345678] NVRM: GPU Board Serial Number: 1653922001234
[ 8712.345679] NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus.
[ 8712.345680] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.
[ 8712.345681] NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)
[ 8712.345682] NVRM: A GPU crash dump has been created. If possible, please run
[ 8712.345683] NVRM: nvidia-bug-report.sh as root to collect this data before
[ 8712.400000] NVRM: GPU0 nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F) returned from pRmApi->Control");
    assert_eq!(unrecognized, 0);
    let got: Vec<(u32, Option<u64>, &KernelEventKind)> = facts
        .kernel_events
        .iter()
        .map(|e| (e.span.line, e.time.uptime_us, &e.kind))
        .collect();
    let Some((_, _, KernelEventKind::Xid(recovery))) = got.get(3) else {
        panic!("no Xid 154: {got:#?}");
    };
    assert_eq!(recovery.code, 154);
    assert_eq!(
        recovery.recovery_action.as_deref(),
        Some("Node Reboot Required")
    );
    let kinds: Vec<(u32, Option<u64>, &str)> = got
        .iter()
        .map(|(l, t, k)| {
            let name = match k {
                KernelEventKind::GpuAtBus { .. } => "gpu-at-bus",
                KernelEventKind::Xid(_) => "xid",
                KernelEventKind::FellOffBus { .. } => "fell-off-bus",
                KernelEventKind::GpuLost { .. } => "gpu-lost",
                _ => "other",
            };
            (*l, *t, name)
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            (1, Some(8_712_345_677), "gpu-at-bus"),
            (3, Some(8_712_345_679), "xid"),
            (4, Some(8_712_345_680), "fell-off-bus"),
            (5, Some(8_712_345_681), "xid"),
            (8, Some(8_712_400_000), "gpu-lost"),
        ]
    );
    assert_eq!(
        facts.kernel_events[0].kind,
        KernelEventKind::GpuAtBus {
            bus_id: "0000:3b:00.0".to_owned(),
            uuid: "GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14".to_owned(),
        }
    );
    assert_eq!(
        facts.kernel_events[2].kind,
        KernelEventKind::FellOffBus {
            bus_id: Some("0000:3b:00.0".to_owned())
        }
    );
}

#[test]
fn every_dmesg_wrapper_yields_the_same_event_and_its_time() {
    let message = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus.";
    let ts = |local, offset_secs| {
        Some(Timestamp {
            local,
            offset_secs,
            year_known: true,
        })
    };
    let cases: Vec<(String, KernelTime)> = vec![
        (
            format!("[ 8712.345678] {message}"),
            KernelTime {
                uptime_us: Some(8_712_345_678),
                wall: None,
            },
        ),
        (
            format!("[Sat Jun  1 12:00:03 2024] {message}"),
            KernelTime {
                uptime_us: None,
                wall: ts(wall(2024, 6, 1, 12, 0, 3, 0), None),
            },
        ),
        (
            format!("[Tue Jun 11 12:00:03 2024] {message}"),
            KernelTime {
                uptime_us: None,
                wall: ts(wall(2024, 6, 11, 12, 0, 3, 0), None),
            },
        ),
        (
            format!("2024-06-01T12:00:03,345678+02:00 {message}"),
            KernelTime {
                uptime_us: None,
                wall: ts(wall(2024, 6, 1, 12, 0, 3, 345_678), Some(7200)),
            },
        ),
        (
            format!("kern  :warn  : [ 8712.345678] {message}"),
            KernelTime {
                uptime_us: Some(8_712_345_678),
                wall: None,
            },
        ),
        (
            format!("kern  :err   : [Sat Jun  1 12:00:03 2024] {message}"),
            KernelTime {
                uptime_us: None,
                wall: ts(wall(2024, 6, 1, 12, 0, 3, 0), None),
            },
        ),
        (
            format!("<4>[ 8712.345678] {message}"),
            KernelTime {
                uptime_us: Some(8_712_345_678),
                wall: None,
            },
        ),
        (
            format!("[ 8712.345678 <    0.000012>] {message}"),
            KernelTime {
                uptime_us: Some(8_712_345_678),
                wall: None,
            },
        ),
        (
            format!("[ 8712.345678] gpu-node-7 kernel: {message}"),
            KernelTime {
                uptime_us: Some(8_712_345_678),
                wall: None,
            },
        ),
        (
            format!("kern  :warn  : 2024-06-01T12:00:03,345678+02:00 {message}"),
            KernelTime {
                uptime_us: None,
                wall: ts(wall(2024, 6, 1, 12, 0, 3, 345_678), Some(7200)),
            },
        ),
        // `/dev/kmsg`: priority, sequence, microseconds since boot, flag.
        (
            format!("4,1227,8712345678,c;{message}"),
            KernelTime {
                uptime_us: Some(8_712_345_678),
                wall: None,
            },
        ),
        (
            format!("4,1227,8712345678,-,caller=T4318;{message}"),
            KernelTime {
                uptime_us: Some(8_712_345_678),
                wall: None,
            },
        ),
        (format!("[  +0.000012] {message}"), KernelTime::default()),
        (format!("[Jun  1 12:00] {message}"), KernelTime::default()),
        (message.to_owned(), KernelTime::default()),
    ];
    for (line, time) in cases {
        let (facts, unrecognized) = dmesg(&line);
        assert_eq!(unrecognized, 0, "{line}");
        assert_eq!(facts.kernel_events.len(), 1, "{line}");
        let event = &facts.kernel_events[0];
        assert_eq!(event.time, time, "{line}");
        assert!(
            matches!(&event.kind, KernelEventKind::Xid(x) if x.code == 79 && x.pid == Some(4318)),
            "{line}"
        );
    }
}

#[test]
fn journal_and_syslog_wrappers_hand_kernel_messages_over() {
    let short = "\
Jun 01 12:00:03 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus.
Jun  1 12:00:03 gpu-node-7 kernel: [ 8712.345678] NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus.
2024-06-01T12:00:03.345678+00:00 gpu-node-7 kernel: [ 8712.345678] NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus.
2024-06-01T12:00:03+0000 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus.
Jun 01 12:00:04 gpu-node-7 python3[4242]: [2024-06-01 12:00:04 TP0] NVRM: Xid (PCI:0000:3b:00): 79 quoted by a server is not the kernel";
    let mut facts = Facts::default();
    let unrecognized = crate::ingest::journal_short::parse(
        &Line::numbered(short),
        &mut facts,
        crate::ingest::journal_short::Ident::Identifier,
    );
    assert_eq!(unrecognized, 0);
    assert_eq!(facts.journal.len(), 5);
    type Row = (u32, Option<u64>, Option<chrono::NaiveDateTime>, Option<i32>);
    let got: Vec<Row> = facts
        .kernel_events
        .iter()
        .map(|e| {
            (
                e.span.line,
                e.time.uptime_us,
                e.time.wall.map(|w| w.local),
                e.time.wall.and_then(|w| w.offset_secs),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (1, None, Some(wall(2000, 6, 1, 12, 0, 3, 0)), None),
            (
                2,
                Some(8_712_345_678),
                Some(wall(2000, 6, 1, 12, 0, 3, 0)),
                None
            ),
            (
                3,
                Some(8_712_345_678),
                Some(wall(2024, 6, 1, 12, 0, 3, 345_678)),
                Some(0)
            ),
            (4, None, Some(wall(2024, 6, 1, 12, 0, 3, 0)), Some(0)),
        ]
    );
    assert!(
        facts
            .kernel_events
            .iter()
            .all(|e| matches!(&e.kind, KernelEventKind::Xid(x) if x.code == 79))
    );

    let json = r#"{"__REALTIME_TIMESTAMP":"1717243203345678","_TRANSPORT":"kernel","SYSLOG_IDENTIFIER":"kernel","_HOSTNAME":"gpu-node-7","MESSAGE":"NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus."}
{"__REALTIME_TIMESTAMP":"1717243204000000","_TRANSPORT":"kernel","_HOSTNAME":"gpu-node-7","MESSAGE":"NVRM: API mismatch: the client has the version 535.183.01, but\nNVRM: this kernel module has the version 535.161.07.  Please\nNVRM: make sure that this kernel module and all NVIDIA driver\nNVRM: components have the same version."}
{"__REALTIME_TIMESTAMP":"1717243205000000","_TRANSPORT":"stdout","SYSLOG_IDENTIFIER":"python3","_PID":"4242","MESSAGE":"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, quoted"}"#;
    let mut facts = Facts::default();
    let unrecognized = crate::ingest::journal_json::parse(&Line::numbered(json), &mut facts);
    assert_eq!(unrecognized, 0);
    let got: Vec<(u32, &KernelEventKind)> = facts
        .kernel_events
        .iter()
        .map(|e| (e.span.line, &e.kind))
        .collect();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(matches!(got[0], (1, KernelEventKind::Xid(x)) if x.code == 79));
    assert_eq!(
        got[1],
        (
            2,
            &KernelEventKind::ApiMismatch {
                client_version: "535.183.01".to_owned(),
                kernel_version: Some("535.161.07".to_owned()),
            }
        )
    );
    assert_eq!(
        facts.kernel_events[0].time.wall.map(|w| w.local),
        Some(wall(2024, 6, 1, 12, 0, 3, 345_678))
    );
}

#[test]
fn other_nvrm_lines_that_matter() {
    let (facts, unrecognized) = dmesg("\
[    5.123456] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  535.183.01  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu May 30 20:32:07 UTC 2024
[    5.123457] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  470.256.02  Thu May  2 14:37:44 UTC 2024
[   60.000001] NVRM: API mismatch: the client has the version 535.183.01, but
[   60.000001] NVRM: this kernel module has the version 535.161.07.  Please
[   60.000001] NVRM: make sure that this kernel module and all NVIDIA driver
[   60.000001] NVRM: components have the same version.
[  900.000001] NVRM: GPU0 _kgspLogXid119: ********************************* GSP Timeout **********************************
[  900.000002] NVRM: _kgspIsHeartbeatTimedOut: Heartbeat timed out, curtime 0x1 lastHeartbeat 0x0 diff 0x1
[  950.000001] NVRM: GPU1 An uncorrectable ECC error detected (possible firmware handling failure) DRAM:-1840691272, LTC:0, MMU:0, PCIE:0
[  951.000001] NVRM: some other driver chatter");
    assert_eq!(unrecognized, 0);
    let got: Vec<(u32, &KernelEventKind)> = facts
        .kernel_events
        .iter()
        .map(|e| (e.span.line, &e.kind))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                1,
                &KernelEventKind::DriverLoaded {
                    version: "535.183.01".to_owned(),
                    open: true
                }
            ),
            (
                2,
                &KernelEventKind::DriverLoaded {
                    version: "470.256.02".to_owned(),
                    open: false
                }
            ),
            (
                3,
                &KernelEventKind::ApiMismatch {
                    client_version: "535.183.01".to_owned(),
                    kernel_version: Some("535.161.07".to_owned()),
                }
            ),
            (
                7,
                &KernelEventKind::GspTimeout {
                    message: "GPU0 _kgspLogXid119: ********************************* GSP Timeout **********************************".to_owned()
                }
            ),
            (
                8,
                &KernelEventKind::GspTimeout {
                    message: "_kgspIsHeartbeatTimedOut: Heartbeat timed out, curtime 0x1 lastHeartbeat 0x0 diff 0x1".to_owned()
                }
            ),
            (
                9,
                &KernelEventKind::Ecc {
                    message: "GPU1 An uncorrectable ECC error detected (possible firmware handling failure) DRAM:-1840691272, LTC:0, MMU:0, PCIE:0".to_owned()
                }
            ),
        ]
    );
    let related: Vec<u32> = facts.kernel_events[2]
        .related
        .iter()
        .map(|s| s.line)
        .collect();
    assert_eq!(related, vec![4, 5, 6]);
}

fn ooms(facts: &Facts) -> Vec<(u32, Vec<u32>, &OomKill)> {
    facts
        .kernel_events
        .iter()
        .filter_map(|e| match &e.kind {
            KernelEventKind::OomKill(k) => {
                Some((e.span.line, e.related.iter().map(|s| s.line).collect(), k))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn an_oom_report_is_one_event_with_its_victim() {
    let (facts, unrecognized) = dmesg("\
[ 9001.000001] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0
[ 9001.000002] CPU: 12 PID: 4242 Comm: python3 Not tainted 6.1.0-21-amd64 #1 Debian 6.1.90-1
[ 9001.000003] Call Trace:
[ 9001.000003]  <TASK>
[ 9001.000004] Mem-Info:
[ 9001.000005] Tasks state (memory values in pages):
[ 9001.000006] [  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name
[ 9001.000007] [    812]     0   812    12345     2345   110592        0          -250 systemd-journal
[ 9001.000008] [   4242]     0  4242 103086419 46913580 377262080        0             0 python3
[ 9001.000009] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,task_memcg=/system.slice/sglang.service,task=python3,pid=4242,uid=0
[ 9001.000010] Out of memory: Killed process 4242 (python3) total-vm:412345676kB, anon-rss:187654320kB, file-rss:123456kB, shmem-rss:2048kB, UID:0 pgtables:368420kB oom_score_adj:0
[ 9001.100000] oom_reaper: reaped process 4242 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB");
    assert_eq!(unrecognized, 0);
    let got = ooms(&facts);
    assert_eq!(got.len(), 1);
    let (line, related, kill) = &got[0];
    assert_eq!((*line, related.clone()), (11, vec![1, 10, 12]));
    assert_eq!(
        **kill,
        OomKill {
            pid: Some(4242),
            comm: Some("python3".to_owned()),
            cgroup_limit: false,
            invoked_by: Some("python3".to_owned()),
            total_vm_kb: Some(412_345_676),
            anon_rss_kb: Some(187_654_320),
            file_rss_kb: Some(123_456),
            shmem_rss_kb: Some(2048),
            uid: Some(0),
            oom_score_adj: Some(0),
            constraint: Some("CONSTRAINT_NONE".to_owned()),
            task_memcg: Some("/system.slice/sglang.service".to_owned()),
            oom_memcg: None,
            global_oom: true,
            memcg_usage_kb: None,
            memcg_limit_kb: None,
            tasks: vec![
                OomTask {
                    pid: 812,
                    uid: 0,
                    tgid: 812,
                    total_vm_pages: 12345,
                    rss_pages: 2345,
                    oom_score_adj: -250,
                    name: "systemd-journal".to_owned(),
                    span: at(8),
                },
                OomTask {
                    pid: 4242,
                    uid: 0,
                    tgid: 4242,
                    total_vm_pages: 103_086_419,
                    rss_pages: 46_913_580,
                    oom_score_adj: 0,
                    name: "python3".to_owned(),
                    span: at(9),
                },
            ],
            reaped: true,
        }
    );
    assert_eq!(facts.kernel_events[0].time.uptime_us, Some(9_001_000_010));
}

#[test]
fn cgroup_old_kernel_and_cut_reports() {
    let (facts, unrecognized) = dmesg("\
[  100.000001] sglang::schedul invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
[  100.000002] memory: usage 125829120kB, limit 125829120kB, failcnt 0
[  100.000003] Memory cgroup stats for /system.slice/sglang.service:
[  100.000004] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/system.slice/sglang.service,task_memcg=/system.slice/sglang.service,task=sglang::schedul,pid=5120,uid=0
[  100.000005] Memory cgroup out of memory: Killed process 5120 (sglang::schedul) total-vm:98765432kB, anon-rss:87654321kB, file-rss:1234kB, shmem-rss:0kB, UID:0 pgtables:170000kB oom_score_adj:0
[  200.000001] python invoked oom-killer: gfp_mask=0x24201ca, order=0, oom_score_adj=0
[  200.000002] Out of memory: Kill process 4242 (python) score 912 or sacrifice child
[  200.000003] Killed process 4242 (python) total-vm:412345676kB, anon-rss:187654320kB, file-rss:123456kB
[  300.000001] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0
[  300.000002] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice/user-1000.slice/session-3.scope,task=python3,pid=7777,uid=1000
[  400.000001] Out of memory: Killed process 8888 (VLLM::Worker_TP) total-vm:1kB, anon-rss:2kB, file-rss:3kB, shmem-rss:4kB");
    assert_eq!(unrecognized, 0);
    type Row<'a> = (
        u32,
        Vec<u32>,
        Option<u32>,
        Option<&'a str>,
        bool,
        Option<u64>,
        Option<u64>,
    );
    let got: Vec<Row<'_>> = ooms(&facts)
        .into_iter()
        .map(|(l, r, k)| {
            (
                l,
                r,
                k.pid,
                k.comm.as_deref(),
                k.cgroup_limit,
                k.anon_rss_kb,
                k.shmem_rss_kb,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                5,
                vec![1, 2, 4],
                Some(5120),
                Some("sglang::schedul"),
                true,
                Some(87_654_321),
                Some(0)
            ),
            (
                8,
                vec![6, 7],
                Some(4242),
                Some("python"),
                false,
                Some(187_654_320),
                None
            ),
            // Cut before its kill line: the summary names the victim.
            (10, vec![9], Some(7777), Some("python3"), false, None, None),
            // A kill line grepped out of its report.
            (
                11,
                vec![],
                Some(8888),
                Some("VLLM::Worker_TP"),
                false,
                Some(2),
                Some(4)
            ),
        ]
    );
    let KernelEventKind::OomKill(memcg) = &facts.kernel_events[0].kind else {
        unreachable!()
    };
    assert_eq!(
        (
            memcg.memcg_usage_kb,
            memcg.memcg_limit_kb,
            memcg.oom_memcg.as_deref()
        ),
        (
            Some(125_829_120),
            Some(125_829_120),
            Some("/system.slice/sglang.service")
        )
    );
}

#[test]
fn garbage_is_counted_and_never_panics() {
    let (facts, unrecognized) = dmesg(
        "\
[ 8712.345678] ordinary kernel chatter
   indented continuation of it
hello world
[abc] not a time
[99999999999999999999.000000] NVRM: Xid (PCI:0000:3b:00): 99999999999, pid=1, name=x, y
[ 1.000000] NVRM: Xid (PCI:zzzz:3b:00): 79, GPU has fallen off the bus.
[Sat Feb 30 12:00:03 2024] NVRM: bad date
[ 2.000000] oom_reaper: reaped process 5 (x), now anon-rss:0kB
[ 3.000000] [   4242]     0  4242 1 2 3 4 5 not in a report
\u{1b}\u{0}\u{ff}
<999999>",
    );
    assert_eq!(unrecognized, 5);
    // The bad bus id still says a GPU fell off; the overflowing code is no Xid.
    let kinds: Vec<(u32, &KernelEventKind)> = facts
        .kernel_events
        .iter()
        .map(|e| (e.span.line, &e.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![(6, &KernelEventKind::FellOffBus { bus_id: None })]
    );
}

/// Real pastes whose syslog time and host were cut off, leaving `kernel: `
/// (https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150), and a
/// line with no prefix at all: the Xid fields are read either way.
#[test]
fn a_bare_kernel_prefix_is_a_wrapper() {
    let (facts, unrecognized) = dmesg("\
kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149
kernel: NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, Ch 0000000c caused by previous Xid 145
kernel: [ 8712.345679] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.
kernel: usb 1-1: new high-speed USB device number 2 using xhci_hcd
NVRM: Xid (PCI:0000:97:00): 45, pid=1818987, name=python3, Ch 00000003 caused by previous Xid 145");
    assert_eq!(unrecognized, 0);
    let got = xids(&facts);
    assert_eq!(
        got,
        vec![
            (
                1,
                &xid(
                    "0000:dc:00",
                    None,
                    None,
                    45,
                    Some(1818990),
                    Some("python3"),
                    "Ch 00000001 caused by previous Xid 149"
                )
            ),
            (
                2,
                &xid(
                    "0000:ed:00",
                    None,
                    None,
                    45,
                    Some(1818992),
                    Some("python3"),
                    "Ch 0000000c caused by previous Xid 145"
                )
            ),
            (
                3,
                &xid(
                    "0000:3b:00",
                    None,
                    None,
                    79,
                    None,
                    None,
                    "GPU has fallen off the bus."
                )
            ),
            (
                5,
                &xid(
                    "0000:97:00",
                    None,
                    None,
                    45,
                    Some(1818987),
                    Some("python3"),
                    "Ch 00000003 caused by previous Xid 145"
                )
            ),
        ]
    );
    // The uptime after `kernel: ` is kept.
    assert_eq!(facts.kernel_events[2].time.uptime_us, Some(8_712_345_679));
}

/// The wordings of newer drivers, from real reports.
#[test]
fn newer_nvrm_wordings() {
    // 575+ (osapi.c names the client):
    // https://github.com/Frogging-Family/nvidia-all/issues/394
    // The three-line fall off the bus of a GPU that reads all ones, and the
    // open module's load line:
    // https://github.com/NVIDIA/NVSentinel/issues/155
    // RmInitAdapter with the device named (NV_DEV_PRINTF):
    // https://github.com/NVIDIA/gpu-operator/issues/1146
    let (facts, unrecognized) = dmesg("\
[    9.424670] NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)
               NVRM: has the version 595.84, but this kernel module has
               NVRM: the version 595.80.  Please make sure that this
               NVRM: kernel module and all NVIDIA driver components
               NVRM: have the same version.
[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).
[ 1843.439669] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  (dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025
[  218.250408] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)
[   15.000000] NVRM: RmInitAdapter failed! (0x26:0xffff:1227)");
    assert_eq!(unrecognized, 0);
    let got: Vec<(u32, &KernelEventKind, Vec<u32>)> = facts
        .kernel_events
        .iter()
        .map(|e| {
            (
                e.span.line,
                &e.kind,
                e.related.iter().map(|s| s.line).collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                1,
                &KernelEventKind::ApiMismatch {
                    client_version: "595.84".to_owned(),
                    kernel_version: Some("595.80".to_owned()),
                },
                vec![2, 3, 4, 5]
            ),
            (
                6,
                &KernelEventKind::FellOffBus {
                    bus_id: Some("0000:b3:00.0".to_owned())
                },
                vec![7, 8]
            ),
            (
                10,
                &KernelEventKind::DriverLoaded {
                    version: "570.158.01".to_owned(),
                    open: true
                },
                vec![]
            ),
            (
                11,
                &KernelEventKind::InitFailed {
                    bus_id: Some("0000:0a:00.0".to_owned()),
                    status: Some("0x24:0x72:1568".to_owned()),
                },
                vec![]
            ),
            (
                12,
                &KernelEventKind::InitFailed {
                    bus_id: None,
                    status: Some("0x26:0xffff:1227".to_owned()),
                },
                vec![]
            ),
        ]
    );
}

/// One journal message holds the whole report: rsyslog's `#012` newlines
/// (https://github.com/stackhpc/ansible-slurm-appliance/issues/287) and the
/// 575+ wording joined by spaces
/// (https://github.com/NVIDIA/open-gpu-kernel-modules/issues/829).
#[test]
fn a_mismatch_report_in_one_message() {
    let mut facts = Facts::default();
    let mut parser = KernelParser::default();
    assert!(parser.feed(
        "NVRM: API mismatch: the client has the version 535.54.03, but#012NVRM: this kernel module has the version 530.30.02.  Please#012NVRM: make sure that this kernel module and all NVIDIA driver#012NVRM: components have the same version.",
        at(1),
        None,
        &mut facts,
    ));
    assert!(parser.feed(
        "NVRM: API mismatch: the client 'nvidia-powerd' (pid 849) NVRM: has the version 570.133.07, but this kernel module has NVRM: the version 575.51.02.  Please make sure that this",
        at(2),
        None,
        &mut facts,
    ));
    let got: Vec<&KernelEventKind> = facts.kernel_events.iter().map(|e| &e.kind).collect();
    assert_eq!(
        got,
        vec![
            &KernelEventKind::ApiMismatch {
                client_version: "535.54.03".to_owned(),
                kernel_version: Some("530.30.02".to_owned()),
            },
            &KernelEventKind::ApiMismatch {
                client_version: "570.133.07".to_owned(),
                kernel_version: Some("575.51.02".to_owned()),
            },
        ]
    );
}

/// `cat /proc/driver/nvidia/version` (nv-procfs.c prints `NVRM version:
/// %s`; fixtures/real/011, illinois-scicomp/machine-shop-maintenance#70):
/// the loaded module's version, proprietary or open, and the compiler line.
#[test]
fn proc_driver_version_is_the_loaded_module() {
    let (facts, unrecognized) = dmesg("\
NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  Thu Oct  6 21:38:55 UTC 2022
GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)
NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  (dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025
NVRM version: something else
GCC version: unknown");
    assert_eq!(unrecognized, 2);
    let got: Vec<(u32, &KernelEventKind)> = facts
        .kernel_events
        .iter()
        .map(|e| (e.span.line, &e.kind))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                1,
                &KernelEventKind::DriverLoaded {
                    version: "520.56.06".to_owned(),
                    open: false
                }
            ),
            (
                3,
                &KernelEventKind::DriverLoaded {
                    version: "570.158.01".to_owned(),
                    open: true
                }
            ),
        ]
    );
}

/// Kernel lines quoted in a reply keep their `> ` (fixtures/real/095,
/// leptonai/gpud#46 with `dmesg --ctime` stamps; 115,
/// bare `NVRM:` lines): the quote marks go, the line reads as unquoted.
#[test]
fn quoted_kernel_lines_read_as_unquoted() {
    let (facts, unrecognized) = dmesg("\
> [Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x51df30=0x20d000e 0x51df34=0x20 0x51df28=0xc81eb60 0x51df2c=0x1174
>> NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)
> [Fri Aug 30 11:43:10 2024] some other kernel chatter");
    assert_eq!(unrecognized, 0);
    let got: Vec<u32> = xids(&facts).iter().map(|(_, x)| x.code).collect();
    assert_eq!(got, vec![13, 144]);
    assert!(facts.kernel_events[0].time.wall.is_some());
}

#[test]
fn a_line_cut_inside_its_uptime_is_still_read() {
    // fixtures/real/100: `38.773115] NVRM: RmInitAdapter failed! (…)`.
    let mut parser = KernelParser::default();
    let mut facts = Facts::default();
    let known = parser.feed(
        "38.773115] NVRM: RmInitAdapter failed! (0x26:0xffff:1127)",
        at(1),
        None,
        &mut facts,
    );
    assert!(known);
    assert!(matches!(
        facts.kernel_events.as_slice(),
        [KernelEvent {
            kind: KernelEventKind::InitFailed { .. },
            time: KernelTime {
                uptime_us: None,
                ..
            },
            ..
        }]
    ));
}

#[test]
fn an_indented_later_line_pasted_alone_is_read() {
    // fixtures/wordings/nvrm-fallen-off-bus.toml, wording 2.
    let mut parser = KernelParser::default();
    let mut facts = Facts::default();
    let known = parser.feed(
        "               NVRM: fallen off the bus and is not responding to commands.",
        at(1),
        None,
        &mut facts,
    );
    assert!(known);
    assert!(matches!(
        facts.kernel_events.as_slice(),
        [KernelEvent {
            kind: KernelEventKind::FellOffBus { bus_id: None },
            ..
        }]
    ));
}

#[test]
fn the_575_mismatch_in_dmesg_has_both_versions() {
    // fixtures/real/085 (https://github.com/Frogging-Family/nvidia-all/issues/394).
    let (facts, unrecognized) = dmesg(
        "[    9.424670] NVRM: API mismatch: the client 'kwin_wayland' (pid 1005)\n               NVRM: has the version 595.84, but this kernel module has\n               NVRM: the version 595.80.  Please make sure that this\n               NVRM: kernel module and all NVIDIA driver components\n               NVRM: have the same version.\n",
    );
    assert_eq!(unrecognized, 0);
    let [event] = facts.kernel_events.as_slice() else {
        panic!("one event: {:?}", facts.kernel_events);
    };
    assert_eq!(
        event.kind,
        KernelEventKind::ApiMismatch {
            client_version: "595.84".to_owned(),
            kernel_version: Some("595.80".to_owned()),
        }
    );
    assert_eq!(event.span, at(1));
    assert_eq!(event.related.len(), 4);
}

#[test]
fn a_fall_off_the_bus_names_a_bus_id_written_without_its_domain() {
    // lspci's short form (`18:00.0`) is domain 0; a clock time is no bus id.
    let (facts, _) = dmesg(
        "\
[  100.000001] NVRM: GPU 18:00.0: GPU has fallen off the bus.
[  100.000002] NVRM: at 12:34 the GPU has fallen off the bus.",
    );
    let buses: Vec<Option<&str>> = facts
        .kernel_events
        .iter()
        .filter_map(|e| match &e.kind {
            KernelEventKind::FellOffBus { bus_id } => Some(bus_id.as_deref()),
            _ => None,
        })
        .collect();
    assert_eq!(buses, [Some("0000:18:00.0"), None]);
}

/// NVIDIA's Xid documentation ("Viewing Xid messages",
/// https://docs.nvidia.com/deploy/xid-errors/index.html) shows the older
/// driver's pair without `PCI:`; a person's `[...]` in front of each is
/// a frame (`ingest::frame`), peeled before this parser sees the line.
#[test]
fn the_older_pair_without_pci() {
    let (facts, unrecognized) = dmesg(
        "\
NVRM: GPU at 0000:03:00: GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7
NVRM: Xid (0000:03:00): 14, Channel 00000001",
    );
    assert_eq!(unrecognized, 0);
    let at_bus = facts.kernel_events.iter().find_map(|e| match &e.kind {
        KernelEventKind::GpuAtBus { bus_id, uuid } => Some((bus_id.clone(), uuid.clone())),
        _ => None,
    });
    assert_eq!(
        at_bus,
        Some((
            "0000:03:00.0".to_owned(),
            "GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7".to_owned()
        ))
    );
    let got: Vec<(u32, u32, Option<String>)> = xids(&facts)
        .into_iter()
        .map(|(l, x)| (l, x.code, x.bus_id.clone()))
        .collect();
    assert_eq!(got, vec![(2, 14, Some("0000:03:00".to_owned()))]);
}

/// The position readers answer as the regexes they stand in for: the
/// uptime's µs and where the message starts, and `kernel: `'s end, on the
/// shapes a kernel line takes and near misses of each.
#[test]
fn the_position_readers_answer_as_their_regexes() {
    let by_regex = |m: &str| -> (Option<u64>, usize) {
        let Some(c) = UPTIME.captures(m) else {
            return (None, 0);
        };
        let frac = format!("{:0<6}", &c["frac"]);
        let us: Option<u64> = frac.get(..6).and_then(|f| f.parse().ok());
        let secs: Option<u64> = c["s"].parse().ok();
        let uptime = secs
            .zip(us)
            .and_then(|(s, us)| s.checked_mul(1_000_000)?.checked_add(us));
        (uptime, c.get(0).map_or(0, |m| m.end()))
    };
    let lines = [
        "[ 8712.345678] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "[    0.000000] Linux version 6.8.0",
        "[8712.345678]NVRM: no space",
        "[ 8712.345] three digits",
        "[ 8712.123456789] nine digits",
        "[ 8712.1234567890] ten digits",
        "[ 8712.345678 <    0.000123>] dmesg -d",
        "[ 8712.] no fraction",
        "[ .345678] no seconds",
        "[ 8712.345678 ] space before the bracket",
        "[99999999999999999999.000001] overflow",
        "[18446744073709.551615] at the edge",
        "[18446744073710.000000] past the edge",
        "[Sat Jun  1 12:00:03 2024] ctime",
        "[  +0.000123] reltime",
        "NVRM: no bracket",
        "[",
        "",
    ];
    for line in lines {
        let (uptime, rest) = split_uptime(line);
        let (want, end) = by_regex(line);
        assert_eq!((uptime, rest), (want, &line[end..]), "{line:?}");
    }
    for message in [
        "kernel: NVRM: x",
        "host kernel:  [ 1.000000] x",
        "host kernel:x",
        "host\tkernel: x",
        " kernel: x",
        "a b kernel: x",
        "kernel:",
        "NVRM: kernel: x",
        "hostkernel: x",
        "",
    ] {
        let want = KERNEL_PREFIX.find(message).map(|m| m.end());
        assert_eq!(kernel_prefix_end(message), want, "{message:?}");
    }
}
