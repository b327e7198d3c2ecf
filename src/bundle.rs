//! Reading inputs: files, bundle directories and stdin into a [`SourceMap`].
//! The only module that reads input files; plain text files are only opened
//! here and streamed by ingest ([`Source::file`]).
//!
//! Inputs that are not text become text here, before detection: gzip and
//! zstd are unpacked ([`compressed`]), binary journal files are read through
//! `journalctl -o json` ([`journal_file`]) and `journalctl -o export` dumps
//! are converted to the same JSON lines ([`export`]). Each keeps the name of
//! the file it came from.

mod compressed;
mod export;
mod journal_file;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::source::{Source, SourceMap};

/// Where one input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Path(PathBuf),
    Stdin,
}

/// `manifest.json` of a bundle: optional metadata about the capture, read
/// here and written by `rootcause capture` (docs/capture.md).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct Manifest {
    pub host: Option<String>,
    /// RFC 3339 with the host's offset: `2026-11-27T09:41:12+00:00`.
    pub captured_at: Option<String>,
    /// IANA name (`Europe/Berlin`, `UTC`): the zone of every zone-less time.
    pub timezone: Option<String>,
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootcause_version: Option<String>,
    /// The `--unit`s the capture was asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
    /// Every command the capture ran, in order, with its outcome.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandRecord>,
    /// Why the file could not be read, when it could not: the analysis goes
    /// on and the report says so.
    #[serde(skip)]
    pub problem: Option<String>,
}

/// One command of a capture and what came of it.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct CommandRecord {
    /// The bundle member it wrote; `None` when it wrote nothing.
    pub file: Option<String>,
    /// As a person would type it.
    pub command: String,
    pub status: CommandStatus,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    pub bytes: u64,
    /// What went wrong (the tool's stderr, the timeout), when something did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The output was longer than a member may be, and was cut (`detail`
    /// says where): a gap even when the command succeeded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// How a capture command ended. Anything but `ok` is a gap in the bundle.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CommandStatus {
    Ok,
    /// It ran and exited with a status that means failure.
    Failed,
    /// The program is not installed.
    Missing,
    /// Killed after the capture's timeout.
    Timeout,
    /// It could not be started or read (permissions, I/O).
    Error,
    /// Not run: there was nothing to ask it (no unit named or found).
    Skipped,
    /// A status this version does not know (a newer capture).
    #[serde(other)]
    Unknown,
}

impl CommandStatus {
    pub fn name(self) -> &'static str {
        match self {
            CommandStatus::Ok => "ok",
            CommandStatus::Failed => "failed",
            CommandStatus::Missing => "missing",
            CommandStatus::Timeout => "timeout",
            CommandStatus::Error => "error",
            CommandStatus::Skipped => "skipped",
            CommandStatus::Unknown => "unknown",
        }
    }
}

/// Files in a bundle directory that are not inputs: its metadata, notes for
/// people, and the approved reports of a replay case.
fn is_bundle_metadata(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.starts_with('.')
        || name == "manifest.json"
        || name == "expected"
        || name.ends_with(".md")
        || name.ends_with(".snap")
}

/// Reads every input. A directory contributes its files, recursively, in
/// name order, named by their path inside it. Plain text files are
/// streamed; stdin is read here.
pub fn load(
    inputs: &[Input],
    stdin: &mut dyn Read,
) -> Result<(SourceMap, Option<Manifest>), Error> {
    load_with(inputs, Stdin::Read(stdin))
}

/// [`load`], with stdin streamed too when it is plain text: ingest reads
/// it once, as it comes (`journalctl -o json | rootcause`).
pub fn open(
    inputs: &[Input],
    stdin: Box<dyn Read + Send>,
) -> Result<(SourceMap, Option<Manifest>), Error> {
    load_with(inputs, Stdin::Stream(Some(stdin)))
}

enum Stdin<'a> {
    /// Read whole here.
    Read(&'a mut dyn Read),
    /// Handed to the source when it is plain text; read at most once.
    Stream(Option<Box<dyn Read + Send>>),
}

