//! Correlate: join the facts of all inputs into one [`Incident`].
//!
//! nvidia-smi speaks GPU indices and UUIDs, the journal speaks PIDs and units,
//! SGLang speaks ranks. This module joins them (PID ↔ unit ↔ GPU ↔ command
//! line) and keeps, for every join, the spans that justify it and how strong
//! that justification is.

mod clock;
mod gpus;
mod known;
mod members;
mod owners;
mod serving;
mod units;

use std::collections::BTreeMap;

pub use clock::{Clock, TimeFrame, YearBasis};
pub use gpus::bus_key;
pub use gpus::{Gpu, GpuProcess};
pub use known::Known;
pub use owners::{OwnerBasis, Ownership};
pub use serving::programs;
pub use serving::{is_gpu_software, is_serving, is_serving_stack};
pub use units::{
    LAST_WORDS, LAST_WORDS_ANCHORS, LastWords, SYSTEMD_STEPS, SystemdStep, UnitEvent,
    UnitEventKind, UnitFacts, bare_last_words, exit_meaning, is_manager, last_words, states_reason,
    systemd_step,
};

use crate::model::{Facts, ProcessListingKind, ServerEvent, Timestamp};
use crate::model::{GpuHealth, KernelEvent, KernelEventKind, Xid};
use crate::source::Span;

/// A command line known for a PID, with where it was seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Cmdline {
    pub text: String,
    pub span: Span,
}

/// Everything known about one incident, joined across inputs.
#[derive(Debug, Default)]
pub struct Incident {
    pub facts: Facts,
    /// One entry per GPU index, sorted by index.
    pub gpus: Vec<Gpu>,
    /// Processes on GPUs, one per (GPU, PID), sorted.
    pub gpu_processes: Vec<GpuProcess>,
    pub owners: BTreeMap<u32, Ownership>,
    pub cmdlines: BTreeMap<u32, Cmdline>,
    pub units: BTreeMap<String, UnitFacts>,
    /// The unit each `X.service: …` line of PID 1 names, known event or not.
    pub unit_lines: BTreeMap<Span, String>,
    /// Every PID the inputs tie to each unit, weak ties included
    /// (`members.rs`): what reports list, never what an action rests on.
    pub unit_pids: BTreeMap<String, std::collections::BTreeSet<u32>>,
    /// The time of every line whose format carries one, in the frame of
    /// [`Incident::frame`].
    pub times: BTreeMap<Span, Timestamp>,
    /// How zone-less and year-less times were read.
    pub frame: TimeFrame,
    /// The kept lines that are messages of the upstream catalogs.
    pub known: Vec<Known>,
    /// The kept lines no exact row reads that the symptom catalog does
    /// (a failure class by its words: `catalogs/symptoms.toml`).
    pub symptoms: Vec<Known>,
    /// [`Incident::gpu_by_bus_id`]'s answers, by bus: built on the first
    /// question (a rule may ask once per message, and each answer was a
    /// walk over every kernel event).
    by_bus: std::sync::OnceLock<std::collections::HashMap<crate::model::BusId, usize>>,
}

/// Correlates without a manifest: zone-less times read as UTC.
pub fn correlate(facts: Facts) -> Incident {
    correlate_with(facts, &Clock::default())
}

/// Correlates with the bundle's clock: every time is first put in its frame.
pub fn correlate_with(mut facts: Facts, clock: &Clock) -> Incident {
    let frame = clock::normalise(&mut facts, clock);
    // In line order (ingest records them so; a stable sort keeps it and is
    // linear then): rules find a line's events by binary search.
    facts.server_events.sort_by_key(|e| e.span);
    let (gpus, gpu_processes) = gpus::merge(&facts);
    let known = known::match_messages(&facts.messages);
    let mut units = units::collect(&facts);
    units::add_step_failures(&mut units, &known);
    units::add_job_failures(&mut units, &known, &facts.messages);
    let unit_lines = units::unit_lines(&facts);
    let owners = owners::attribute(&facts, &units);
    let unit_pids = members::collect(&facts, &units, &unit_lines, &owners);
    let cmdlines = collect_cmdlines(&facts);
    let times = collect_times(&facts);
    let symptoms = known::match_symptoms(&facts.messages, &known);
    Incident {
        facts,
        gpus,
        gpu_processes,
        owners,
        cmdlines,
        units,
        unit_lines,
        unit_pids,
        times,
        frame,
        known,
        symptoms,
        by_bus: std::sync::OnceLock::new(),
    }
}

