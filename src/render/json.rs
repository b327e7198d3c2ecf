//! The JSON report: versioned, serialize-only wire types (see
//! docs/report-schema.md). The only place serde touches the output.

use serde::Serialize;

use super::Report;
use super::json_capture::{self, JsonCapture, JsonEvent, JsonGap};
use crate::rules::{Action, ActionKind, Finding, GpuHold, ProcessIdentity, with_flag};

/// Bump on any change that can break a consumer; document it in
/// docs/report-schema.md.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct JsonReport<'a> {
    schema_version: u32,
    tool: Tool,
    root_cause: Option<&'a str>,
    findings: Vec<JsonFinding<'a>>,
    unrecognized_errors: Vec<JsonUnknown>,
    inputs: Vec<JsonInput>,
    inventory: JsonInventory<'a>,
    capture: Option<JsonCapture<'a>>,
    gaps: Vec<JsonGap<'a>>,
    timeline: Vec<JsonEvent<'a>>,
    /// Templates of lines seen more often than read: absent when none.
    #[serde(skip_serializing_if = "RepeatedLines::is_empty")]
    repeated_lines: RepeatedLines<'a>,
}

/// The report's repeated lines, each resolved as it is written: thousands
/// of templates (a request log whose status makes its template) are not
/// all held as text at once.
struct RepeatedLines<'a>(&'a Report<'a>);

impl RepeatedLines<'_> {
    fn is_empty(&self) -> bool {
        self.0.repeats.is_empty()
    }
}

impl Serialize for RepeatedLines<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let report = self.0;
        let line = |span| {
            let l = report.resolve(span);
            JsonEvidenceLine {
                input: l.input,
                line: l.line,
                text: l.text,
            }
        };
        serializer.collect_seq(report.repeats.iter().map(|r| JsonRepeat {
            count: r.count,
            first: line(r.first),
            last: line(r.last),
            read_first: r.read,
            kept_last: r.kept_last,
        }))
    }
}

#[derive(Serialize)]
struct JsonRepeat {
    count: u64,
    first: JsonEvidenceLine,
    last: JsonEvidenceLine,
    read_first: u32,
    kept_last: u32,
}

/// What the inputs show, failed or not: the four entity arrays in the form
/// of a finding's `entities`, then the detail.
#[derive(Serialize)]
struct JsonInventory<'a> {
    pids: Vec<u32>,
    gpus: Vec<GpuKey<'a>>,
    units: Vec<&'a str>,
    xid: Vec<u32>,
    gpu_details: Vec<JsonInventoryGpu<'a>>,
    processes: Vec<JsonInventoryProcess<'a>>,
    unit_details: Vec<JsonInventoryUnit<'a>>,
    xid_events: Vec<JsonInventoryXid<'a>>,
    servers: Vec<JsonInventoryServer<'a>>,
    containers: Vec<JsonInventoryContainer<'a>>,
}

#[derive(Serialize)]
struct JsonInventoryContainer<'a> {
    name: Option<&'a str>,
    status: Option<&'a str>,
    pid: Option<u32>,
    exit_code: Option<i64>,
    oom_killed: bool,
    dead: bool,
    error: Option<&'a str>,
    started_at: Option<&'a str>,
    finished_at: Option<&'a str>,
    /// `input:line` of its object's first line.
    line: String,
    server: Option<JsonInventoryServer<'a>>,
}

#[derive(Serialize)]
struct JsonInventoryServer<'a> {
    pid: u32,
    name: &'a str,
    seen: &'a str,
    unit: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonInventoryGpu<'a> {
    index: u32,
    name: Option<&'a str>,
    memory_used_mib: Option<u64>,
    memory_total_mib: Option<u64>,
    uuid: Option<&'a str>,
    bus_id: Option<&'a str>,
    xid: &'a [u32],
}

#[derive(Serialize)]
struct JsonInventoryProcess<'a> {
    pid: u32,
    name: &'a str,
    used_mib: Option<u64>,
    gpu: Option<u32>,
    unit: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonInventoryUnit<'a> {
    name: &'a str,
    pids: &'a [u32],
    active_state: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonInventoryXid<'a> {
    code: u32,
    gpu: Option<u32>,
    bus_id: Option<&'a str>,
    count: u32,
    pids: &'a [u32],
}

