//! Unit tests of the parser in this folder: every variant, with the parsed
//! fields and line numbers pinned.

use super::*;
use crate::ingest::Line;
use crate::model::ProcessListingKind;
use crate::source::SourceId;

fn at(line: u32) -> Span {
    Span {
        source: SourceId(0),
        line,
    }
}

fn text(input: &str) -> (Facts, u32) {
    let mut facts = Facts::default();
    let unrecognized = parse_text(&Line::numbered(input), &mut facts);
    (facts, unrecognized)
}

fn xml(input: &str) -> (Facts, u32) {
    let mut facts = Facts::default();
    let unrecognized = parse_xml(&Line::numbered(input), &mut facts);
    (facts, unrecognized)
}

fn read<T>(value: T, line: u32) -> Option<Reading<T>> {
    Some(Reading {
        value,
        span: at(line),
    })
}

type GpuRow<'a> = (
    Option<u32>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<u64>,
    Option<u64>,
    Option<u32>,
);

fn gpus(facts: &Facts) -> Vec<GpuRow<'_>> {
    facts
        .gpus
        .iter()
        .map(|g| {
            (
                g.index,
                g.uuid.as_deref(),
                g.name.as_deref(),
                g.bus_id.as_deref(),
                g.memory_used_mib,
                g.memory_total_mib,
                g.span.map(|s| s.line),
            )
        })
        .collect()
}

type ProcRow<'a> = (
    u32,
    Option<u32>,
    Option<&'a str>,
    u32,
    &'a str,
    bool,
    Option<u64>,
);

fn processes(facts: &Facts) -> Vec<ProcRow<'_>> {
    facts
        .gpu_processes
        .iter()
        .map(|p| {
            (
                p.span.line,
                p.gpu_index,
                p.gpu_uuid.as_deref(),
                p.pid,
                p.name.as_str(),
                p.name_truncated,
                p.used_mib,
            )
        })
        .collect()
}

fn counters(h: &GpuHealth) -> Vec<(EccScope, EccKind, &str, u64, u32)> {
    h.ecc
        .iter()
        .map(|c| (c.scope, c.kind, c.location, c.count, c.span.line))
        .collect()
}

const H100_UUID: &str = "GPU-5b1e0c3a-7d2f-4c88-9e61-0a7f3b2c9d14";
const SICK_UUID: &str = "GPU-c0ffee11-2a3b-4c5d-8e9f-112233445566";

