//! Reading inputs: files, bundle directories and stdin into a [`SourceMap`].
//! The only module that reads input files; plain text files are only opened
//! here and streamed by ingest ([`Source::file`]).
//!
//! Inputs that are not text become text here, before detection, by their
//! bytes: gzip and zstd are decoded as a stream ([`compressed`]), a tar
//! archive is read member by member ([`archive`], reopened through
//! [`packed`]), binary journal files are read through `journalctl -o json`
//! ([`journal_file`]) and `journalctl -o export` dumps are converted to the
//! same JSON lines ([`export`]). Each keeps the name of the file it came
//! from. A folder is walked by [`walk`]: no link leads out of it, and what
//! cannot be read is a gap, not an error.

mod archive;
mod compressed;
mod export;
mod journal_file;
mod packed;
mod walk;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::context::{Manifest, parse_manifest};
use crate::error::Error;
use crate::source::{Source, SourceMap};

use archive::{add_tar, add_tar_once, is_tar};
use packed::Packed;
use walk::Walk;

/// Where one input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Path(PathBuf),
    Stdin,
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

/// [`load`], with stdin streamed too: ingest reads it once, as it comes
/// (`journalctl -o json | rootcause`), decompressed as it comes.
pub fn open(
    inputs: &[Input],
    stdin: Box<dyn Read + Send>,
) -> Result<(SourceMap, Option<Manifest>), Error> {
    load_with(inputs, Stdin::Stream(Some(stdin)))
}

enum Stdin<'a> {
    /// Read whole here.
    Read(&'a mut dyn Read),
    /// Handed to the source; read at most once.
    Stream(Option<Box<dyn Read + Send>>),
}

fn io_error(shown: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: shown.to_owned(),
        source,
    }
}

fn load_with(
    inputs: &[Input],
    mut stdin: Stdin<'_>,
) -> Result<(SourceMap, Option<Manifest>), Error> {
    let mut sources = SourceMap::new();
    let mut manifest = None;
    // The order the paths are given in changes nothing in a report (which
    // copy of a duplicated line is cited, the order of equal times): they
    // are read in path order, stdin last.
    let mut ordered: Vec<&Input> = inputs.iter().collect();
    ordered.sort_by_key(|i| match i {
        Input::Path(p) => (0, Some(p.as_path())),
        Input::Stdin => (1, None),
    });
    for input in ordered {
        match input {
            Input::Stdin => match &mut stdin {
                Stdin::Read(reader) => {
                    let mut bytes = Vec::new();
                    reader.read_to_end(&mut bytes).map_err(io_error("stdin"))?;
                    let packed = Packed::Held(Arc::new(bytes));
                    add_packed(&mut sources, "stdin".to_owned(), &packed, "stdin")?;
                }
                Stdin::Stream(reader) => {
                    let Some(reader) = reader.take() else {
                        sources.add(Source::new("stdin", b""));
                        continue;
                    };
                    add_stream(&mut sources, "stdin".to_owned(), reader, "stdin")?;
                }
            },
            Input::Path(path) if path.is_dir() => {
                let root = fs::canonicalize(path).map_err(io_error(&path.display().to_string()))?;
                let before = sources.len();
                let mut walk = Walk {
                    root: root.clone(),
                    seen: vec![root.clone()],
                };
                walk.dir(&mut sources, &root, Path::new(""))?;
                if sources.len() == before {
                    return Err(Error::EmptyDirectory {
                        path: path.display().to_string(),
                    });
                }
                if manifest.is_none() {
                    manifest = read_manifest(&root.join("manifest.json"))?;
                }
            }
            Input::Path(path) => {
                let shown = path.display().to_string();
                // Read whole (`inputs` reads lines again), a pipe is held.
                let hold = matches!(stdin, Stdin::Read(_));
                let found = add_file(&mut sources, shown.clone(), path, &shown, hold)?;
                if manifest.is_none() {
                    manifest = found;
                }
            }
        }
    }
    Ok((sources, manifest))
}

/// The first bytes of a regular file, enough to tell what it is.
fn head(path: &Path) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::with_capacity(compressed::HEAD);
    open_nofollow(path)
        .and_then(|f| f.take(compressed::HEAD as u64).read_to_end(&mut bytes))
        .map_err(io_error(&path.display().to_string()))?;
    Ok(bytes)
}

/// Opens a file without following a link in its last component: the paths
/// kept for later reads are resolved already, so a link there now was
/// planted since.
fn open_nofollow(path: &Path) -> std::io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path)
}

