//! The prefilter changes nothing anyone sees. Every fixture is analysed
//! three ways: from memory and read in full (what the snapshots approve),
//! streamed from disk and read in full, and streamed with the prefilter
//! (lines without an anchor only skimmed, as `rootcause analyze` does). The
//! reports must be byte-identical, the typed facts the same (the journal
//! entries and line times aside, which the prefilter keeps only as needed),
//! and no cited line may be missing from what the streamed pass kept.

use std::path::{Path, PathBuf};

use rootcause::bundle::{self, Input};
use rootcause::context::Context;
use rootcause::render::{self, OutputFormat, RenderOptions};
use rootcause::source::{Source, SourceMap};

use crate::support::{Scratch, fixtures};

/// Every rendering of one analysis.
fn reports(analysis: &rootcause::Analysis) -> Vec<(&'static str, String)> {
    let report = analysis.report();
    let mut out = Vec::new();
    for (name, format) in [
        ("text", OutputFormat::Text),
        ("markdown", OutputFormat::Markdown),
        ("json", OutputFormat::Json),
        ("ndjson", OutputFormat::Ndjson),
    ] {
        let mut bytes = Vec::new();
        render::render(&report, format, RenderOptions::default(), &mut bytes).expect("render");
        out.push((name, String::from_utf8(bytes).expect("utf-8 report")));
    }
    out.push(("script", render::script(&report)));
    out
}

fn analyse(sources: SourceMap, context: Context, prefilter: bool) -> rootcause::Analysis {
    let options = rootcause::Options {
        context,
        prefilter,
        ..rootcause::Options::default()
    };
    rootcause::analyze_with(sources, &options)
}

fn load(path: &Path) -> (SourceMap, Context) {
    let (sources, manifest) =
        bundle::load(&[Input::Path(path.to_owned())], &mut std::io::empty()).expect("loads");
    let context = manifest
        .as_ref()
        .map(Context::from_manifest)
        .unwrap_or_default();
    (sources, context)
}

/// The same inputs, decoded into memory.
fn in_memory(streamed: &SourceMap) -> SourceMap {
    let mut sources = SourceMap::new();
    for (_, s) in streamed.iter() {
        let text: String = (1..=s.line_count())
            .map(|n| format!("{}\n", s.raw_line(n)))
            .collect();
        sources.add(Source::new(s.name.clone(), text.as_bytes()));
    }
    sources
}

/// `Debug` of every typed fact but the journal's and the line times.
fn facts(a: &rootcause::Analysis) -> Vec<String> {
    let f = &a.incident.facts;
    vec![
        format!("{:?}", f.smi_headers),
        format!("{:?}", f.gpus),
        format!("{:?}", f.gpu_processes),
        format!("{:?}", f.process_listings),
        format!("{:?}", f.unit_statuses),
        format!("{:?}", f.server_events),
        format!("{:?}", f.ps),
        format!("{:?}", f.messages),
        format!("{:?}", f.gpu_health),
        format!("{:?}", f.kernel_events),
        format!("{:?}", f.unit_properties),
        format!("{:?}", f.proc_cgroups),
        format!("{:?}", f.env_reports),
        format!("{:?}", a.incident.units),
        format!("{:?}", a.incident.owners),
        format!("{:?}", a.incident.cmdlines),
        format!("{:?}", a.inputs),
        format!("{:?}", a.diagnosis.findings),
    ]
}

fn check(label: &str, path: &Path) {
    let (streamed, context) = load(path);
    let memory = analyse(in_memory(&streamed), context.clone(), false);
    let full = analyse(streamed, context.clone(), false);
    let (streamed, _) = load(path);
    let skimmed = analyse(streamed, context, true);

    let want = reports(&memory);
    for (got, how) in [
        (reports(&full), "streamed"),
        (reports(&skimmed), "prefiltered"),
    ] {
        for ((name, want), (_, got)) in want.iter().zip(&got) {
            assert!(
                want == got,
                "{label}: the {how} {name} report differs:\n{}",
                similar::TextDiff::from_lines(want, got).unified_diff()
            );
        }
    }
    assert_eq!(facts(&full), facts(&skimmed), "{label}: facts differ");
    // The prefiltered reading aggregates repeats (`Repeats::STANDARD`):
    // no fixture may reach its limit, or the reports above would not show
    // that aggregation below it changes nothing.
    assert!(
        skimmed.incident.facts.repeats.is_empty(),
        "{label}: a template repeats past the limit: {:?}",
        skimmed.incident.facts.repeats
    );
    // The prefilter keeps journal entries, never invents one.
    let all = &full.incident.facts.journal;
    let mut rest = all.iter();
    for e in &skimmed.incident.facts.journal {
        assert!(
            rest.any(|f| f == e),
            "{label}: journal entry {e:?} is not one of the full reading's, in order"
        );
    }
    for analysis in [&full, &skimmed] {
        for (_, s) in analysis.sources.iter() {
            assert_eq!(s.rereads(), 0, "{label}: {} had lines read again", s.name);
        }
    }
}

