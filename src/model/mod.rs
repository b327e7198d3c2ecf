//! Plain typed facts extracted from the inputs. No parsing, no I/O, no serde.
//!
//! Every record carries the [`Span`](crate::source::Span) of the line it came
//! from; ingest fills a [`Facts`] and everything downstream reads it.

mod bus_id;
mod call_graph;
mod cgroup;
mod container;
mod coredump;
mod cuda;
mod diag;
mod dist;
mod env_report;
mod facts;
mod failure;
mod gpu;
mod gpu_health;
mod instance;
mod journal;
mod kernel;
mod kernel_module;
mod listener;
mod message;
mod names;
mod package;
mod process;
mod progress;
mod server;
mod startup;
mod time;
mod unit;
mod unit_properties;
mod verdict;

pub use bus_id::BusId;
pub use call_graph::CallGraphLine;
pub use cgroup::{CgroupOwner, ProcCgroup};
pub use container::{ContainerRow, ContainerState};
pub use coredump::CoreDump;
pub use cuda::{CudaOom, OomSource, ProcessMemory};
pub use diag::{DiagOutcome, DiagResult, NvlinkStates};
pub use dist::{NcclDetail, NcclLevel, NcclLine, TorchDist, TorchDistKind};
pub use env_report::{EnvGpu, EnvReport, Topology, TopologyRow};
pub use facts::{EmbeddedBlock, Facts, MAX_TYPED_COMMANDS};
pub use failure::{ChainLink, Chained, CppAbort, Frame, PyException, VllmFailure};
pub use gpu::{
    GpuMention, GpuProcessRecord, GpuRecord, ProcessListing, ProcessListingKind, SmiHeader,
};
pub use gpu_health::{EccCounter, EccKind, EccScope, GpuHealth, Reading, SickValue, celsius};
pub use instance::InstanceRow;
pub use journal::{JournalEntry, is_manager_message};
pub use kernel::{KernelEvent, KernelEventKind, KernelTime, OomKill, OomTask, Xid};
pub use kernel_module::KernelModule;
pub use listener::{DeviceHolder, Listener};
pub use message::{Message, Repeat};
pub use names::{
    GpuUuid, Hostname, InvalidValue, Pid, Port, ProcessName, ServerFlag, StartTime, UnitName,
};
pub use package::{PackageAction, PackageChange};
pub use process::{PsRecord, TypedCommand};
pub use progress::Resumed;
pub use server::{
    Framework, MemoryImbalance, RankTag, ServerArgs, ServerEvent, ServerEventKind, ServerProcess,
    root_cause,
};
pub use startup::{Landmark, Uvicorn};
pub use time::Timestamp;
pub use unit::{CgroupMember, UnitProcess, UnitStatus};
pub use unit_properties::UnitProperties;
pub use verdict::{Category, Severity};
