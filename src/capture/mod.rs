//! `rootcause capture`: on a live host, run the read-only commands the
//! analysis needs, each with a timeout, and write a bundle (one file per
//! source plus `manifest.json`). A missing tool or a command that fails or
//! hangs is recorded in the manifest and becomes a gap in the report, never
//! an error of the capture. See docs/capture.md.
//!
//! I/O glue only: what the files mean is decided by the analysis, which
//! reads a bundle the same whether `capture` or a person wrote it.

mod commands;
mod manifest;
mod procs;
mod redact;
mod writer;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::context::{CommandRecord, CommandStatus};
use crate::error::Error;
use crate::source::{Source, SourceMap};

pub use redact::{Kind as RedactKind, Redactor};
pub use writer::Member;

use commands::Ran;
use manifest::Host;

/// Where the bundle goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A new (or empty) folder.
    Dir(PathBuf),
    /// One tar file, members under a folder named like the file.
    Tar(PathBuf),
    /// `rootcause-HOST-YYYYMMDD-HHMMSS` in the working directory.
    Auto,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub units: Vec<String>,
    pub since: String,
    pub destination: Destination,
    pub redact: bool,
    pub redact_map: Option<PathBuf>,
    pub timeout: Duration,
    pub journal_dir: Option<PathBuf>,
    pub proc_root: PathBuf,
    pub description: Option<String>,
}

/// `sglang` means `sglang.service`, as it does to systemctl.
fn unit_name(unit: &str) -> String {
    if unit.contains('.') {
        unit.to_owned()
    } else {
        format!("{unit}.service")
    }
}

/// What the capture collected, before it is written.
#[derive(Debug, Default)]
struct Collected {
    members: Vec<Member>,
    records: Vec<CommandRecord>,
    units: Vec<String>,
}

impl Collected {
    fn keep(&mut self, ran: Ran) {
        if let Some(file) = &ran.record.file {
            self.members.push(Member {
                name: file.clone(),
                bytes: ran.stdout,
            });
        }
        self.records.push(ran.record);
    }
}

fn collect(o: &Options) -> Collected {
    let mut c = Collected::default();
    let gpu: Vec<Ran> = commands::gpu()
        .iter()
        .map(|s| commands::run(s, o.timeout))
        .collect();
    // The PIDs come from the compute-apps query and the table only: the
    // XML report can be gigabytes, and says nothing they do not.
    let listings: Vec<(&str, &[u8])> = gpu
        .iter()
        .filter(|r| {
            matches!(
                r.record.file.as_deref(),
                Some("nvidia-smi-query-compute-apps.csv" | "nvidia-smi.txt")
            )
        })
        .map(|r| (r.record.command.as_str(), r.stdout.as_slice()))
        .collect();
    let pids = procs::gpu_pids(&listings);
    for ran in gpu {
        c.keep(ran);
    }
    c.keep(commands::run(&commands::ps(), o.timeout));

    // Each GPU process's cgroup names the unit that owns it.
    let mut units: Vec<String> = Vec::new();
    for u in &o.units {
        let u = unit_name(u);
        if !units.contains(&u) {
            units.push(u);
        }
    }
    let mut cgroups = Vec::new();
    for pid in pids {
        let before = cgroups.len();
        c.records
            .push(procs::read_cgroup(&o.proc_root, pid, &mut cgroups));
        let text = String::from_utf8_lossy(&cgroups[before..]);
        if let Some(unit) = procs::unit_of_cgroup(&text) {
            if !units.contains(&unit) {
                units.push(unit);
            }
        }
    }
    if !cgroups.is_empty() {
        c.members.push(Member {
            name: procs::CGROUP_FILE.to_owned(),
            bytes: cgroups,
        });
    }

    for unit in &units {
        for spec in commands::unit(unit) {
            c.keep(commands::run(&spec, o.timeout));
        }
    }
    let journal_dir = o.journal_dir.as_deref();
    let unit_journal = commands::unit_journal(&units, &o.since, journal_dir);
    if units.is_empty() {
        c.records.push(CommandRecord {
            file: None,
            command: unit_journal.display(),
            status: CommandStatus::Skipped,
            exit_code: None,
            duration_ms: 0,
            bytes: 0,
            detail: Some(
                "no unit named with --unit and none owns a GPU process: no unit journal".to_owned(),
            ),
            truncated: false,
        });
    } else {
        c.keep(commands::run(&unit_journal, o.timeout));
    }
    c.keep(commands::run(
        &commands::kernel_journal(&o.since, journal_dir),
        o.timeout,
    ));
    c.units = units;
    c
}

