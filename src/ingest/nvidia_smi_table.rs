//! The default `nvidia-smi` table (docs/formats/nvidia.md): the `NVIDIA-SMI …
//! Driver Version: …` header, one [`GpuRecord`] per GPU block, one
//! [`GpuProcessRecord`] per process row and one [`ProcessListing`] per
//! process block.
//!
//! Every layout generation (79-wide ≤ 525, 89-wide 530–545, 91-wide 550+,
//! the 570+ wide PID column, the 580+ `+---` separator, the 6xx `KMD
//! Version:` wording) is read the same way: rows are split on `|`, cells on
//! whitespace, and a row is told apart by the shape of its values, never by
//! column offsets, which move between generations. Values are kept as
//! printed: a process name cut on the left keeps its leading `...` and is
//! flagged `name_truncated`.
//!
//! A segment may hold several tables one after another and may end anywhere;
//! a row cut short (no closing `|`) loses only its last, possibly cut, cell.

use std::sync::LazyLock;

use chrono::NaiveDateTime;
use regex::Regex;

use super::Line;
use super::values::{is_absent, is_smi_failure_line, normalize_bus_id, parse_mib};
use crate::model::{
    Facts, GpuProcessRecord, GpuRecord, ProcessListing, ProcessListingKind, SmiHeader, Timestamp,
};
use crate::source::Span;

static SMI_VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"NVIDIA-SMI\s+(?P<v>[^\s|]+)").expect("smi version regex"));

/// 6xx drivers say `KMD Version:` where older ones say `Driver Version:`.
static DRIVER_VERSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:Driver|KMD) Version:\s*(?P<v>[^\s|]+)").expect("driver version regex")
});

/// 6xx drivers say `CUDA UMD Version:`; ≤ 410 print no CUDA version at all.
static CUDA_VERSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"CUDA (?:UMD )?Version:\s*(?P<v>[^\s|]+)").expect("cuda version regex")
});

/// The optional `ctime(3)` line above the table.
static DATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-3]?[0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9] [0-9]{4}$",
    )
    .expect("date regex")
});

/// `Fri Nov 27 09:41:12 2026`: the host's local time, no zone.
fn parse_date(text: &str) -> Option<Timestamp> {
    let local = NaiveDateTime::parse_from_str(text, "%a %b %e %H:%M:%S %Y").ok()?;
    Some(Timestamp {
        local,
        offset_secs: None,
        year_known: true,
    })
}

static TOKEN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\S+").expect("token regex"));

/// First token of a GPU block's second line: the fan speed (`|100%` has no
/// space after the bar, which splitting on `|` absorbs).
static FAN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:N/A|ERR!|[0-9]+%)$").expect("fan regex"));

/// `C`, `G`, `C+G`, and the MPS types `M`, `M+C` of newer drivers.
static PROCESS_TYPE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[CGM](?:\+[CGM])*$").expect("process type regex"));

/// 570+ tables cut memory values of 100000 MiB and more to five digits.
static CUT_MEMORY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[0-9]+\.\.\.$").expect("cut memory regex"));

/// Words of the GPU block's column-header lines, all generations (Windows
/// drivers title the mode column `TCC/WDDM`, 570+ `Driver-Model`).
const GPU_HEADER_WORDS: [&str; 19] = [
    "GPU",
    "Name",
    "Persistence-M",
    "TCC/WDDM",
    "Driver-Model",
    "Bus-Id",
    "Disp.A",
    "Volatile",
    "Uncorr.",
    "ECC",
    "Fan",
    "Temp",
    "Perf",
    "Pwr:Usage/Cap",
    "Memory-Usage",
    "GPU-Util",
    "Compute",
    "M.",
    "MIG",
];

/// Words of the process block's column-header lines, both layouts.
const PROCESS_HEADER_WORDS: [&str; 10] = [
    "GPU", "GI", "CI", "PID", "Type", "Process", "name", "Memory", "ID", "Usage",
];

/// Where in a table the parser is; decides how a `|` row is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    /// Before a header, or after a table's process block closed.
    Outside,
    /// After `| NVIDIA-SMI`, before the `|===` line: column headers.
    GpuHeader,
    Gpus,
    MigHeader,
    Mig,
    /// After `| Processes:`, before the `|===` line.
    ProcessHeader,
    Processes,
}

/// The process block being read.
#[derive(Debug)]
struct ProcessBlock {
    span: Span,
    rows: usize,
    none_found: bool,
    /// The `|===` line was read: rows would follow.
    data_started: bool,
    /// Any line after `|===` other than the bottom border.
    content: bool,
    /// The bottom border was read, so the block is complete.
    closed: bool,
    /// Rows read without the block's `| Processes:` header above them (a
    /// paste cut at the top): they count, but say nothing about the GPUs'
    /// other processes, so the block yields no listing.
    headless: bool,
    /// The header came without its bars and column `Type`, as condensed
    /// listings print it (`GPU  PID  Process name  GPU Memory`): rows are
    /// bar-less too.
    bare: Option<BareHeader>,
}

/// What a bar-less process header says about its rows.
#[derive(Debug, Clone, Copy)]
struct BareHeader {
    /// `GI  CI` columns follow the GPU index.
    instances: bool,
    /// A `Type` column follows the PID.
    typed: bool,
}

struct TableParser<'f> {
    facts: &'f mut Facts,
    section: Section,
    block: Option<ProcessBlock>,
    /// The GPU (index into `facts.gpus`) whose memory line has not been read.
    awaiting_memory: Option<usize>,
    last_border_width: Option<usize>,
    /// The date line read above the next header.
    date: Option<Timestamp>,
}

/// Parses one segment; returns the lines it did not recognise (their
/// indices), which go on to the line-level recognisers.
pub fn read(lines: &[Line<'_>], facts: &mut Facts) -> Vec<usize> {
    let mut stream = TableStream::default();
    let missed = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !stream.feed(l.text, l.span, facts))
        .map(|(i, _)| i)
        .collect();
    stream.close(facts);
    missed
}

/// The table parser between lines: [`read`] a line at a time, for a reader
/// that parses a segment as it streams (`ingest::snapshots`).
#[derive(Debug)]
pub(super) struct TableStream {
    section: Section,
    block: Option<ProcessBlock>,
    awaiting_memory: Option<usize>,
    last_border_width: Option<usize>,
    date: Option<Timestamp>,
    /// In a box another tool drew (dcgmi's, by its header row): its lines
    /// are left to the text-table reader (`ingest::tables`).
    foreign: bool,
    /// In `dcgmi nvlink --link-status`'s box, whose borders look like
    /// nvidia-smi's (`ingest::dcgmi_nvlink`).
    nvlink: Option<super::dcgmi_nvlink::NvlinkBox>,
}

impl Default for TableStream {
    fn default() -> Self {
        TableStream {
            section: Section::Outside,
            block: None,
            awaiting_memory: None,
            last_border_width: None,
            date: None,
            foreign: false,
            nvlink: None,
        }
    }
}

impl TableStream {
    /// Reads one line; returns whether it was recognised.
    pub(super) fn feed(&mut self, text: &str, span: Span, facts: &mut Facts) -> bool {
        let t = text.trim();
        if super::dcgmi_nvlink::is_title(t) {
            self.nvlink = Some(super::dcgmi_nvlink::NvlinkBox::open(span));
            return true;
        }
        if let Some(nvlink) = self.nvlink.as_mut() {
            match nvlink.feed(t, span, facts) {
                Some(true) => return true,
                Some(false) => {
                    self.nvlink = None;
                    return true;
                }
                None => self.nvlink = None,
            }
        }
        if super::tables::is_dcgmi_box_header(t) {
            self.foreign = true;
        }
        // nvidia-smi's own header row ends the other tool's box, even
        // with no blank line between (a border above it went to the box).
        if self.foreign {
            if t.starts_with(['|', '+']) && !t.starts_with("| NVIDIA-SMI") {
                return false;
            }
            self.foreign = false;
        }
        self.with(facts, |parser| parser.feed(text, span))
    }