#[test]
fn text_550_gpus_processes_and_health() {
    let (facts, unrecognized) = text(include_str!(
        "../../../fixtures/formats/nvidia-smi-q/h100-550-remap-pending.txt"
    ));
    assert_eq!(unrecognized, 0);
    assert_eq!(
        gpus(&facts),
        vec![
            (
                Some(0),
                Some(H100_UUID),
                Some("NVIDIA H100 80GB HBM3"),
                Some("0000:18:00.0"),
                Some(1026),
                Some(81559),
                Some(9)
            ),
            (
                Some(1),
                Some(SICK_UUID),
                Some("NVIDIA H100 80GB HBM3"),
                Some("0000:2a:00.0"),
                None,
                Some(81559),
                Some(106)
            ),
        ]
    );
    assert_eq!(
        processes(&facts),
        vec![(
            101,
            Some(0),
            Some(H100_UUID),
            4318,
            "sglang::scheduler_TP0",
            false,
            Some(1018)
        )]
    );
    assert_eq!(
        facts.process_listings,
        vec![ProcessListing {
            kind: ProcessListingKind::Rows,
            rows: 1,
            span: at(98)
        }]
    );

    let h = &facts.gpu_health[0];
    assert_eq!(
        (h.index, h.uuid.as_deref(), h.bus_id.as_deref()),
        (Some(0), Some(H100_UUID), Some("0000:18:00.0"))
    );
    assert_eq!(h.driver_version.as_deref(), Some("550.127.05"));
    assert_eq!(h.persistence_mode, read(true, 15));
    assert_eq!(h.ecc_enabled, read(true, 59));
    assert_eq!(h.reset_required, read(false, 33));
    assert_eq!(h.drain_and_reset_recommended, read(false, 34));
    assert_eq!(h.recovery_action, read("None".to_owned(), 35));
    assert_eq!(h.sram_threshold_exceeded, read(false, 74));
    assert_eq!(h.retired_pages_pending, None);
    assert_eq!(h.retired_pages_single_bit, None);
    assert_eq!(h.remapped_rows_correctable, read(0, 86));
    assert_eq!(h.remapped_rows_uncorrectable, read(1, 87));
    assert_eq!(h.remapped_rows_pending, read(true, 88));
    assert_eq!(h.remapping_failed, read(false, 89));
    assert_eq!(h.banks_without_spare_rows, read(0, 95));
    use EccKind::{Correctable as C, Uncorrectable as U};
    use EccScope::{Aggregate as A, Volatile as V};
    assert_eq!(
        counters(h),
        vec![
            (V, C, "SRAM", 0, 63),
            (V, U, "SRAM parity", 0, 64),
            (V, U, "SRAM SEC-DED", 0, 65),
            (V, C, "DRAM", 3, 66),
            (V, U, "DRAM", 1, 67),
            (A, C, "SRAM", 0, 69),
            (A, U, "SRAM parity", 0, 70),
            (A, U, "SRAM SEC-DED", 0, 71),
            (A, C, "DRAM", 12, 72),
            (A, U, "DRAM", 1, 73),
        ]
    );
    let uncorrectable: Vec<u32> = h.uncorrectable_errors().map(|c| c.span.line).collect();
    assert_eq!(uncorrectable, vec![67, 73]);
    assert!(h.sick_values.is_empty());

    let sick = &facts.gpu_health[1];
    assert_eq!(sick.reset_required, read(true, 111));
    assert_eq!(sick.drain_and_reset_recommended, read(true, 112));
    assert_eq!(sick.recovery_action, read("Reset".to_owned(), 113));
    let tokens: Vec<(&str, &str, u32)> = sick
        .sick_values
        .iter()
        .map(|s| (s.field.as_str(), s.token.as_str(), s.span.line))
        .collect();
    assert_eq!(
        tokens,
        vec![
            ("Used", "[GPU requires reset]", 119),
            ("Free", "[GPU requires reset]", 120),
            ("SRAM Correctable", "ERR!", 123),
        ]
    );
    assert!(sick.ecc.is_empty());
}

#[test]
fn text_470_single_and_double_bit_and_page_retirement() {
    let (facts, unrecognized) = text(include_str!(
        "../../../fixtures/formats/nvidia-smi-q/v100-470-page-retirement.txt"
    ));
    assert_eq!(unrecognized, 0);
    assert_eq!(
        gpus(&facts),
        vec![(
            Some(0),
            Some("GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"),
            Some("Tesla V100-SXM2-16GB"),
            Some("0000:00:1e.0"),
            Some(15000),
            Some(16160),
            Some(9)
        )]
    );
    let uuid = Some("GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d");
    assert_eq!(
        processes(&facts),
        vec![
            (
                54,
                Some(0),
                uuid,
                77101,
                "/home/jdoe/miniconda3/envs/eval/bin/python",
                false,
                Some(14996)
            ),
            (58, Some(0), uuid, 77102, "............./Xorg", true, None),
        ]
    );
    let h = &facts.gpu_health[0];
    assert_eq!(h.driver_version.as_deref(), Some("470.256.02"));
    assert_eq!(h.persistence_mode, read(false, 11));
    assert_eq!(h.retired_pages_single_bit, read(1, 50));
    assert_eq!(h.retired_pages_double_bit, read(2, 51));
    assert_eq!(h.retired_pages_pending, read(true, 52));
    assert_eq!(h.remapped_rows_pending, None);
    use EccKind::{Correctable as C, Uncorrectable as U};
    use EccScope::{Aggregate as A, Volatile as V};
    // Only the totals: the per-location rows would count each error twice.
    assert_eq!(
        counters(h),
        vec![
            (V, C, "Total", 0, 32),
            (V, U, "Total", 2, 41),
            (A, C, "Total", 5, 45),
            (A, U, "Total", 2, 48),
        ]
    );
}

