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

/// The kmsg lines are the examples of torvalds/linux
/// Documentation/ABI/testing/dev-kmsg, the talosctl one is
/// https://github.com/talos-rpi5/talos-builder/issues/11's; the others are
/// written to their grammars (marked so).
#[test]
fn what_a_frame_says_is_kept() {
    let p = peel_line("6,339,5140900,-;NET: Registered protocol family 10");
    assert_eq!(p.body, "NET: Registered protocol family 10");
    assert_eq!(p.frame.uptime_us, Some(5_140_900));
    assert_eq!(
        (p.frame.facility, p.frame.level),
        (Some("kern"), Some("info"))
    );
    assert!(p.frame.kernel);
    let p = peel_line("30,340,5690716,-;udevd[80]: starting version 181");
    assert_eq!(p.frame.facility, Some("daemon"));
    // Written to the grammar: the doc says more comma-separated fields may
    // come before the `;`.
    let p = peel_line("4,12,345,c,more;text");
    assert_eq!((p.body.as_ref(), p.frame.level), ("text", Some("warning")));

    let p = peel_line(
        "mc-pt1-pkp-srv-1a: kern: warning: [2025-09-13T20:46:45.810482849Z]: Call trace:",
    );
    assert_eq!(p.body, "Call trace:");
    assert_eq!(p.frame.host.as_deref(), Some("mc-pt1-pkp-srv-1a"));
    assert_eq!(p.frame.level, Some("warning"));
    let t = p.frame.time.unwrap();
    assert_eq!(t.local.to_string(), "2025-09-13 20:46:45.810482849");
    assert_eq!(t.offset_secs, Some(0));

    // Written to the grammar: `dmesg --decode --time-format iso`.
    let p =
        peel_line("kern  :err   : 2024-06-01T12:00:03,345678+00:00 NVRM: Xid (PCI:0000:1a:00): 79");
    assert_eq!(
        p.body,
        "2024-06-01T12:00:03,345678+00:00 NVRM: Xid (PCI:0000:1a:00): 79"
    );
    assert!(p.frame.kernel);

    // A quoted, indented record comes apart in steps.
    let p = peel_line("   > 6,339,5140900,-;NET: Registered protocol family 10");
    assert_eq!(p.body, "NET: Registered protocol family 10");
    assert_eq!(
        p.frame.rows().collect::<Vec<_>>(),
        ["quote", "indentation", "kmsg"]
    );
    // A priority that no syslog writes is not one.
    assert!(peel_line("<999> x").frame.is_empty());

    // gunicorn's record: the zone after a space, the writer's PID, the level.
    let p = peel_line(
        "[2020-09-12 05:37:52 +0000] [18] [ERROR] Worker (pid:21) was sent SIGKILL! Perhaps out of memory?",
    );
    assert_eq!(
        p.body,
        "Worker (pid:21) was sent SIGKILL! Perhaps out of memory?"
    );
    assert_eq!((p.frame.pid, p.frame.level), (Some(18), Some("err")));
    let t = p.frame.time.unwrap();
    assert_eq!(t.local.to_string(), "2020-09-12 05:37:52");
    assert_eq!(t.offset_secs, Some(0));
    assert!(p.frame.record);
    let p = peel_line(
        "[2022-11-02 22:42:04 -0700] [4819] [WARNING] Worker with pid 4832 was terminated due to signal 11",
    );
    assert_eq!(p.frame.time.unwrap().offset_secs, Some(-7 * 3600));
    // DeepSpeed's head (no zone, a file after the level) is not gunicorn's.
    let p =
        peel_line("[2024-04-23 14:00:28,037] [INFO] [real_accelerator.py:191:get_accelerator] x");
    assert_eq!(p.frame.rows().collect::<Vec<_>>(), ["deepspeed"]);

    // OpenUI's `LEVEL (logger):  `; a level word before other parentheses is no frame.
    // https://github.com/wandb/openui/issues/226
    let p = peel_line("DEBUG (openui):  Starting up server in 1...");
    assert_eq!(
        (p.body.as_ref(), p.frame.level),
        ("Starting up server in 1...", Some("debug"))
    );
    // Written to the grammar: a space in the parentheses is no logger's name.
    assert!(peel_line("ERROR (code 3): not a logger").frame.is_empty());
}

