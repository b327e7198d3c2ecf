//! Reading inputs: files, bundle directories and stdin into a [`SourceMap`].
//! The only module that reads input files.
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

use serde::Deserialize;

use crate::error::Error;
use crate::source::{Source, SourceMap};

/// Where one input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Path(PathBuf),
    Stdin,
}

/// `manifest.json` of a bundle: optional metadata about the capture.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Manifest {
    pub host: Option<String>,
    pub captured_at: Option<String>,
    pub timezone: Option<String>,
    pub description: Option<String>,
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
/// name order, named by their path inside it.
pub fn load(
    inputs: &[Input],
    stdin: &mut dyn Read,
) -> Result<(SourceMap, Option<Manifest>), Error> {
    let mut sources = SourceMap::new();
    let mut manifest = None;
    for input in inputs {
        match input {
            Input::Stdin => {
                let mut bytes = Vec::new();
                stdin.read_to_end(&mut bytes).map_err(|source| Error::Io {
                    path: "stdin".to_owned(),
                    source,
                })?;
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
            Input::Path(path) => {
                let name = path.display().to_string();
                sources.add(Source::new(&name, &read_input(path)?));
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
            sources.add(Source::new(name, &read_input(&path)?));
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

/// The text of the file at `path`. A journal file is recognised by its
/// first bytes and handed to journalctl unread.
fn read_input(path: &Path) -> Result<Vec<u8>, Error> {
    let shown = path.display().to_string();
    if journal_file::is_journal(&head(path)?) {
        return journal_file::read(&[path.to_owned()], &shown);
    }
    decode(read(path)?, &shown)
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

/// The first bytes of a file, enough for its magic number.
fn head(path: &Path) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::with_capacity(8);
    fs::File::open(path)
        .and_then(|f| f.take(8).read_to_end(&mut bytes))
        .map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
    Ok(bytes)
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
    // A manifest is optional metadata: a broken one is reported as unusable,
    // not fatal to the analysis of the logs beside it.
    Ok(serde_json::from_slice(&bytes).ok())
}
