//! `nvidia-smi --query-gpu=… --format=csv` and `--query-compute-apps=…
//! --format=csv` output (docs/formats.md): one [`GpuRecord`] per GPU line, one
//! [`GpuProcessRecord`] per process line and one [`ProcessListing`] per
//! compute-apps segment.
//!
//! The header is optional (`noheader`) and so are the units (`nounits`;
//! the header keeps `[MiB]` either way). With a header, columns are mapped
//! by name; without one, by the shape of the values. nvidia-smi does no
//! quoting, so a process name containing `, ` is recovered by splitting the
//! fixed fields off both ends of the line. Compute-apps rows carry the GPU's
//! UUID only: joining it to an index is correlation's job, not this one's.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::Line;
use super::values::{is_absent, is_smi_failure_line, normalize_bus_id, parse_mib};
use crate::model::{
    Facts, GpuHealth, GpuProcessRecord, GpuRecord, ProcessListing, ProcessListingKind, Reading,
};
use crate::source::Span;

/// One header field: `memory.used [MiB]`, `pci.bus_id`, `gpu_uuid`.
static HEADER_FIELD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?P<name>[a-z][a-z0-9_.]*)(?: \[[^\]]*\])?$").expect("csv header field regex")
});

/// Values that are numbers with a unit other than MiB, or floats:
/// `98 %`, `276.42 W`, `1980 MHz`, `45.5`.
static OTHER_NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[+-]?[0-9]+(?:\.[0-9]+)?\s*(?:%|W|MHz|C|KiB|GiB|B)?$").expect("csv number regex")
});

/// Enumerated values of other query fields, which are text but never a name.
static ENUM_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:P[0-9]+|Enabled|Disabled|Default|Exclusive_Process|Exclusive_Thread|Prohibited|On|Off|Yes|No|Active|Not Active|Pass|Fail)$",
    )
    .expect("csv enum regex")
});

/// Header names that mark a line as a header even when it has no `.` or `_`.
const PLAIN_HEADER_NAMES: [&str; 7] = [
    "index",
    "uuid",
    "name",
    "pid",
    "serial",
    "count",
    "timestamp",
];

// ---------------------------------------------------------------------------
// --query-gpu

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GpuColumn {
    Index,
    Uuid,
    Name,
    BusId,
    MemoryUsed,
    MemoryTotal,
    /// Health fields, read into a [`GpuHealth`]: `gpu_recovery_action`
    /// (`None`, `Reset`, `Reboot`, `Drain P2P`, `Drain and Reset`) …
    RecoveryAction,
    /// … and the Yes/No ones: `reset_status.reset_required`,
    /// `reset_status.drain_and_reset_recommended`, `retired_pages.pending`,
    /// `remapped_rows.pending`, `remapped_rows.failure`.
    ResetRequired,
    DrainAndReset,
    RetiredPagesPending,
    RemappedRowsPending,
    RemappingFailed,
    Other,
}

/// A value line, with its columns when a header maps them.
struct GpuRow<'a> {
    span: Span,
    fields: Vec<&'a str>,
    columns: Option<Vec<GpuColumn>>,
}

/// Parses one `--query-gpu` segment; returns the number of lines it did not
/// recognise.
pub fn parse_query_gpu(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    parse_query_gpu_as(None, lines, facts)
}

/// [`parse_query_gpu`] for the output of `command`, typed at the prompt
/// above: its `--query-gpu=` list names the columns of rows printed without
/// a header (`--format=csv,noheader`).
pub fn read_typed(command: &str, lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let typed = typed_fields(command).map(|names| names.iter().map(|n| gpu_column(n)).collect());
    parse_query_gpu_as(typed, lines, facts)
}

/// The fields of a command's `--query-gpu=` list (`nvidia-smi
/// --query-gpu=index,gpu_recovery_action --format=csv,noheader`, or the
/// list as the next word), as the header nvidia-smi would print.
pub(crate) fn typed_fields(command: &str) -> Option<Vec<&str>> {
    let mut words = command.split_whitespace();
    let list = loop {
        let word = words.next()?;
        if let Some(list) = word.strip_prefix("--query-gpu=") {
            break list;
        }
        if word == "--query-gpu" {
            break words.next()?;
        }
    };
    let names: Vec<&str> = list
        .trim_matches(['\'', '"'])
        .split(',')
        .map(str::trim)
        .collect();
    names
        .iter()
        .all(|n| HEADER_FIELD.is_match(n))
        .then_some(names)
}