/// The input at `path`, as `name`; a tar archive's members instead, and
/// its manifest. A regular file is opened to look at, then read when ingest
/// reaches it: plain text as it is, compressed text through its decoders,
/// never held whole. Anything else (a FIFO, `/dev/stdin`, `<(cmd)`) is
/// opened once and read once, as a stream: reopening it would lose what
/// the first look read; with `hold`, it is read whole here instead. A
/// device is refused: `/dev/zero` has no end.
fn add_file(
    sources: &mut SourceMap,
    name: String,
    path: &Path,
    shown: &str,
    hold: bool,
) -> Result<Option<Manifest>, Error> {
    let err = io_error(shown);
    let file = fs::File::open(path).map_err(&err)?;
    let meta = file.metadata().map_err(&err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_char_device() || t.is_block_device() {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a device, not a log: rootcause reads files, folders, tar files and pipes",
            )));
        }
    }
    if meta.is_dir() {
        return Err(err(std::io::Error::other(
            "a folder where a file was expected",
        )));
    }
    if !meta.is_file() && hold {
        let mut bytes = Vec::new();
        (&file).read_to_end(&mut bytes).map_err(&err)?;
        return add_packed(sources, name, &Packed::Held(Arc::new(bytes)), shown);
    }
    if !meta.is_file() {
        add_stream(sources, name, Box::new(file), shown)?;
        return Ok(None);
    }
    // Later reads reopen the resolved path, never through a link.
    let real = fs::canonicalize(path).map_err(&err)?;
    let head = {
        let mut h = Vec::with_capacity(compressed::HEAD);
        (&file)
            .take(compressed::HEAD as u64)
            .read_to_end(&mut h)
            .map_err(&err)?;
        h
    };
    if journal_file::is_journal(&head) {
        sources.add(Source::new(name, &journal_file::read(&[real], shown)?));
        return Ok(None);
    }
    let named_tar = path.extension().is_some_and(|x| x == "tar");
    if is_tar(&head) || (named_tar && !compressed::is_compressed(&head)) {
        return add_tar(sources, &Packed::File(real), shown);
    }
    if !compressed::is_compressed(&head) && !export::is_export(&head) {
        sources.add(Source::file(name, real));
        return Ok(None);
    }
    let size = meta.len();
    add_packed_sized(sources, name, &Packed::File(real), shown, Some(size), true)
}

/// The input whose bytes `packed` opens, which may be compressed, an export
/// dump, a binary journal or a tar archive: read by what its decoded bytes
/// are.
fn add_packed(
    sources: &mut SourceMap,
    name: String,
    packed: &Packed,
    shown: &str,
) -> Result<Option<Manifest>, Error> {
    add_packed_sized(sources, name, packed, shown, None, true)
}

/// [`add_packed`] with the size known (for progress); `archive`: an archive
/// is read as a bundle (an archive inside one is not: it would mix names).
fn add_packed_sized(
    sources: &mut SourceMap,
    name: String,
    packed: &Packed,
    shown: &str,
    size: Option<u64>,
    archive: bool,
) -> Result<Option<Manifest>, Error> {
    let err = io_error(shown);
    let decoded = compressed::decoded(packed.open().map_err(&err)?).map_err(&err)?;
    if journal_file::is_journal(&decoded.head) {
        let mut reader = decoded.into_reader();
        sources.add(Source::new(
            name,
            &journal_file::read_stream(&mut reader, shown)?,
        ));
        return Ok(None);
    }
    if export::is_export(&decoded.head) {
        sources.add(Source::new(
            name,
            &export_lines(decoded.into_reader(), shown)?,
        ));
        return Ok(None);
    }
    if is_tar(&decoded.head) && !archive {
        return Err(err(std::io::Error::other(
            "an archive inside the archive: not read (unpack it first)",
        )));
    }
    if is_tar(&decoded.head) {
        let layers = decoded.layers;
        let archive = if layers == 0 {
            packed.clone()
        } else {
            Packed::Member {
                archive: Arc::new(packed.clone()),
                offset: 0,
                size: u64::MAX,
                decoded: true,
            }
        };
        drop(decoded);
        return add_tar(sources, &archive, shown);
    }
    if decoded.layers == 0 {
        if let Packed::File(path) = packed {
            sources.add(Source::file(name, path.clone()));
            return Ok(None);
        }
    }
    let again = packed.clone();
    sources.add(Source::opened(
        name,
        size,
        Box::new(move || Ok(compressed::decoded(again.open()?)?.into_reader())),
    ));
    Ok(None)
}

/// A stream that can be read only once (stdin, a FIFO, `<(cmd)`): decoded
/// as it comes and handed to ingest, or, when it is a journal, an export or
/// an archive, read here.
fn add_stream(
    sources: &mut SourceMap,
    name: String,
    stream: Box<dyn Read + Send>,
    shown: &str,
) -> Result<(), Error> {
    let err = io_error(shown);
    let decoded = compressed::decoded(stream).map_err(&err)?;
    if journal_file::is_journal(&decoded.head) {
        let mut reader = decoded.into_reader();
        sources.add(Source::new(
            name,
            &journal_file::read_stream(&mut reader, shown)?,
        ));
    } else if export::is_export(&decoded.head) {
        sources.add(Source::new(
            name,
            &export_lines(decoded.into_reader(), shown)?,
        ));
    } else if is_tar(&decoded.head) {
        add_tar_once(sources, decoded.into_reader(), shown)?;
    } else {
        sources.add(Source::stream(name, decoded.head, decoded.rest));
    }
    Ok(())
}

/// The most of an export dump converted: it is converted in memory.
const MAX_EXPORT: u64 = 256 << 20;

fn export_lines(mut reader: Box<dyn Read + Send>, shown: &str) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::new();
    (&mut reader)
        .take(MAX_EXPORT)
        .read_to_end(&mut bytes)
        .map_err(io_error(shown))?;
    Ok(export::to_json_lines(&bytes))
}

/// The bundle's manifest: a regular file inside the bundle, at most 1 MiB.
fn read_manifest(path: &Path) -> Result<Option<Manifest>, Error> {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Ok(Some(Manifest {
            problem: Some("manifest.json is a link or not a regular file: not read".to_owned()),
            ..Manifest::default()
        }));
    }
    let mut bytes = Vec::new();
    open_nofollow(path)
        .and_then(|f| f.take(1 << 20).read_to_end(&mut bytes))
        .map_err(io_error(&path.display().to_string()))?;
    Ok(Some(parse_manifest(&bytes)))
}
