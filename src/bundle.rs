//! Reading inputs: files, bundle directories and stdin into a [`SourceMap`].
//! The only module that reads input files.

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
                sources.add(Source::new("stdin", &bytes));
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
                let bytes = read(path)?;
                sources.add(Source::new(path.display().to_string(), &bytes));
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
    for path in entries.into_iter().filter(|p| !is_bundle_metadata(p)) {
        let name = prefix.join(path.file_name().unwrap_or_default());
        if path.is_dir() {
            add_dir(sources, &path, &name)?;
        } else {
            let bytes = read(&path)?;
            // Forward slashes on every platform: reports must be identical.
            sources.add(Source::new(
                name.to_string_lossy().replace('\\', "/"),
                &bytes,
            ));
        }
    }
    Ok(())
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