fn parse_query_gpu_as(typed: Option<Vec<GpuColumn>>, lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut unrecognized = 0;
    let mut header: Option<Vec<GpuColumn>> = typed;
    // Rows wait until every headerless row was seen: one row's `[N/A]` says
    // nothing about its column, another row's value does.
    let mut rows: Vec<GpuRow<'_>> = Vec::new();
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() || is_smi_failure_line(text) {
            continue;
        }
        if let Some(names) = header_names(text) {
            header = Some(names.iter().map(|n| gpu_column(n)).collect());
            continue;
        }
        let fields = split_fields(text);
        let columns = header
            .clone()
            .filter(|h| h.len() == fields.len() && gpu_row_fits(h, &fields));
        rows.push(GpuRow {
            span: line.span,
            fields,
            columns,
        });
    }

    let mut by_width: BTreeMap<usize, Vec<&[&str]>> = BTreeMap::new();
    for row in &rows {
        if row.columns.is_none() {
            by_width
                .entry(row.fields.len())
                .or_default()
                .push(&row.fields);
        }
    }
    let inferred: BTreeMap<usize, Vec<GpuColumn>> = by_width
        .into_iter()
        .map(|(width, rows)| (width, infer_gpu_columns(width, &rows)))
        .filter(|(_, columns)| headerless_layout_is_plausible(columns))
        .collect();

    for row in &rows {
        let columns = row.columns.as_ref();
        let columns = columns.or_else(|| inferred.get(&row.fields.len()));
        let Some(columns) = columns.filter(|c| gpu_row_fits(c, &row.fields)) else {
            unrecognized += 1;
            continue;
        };
        let record = gpu_record(columns, &row.fields, row.span);
        if let Some(health) = gpu_health(columns, &row.fields, &record, row.span) {
            facts.gpu_health.push(health);
        }
        if record.index.is_some()
            || record.uuid.is_some()
            || record.bus_id.is_some()
            || record.name.is_some()
        {
            facts.gpus.push(record);
        }
    }
    unrecognized
}

fn gpu_column(name: &str) -> GpuColumn {
    match name {
        "index" => GpuColumn::Index,
        "uuid" | "gpu_uuid" => GpuColumn::Uuid,
        "name" | "gpu_name" => GpuColumn::Name,
        "pci.bus_id" | "gpu_bus_id" => GpuColumn::BusId,
        "memory.used" => GpuColumn::MemoryUsed,
        "memory.total" => GpuColumn::MemoryTotal,
        "gpu_recovery_action" => GpuColumn::RecoveryAction,
        "reset_status.reset_required" => GpuColumn::ResetRequired,
        "reset_status.drain_and_reset_recommended" => GpuColumn::DrainAndReset,
        "retired_pages.pending" => GpuColumn::RetiredPagesPending,
        "remapped_rows.pending" => GpuColumn::RemappedRowsPending,
        "remapped_rows.failure" => GpuColumn::RemappingFailed,
        _ => GpuColumn::Other,
    }
}

/// Whether every value has the shape its column calls for, so that a stray
/// line with the right number of commas is not taken for a GPU.
fn gpu_row_fits(columns: &[GpuColumn], fields: &[&str]) -> bool {
    columns.iter().zip(fields).all(|(column, value)| {
        let allowed: &[Shape] = match column {
            GpuColumn::Index => &[Shape::Int],
            GpuColumn::Uuid => &[Shape::Uuid],
            GpuColumn::BusId => &[Shape::BusId],
            GpuColumn::MemoryUsed | GpuColumn::MemoryTotal => &[Shape::Mib, Shape::Int],
            // A health value is read only when it is one it knows.
            GpuColumn::Name
            | GpuColumn::RecoveryAction
            | GpuColumn::ResetRequired
            | GpuColumn::DrainAndReset
            | GpuColumn::RetiredPagesPending
            | GpuColumn::RemappedRowsPending
            | GpuColumn::RemappingFailed
            | GpuColumn::Other => return true,
        };
        let shape = shape(value);
        shape == Shape::Absent || allowed.contains(&shape)
    })
}