fn inventory<'a>(report: &Report<'_>, inv: &'a crate::render::Inventory) -> JsonInventory<'a> {
    let gpus = inv
        .gpus
        .iter()
        .map(|g| GpuKey::Index(g.index))
        .chain(inv.gpu_bus_ids.iter().map(|b| GpuKey::BusId(b)))
        .collect();
    JsonInventory {
        pids: inv.pids.iter().copied().collect(),
        gpus,
        units: inv.units.iter().map(|u| u.name.as_str()).collect(),
        xid: inv.xid_codes(),
        gpu_details: inv
            .gpus
            .iter()
            .map(|g| JsonInventoryGpu {
                index: g.index,
                name: g.name.as_deref(),
                memory_used_mib: g.used_mib,
                memory_total_mib: g.total_mib,
                uuid: g.uuid.as_deref(),
                bus_id: g.bus_id.as_deref(),
                xid: &g.xids,
            })
            .collect(),
        processes: inv
            .processes
            .iter()
            .map(|p| JsonInventoryProcess {
                pid: p.pid,
                name: &p.name,
                used_mib: p.used_mib,
                gpu: p.gpu,
                unit: p.unit.as_deref(),
            })
            .collect(),
        unit_details: inv
            .units
            .iter()
            .map(|u| JsonInventoryUnit {
                name: &u.name,
                pids: &u.pids,
                active_state: u.active_state.as_deref(),
            })
            .collect(),
        xid_events: inv
            .xids
            .iter()
            .map(|x| JsonInventoryXid {
                code: x.code,
                gpu: x.gpu,
                bus_id: x.bus_id.as_deref(),
                count: x.count,
                pids: &x.pids,
            })
            .collect(),
        servers: inv.servers.iter().map(json_server).collect(),
        containers: inv
            .containers
            .iter()
            .map(|c| JsonInventoryContainer {
                name: c.name.as_deref(),
                status: c.status.as_deref(),
                pid: c.pid,
                exit_code: c.exit_code,
                oom_killed: c.oom_killed,
                dead: c.dead,
                error: c.error.as_deref(),
                started_at: c.started_at.as_deref(),
                finished_at: c.finished_at.as_deref(),
                line: report.cite(c.span),
                server: c.server.as_ref().map(json_server),
            })
            .collect(),
    }
}

fn json_server(s: &crate::render::InventoryServer) -> JsonInventoryServer<'_> {
    JsonInventoryServer {
        pid: s.pid,
        name: &s.name,
        seen: s.seen,
        unit: s.unit.as_deref(),
    }
}

#[derive(Serialize)]
struct Tool {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
struct JsonInput {
    name: String,
    format: &'static str,
    first_line: u32,
    last_line: u32,
    lines: u32,
    unrecognized_lines: u32,
    /// Lines no parser read that a finding cites; absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    cited_lines: u32,
    prose_lines: u32,
    prompt_lines: u32,
    detected_because: &'static str,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Serialize)]
struct JsonUnknown {
    fingerprint: String,
    template: String,
    count: usize,
    first: JsonEvidenceLine,
}

#[derive(Serialize)]
struct JsonEvidenceLine {
    input: String,
    line: u32,
    text: String,
}

#[derive(Serialize)]
struct JsonCompeting<'a> {
    id: &'a str,
    confidence: f64,
}

#[derive(Serialize)]
struct JsonFinding<'a> {
    id: &'a str,
    rule: &'a str,
    category: &'static str,
    severity: &'static str,
    confidence: f64,
    title: &'a str,
    headline: &'a str,
    explanation: &'a str,
    chain: &'a [String],
    entities: JsonEntities<'a>,
    evidence: Vec<JsonEvidence>,
    conditions: Vec<JsonCondition<'a>>,
    actions: Vec<JsonAction<'a>>,
    explains: &'a [String],
    competing: Vec<JsonCompeting<'a>>,
    occurrences: u32,
    refused_values: &'a [String],
}

#[derive(Serialize)]
struct JsonEntities<'a> {
    pids: Vec<u32>,
    gpus: Vec<GpuKey<'a>>,
    units: Vec<&'a str>,
    xid: Vec<u32>,
}

#[derive(Serialize)]
struct JsonEvidence {
    input: String,
    line: u32,
    text: String,
    note: String,
}