/// Written to each spelling's grammar.
#[test]
fn spelled_and_orphan_escape_codes_go() {
    assert_eq!(peel_line("#033[31mError#033[0m: boom").body, "Error: boom");
    assert_eq!(peel_line("^[[31mError^[[0m: boom").body, "Error: boom");
    assert_eq!(peel_line("\\x1b[1;31mfailed\\x1b[0m").body, "failed");
    assert_eq!(
        peel_line("^@^@^@[15:58:39 TP0] Prefill batch.").body,
        "[15:58:39 TP0] Prefill batch."
    );
    // Ray's colours with their ESC lost in a paste
    // (https://github.com/vllm-project/vllm/issues/2734); brackets that only
    // look like codes stay.
    assert_eq!(
        peel_line("a (function operator()) [32m [repeated 6x across cluster] [0m").body,
        "a (function operator()) [repeated 6x across cluster]"
    );
    for text in [
        "ERROR 02-13 18:05 [multiproc_executor.py:852] WorkerProc hit an exception.",
        "[2m] not a reset anywhere",
        "arr[0m] has no space before its bracket",
    ] {
        assert_eq!(peel_line(text).body, text);
    }
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

/// docs/formats/frames.md lists every row.
#[test]
fn every_row_is_documented() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("docs/formats/frames.md"),
    )
    .expect("docs/formats/frames.md");
    for row in ROWS {
        assert!(
            doc.contains(&format!("| `{}` |", row.name)),
            "docs/formats/frames.md does not list the {} frame",
            row.name
        );
    }
    // And lists no frame the table lost.
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        let name = line.split('`').nth(1).unwrap_or_default();
        assert!(
            ROWS.iter().any(|r| r.name == name),
            "docs/formats/frames.md lists {name}, which is no row"
        );
    }
}

/// An elision is a frame only in front of a message: `[...]` alone stands
/// for lines left out, and a bracket that is a logger's own stays.
#[test]
fn an_elision_is_a_frame_only_before_a_message() {
    let p =
        peel_line("[\u{2026}] NVRM: GPU at 0000:03:00: GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7");
    assert_eq!(
        p.body,
        "NVRM: GPU at 0000:03:00: GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7"
    );
    for text in [
        "[...]",
        "[...] ",
        "[...]NVRM: Xid",
        "[..] NVRM: Xid",
        "[... ] x",
    ] {
        let p = peel_line(text);
        assert_eq!(p.body, text);
        assert!(p.frame.is_empty(), "{text}");
    }
}

/// LM Studio's two-line record (lmstudio-ai/mlx-engine#314): the head
/// alone on its line, the message on the next after one space, which
/// takes the head's time and level; a line after it that is not indented
/// by one space, or a second line after the head, is not that record.
#[test]
fn lm_studio_head_carries_its_time_and_level_to_the_next_line() {
    let mut p = Peeler::new();
    let head = p.peel("2026-04-18 21:08:53 [DEBUG]");
    assert_eq!(head.body, "");
    assert!(head.frame.record && head.frame.time.is_some());
    let message = p.peel(" libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)");
    assert!(
        message.body.starts_with("libc++abi: terminating"),
        "{}",
        message.body
    );
    assert!(message.frame.record);
    assert_eq!(message.frame.level, head.frame.level);
    assert!(message.frame.rows().any(|r| r == "lm-studio-record"));
    // Only the one line after the head.
    let after = p.peel(" Fatal Python error: Aborted");
    assert!(!after.frame.record, "{after:?}");
    // A head followed by a line of another shape is left to it.
    let mut p = Peeler::new();
    p.peel("2026-04-18 21:08:36  [INFO]");
    let other = p.peel("Thread 0x0000000cc3ab3000 (most recent call first):");
    assert!(!other.frame.record);
}

/// [`super::blank`] is `trim().is_empty()`: on strings that start with
/// every ASCII byte and with Unicode spaces, blank or followed by text.
#[test]
fn a_blank_line_is_one_that_trims_to_nothing() {
    let mut lines: Vec<String> = [
        "", " ", "\t", "\u{a0}", "\u{3000}", "\u{2028}", "\u{85}x", "é",
    ]
    .iter()
    .flat_map(|s| {
        [
            s.to_string(),
            format!("{s}x"),
            format!("{s} "),
            format!("{s}\u{a0}"),
        ]
    })
    .collect();
    for b in 0..=127u8 {
        let c = char::from(b);
        lines.extend([
            c.to_string(),
            format!("{c} "),
            format!("{c}x"),
            format!("{c}\u{a0}"),
        ]);
    }
    for line in &lines {
        assert_eq!(super::blank(line), line.trim().is_empty(), "{line:?}");
    }
}

/// A log pasted as a markdown list (gensyn-ai/rl-swarm#92: every line
/// `- `, an empty item among them): the run starts on an item that opens a
/// log record and goes on while each line carries the marker; a list of
/// words, a task list, a YAML list inside a log and a rule are left alone.
#[test]
fn a_log_pasted_as_a_markdown_list_loses_its_markers() {
    let mut p = Peeler::new();
    let first = p.peel("- WARN 04-06 03:23:45 interface.py:275] Using 'pin_memory=False' as WSL is detected. This may slow down the performance.");
    assert!(
        first.body.starts_with("WARN 04-06 03:23:45"),
        "{}",
        first.body
    );
    assert!(first.frame.rows().any(|r| r == "markdown-list"));
    let bar = p.peel(
        "- Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00,  6.88it/s]",
    );
    assert!(bar.body.starts_with("Loading safetensors"), "{}", bar.body);
    assert_eq!(p.peel("- ").body, "");
    let blocks = p.peel(
        "- INFO 04-06 03:23:49 executor_base.py:108] # CUDA blocks: 19609, # CPU blocks: 21845",
    );
    assert!(blocks.body.starts_with("INFO 04-06"), "{}", blocks.body);
    // A line without the marker ends the run.
    p.peel("INFO 04-06 03:23:50 llm_engine.py:1] next");
    let after = p.peel("- name: not a list item of the log");
    assert!(after.frame.is_empty());
    // A list of words, a task list's box and a rule are no pasted log.
    for text in [
        "- Ubuntu 22.04, driver 550",
        "- [x] I have searched the issues",
        "- [ ] I have read the docs",
        "---",
        "**bold**",
        "* Serving Flask app 'app'",
    ] {
        let p = peel_line(text);
        assert_eq!(p.body, text);
        assert!(p.frame.is_empty(), "{text}");
    }
    // `* ` the same way.
    let p = peel_line("* [2025-01-02 10:00:00] ERROR something failed");
    assert_eq!(p.body, "[2025-01-02 10:00:00] ERROR something failed");
}

