//! What the kernel logged that matters to a GPU server: NVIDIA driver (NVRM)
//! reports and OOM-killer kills, whichever wrapper (dmesg, journal, syslog)
//! carried them.

use super::Timestamp;
use crate::source::Span;

/// When a kernel message was logged, as its wrapper printed it. The two
/// clocks are kept apart: uptime is exact but relative to boot, wall time is
/// absolute but `dmesg -T` computes it and drifts after suspend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelTime {
    /// `[ 8712.345678]`: microseconds since boot, when printk time was on.
    pub uptime_us: Option<u64>,
    /// `dmesg -T`, `--time-format iso`, the journal's or syslog's timestamp.
    pub wall: Option<Timestamp>,
}

/// `NVRM: Xid (PCI:0000:3b:00): 79, pid=4318, name=sglang::schedul, …`
#[derive(Debug, Clone, PartialEq)]
pub struct Xid {
    /// As the line prints it, in lower case: `dddd:bb:dd`, the driver's
    /// spelling, without a function (`dddd:bb:dd.f` where a line prints
    /// one). Compare through `BusId`, which reads both.
    pub bus_id: Option<String>,
    /// `GPU-I:` of a MIG GPU instance.
    pub gpu_instance: Option<u32>,
    /// `GPU-CI:` of a MIG compute instance.
    pub compute_instance: Option<u32>,
    pub code: u32,
    /// The process that owned the faulting channel; `None` for `'<unknown>'`
    /// and for drivers that print no pid.
    pub pid: Option<u32>,
    /// Its 15-byte `comm` (`sglang::schedul`); `None` for `<unknown>`.
    pub name: Option<String>,
    /// The text after the pid and name (`GPU has fallen off the bus.`).
    pub message: String,
    /// Xid 154: the recovery the driver now asks for (`Node Reboot Required`).
    pub recovery_action: Option<String>,
}

/// One row of the OOM killer's task table; sizes are in pages, as printed.
#[derive(Debug, Clone, PartialEq)]
pub struct OomTask {
    pub pid: u32,
    pub uid: u32,
    pub tgid: u32,
    pub total_vm_pages: u64,
    pub rss_pages: u64,
    pub oom_score_adj: i32,
    pub name: String,
    pub span: Span,
}

/// One OOM kill: the `invoked oom-killer` line, the task table, the
/// `oom-kill:` summary, the `Killed process` line and the reaper's line,
/// whichever of them the capture kept. Sizes are KiB, as printed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OomKill {
    /// The victim; `None` only when the report was cut before naming it.
    pub pid: Option<u32>,
    /// The victim's 15-byte `comm`.
    pub comm: Option<String>,
    /// `Memory cgroup out of memory` (a cgroup limit such as `MemoryMax=`)
    /// rather than `Out of memory` (the whole host).
    pub cgroup_limit: bool,
    /// The `comm` of the task whose allocation invoked the killer.
    pub invoked_by: Option<String>,
    pub total_vm_kb: Option<u64>,
    pub anon_rss_kb: Option<u64>,
    pub file_rss_kb: Option<u64>,
    pub shmem_rss_kb: Option<u64>,
    pub uid: Option<u32>,
    pub oom_score_adj: Option<i32>,
    /// `CONSTRAINT_NONE`, `CONSTRAINT_MEMCG`, …
    pub constraint: Option<String>,
    /// The victim's cgroup (`/system.slice/sglang.service`): its unit.
    pub task_memcg: Option<String>,
    /// The cgroup whose limit was hit, for cgroup OOMs.
    pub oom_memcg: Option<String>,
    pub global_oom: bool,
    /// `memory: usage N kB, limit N kB` of a cgroup OOM.
    pub memcg_usage_kb: Option<u64>,
    pub memcg_limit_kb: Option<u64>,
    pub tasks: Vec<OomTask>,
    /// `oom_reaper: reaped process N`: its memory was given back.
    pub reaped: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum KernelEventKind {
    Xid(Xid),
    /// `NVRM: GPU at PCI:0000:3b:00: GPU-…`: maps a bus id to a UUID.
    GpuAtBus {
        bus_id: String,
        uuid: String,
    },
    /// `NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.`, with or
    /// without an Xid 79 next to it.
    FellOffBus {
        bus_id: Option<String>,
    },
    /// `… [NV_ERR_GPU_IS_LOST]`: the driver lost a GPU (noise after a fall
    /// off the bus, but evidence of one when the Xid scrolled away).
    GpuLost {
        message: String,
    },
    /// `NVRM: API mismatch: the client has the version X, but / NVRM: this
    /// kernel module has the version Y.`: user-space libraries and the
    /// loaded kernel module differ.
    ApiMismatch {
        client_version: String,
        kernel_version: Option<String>,
    },
    /// `NVRM: loading NVIDIA UNIX [Open Kernel Module for ]x86_64 … 535.183.01`.
    DriverLoaded {
        version: String,
        open: bool,
    },
    /// `NVRM: [GPU 0000:3b:00.0: ]RmInitAdapter failed! (0x26:0xffff:1227)`:
    /// the driver could not bring a GPU up (failed GPU, a fall off the bus,
    /// a firmware or driver mismatch); `status` is the printed triple.
    InitFailed {
        bus_id: Option<String>,
        status: Option<String>,
    },
    /// An NVRM line about a GSP firmware RPC timeout outside an Xid line.
    GspTimeout {
        message: String,
    },
    /// An NVRM line about ECC errors, row remapping or page retirement
    /// outside an Xid line.
    Ecc {
        message: String,
    },
    OomKill(OomKill),
}

#[derive(Debug, Clone, PartialEq)]
pub struct KernelEvent {
    pub kind: KernelEventKind,
    pub time: KernelTime,
    /// The line that states the event (the Xid line, the `Killed process` line).
    pub span: Span,
    /// The other lines of the same report, in input order.
    pub related: Vec<Span>,
}