#[test]
fn text_without_every_gpu_has_no_index_and_unreachable_gpus_are_sick() {
    let (facts, unrecognized) = text("\
==============NVSMI LOG==============

Timestamp                                 : Sat Jun  1 12:00:03 2024
Driver Version                            : 535.183.01
CUDA Version                              : 12.2

Attached GPUs                             : 8
GPU 00000000:3B:00.0
    Product Name                          : NVIDIA A100-SXM4-80GB
    GPU UUID                              : GPU-3f9e8d7c-6b5a-4c3d-2e1f-0a9b8c7d6e5f
    Processes                             : None

Unable to determine the device handle for GPU0000:5D:00.0: Unknown Error
Unable to determine the device handle for gpu 0000:5E:00.0: GPU is lost.  Reboot the system to recover this GPU
stray words here");
    assert_eq!(unrecognized, 1);
    assert_eq!(facts.gpus.len(), 1);
    assert_eq!(facts.gpus[0].index, None);
    assert_eq!(facts.gpus[0].bus_id.as_deref(), Some("0000:3b:00.0"));
    assert_eq!(
        facts.process_listings,
        vec![ProcessListing {
            kind: ProcessListingKind::NoneFound,
            rows: 0,
            span: at(11)
        }]
    );
    let unreachable: Vec<(Option<&str>, &str, u32)> = facts
        .gpu_health
        .iter()
        .filter(|h| !h.sick_values.is_empty())
        .map(|h| {
            (
                h.bus_id.as_deref(),
                h.sick_values[0].token.as_str(),
                h.span.line,
            )
        })
        .collect();
    assert_eq!(
        unreachable,
        vec![
            (Some("0000:5d:00.0"), "Unknown Error", 13),
            (
                Some("0000:5e:00.0"),
                "GPU is lost.  Reboot the system to recover this GPU",
                14
            ),
        ]
    );
}

#[test]
fn xml_gpus_processes_and_health() {
    let (facts, unrecognized) = xml(include_str!(
        "../../../fixtures/formats/nvidia-smi-q-xml/h100-550.xml"
    ));
    assert_eq!(unrecognized, 0);
    assert_eq!(
        gpus(&facts),
        vec![
            (
                Some(0),
                Some(H100_UUID),
                Some("NVIDIA H100 80GB HBM3"),
                Some("0000:18:00.0"),
                Some(1026),
                Some(81559),
                Some(8)
            ),
            (
                Some(1),
                Some(SICK_UUID),
                Some("NVIDIA H100 80GB HBM3 & friends"),
                Some("0000:2a:00.0"),
                Some(25384),
                Some(81559),
                Some(78)
            ),
        ]
    );
    assert_eq!(
        processes(&facts),
        vec![(
            114,
            Some(1),
            Some(SICK_UUID),
            77101,
            "/home/jdoe/miniconda3/envs/eval/bin/python",
            false,
            Some(24358)
        )]
    );
    assert_eq!(
        facts.process_listings,
        vec![ProcessListing {
            kind: ProcessListingKind::Rows,
            rows: 1,
            span: at(74)
        }]
    );
    let h = &facts.gpu_health[0];
    assert_eq!(h.driver_version.as_deref(), Some("550.127.05"));
    assert_eq!(h.persistence_mode, read(true, 10));
    assert_eq!(h.reset_required, read(false, 14));
    assert_eq!(h.recovery_action, read("None".to_owned(), 17));
    assert_eq!(h.ecc_enabled, read(true, 29));
    assert_eq!(h.sram_threshold_exceeded, read(false, 46));
    assert_eq!(h.retired_pages_single_bit, None);
    assert_eq!(h.retired_pages_pending, None);
    assert_eq!(h.remapped_rows_pending, read(false, 64));
    assert_eq!(h.banks_without_spare_rows, read(0, 71));
    assert_eq!(h.ecc.len(), 10);
    assert_eq!(h.uncorrectable_errors().count(), 0);

    let sick = &facts.gpu_health[1];
    assert_eq!(sick.reset_required, read(true, 83));
    assert_eq!(sick.remapped_rows_uncorrectable, read(1, 106));
    assert_eq!(sick.remapped_rows_pending, read(true, 107));
    assert_eq!(sick.remapping_failed, read(false, 108));
    let uncorrectable: Vec<(EccScope, &str, u64, u32)> = sick
        .uncorrectable_errors()
        .map(|c| (c.scope, c.location, c.count, c.span.line))
        .collect();
    assert_eq!(uncorrectable, vec![(EccScope::Volatile, "DRAM", 1, 101)]);
}

#[test]
fn xml_variants_empty_sections_and_sick_values() {
    let (facts, unrecognized) = xml(r#"<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v10.dtd">
<nvidia_smi_log>
  <driver_version>470.256.02</driver_version>
  <attached_gpus>1</attached_gpus>
  <gpu id="00000000:00:1E.0">
    <product_name>Tesla V100-SXM2-16GB</product_name>
    <uuid>GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d</uuid>
    <fb_memory_usage>
      <total>16160 MiB</total>
      <used>Unknown Error</used>
    </fb_memory_usage>
    <ecc_errors>
      <volatile>
        <single_bit><device_memory>0</device_memory><total>0</total></single_bit>
        <double_bit><device_memory>2</device_memory><total>2</total></double_bit>
      </volatile>
    </ecc_errors>
    <retired_pages>
      <multiple_single_bit_retirement><retired_count>1</retired_count></multiple_single_bit_retirement>
      <double_bit_retirement><retired_count>2</retired_count></double_bit_retirement>
      <pending_blacklist>No</pending_blacklist>
      <pending_retirement>Yes</pending_retirement>
    </retired_pages>
    <processes/>
  </gpu>
</nvidia_smi_log>"#);
    assert_eq!(unrecognized, 0);
    assert_eq!(facts.gpus.len(), 1);
    assert_eq!(facts.gpus[0].memory_used_mib, None);
    let h = &facts.gpu_health[0];
    let tokens: Vec<(&str, &str, u32)> = h
        .sick_values
        .iter()
        .map(|s| (s.field.as_str(), s.token.as_str(), s.span.line))
        .collect();
    assert_eq!(tokens, vec![("fb_memory_usage/used", "Unknown Error", 11)]);
    assert_eq!(
        counters(h),
        vec![
            (EccScope::Volatile, EccKind::Correctable, "Total", 0, 15),
            (EccScope::Volatile, EccKind::Uncorrectable, "Total", 2, 16),
        ]
    );
    assert_eq!(h.retired_pages_single_bit, read(1, 20));
    assert_eq!(h.retired_pages_double_bit, read(2, 21));
    // `pending_retirement` says Yes although `pending_blacklist` said No.
    assert_eq!(h.retired_pages_pending, read(true, 23));
    assert_eq!(
        facts.process_listings,
        vec![ProcessListing {
            kind: ProcessListingKind::NoneFound,
            rows: 0,
            span: at(25)
        }]
    );

    let (facts, _) = xml(
        "<?xml version=\"1.0\" ?>\n<nvidia_smi_log><attached_gpus>1</attached_gpus><gpu id=\"00000000:01:00.0\"><processes>None</processes></gpu></nvidia_smi_log>",
    );
    assert_eq!(
        facts.process_listings.first().map(|l| l.kind),
        Some(ProcessListingKind::NoneFound)
    );
}

#[test]
fn cut_or_foreign_xml_is_counted_and_never_panics() {
    // Cut mid-document: what came before the damage is kept.
    let (facts, unrecognized) = xml("\
<?xml version=\"1.0\" ?>
<nvidia_smi_log>
  <attached_gpus>1</attached_gpus>
  <gpu id=\"00000000:01:00.0\">
    <uuid>GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d</uuid>
    <fb_memory_usage><used>5 MiB</used>
    <oops <<>>
    trailing");
    assert_eq!(unrecognized, 2);
    assert_eq!(facts.gpus.len(), 1);
    assert_eq!(
        facts.gpus[0].uuid.as_deref(),
        Some("GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d")
    );
    assert_eq!(facts.gpus[0].memory_used_mib, Some(5));

    let (facts, unrecognized) = xml("<?xml version=\"1.0\"?>\n<project><name>x</name></project>");
    assert_eq!(unrecognized, 2);
    assert!(facts.gpus.is_empty());

    for garbage in [
        "\u{1b}\u{0}\u{ff}",
        "<",
        "&bogus;",
        "<a>&#xFFFFFFFF;</a>",
        "",
    ] {
        let _ = xml(garbage);
        let _ = text(garbage);
    }
}

/// The `Remapped Rows` section alone, as quoted in
/// https://github.com/leptonai/gpud/pull/80: its health is read, and no GPU
/// is invented for the inventory.
#[test]
fn a_section_without_its_gpu_header_is_read_as_one_unnamed_gpu() {
    let (facts, unrecognized) = text(
        "    Remapped Rows\n\
         \x20       Correctable Error                 : 0\n\
         \x20       Uncorrectable Error               : 4\n\
         \x20       Pending                           : Yes\n",
    );
    assert_eq!(unrecognized, 0);
    assert!(facts.gpus.is_empty(), "{:?}", facts.gpus);
    assert_eq!(facts.gpu_health.len(), 1);
    let h = &facts.gpu_health[0];
    assert_eq!((h.index, h.bus_id.as_deref()), (None, None));
    assert_eq!(h.remapped_rows_correctable, read(0, 2));
    assert_eq!(h.remapped_rows_uncorrectable, read(4, 3));
    assert_eq!(h.remapped_rows_pending, read(true, 4));
}

/// Two sections pasted at column 0 stay one GPU; a leaf outside any known
/// section is not read as a GPU.
#[test]
fn unindented_sections_of_a_fragment_share_one_gpu() {
    let (facts, _) = text(
        "Remapped Rows\n\
         \x20   Uncorrectable Error               : 1\n\
         \x20   Pending                           : Yes\n\
         GPU Reset Status\n\
         \x20   Reset Required                    : Yes\n",
    );
    assert_eq!(facts.gpu_health.len(), 1);
    let h = &facts.gpu_health[0];
    assert_eq!(h.remapped_rows_pending, read(true, 3));
    assert_eq!(h.reset_required, read(true, 5));
    let (facts, _) = text("Timestamp : Mon Jan  1 00:00:00 2024\nDriver Version : 535.104.05\n");
    assert!(facts.gpu_health.is_empty());
}

#[test]
fn active_hardware_slowdowns_and_sm_clocks_are_read() {
    // l4rz/reverse-engineering-dell-idrac-to-get-rid-of-gpu-throttling,
    // README ("The problem"): a V100 in a Dell C4130, its power brake
    // asserted by the iDRAC.
    let input = "Clocks Throttle Reasons
    Idle                              : Not Active
    Applications Clocks Setting       : Not Active
    SW Power Cap                      : Not Active
    HW Slowdown                       : Active
        HW Thermal Slowdown           : Not Active
        HW Power Brake Slowdown       : Active

Clocks
    Graphics                          : 382 MHz
    SM                                : 382 MHz
";
    let (facts, unrecognized) = text(input);
    assert_eq!(unrecognized, 0);
    let h = &facts.gpu_health[0];
    assert_eq!(
        h.hw_slowdowns,
        vec![
            read("HW Slowdown", 5).expect("read"),
            read("HW Power Brake Slowdown", 7).expect("read"),
        ]
    );
    // `Clocks` at column 0 is the same fragment's.
    assert_eq!(h.sm_clock, read("382 MHz".to_owned(), 11));
    // Inside a GPU block, and in XML (driver 535 renamed the section):
    // assembled from the A10's layout (driver 550), not copied.
    let input = "GPU 00000000:06:00.0
    Clocks Event Reasons
        Idle                              : Active
        HW Slowdown                       : Active
            HW Thermal Slowdown           : Active
    Clocks
        SM                                : 210 MHz
    Max Clocks
        SM                                : 1695 MHz
";
    let (facts, _) = text(input);
    let h = &facts.gpu_health[0];
    assert_eq!(
        h.hw_slowdowns,
        vec![
            read("HW Slowdown", 4).expect("read"),
            read("HW Thermal Slowdown", 5).expect("read"),
        ]
    );
    // A sub-reason under `HW Slowdown : Not Active` is no slowdown engaged.
    let (facts, _) = text(
        "GPU 00000000:06:00.0
    Clocks Event Reasons
        HW Slowdown                       : Not Active
            HW Thermal Slowdown           : Not Active
            HW Power Brake Slowdown       : Active
",
    );
    assert!(facts.gpu_health[0].hw_slowdowns.is_empty());
    assert_eq!(h.sm_clock, read("210 MHz".to_owned(), 7));
    assert_eq!(h.max_sm_clock, read("1695 MHz".to_owned(), 9));
    let (facts, _) = xml(
        "<nvidia_smi_log>
<gpu id=\"00000000:06:00.0\">
<clocks_event_reasons>
<clocks_event_reason_gpu_idle>Active</clocks_event_reason_gpu_idle>
<clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown>
<clocks_event_reason_hw_power_brake_slowdown>Not Active</clocks_event_reason_hw_power_brake_slowdown>
</clocks_event_reasons>
</gpu>
</nvidia_smi_log>
",
    );
    assert_eq!(
        facts.gpu_health[0].hw_slowdowns,
        vec![read("HW Slowdown", 5).expect("read")]
    );
}

/// A GPU's `<clocks_event_reasons>` pasted alone, cut inside the next
/// section (https://github.com/1Panel-dev/1Panel/issues/10990, an idle
/// L20): read as the sections of a GPU whose `<gpu id=…>` was not pasted;
/// only the idle reason is active, so no slowdown; no line is left over.
#[test]
fn xml_fragment_without_its_document_is_a_gpus_sections() {
    let (facts, unrecognized) = xml("\
                <clocks_event_reasons>
                        <clocks_event_reason_gpu_idle>Active</clocks_event_reason_gpu_idle>
                        <clocks_event_reason_applications_clocks_setting>Not Active</clocks_event_reason_applications_clocks_setting>
                        <clocks_event_reason_sw_power_cap>Not Active</clocks_event_reason_sw_power_cap>
                        <clocks_event_reason_hw_slowdown>Not Active</clocks_event_reason_hw_slowdown>
                        <clocks_event_reason_hw_thermal_slowdown>Not Active</clocks_event_reason_hw_thermal_slowdown>
                        <clocks_event_reason_hw_power_brake_slowdown>Not Active</clocks_event_reason_hw_power_brake_slowdown>
                        <clocks_event_reason_sync_boost>Not Active</clocks_event_reason_sync_boost>
                        <clocks_event_reason_sw_thermal_slowdown>Not Active</clocks_event_reason_sw_thermal_slowdown>
                        <clocks_event_reason_display_clocks_setting>Not Active</clocks_event_reason_display_clocks_setting>
                </clocks_event_reasons>
                <clocks_event_reasons_counters>
                        <clocks_event_reasons_counters_sw_power_cap>0 us</clocks_event_reasons_counters_sw_power_cap>
");
    assert_eq!(unrecognized, 0);
    // A GPU without a name is no GPU of the inventory; its health is read.
    assert!(facts.gpus.is_empty());
    assert_eq!(facts.gpu_health.len(), 1);
    let h = &facts.gpu_health[0];
    assert!(h.hw_slowdowns.is_empty());
    assert_eq!(h.sw_thermal_slowdown, None);
    assert_eq!(h.span, at(1));

    // A section that says something, and a `<gpu id=…>` element with its
    // processes: each is placed under the parents it was cut from.
    let (facts, unrecognized) = xml("\
\t\t<remapped_rows>
\t\t\t<remapped_row_corr>0</remapped_row_corr>
\t\t\t<remapped_row_unc>2</remapped_row_unc>
\t\t\t<remapped_row_pending>Yes</remapped_row_pending>
\t\t\t<remapped_row_failure>No</remapped_row_failure>
\t\t</remapped_rows>
\t\t<clocks_event_reasons>
\t\t\t<clocks_event_reason_sw_thermal_slowdown>Active</clocks_event_reason_sw_thermal_slowdown>
\t\t</clocks_event_reasons>
\t</gpu>
\t<gpu id=\"00000000:1B:00.0\">
\t\t<uuid>GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d</uuid>
\t\t<processes>
\t\t\t<process_info>
\t\t\t\t<pid>4242</pid>
\t\t\t\t<process_name>python3</process_name>
\t\t\t\t<used_memory>1024 MiB</used_memory>
\t\t\t</process_info>
\t\t</processes>
\t</gpu>
</nvidia_smi_log>
");
    assert_eq!(unrecognized, 0);
    assert_eq!(facts.gpu_health.len(), 2);
    let h = &facts.gpu_health[0];
    assert_eq!(h.remapped_rows_uncorrectable, read(2, 3));
    assert_eq!(h.remapped_rows_pending, read(true, 4));
    assert_eq!(h.sw_thermal_slowdown, Some(at(8)));
    assert_eq!(facts.gpus.len(), 1);
    assert_eq!(facts.gpus[0].bus_id.as_deref(), Some("0000:1b:00.0"));
    assert_eq!(facts.gpu_processes.len(), 1);
    assert_eq!(facts.gpu_processes[0].pid, 4242);
    assert_eq!(facts.gpu_processes[0].used_mib, Some(1024));

    // XML whose first element is no GPU section is still not nvidia-smi's.
    let (facts, unrecognized) = xml("<session>\n<name>x</name>\n</session>\n");
    assert_eq!(unrecognized, 3);
    assert!(facts.gpu_health.is_empty());
}

/// A fragment cut at its top, inside a GPU's `<pci>` section
/// (netdata/netdata#2922): the ends of elements opened above the paste are
/// passed over and the GPU's sections after them are read; a declared
/// document whose first element is not nvidia-smi's stays foreign, and so
/// does an undeclared one that closes nothing it did not open (the
/// `<session>` case above).
#[test]
fn xml_fragment_begun_inside_a_section_is_read() {
    let (facts, unrecognized) = xml(
        "                                <bridge_chip_type>N/A</bridge_chip_type>
                                <bridge_chip_fw>N/A</bridge_chip_fw>
                        </pci_bridge_chip>
                        <replay_counter>0</replay_counter>
                        <tx_util>0 KB/s</tx_util>
                        <rx_util>185000 KB/s</rx_util>
                </pci>
                <fan_speed>0 %</fan_speed>
                <performance_state>P5</performance_state>
                <fb_memory_usage>
                        <total>6064 MiB</total>
                        <used>912 MiB</used>
                </fb_memory_usage>",
    );
    assert_eq!(unrecognized, 0);
    // A GPU without a name is no GPU of the inventory; its health is read.
    assert!(facts.gpus.is_empty());
    assert_eq!(facts.gpu_health.len(), 1);

    let (facts, unrecognized) = xml("<?xml version=\"1.0\"?>\n<name>x</name>\n");
    assert_eq!(unrecognized, 2);
    assert!(facts.gpus.is_empty());
}