fn collect_times(facts: &Facts) -> BTreeMap<Span, Timestamp> {
    let journal = facts.journal.iter().filter_map(|e| Some((e.span, e.time?)));
    let server = facts
        .server_events
        .iter()
        .filter_map(|e| Some((e.span, e.time?)));
    let lines = facts.line_times.iter().copied();
    let kernel = facts
        .kernel_events
        .iter()
        .filter_map(|e| Some((e.span, e.time.wall?)));
    // The journal's own time wins over the time inside a wrapped line.
    let mut times: BTreeMap<Span, Timestamp> = lines.collect();
    times.extend(kernel);
    times.extend(server);
    times.extend(journal);
    times
}

/// Command lines by PID; `ps` is the most complete, then the cgroup tree,
/// then the journal's `_CMDLINE`.
fn collect_cmdlines(facts: &Facts) -> BTreeMap<u32, Cmdline> {
    let mut out = BTreeMap::new();
    for p in &facts.ps {
        out.entry(p.pid).or_insert(Cmdline {
            text: p.cmd.clone(),
            span: p.span,
        });
    }
    for m in facts.unit_statuses.iter().flat_map(|u| &u.cgroup) {
        out.entry(m.pid).or_insert(Cmdline {
            text: m.cmdline.clone(),
            span: m.span,
        });
    }
    for e in &facts.journal {
        if let (Some(pid), Some(cmd)) = (e.pid, &e.cmdline) {
            out.entry(pid).or_insert(Cmdline {
                text: cmd.clone(),
                span: e.span,
            });
        }
    }
    out
}