    /// The end of the segment: the open process block becomes its listing.
    pub(super) fn close(&mut self, facts: &mut Facts) {
        self.with(facts, |parser| parser.close_block());
    }

    fn with<T>(&mut self, facts: &mut Facts, f: impl FnOnce(&mut TableParser<'_>) -> T) -> T {
        let mut parser = TableParser {
            facts,
            section: self.section,
            block: self.block.take(),
            awaiting_memory: self.awaiting_memory,
            last_border_width: self.last_border_width,
            date: self.date.take(),
        };
        let out = f(&mut parser);
        self.section = parser.section;
        self.block = parser.block.take();
        self.awaiting_memory = parser.awaiting_memory;
        self.last_border_width = parser.last_border_width;
        self.date = parser.date.take();
        out
    }
}

/// Whether `text` (trimmed) starts a snapshot: the `ctime` date line
/// `nvidia-smi` prints above each table, or the header row.
pub(super) fn starts_snapshot(text: &str) -> Snapshot {
    let text = text.trim();
    if text.as_bytes().first().is_some_and(u8::is_ascii_uppercase) && DATE.is_match(text) {
        return Snapshot::Date;
    }
    if text.starts_with("| NVIDIA-SMI") || text.starts_with("NVIDIA-SMI ") {
        return Snapshot::Header;
    }
    if text.starts_with('+') {
        return Snapshot::Border;
    }
    Snapshot::Other
}

/// What a line is to the snapshots of an `nvidia-smi -l` loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Snapshot {
    /// The date line above a table.
    Date,
    /// The header row (`| NVIDIA-SMI 570… Driver Version: …`).
    Header,
    /// A border (`+---…+`): the one right above a header opens its table.
    Border,
    Other,
}

/// The number of lines [`read`] did not recognise.
#[cfg(test)]
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    read(lines, facts).len() as u32
}