fn load_with(
    inputs: &[Input],
    mut stdin: Stdin<'_>,
) -> Result<(SourceMap, Option<Manifest>), Error> {
    let mut sources = SourceMap::new();
    let mut manifest = None;
    for input in inputs {
        match input {
            Input::Stdin => {
                let io = |source| Error::Io {
                    path: "stdin".to_owned(),
                    source,
                };
                let mut bytes = Vec::new();
                match &mut stdin {
                    Stdin::Read(reader) => {
                        reader.read_to_end(&mut bytes).map_err(io)?;
                    }
                    Stdin::Stream(reader) => {
                        let Some(mut reader) = reader.take() else {
                            sources.add(Source::new("stdin", b""));
                            continue;
                        };
                        // Enough for a magic number or an export's first field.
                        (&mut reader).take(32).read_to_end(&mut bytes).map_err(io)?;
                        let plain = !journal_file::is_journal(&bytes)
                            && !compressed::is_compressed(&bytes)
                            && !export::is_export(&bytes);
                        if plain {
                            sources.add(Source::stream("stdin", bytes, reader));
                            continue;
                        }
                        reader.read_to_end(&mut bytes).map_err(io)?;
                    }
                }
                sources.add(Source::new("stdin", &decode(bytes, "stdin")?));
            }
            Input::Path(path) if path.is_dir() => {
                let before = sources.len();
                add_dir(&mut sources, path, Path::new(""))?;
                if sources.len() == before {
                    return Err(Error::EmptyDirectory {
                        path: path.display().to_string(),
                    });
                }
                if manifest.is_none() {
                    manifest = read_manifest(&path.join("manifest.json"))?;
                }
            }
            Input::Path(path) if path.extension().is_some_and(|x| x == "tar") => {
                let found = add_tar(&mut sources, path)?;
                if manifest.is_none() {
                    manifest = found;
                }
            }
            Input::Path(path) => {
                sources.add(file_source(path.display().to_string(), path)?);
            }
        }
    }
    Ok((sources, manifest))
}

fn add_dir(sources: &mut SourceMap, dir: &Path, prefix: &Path) -> Result<(), Error> {
    let io = |source| Error::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort();
    entries.retain(|p| !is_bundle_metadata(p));
    // The journal files of one directory (active, archived, per user) are
    // one journal: read together, in journalctl's merged order.
    let mut journals = Vec::new();
    for path in &entries {
        if path.is_file() && journal_file::is_journal(&head(path)?) {
            journals.push(path.clone());
        }
    }
    let mut journals_added = false;
    for path in entries {
        // Forward slashes on every platform: reports must be identical.
        let name = prefix.join(path.file_name().unwrap_or_default());
        let name = name.to_string_lossy().replace('\\', "/");
        if path.is_dir() {
            add_dir(sources, &path, Path::new(&name))?;
        } else if journals.contains(&path) {
            if !journals_added {
                journals_added = true;
                let (name, shown) = match journals.as_slice() {
                    [one] => (name, one.display().to_string()),
                    _ => (journal_dir_name(dir, prefix), dir.display().to_string()),
                };
                sources.add(Source::new(name, &journal_file::read(&journals, &shown)?));
            }
        } else {
            sources.add(file_source(name, &path)?);
        }
    }
    Ok(())
}

/// The name of the merged journal of `dir`: its path inside the bundle, or
/// its own name when it is the directory the user gave (`journal/` when
/// that has none, as `.` has not).
fn journal_dir_name(dir: &Path, prefix: &Path) -> String {
    let name = if prefix.as_os_str().is_empty() {
        dir.file_name()
            .map(Path::new)
            .unwrap_or(Path::new("journal"))
    } else {
        prefix
    };
    format!("{}/", name.to_string_lossy().replace('\\', "/"))
}