/// Runs the capture and writes the bundle; returns what to tell the user.
pub fn capture(o: &Options) -> Result<String, Error> {
    let host = Host::detect(&o.proc_root);
    let mut c = collect(o);
    let manifest = manifest::build(
        &host,
        &c.units,
        &o.since,
        o.description.as_deref(),
        o.redact,
        std::mem::take(&mut c.records),
    );
    let mut manifest_json = serde_json::to_string_pretty(&manifest).expect("manifest serialises");
    manifest_json.push('\n');
    let gaps: Vec<String> = manifest
        .commands
        .iter()
        .filter(|r| r.status != CommandStatus::Ok || r.truncated)
        .map(|r| {
            crate::context::Gap {
                file: r.file.clone(),
                command: r.command.clone(),
                status: r.status,
                exit_code: r.exit_code,
                detail: r.detail.clone(),
                truncated: r.truncated,
            }
            .describe()
        })
        .collect();
    let mut host_name = host.name.clone().unwrap_or_else(|| "host".to_owned());

    let mut members = c.members;
    members.push(Member {
        name: "manifest.json".to_owned(),
        bytes: manifest_json.into_bytes(),
    });
    let redactor = o.redact.then(|| learn(&host, &members));
    if let Some(r) = &redactor {
        for m in &mut members {
            m.name = r.apply(&m.name);
            m.bytes = r.apply(&String::from_utf8_lossy(&m.bytes)).into_bytes();
        }
        host_name = r.apply(&host_name);
    }

    let (written, mapping_path) = match &o.destination {
        Destination::Tar(path) => {
            let top = path
                .file_stem()
                .map_or("bundle".to_owned(), |s| s.to_string_lossy().into_owned());
            let mtime = u64::try_from(host.now.timestamp()).unwrap_or(0);
            writer::write_tar(path, &top, &members, mtime)?;
            (path.clone(), suffixed(path, ".redactions.json"))
        }
        Destination::Dir(dir) => {
            writer::write_dir(dir, &members)?;
            (dir.clone(), suffixed(dir, ".redactions.json"))
        }
        Destination::Auto => {
            let dir = PathBuf::from(format!(
                "rootcause-{}-{}",
                commands::file_safe(&host_name),
                host.now.format("%Y%m%d-%H%M%S")
            ));
            writer::write_dir(&dir, &members)?;
            let map = suffixed(&dir, ".redactions.json");
            (dir, map)
        }
    };
    let mut summary = format!(
        "rootcause: captured {} files into {}\n",
        members.len(),
        written.display()
    );
    if gaps.is_empty() {
        summary.push_str("rootcause: no gaps: every command ran\n");
    } else {
        summary.push_str(&format!(
            "rootcause: {} gap{} (the report will show them):\n",
            gaps.len(),
            if gaps.len() == 1 { "" } else { "s" }
        ));
        for g in &gaps {
            summary.push_str(&format!("  {g}\n"));
        }
    }
    if let Some(r) = &redactor {
        let path = o.redact_map.clone().unwrap_or(mapping_path);
        writer::write_private(&path, &r.mapping())?;
        summary.push_str(&format!(
            "rootcause: redaction mapping written to {} (private: keep it out of the bundle)\n",
            path.display()
        ));
    }
    Ok(summary)
}

/// `DIR` → `DIR.redactions.json`, beside it, never inside.
fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let text = path.to_string_lossy();
    PathBuf::from(format!("{}{suffix}", text.trim_end_matches(['/', '\\'])))
}

/// A redactor that knows every host, user, address and secret of the capture.
fn learn(host: &Host, members: &[Member]) -> Redactor {
    let mut r = Redactor::new();
    if let Some(name) = &host.name {
        r.learn(RedactKind::Host, name);
    }
    let mut sources = SourceMap::new();
    for m in members {
        sources.add(Source::new(m.name.clone(), &m.bytes));
    }
    let ingested = crate::ingest::ingest(
        &sources,
        &crate::ingest::Anchors::new(std::iter::empty::<&str>()),
    );
    r.learn_facts(&ingested.facts);
    for m in members {
        r.learn_text(&String::from_utf8_lossy(&m.bytes));
    }
    r.seal();
    r
}