/// Every bundle and loose input of the fixtures.
fn inputs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for family in ["incidents", "rules", "formats", "journal", "hostile"] {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(fixtures().join(family))
            .expect("fixture folder")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_none_or(|x| x != "md"))
            .collect();
        entries.sort();
        out.extend(entries);
    }
    out
}

#[test]
fn every_fixture_reads_the_same_with_the_prefilter() {
    let inputs = inputs();
    assert!(inputs.len() > 40, "fixtures found: {}", inputs.len());
    for path in &inputs {
        let label = path
            .strip_prefix(fixtures())
            .unwrap_or(path)
            .display()
            .to_string();
        check(&label, path);
    }
}

/// All the fixtures' text in one input: every segment switch, skimmed
/// lines next to every format, writers in the middle of tracebacks.
#[test]
fn every_fixture_in_one_input_reads_the_same_with_the_prefilter() {
    let scratch = Scratch::new("prefilter");
    let mut all = Vec::new();
    for path in inputs() {
        let (sources, _) = load(&path);
        for (_, s) in sources.iter() {
            for n in 1..=s.line_count() {
                all.extend_from_slice(s.raw_line(n).as_bytes());
                all.push(b'\n');
            }
        }
    }
    let file = scratch.path.join("everything.txt");
    std::fs::write(&file, &all).expect("write");
    check("every fixture in one input", &file);
}

