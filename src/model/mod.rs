//! Plain typed facts extracted from the inputs. No parsing, no I/O, no serde.
//!
//! Every record carries the [`Span`](crate::source::Span) of the line it came
//! from; ingest fills a [`Facts`] and everything downstream reads it.

mod facts;
mod gpu;
mod journal;
mod names;
mod process;
mod server;
mod time;
mod unit;

pub use facts::Facts;
pub use gpu::{GpuProcessRecord, GpuRecord, ProcessListing, ProcessListingKind, SmiHeader};
pub use journal::JournalEntry;
pub use names::{
    GpuUuid, Hostname, InvalidValue, Pid, Port, ProcessName, ServerFlag, StartTime, UnitName,
};
pub use process::PsRecord;
pub use server::{Framework, MemoryImbalance, RankTag, ServerArgs, ServerEvent, ServerEventKind};
pub use time::Timestamp;
pub use unit::{CgroupMember, UnitStatus};