impl TableParser<'_> {
    /// Reads one line; returns whether it was recognised.
    fn feed(&mut self, text: &str, span: Span) -> bool {
        let text = text.trim();
        if text.is_empty() {
            return true;
        }
        if DATE.is_match(text) {
            // A date line starts a new table: whatever was open is over.
            self.close_block();
            self.section = Section::Outside;
            self.date = parse_date(text);
            if let Some(time) = self.date {
                self.facts.line_times.push((span, time));
            }
            return true;
        }
        if is_smi_failure_line(text) {
            // Later: these become facts (driver not loaded, version mismatch,
            // no devices, one GPU unreachable).
            return true;
        }
        if is_rule(text) {
            self.rule(text);
            return true;
        }
        if text.starts_with("NVIDIA-SMI ") {
            // The header row without its bars (retyped, or cut by a chat
            // window): the versions are read the same way.
            self.close_block();
            self.header(text, span);
            self.section = Section::GpuHeader;
            return true;
        }
        if let Some(bare) = bare_process_header(text) {
            self.close_block();
            self.block = Some(ProcessBlock {
                span,
                rows: 0,
                none_found: false,
                data_started: true,
                content: false,
                closed: false,
                headless: false,
                bare: Some(bare),
            });
            self.section = Section::Processes;
            return true;
        }
        if !text.starts_with('|') {
            if let (Section::Processes, Some(bare)) =
                (self.section, self.block.as_ref().and_then(|b| b.bare))
            {
                return self.bare_process_row(text, bare, span);
            }
            // A lone process row whose left bar the paste cut off, its
            // right bar kept: `0   N/A  N/A     60895      C   ray::IDLE
            // 1177MiB |`; taken on the same terms as a headless row.
            if let (Section::Outside, Some(inner)) = (self.section, text.strip_suffix('|')) {
                return self.headless_process_row(inner, true, span);
            }
            return false;
        }
        self.row(text, span)
    }

    /// Borders (`+---+`), in-table rules (`|---+---|`) and the `|===|` line
    /// that separates column headers from data.
    fn rule(&mut self, text: &str) {
        if text.contains('=') {
            self.section = match self.section {
                Section::GpuHeader => Section::Gpus,
                Section::MigHeader => Section::Mig,
                Section::ProcessHeader => {
                    if let Some(block) = &mut self.block {
                        block.data_started = true;
                    }
                    Section::Processes
                }
                other => other,
            };
            return;
        }
        if text.starts_with('+') && text.ends_with('+') {
            self.last_border_width = Some(text.chars().count());
        }
        match self.section {
            // The bottom border. A border right under `| Processes:` (no
            // `|===` line) ends a block too, but one that says nothing.
            Section::Processes | Section::ProcessHeader => {
                if let Some(block) = &mut self.block {
                    block.closed = true;
                }
                self.close_block();
                self.section = Section::Outside;
            }
            // Between two GPU blocks: the next row starts a new GPU.
            Section::Gpus => self.awaiting_memory = None,
            _ => {}
        }
    }

    fn row(&mut self, text: &str, span: Span) -> bool {
        let inner = text.strip_prefix('|').unwrap_or(text);
        // A row cut short has no closing bar; its last cell may be cut too.
        let (inner, complete) = match inner.strip_suffix('|') {
            Some(inner) => (inner, true),
            None => (inner, false),
        };
        let first = inner.split('|').next().unwrap_or_default().trim();
        if first.starts_with("NVIDIA-SMI") {
            self.close_block();
            self.header(text, span);
            self.section = Section::GpuHeader;
            return true;
        }
        // `Compute processes:` in the tables of drivers ≤ 384 that listed
        // compute processes only.
        if first.starts_with("Processes:") || first.starts_with("Compute processes:") {
            self.close_block();
            self.block = Some(ProcessBlock {
                span,
                rows: 0,
                none_found: false,
                data_started: false,
                content: false,
                closed: false,
                headless: false,
                bare: None,
            });
            self.section = Section::ProcessHeader;
            return true;
        }
        if first.starts_with("MIG devices:") {
            self.section = Section::MigHeader;
            return true;
        }
        match self.section {
            Section::Outside => {
                // A paste that starts below the column headers: take a row
                // only when it is unmistakably a GPU's first line.
                let cells = cells(inner, complete);
                if is_gpu_first_line(&cells) && cells.get(1).and_then(|c| bus_id(c)).is_some() {
                    self.section = Section::Gpus;
                    return self.gpu_row(&cells, None, span);
                }
                if is_process_column_header(inner) {
                    // Cut just below `| Processes:`: the rows that follow
                    // are the whole block all the same.
                    self.block = Some(ProcessBlock {
                        span,
                        rows: 0,
                        none_found: false,
                        data_started: false,
                        content: false,
                        closed: false,
                        headless: false,
                        bare: None,
                    });
                    self.section = Section::ProcessHeader;
                    return true;
                }
                self.headless_process_row(inner, complete, span)
            }
            Section::GpuHeader => {
                let cells = cells(inner, complete);
                if is_gpu_first_line(&cells) {
                    // The `|===` line is missing; the data has begun anyway.
                    self.section = Section::Gpus;
                    return self.gpu_row(&cells, None, span);
                }
                is_header_row(inner, &GPU_HEADER_WORDS)
                    || self.headless_process_row(inner, complete, span)
            }
            Section::Gpus => {
                let cut = if complete {
                    None
                } else {
                    inner.rsplit('|').next()
                };
                self.gpu_row(&cells(inner, complete), cut, span)
            }
            // MIG device rows hold per-instance memory, not needed yet.
            Section::MigHeader | Section::Mig => true,
            Section::ProcessHeader => {
                if self.process_row(inner, complete, span) {
                    self.section = Section::Processes;
                    return true;
                }
                is_header_row(inner, &PROCESS_HEADER_WORDS)
            }
            Section::Processes => self.process_row(inner, complete, span),
        }
    }

    fn header(&mut self, text: &str, span: Span) {
        let version = |re: &Regex| re.captures(text).map(|c| c["v"].to_owned());
        // ≤ 410 headers and cut lines may lack `Driver Version:`; the
        // nvidia-smi version is the same number outside WSL and containers.
        let Some(driver_version) = version(&DRIVER_VERSION).or_else(|| version(&SMI_VERSION))
        else {
            return;
        };
        let cuda_version = version(&CUDA_VERSION).filter(|v| !is_absent(v));
        let width = match (text.ends_with('|'), self.last_border_width) {
            (false, Some(border)) => border,
            _ => text.chars().count(),
        };
        self.facts.smi_headers.push(SmiHeader {
            driver_version,
            cuda_version,
            width,
            time: self.date.take(),
            span,
        });
    }

    /// One row of a GPU block: the first line (index, name, bus id), the
    /// second (memory), or the third (MIG mode, ≥ 450). `cut` is the last
    /// cell of a row cut short, which `cells` leaves out.
    fn gpu_row(&mut self, cells: &[&str], cut: Option<&str>, span: Span) -> bool {
        let Some(first) = cells.first().copied().or(cut) else {
            return true;
        };
        if is_gpu_first_line(cells)
            || (cells.len() == 1 && cut.is_some() && starts_with_index(first))
        {
            let record = gpu_first_line(cells, span);
            self.facts.gpus.push(record);
            self.awaiting_memory = Some(self.facts.gpus.len() - 1);
            return true;
        }
        if cells.is_empty() {
            // Cut inside the first cell: only an index followed by more text
            // is known to be whole; the name may be cut anywhere.
            if tokens(first).len() >= 2 && starts_with_index(first) {
                self.facts.gpus.push(GpuRecord {
                    index: TOKEN.find(first).and_then(|t| t.as_str().parse().ok()),
                    span: Some(span),
                    ..GpuRecord::default()
                });
            }
            return true;
        }
        if first.trim().is_empty() {
            return true;
        }
        let fan = TOKEN.find(first).map(|m| m.as_str()).unwrap_or_default();
        let memory_cell = cells.get(1);
        if FAN.is_match(fan) || memory_cell.is_some_and(|c| c.contains('/')) {
            if let (Some(i), Some(cell)) = (self.awaiting_memory.take(), memory_cell) {
                if let Some(gpu) = self.facts.gpus.get_mut(i) {
                    let (used, total) = memory_usage(cell);
                    gpu.memory_used_mib = used;
                    gpu.memory_total_mib = total;
                    gpu.utilization_pct = cells.get(2).and_then(|c| utilization(c));
                    gpu.compute_mode = cells.get(2).and_then(|c| compute_mode(c));
                    gpu.usage_span = Some(span);
                }
            }
            return true;
        }
        false
    }

    /// One row of a process block: a process, `No running processes found`,
    /// or the ≤ 390 `Not Supported` row.
    fn process_row(&mut self, inner: &str, complete: bool, span: Span) -> bool {
        let Some(block) = &mut self.block else {
            return false;
        };
        let row = inner.trim();
        if row.starts_with("No running processes found") {
            block.none_found = true;
            block.content = true;
            return true;
        }
        let tokens = tokens(row);
        let Some(first) = tokens.first().copied() else {
            return false;
        };
        let Ok(gpu_index) = first.text.parse::<u32>() else {
            return false;
        };
        block.content = true;
        if !complete {
            // Cut inside the name or the memory: a wrong name is worse than
            // none, and the block is incomplete anyway.
            return true;
        }
        if row.get(first.end..).map(str::trim) == Some("Not Supported") {
            // The driver cannot list processes: the block says nothing, so
            // it must not read as an empty one.
            return true;
        }
        let Some(process) = process_fields(row, &tokens) else {
            return false;
        };
        block.rows += 1;
        self.facts.gpu_processes.push(GpuProcessRecord {
            gpu_index: Some(gpu_index),
            gpu_uuid: None,
            pid: process.pid,
            name: process.name.to_owned(),
            name_truncated: process.name.starts_with("..."),
            used_mib: process.used_mib,
            used_truncated: process.used_truncated,
            span,
        });
        true
    }

    /// A process row with no process header above it (a paste that kept
    /// only the row it meant): taken only when it is whole and has every
    /// column a process row has, from the GPU index to the memory.
    fn headless_process_row(&mut self, inner: &str, complete: bool, span: Span) -> bool {
        let row = inner.trim();
        let toks = tokens(row);
        if !complete
            || toks.first().is_none_or(|t| t.text.parse::<u32>().is_err())
            || process_fields(row, &toks).is_none_or(|p| p.used_mib.is_none())
        {
            return false;
        }
        self.close_block();
        self.block = Some(ProcessBlock {
            span,
            rows: 0,
            none_found: false,
            data_started: true,
            content: false,
            closed: false,
            headless: true,
            bare: None,
        });
        self.section = Section::Processes;
        self.process_row(inner, complete, span)
    }

    /// A row under a bar-less header: `  0  2505781   sglang::scheduler_DP0
    /// 100998 MiB`. The GPU index and PID are the first integers, the memory
    /// the last value; the name is what lies between.
    fn bare_process_row(&mut self, text: &str, header: BareHeader, span: Span) -> bool {
        let row = text.trim();
        let toks = tokens(row);
        let Some(block) = &mut self.block else {
            return false;
        };
        if row.starts_with("No running processes found") {
            block.none_found = true;
            block.content = true;
            return true;
        }
        let Some(gpu_index) = toks.first().and_then(|t| t.text.parse::<u32>().ok()) else {
            return false;
        };
        let mut at = 1;
        if header.instances {
            at += 2;
        }
        let Some(pid) = toks.get(at).and_then(|t| t.text.parse::<u32>().ok()) else {
            return false;
        };
        let mut name_start = toks.get(at).map_or(0, |t| t.end);
        if header.typed {
            match toks.get(at + 1) {
                Some(t) if PROCESS_TYPE.is_match(t.text) => name_start = t.end,
                _ => return false,
            }
        }
        // `100998MiB` or `100998 MiB`.
        let (memory, name_end) = match toks.as_slice() {
            [.., n, unit] if unit.text == "MiB" && n.text.parse::<u64>().is_ok() => {
                (n.text.parse::<u64>().ok(), n.start)
            }
            [.., last] => match memory_token(last.text) {
                Some((used, _)) => (used, last.start),
                None => return false,
            },
            [] => return false,
        };
        let name = row.get(name_start..name_end).map(str::trim).unwrap_or("");
        if name_end <= name_start {
            return false;
        }
        block.content = true;
        block.rows += 1;
        self.facts.gpu_processes.push(GpuProcessRecord {
            gpu_index: Some(gpu_index),
            gpu_uuid: None,
            pid,
            name: name.to_owned(),
            name_truncated: name.starts_with("..."),
            used_mib: memory,
            used_truncated: false,
            span,
        });
        true
    }

    /// Turns the open process block into its [`ProcessListing`]. A block cut
    /// before its rows (or one that only said `Not Supported`) says nothing
    /// about processes and yields no listing.
    fn close_block(&mut self) {
        let Some(block) = self.block.take() else {
            return;
        };
        if block.headless {
            return;
        }
        let kind = if block.rows > 0 {
            ProcessListingKind::Rows
        } else if block.none_found {
            ProcessListingKind::NoneFound
        } else if block.closed && block.data_started && !block.content {
            ProcessListingKind::EmptyBlock
        } else {
            return;
        };
        self.facts.process_listings.push(ProcessListing {
            kind,
            rows: block.rows,
            span: block.span,
        });
    }
}

/// `GPU  PID  Process name  GPU Memory` (and with `GI CI`, `Type`, `Usage`):
/// a process header printed without bars.
fn bare_process_header(text: &str) -> Option<BareHeader> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let rest = words.strip_prefix(&["GPU"])?;
    let (instances, rest) = match rest.strip_prefix(&["GI", "CI"]) {
        Some(rest) => (true, rest),
        None => (false, rest),
    };
    let rest = rest.strip_prefix(&["PID"])?;
    let (typed, rest) = match rest.strip_prefix(&["Type"]) {
        Some(rest) => (true, rest),
        None => (false, rest),
    };
    let rest = rest.strip_prefix(&["Process", "name"])?;
    matches!(
        rest,
        ["GPU", "Memory"] | ["GPU", "Memory", "Usage"] | ["Usage"] | []
    )
    .then_some(BareHeader { instances, typed })
}