/// Inputs made to walk the prefilter's corners: a skimmed entry whose later
/// line matters, tracebacks whose frames have no anchor (one journal entry
/// per line, and in a server log), a writer's framework shown only by
/// skimmed lines, each PID's first line, an OOM report's task rows,
/// evidence with no time of its own below skimmed timed lines, a year-less
/// journal, JSON records with escapes.
#[test]
fn corner_cases_read_the_same_with_the_prefilter() {
    let scratch = Scratch::new("prefilter-corners");
    let sglang_head = "2026-11-27T09:38:40+0000 ct200 python3[20629]:";
    let mut journal = String::new();
    for i in 0..30 {
        journal.push_str(&format!(
            "2026-11-27T09:38:{i:02}+0000 ct200 python3[20629]: [2026-11-27 09:38:{i:02} TP0] Decode batch. #running-req: 3\n"
        ));
        journal.push_str(&format!(
            "2026-11-27T09:38:{i:02}+0000 ct200 sshd[{}]: Accepted publickey for deploy\n",
            900 + i % 3
        ));
    }
    journal.push_str(&format!(
        "{sglang_head} [2026-11-27 09:38:41 TP0] something long\n"
    ));
    journal.push_str("                                            continued once\n");
    journal.push_str(
        "                                            RuntimeError: CUDA error: out of memory\n",
    );
    journal.push_str(&format!(
        "{sglang_head} Traceback (most recent call last):\n"
    ));
    journal.push_str(&format!(
        "{sglang_head}   File \"/opt/x.py\", line 3, in run\n"
    ));
    journal.push_str(&format!("{sglang_head}     scheduler.step()\n"));
    journal.push_str(&format!(
        "{sglang_head} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    ));
    journal.push_str("2026-11-27T09:39:00+0000 ct200 kernel: python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0\n");
    journal
        .push_str("2026-11-27T09:39:00+0000 ct200 kernel: Tasks state (memory values in pages):\n");
    journal.push_str("2026-11-27T09:39:00+0000 ct200 kernel: [  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name\n");
    journal.push_str("2026-11-27T09:39:00+0000 ct200 kernel: [  20629]     0 20629 103086419 46913580 377262080        0             0 python3\n");
    journal.push_str("2026-11-27T09:39:00+0000 ct200 kernel: Out of memory: Killed process 20629 (python3) total-vm:412345676kB, anon-rss:187654320kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:368420kB oom_score_adj:0\n");
    journal.push_str("2026-11-27T09:39:01+0000 ct200 systemd[1]: sglang.service: Main process exited, code=killed, status=9/KILL\n");
    journal.push_str("2026-11-27T09:39:02+0000 ct200 newproc[31337]: first line of a new PID\n");

    let mut server = String::new();
    for i in 0..40 {
        server.push_str(&format!(
            "[2026-11-27 09:38:{i:02} TP{}] Decode batch. #running-req: 3, #token: 100\n",
            i % 4
        ));
    }
    server.push_str("[2026-11-27 09:38:50 TP1] Scheduler hit an exception: Traceback (most recent call last):\n");
    server.push_str("  File \"/opt/sglang/scheduler.py\", line 3127, in run_scheduler_process\n");
    server.push_str("    scheduler = Scheduler(\n");
    server.push_str("RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.7, local_gpu_memory=93.7, local_gpu_memory * 0.9=84.3\n");
    server.push('\n');
    server.push_str("[2026-11-27 09:38:51 TP2] Decode batch. #running-req: 3\n");
    server.push_str("Process EngineCore_0:\n");
    server.push_str("frame #3: <unknown function> + 0x1234 (0x7f in /lib/libc.so.6)\n");
    server.push_str("an unrecognised line\n");
    server.push_str("ValueError: not after a traceback\n");
    server.push_str("[2026-11-27 09:38:52] Received sigquit from a child process. It usually means the child failed.\n");

    let mut short = String::new();
    for i in 0..20 {
        short.push_str(&format!(
            "Nov 27 09:38:{i:02} ct200 CRON[{}]: (root) CMD (run-parts)\n",
            700 + i
        ));
    }
    short.push_str("Nov 27 09:38:30 ct200 systemd[1]: sglang.service: Scheduled restart job, restart counter is at 3.\n");

    let mut json = String::new();
    for i in 0..20 {
        json.push_str(&format!(
            "{{\"__REALTIME_TIMESTAMP\":\"17964532{i:02}000000\",\"_PID\":\"4242\",\"_SYSTEMD_UNIT\":\"sglang.service\",\"SYSLOG_IDENTIFIER\":\"python3\",\"_CMDLINE\":\"python3 -m sglang.launch_server\",\"MESSAGE\":\"[2026-12-05 10:13:{i:02} TP0] Decode batch.\"}}\n"
        ));
    }
    json.push_str("{\"__REALTIME_TIMESTAMP\":\"1796453230000000\",\"_PID\":\"4242\",\"_SYSTEMD_UNIT\":\"sglang.service\",\"SYSLOG_IDENTIFIER\":\"python3\",\"MESSAGE\":\"line one\\nTraceback (most recent call last):\"}\n");
    json.push_str("{\"__REALTIME_TIMESTAMP\":\"1796453231000000\",\"_PID\":\"4242\",\"_SYSTEMD_UNIT\":\"sglang.service\",\"SYSLOG_IDENTIFIER\":\"python3\",\"MESSAGE\":\"  File \\\"x.py\\\", line 1, in f\"}\n");
    json.push_str("{\"__REALTIME_TIMESTAMP\":\"1796453232000000\",\"_PID\":\"4242\",\"_SYSTEMD_UNIT\":\"sglang.service\",\"SYSLOG_IDENTIFIER\":\"python3\",\"MESSAGE\":\"RuntimeError: CUDA error: out of memory\"}\n");
    json.push_str("{\"__REALTIME_TIMESTAMP\":\"1796453233000000\",\"_PID\":\"4243\",\"SYSLOG_IDENTIFIER\":\"python3\",\"MESSAGE\":\"\\u001b[31mred\\u001b[0m\"}\n");
    json.push_str("{\"__REALTIME_TIMESTAMP\":\"1796453234000000\",\"_PID\":\"4243\",\"_PID\":\"4244\",\"SYSLOG_IDENTIFIER\":\"python3\",\"MESSAGE\":\"twice\"}\n");
    json.push_str("{\"__REALTIME_TIMESTAMP\":\"1796453235000000\",\"SYSLOG_IDENTIFIER\":\"kernel\",\"_TRANSPORT\":\"kernel\",\"MESSAGE\":\"usb 1-1: new device\"}\n");
    json.push_str("{\"__REALTIME_TIMESTAMP\":\"1796453236000000\",\"_PID\":\"55\",\"SYSLOG_IDENTIFIER\":\"kernel\",\"_SYSTEMD_UNIT\":\"odd.service\",\"MESSAGE\":\"a kernel-named writer in a unit\"}\n");
    json.push_str("not json at all\n");

    // A capture that starts in the middle of a traceback: its evidence has
    // no time above it and is placed before the first timed line.
    let mut cut = String::new();
    cut.push_str("  File \"/opt/sglang/model_runner.py\", line 781, in init_torch_distributed\n");
    cut.push_str("    raise RuntimeError(\n");
    cut.push_str("RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.7, local_gpu_memory=93.7, local_gpu_memory * 0.9=84.3\n");
    for i in 0..10 {
        cut.push_str(&format!(
            "[2026-11-27 09:39:{i:02} TP0] Decode batch. #running-req: 3\n"
        ));
    }

    // The same in a journal: the first timed line is a skimmed one.
    let mut cut_journal = String::from("    OSError: [Errno 98] Address already in use\n");
    for i in 0..5 {
        cut_journal.push_str(&format!(
            "2026-11-27T09:38:4{i}+0000 ct200 kernel: usb 1-{i}: new device\n"
        ));
    }

    // A Go program's goroutine dump under the journal, then syslog's form
    // (`#011` for the tab): its frames carry no anchor, the dump's header
    // does (ibuildthecloud/systemd-docker#1, a frame cut as batch AA's 1892
    // shows it).
    let mut go = String::new();
    for (i, (head, tab)) in [
        ("2026-11-27T09:40:00+0000 ct200 systemd-docker[639]:", ""),
        ("Nov 27 09:41:00 ct200 dockerd[15237]:", "#011"),
    ]
    .into_iter()
    .enumerate()
    {
        for n in 0..6 {
            go.push_str(&format!("{head} level=info msg=\"serving {i}.{n}\"\n"));
        }
        for line in [
            "panic: runtime error: invalid memory address or nil pointer dereference".to_owned(),
            "goroutine 16 [running]:".to_owned(),
            "runtime.panic(0x6c7940, 0x89ef53)".to_owned(),
            format!("{tab}/usr/local/go/src/pkg/runtime/panic.c:279 +0xf5"),
            "main.lookupNamedContainer(0xc208048460, 0x0, 0x0".to_owned(),
            format!("{tab}/home/darren/src/systemd-docker/main.go:159 +0x11e"),
            "created by main.main in goroutine 1".to_owned(),
            "level=info msg=\"after the dump\" (0x1)".to_owned(),
        ] {
            go.push_str(&format!("{head} {line}\n"));
        }
    }
    go.push_str("Nov 27 09:41:01 ct200 systemd[1]: docker.service: Main process exited, code=exited, status=2/INVALIDARGUMENT\n");

    for (name, text) in [
        ("go-dump.txt", go),
        ("journal.txt", journal),
        ("sglang.log", server),
        ("syslog.txt", short),
        ("journal.json", json),
        ("cut.log", cut),
        ("cut-journal.txt", cut_journal),
    ] {
        let dir = scratch.path.join(name.replace('.', "-"));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join(name), &text).expect("write");
        check(name, &dir);
    }
    // All of them in one bundle, too: owners and times join across inputs.
    let all = scratch.path.join("all");
    std::fs::create_dir_all(&all).expect("dir");
    for name in [
        "journal.txt",
        "sglang.log",
        "syslog.txt",
        "journal.json",
        "cut.log",
    ] {
        let from = scratch.path.join(name.replace('.', "-")).join(name);
        std::fs::copy(from, all.join(name)).expect("copy");
    }
    check("all corners", &all);
}

/// Reading on two threads (several inputs at once, and reading apart from
/// parsing) gives what one thread does, prefilter or not, and a pipe reads
/// like the file it came from.
#[test]
fn threads_and_pipes_read_the_same() {
    use rootcause::ingest::{Settings, Threads, ingest_with};
    let anchors = rootcause::rules::anchors(rootcause::rules::RULES);
    let ingest = |sources: &SourceMap, prefilter: bool, threads: Threads| {
        let settings = Settings {
            hint: None,
            anchors: &anchors,
            prefilter,
            progress: None,
            threads,
            repeats: rootcause::ingest::Repeats::STANDARD,
        };
        let ingested = ingest_with(sources, &settings);
        format!("{:?}\n{:?}", ingested.facts, ingested.inputs)
    };
    for path in inputs() {
        for prefilter in [false, true] {
            let (one, _) = load(&path);
            let (two, _) = load(&path);
            assert_eq!(
                ingest(&one, prefilter, Threads::One),
                ingest(&two, prefilter, Threads::Always),
                "{}",
                path.display()
            );
        }
    }
    let file = fixtures().join("incidents/2026-11-27-ct200-ghost-ddtree/journal.txt");
    let bytes = std::fs::read(&file).expect("fixture");
    let mut from_file = SourceMap::new();
    from_file.add(Source::file("journal.txt", &file));
    for threads in [Threads::One, Threads::Always] {
        let mut piped = SourceMap::new();
        let (head, rest) = bytes.split_at(10);
        let rest = std::io::Cursor::new(rest.to_vec());
        piped.add(Source::stream("journal.txt", head.to_vec(), Box::new(rest)));
        assert_eq!(
            ingest(&piped, true, threads),
            ingest(&from_file, true, Threads::One)
        );
    }
}

/// Lines built from the pieces of the formats the prefilter skims, anchors
/// and noise mixed at random: the reports are the same either way.
mod random {
    use proptest::prelude::*;

    use super::*;

    fn prefix() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("2026-11-27T09:38:40+0000 host python3[20629]: "),
            Just("2026-11-27T09:38:41+0000 host python3[20630]: "),
            Just("2026-11-27T09:38:42+0000 host sshd[900]: "),
            Just("2026-11-27T09:38:43+0000 host kernel: "),
            Just("2026-11-27T09:38:44+0000 host systemd[1]: "),
            Just("Nov 27 09:38:45 host python3[20629]: "),
            Just("[2026-11-27 09:38:52 TP1] "),
            Just("[2026-11-27 09:38:53] "),
            Just("[ 8712.345678] "),
            Just("                                  "),
            Just("ERROR 11-27 09:38:54 [core.py:396] "),
            Just("(VllmWorker rank=1 pid=4243) "),
            Just(""),
        ]
    }

    fn body() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("Decode batch. #running-req: 3, #token: 100"),
            Just("Accepted publickey for deploy"),
            Just("hello world"),
            Just("Traceback (most recent call last):"),
            Just("  File \"/opt/x.py\", line 3, in f"),
            Just("    scheduler.step()"),
            Just("RuntimeError: CUDA error: out of memory"),
            Just("ValueError: not a failure"),
            Just("During handling of the above exception, another exception occurred:"),
            Just("python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0"),
            Just("Killed process 20629 (python3) total-vm:1kB, anon-rss:1kB, file-rss:0kB"),
            Just("[  20629]     0 20629  1000  500  0  0 python3"),
            Just("NVRM: Xid (PCI:0000:3b:00): 79, pid=20629"),
            Just("sglang.service: Main process exited, code=exited, status=1/FAILURE"),
            Just("Started sglang.service - SGLang."),
            Just("Load weight begin. avail mem=78.35 GB"),
            Just("Process EngineCore_0:"),
            Just("frame #3: <unknown function>"),
            Just("terminate called after throwing an instance of 'c10::Error'"),
            Just("  what():  boom"),
            Just("Received sigquit from a child process."),
            Just("INFO:     127.0.0.1:1234 - \"POST /generate HTTP/1.1\" 200 OK"),
            Just(""),
        ]
    }

    fn analyse_text(text: &str, prefilter: bool) -> Vec<(&'static str, String)> {
        let scratch = Scratch::new("prefilter-random");
        let path = scratch.path.join("input.log");
        std::fs::write(&path, text).expect("write");
        let (sources, context) = load(&path);
        let sources = if prefilter {
            sources
        } else {
            in_memory(&sources)
        };
        reports(&analyse(sources, context, prefilter))
    }

    /// A `journalctl -o json` record with some of the fields that matter.
    fn record() -> impl Strategy<Value = String> {
        (
            prop_oneof![
                Just(None),
                Just(Some("1")),
                Just(Some("42")),
                Just(Some("43"))
            ],
            prop_oneof![
                Just(None),
                Just(Some("systemd")),
                Just(Some("python3")),
                Just(Some("kernel"))
            ],
            prop_oneof![Just(None), Just(Some("sglang.service"))],
            any::<bool>(),
            any::<bool>(),
            proptest::collection::vec(body(), 1..3),
            0u32..60,
        )
            .prop_map(|(pid, ident, unit, cmdline, kernel, message, second)| {
                let mut fields = vec![format!(
                    "\"__REALTIME_TIMESTAMP\":\"17964532{second:02}000000\""
                )];
                if let Some(pid) = pid {
                    fields.push(format!("\"_PID\":\"{pid}\""));
                }
                if let Some(ident) = ident {
                    fields.push(format!("\"SYSLOG_IDENTIFIER\":\"{ident}\""));
                }
                if let Some(unit) = unit {
                    fields.push(format!("\"_SYSTEMD_UNIT\":\"{unit}\""));
                }
                if cmdline {
                    fields.push("\"_CMDLINE\":\"python3 -m sglang.launch_server\"".to_owned());
                }
                if kernel {
                    fields.push("\"_TRANSPORT\":\"kernel\"".to_owned());
                }
                let message = serde_json::to_string(&message.join("\n")).expect("json");
                fields.push(format!("\"MESSAGE\":{message}"));
                format!("{{{}}}", fields.join(","))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        #[test]
        fn random_json_records_read_the_same(records in proptest::collection::vec(record(), 0..40)) {
            let text: String = records.iter().map(|r| format!("{r}\n")).collect();
            let full = analyse_text(&text, false);
            let skimmed = analyse_text(&text, true);
            for ((name, want), (_, got)) in full.iter().zip(&skimmed) {
                prop_assert!(want == got, "{name} differs for:\n{text}\n{}",
                    similar::TextDiff::from_lines(want, got).unified_diff());
            }
        }

        #[test]
        fn random_lines_read_the_same(lines in proptest::collection::vec((prefix(), body()), 0..60)) {
            let text: String = lines.iter().map(|(p, b)| format!("{p}{b}\n")).collect();
            let full = analyse_text(&text, false);
            let skimmed = analyse_text(&text, true);
            for ((name, want), (_, got)) in full.iter().zip(&skimmed) {
                prop_assert!(want == got, "{name} differs for:\n{text}\n{}",
                    similar::TextDiff::from_lines(want, got).unified_diff());
            }
        }
    }
}

/// A unit crash-looping, read with tiny limits: the first lines of each
/// template are read, the last kept, the rest only counted, and what the
/// rules see are real lines, first and last, with the true count and the
/// last restart counter.
/// `text` as one input named `name`, read on one thread with the
/// prefilter and `repeats`' limits: the repeat-aggregation tests' reading.
fn ingest_one(
    name: &str,
    text: &str,
    repeats: rootcause::ingest::Repeats,
) -> rootcause::ingest::Ingested {
    use rootcause::ingest::{Settings, Threads, ingest_with};
    let mut sources = SourceMap::new();
    sources.add(Source::new(name, text.as_bytes()));
    let anchors = rootcause::rules::anchors(rootcause::rules::RULES);
    ingest_with(
        &sources,
        &Settings {
            hint: None,
            anchors: &anchors,
            prefilter: true,
            progress: None,
            threads: Threads::One,
            repeats,
        },
    )
}

#[test]
fn repeats_are_counted_and_their_first_and_last_lines_kept() {
    use rootcause::ingest::Repeats;
    const CYCLES: u32 = 40;
    let mut text = String::new();
    let mut line = 0u32;
    let mut exited = Vec::new();
    let mut restarts = Vec::new();
    let mut push = |text: &mut String, s: String| {
        text.push_str(&s);
        text.push('\n');
        line += 1;
        line
    };
    for c in 1..=CYCLES {
        let (m, s) = (c / 60, c % 60);
        let t = format!("2026-11-27T10:{m:02}:{s:02}+0000 ct200");
        push(
            &mut text,
            format!("{t} systemd[1]: Started sglang.service - SGLang."),
        );
        push(
            &mut text,
            format!(
                "{t} python3[{}]: [2026-11-27 10:{m:02}:{s:02}] server_args=ServerArgs(model_path='/m', tp_size=1, port=30000)",
                5000 + c
            ),
        );
        push(
            &mut text,
            format!(
                "{t} python3[{}]: OSError: [Errno 98] Address already in use",
                5000 + c
            ),
        );
        exited.push(push(
            &mut text,
            format!(
                "{t} systemd[1]: sglang.service: Main process exited, code=exited, status=1/FAILURE"
            ),
        ));
        restarts.push(push(
            &mut text,
            format!(
                "{t} systemd[1]: sglang.service: Scheduled restart job, restart counter is at {c}."
            ),
        ));
    }
    let read = |repeats| ingest_one("journal.txt", &text, repeats);
    let bounded = read(Repeats { first: 3, last: 2 }).facts;
    let all = read(Repeats::UNBOUNDED).facts;
    assert!(all.repeats.is_empty());
    // Each of the five templates, counted in full, first and last line right.
    assert_eq!(bounded.repeats.len(), 5, "{:?}", bounded.repeats);
    let r = bounded
        .repeats
        .iter()
        .find(|r| r.first.line == exited[0])
        .expect("the exit line's template");
    assert_eq!(r.last.line, *exited.last().expect("cycles"));
    assert_eq!((r.count, r.read, r.kept_last), (u64::from(CYCLES), 3, 2));
    assert!(bounded.repeats.iter().all(|r| r.count == u64::from(CYCLES)));
    // The rules see the first three and the last two exits, real lines.
    let want: Vec<u32> = exited[..3]
        .iter()
        .chain(&exited[exited.len() - 2..])
        .copied()
        .collect();
    let got: Vec<u32> = bounded
        .messages
        .iter()
        .filter(|m| m.text.contains("Main process exited"))
        .map(|m| m.span.line)
        .collect();
    assert_eq!(got, want);
    for m in &bounded.messages {
        let full = all
            .messages
            .iter()
            .find(|f| f.span == m.span)
            .expect("a real line");
        assert_eq!(full.text, m.text);
    }
    // The last cycles are read: the restart counter reaches its true value,
    // and PID 1's entries are those of the full reading, fewer of them.
    let last = *restarts.last().expect("cycles");
    assert!(
        bounded
            .journal
            .iter()
            .any(|e| e.span.line == last && e.message.ends_with(&format!("is at {CYCLES}."))),
        "the last restart is read"
    );
    assert!(bounded.journal.len() < all.journal.len() / 4);
    for e in &bounded.journal {
        assert!(all.journal.contains(e), "{e:?} is the full reading's");
    }
    assert!(bounded.journal.windows(2).all(|w| w[0].span < w[1].span));
}

/// A raw log no format claims (ollama's slog records, 24,000 lines: past the
/// lines that wait for a strong one, an `unknown` segment) aggregates its
/// repeats as a journal does: the repeats of a record are only counted, not
/// read, kept and timed line by line, and a line not understood still
/// counts as not understood each time it repeats.
#[test]
fn an_unknown_segments_repeats_are_counted_not_read() {
    use rootcause::ingest::Repeats;
    const CYCLES: u32 = 12_000;
    let mut text = String::new();
    for c in 0..CYCLES {
        let s = c % 60;
        text.push_str(&format!(
            "time=2025-05-22T18:16:{s:02}.691-07:00 level=INFO source=server.go:168 msg=offload library=cuda layers.requested=-1 layers.model={}\n",
            c % 7 + 30
        ));
        // Not understood, and it carries an anchor (a PCI address), so it
        // is templated.
        text.push_str(&format!(
            "qq{c} frobnicator 00000000:{:02x}:00.0 spun zeta\n",
            c % 9
        ));
    }
    let read = |repeats| ingest_one("ollama.log", &text, repeats);
    let bounded = read(Repeats { first: 3, last: 2 });
    let all = read(Repeats::UNBOUNDED);
    let unread = |i: &rootcause::ingest::Ingested| -> Vec<(String, u32)> {
        i.inputs
            .iter()
            .map(|s| (s.segment.format.name().to_owned(), s.unrecognized))
            .collect()
    };
    assert_eq!(unread(&all), unread(&bounded));
    assert_eq!(
        unread(&all).iter().map(|(_, n)| n).sum::<u32>(),
        CYCLES,
        "every unread line counted, repeats too: {:?}",
        unread(&all)
    );
    assert!(
        bounded
            .inputs
            .iter()
            .any(|s| s.segment.format.name() == "unknown"),
        "the lines past the first ones are an unknown segment"
    );
    // Counted: the unread line's template from the segment's start (the
    // record's too, one template per model size it prints).
    assert!(
        bounded
            .facts
            .repeats
            .iter()
            .any(|r| r.first.line == 4096 && r.count > 900),
        "{:?}",
        bounded.facts.repeats
    );
    // Not read: the records' times are those of the lines read in full,
    // far fewer than every record's, each one of the full reading's.
    let (few, every) = (&bounded.facts.line_times, &all.facts.line_times);
    assert!(
        few.len() < every.len() / 2,
        "{} of {}",
        few.len(),
        every.len()
    );
    assert!(few.iter().all(|t| every.contains(t)));
}

/// Where the real cases are (batches move in here at a session's end).
const REAL_CASES: &str = "real";

/// vLLM V1's process prefixes (`(APIServer pid=N) `, `(EngineCore_DP0
/// pid=N) `, `(VllmWorker rank=N pid=N) `) under the journal are skimmed
/// per writer, the prefix's process (`ServerLogParser::skim`): every real
/// case that prints them, put under a unit's journal lines, reads the same
/// skimmed as in full, its writers' frameworks and tracebacks included.
#[test]
fn vllm_process_prefixes_under_the_journal_read_the_same() {
    let scratch = Scratch::new("prefilter-vllm-process");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures().join(REAL_CASES))
        .expect("real cases")
        .flatten()
        .map(|e| e.path().join("input.log"))
        .filter(|p| {
            std::fs::read_to_string(p).is_ok_and(|t| {
                ["(APIServer pid=", "(EngineCore", "(VllmWorker"]
                    .iter()
                    .any(|w| t.contains(w))
            })
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 5, "vLLM V1 cases: {}", cases.len());
    for case in &cases {
        let text = std::fs::read_to_string(case).expect("case");
        let mut journal = String::new();
        for (i, line) in text.lines().enumerate() {
            let (m, s) = ((i / 60) % 60, i % 60);
            journal.push_str(&format!(
                "2026-11-27T09:{m:02}:{s:02}+0000 gpu-node-7 vllm[4242]: {line}\n"
            ));
        }
        let file = scratch.path.join("journal.txt");
        std::fs::write(&file, &journal).expect("write");
        check(&format!("{} under the journal", case.display()), &file);
    }
}

/// An input of many templates, each repeated a few dozen times (a request
/// log whose status or route makes its template, a fleet of units failing
/// in turn): what is read in full and kept for the rules is bounded by a
/// budget, not by how long the input is. Twice the cycles keep as many
/// messages and PID 1 entries, and every template is still counted whole.
#[test]
fn many_templates_repeated_keep_a_bounded_state() {
    use rootcause::ingest::Repeats;
    const UNITS: usize = 1200;
    let name = |u: usize| -> String {
        let l = |k: usize| char::from(b'a' + (k % 26) as u8);
        format!("{}{}{}", l(u), l(u / 26), l(u / 676))
    };
    let read = |cycles: u32| {
        let mut text = String::new();
        for c in 0..cycles {
            for u in 0..UNITS {
                let s = (c as usize * UNITS + u) % 60;
                text.push_str(&format!(
                    "2026-11-27T10:00:{s:02}+0000 ct200 systemd[1]: svc-{}.service: Main process exited, code=exited, status=1/FAILURE\n",
                    name(u)
                ));
            }
        }
        ingest_one("journal.txt", &text, Repeats::STANDARD).facts
    };
    let (short, long) = (read(20), read(40));
    for (facts, cycles) in [(&short, 20u64), (&long, 40)] {
        assert_eq!(facts.repeats.len(), UNITS, "every template counted");
        assert!(facts.repeats.iter().all(|r| r.count == cycles));
        // Far fewer lines kept than read: a budget, not the input.
        assert!(
            facts.messages.len() < UNITS * 13,
            "{}",
            facts.messages.len()
        );
    }
    assert_eq!(short.messages.len(), long.messages.len());
    assert_eq!(short.journal.len(), long.journal.len());
}

/// A journal of the lines servers print by the million (vLLM throughput
/// records, uvicorn access lines and health checks, SGLang batches) with an
/// incident in it reads the same through the fast path (`ingest::chatter`,
/// taken when skimming) as read in full, and its facts are the same.
#[test]
fn the_fast_path_for_server_chatter_changes_nothing() {
    let scratch = Scratch::new("chatter");
    let mut journal = String::new();
    for i in 0..300u32 {
        let (m, s) = (i / 60, i % 60);
        let t = format!("2026-11-27T09:{m:02}:{s:02}+0000 ct200");
        let line = match i % 5 {
            0 => format!(
                "{t} vllm[4100]: INFO 11-27 09:{m:02}:{s:02} [loggers.py:123] Engine 000: Avg prompt throughput: 12.5 tokens/s, Avg generation throughput: 40.1 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%"
            ),
            1 => format!(
                "{t} vllm[4100]: INFO:     10.0.0.{}:{} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
                i % 250,
                40000 + i
            ),
            2 => format!(
                "{t} vllm[4100]: INFO:     127.0.0.1:{} - \"GET /health HTTP/1.1\" 200 OK",
                30000 + i
            ),
            3 => format!(
                "{t} python3[5200]: [2026-11-27 09:{m:02}:{s:02} TP0] Decode batch. #running-req: 4, #token: 3000, token usage: 0.05, cuda graph: True, gen throughput (token/s): 410.2, #queue-req: 0"
            ),
            _ => format!(
                "{t} vllm[4101]: INFO 11-27 09:{m:02}:{s:02}.123 [logger.py:43] Received request chatcmpl-{i}: prompt: '', params: SamplingParams(n=1)"
            ),
        };
        journal.push_str(&line);
        journal.push('\n');
        if i == 150 {
            journal.push_str("2026-11-27T09:02:30+0000 ct200 vllm[4100]: ERROR 11-27 09:02:30 [launcher.py:75] [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use\n");
            journal.push_str("2026-11-27T09:02:30+0000 ct200 systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE\n");
        }
    }
    let dir = scratch.path.join("chatter");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("journal.txt"), &journal).expect("write");
    check("server chatter", &dir);
}

