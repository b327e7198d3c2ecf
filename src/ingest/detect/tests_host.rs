//! Detection of what a GPU host writes besides the server log: dmesg in every
//! time format, nvidia-smi `-q`/`-q -x`/`pmon`, `systemctl show`,
//! `/proc/PID/cgroup`, and the near-misses that must stay what they are.

use super::*;

fn formats(text: &str) -> Vec<(Format, u32, u32)> {
    let source = Source::new("t", text.as_bytes());
    segment(SourceId(0), &source)
        .into_iter()
        .map(|s| (s.format, s.first_line, s.last_line))
        .collect()
}

#[test]
fn each_dmesg_time_format_is_dmesg() {
    for line in [
        "[ 8712.345678] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "[    0.000000] Linux version 6.1.0-21-amd64",
        "[Sat Jun  1 12:00:03 2024] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "2024-06-01T12:00:03,345678+00:00 NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "kern  :warn  : [ 8712.345678] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "kern  :err   : [Sat Jun  1 12:00:03 2024] NVRM: API mismatch: the client has the version 535.183.01, but",
        "<4>[ 8712.345678] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception",
        "4,1227,437812449,c;NVRM: Xid (PCI:0000:01:00): 43, pid=1814139, name=cuda_assert_64b, Ch 00000018",
        "6,2035,8712345679,-,caller=T4318;nvidia 0000:3b:00.0: AER: aer_status: 0x00000020, aer_mask: 0x00000000",
        "[ 8712.345678 <    0.000012>] NVRM: GPU at PCI:0000:3b:00: GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14",
        "[  +0.000012] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "[Jun  1 12:00] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
        "Out of memory: Killed process 4242 (python3) total-vm:412345676kB, anon-rss:187654320kB, file-rss:123456kB",
    ] {
        assert_eq!(formats(line), vec![(Format::Dmesg, 1, 1)], "{line}");
    }
}

#[test]
fn kernel_lines_in_journal_shape_stay_journal() {
    for (line, format) in [
        // journalctl -k
        (
            "Jun 01 12:00:03 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
            Format::JournalShort,
        ),
        // rsyslog traditional kern.log, uptime kept
        (
            "Jun  1 12:00:03 gpu-node-7 kernel: [ 8712.345678] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
            Format::JournalShort,
        ),
        // rsyslog RFC 3339 (Debian 12's default)
        (
            "2024-06-01T12:00:03.345678+00:00 gpu-node-7 kernel: [ 8712.345678] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
            Format::JournalShortIso,
        ),
        (
            "2024-06-01T12:00:03+0000 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
            Format::JournalShortIso,
        ),
    ] {
        assert_eq!(formats(line), vec![(format, 1, 1)], "{line}");
    }
}

#[test]
fn xid_quoted_by_other_writers_is_not_dmesg() {
    // An SGLang message mentioning an Xid inside a journal line.
    assert_eq!(
        formats(
            "Jun 01 12:00:04 gpu-node-7 python3[4242]: [2024-06-01 12:00:04 TP0] RuntimeError: CUDA error: unspecified launch failure (NVRM: Xid 79 on GPU 0?)"
        ),
        vec![(Format::JournalShort, 1, 1)]
    );
    // The same in a plain SGLang log.
    assert_eq!(
        formats("[2024-06-01 12:00:04 TP0] NVRM: Xid (PCI:0000:3b:00): 79 seen in dmesg, exiting"),
        vec![(Format::SglangLog, 1, 1)]
    );
    // A bracketed time that is not a kernel uptime (no microseconds).
    assert_eq!(formats("[12.5] something"), vec![(Format::Unknown, 1, 1)]);
}