/// `+----+`, `|----+----|`, `|====|`, possibly cut on the right.
fn is_rule(text: &str) -> bool {
    (text.starts_with('+') || text.starts_with('|'))
        && text.contains(['-', '='])
        && text.chars().all(|c| matches!(c, '-' | '=' | '+' | '|'))
}

/// The cells of a row (without its outer bars). When the row was cut, its
/// last cell is dropped: it may end mid-value.
fn cells(inner: &str, complete: bool) -> Vec<&str> {
    let mut cells: Vec<&str> = inner.split('|').collect();
    if !complete {
        cells.pop();
    }
    cells
}

/// A column-header row: every word is one of `words`, or the row is blank.
fn is_header_row(inner: &str, words: &[&str]) -> bool {
    inner
        .split(|c: char| c.is_whitespace() || c == '|')
        .filter(|w| !w.is_empty())
        .all(|w| words.contains(&w))
}

/// `  GPU   GI   CI        PID   Type   Process name   GPU Memory `: the
/// first column-header row of a process block.
fn is_process_column_header(inner: &str) -> bool {
    let words: Vec<&str> = inner.split_whitespace().collect();
    words.first() == Some(&"GPU")
        && words.contains(&"PID")
        && words.contains(&"Process")
        && is_header_row(inner, &PROCESS_HEADER_WORDS)
}

/// `|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off | …`
fn is_gpu_first_line(cells: &[&str]) -> bool {
    cells.len() >= 2 && cells.first().is_some_and(|c| starts_with_index(c))
}

fn starts_with_index(cell: &str) -> bool {
    TOKEN
        .find(cell)
        .is_some_and(|t| t.as_str().parse::<u32>().is_ok())
}

fn gpu_first_line(cells: &[&str], span: Span) -> GpuRecord {
    let first = cells.first().copied().unwrap_or_default();
    let tokens = tokens(first);
    let index = tokens.first().and_then(|t| t.text.parse().ok());
    // Name: everything between the index and the persistence mode; product
    // names have single spaces inside (`NVIDIA H100 80GB HBM3`).
    let name_start = tokens.first().map_or(0, |t| t.end);
    let name_end = match tokens.last() {
        Some(last) if tokens.len() >= 3 && is_persistence(last.text) => last.start,
        _ => first.len(),
    };
    let name = first
        .get(name_start..name_end)
        .map(str::trim)
        .filter(|n| !n.is_empty() && !is_absent(n));
    GpuRecord {
        index,
        uuid: None,
        name: name.map(str::to_owned),
        name_truncated: name.is_some_and(|n| n.ends_with("...")),
        bus_id: cells.get(1).and_then(|c| bus_id(c)),
        memory_used_mib: None,
        memory_total_mib: None,
        utilization_pct: None,
        compute_mode: None,
        usage_span: None,
        span: Some(span),
    }
}

/// `     59%      Default ` → 59: the `GPU-Util` cell's first token. `N/A`
/// (a MIG-enabled card) is `None`.
fn utilization(cell: &str) -> Option<u32> {
    TOKEN.find(cell)?.as_str().strip_suffix('%')?.parse().ok()
}

/// `     16%    E. Thread ` → `E. Thread`: the `Compute M.` cell, the
/// words after the utilisation (`Default`, `E. Process`, `E. Thread`,
/// `Prohibited`; older drivers also print `E. Thread`).
fn compute_mode(cell: &str) -> Option<String> {
    let util = TOKEN.find(cell)?;
    let mode = cell[util.end()..].trim();
    matches!(mode, "Default" | "E. Process" | "E. Thread" | "Prohibited").then(|| mode.to_owned())
}

fn is_persistence(token: &str) -> bool {
    matches!(token, "On" | "Off" | "TCC" | "WDDM" | "N/A" | "ERR!")
}

/// `00000000:18:00.0 Off` → `0000:18:00.0`.
fn bus_id(cell: &str) -> Option<String> {
    TOKEN.find(cell).and_then(|t| normalize_bus_id(t.as_str()))
}

/// `  36912MiB / 40536MiB ` → used, total. `Not Supported` (unified-memory
/// parts) and absent halves are `None`.
fn memory_usage(cell: &str) -> (Option<u64>, Option<u64>) {
    match cell.split_once('/') {
        Some((used, total)) => (parse_mib(used), parse_mib(total)),
        None => (None, None),
    }
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    start: usize,
    end: usize,
    text: &'a str,
}

fn tokens(text: &str) -> Vec<Token<'_>> {
    TOKEN
        .find_iter(text)
        .map(|m| Token {
            start: m.start(),
            end: m.end(),
            text: m.as_str(),
        })
        .collect()
}

struct ProcessFields<'a> {
    pid: u32,
    name: &'a str,
    used_mib: Option<u64>,
    used_truncated: bool,
}

