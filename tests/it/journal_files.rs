//! Inputs that are not text: real binary journal files (built at test time
//! by `systemd-journal-remote` from the export fixtures in
//! fixtures/journal/, then read back through `journalctl`), directories of
//! them, `-o export` dumps, gzip and zstd files, and every text mode the
//! real journalctl prints from such a file.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rootcause::bundle::{self, Input};

use crate::support::{self, check, fixtures, incident, json, require_tool, root};

const JOURNAL_REMOTE: &str = "/lib/systemd/systemd-journal-remote";

fn export_fixture(name: &str) -> PathBuf {
    fixtures().join("journal").join(name)
}

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "rootcause-journal-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Writes `export` into a new journal file at `out` the way a log
/// collector does: with systemd-journal-remote.
fn journal_file(export: &Path, out: &Path) {
    require_tool(JOURNAL_REMOTE, "systemd-journal-remote");
    require_tool("journalctl", "systemd");
    let o = Command::new(JOURNAL_REMOTE)
        .arg(format!("--output={}", out.display()))
        .arg(export)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success() && out.is_file(),
        "systemd-journal-remote failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs a system tool, returning its stdout.
fn run(program: &str, args: &[&str]) -> Vec<u8> {
    let o = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

fn load(paths: &[&Path]) -> rootcause::source::SourceMap {
    let inputs: Vec<Input> = paths.iter().map(|p| Input::Path(p.to_path_buf())).collect();
    bundle::load(&inputs, &mut std::io::empty())
        .expect("inputs load")
        .0
}

type Entry = (String, Option<u32>, Option<String>, String);

/// identifier, PID, unit and message of every journal entry found.
fn entries(out: &support::Outputs) -> Vec<Entry> {
    out.analysis
        .incident
        .facts
        .journal
        .iter()
        .map(|e| {
            (
                e.identifier.clone(),
                e.pid,
                e.unit.clone(),
                e.message.clone(),
            )
        })
        .collect()
}

fn entry(ident: &str, pid: Option<u32>, unit: Option<&str>, message: &str) -> Entry {
    (
        ident.to_owned(),
        pid,
        unit.map(str::to_owned),
        message.to_owned(),
    )
}

/// The eight entries of fixtures/journal/gpu-node-7-modes.export, in
/// journal order, as the JSON-carrying inputs (journal file, export) give
/// them: PID 1 with its `UNIT=`, a server, the kernel, a multi-line
/// traceback, a colour-coded byte message, a user service, the next boot.
fn modes_entries() -> Vec<Entry> {
    let sglang = Some("sglang.service");
    vec![
        entry(
            "systemd",
            Some(1),
            sglang,
            "Started sglang.service - SGLang inference server.",
        ),
        entry(
            "python3",
            Some(4242),
            sglang,
            "[2024-06-01 12:00:02 TP1] Init torch distributed begin.",
        ),
        entry(
            "kernel",
            None,
            None,
            "NVRM: Xid (PCI:0000:1a:00): 79, pid=4242, GPU has fallen off the bus.",
        ),
        entry(
            "python3",
            Some(4242),
            sglang,
            "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nRuntimeError: boom",
        ),
        entry("python3", Some(4242), sglang, "colour done"),
        entry(
            "systemd",
            Some(1),
            sglang,
            "sglang.service: Main process exited, code=killed, status=9/KILL",
        ),
        entry(
            "app",
            Some(1800),
            Some("user@1000.service"),
            "user unit line",
        ),
        entry(
            "sshd",
            Some(900),
            Some("ssh.service"),
            "Accepted publickey for root",
        ),
    ]
}

#[test]
fn a_journal_file_and_its_export_give_the_same_entries() {
    let tmp = TempDir::new("modes");
    let export = export_fixture("gpu-node-7-modes.export");
    let file = tmp.0.join("system.journal");
    journal_file(&export, &file);

    for path in [&file, &export] {
        let out = support::analyze(load(&[path]));
        assert_eq!(entries(&out), modes_entries(), "{}", path.display());
        let inputs = &out.analysis.inputs;
        assert_eq!(inputs.len(), 1);
        assert_eq!(
            out.analysis.sources.get(inputs[0].segment.source).name,
            path.display().to_string(),
            "the source keeps the file's name"
        );
        assert_eq!(inputs[0].segment.format.name(), "journal-json");
        assert_eq!((inputs[0].lines, inputs[0].unrecognized), (8, 0));
        // The traceback inside the journal is a server event of PID 4242 in
        // sglang.service.
        let exceptions: Vec<(Option<u32>, Option<&str>)> = out
            .analysis
            .incident
            .facts
            .server_events
            .iter()
            .filter(|e| matches!(e.kind, rootcause::model::ServerEventKind::Exception { .. }))
            .map(|e| (e.pid, e.unit.as_deref()))
            .collect();
        assert_eq!(exceptions, vec![(Some(4242), Some("sglang.service"))]);
        let owner = out
            .analysis
            .incident
            .owner(4242)
            .expect("PID 4242 has a unit");
        assert_eq!(owner.unit, "sglang.service");
    }
}

#[test]
fn a_directory_of_journal_files_is_one_merged_journal() {
    let tmp = TempDir::new("dir");
    let dir = tmp.0.join("journal");
    fs::create_dir_all(&dir).unwrap();
    journal_file(
        &export_fixture("gpu-node-7-modes.export"),
        &dir.join("system.journal"),
    );
    // A second file: the seed incident's journal, renamed the way journald
    // renames a file it found damaged. Its magic bytes still say journal.
    let second = dir.join("second.journal");
    journal_file(&export_fixture("ct200-ghost-ddtree.export"), &second);
    fs::rename(
        &second,
        dir.join("system@00062a0b1f2e3d4c-0123456789abcdef.journal~"),
    )
    .unwrap();
    fs::write(dir.join("README.txt"), "copied from /var/log/journal\n").unwrap();

    let out = check(&dir);
    let names: Vec<&str> = out
        .analysis
        .sources
        .iter()
        .map(|(_, s)| s.name.as_str())
        .collect();
    assert_eq!(names, vec!["README.txt", "journal/"]);
    let got = entries(&out);
    assert_eq!(got.len(), 8 + 180);
    // journalctl's merged order: by time, 2024 before 2026.
    assert_eq!(got[..8], modes_entries()[..]);
    assert_eq!(
        got[8].3,
        "Started ddtree-qwen.service - DDTree speculative decoding server (Qwen)."
    );
    let owner = out
        .analysis
        .incident
        .owner(20629)
        .expect("PID 20629 has a unit");
    assert_eq!(owner.unit, "ddtree-qwen.service");
}

/// The seed incident with its journal as a real journal file (in a
/// /var/log/journal-like subdirectory) instead of journal.txt.
#[test]
fn the_seed_incident_from_a_journal_file_has_the_same_root_cause() {
    let tmp = TempDir::new("seed");
    let seed = incident("2026-11-27-ct200-ghost-ddtree");
    for f in fs::read_dir(&seed).unwrap() {
        let f = f.unwrap().path();
        let name = f.file_name().unwrap().to_owned();
        // The approved reports (expected/) are not inputs.
        if name != "journal.txt" && f.is_file() {
            fs::copy(&f, tmp.0.join(name)).unwrap();
        }
    }
    let machine = tmp.0.join("journal/d4e793834a2f52201978ae8702a3ff95");
    fs::create_dir_all(&machine).unwrap();
    journal_file(
        &export_fixture("ct200-ghost-ddtree.export"),
        &machine.join("system.journal"),
    );

    let from_file = check(&tmp.0);
    let from_text = check(&seed);
    crate::incidents::assert_seed_root_cause(&from_file);
    let (a, b) = (json(&from_file), json(&from_text));
    for key in ["rule", "category", "entities", "headline"] {
        assert_eq!(root(&a)[key], root(&b)[key], "{key}");
    }
    // The same steps; their evidence may cite the journal file instead of
    // journal.txt or systemctl status, which is the point.
    let steps = |v: &serde_json::Value| -> Vec<serde_json::Value> {
        let mut actions = root(v)["actions"].as_array().unwrap().clone();
        for a in &mut actions {
            a.as_object_mut().unwrap().remove("evidence");
        }
        actions
    };
    assert_eq!(steps(&a), steps(&b));
    let input = a["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "journal/d4e793834a2f52201978ae8702a3ff95/system.journal")
        .expect("the journal file is an input");
    assert_eq!(input["format"], "journal-json");
    assert_eq!(input["unrecognized_lines"], 0);
}

#[test]
fn gzip_and_zstd_inputs_are_read_transparently() {
    require_tool("gzip", "gzip");
    require_tool("zstd", "zstd");
    let tmp = TempDir::new("compressed");
    let seed = incident("2026-11-27-ct200-ghost-ddtree");
    for f in fs::read_dir(&seed).unwrap() {
        let f = f.unwrap().path();
        if f.is_file() {
            fs::copy(&f, tmp.0.join(f.file_name().unwrap())).unwrap();
        }
    }
    // Names that do not say "compressed": detection is by magic bytes.
    let journal = tmp.0.join("journal.txt");
    let sglang = tmp.0.join("sglang.log");
    let gz = run("gzip", &["-c", journal.to_str().unwrap()]);
    fs::write(&journal, gz).unwrap();
    let zst = run("zstd", &["-q", "-c", sglang.to_str().unwrap()]);
    fs::write(&sglang, zst).unwrap();
    let smi = tmp.0.join("nvidia-smi.txt");
    fs::rename(&smi, tmp.0.join("nvidia-smi.txt.zst")).unwrap();
    let smi_zst = run(
        "zstd",
        &[
            "-q",
            "-c",
            tmp.0.join("nvidia-smi.txt.zst").to_str().unwrap(),
        ],
    );
    fs::write(tmp.0.join("nvidia-smi.txt.zst"), smi_zst).unwrap();

    let from_compressed = check(&tmp.0);
    let from_text = check(&seed);
    crate::incidents::assert_seed_root_cause(&from_compressed);
    let (a, b) = (json(&from_compressed), json(&from_text));
    for key in [
        "rule", "category", "entities", "headline", "actions", "evidence",
    ] {
        let (x, y) = (root(&a)[key].to_string(), root(&b)[key].to_string());
        assert_eq!(
            x.replace("nvidia-smi.txt.zst", "nvidia-smi.txt"),
            y,
            "{key}"
        );
    }

    // A compressed binary journal file: gzip over the journal-remote output.
    let file = tmp.0.join("modes.journal");
    journal_file(&export_fixture("gpu-node-7-modes.export"), &file);
    let packed = tmp.0.join("modes.journal.gz");
    fs::write(&packed, run("gzip", &["-c", file.to_str().unwrap()])).unwrap();
    let out = support::analyze(load(&[&packed]));
    assert_eq!(entries(&out), modes_entries());
}

#[test]
fn a_corrupt_compressed_input_is_an_error_naming_the_file() {
    let tmp = TempDir::new("corrupt");
    let path = tmp.0.join("journal.txt");
    fs::write(&path, [0x1f, 0x8b, 0x08, 0x00, 0xde, 0xad]).unwrap();
    let e = bundle::load(&[Input::Path(path.clone())], &mut std::io::empty())
        .expect_err("corrupt gzip");
    let message = e.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("gzip"), "{message}");
}

/// What the real journalctl prints from one journal file, in every text
/// mode, is read back to the same identifiers, PIDs and messages.
#[test]
fn every_text_mode_of_the_real_journalctl() {
    let tmp = TempDir::new("text-modes");
    let file = tmp.0.join("system.journal");
    journal_file(&export_fixture("gpu-node-7-modes.export"), &file);
    let file_arg = format!("--file={}", file.display());
    let pids = |out: &support::Outputs| -> Vec<Option<u32>> {
        entries(out).into_iter().map(|e| e.1).collect()
    };
    let want_pids: Vec<Option<u32>> = modes_entries().into_iter().map(|e| e.1).collect();
    for (mode, format, extra) in [
        ("short", "journal-short", None),
        ("short-precise", "journal-short", None),
        ("short-iso", "journal-short-iso", None),
        ("short-iso-precise", "journal-short-iso", None),
        ("short-full", "journal-short-full", None),
        ("short-unix", "journal-short-unix", None),
        ("short-monotonic", "journal-short-monotonic", None),
        ("short-delta", "journal-short-delta", None),
        ("with-unit", "journal-with-unit", None),
        ("verbose", "journal-verbose", None),
        ("json", "journal-json", None),
        ("json-pretty", "journal-json", None),
        ("json-seq", "journal-json", None),
        ("json-sse", "journal-json", None),
        ("short-iso", "journal-short-iso", Some("-x")),
    ] {
        let mut args = vec!["--no-pager", "--utc", "-o", mode, file_arg.as_str()];
        args.extend(extra);
        let text = run("journalctl", &args);
        let mut sources = rootcause::source::SourceMap::new();
        sources.add(rootcause::source::Source::new("stdin", &text));
        let out = support::analyze(sources);
        let formats: Vec<&str> = out
            .analysis
            .inputs
            .iter()
            .map(|i| i.segment.format.name())
            .collect();
        assert_eq!(formats, vec![format], "{mode}");
        let unrecognized: u32 = out.analysis.inputs.iter().map(|i| i.unrecognized).sum();
        assert_eq!(unrecognized, 0, "{mode}");
        assert_eq!(pids(&out), want_pids, "{mode}");
        let messages: Vec<String> = entries(&out).into_iter().map(|e| e.3).collect();
        assert_eq!(messages[3], modes_entries()[3].3, "{mode}");
        let exceptions = out
            .analysis
            .incident
            .facts
            .server_events
            .iter()
            .filter(|e| matches!(e.kind, rootcause::model::ServerEventKind::Exception { .. }))
            .count();
        assert_eq!(exceptions, 1, "{mode}");
    }
}

/// Without journalctl a journal file cannot be read: exit code 2 and a
/// message naming the file and the package to install.
#[test]
fn a_journal_file_without_journalctl_is_an_error_with_an_install_hint() {
    let tmp = TempDir::new("no-journalctl");
    let file = tmp.0.join("system.journal");
    journal_file(&export_fixture("gpu-node-7-modes.export"), &file);
    let o = Command::new(env!("CARGO_BIN_EXE_rootcause"))
        .arg(&file)
        // Nothing on PATH: journalctl cannot be found.
        .env("PATH", "")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        stderr.trim(),
        format!(
            "rootcause: error: cannot read {}: it is a binary systemd journal, which needs `journalctl` (apt-get install systemd)",
            file.display()
        )
    );
}

/// `-o cat` is read only when the user names it; then PID 1's lifecycle
/// lines are known and the rest are messages.
#[test]
fn cat_output_with_the_format_hint() {
    let tmp = TempDir::new("cat");
    let file = tmp.0.join("system.journal");
    journal_file(&export_fixture("gpu-node-7-modes.export"), &file);
    let text = run(
        "journalctl",
        &[
            "--no-pager",
            "-o",
            "cat",
            &format!("--file={}", file.display()),
        ],
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_rootcause"))
        .args(["inputs", "--format-hint", "journal-cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &text).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "stdin:1-10: journal-cat (confidence 1.00, 0 of 10 lines unrecognised; named by --format-hint)\n"
    );

    let mut sources = rootcause::source::SourceMap::new();
    sources.add(rootcause::source::Source::new("stdin", &text));
    let options = rootcause::Options {
        format_hint: Some(rootcause::ingest::Format::JournalCat),
        ..Default::default()
    };
    let analysis = rootcause::analyze_with(sources, &options);
    let pid1: Vec<(u32, Option<&str>)> = analysis
        .incident
        .facts
        .journal
        .iter()
        .filter(|e| e.is_pid1())
        .map(|e| (e.span.line, e.unit.as_deref()))
        .collect();
    assert_eq!(
        pid1,
        vec![(1, Some("sglang.service")), (8, Some("sglang.service"))]
    );
    assert_eq!(analysis.inputs[0].unrecognized, 0);
    let unit = &analysis.incident.units["sglang.service"];
    assert_eq!(unit.events.len(), 2);
}