#[derive(Serialize)]
struct JsonCondition<'a> {
    text: &'a str,
    met: bool,
}

#[derive(Serialize)]
struct JsonAction<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    safety: &'static str,
    description: String,
    why: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(flatten)]
    params: JsonActionParams<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    details: Vec<String>,
    evidence: Vec<String>,
}

/// Type-specific fields, flattened into the action; absent when unused.
#[derive(Serialize, Default)]
struct JsonActionParams<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    unit: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_unit: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_cmdline: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_start: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    grace_secs: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uuid: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpus: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_uuids: Option<Vec<Option<&'a str>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_used_mib: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_secs: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flag: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exec_start: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suggested_exec_start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<&'a str>,
}

impl<'a> JsonActionParams<'a> {
    fn process(&mut self, p: &'a ProcessIdentity) {
        self.pid = Some(p.pid.get());
        self.expected_unit = p.unit.as_ref().map(|u| u.as_str());
        self.expected_cmdline = p.cmdline.as_ref().map(|c| c.as_str());
        self.expected_start = p.start.as_ref().map(|s| s.as_str());
        self.held_gpu(&p.gpu);
    }

    /// The GPU the process must hold memory on when the script runs.
    fn held_gpu(&mut self, hold: &'a GpuHold) {
        if let GpuHold::On(g) = hold {
            self.gpu = Some(g.index);
            self.uuid = g.uuid.as_ref().map(|u| u.as_str());
        }
    }
}

#[cfg(test)]
pub fn render(report: &Report<'_>) -> String {
    let mut out = Vec::new();
    write(report, &mut out).expect("report serialises");
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// [`render`], written to `out` as it is serialised: a report of thousands
/// of repeated lines is megabytes of JSON, not held twice (a string, then
/// the caller's copy of it).
pub fn write(report: &Report<'_>, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let wire = JsonReport {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "rootcause",
            version: env!("CARGO_PKG_VERSION"),
        },
        root_cause: report.diagnosis.root_cause.as_deref(),
        findings: report
            .findings()
            .iter()
            .map(|f| finding(report, f))
            .collect(),
        unrecognized_errors: report
            .diagnosis
            .unknown_errors
            .iter()
            .map(|g| {
                let first = report.resolve(g.first);
                JsonUnknown {
                    fingerprint: g.fingerprint.clone(),
                    template: g.template.clone(),
                    count: g.count,
                    first: JsonEvidenceLine {
                        input: first.input,
                        line: first.line,
                        text: first.text,
                    },
                }
            })
            .collect(),
        inputs: report
            .inputs
            .iter()
            .map(|i| JsonInput {
                name: report.sources.get(i.segment.source).name.clone(),
                format: i.segment.format.name(),
                first_line: i.segment.first_line,
                last_line: i.segment.last_line,
                lines: i.lines,
                unrecognized_lines: i.unrecognized,
                cited_lines: i.cited.len() as u32,
                prose_lines: i.prose,
                prompt_lines: i.prompts,
                detected_because: i.segment.why,
            })
            .collect(),
        inventory: inventory(report, &report.inventory),
        capture: json_capture::capture(report),
        gaps: json_capture::gaps(report),
        timeline: json_capture::timeline(report),
        repeated_lines: RepeatedLines(report),
    };
    serde_json::to_writer_pretty(&mut *out, &wire)?;
    out.write_all(b"\n")
}

fn finding<'a>(report: &Report<'_>, f: &'a Finding) -> JsonFinding<'a> {
    JsonFinding {
        id: &f.id,
        rule: f.rule,
        category: f.category.name(),
        severity: f.severity.name(),
        confidence: f.confidence,
        title: &f.title,
        headline: &f.headline,
        explanation: &f.explanation,
        chain: &f.chain,
        entities: JsonEntities {
            pids: f.entities.pids.iter().copied().collect(),
            gpus: GpuKey::all(&f.entities),
            units: f.entities.units.iter().map(String::as_str).collect(),
            xid: f.entities.xid.iter().copied().collect(),
        },
        evidence: f
            .evidence
            .iter()
            .map(|e| {
                let line = report.resolve(e.span);
                JsonEvidence {
                    input: line.input,
                    line: line.line,
                    text: line.text,
                    note: e.note.clone(),
                }
            })
            .collect(),
        conditions: f
            .conditions
            .iter()
            .map(|c| JsonCondition {
                text: &c.text,
                met: c.met,
            })
            .collect(),
        actions: f.actions.iter().map(|a| action(report, a)).collect(),
        explains: &f.explains,
        competing: f
            .competing
            .iter()
            .map(|(id, confidence)| JsonCompeting {
                id,
                confidence: *confidence,
            })
            .collect(),
        occurrences: f.occurrences,
        refused_values: &f.refused,
    }
}