/// `0   N/A  N/A     21734      C   /usr/bin/python3   36909MiB` (≥ 450),
/// `0       21734      C   /usr/bin/python3   36909MiB` (≤ 440) or, under
/// `Compute processes:` (≤ 384, no type column), `0     69341  python
/// 4961MB`. The type token's position tells the layouts apart; the name is
/// the text between the type (or the PID) and the memory, so single spaces
/// inside it survive.
fn process_fields<'a>(row: &'a str, tokens: &[Token<'a>]) -> Option<ProcessFields<'a>> {
    let is_type = |i: usize| tokens.get(i).is_some_and(|t| PROCESS_TYPE.is_match(t.text));
    let is_instance = |i: usize| {
        tokens
            .get(i)
            .is_some_and(|t| t.text == "N/A" || t.text.parse::<u32>().is_ok())
    };
    let untyped = || {
        tokens.len() >= 4
            && tokens[1].text.parse::<u32>().is_ok()
            && tokens
                .last()
                .is_some_and(|t| t.text.ends_with("MB") && memory_token(t.text).is_some())
    };
    // Where the PID is and the token the name follows.
    let (pid_at, name_after) = if is_type(4) && is_instance(1) && is_instance(2) {
        (3, 4)
    } else if is_type(2) {
        (1, 2)
    } else if untyped() {
        (1, 1)
    } else {
        return None;
    };
    let pid = tokens.get(pid_at)?.text.parse().ok()?;
    let name_start = tokens.get(name_after)?.end;
    let last = tokens.last()?;
    let memory = if tokens.len() > name_after + 1 {
        memory_token(last.text)
    } else {
        None
    };
    let (name_end, used_mib, used_truncated) = match memory {
        Some((used, cut)) => (last.start, used, cut),
        None => (row.len(), None, false),
    };
    // Empty when the row shows no name at all; kept, since the PID and
    // memory still count.
    let name = row.get(name_start..name_end)?.trim();
    Some(ProcessFields {
        pid,
        name,
        used_mib,
        used_truncated,
    })
}

/// `36909MiB` → (Some, false); `13583...` → (None, true); `N/A` → (None,
/// false); anything else is not a memory value.
fn memory_token(token: &str) -> Option<(Option<u64>, bool)> {
    if CUT_MEMORY.is_match(token) {
        return Some((None, true));
    }
    if is_absent(token) {
        return Some((None, false));
    }
    if token.ends_with("MiB") {
        return parse_mib(token).map(|n| (Some(n), false));
    }
    // Drivers ≤ 384 wrote MiB as `MB` in the process block.
    if let Some(n) = token.strip_suffix("MB") {
        return n.parse().ok().map(|n| (Some(n), false));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceId;

    fn run(text: &str) -> (Facts, u32) {
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let unrecognized = parse(&lines, &mut facts);
        (facts, unrecognized)
    }

    /// Drivers ≤ 384 titled the block `Compute processes:`, had no type
    /// column and wrote MiB as `MB` (fixtures/real/604).
    #[test]
    fn compute_processes_block_of_old_drivers() {
        let (facts, unrecognized) = run("\
| Compute processes:                                               GPU Memory |
|  GPU       PID  Process name                                     Usage      |
|=============================================================================|
|    0     69341  python                                              4961MB  |
|    1     69700  python                                             15543MB  |
+-----------------------------------------------------------------------------+");
        assert_eq!(unrecognized, 0);
        let rows: Vec<_> = facts
            .gpu_processes
            .iter()
            .map(|p| (p.gpu_index, p.pid, p.name.as_str(), p.used_mib))
            .collect();
        assert_eq!(
            rows,
            [
                (Some(0), 69341, "python", Some(4961)),
                (Some(1), 69700, "python", Some(15543))
            ]
        );
    }

    fn span(line: u32) -> Span {
        Span {
            source: SourceId(0),
            line,
        }
    }

    fn gpu(
        line: u32,
        index: u32,
        name: &str,
        bus: &str,
        used: Option<u64>,
        total: Option<u64>,
    ) -> GpuRecord {
        GpuRecord {
            index: Some(index),
            uuid: None,
            name: Some(name.to_owned()),
            name_truncated: name.ends_with("..."),
            bus_id: Some(bus.to_owned()),
            memory_used_mib: used,
            memory_total_mib: total,
            utilization_pct: None,
            compute_mode: None,
            usage_span: None,
            span: Some(span(line)),
        }
    }

    /// The records with their `GPU-Util` left out, for the tests about
    /// the other cells (`utilization_is_read_from_the_memory_row` reads it).
    fn without_utilization(gpus: &[GpuRecord]) -> Vec<GpuRecord> {
        gpus.iter()
            .map(|g| GpuRecord {
                utilization_pct: None,
                compute_mode: None,
                usage_span: None,
                ..g.clone()
            })
            .collect()
    }

    #[test]
    fn utilization_is_read_from_the_memory_row() {
        // https://github.com/peci1/nvidia-htop/issues/9 (batch M's 961).
        let table = "\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 440.82       Driver Version: 440.82       CUDA Version: 10.2     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce GTX 108...  Off  | 00000000:01:00.0 Off |                  N/A |
| 38%   68C    P2    73W / 250W |  10916MiB / 11175MiB |     59%      Default |
+-------------------------------+----------------------+----------------------+
|   1  GeForce GTX 108...  Off  | 00000000:02:00.0 Off |                  N/A |
| 23%   29C    P8     8W / 250W |    149MiB / 11178MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+";
        let (facts, _) = run(table);
        let util: Vec<Option<u32>> = facts.gpus.iter().map(|g| g.utilization_pct).collect();
        assert_eq!(util, vec![Some(59), Some(0)]);
        assert_eq!(utilization("     59%      Default "), Some(59));
        assert_eq!(utilization("     N/A      Default "), None);
    }

    #[test]
    fn compute_mode_and_its_line_are_read_from_the_memory_row() {
        // https://github.com/kaldi-asr/kaldi/pull/386 (batch O's 993): two
        // K10s in exclusive-thread mode, each with another job's context.
        let table = "\
+------------------------------------------------------+
| NVIDIA-SMI 346.46     Driver Version: 346.46         |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla K10.G2.8GB    Off  | 0000:07:00.0     Off |                    0 |
| N/A   45C    P0    50W / 117W |    574MiB /  3583MiB |     16%    E. Thread |
+-------------------------------+----------------------+----------------------+
|   1  Tesla K10.G2.8GB    Off  | 0000:08:00.0     Off |                    0 |
| N/A   43C    P0    57W / 117W |    574MiB /  3583MiB |     24%    E. Thread |
+-------------------------------+----------------------+----------------------+";
        let (facts, _) = run(table);
        let modes: Vec<_> = facts
            .gpus
            .iter()
            .map(|g| (g.compute_mode.as_deref(), g.usage_span.map(|s| s.line)))
            .collect();
        assert_eq!(
            modes,
            [(Some("E. Thread"), Some(8)), (Some("E. Thread"), Some(11))]
        );
        assert_eq!(
            compute_mode("     59%      Default "),
            Some("Default".to_owned())
        );
        assert_eq!(
            compute_mode("      0%   E. Process "),
            Some("E. Process".to_owned())
        );
        assert_eq!(compute_mode("     N/A "), None);
    }

    /// The records without their compute mode and its line, for the tests
    /// about the other cells.
    fn plain(gpus: &[GpuRecord]) -> Vec<GpuRecord> {
        gpus.iter()
            .map(|g| GpuRecord {
                compute_mode: None,
                usage_span: None,
                ..g.clone()
            })
            .collect()
    }

    /// `g` with the `GPU-Util` its memory row shows.
    fn busy(g: GpuRecord, pct: u32) -> GpuRecord {
        GpuRecord {
            utilization_pct: Some(pct),
            ..g
        }
    }

    fn process(line: u32, gpu: u32, pid: u32, name: &str, used: Option<u64>) -> GpuProcessRecord {
        GpuProcessRecord {
            gpu_index: Some(gpu),
            gpu_uuid: None,
            pid,
            name: name.to_owned(),
            name_truncated: name.starts_with("..."),
            used_mib: used,
            used_truncated: false,
            span: span(line),
        }
    }

    fn listing(kind: ProcessListingKind, rows: usize, line: u32) -> ProcessListing {
        ProcessListing {
            kind,
            rows,
            span: span(line),
        }
    }

    fn header(driver: &str, cuda: Option<&str>, width: usize, line: u32) -> SmiHeader {
        SmiHeader {
            driver_version: driver.to_owned(),
            cuda_version: cuda.map(str::to_owned),
            width,
            time: None,
            span: span(line),
        }
    }

    /// The header with the time of the date line above its table.
    fn dated(mut h: SmiHeader, local: &str) -> SmiHeader {
        h.time = Some(Timestamp {
            local: NaiveDateTime::parse_from_str(local, "%Y-%m-%d %H:%M:%S").expect("time"),
            offset_secs: None,
            year_known: true,
        });
        h
    }

    const SAMPLE_A_470: &str = "\
Mon Jun  3 09:14:07 2024       
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.199.02   Driver Version: 470.199.02   CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  NVIDIA A100-SXM...  On   | 00000000:07:00.0 Off |                    0 |
| N/A   41C    P0    88W / 400W |  36912MiB / 40536MiB |     37%      Default |
|                               |                      |             Disabled |
+-------------------------------+----------------------+----------------------+
|   1  NVIDIA A100-SXM...  On   | 00000000:0F:00.0 Off |                    0 |
| N/A   39C    P0    84W / 400W |  36890MiB / 40536MiB |     35%      Default |
|                               |                      |             Disabled |
+-------------------------------+----------------------+----------------------+
                                                                               
+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|    0   N/A  N/A     21734      C   /usr/bin/python3                36909MiB |
|    1   N/A  N/A     21735      C   /usr/bin/python3                36887MiB |
+-----------------------------------------------------------------------------+
";

    const SAMPLE_B_535: &str = "\
Sat Jun  1 12:00:03 2024       
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.183.01             Driver Version: 535.183.01   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |                    0 |
| N/A   36C    P0             121W / 700W |   1026MiB / 81559MiB |      0%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+
|   1  NVIDIA H100 80GB HBM3          On  | 00000000:2A:00.0 Off |                    0 |
| N/A   41C    P0             276W / 700W |  25384MiB / 81559MiB |     98%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+
                                                                                         
+---------------------------------------------------------------------------------------+
| Processes:                                                                            |
|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |
|        ID   ID                                                             Usage      |
|=======================================================================================|
|    0   N/A  N/A      4318      C   sglang::scheduler_TP0                      1018MiB |
|    1   N/A  N/A      4319      C   sglang::scheduler_TP1                      1018MiB |
|    1   N/A  N/A     77101      C   ...doe/miniconda3/envs/eval/bin/python    24358MiB |
+---------------------------------------------------------------------------------------+
";

    const SAMPLE_C_580: &str = "\
Sat Jun  1 12:10:44 2024       
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.95.05              Driver Version: 580.95.05      CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:18:00.0 Off |                    0 |
| N/A   41C    P0            312W /  700W |  131201MiB / 143771MiB |     87%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA H200                    On  |   00000000:2A:00.0 Off |                    0 |
| N/A   44C    P0            325W /  700W |  131187MiB / 143771MiB |     89%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
|   2  NVIDIA H200                    On  |   00000000:3A:00.0 Off |                    0 |
| N/A   36C    P0            121W /  700W |   28611MiB / 143771MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A           48213      C   sglang::scheduler_TP0                 13118... |
|    1   N/A  N/A           48214      C   sglang::scheduler_TP1                 13117... |
+-----------------------------------------------------------------------------------------+
";

    /// 570: 91 wide, wide PID column, `|---` rule under the header line.
    const LAYOUT_570: &str = "\
Fri Nov 27 09:41:12 2026       
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.172.08             Driver Version: 570.172.08     CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA RTX PRO 6000 Blac...    On  |   00000000:01:00.0 Off |                  Off |
| 30%   45C    P1            112W /  600W |   90211MiB /  97887MiB |      4%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA RTX PRO 6000 Blac...    On  |   00000000:C1:00.0 Off |                  Off |
|100%   74C    P1            560W /  600W |    2211MiB /  97887MiB |    100%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
                                                                                         
+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A         1204311      C   VLLM::EngineCore                      90200MiB |
|    1   N/A  N/A            2150      G   /usr/lib/xorg/Xorg                        4MiB |
|    1   N/A  N/A            2388    C+G   C:\\Program Files\\My App.exe                N/A |
+-----------------------------------------------------------------------------------------+
";

    /// ≤ 440: two lines per GPU, no CUDA version (≤ 410), old process header.
    const LAYOUT_410_SAMPLE_D: &str = "\
Tue Mar  5 08:01:22 2019       
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 410.79       Driver Version: 410.79                              |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla V100-SXM2...  On   | 00000000:00:1E.0 Off |                    0 |
| N/A   34C    P0    41W / 300W |      0MiB / 16130MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
                                                                               
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|  No running processes found                                                 |
+-----------------------------------------------------------------------------+
";

    #[test]
    fn sample_a_470() {
        let (facts, unrecognized) = run(SAMPLE_A_470);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.smi_headers,
            vec![dated(
                header("470.199.02", Some("11.4"), 79, 3),
                "2024-06-03 09:14:07"
            )]
        );
        assert_eq!(
            without_utilization(&facts.gpus),
            vec![
                gpu(
                    9,
                    0,
                    "NVIDIA A100-SXM...",
                    "0000:07:00.0",
                    Some(36912),
                    Some(40536)
                ),
                gpu(
                    13,
                    1,
                    "NVIDIA A100-SXM...",
                    "0000:0f:00.0",
                    Some(36890),
                    Some(40536)
                ),
            ]
        );
        assert!(facts.gpus[0].name_truncated);
        assert_eq!(
            facts.gpu_processes,
            vec![
                process(23, 0, 21734, "/usr/bin/python3", Some(36909)),
                process(24, 1, 21735, "/usr/bin/python3", Some(36887)),
            ]
        );
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::Rows, 2, 19)]
        );
    }

    #[test]
    fn sample_b_535() {
        let (facts, unrecognized) = run(SAMPLE_B_535);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.smi_headers,
            vec![dated(
                header("535.183.01", Some("12.2"), 89, 3),
                "2024-06-01 12:00:03"
            )]
        );
        let h100 = "NVIDIA H100 80GB HBM3";
        assert_eq!(
            plain(&facts.gpus),
            vec![
                busy(gpu(9, 0, h100, "0000:18:00.0", Some(1026), Some(81559)), 0),
                busy(
                    gpu(13, 1, h100, "0000:2a:00.0", Some(25384), Some(81559)),
                    98
                ),
            ]
        );
        assert!(!facts.gpus[0].name_truncated);
        let eval = "...doe/miniconda3/envs/eval/bin/python";
        assert_eq!(
            facts.gpu_processes,
            vec![
                process(23, 0, 4318, "sglang::scheduler_TP0", Some(1018)),
                process(24, 1, 4319, "sglang::scheduler_TP1", Some(1018)),
                process(25, 1, 77101, eval, Some(24358)),
            ]
        );
        assert!(facts.gpu_processes[2].name_truncated);
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::Rows, 3, 19)]
        );
    }

    #[test]
    fn sample_c_580_memory_overflow() {
        let (facts, unrecognized) = run(SAMPLE_C_580);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.smi_headers,
            vec![dated(
                header("580.95.05", Some("13.0"), 91, 3),
                "2024-06-01 12:10:44"
            )]
        );
        assert_eq!(
            without_utilization(&facts.gpus),
            vec![
                gpu(
                    9,
                    0,
                    "NVIDIA H200",
                    "0000:18:00.0",
                    Some(131201),
                    Some(143771)
                ),
                gpu(
                    13,
                    1,
                    "NVIDIA H200",
                    "0000:2a:00.0",
                    Some(131187),
                    Some(143771)
                ),
                gpu(
                    17,
                    2,
                    "NVIDIA H200",
                    "0000:3a:00.0",
                    Some(28611),
                    Some(143771)
                ),
            ]
        );
        let cut = |line, gpu, pid, name| GpuProcessRecord {
            used_truncated: true,
            ..process(line, gpu, pid, name, None)
        };
        assert_eq!(
            facts.gpu_processes,
            vec![
                cut(27, 0, 48213, "sglang::scheduler_TP0"),
                cut(28, 1, 48214, "sglang::scheduler_TP1"),
            ]
        );
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::Rows, 2, 23)]
        );
    }

    #[test]
    fn layout_570_wide_pid_and_rule_under_header() {
        let (facts, unrecognized) = run(LAYOUT_570);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.smi_headers,
            vec![dated(
                header("570.172.08", Some("12.8"), 91, 3),
                "2026-11-27 09:41:12"
            )]
        );
        let pro = "NVIDIA RTX PRO 6000 Blac...";
        assert_eq!(
            plain(&facts.gpus),
            vec![
                busy(gpu(9, 0, pro, "0000:01:00.0", Some(90211), Some(97887)), 4),
                busy(
                    gpu(13, 1, pro, "0000:c1:00.0", Some(2211), Some(97887)),
                    100
                ),
            ]
        );
        assert!(facts.gpus[1].name_truncated);
        assert_eq!(
            facts.gpu_processes,
            vec![
                process(23, 0, 1204311, "VLLM::EngineCore", Some(90200)),
                process(24, 1, 2150, "/usr/lib/xorg/Xorg", Some(4)),
                process(25, 1, 2388, r"C:\Program Files\My App.exe", None),
            ]
        );
        assert!(!facts.gpu_processes[2].used_truncated);
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::Rows, 3, 19)]
        );
    }

    #[test]
    fn layout_410_two_line_gpus_and_no_running_processes() {
        let (facts, unrecognized) = run(LAYOUT_410_SAMPLE_D);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.smi_headers,
            vec![dated(header("410.79", None, 79, 3), "2019-03-05 08:01:22")]
        );
        // The date line is the snapshot's time, for the timeline.
        assert_eq!(
            facts.line_times,
            vec![(span(1), facts.smi_headers[0].time.expect("dated"))]
        );
        assert_eq!(
            without_utilization(&facts.gpus),
            vec![gpu(
                8,
                0,
                "Tesla V100-SXM2...",
                "0000:00:1e.0",
                Some(0),
                Some(16130)
            )]
        );
        assert!(facts.gpu_processes.is_empty());
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::NoneFound, 0, 13)]
        );
    }

    #[test]
    fn layout_440_old_process_rows() {
        let table = "\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 440.33.01    Driver Version: 440.33.01    CUDA Version: 10.2     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce GTX 108...  Off  | 00000000:01:00.0  On |                  N/A |
| 23%   31C    P8    11W / 250W |    622MiB / 11175MiB |      1%      Default |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|    0      1163      G   /usr/lib/xorg/Xorg                           383MiB |
|    0      9912      C   python train.py                              235MiB |
+-----------------------------------------------------------------------------+";
        let (facts, unrecognized) = run(table);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.smi_headers,
            vec![header("440.33.01", Some("10.2"), 79, 2)]
        );
        assert_eq!(
            without_utilization(&facts.gpus),
            vec![gpu(
                7,
                0,
                "GeForce GTX 108...",
                "0000:01:00.0",
                Some(622),
                Some(11175)
            )]
        );
        assert_eq!(
            facts.gpu_processes,
            vec![
                process(15, 0, 1163, "/usr/lib/xorg/Xorg", Some(383)),
                process(16, 0, 9912, "python train.py", Some(235)),
            ]
        );
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::Rows, 2, 12)]
        );
    }

    #[test]
    fn layout_530_no_space_before_bar_and_6xx_wording() {
        let table = "\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 530.30.02              Driver Version: 530.30.02    CUDA Version: 12.1     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                  Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf            Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA GeForce RTX 4090         Off| 00000000:01:00.0  On |                  Off |
|  0%   38C    P8               22W / 450W|   1150MiB / 24564MiB |      3%      Default |
|                                         |                      |                  N/A |
+-----------------------------------------+----------------------+----------------------+
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 610.57.04              KMD Version: 610.57.04     CUDA UMD Version: 13.3     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA GB10                    On  |   0000000F:01:00.0 Off |                  N/A |
| N/A   40C    P0              9W /  N/A  |          Not Supported |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+";
        let (facts, unrecognized) = run(table);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.smi_headers,
            vec![
                header("530.30.02", Some("12.1"), 89, 2),
                header("610.57.04", Some("13.3"), 91, 13),
            ]
        );
        assert_eq!(
            plain(&facts.gpus),
            vec![
                busy(
                    gpu(
                        8,
                        0,
                        "NVIDIA GeForce RTX 4090",
                        "0000:01:00.0",
                        Some(1150),
                        Some(24564)
                    ),
                    3
                ),
                busy(gpu(19, 0, "NVIDIA GB10", "000f:01:00.0", None, None), 0),
            ]
        );
        assert!(facts.process_listings.is_empty());
    }

    #[test]
    fn empty_process_block_and_cuda_na() {
        let table = "\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.127.05             Driver Version: 550.127.05     CUDA Version: N/A      |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA L40S                    On  |   00000000:26:00.0 Off |                    0 |
| N/A   33C    P0             79W /  350W |   40190MiB /  46068MiB |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
                                                                                         
+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
+-----------------------------------------------------------------------------------------+";
        let (facts, unrecognized) = run(table);
        assert_eq!(unrecognized, 0);
        assert_eq!(facts.smi_headers, vec![header("550.127.05", None, 91, 2)]);
        assert_eq!(
            without_utilization(&facts.gpus),
            vec![gpu(
                8,
                0,
                "NVIDIA L40S",
                "0000:26:00.0",
                Some(40190),
                Some(46068)
            )]
        );
        assert!(facts.gpu_processes.is_empty());
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::EmptyBlock, 0, 14)]
        );
    }

    #[test]
    fn mig_devices_section_is_recognised() {
        let table = "\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.183.01             Driver Version: 535.183.01   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA A100-SXM4-40GB          On  | 00000000:07:00.0 Off |                   On |
| N/A   31C    P0              44W / 400W |     13MiB / 40960MiB |     N/A      Default |
|                                         |                      |              Enabled |
+-----------------------------------------+----------------------+----------------------+

+---------------------------------------------------------------------------------------+
| MIG devices:                                                                          |
+------------------+--------------------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |                   Memory-Usage |        Vol|      Shared           |
|      ID  ID  Dev |                     BAR1-Usage | SM     Unc| CE ENC DEC OFA JPG    |
|                  |                                |        ECC|                       |
|==================+================================+===========+=======================|
|  0    1   0   0  |              13MiB / 40192MiB  | 98      0 |  7   0    5    1    1 |
|                  |               0MiB / 65535MiB  |           |                       |
+------------------+--------------------------------+-----------+-----------------------+

+---------------------------------------------------------------------------------------+
| Processes:                                                                            |
|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |
|        ID   ID                                                             Usage      |
|=======================================================================================|
|    0    1    0      5111      C   python3                                       12MiB |
+---------------------------------------------------------------------------------------+";
        let (facts, unrecognized) = run(table);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            plain(&facts.gpus),
            vec![gpu(
                8,
                0,
                "NVIDIA A100-SXM4-40GB",
                "0000:07:00.0",
                Some(13),
                Some(40960)
            )]
        );
        assert_eq!(
            facts.gpu_processes,
            vec![process(29, 0, 5111, "python3", Some(12))]
        );
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::Rows, 1, 25)]
        );
    }

    #[test]
    fn truncated_table_keeps_the_gpus_read_so_far() {
        // Cut in the middle of GPU 1's memory cell.
        let table = "\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.183.01             Driver Version: 535.183.01   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |                    0 |
| N/A   36C    P0             121W / 700W |   1026MiB / 81559MiB |      0%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+
|   1  NVIDIA H100 80GB HBM3          On  | 00000000:2A:00.0 Off |                    0 |
| N/A   41C    P0             276W / 700W |  25384MiB / 815";
        let (facts, unrecognized) = run(table);
        assert_eq!(unrecognized, 0);
        let h100 = "NVIDIA H100 80GB HBM3";
        assert_eq!(
            plain(&facts.gpus),
            vec![
                busy(gpu(8, 0, h100, "0000:18:00.0", Some(1026), Some(81559)), 0),
                // The cut memory cell is not read as 815 MiB.
                gpu(12, 1, h100, "0000:2a:00.0", None, None),
            ]
        );
        assert!(facts.process_listings.is_empty());

        // Cut in GPU 1's bus id cell, then inside its name.
        let end = table.find("00000000:2A").unwrap_or(0);
        let (facts, _) = run(&table[..end + 6]);
        assert_eq!(
            facts.gpus[1],
            GpuRecord {
                bus_id: None,
                memory_used_mib: None,
                memory_total_mib: None,
                ..gpu(12, 1, h100, "", None, None)
            }
        );
        let end = table
            .find("80GB HBM3          On  | 00000000:2A")
            .unwrap_or(0);
        let (facts, _) = run(&table[..end]);
        assert_eq!(
            facts.gpus[1],
            GpuRecord {
                index: Some(1),
                span: Some(span(12)),
                ..GpuRecord::default()
            }
        );

        // Cut inside the process block: the rows read so far count.
        let cut = &SAMPLE_B_535[..SAMPLE_B_535.find("77101").unwrap_or(0)];
        let (facts, _) = run(cut);
        assert_eq!(facts.gpus.len(), 2);
        assert_eq!(facts.gpu_processes.len(), 2);
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::Rows, 2, 19)]
        );

        // Cut right after the `|===` line: nothing is known about processes.
        let cut = &SAMPLE_B_535[..SAMPLE_B_535.find("|    0   N/A").unwrap_or(0)];
        let (facts, _) = run(cut);
        assert!(facts.process_listings.is_empty());
    }

    #[test]
    fn consecutive_tables_and_error_lines() {
        let text = format!(
            "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n{SAMPLE_B_535}\
             NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n\
             Failed to initialize NVML: Driver/library version mismatch\n\
             NVML library version: 535.183\n\
             No devices were found\n{LAYOUT_410_SAMPLE_D}"
        );
        let (facts, unrecognized) = run(&text);
        assert_eq!(unrecognized, 0);
        let spans: Vec<u32> = facts.smi_headers.iter().map(|h| h.span.line).collect();
        assert_eq!(spans, vec![4, 34]);
        assert_eq!(facts.gpus.len(), 3);
        assert_eq!(facts.gpus[2].span, Some(span(39)));
        assert_eq!(
            facts.process_listings,
            vec![
                listing(ProcessListingKind::Rows, 3, 20),
                listing(ProcessListingKind::NoneFound, 0, 44),
            ]
        );
    }

    #[test]
    fn odd_process_rows() {
        // ≤ 390 consumer cards: the driver cannot list processes. That is
        // not an empty block (which would mean "hidden processes").
        let unsupported = "\
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|    0                    Not Supported                                       |
+-----------------------------------------------------------------------------+";
        let (facts, unrecognized) = run(unsupported);
        assert_eq!(unrecognized, 0);
        assert!(facts.gpu_processes.is_empty());
        assert!(facts.process_listings.is_empty());

        // A row without a name still gives its PID and memory.
        let nameless = "\
+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A           31544      C                                          1204MiB |
+-----------------------------------------------------------------------------------------+";
        let (facts, unrecognized) = run(nameless);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.gpu_processes,
            vec![process(6, 0, 31544, "", Some(1204))]
        );
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::Rows, 1, 2)]
        );
    }

    /// A condensed process listing without bars or `Type`
    /// (https://github.com/sgl-project/sglang/issues/23627): memory as
    /// `100998 MiB`, one GPU per scheduler.
    #[test]
    fn bare_process_listing() {
        let (facts, unrecognized) = run("\
GPU  PID       Process name                          GPU Memory
  0  2505781   sglang::scheduler_DP0_TP0_EP0         100998 MiB
  1  2505782   sglang::scheduler_DP1_TP1_EP1         101044 MiB
  3  2505784   sglang::scheduler_DP3_TP3_EP3         100804MiB
a line that is no row");
        assert_eq!(unrecognized, 1);
        assert_eq!(
            facts.gpu_processes,
            vec![
                process(2, 0, 2505781, "sglang::scheduler_DP0_TP0_EP0", Some(100998)),
                process(3, 1, 2505782, "sglang::scheduler_DP1_TP1_EP1", Some(101044)),
                process(4, 3, 2505784, "sglang::scheduler_DP3_TP3_EP3", Some(100804)),
            ]
        );
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::Rows, 3, 1)]
        );
        // With `GI CI` and `Type`, as the ≥ 450 header reads without bars.
        let (facts, unrecognized) = run("\
  GPU   GI   CI        PID   Type   Process name                  GPU Memory
    0   N/A  N/A     21734      C   /usr/bin/python3                36909MiB");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.gpu_processes,
            vec![process(2, 0, 21734, "/usr/bin/python3", Some(36909))]
        );
    }

    /// What a chat window keeps of a table: the header row without bars and
    /// one process row (https://github.com/huggingface/text-generation-inference/issues/955),
    /// or one GPU block without the header
    /// (https://github.com/ai-dynamo/dynamo/issues/308).
    #[test]
    fn fragments_without_their_headers() {
        let (facts, unrecognized) = run("\
NVIDIA-SMI 470.141.03   Driver Version: 470.141.03   CUDA Version: 11.4

|    4   N/A  N/A     93051      C   /opt/conda/bin/python3.9        39399MiB |");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.smi_headers,
            vec![header("470.141.03", Some("11.4"), 71, 1)]
        );
        assert_eq!(
            facts.gpu_processes,
            vec![process(
                3,
                4,
                93051,
                "/opt/conda/bin/python3.9",
                Some(39399)
            )]
        );
        // A row alone says nothing of the GPU's other processes.
        assert!(facts.process_listings.is_empty());

        // Cut just below `| Processes:`: still the whole block.
        let (facts, unrecognized) = run("\
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|    0     13347      C   python                                     10505MiB |
|    1     13347      C   python                                      4991MiB |
+-----------------------------------------------------------------------------+");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            facts.gpu_processes,
            vec![
                process(3, 0, 13347, "python", Some(10505)),
                process(4, 1, 13347, "python", Some(4991)),
            ]
        );
        assert_eq!(
            facts.process_listings,
            vec![listing(ProcessListingKind::Rows, 2, 1)]
        );

        let (facts, unrecognized) = run("\
+-----------------------------------------+----------------------+----------------------+
|   5  NVIDIA H800                    On  | 00000000:A3:00.0 Off |                    0 |
| N/A   31C    P0             113W / 700W |   5903MiB / 81559MiB |    100%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            without_utilization(&facts.gpus),
            vec![gpu(
                2,
                5,
                "NVIDIA H800",
                "0000:a3:00.0",
                Some(5903),
                Some(81559)
            )]
        );
    }

    #[test]
    fn unknown_rows_are_counted() {
        let text = format!("{SAMPLE_A_470}| some other table |\nfree text\n");
        let (_, unrecognized) = run(&text);
        assert_eq!(unrecognized, 2);
    }

    #[test]
    fn garbage_and_odd_unicode_never_panic() {
        let garbage = [
            "",
            "|",
            "||",
            "+",
            "|=|",
            "| NVIDIA-SMI",
            "| NVIDIA-SMI é Driver Version: 日本 CUDA Version: ",
            "| Processes:",
            "|    0   N/A  N/A",
            "|    0   N/A  N/A     ",
            "|    0   N/A  N/A     123      C   ",
            "|    0   N/A  N/A     123      C   é",
            "|    0   N/A  N/A     99999999999999999999      C   x   1MiB |",
            "|    0      1      C+G      ...   |",
            "|   0  ñññ…|  00000000:é:00.0 |",
            "|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |",
            "| N/A   36C    P0   121W / 700W | 日本MiB / 81559MiB |",
            "| N/A | / |",
            "| N/A | ////// |",
            "\u{0}\u{1}\u{7f}\u{feff}|\u{fffd}|\u{200b}",
            "|日|本|語|",
            "+-=+|é",
            "|   4294967296  x | y |",
        ];
        for g in garbage {
            run(g);
            // Each garbage line inside every state of a real table.
            for (i, _) in SAMPLE_C_580.match_indices('\n') {
                let text = format!("{}{g}\n{}", &SAMPLE_C_580[..=i], &SAMPLE_C_580[i + 1..]);
                run(&text);
            }
        }
        // Every prefix of every sample, cut at each character boundary, with
        // multi-byte characters swapped in near the column bars.
        for sample in [SAMPLE_A_470, SAMPLE_B_535, SAMPLE_C_580, LAYOUT_570] {
            let odd = sample.replace(" |", "é|").replace("| ", "|日");
            for text in [sample, odd.as_str()] {
                for (i, _) in text.char_indices() {
                    run(&text[..i]);
                }
            }
        }
    }

    /// A box of `dcgmi discovery -l` (https://github.com/NVIDIA/DCGM/issues/229)
    /// then, spliced with no blank line between, the table of
    /// https://github.com/ollama/ollama/issues/12722 (a 573 driver): the
    /// box's lines are left to the text-table reader, the table is read.
    #[test]
    fn a_dcgmi_box_is_left_alone_and_a_table_after_it_is_read() {
        let text = "\
+--------+----------------------------------------------------------------------+
| GPU ID | Device Information                                                   |
+--------+----------------------------------------------------------------------+
| 0      | Name: <<<NULL>>>                                                     |
|        | PCI Bus ID: 00000000:4C:00.0                                         |
|        | Device UUID: GPU-d6a2c177-4cd8-8d01-0310-79f2720f37de                |
+--------+----------------------------------------------------------------------+
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 573.44                 Driver Version: 573.44         CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                  Driver-Model | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+
|   0  Quadro RTX 3000              WDDM  |   00000000:01:00.0 Off |                  N/A |
| N/A   55C    P8              5W /   65W |       0MiB /   6144MiB |      0%      Default |
";
        let lines = Line::numbered(text);
        let mut facts = Facts::default();
        let missed = read(&lines, &mut facts);
        assert_eq!(missed, [1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(facts.smi_headers.len(), 1);
        let got: Vec<_> = facts
            .gpus
            .iter()
            .map(|g| (g.index, g.bus_id.as_deref(), g.memory_total_mib))
            .collect();
        assert_eq!(got, [(Some(0), Some("0000:01:00.0"), Some(6144))]);
    }
}