fn gpu_record(columns: &[GpuColumn], fields: &[&str], span: Span) -> GpuRecord {
    let mut record = GpuRecord {
        span: Some(span),
        ..GpuRecord::default()
    };
    for (column, value) in columns.iter().zip(fields) {
        let present = (!is_absent(value)).then(|| (*value).to_owned());
        match column {
            GpuColumn::Index => record.index = value.parse().ok(),
            GpuColumn::Uuid => record.uuid = present,
            GpuColumn::Name => {
                record.name_truncated = value.ends_with("...");
                record.name = present;
            }
            GpuColumn::BusId => record.bus_id = normalize_bus_id(value),
            GpuColumn::MemoryUsed => record.memory_used_mib = parse_mib(value),
            GpuColumn::MemoryTotal => record.memory_total_mib = parse_mib(value),
            _ => {}
        }
    }
    record
}

/// The health a row's health columns state (`1, Reset` under
/// `index,gpu_recovery_action`), for the GPU `record` names; `None` when
/// the row has no health column with a value.
fn gpu_health(
    columns: &[GpuColumn],
    fields: &[&str],
    record: &GpuRecord,
    span: Span,
) -> Option<GpuHealth> {
    let mut health = GpuHealth {
        index: record.index,
        uuid: record.uuid.clone(),
        bus_id: record.bus_id.clone(),
        ..GpuHealth::at(span)
    };
    let mut any = false;
    for (column, value) in columns.iter().zip(fields) {
        if is_absent(value) {
            continue;
        }
        let flag = || {
            let value = match *value {
                "Yes" => true,
                "No" => false,
                _ => return None,
            };
            Some(Reading { value, span })
        };
        let slot = match column {
            GpuColumn::RecoveryAction => {
                health.recovery_action = Some(Reading {
                    value: (*value).to_owned(),
                    span,
                });
                any = true;
                continue;
            }
            GpuColumn::ResetRequired => &mut health.reset_required,
            GpuColumn::DrainAndReset => &mut health.drain_and_reset_recommended,
            GpuColumn::RetiredPagesPending => &mut health.retired_pages_pending,
            GpuColumn::RemappedRowsPending => &mut health.remapped_rows_pending,
            GpuColumn::RemappingFailed => &mut health.remapping_failed,
            _ => continue,
        };
        *slot = flag();
        any |= slot.is_some();
    }
    any.then_some(health)
}

/// What a single value looks like, for headerless input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Absent,
    Int,
    Mib,
    Uuid,
    BusId,
    Text,
    Other,
}

fn shape(value: &str) -> Shape {
    if is_absent(value) {
        Shape::Absent
    } else if value.starts_with("GPU-") || value.starts_with("MIG-") {
        Shape::Uuid
    } else if normalize_bus_id(value).is_some() {
        Shape::BusId
    } else if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        Shape::Int
    } else if value.ends_with("MiB") && parse_mib(value).is_some() {
        Shape::Mib
    } else if OTHER_NUMBER.is_match(value) || ENUM_VALUE.is_match(value) {
        Shape::Other
    } else if value.chars().any(char::is_alphabetic) {
        Shape::Text
    } else {
        Shape::Other
    }
}

/// The shape of a column: its first present value's, except that one `MiB`
/// value makes a column of bare integers a memory column.
fn column_shape<'a>(values: impl Iterator<Item = &'a str>) -> Shape {
    values.fold(Shape::Absent, |column, value| {
        match (column, shape(value)) {
            (column, Shape::Absent) => column,
            (Shape::Absent, s) | (Shape::Int, s @ Shape::Mib) => s,
            (column, _) => column,
        }
    })
}