/// The file at `path` as the input `name`. A plain text file is streamed:
/// ingest reads it once, line by line, and it is never held whole. What
/// must be converted first is read here: a journal file (recognised by its
/// first bytes and handed to journalctl unread), a compressed file, an
/// export dump, and anything that is not a regular file (a pipe can be read
/// only once).
fn file_source(name: String, path: &Path) -> Result<Source, Error> {
    let shown = path.display().to_string();
    let head = head(path)?;
    if journal_file::is_journal(&head) {
        return Ok(Source::new(
            name,
            &journal_file::read(&[path.to_owned()], &shown)?,
        ));
    }
    let regular = fs::metadata(path).is_ok_and(|m| m.is_file());
    if !regular || compressed::is_compressed(&head) || export::is_export(&head) {
        return Ok(Source::new(name, &decode(read(path)?, &shown)?));
    }
    Ok(Source::file(name, path))
}

/// The text parsers read from the bytes of one input: decompressed, and
/// with a binary journal or an export dump turned into JSON lines. A journal
/// file on disk never gets here ([`read_input`]); one that was compressed or
/// piped in does.
fn decode(bytes: Vec<u8>, shown: &str) -> Result<Vec<u8>, Error> {
    let bytes = compressed::decompress(bytes).map_err(|source| Error::Io {
        path: shown.to_owned(),
        source,
    })?;
    if journal_file::is_journal(&bytes) {
        return journal_file::read_bytes(&bytes, shown);
    }
    if export::is_export(&bytes) {
        return Ok(export::to_json_lines(&bytes));
    }
    Ok(bytes)
}

/// The first bytes of a file, enough for its magic number or an export's
/// first field name.
fn head(path: &Path) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::with_capacity(32);
    fs::File::open(path)
        .and_then(|f| f.take(32).read_to_end(&mut bytes))
        .map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
    Ok(bytes)
}

/// A bundle written by `capture --tar`: its members under one top folder,
/// read like the folder itself, in name order.
fn add_tar(sources: &mut SourceMap, path: &Path) -> Result<Option<Manifest>, Error> {
    let io = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let file = fs::File::open(path).map_err(io)?;
    let mut archive = tar::Archive::new(file);
    let mut members: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for entry in archive.entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry.path().map_err(io)?.into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(io)?;
        members.push((name, bytes));
    }
    // The top folder `tar xf` would create is not part of the names.
    let top = members
        .first()
        .and_then(|(p, _)| p.components().next())
        .map(|c| PathBuf::from(c.as_os_str()));
    let strip = top.filter(|t| {
        members
            .iter()
            .all(|(p, _)| p.starts_with(t) && p.components().count() > 1)
    });
    let mut manifest = None;
    let mut inputs: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, bytes) in members {
        let rel = strip
            .as_ref()
            .and_then(|t| name.strip_prefix(t).ok())
            .unwrap_or(&name)
            .to_owned();
        if rel == Path::new("manifest.json") {
            manifest = Some(parse_manifest(&bytes));
            continue;
        }
        let skipped = rel
            .components()
            .any(|c| is_bundle_metadata(Path::new(c.as_os_str())));
        if !skipped {
            inputs.push((rel.to_string_lossy().replace('\\', "/"), bytes));
        }
    }
    if inputs.is_empty() {
        return Err(Error::EmptyDirectory {
            path: path.display().to_string(),
        });
    }
    inputs.sort();
    for (name, bytes) in inputs {
        sources.add(Source::new(name, &bytes));
    }
    Ok(manifest)
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    fs::read(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}

fn read_manifest(path: &Path) -> Result<Option<Manifest>, Error> {
    if !path.exists() {
        return Ok(None);
    }
    let bytes = read(path)?;
    Ok(Some(parse_manifest(&bytes)))
}

/// A manifest is optional metadata: a broken one is reported as unusable,
/// not fatal to the analysis of the logs beside it.
pub fn parse_manifest(bytes: &[u8]) -> Manifest {
    serde_json::from_slice(bytes).unwrap_or_else(|e| Manifest {
        problem: Some(format!("manifest.json is not valid: {e}")),
        ..Manifest::default()
    })
}