/// A kernel line between a server's bare output and systemd's exit line is
/// no program's output: it is skimmed with the prefilter, so it must not
/// decide whether the bare line is the unit's last words (the randomised
/// test's shrunk input). Both readings cite the bare error as the unit's
/// last words.
#[test]
fn kernel_chatter_does_not_hide_a_units_bare_last_words() {
    let scratch = Scratch::new("prefilter-kernel-chatter");
    let file = scratch.path.join("input.log");
    std::fs::write(
        &file,
        "[2026-11-27 09:38:52 TP1] RuntimeError: CUDA error: out of memory\n\
         2026-11-27T09:38:43+0000 host kernel: Decode batch. #running-req: 3, #token: 100\n\
         (VllmWorker rank=1 pid=4243) sglang.service: Main process exited, code=exited, status=1/FAILURE\n",
    )
    .expect("write");
    check("kernel chatter", &file);
    let (streamed, context) = load(&file);
    let report = analyse(streamed, context, true);
    let exit = report
        .diagnosis
        .findings
        .iter()
        .find(|f| f.rule == "unit-exit-nonzero")
        .expect("the unit's exit is a finding");
    assert!(
        exit.evidence
            .iter()
            .any(|e| e.span.line == 1 && e.note.contains("last words")),
        "the bare error is the unit's last words: {:?}",
        exit.evidence
    );
}