/// Without a header: an integer first = index, `GPU-…` = uuid, `0000…:…` =
/// bus id, first text = name, and memory: the `MiB` columns (or, with
/// `nounits`, the later integers) — first used, second total. A column that
/// is absent in every row takes a memory slot only while there are no more
/// than two candidates (`0, GPU-…, [GPU requires reset], 81559`).
fn infer_gpu_columns(width: usize, rows: &[&[&str]]) -> Vec<GpuColumn> {
    let shapes: Vec<Shape> = (0..width)
        .map(|i| column_shape(rows.iter().filter_map(|r| r.get(i).copied())))
        .collect();
    let mut columns = vec![GpuColumn::Other; width];
    let assign_first = |wanted: Shape, column: GpuColumn, columns: &mut Vec<GpuColumn>| {
        if let Some(i) = (0..width).find(|&i| shapes[i] == wanted && columns[i] == GpuColumn::Other)
        {
            columns[i] = column;
        }
    };
    if shapes.first() == Some(&Shape::Int) {
        columns[0] = GpuColumn::Index;
    }
    assign_first(Shape::Uuid, GpuColumn::Uuid, &mut columns);
    assign_first(Shape::BusId, GpuColumn::BusId, &mut columns);
    assign_first(Shape::Text, GpuColumn::Name, &mut columns);
    let memory_shape = if shapes.contains(&Shape::Mib) {
        Shape::Mib
    } else {
        Shape::Int
    };
    let mut memory: Vec<(usize, bool)> = (0..width)
        .filter(|&i| columns[i] == GpuColumn::Other)
        .filter_map(|i| match shapes[i] {
            s if s == memory_shape => Some((i, false)),
            Shape::Absent if i > 0 => Some((i, true)),
            _ => None,
        })
        .collect();
    if memory.len() > 2 {
        memory.retain(|&(_, absent)| !absent);
    }
    if let Some(&(i, _)) = memory.first() {
        columns[i] = GpuColumn::MemoryUsed;
    }
    if let Some(&(i, _)) = memory.get(1) {
        columns[i] = GpuColumn::MemoryTotal;
    }
    columns
}

/// A headerless layout must identify a GPU, so that a stray line of prose
/// with a comma in it is not read as one.
fn headerless_layout_is_plausible(columns: &[GpuColumn]) -> bool {
    let has = |c| columns.contains(&c);
    columns.len() >= 2
        && (has(GpuColumn::Index)
            || has(GpuColumn::Uuid)
            || has(GpuColumn::BusId)
            || (has(GpuColumn::Name) && has(GpuColumn::MemoryUsed)))
}

// ---------------------------------------------------------------------------
// --query-compute-apps

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AppColumn {
    Uuid,
    Pid,
    Name,
    Memory,
    Other,
}

/// Parses one `--query-compute-apps` segment; returns the number of lines
/// it did not recognise. Pushes one [`ProcessListing`] for the segment.
pub fn parse_compute_apps(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut unrecognized = 0;
    let mut header: Option<Vec<AppColumn>> = None;
    let mut rows = 0;
    let mut none_found = false;
    let mut failed = false;
    // The listing points at the first line that says something about it.
    let mut listing_span: Option<Span> = None;
    for line in lines {
        let text = line.text.trim();
        if text.is_empty() {
            continue;
        }
        if is_smi_failure_line(text) {
            failed = true;
            continue;
        }
        if text.starts_with("No running processes found") {
            none_found = true;
            listing_span.get_or_insert(line.span);
            continue;
        }
        if let Some(names) = header_names(text) {
            header = Some(names.iter().map(|n| app_column(n)).collect());
            listing_span.get_or_insert(line.span);
            continue;
        }
        let headed = header.as_deref().and_then(|columns| {
            let fields = split_row(text, columns)?;
            app_row_fits(columns, &fields).then_some((columns, fields))
        });
        let (columns, fields) = match headed {
            Some((columns, fields)) => (columns.to_vec(), fields),
            None => match headerless_app_columns(text)
                .and_then(|columns| Some((split_row(text, &columns)?, columns)))
                .filter(|(fields, columns)| app_row_fits(columns, fields))
            {
                Some((fields, columns)) => (columns, fields),
                None => {
                    unrecognized += 1;
                    continue;
                }
            },
        };
        rows += 1;
        listing_span.get_or_insert(line.span);
        if let Some(record) = process_record(&columns, &fields, line.span) {
            facts.gpu_processes.push(record);
        }
    }
    let kind = if rows > 0 {
        ProcessListingKind::Rows
    } else if failed && !none_found {
        // The query failed: it listed nothing, which is not "no processes".
        return unrecognized;
    } else {
        ProcessListingKind::NoneFound
    };
    if let Some(span) = listing_span.or_else(|| lines.first().map(|l| l.span)) {
        facts
            .process_listings
            .push(ProcessListing { kind, rows, span });
    }
    unrecognized
}

/// Whether every fixed value has the shape its column calls for.
fn app_row_fits(columns: &[AppColumn], fields: &[&str]) -> bool {
    columns.iter().zip(fields).all(|(column, value)| {
        let allowed: &[Shape] = match column {
            AppColumn::Uuid => &[Shape::Uuid],
            AppColumn::Pid => &[Shape::Int],
            AppColumn::Memory => &[Shape::Mib, Shape::Int],
            AppColumn::Name | AppColumn::Other => return true,
        };
        let shape = shape(value);
        shape == Shape::Absent || allowed.contains(&shape)
    })
}

