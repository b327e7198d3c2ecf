//! The bag of facts one analysis extracts from all of its inputs.

use super::CallGraphLine;
use super::CoreDump;
use super::DeviceHolder;
use super::EnvReport;
use super::GpuMention;
use super::InstanceRow;
use super::KernelModule;
use super::Listener;
use super::PackageChange;
use super::Timestamp;
use super::TypedCommand;
use super::{ContainerRow, ContainerState};
use super::{DiagResult, NvlinkStates};
use super::{GpuHealth, KernelEvent, ProcCgroup, UnitProperties};
use super::{
    GpuProcessRecord, GpuRecord, JournalEntry, Message, ProcessListing, PsRecord, Repeat, Resumed,
    ServerEvent, SmiHeader, UnitStatus,
};
use crate::source::Span;

/// Everything ingest found, in input order. Correlation joins these.
#[derive(Debug, Default)]
pub struct Facts {
    pub smi_headers: Vec<SmiHeader>,
    pub gpus: Vec<GpuRecord>,
    pub gpu_processes: Vec<GpuProcessRecord>,
    /// One per process table / compute-apps query, so "no rows" is itself a fact.
    pub process_listings: Vec<ProcessListing>,
    pub journal: Vec<JournalEntry>,
    pub unit_statuses: Vec<UnitStatus>,
    pub server_events: Vec<ServerEvent>,
    pub ps: Vec<PsRecord>,
    /// Lines that contain a rule anchor, in input order (see `ingest::Anchors`).
    pub messages: Vec<Message>,
    /// One per GPU block of `nvidia-smi -q` / `-q -x`.
    pub gpu_health: Vec<GpuHealth>,
    /// `dcgmi diag` results that are not a pass.
    pub diag_results: Vec<DiagResult>,
    pub kernel_events: Vec<KernelEvent>,
    /// One per unit of `systemctl show`.
    pub unit_properties: Vec<UnitProperties>,
    /// One per process of `/proc/PID/cgroup`.
    pub proc_cgroups: Vec<ProcCgroup>,
    /// `python -m sglang.check_env` listings.
    pub env_reports: Vec<EnvReport>,
    /// Package changes from apt's history and dpkg's log.
    pub package_changes: Vec<PackageChange>,
    /// The time of lines that make no other timed fact (every prefixed server
    /// log line, nvidia-smi's date line), for the timeline.
    pub line_times: Vec<(Span, Timestamp)>,
    /// Templates of lines seen more often than read (`ingest::Repeats`),
    /// by input and first line.
    pub repeats: Vec<Repeat>,
    /// Listening sockets and their processes (`ss -ltnp`).
    pub listeners: Vec<Listener>,
    /// Containers `docker inspect` shows: state, command, GPUs.
    pub containers: Vec<ContainerState>,
    /// Containers `docker ps` lists: name, age, status.
    pub container_rows: Vec<ContainerRow>,
    /// Instances a serving control plane lists (GPUStack's model
    /// instances: name, worker, port, state), read from its table.
    pub instances: Vec<InstanceRow>,
    /// Per input, vLLM's engine moving after its last wait for its workers.
    pub resumed: Vec<Resumed>,
    /// Core dumps `coredumpctl info` shows.
    pub core_dumps: Vec<CoreDump>,
    /// Loaded kernel modules (`lsmod`).
    pub kernel_modules: Vec<KernelModule>,
    /// Blocks of host output that stand inside another format's input.
    pub embedded: Vec<EmbeddedBlock>,
    /// Every segment of a command's report of the host (an nvidia-smi
    /// table, `ps` rows, `nvidia-smi -q`), by its first line and last line
    /// number: a snapshot pasted after a log is not the log going on.
    pub host_reports: Vec<(Span, u32)>,
    /// GPU indices a line names without a record of the GPU (an idle row of
    /// `nvidia-smi pmon`, a test harness's memory summary), with the line:
    /// the inventory lists them; no rule reads them as a GPU's state.
    pub gpu_mentions: Vec<GpuMention>,
    /// PIDs a test harness says it left alive after stopping what it
    /// started (vllm-omni's `Warning: Processes still alive: [30951,
    /// 30954]`), with the line.
    pub leftover_pids: Vec<(u32, Span)>,
    /// Processes with a GPU's device node open (`fuser -v /dev/nvidia*`).
    pub device_holders: Vec<DeviceHolder>,
    /// The writers frames name (`snap logs`' `gemma3.server[391350]: `):
    /// each `ident[pid]` once, at its first line.
    pub frame_writers: Vec<(String, u32, Span)>,
    /// Where each input ends: its last line that is not blank. A start-up
    /// milestone there is the last thing the paste shows.
    pub input_ends: Vec<Span>,
    /// Commands typed at a shell prompt, with how much each printed, in
    /// input order (at most [`MAX_TYPED_COMMANDS`] an input).
    pub typed_commands: Vec<TypedCommand>,
    /// The rows of `dcgmi nvlink --link-status`: each GPU's and NVSwitch's
    /// link states.
    pub nvlink_states: Vec<NvlinkStates>,
    /// The lines of macOS `sample`'s call graphs, in input order.
    pub call_graph: Vec<CallGraphLine>,
}