/// One real paste kept the ways container and journal logs are kept: the
/// same finding whatever the framing. JSON framings escape the quotes of
/// ollama's `msg="inference compute"`, and Docker's json-file also wraps
/// each line in a record: the anchors and the rules must still see the
/// line as the program printed it (issue 23's framings).
#[test]
fn a_real_paste_gives_the_same_finding_in_every_framing() {
    let case = fixtures().join("real/608-ollama-rtx5880-48gib-only-28.9-available-at-start");
    let text = std::fs::read_to_string(case.join("input.log")).expect("608's paste");
    // Healthy chatter between the lines, as a busy log has: the prefilter
    // skims these.
    let filler = r#"[GIN] 2025/07/30 - 13:58:02 | 200 |     1.203ms |       127.0.0.1 | GET      "/api/tags""#;
    let mut lines: Vec<&str> = Vec::new();
    for line in text.lines() {
        lines.extend(std::iter::repeat_n(filler, 50));
        lines.push(line);
    }
    let json = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    /// How one framing writes the paste's line `i`.
    type Framing = dyn Fn(usize, &str) -> String;
    let framings: [(&str, Box<Framing>); 5] = [
        ("raw", Box::new(|_, l| l.to_owned())),
        (
            "journal short-iso",
            Box::new(|_, l| format!("2025-07-30T13:57:36+0800 gpu-node-7 ollama[40193]: {l}")),
        ),
        (
            "journal JSON",
            Box::new(move |i, l| {
                format!(
                    r#"{{"__REALTIME_TIMESTAMP":"{}","_PID":"40193","SYSLOG_IDENTIFIER":"ollama","_SYSTEMD_UNIT":"ollama.service","MESSAGE":{}}}"#,
                    1_753_854_656_000_000u64 + i as u64,
                    json(l)
                )
            }),
        ),
        (
            "Docker json-file",
            Box::new(move |i, l| {
                format!(
                    r#"{{"log":{},"stream":"stderr","time":"2025-07-30T05:57:36.{i:09}Z"}}"#,
                    json(&format!("{l}\n"))
                )
            }),
        ),
        (
            "CRI",
            Box::new(|i, l| format!("2025-07-30T05:57:36.{i:09}Z stderr F {l}")),
        ),
    ];
    let scratch = Scratch::new("framings");
    for (name, frame) in &framings {
        let path = scratch.path.join("input.log");
        let body: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| frame(i, l) + "\n")
            .collect();
        std::fs::write(&path, body).expect("write");
        let out = crate::support::bin()
            .args(["analyze", "--output", "json"])
            .arg(&path)
            .output()
            .expect("runs");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json report");
        let root = report["root_cause"].as_str().unwrap_or_default();
        let rule = report["findings"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["id"] == root))
            .map(|f| f["rule"].clone());
        assert_eq!(
            rule,
            Some(serde_json::json!("gpu-memory-taken-before-load")),
            "{name}: {}",
            report["findings"]
        );
        let unread: u64 = report["inputs"]
            .as_array()
            .map(|i| {
                i.iter()
                    .filter_map(|i| i["unrecognized_lines"].as_u64())
                    .sum()
            })
            .unwrap_or(0);
        assert_eq!(unread, 0, "{name}: lines left unread");
    }
}