fn app_column(name: &str) -> AppColumn {
    match name {
        "gpu_uuid" => AppColumn::Uuid,
        "pid" => AppColumn::Pid,
        "process_name" | "name" => AppColumn::Name,
        "used_gpu_memory" | "used_memory" => AppColumn::Memory,
        _ => AppColumn::Other,
    }
}

/// Without a header: `GPU-uuid, pid, name, mem`, `pid, name, mem`, or the
/// same led by a bus id; the memory column only when the last value looks
/// like one.
fn headerless_app_columns(text: &str) -> Option<Vec<AppColumn>> {
    let fields = split_fields(text);
    let mut columns = match shape(fields.first()?) {
        Shape::Uuid => vec![AppColumn::Uuid, AppColumn::Pid],
        Shape::BusId => vec![AppColumn::Other, AppColumn::Pid],
        Shape::Int => vec![AppColumn::Pid],
        _ => return None,
    };
    let pid = fields.get(columns.len() - 1)?;
    if shape(pid) != Shape::Int {
        return None;
    }
    let rest = fields.len().checked_sub(columns.len())?;
    let last_is_memory = fields
        .last()
        .is_some_and(|v| matches!(shape(v), Shape::Mib | Shape::Int | Shape::Absent));
    match rest {
        0 => return None,
        1 => columns.push(AppColumn::Name),
        _ if last_is_memory => columns.extend([AppColumn::Name, AppColumn::Memory]),
        _ => columns.push(AppColumn::Name),
    }
    Some(columns)
}

/// Splits a row into exactly `columns.len()` fields. The name column takes
/// whatever lies between the fixed fields on its left and on its right, so
/// `, ` inside a process name survives.
fn split_row<'a>(text: &'a str, columns: &[AppColumn]) -> Option<Vec<&'a str>> {
    let Some(name_at) = columns.iter().position(|&c| c == AppColumn::Name) else {
        let fields = split_fields(text);
        return (fields.len() == columns.len()).then_some(fields);
    };
    let mut rest = text;
    let mut fields = Vec::with_capacity(columns.len());
    for _ in 0..name_at {
        let (field, tail) = rest.split_once(',')?;
        fields.push(field.trim());
        rest = tail;
    }
    let mut right = Vec::new();
    for _ in name_at + 1..columns.len() {
        let (head, field) = rest.rsplit_once(',')?;
        right.push(field.trim());
        rest = head;
    }
    fields.push(rest.trim());
    fields.extend(right.into_iter().rev());
    Some(fields)
}

fn process_record(columns: &[AppColumn], fields: &[&str], span: Span) -> Option<GpuProcessRecord> {
    let mut pid = None;
    let mut record = GpuProcessRecord {
        gpu_index: None,
        gpu_uuid: None,
        pid: 0,
        // `[Not Found]` (a PID NVML cannot resolve) is no name: left empty.
        name: String::new(),
        name_truncated: false,
        used_mib: None,
        used_truncated: false,
        span,
    };
    for (column, value) in columns.iter().zip(fields) {
        let present = (!is_absent(value)).then(|| (*value).to_owned());
        match column {
            AppColumn::Uuid => record.gpu_uuid = present,
            AppColumn::Pid => pid = value.parse().ok(),
            AppColumn::Name => record.name = present.unwrap_or_default(),
            AppColumn::Memory => record.used_mib = parse_mib(value),
            AppColumn::Other => {}
        }
    }
    // A row without a PID (`[N/A]`, or a query without `pid`) names no
    // process: it counts as a row of the listing but yields no record.
    record.pid = pid?;
    Some(record)
}

// ---------------------------------------------------------------------------
// Shared

/// The field names of a header line (units dropped), or `None` when the
/// line is not a header.
fn header_names(text: &str) -> Option<Vec<&str>> {
    let names = split_fields(text)
        .into_iter()
        .map(|f| {
            HEADER_FIELD
                .captures(f)
                .and_then(|c| c.name("name"))
                .map(|m| m.as_str())
        })
        .collect::<Option<Vec<&str>>>()?;
    names
        .iter()
        .any(|n| n.contains(['.', '_']) || PLAIN_HEADER_NAMES.contains(n))
        .then_some(names)
}