/// ClusterFuzz's butler prints `| ` before each line of the command it
/// runs, after its `Running: CMD` line (google/clusterfuzz#2150): the run
/// starts after that line (or at the top) on a line that opens a log
/// record, and takes the butler's own `| Exit.` while it goes on; a
/// table's rows, which end in `|` too, are no gutter.
#[test]
fn a_runners_gutter_is_peeled_after_its_running_line() {
    let mut p = Peeler::new();
    p.peel("Running: gunicorn -b :9000 main:app (cwd='src/appengine')");
    let first = p.peel("| [2020-11-19 00:53:45 +0000] [2184400] [INFO] Starting gunicorn 20.0.4");
    assert_eq!(first.body, "Starting gunicorn 20.0.4");
    assert!(first.frame.rows().any(|r| r == "runner-output"));
    assert_eq!(first.frame.pid, Some(2184400));
    assert_eq!(p.peel("| Exit.").body, "Exit.");
    // Not after some other line, nor for a table's rows.
    let mut p = Peeler::new();
    p.peel("some prose first");
    let later = p.peel("| [2020-11-19 00:53:45 +0000] [2184400] [INFO] Starting gunicorn 20.0.4");
    assert!(later.body.starts_with("| "), "{}", later.body);
    for text in [
        "| [2020-11-19 00:53:45] | 3 |",
        "| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |",
        "| name | value |",
    ] {
        let p = peel_line(text);
        assert!(p.frame.is_empty(), "{text}");
    }
}

/// gunicorn before 19.2 wrote its time bare (benoitc/gunicorn#520:
/// `2013-04-26 11:35:16 [30352] [ERROR] `): the same record head, its PID
/// and level kept; a viewer's time before another bracket stays the
/// viewer's.
#[test]
fn gunicorns_head_before_its_time_had_brackets() {
    let p =
        peel_line("2013-04-26 11:35:16 [30352] [ERROR] Connection in use: ('10.0.0.50', 13000)");
    assert_eq!(p.body, "Connection in use: ('10.0.0.50', 13000)");
    assert_eq!((p.frame.pid, p.frame.level), (Some(30352), Some("err")));
    assert!(p.frame.record);
    let gin = peel_line(
        "2024-08-27 19:10:19 [GIN] 2024/08/27 - 17:10:19 | 200 |      22.702µs |       127.0.0.1 | HEAD     \"/\"",
    );
    assert!(gin.body.starts_with("[GIN]"), "{}", gin.body);
}

/// The rows the peeler handles itself are found by index: each index names
/// its row (a row added before one of them moves it).
#[test]
fn the_peelers_own_rows_are_where_their_indices_say() {
    for (index, name) in [
        (rows::GUTTER, "line-numbers"),
        (rows::ESCAPES, "spelled-escapes"),
        (rows::LM_STUDIO, "lm-studio-record"),
        (rows::LIST, "markdown-list"),
        (rows::RUNNER, "runner-output"),
    ] {
        assert_eq!(ROWS[index].name, name, "index {index}");
    }
}

/// A row's time read by position, as chrono's format parser read it
/// before (the oracle): dates, times of day and fractions, valid or not.
#[test]
fn times_read_by_position_as_chrono_parsed_them() {
    let dates = [
        "2026-11-27",
        "2024-02-29",
        "2023-02-29",
        "2026-13-01",
        "2026-00-10",
        "2026-04-31",
        "0000-01-01",
        "9999-12-31",
        "2026-1a-01",
        "2026-11-2x",
    ];
    for date in dates {
        let chrono = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").ok();
        assert_eq!(super::rows::ymd(date), chrono, "{date}");
    }
    let times = [
        "00:00:00", "23:59:59", "23:59:60", "24:00:00", "12:60:00", "12:00:61", "1a:00:00",
        "12:00:0x", "09:38:52",
    ];
    for hms in times {
        let chrono = chrono::NaiveTime::parse_from_str(hms, "%H:%M:%S").ok();
        assert_eq!(super::rows::hms_time(hms), chrono, "{hms}");
    }
    for digits in ["5", "05", "123", "000100", "123456789", "999999999", "1"] {
        let chrono: u32 = format!("{digits:0<9}")[..9].parse().expect("digits");
        assert_eq!(super::rows::nanos(digits), chrono, "{digits}");
    }
}