#[test]
fn nvidia_smi_query_pmon_and_xml() {
    assert_eq!(
        formats(include_str!(
            "../../../fixtures/formats/nvidia-smi-q/h100-550-remap-pending.txt"
        )),
        vec![(Format::NvidiaSmiQ, 1, 125)]
    );
    assert_eq!(
        formats(include_str!(
            "../../../fixtures/formats/nvidia-smi-q-xml/h100-550.xml"
        )),
        vec![(Format::NvidiaSmiQXml, 1, 122)]
    );
    assert_eq!(
        formats(include_str!(
            "../../../fixtures/formats/nvidia-smi-pmon/550-default.txt"
        )),
        vec![(Format::NvidiaSmiPmon, 1, 8)]
    );
    // A -q -x paste cut to a GPU's sections, without its document: the
    // sections of https://github.com/1Panel-dev/1Panel/issues/11910 (as
    // the thread renders them); a journal line after them is its own.
    assert_eq!(
        formats(
            "                <encoder_stats>\n                        <session_count>1</session_count>\n                        <average_fps>93</average_fps>\n                </encoder_stats>\n                <fbc_stats>\n                        <session_count>0</session_count>\n                </fbc_stats>\nMar 03 10:00:00 host kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off the bus.\n"
        ),
        vec![(Format::NvidiaSmiQXml, 1, 7), (Format::JournalShort, 8, 8)]
    );
    // XML of other programs is not nvidia-smi's.
    assert_ne!(
        formats("<config>\n  <temperature>40</temperature>\n</config>\n")[0].0,
        Format::NvidiaSmiQXml
    );
    // A -q paste that starts at a GPU block.
    assert_eq!(
        formats(
            "GPU 00000000:18:00.0\n    Product Name                          : NVIDIA H100 80GB HBM3\n"
        ),
        vec![(Format::NvidiaSmiQ, 1, 2)]
    );
}

#[test]
fn systemctl_show_and_proc_cgroup() {
    assert_eq!(
        formats(include_str!(
            "../../../fixtures/formats/systemctl-show/two-units.txt"
        )),
        vec![(Format::SystemctlShow, 1, 46)]
    );
    for text in [
        "0::/system.slice/sglang.service",
        "1:name=systemd:/system.slice/sglang.service",
        "12:cpu,cpuacct:/",
        "/proc/4318/cgroup:0::/system.slice/sglang.service",
        "4318:0::/system.slice/sglang.service",
        "$ cat /proc/4318/cgroup\n0::/system.slice/sglang.service",
        "==> /proc/4318/cgroup <==\n0::/system.slice/sglang.service",
    ] {
        let lines = text.lines().count() as u32;
        assert_eq!(
            formats(text),
            vec![(Format::ProcCgroup, 1, lines)],
            "{text}"
        );
    }
}

#[test]
fn a_host_paste_falls_apart_into_its_pieces() {
    let paste = "\
root@gpu-node-7:~# cat /proc/20629/cgroup
0::/system.slice/ddtree-qwen.service
root@gpu-node-7:~# systemctl show ddtree-qwen -p MainPID -p ActiveState
MainPID=20629
ActiveState=active
root@gpu-node-7:~# dmesg -T | grep -i xid
[Sat Jun  1 12:00:03 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus.
root@gpu-node-7:~# nvidia-smi pmon -c 1
# gpu         pid   type     sm    mem    enc    dec    command
# Idx           #    C/G      %      %      %      %    name
    0      20629     C      0      0      -      -    python3
root@gpu-node-7:~# nvidia-smi -q -d MEMORY
==============NVSMI LOG==============
Timestamp                                 : Sat Jun  1 12:00:09 2024
Driver Version                            : 550.127.05
Attached GPUs                             : 1
GPU 00000000:3B:00.0
    FB Memory Usage
        Total                             : 81559 MiB
        Used                              : 55286 MiB
root@gpu-node-7:~# journalctl -k -n 1
Jun 01 12:00:03 gpu-node-7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, GPU has fallen off the bus.
# this is a comment, not a pmon header
";
    assert_eq!(
        formats(paste),
        vec![
            (Format::ProcCgroup, 1, 2),
            (Format::SystemctlShow, 3, 5),
            (Format::ShellPrompt, 6, 6),
            (Format::Dmesg, 7, 7),
            (Format::ShellPrompt, 8, 8),
            (Format::NvidiaSmiPmon, 9, 11),
            (Format::ShellPrompt, 12, 12),
            (Format::NvidiaSmiQ, 13, 20),
            (Format::ShellPrompt, 21, 21),
            (Format::JournalShort, 22, 22),
            (Format::ShellPrompt, 23, 23),
        ]
    );
}

#[test]
fn unit_file_keys_alone_are_not_systemctl_show() {
    // `Description=` and `ExecStart=` are unit-file keys too: they only
    // continue a `systemctl show` block, never start one.
    assert_eq!(
        formats("Description=SGLang\nExecStart=/opt/sglang/start.sh"),
        vec![(Format::Unknown, 1, 2)]
    );
}