fn split_fields(text: &str) -> Vec<&str> {
    text.split(',').map(str::trim).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceId;

    fn span(line: u32) -> Span {
        Span {
            source: SourceId(0),
            line,
        }
    }

    fn query_gpu(text: &str) -> (Vec<GpuRecord>, u32) {
        let mut facts = Facts::default();
        let unrecognized = parse_query_gpu(&Line::numbered(text), &mut facts);
        (facts.gpus, unrecognized)
    }

    fn compute_apps(text: &str) -> (Vec<GpuProcessRecord>, Vec<ProcessListing>, u32) {
        let mut facts = Facts::default();
        let unrecognized = parse_compute_apps(&Line::numbered(text), &mut facts);
        (facts.gpu_processes, facts.process_listings, unrecognized)
    }

    const UUID0: &str = "GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14";
    const UUID1: &str = "GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566";

    fn gpu(line: u32, index: Option<u32>, uuid: Option<&str>) -> GpuRecord {
        GpuRecord {
            index,
            uuid: uuid.map(str::to_owned),
            span: Some(span(line)),
            ..GpuRecord::default()
        }
    }

    fn process(
        line: u32,
        uuid: Option<&str>,
        pid: u32,
        name: &str,
        used: Option<u64>,
    ) -> GpuProcessRecord {
        GpuProcessRecord {
            gpu_index: None,
            gpu_uuid: uuid.map(str::to_owned),
            pid,
            name: name.to_owned(),
            name_truncated: false,
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

    #[test]
    fn query_gpu_with_header_and_units() {
        let csv = "\
index, uuid, name, pci.bus_id, memory.used [MiB], memory.total [MiB], utilization.gpu [%]
0, GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 1026 MiB, 81559 MiB, 0 %
1, GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, 25384 MiB, 81559 MiB, 98 %
";
        let (gpus, unrecognized) = query_gpu(csv);
        assert_eq!(unrecognized, 0);
        let h100 = |line, index, uuid, bus: &str, used| GpuRecord {
            name: Some("NVIDIA H100 80GB HBM3".to_owned()),
            bus_id: Some(bus.to_owned()),
            memory_used_mib: Some(used),
            memory_total_mib: Some(81559),
            ..gpu(line, Some(index), Some(uuid))
        };
        assert_eq!(
            gpus,
            vec![
                h100(2, 0, UUID0, "0000:18:00.0", 1026),
                h100(3, 1, UUID1, "0000:2a:00.0", 25384),
            ]
        );
    }

    #[test]
    fn query_gpu_header_order_and_nounits() {
        // Columns mapped by name, not position; nounits keeps `[MiB]` in the header.
        let csv = "\
memory.total [MiB], memory.used [MiB], uuid, index
81559, 1026, GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 0
";
        let (gpus, unrecognized) = query_gpu(csv);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            gpus,
            vec![GpuRecord {
                memory_used_mib: Some(1026),
                memory_total_mib: Some(81559),
                ..gpu(2, Some(0), Some(UUID0))
            }]
        );
    }

    #[test]
    fn query_gpu_noheader_nounits_with_error_token() {
        let csv = "\
0, GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 1026, 81559
1, GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566, [GPU requires reset], 81559
";
        let (gpus, unrecognized) = query_gpu(csv);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            gpus,
            vec![
                GpuRecord {
                    memory_used_mib: Some(1026),
                    memory_total_mib: Some(81559),
                    ..gpu(1, Some(0), Some(UUID0))
                },
                GpuRecord {
                    memory_used_mib: None,
                    memory_total_mib: Some(81559),
                    ..gpu(2, Some(1), Some(UUID1))
                },
            ]
        );
    }

    #[test]
    fn query_gpu_noheader_shapes() {
        // Units: the MiB columns are memory, the bare temperature is not.
        let csv = "\
0, NVIDIA L40S, 00000000:26:00.0, 41, 40190 MiB, 46068 MiB, P0, 79.21 W
1, NVIDIA L40S, 00000000:27:00.0, 39, [N/A], [N/A], P0, 80.02 W
";
        let (gpus, unrecognized) = query_gpu(csv);
        assert_eq!(unrecognized, 0);
        let l40s = |line, index, bus: &str, used, total| GpuRecord {
            name: Some("NVIDIA L40S".to_owned()),
            bus_id: Some(bus.to_owned()),
            memory_used_mib: used,
            memory_total_mib: total,
            ..gpu(line, Some(index), None)
        };
        assert_eq!(
            gpus,
            vec![
                l40s(1, 0, "0000:26:00.0", Some(40190), Some(46068)),
                l40s(2, 1, "0000:27:00.0", None, None),
            ]
        );

        // A single memory value is memory.used.
        let (gpus, _) = query_gpu("GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 1026 MiB\n");
        assert_eq!(
            gpus,
            vec![GpuRecord {
                memory_used_mib: Some(1026),
                ..gpu(1, None, Some(UUID0))
            }]
        );

        // Prose with a comma is not a GPU.
        let (gpus, unrecognized) = query_gpu("Note, these were taken after the crash\n");
        assert!(gpus.is_empty());
        assert_eq!(unrecognized, 1);
    }

    #[test]
    fn query_gpu_error_lines_are_recognised() {
        let (gpus, unrecognized) = query_gpu(
            "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.183\n",
        );
        assert!(gpus.is_empty());
        assert_eq!(unrecognized, 0);
    }

    /// NVIDIA/DCGM#263: `nvidia-smi --query-gpu=index,gpu_recovery_action
    /// --format=csv,noheader`, rows without a header.
    const RECOVERY_ROWS: &str = "0, None\n1, Reset\n2, None\n";

    #[test]
    fn typed_query_list_names_the_columns_of_rows_without_a_header() {
        let command = "nvidia-smi --query-gpu=index,gpu_recovery_action --format=csv,noheader";
        assert_eq!(
            typed_fields(command),
            Some(vec!["index", "gpu_recovery_action"])
        );
        let mut facts = Facts::default();
        let unrecognized = read_typed(command, &Line::numbered(RECOVERY_ROWS), &mut facts);
        assert_eq!(unrecognized, 0);
        // The action is no GPU name.
        assert!(
            facts.gpus.iter().all(|g| g.name.is_none()),
            "{:?}",
            facts.gpus
        );
        let actions: Vec<(Option<u32>, &str, u32)> = facts
            .gpu_health
            .iter()
            .filter_map(|h| {
                let r = h.recovery_action.as_ref()?;
                Some((h.index, r.value.as_str(), r.span.line))
            })
            .collect();
        // `None` is no action (an absent value, as `N/A` is).
        assert_eq!(actions, [(Some(1), "Reset", 2)]);
        // Without the command, the same rows are read by their shapes only.
        let (gpus, _) = query_gpu(RECOVERY_ROWS);
        assert_eq!(gpus[1].name.as_deref(), Some("Reset"));
    }

    #[test]
    fn health_columns_under_a_header_are_read_as_yes_or_no() {
        // The header nvidia-smi prints for this query (assembled with the
        // rows of the DCGM#263 paste's shape).
        let mut facts = Facts::default();
        let csv = "index, retired_pages.pending, remapped_rows.pending\n0, No, No\n1, Yes, [N/A]\n";
        assert_eq!(parse_query_gpu(&Line::numbered(csv), &mut facts), 0);
        let pending: Vec<(Option<u32>, Option<bool>, Option<bool>)> = facts
            .gpu_health
            .iter()
            .map(|h| {
                (
                    h.index,
                    h.retired_pages_pending.as_ref().map(|r| r.value),
                    h.remapped_rows_pending.as_ref().map(|r| r.value),
                )
            })
            .collect();
        assert_eq!(
            pending,
            [
                (Some(0), Some(false), Some(false)),
                (Some(1), Some(true), None)
            ]
        );
        assert!(typed_fields("nvidia-smi --query-gpu=index,name").is_some());
        assert!(typed_fields("nvidia-smi -q").is_none());
    }

    #[test]
    fn compute_apps_with_header_and_comma_in_name() {
        let csv = "\
gpu_uuid, pid, process_name, used_gpu_memory [MiB]
GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 4318, sglang::scheduler_TP0, 1018 MiB
GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566, 77101, /home/jdoe/miniconda3/envs/eval/bin/python, 24358 MiB
GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566, 77150, python eval.py --tasks a, b, c, 512 MiB
";
        let (processes, listings, unrecognized) = compute_apps(csv);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            processes,
            vec![
                process(2, Some(UUID0), 4318, "sglang::scheduler_TP0", Some(1018)),
                process(
                    3,
                    Some(UUID1),
                    77101,
                    "/home/jdoe/miniconda3/envs/eval/bin/python",
                    Some(24358)
                ),
                process(
                    4,
                    Some(UUID1),
                    77150,
                    "python eval.py --tasks a, b, c",
                    Some(512)
                ),
            ]
        );
        assert_eq!(listings, vec![listing(ProcessListingKind::Rows, 3, 1)]);
    }

    #[test]
    fn compute_apps_noheader_nounits_and_error_tokens() {
        let csv = "\
GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 4318, sglang::scheduler_TP0, 1018
GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566, 77101, [Not Found], 24358
GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566, 4242, python, a, b, [N/A]
";
        let (processes, listings, unrecognized) = compute_apps(csv);
        assert_eq!(unrecognized, 0);
        assert_eq!(
            processes,
            vec![
                process(1, Some(UUID0), 4318, "sglang::scheduler_TP0", Some(1018)),
                process(2, Some(UUID1), 77101, "", Some(24358)),
                process(3, Some(UUID1), 4242, "python, a, b", None),
            ]
        );
        assert_eq!(listings, vec![listing(ProcessListingKind::Rows, 3, 1)]);

        // `pid, process_name, used_memory` inside a container.
        let (processes, listings, unrecognized) = compute_apps(
            "pid, process_name, used_gpu_memory [MiB]\n77101, [Not Found], 24358 MiB\n",
        );
        assert_eq!(unrecognized, 0);
        assert_eq!(processes, vec![process(2, None, 77101, "", Some(24358))]);
        assert_eq!(listings, vec![listing(ProcessListingKind::Rows, 1, 1)]);

        let (processes, _, unrecognized) = compute_apps("77101, python3, 24358\n");
        assert_eq!(unrecognized, 0);
        assert_eq!(
            processes,
            vec![process(1, None, 77101, "python3", Some(24358))]
        );
    }

    #[test]
    fn compute_apps_without_rows_is_none_found() {
        let (processes, listings, unrecognized) =
            compute_apps("gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n");
        assert_eq!(unrecognized, 0);
        assert!(processes.is_empty());
        assert_eq!(listings, vec![listing(ProcessListingKind::NoneFound, 0, 1)]);

        let (_, listings, unrecognized) = compute_apps("\nNo running processes found\n");
        assert_eq!(unrecognized, 0);
        assert_eq!(listings, vec![listing(ProcessListingKind::NoneFound, 0, 2)]);

        // A failed query says nothing about processes.
        let (_, listings, unrecognized) =
            compute_apps("pid, process_name, used_gpu_memory [MiB]\nNo devices were found\n");
        assert_eq!(unrecognized, 0);
        assert!(listings.is_empty());
    }

    #[test]
    fn unknown_lines_are_counted() {
        let (_, listings, unrecognized) = compute_apps(
            "pid, process_name, used_gpu_memory [MiB]\nsomething else\nfoo, bar, baz\n",
        );
        assert_eq!(unrecognized, 2);
        assert_eq!(listings, vec![listing(ProcessListingKind::NoneFound, 0, 1)]);

        let (gpus, unrecognized) = query_gpu(
            "index, uuid, memory.used [MiB]\n0, GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14, 1 MiB\nsee above, for, details\n",
        );
        assert_eq!(unrecognized, 1);
        assert_eq!(gpus.len(), 1);
    }

    #[test]
    fn garbage_and_odd_unicode_never_panic() {
        let garbage = [
            "",
            ",",
            ",,,,",
            ", , ,",
            "index",
            "index, uuid",
            "pid, process_name",
            "0, GPU-",
            "GPU-, 1",
            "GPU-日本, 12, é, 1 MiB",
            "0, 日本語, 00000000:é:00.0, 1MiB, MiB",
            "99999999999999999999, x, 1",
            "1, \u{0}\u{7f}\u{feff}, \u{fffd}",
            "[N/A], [N/A], [N/A]",
            "pid, process_name, used_gpu_memory [MiB",
            "é, , ,,, 日",
            "1,é",
            "| NVIDIA-SMI 535.183.01   Driver Version: 535.183.01 |",
            "+-----+",
            "|    0   N/A  N/A      4318      C   python     1018MiB |",
        ];
        for g in &garbage {
            query_gpu(g);
            compute_apps(g);
        }
        let all = garbage.join("\n");
        query_gpu(&all);
        compute_apps(&all);
        let headed_gpu = format!("index, uuid, name, memory.used [MiB]\n{all}");
        query_gpu(&headed_gpu);
        let headed_apps = format!("gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n{all}");
        compute_apps(&headed_apps);
    }
}
