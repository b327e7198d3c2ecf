//! The frame peeler against every row's real samples and the lines it must
//! leave alone.

use super::*;

/// Every row's real samples peel to what the row says is under them.
#[test]
fn every_sample_peels_to_its_body() {
    let mut checked = 0;
    for row in ROWS {
        for sample in row.samples {
            assert!(
                !sample.source.is_empty(),
                "{}: a sample without a source",
                row.name
            );
            let peeled = peel_line(sample.line);
            assert_eq!(peeled.body, sample.body, "{}: {}", row.name, sample.line);
            assert!(
                peeled.frame.rows().any(|r| r == row.name),
                "{}: peeled {:?}",
                row.name,
                peeled.frame.rows().collect::<Vec<_>>()
            );
            checked += 1;
        }
    }
    assert!(checked >= ROWS.len());
}

#[test]
fn a_line_without_a_frame_is_borrowed_as_it_is() {
    for text in [
        "",
        "[2026-11-27 09:38:52 TP1] Load weight begin.",
        "Nov 27 09:38:40 ct200 systemd[1]: Started sglang.service.",
        "  File \"x.py\", line 1, in <module>",
        ">>> import torch",
        "    0    3182341     C      8      2      -    python3.12",
        "1,2,3;not a record",
        "kernel: NVRM: Xid (PCI:0000:1a:00): 79",
        "| 0 NVIDIA H100 |",
        "arr[0m] has no space before its bracket",
        "[1m] a log's own bold",
    ] {
        let peeled = peel_line(text);
        assert!(matches!(peeled.body, Cow::Borrowed(_)), "{text}");
        assert_eq!(peeled.body, text);
        assert!(peeled.frame.is_empty(), "{text}: {:?}", peeled.frame);
    }
}

#[test]
fn what_a_frame_says_is_kept() {
    let p = peel_line("6,3964,206764307,-;nvidia-nvswitch2: open (major=510)");
    assert_eq!(p.body, "nvidia-nvswitch2: open (major=510)");
    assert_eq!(p.frame.uptime_us, Some(206_764_307));
    assert_eq!(
        (p.frame.facility, p.frame.level),
        (Some("kern"), Some("info"))
    );
    assert!(p.frame.kernel);
    // Extra fields before the `;` (DCGM's reader accepts them).
    let p = peel_line("4,1227,437812449,c,1,-;NVRM: Xid (PCI:0000:01:00): 43, pid=1814139");
    assert_eq!(p.body, "NVRM: Xid (PCI:0000:01:00): 43, pid=1814139");
    assert_eq!(p.frame.level, Some("warning"));

    let p = peel_line(
        "192.168.11.119: kern:     err: [2026-04-22T21:25:20.466440686Z]: NVRM: GPU at PCI:0000:48:00",
    );
    assert_eq!(p.body, "NVRM: GPU at PCI:0000:48:00");
    assert_eq!(p.frame.host.as_deref(), Some("192.168.11.119"));
    assert_eq!(p.frame.level, Some("err"));
    let t = p.frame.time.unwrap();
    assert_eq!(t.local.to_string(), "2026-04-22 21:25:20.466440686");
    assert_eq!(t.offset_secs, Some(0));

    let p =
        peel_line("kern  :info  : 2025-01-17T15:36:15,345155+00:00 ACPI: PCI Root Bridge [PC16]");
    assert_eq!(
        p.body,
        "2025-01-17T15:36:15,345155+00:00 ACPI: PCI Root Bridge [PC16]"
    );
    assert!(p.frame.kernel);

    // A quoted, indented record comes apart in steps.
    let p = peel_line("   > 4,1,2,-;NVRM: Xid (PCI:0000:01:00): 79");
    assert_eq!(p.body, "NVRM: Xid (PCI:0000:01:00): 79");
    assert_eq!(
        p.frame.rows().collect::<Vec<_>>(),
        ["quote", "indentation", "kmsg"]
    );
    // A priority that no syslog writes is not one.
    assert!(peel_line("<999> x").frame.is_empty());
}

#[test]
fn spelled_and_orphan_escape_codes_go() {
    let p = peel_line(
        "#033[2m#033[33m(raylet)#033[0m [2024-05-01 10:00:00,000 E 1 1] node_manager.cc:3007: 2 Workers killed",
    );
    assert_eq!(
        p.body,
        "(raylet) [2024-05-01 10:00:00,000 E 1 1] node_manager.cc:3007: 2 Workers killed"
    );
    assert_eq!(peel_line("^[[31mError^[[0m: boom").body, "Error: boom");
    assert_eq!(peel_line("\\x1b[1;31mfailed\\x1b[0m").body, "failed");
    assert_eq!(
        peel_line("a (function operator()) [32m [repeated 6x across cluster] [0m").body,
        "a (function operator()) [repeated 6x across cluster]"
    );
}

/// vim's `:set number` gutter over a paste (three-column numbers, then a
/// space; a blank line keeps its number alone), and `cat -n`.
#[test]
fn a_line_number_gutter_is_peeled_while_it_counts() {
    let mut peeler = Peeler::new();
    let lines = [
        ("  1 jj@host$ python", "jj@host$ python"),
        (
            "  2 Traceback (most recent call last):",
            "Traceback (most recent call last):",
        ),
        (
            "  3     File \"<stdin>\", line 1, in <module>",
            "    File \"<stdin>\", line 1, in <module>",
        ),
        ("  4", ""),
        ("  5 RuntimeError: boom", "RuntimeError: boom"),
        // The count breaks: no gutter any more.
        ("  9 not numbered", "  9 not numbered"),
    ];
    for (line, body) in lines {
        assert_eq!(peeler.peel(line).body, body, "{line}");
    }
    let mut peeler = Peeler::new();
    assert_eq!(peeler.peel("     1\tone").body, "one");
    assert_eq!(peeler.peel("     2\ttwo").body, "two");
    assert_eq!(peeler.peel("    10\tten").body, "    10\tten");
    // `ps -e`: PID 1 under a header is no gutter.
    let mut peeler = Peeler::new();
    assert_eq!(
        peeler.peel("    PID TTY          TIME CMD").body,
        "    PID TTY          TIME CMD"
    );
    assert_eq!(
        peeler.peel("      1 ?        00:00:03 systemd").body,
        "      1 ?        00:00:03 systemd"
    );
    assert_eq!(
        peeler.peel("      2 ?        00:00:00 kthreadd").body,
        "      2 ?        00:00:00 kthreadd"
    );
}