fn action<'a>(report: &Report<'_>, a: &'a Action) -> JsonAction<'a> {
    let mut p = JsonActionParams::default();
    match &a.kind {
        ActionKind::StopUnit { unit, holder } => {
            p.unit = Some(unit.as_str());
            if let Some((pid, hold)) = holder {
                p.pid = Some(pid.get());
                p.held_gpu(hold);
            }
        }
        ActionKind::DisableUnit { unit } | ActionKind::RestartUnit { unit } => {
            p.unit = Some(unit.as_str())
        }
        ActionKind::TerminateProcess {
            process,
            grace_secs,
        } => {
            p.process(process);
            p.grace_secs = Some(*grace_secs);
        }
        ActionKind::WaitProcessExit {
            process,
            timeout_secs,
        } => {
            p.process(process);
            p.timeout_secs = Some(*timeout_secs);
        }
        ActionKind::WaitGpuMemoryFree {
            gpus,
            max_used_mib,
            timeout_secs,
        } => {
            p.gpus = Some(gpus.iter().map(|g| g.index).collect());
            if gpus.iter().any(|g| g.uuid.is_some()) {
                p.gpu_uuids = Some(
                    gpus.iter()
                        .map(|g| g.uuid.as_ref().map(|u| u.as_str()))
                        .collect(),
                );
            }
            p.max_used_mib = Some(*max_used_mib);
            p.timeout_secs = Some(*timeout_secs);
        }
        ActionKind::VerifyUnitActive { unit, timeout_secs } => {
            p.unit = Some(unit.as_str());
            p.timeout_secs = Some(*timeout_secs);
        }
        ActionKind::KillOrphans {
            unit,
            name,
            grace_secs,
        } => {
            p.unit = Some(unit.as_str());
            p.name = Some(name.as_str());
            p.grace_secs = Some(*grace_secs);
        }
        ActionKind::FreePort {
            port,
            listener,
            grace_secs,
        } => {
            p.port = Some(port.get());
            if let Some(l) = listener {
                p.process(l);
            }
            p.grace_secs = Some(*grace_secs);
        }
        ActionKind::SetServerFlag {
            unit,
            flag,
            current,
        } => {
            p.unit = Some(unit.as_str());
            p.flag = Some(flag.flag());
            p.value = Some(flag.value());
            p.exec_start = current.as_ref().map(|c| c.as_str());
            p.suggested_exec_start = current.as_ref().map(|c| with_flag(c.as_str(), flag));
        }
        ActionKind::ResetGpu { gpu, uuid } => {
            p.gpu = Some(*gpu);
            p.uuid = Some(uuid.as_str());
        }
        ActionKind::Drain { host } | ActionKind::Reboot { host } => {
            p.host = host.as_ref().map(|h| h.as_str());
        }
        ActionKind::Advice { .. } => {}
    }
    JsonAction {
        kind: a.kind.name(),
        safety: a.safety.name(),
        description: a.describe(),
        why: &a.why,
        command: a.command(),
        params: p,
        details: a.details(),
        evidence: a.evidence.iter().map(|s| report.cite(*s)).collect(),
    }
}

/// A GPU as the wire names it: its index, or, where the inputs never
/// resolved one, its PCI bus id (`"0000:dc:00"`).
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum GpuKey<'a> {
    Index(u32),
    BusId(&'a str),
}

impl<'a> GpuKey<'a> {
    /// Every GPU of `entities`: indices first, then bare bus ids.
    pub(super) fn all(entities: &'a crate::rules::Entities) -> Vec<GpuKey<'a>> {
        let indices = entities.gpus.iter().map(|&g| GpuKey::Index(g));
        let buses = entities.gpu_bus_ids.iter().map(|b| GpuKey::BusId(b));
        indices.chain(buses).collect()
    }
}
