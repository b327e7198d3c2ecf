//! The vocabulary of formats: every layout rootcause reads, by the name
//! `rootcause inputs` and `--format-hint` use. A leaf: the detector, the
//! parsers, the report and the flags all name a [`Format`], and it names
//! none of them.

use std::fmt;
use std::str::FromStr;

/// Every input format rootcause reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    SglangLog,
    NvidiaSmiTable,
    NvidiaSmiQueryGpu,
    NvidiaSmiComputeApps,
    JournalShort,
    JournalShortIso,
    JournalShortFull,
    JournalShortUnix,
    JournalShortMonotonic,
    JournalShortDelta,
    JournalWithUnit,
    JournalVerbose,
    /// `journalctl -o cat`: only with `--format-hint`, never detected.
    JournalCat,
    JournalJson,
    SystemctlStatus,
    Ps,
    /// `nvidia-smi -q` text.
    NvidiaSmiQ,
    /// `nvidia-smi -q -x` XML.
    NvidiaSmiQXml,
    NvidiaSmiPmon,
    /// `nvidia-smi -L` and `nvidia-smi nvlink --status`: `GPU N: NAME (UUID: …)` lines.
    NvidiaSmiList,
    /// `nvidia-ctk cdi list`: the CDI device names (`nvidia.com/gpu=0`).
    NvidiaCtkCdiList,
    /// `ss -ltnp`: listening sockets and the processes that hold them.
    Ss,
    /// `lsmod`: loaded kernel modules and their use counts.
    Lsmod,
    /// `coredumpctl info`: a core dump's PID, signal, time and unit.
    Coredumpctl,
    /// `gpustat`: one `[0] NAME | 48'C, 7 % | 213 / 1995 MB |` line per GPU.
    Gpustat,
    /// `dmesg` in any of its time formats.
    Dmesg,
    SystemctlShow,
    /// A unit file (`systemctl cat`, `cat /etc/systemd/system/x.service`).
    SystemdUnitFile,
    /// `/proc/PID/cgroup` contents.
    ProcCgroup,
    /// Lines such as `root@host:~# nvidia-smi` between the pieces of a paste.
    ShellPrompt,
    VllmLog,
    /// NCCL debug lines (`host:pid:tid [dev] NCCL WARN …`) on their own.
    NcclLog,
    /// PyTorch c10 lines (`[E601 … ProcessGroupNCCL.cpp:629]`) and
    /// `[rank0]:`-prefixed output on their own.
    TorchLog,
    /// A Python traceback with no server prefix around it.
    PythonTraceback,
    /// Ray actor output: `(WorkerDict pid=…, ip=…) …`.
    RayLog,
    /// `docker compose logs`/`up`: `service-1  | …`.
    DockerComposeLog,
    /// A log viewer's RFC 3339 timestamp in front of each line
    /// (`docker logs -t`, `kubectl logs --timestamps`).
    ContainerLog,
    /// `python -m sglang.check_env`.
    SglangCheckEnv,
    /// apt's `history.log` and `dpkg.log`: package upgrades and installs.
    PackageLog,
    /// `python -m torch.utils.collect_env` (and vLLM's `collect_env.py`).
    TorchCollectEnv,
    Unknown,
}

impl Format {
    pub const ALL: [Format; 41] = [
        Format::SglangLog,
        Format::NvidiaSmiTable,
        Format::NvidiaSmiQueryGpu,
        Format::NvidiaSmiComputeApps,
        Format::JournalShort,
        Format::JournalShortIso,
        Format::JournalShortFull,
        Format::JournalShortUnix,
        Format::JournalShortMonotonic,
        Format::JournalShortDelta,
        Format::JournalWithUnit,
        Format::JournalVerbose,
        Format::JournalCat,
        Format::JournalJson,
        Format::SystemctlStatus,
        Format::Ps,
        Format::NvidiaSmiQ,
        Format::NvidiaSmiQXml,
        Format::NvidiaSmiPmon,
        Format::NvidiaSmiList,
        Format::NvidiaCtkCdiList,
        Format::Gpustat,
        Format::Ss,
        Format::Lsmod,
        Format::Coredumpctl,
        Format::Dmesg,
        Format::SystemctlShow,
        Format::SystemdUnitFile,
        Format::ProcCgroup,
        Format::ShellPrompt,
        Format::VllmLog,
        Format::NcclLog,
        Format::TorchLog,
        Format::PythonTraceback,
        Format::RayLog,
        Format::DockerComposeLog,
        Format::ContainerLog,
        Format::SglangCheckEnv,
        Format::PackageLog,
        Format::TorchCollectEnv,
        Format::Unknown,
    ];

    /// The stable name used in reports and in `--format-hint`.
    pub fn name(self) -> &'static str {
        match self {
            Format::SglangLog => "sglang-log",
            Format::NvidiaSmiTable => "nvidia-smi-table",
            Format::NvidiaSmiQueryGpu => "nvidia-smi-query-gpu-csv",
            Format::NvidiaSmiComputeApps => "nvidia-smi-compute-apps-csv",
            Format::JournalShort => "journal-short",
            Format::JournalShortIso => "journal-short-iso",
            Format::JournalShortFull => "journal-short-full",
            Format::JournalShortUnix => "journal-short-unix",
            Format::JournalShortMonotonic => "journal-short-monotonic",
            Format::JournalShortDelta => "journal-short-delta",
            Format::JournalWithUnit => "journal-with-unit",
            Format::JournalVerbose => "journal-verbose",
            Format::JournalCat => "journal-cat",
            Format::JournalJson => "journal-json",
            Format::SystemctlStatus => "systemctl-status",
            Format::Ps => "ps",
            Format::NvidiaSmiQ => "nvidia-smi-q",
            Format::NvidiaSmiQXml => "nvidia-smi-q-xml",
            Format::NvidiaSmiPmon => "nvidia-smi-pmon",
            Format::NvidiaSmiList => "nvidia-smi-list",
            Format::NvidiaCtkCdiList => "nvidia-ctk-cdi-list",
            Format::Gpustat => "gpustat",
            Format::Ss => "ss",
            Format::Lsmod => "lsmod",
            Format::Coredumpctl => "coredumpctl",
            Format::Dmesg => "dmesg",
            Format::SystemctlShow => "systemctl-show",
            Format::SystemdUnitFile => "systemd-unit-file",
            Format::ProcCgroup => "proc-cgroup",
            Format::ShellPrompt => "shell-prompt",
            Format::VllmLog => "vllm-log",
            Format::NcclLog => "nccl-log",
            Format::TorchLog => "torch-log",
            Format::PythonTraceback => "python-traceback",
            Format::RayLog => "ray-log",
            Format::DockerComposeLog => "docker-compose-log",
            Format::ContainerLog => "container-log",
            Format::SglangCheckEnv => "sglang-check-env",
            Format::PackageLog => "package-log",
            Format::TorchCollectEnv => "torch-collect-env",
            Format::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("unknown format `{s}`"))
    }
}
