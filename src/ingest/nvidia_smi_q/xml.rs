//! `nvidia-smi -q -x` XML (docs/formats/nvidia.md), read with a real XML parser:
//! entities (`&amp;` in product names) are resolved, empty sections may be
//! `<processes/>` or the text `None`, and the DTD version (v10, v11, v12 …)
//! does not matter. A capture cut mid-document keeps what came before the
//! cut; the lines after the point where XML stopped making sense are counted
//! as unrecognised. A fragment pasted without the document around it (a
//! `<gpu id=…>` element, or one of a GPU's sections such as
//! `<clocks_event_reasons>`) is read as if its parents were there: the
//! sections of a GPU whose `<gpu id=…>` line was not pasted, as `-q`'s text
//! fragments are.

use quick_xml::Reader;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};

use super::Report;
use crate::ingest::Line;
use crate::model::Facts;
use crate::source::Span;

/// An element being read: its name, its start line and its text so far.
struct Open {
    name: String,
    span: Span,
    text: String,
    has_children: bool,
}

/// Parses one segment; returns the number of lines it did not recognise.
pub fn parse(lines: &[Line<'_>], facts: &mut Facts) -> u32 {
    let mut document = String::new();
    let mut starts = Vec::with_capacity(lines.len());
    for line in lines {
        starts.push(document.len());
        document.push_str(line.text);
        document.push('\n');
    }
    let span_at = |offset: usize| -> Option<Span> {
        let i = starts.partition_point(|s| *s <= offset).checked_sub(1)?;
        lines.get(i).map(|l| l.span)
    };

    let mut reader = Reader::from_str(&document);
    let config = reader.config_mut();
    // Untrimmed: text around an entity (`HBM3 &amp; NVL`) keeps its spaces;
    // each element's text is trimmed once it is complete.
    config.trim_text(false);
    // nvidia-smi writes well-formed XML; a paste may not be, and what was
    // read before the damage is still worth having.
    config.check_end_names = false;

    let mut report: Option<Report> = None;
    let mut open: Vec<Open> = Vec::new();
    // The parents a fragment's first element stands under (`nvidia_smi_log`,
    // `gpu`), put there by [`place_fragment`]: not open in the paste, so not
    // a cut when they are still open at its end.
    let mut implied = 0;
    // A fragment that begins inside a GPU's section (its first element a
    // leaf such as `<bridge_chip_type>`, closing `</pci>` it never opened):
    // the ends of elements opened above the paste are passed over.
    let mut began_inside = false;
    // How many such ends were passed over: none, and the fragment was
    // never inside nvidia-smi's document (`<session>…</session>`).
    let mut passed_over = 0;
    // A declaration or DOCTYPE: a document, whose first element must be
    // nvidia-smi's own.
    let mut declared = false;
    // Where the last element closed: a cut document is understood up to there.
    let mut understood = 0;
    loop {
        let tag_at = reader.buffer_position() as usize;
        let Some(span) = span_at(tag_at) else { break };
        let event = match reader.read_event() {
            Ok(Event::Eof) => break,
            Ok(event) => event,
            Err(_) => {
                // Everything from the damaged line on is not understood.
                if let Some(r) = report.take().filter(|_| !began_inside || passed_over > 0) {
                    r.close(facts);
                }
                let damaged = starts.partition_point(|s| *s <= tag_at).saturating_sub(1);
                return lines
                    .get(damaged..)
                    .unwrap_or_default()
                    .iter()
                    .filter(|l| !l.text.trim().is_empty())
                    .count() as u32;
            }
        };
        if let (Event::Start(e) | Event::Empty(e), true) = (&event, open.is_empty()) {
            if report.is_none() {
                implied = place_fragment(e, span, &mut open, &mut report, declared);
                began_inside = implied == 3;
                implied = implied.min(2);
                // The fragment's own `</gpu>` and `</nvidia_smi_log>` close
                // parents the paste did not open.
                reader.config_mut().allow_unmatched_ends = implied > 0;
            }
        }
        match event {
            Event::Start(e) => start(&e, span, &mut open, &mut report, facts),
            Event::Empty(e) => {
                start(&e, span, &mut open, &mut report, facts);
                close(&mut open, report.as_mut());
                understood = reader.buffer_position() as usize;
            }
            Event::Text(t) => {
                if let (Some(o), Ok(text)) = (open.last_mut(), t.decode()) {
                    o.text.push_str(&text);
                }
            }
            Event::CData(t) => {
                if let (Some(o), Ok(text)) = (open.last_mut(), t.decode()) {
                    o.text.push_str(&text);
                }
            }
            Event::GeneralRef(r) => {
                if let Some(o) = open.last_mut() {
                    let resolved = match r.resolve_char_ref() {
                        Ok(Some(c)) => Some(c.to_string()),
                        _ => r
                            .decode()
                            .ok()
                            .and_then(|name| resolve_predefined_entity(&name))
                            .map(str::to_owned),
                    };
                    o.text.push_str(&resolved.unwrap_or_default());
                }
            }
            Event::Decl(_) | Event::DocType(_) => declared = true,
            Event::End(e) => {
                let opened_above = began_inside
                    && open.len() <= implied
                    && open
                        .last()
                        .is_some_and(|o| o.name.as_bytes() != e.name().as_ref());
                if opened_above {
                    passed_over += 1;
                    understood = reader.buffer_position() as usize;
                    continue;
                }
                close(&mut open, report.as_mut());
                // A fragment's own `</gpu>` closes an implied parent.
                implied = implied.min(open.len());
                understood = reader.buffer_position() as usize;
            }
            _ => {}
        }
    }
    // Begun with an element nvidia-smi's GPU has no section of, closing
    // nothing it did not open: XML, but not nvidia-smi's.
    if began_inside && passed_over == 0 {
        report = None;
    }
    match report {
        Some(r) => {
            r.close(facts);
            // Elements left open: the capture was cut after `understood`.
            if open.len() <= implied {
                return 0;
            }
            let cut = starts.partition_point(|s| *s < understood);
            lines
                .get(cut..)
                .unwrap_or_default()
                .iter()
                .filter(|l| !l.text.trim().is_empty())
                .count() as u32
        }
        // XML, but not nvidia-smi's.
        None => lines.iter().filter(|l| !l.text.trim().is_empty()).count() as u32,
    }
}

/// The elements `nvsmi_device_v*.dtd` puts directly under `<gpu>`, from
/// v10 (`clocks_throttle_reasons`) to v12 (`clocks_event_reasons`): where
/// a fragment that starts with one of them stands. The detector starts a
/// segment only at the ones no other XML uses (`detect/nvidia.rs`).
pub(crate) const GPU_SECTIONS: &[&str] = &[
    "product_name",
    "product_brand",
    "product_architecture",
    "display_mode",
    "display_active",
    "persistence_mode",
    "addressing_mode",
    "mig_mode",
    "mig_devices",
    "accounting_mode",
    "accounting_mode_buffer_size",
    "driver_model",
    "serial",
    "uuid",
    "minor_number",
    "vbios_version",
    "multigpu_board",
    "board_id",
    "board_part_number",
    "gpu_part_number",
    "gpu_fru_part_number",
    "gpu_module_id",
    "inforom_version",
    "inforom_bbx_flush",
    "gpu_operation_mode",
    "c2c_mode",
    "gpu_virtualization_mode",
    "gsp_firmware_version",
    "ibmnpu",
    "pci",
    "fan_speed",
    "performance_state",
    "clocks_throttle_reasons",
    "clocks_event_reasons",
    "clocks_event_reasons_counters",
    "sparse_operation_mode",
    "fb_memory_usage",
    "bar1_memory_usage",
    "cc_protected_memory_usage",
    "compute_mode",
    "utilization",
    "encoder_stats",
    "fbc_stats",
    "ecc_mode",
    "ecc_errors",
    "retired_pages",
    "remapped_rows",
    "temperature",
    "supported_gpu_target_temp",
    "power_readings",
    "gpu_power_readings",
    "module_power_readings",
    "clocks",
    "applications_clocks",
    "default_applications_clocks",
    "deferred_clocks",
    "max_clocks",
    "max_customer_boost_clocks",
    "clock_policy",
    "voltage",
    "fabric",
    "supported_clocks",
    "processes",
    "accounted_processes",
    "capabilities",
    "gpu_reset_status",
    "gpu_recovery_action",
];

/// A document's first element when it is not `<nvidia_smi_log>`: a
/// `<gpu id=…>` stands under an implied root, a GPU section under an
/// implied root and a GPU with no bus id (its health is read, it is no GPU
/// of the inventory unless the fragment names it). Pasted without a
/// declaration, any other first element is read as inside a GPU's section
/// (a paste cut at its top, `<bridge_chip_type>` under `<pci>`): 3, the
/// root and a GPU implied, and the section above it left unnamed. Returns
/// how many parents were implied; none for XML that is not nvidia-smi's.
fn place_fragment(
    e: &BytesStart<'_>,
    span: Span,
    open: &mut Vec<Open>,
    report: &mut Option<Report>,
    declared: bool,
) -> usize {
    let name = e.name();
    let name = String::from_utf8_lossy(name.as_ref());
    let implied = match name.as_ref() {
        "gpu" => 1,
        section if GPU_SECTIONS.contains(&section) => 2,
        "nvidia_smi_log" => return 0,
        _ if !declared => 3,
        _ => return 0,
    };
    let parent = |name: &str| Open {
        name: name.to_owned(),
        span,
        text: String::new(),
        has_children: true,
    };
    open.push(parent("nvidia_smi_log"));
    let r = report.insert(Report::default());
    if implied >= 2 {
        r.anonymous_gpu(span);
        open.push(parent("gpu"));
    }
    implied
}

/// Opens an element: a new report at the root, a new GPU at `<gpu id=…>`.
fn start(
    e: &BytesStart<'_>,
    span: Span,
    open: &mut Vec<Open>,
    report: &mut Option<Report>,
    facts: &mut Facts,
) {
    let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
    if let Some(parent) = open.last_mut() {
        parent.has_children = true;
    }
    match (name.as_str(), open.len()) {
        ("nvidia_smi_log", _) => {
            if let Some(r) = report.replace(Report::default()) {
                r.close(facts);
            }
        }
        ("gpu", 1) => {
            let bus = e
                .try_get_attribute("id")
                .ok()
                .flatten()
                .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                .unwrap_or_default();
            report.get_or_insert_with(Report::default).gpu(&bus, span);
        }
        ("processes", 2) => {
            if let Some(r) = report.as_mut() {
                r.processes_seen(span);
            }
        }
        _ => {}
    }
    open.push(Open {
        name,
        span,
        text: String::new(),
        has_children: false,
    });
}

/// Closes the innermost element and hands a leaf to the report.
fn close(open: &mut Vec<Open>, report: Option<&mut Report>) {
    let Some(element) = open.pop() else { return };
    let Some(report) = report else { return };
    // The path below the root: `gpu/fb_memory_usage/used`.
    let mut path: Vec<&str> = open.iter().skip(1).map(|o| o.name.as_str()).collect();
    path.push(&element.name);
    let value = element.text.trim();
    match path.as_slice() {
        [key] if !element.has_children => report.top_level(key, value),
        ["gpu", "processes", ..] => {
            if let (["gpu", "processes", "process_info", leaf], false) =
                (path.as_slice(), element.has_children)
            {
                let leaf = match *leaf {
                    "process_name" => "name",
                    other => other,
                };
                if let Some(gpu) = report.current() {
                    gpu.process(leaf, value, element.span);
                }
            }
        }
        ["gpu", rest @ ..] if !element.has_children && !rest.is_empty() => {
            let key = rest.join("/");
            if let Some(gpu) = report.current() {
                gpu.set(&key, &key, value, element.span);
            }
        }
        _ => {}
    }
}