/// How many typed commands an input's facts keep.
pub const MAX_TYPED_COMMANDS: usize = 4096;

/// A block of host output (an nvidia-smi table, `ps` rows, a `systemctl
/// status`) that stands inside another format's input: printed into a
/// server log, or below a log in a paste with no prompt between them. What
/// it says is weaker evidence than the same block in its own input, never
/// enough by itself for a destructive step (docs/remediation.md, "Where a
/// fact comes from").
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedBlock {
    /// Its first line.
    pub first: Span,
    pub last_line: u32,
    /// Its format's name (`nvidia-smi-table`).
    pub format: &'static str,
    /// The name of the format of the log it stands inside (`sglang-log`).
    pub inside: &'static str,
}

impl EmbeddedBlock {
    pub fn contains(&self, span: Span) -> bool {
        span.source == self.first.source && (self.first.line..=self.last_line).contains(&span.line)
    }
}

impl Facts {
    /// Appends `other`'s facts after these, field by field: the facts of
    /// inputs read apart, joined in input order. Every field must be here.
    pub fn append(&mut self, other: Facts) {
        let Facts {
            smi_headers,
            gpus,
            gpu_processes,
            process_listings,
            journal,
            unit_statuses,
            server_events,
            ps,
            messages,
            gpu_health,
            diag_results,
            kernel_events,
            unit_properties,
            proc_cgroups,
            env_reports,
            package_changes,
            line_times,
            repeats,
            listeners,
            containers,
            container_rows,
            instances,
            resumed,
            core_dumps,
            kernel_modules,
            embedded,
            host_reports,
            gpu_mentions,
            leftover_pids,
            device_holders,
            frame_writers,
            input_ends,
            typed_commands,
            nvlink_states,
            call_graph,
        } = other;
        self.smi_headers.extend(smi_headers);
        self.gpus.extend(gpus);
        self.gpu_processes.extend(gpu_processes);
        self.process_listings.extend(process_listings);
        self.journal.extend(journal);
        self.unit_statuses.extend(unit_statuses);
        self.server_events.extend(server_events);
        self.ps.extend(ps);
        self.messages.extend(messages);
        self.gpu_health.extend(gpu_health);
        self.diag_results.extend(diag_results);
        self.kernel_events.extend(kernel_events);
        self.unit_properties.extend(unit_properties);
        self.proc_cgroups.extend(proc_cgroups);
        self.env_reports.extend(env_reports);
        self.package_changes.extend(package_changes);
        self.line_times.extend(line_times);
        self.repeats.extend(repeats);
        self.listeners.extend(listeners);
        self.containers.extend(containers);
        self.container_rows.extend(container_rows);
        self.instances.extend(instances);
        self.resumed.extend(resumed);
        self.core_dumps.extend(core_dumps);
        self.kernel_modules.extend(kernel_modules);
        self.embedded.extend(embedded);
        self.host_reports.extend(host_reports);
        self.gpu_mentions.extend(gpu_mentions);
        self.leftover_pids.extend(leftover_pids);
        self.device_holders.extend(device_holders);
        self.frame_writers.extend(frame_writers);
        self.input_ends.extend(input_ends);
        self.typed_commands.extend(typed_commands);
        self.nvlink_states.extend(nvlink_states);
        self.call_graph.extend(call_graph);
    }
}