impl Incident {
    /// The kept lines that are the catalog row `id`, with their hits, in
    /// input order: how a rule asks for a message.
    pub fn known<'a>(
        &'a self,
        id: &'a str,
    ) -> impl Iterator<Item = (&'a crate::model::Message, &'a crate::catalogs::Hit<'static>)> + 'a
    {
        self.known
            .iter()
            .filter(move |k| k.hit.row.is_some_and(|r| r.id == id))
            .map(|k| (&self.facts.messages[k.message], &k.hit))
    }

    pub fn gpu(&self, index: u32) -> Option<&Gpu> {
        self.gpus.iter().find(|g| g.index == index)
    }

    /// The GPU at a PCI bus id as the kernel prints it (`0000:3b:00`, with or
    /// without the function): nvidia-smi's bus ids first (the table's
    /// Bus-Id, CSV `pci.bus_id`), then `nvidia-smi -q`'s, joined through its
    /// UUID or index, then the kernel's own `NVRM: GPU at PCI:… :
    /// GPU-<uuid>` lines, joined through the UUID.
    pub fn gpu_by_bus_id(&self, bus_id: &str) -> Option<&Gpu> {
        let key = gpus::bus_key(bus_id)?;
        let by_bus = self.by_bus.get_or_init(|| self.gpus_by_bus());
        by_bus.get(&key).and_then(|&i| self.gpus.get(i))
    }

    /// Each bus's GPU (its index in `gpus`): the GPU record that names the
    /// bus, else the first health record of that bus whose GPU is known,
    /// else the first kernel line that ties the bus to a known UUID.
    fn gpus_by_bus(&self) -> std::collections::HashMap<crate::model::BusId, usize> {
        let mut map = std::collections::HashMap::new();
        for (i, g) in self.gpus.iter().enumerate() {
            if let Some(key) = g.bus_id.as_deref().and_then(gpus::bus_key) {
                map.entry(key).or_insert(i);
            }
        }
        for h in &self.facts.gpu_health {
            let Some(key) = h.bus_id.as_deref().and_then(gpus::bus_key) else {
                continue;
            };
            if map.contains_key(&key) {
                continue;
            }
            let g = self.gpus.iter().position(|g| {
                (h.uuid.is_some() && g.uuid == h.uuid)
                    || (h.uuid.is_none() && h.index == Some(g.index))
            });
            if let Some(i) = g {
                map.insert(key, i);
            }
        }
        for e in &self.facts.kernel_events {
            let KernelEventKind::GpuAtBus { bus_id, uuid } = &e.kind else {
                continue;
            };
            let Some(key) = gpus::bus_key(bus_id) else {
                continue;
            };
            if map.contains_key(&key) {
                continue;
            }
            if let Some(i) = self.gpus.iter().position(|g| g.uuid.as_ref() == Some(uuid)) {
                map.insert(key, i);
            }
        }
        map
    }

    /// Every Xid the kernel reported, with the event that carries its time
    /// and line.
    pub fn xids(&self) -> impl Iterator<Item = (&KernelEvent, &Xid)> {
        self.facts
            .kernel_events
            .iter()
            .filter_map(|e| match &e.kind {
                KernelEventKind::Xid(x) => Some((e, x)),
                _ => None,
            })
    }

    /// What `nvidia-smi -q` said about a GPU's health, joined by UUID, bus
    /// id or index.
    pub fn health_of(&self, gpu: &Gpu) -> impl Iterator<Item = &GpuHealth> {
        let key = gpu.bus_id.as_deref().and_then(gpus::bus_key);
        self.facts.gpu_health.iter().filter(move |h| {
            (h.uuid.is_some() && h.uuid == gpu.uuid)
                || (key.is_some() && h.bus_id.as_deref().and_then(gpus::bus_key) == key)
                || (h.uuid.is_none() && h.bus_id.is_none() && h.index == Some(gpu.index))
        })
    }

    pub fn processes_on(&self, index: u32) -> impl Iterator<Item = &GpuProcess> {
        self.gpu_processes
            .iter()
            .filter(move |p| p.gpu == Some(index))
    }

    pub fn time_of(&self, span: Span) -> Option<Timestamp> {
        self.times.get(&span).copied()
    }

    /// The PID of the process that wrote the journal line at `span`
    /// (`ollama[2521]:`), if the line is a journal entry that names one.
    pub fn journal_writer(&self, span: Span) -> Option<u32> {
        self.facts
            .journal
            .iter()
            .find(|j| j.span == span)
            .and_then(|j| j.pid)
    }

    pub fn owner(&self, pid: u32) -> Option<&Ownership> {
        self.owners.get(&pid)
    }

    /// The unit a server event came from: recorded by the journal around it,
    /// or the owner of the PID that wrote it.
    pub fn unit_of_event(&self, event: &ServerEvent) -> Option<(String, OwnerBasis, Span)> {
        if let Some(unit) = &event.unit {
            return Some((unit.clone(), OwnerBasis::JournalField, event.span));
        }
        let o = self.owner(event.pid?)?;
        Some((o.unit.clone(), o.basis, o.span))
    }

    /// Whether any process listing was captured, and what the strongest one
    /// said: rows win over "none found", which wins over an empty block.
    pub fn process_listing(&self) -> Option<ProcessListingKind> {
        let kinds = self.facts.process_listings.iter().map(|l| l.kind);
        kinds.min_by_key(|k| match k {
            ProcessListingKind::Rows => 0,
            ProcessListingKind::NoneFound => 1,
            ProcessListingKind::EmptyBlock => 2,
        })
    }
}
