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
use std::sync::Arc;

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

/// The state of one directory walk: the bundle's root (no link leads out of
/// it) and the folders already read (no link loops).
struct Walk {
    root: PathBuf,
    seen: Vec<PathBuf>,
}

impl Walk {
    /// Adds the files of `dir`, recursively. What cannot be read (a
    /// dangling link, a link out of the bundle, a loop, an unreadable file
    /// or folder, a device or FIFO) is recorded as skipped, with why, and
    /// the rest is read.
    fn dir(&mut self, sources: &mut SourceMap, dir: &Path, prefix: &Path) -> Result<(), Error> {
        let shown = dir.display().to_string();
        let mut entries: Vec<PathBuf> = fs::read_dir(dir)
            .map_err(io_error(&shown))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(io_error(&shown))?;
        entries.sort();
        entries.retain(|p| !is_bundle_metadata(p));
        // Forward slashes on every platform: reports must be identical.
        let name_of = |path: &Path| {
            prefix
                .join(path.file_name().unwrap_or_default())
                .to_string_lossy()
                .replace('\\', "/")
        };
        // Each entry, resolved: a link to something inside the bundle is
        // followed, any other link is not.
        let mut files: Vec<(PathBuf, String)> = Vec::new();
        for path in entries {
            let name = name_of(&path);
            match self.resolve(&path) {
                Ok(real) if real.is_dir() => {
                    if self.seen.contains(&real) {
                        sources.skip(
                            name,
                            "a link to a folder already read (a loop): not followed",
                        );
                        continue;
                    }
                    self.seen.push(real.clone());
                    if let Err(e) = self.dir(sources, &real, Path::new(&name)) {
                        sources.skip(name, e.to_string());
                    }
                }
                Ok(real) => files.push((real, name)),
                Err(why) => sources.skip(name, why),
            }
        }
        // The journal files of one directory (active, archived, per user) are
        // one journal: read together, in journalctl's merged order.
        let mut journals = Vec::new();
        for (real, name) in &files {
            match head(real) {
                Ok(h) if journal_file::is_journal(&h) => journals.push(real.clone()),
                Ok(_) => {}
                Err(e) => sources.skip(name.clone(), e.to_string()),
            }
        }
        let mut journals_added = false;
        for (real, name) in files {
            if journals.contains(&real) {
                if !journals_added {
                    journals_added = true;
                    let (name, shown) = match journals.as_slice() {
                        [one] => (name, one.display().to_string()),
                        _ => (journal_dir_name(dir, prefix), dir.display().to_string()),
                    };
                    match journal_file::read(&journals, &shown) {
                        Ok(json) => {
                            sources.add(Source::new(name, &json));
                        }
                        Err(e @ Error::MissingTool { .. }) => return Err(e),
                        Err(e) => sources.skip(name, e.to_string()),
                    }
                }
                continue;
            }
            let shown = real.display().to_string();
            match add_file(sources, name.clone(), &real, &shown, false) {
                Ok(_) => {}
                Err(e @ Error::MissingTool { .. }) => return Err(e),
                Err(e) => sources.skip(name, e.to_string()),
            }
        }
        Ok(())
    }

    /// Where `path` really is, when it may be read: a regular file or a
    /// folder inside the bundle. Why not, otherwise.
    fn resolve(&self, path: &Path) -> Result<PathBuf, String> {
        let link = fs::symlink_metadata(path)
            .map_err(|e| e.to_string())?
            .file_type()
            .is_symlink();
        let real = fs::canonicalize(path).map_err(|e| {
            if link {
                format!("a link that leads nowhere readable ({e}): not followed")
            } else {
                e.to_string()
            }
        })?;
        if link && !real.starts_with(&self.root) {
            return Err(format!(
                "a link out of the bundle (to {}): not followed",
                real.display()
            ));
        }
        let meta = fs::metadata(&real).map_err(|e| e.to_string())?;
        if meta.is_dir() || meta.is_file() {
            Ok(real)
        } else {
            Err("not a regular file (a FIFO, a socket or a device): not read".to_owned())
        }
    }
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

/// Whether `head` is the start of a tar archive: `ustar` at byte 257 (POSIX
/// and GNU headers alike).
fn is_tar(head: &[u8]) -> bool {
    head.get(257..262) == Some(b"ustar")
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

/// Where the bytes of an input that must be opened again come from.
#[derive(Clone)]
enum Packed {
    /// A file on disk.
    File(PathBuf),
    /// Bytes already in memory (a small tar member, stdin read whole).
    Held(Arc<Vec<u8>>),
    /// `size` bytes at `offset` of what `archive` opens (a tar member).
    Member {
        archive: Arc<Packed>,
        offset: u64,
        size: u64,
        /// The archive's bytes are compressed: reaching the member decodes
        /// everything before it.
        decoded: bool,
    },
}

impl Packed {
    /// The raw bytes, from the start.
    fn open(&self) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(match self {
            Packed::File(path) => Box::new(open_nofollow(path)?),
            Packed::Held(bytes) => Box::new(std::io::Cursor::new(HeldBytes(Arc::clone(bytes)))),
            Packed::Member {
                archive,
                offset,
                size,
                decoded,
            } => {
                if let (false, Packed::File(path)) = (*decoded, archive.as_ref()) {
                    let mut f = open_nofollow(path)?;
                    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(*offset))?;
                    return Ok(Box::new(f.take(*size)));
                }
                let mut reader = if *decoded {
                    compressed::decoded(archive.open()?)?.into_reader()
                } else {
                    archive.open()?
                };
                let skipped =
                    std::io::copy(&mut (&mut reader).take(*offset), &mut std::io::sink())?;
                if skipped < *offset {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the archive ends before this member",
                    ));
                }
                Box::new(reader.take(*size))
            }
        })
    }
}

/// Shared bytes a cursor can read.
struct HeldBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for HeldBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
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

/// One regular member of an archive: its path in the archive, where its
/// bytes are, how big it is.
struct Member {
    name: PathBuf,
    offset: u64,
    size: u64,
    /// Its bytes, when they were held while the archive was read once.
    held: Option<Arc<Vec<u8>>>,
}

/// Members up to this size are held while an archive that cannot be
/// reopened cheaply is read, up to [`HOLD_BUDGET`] in all; bigger ones are
/// read from the archive again when ingest reaches them.
const HOLD_MEMBER: u64 = 1 << 20;
const HOLD_BUDGET: u64 = 16 << 20;

/// A bundle packed in a tar file (`capture --tar`, or packed by hand and
/// compressed: `.tar.gz`, `.tar.zst`, told by their bytes, not their names):
/// its members under one top folder, read like the folder itself, in name
/// order, each decoded by what it is (a `.gz` member is unpacked). Nothing
/// is extracted. A member's bytes are read when ingest reaches it: from the
/// file at its offset, or, in a compressed archive, by decoding the archive
/// up to it (members of at most 1 MiB are held instead, 16 MiB in all). A
/// link member is never followed.
fn add_tar(
    sources: &mut SourceMap,
    archive: &Packed,
    shown: &str,
) -> Result<Option<Manifest>, Error> {
    let err = io_error(shown);
    let seekable = matches!(archive, Packed::File(_));
    let mut members = Vec::new();
    let mut links = Vec::new();
    let mut held = 0u64;
    // A file on disk is read header by header, seeking over the members'
    // bytes; anything else is read through once.
    let mut on_disk;
    let mut streamed;
    let entries = match archive {
        Packed::File(path) => {
            on_disk = tar::Archive::new(open_nofollow(path).map_err(&err)?);
            Entries::Disk(on_disk.entries_with_seek().map_err(&err)?)
        }
        other => {
            streamed = tar::Archive::new(other.open().map_err(&err)?);
            Entries::Stream(streamed.entries().map_err(&err)?)
        }
    };
    for entry in entries {
        let mut entry = entry.map_err(&err)?;
        let kind = entry.header().entry_type();
        let name = entry.path().map_err(&err)?.into_owned();
        if kind.is_symlink() || kind.is_hard_link() {
            links.push(name);
            continue;
        }
        if !kind.is_file() {
            continue;
        }
        let size = entry.size();
        let offset = entry.raw_file_position();
        let keep = !seekable && size <= HOLD_MEMBER && held + size <= HOLD_BUDGET;
        let bytes = if keep {
            let mut bytes = Vec::with_capacity(size as usize);
            entry.read_to_end(&mut bytes).map_err(&err)?;
            held += size;
            Some(Arc::new(bytes))
        } else {
            None
        };
        members.push(Member {
            name,
            offset,
            size,
            held: bytes,
        });
    }
    let decoded = matches!(archive, Packed::Member { decoded: true, .. });
    let archive = match archive {
        Packed::Member {
            archive,
            decoded: true,
            ..
        } => Packed::Member {
            archive: Arc::clone(archive),
            offset: 0,
            size: u64::MAX,
            decoded: true,
        },
        other => other.clone(),
    };
    let archive = Arc::new(archive);
    add_members(sources, members, links, shown, |m| match &m.held {
        Some(bytes) => Packed::Held(Arc::clone(bytes)),
        None => match archive.as_ref() {
            // The member's offset counts in the decoded archive.
            Packed::Member {
                archive: inner,
                decoded: true,
                ..
            } if decoded => Packed::Member {
                archive: Arc::clone(inner),
                offset: m.offset,
                size: m.size,
                decoded: true,
            },
            _ => Packed::Member {
                archive: Arc::clone(&archive),
                offset: m.offset,
                size: m.size,
                decoded: false,
            },
        },
    })
}

/// The entries of an archive on disk or streamed, one type for the loop.
enum Entries<'a> {
    Disk(tar::Entries<'a, fs::File>),
    Stream(tar::Entries<'a, Box<dyn Read + Send>>),
}

/// One entry of either kind of archive.
enum AnyEntry<'a> {
    Disk(tar::Entry<'a, fs::File>),
    Stream(tar::Entry<'a, Box<dyn Read + Send>>),
}

impl<'a> Iterator for Entries<'a> {
    type Item = std::io::Result<AnyEntry<'a>>;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Entries::Disk(e) => e.next().map(|r| r.map(AnyEntry::Disk)),
            Entries::Stream(e) => e.next().map(|r| r.map(AnyEntry::Stream)),
        }
    }
}

impl AnyEntry<'_> {
    fn header(&self) -> &tar::Header {
        match self {
            AnyEntry::Disk(e) => e.header(),
            AnyEntry::Stream(e) => e.header(),
        }
    }
    fn path(&self) -> std::io::Result<std::borrow::Cow<'_, Path>> {
        match self {
            AnyEntry::Disk(e) => e.path(),
            AnyEntry::Stream(e) => e.path(),
        }
    }
    fn size(&self) -> u64 {
        match self {
            AnyEntry::Disk(e) => e.size(),
            AnyEntry::Stream(e) => e.size(),
        }
    }
    fn raw_file_position(&self) -> u64 {
        match self {
            AnyEntry::Disk(e) => e.raw_file_position(),
            AnyEntry::Stream(e) => e.raw_file_position(),
        }
    }
}

impl Read for AnyEntry<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            AnyEntry::Disk(e) => e.read(buf),
            AnyEntry::Stream(e) => e.read(buf),
        }
    }
}

/// An archive that can be read only once (piped in): members are held up
/// to the budget; a bigger one is a gap (give the file instead).
fn add_tar_once(
    sources: &mut SourceMap,
    stream: Box<dyn Read + Send>,
    shown: &str,
) -> Result<Option<Manifest>, Error> {
    let err = io_error(shown);
    let mut tar = tar::Archive::new(stream);
    let mut members = Vec::new();
    let mut links = Vec::new();
    let mut held = 0u64;
    for entry in tar.entries().map_err(&err)? {
        let mut entry = entry.map_err(&err)?;
        let kind = entry.header().entry_type();
        let name = entry.path().map_err(&err)?.into_owned();
        if kind.is_symlink() || kind.is_hard_link() {
            links.push(name);
            continue;
        }
        if !kind.is_file() {
            continue;
        }
        let size = entry.size();
        let bytes = if held + size <= HOLD_BUDGET {
            let mut bytes = Vec::with_capacity(size as usize);
            entry.read_to_end(&mut bytes).map_err(&err)?;
            held += size;
            Some(Arc::new(bytes))
        } else {
            None
        };
        members.push(Member {
            name,
            offset: 0,
            size,
            held: bytes,
        });
    }
    add_members(sources, members, links, shown, |m| {
        Packed::Held(m.held.clone().unwrap_or_default())
    })
}

/// The members of an archive as inputs, named by their path under its top
/// folder, in name order; its `manifest.json`, if any.
fn add_members(
    sources: &mut SourceMap,
    members: Vec<Member>,
    links: Vec<PathBuf>,
    shown: &str,
    packed: impl Fn(&Member) -> Packed,
) -> Result<Option<Manifest>, Error> {
    // The top folder `tar xf` would create is not part of the names.
    let top = members
        .first()
        .and_then(|m| m.name.components().next())
        .map(|c| PathBuf::from(c.as_os_str()));
    let strip = top.filter(|t| {
        members
            .iter()
            .all(|m| m.name.starts_with(t) && m.name.components().count() > 1)
    });
    let relative = |name: &Path| {
        strip
            .as_ref()
            .and_then(|t| name.strip_prefix(t).ok())
            .unwrap_or(name)
            .to_owned()
    };
    let mut manifest = None;
    let mut inputs: Vec<(String, &Member)> = Vec::new();
    for m in &members {
        let rel = relative(&m.name);
        if rel == Path::new("manifest.json") {
            let mut bytes = Vec::new();
            let read = packed(m)
                .open()
                .and_then(|r| r.take(1 << 20).read_to_end(&mut bytes));
            manifest = Some(match read {
                Ok(_) => parse_manifest(&bytes),
                Err(e) => Manifest {
                    problem: Some(format!("manifest.json cannot be read: {e}")),
                    ..Manifest::default()
                },
            });
            continue;
        }
        let skipped = rel
            .components()
            .any(|c| is_bundle_metadata(Path::new(c.as_os_str())));
        if !skipped {
            inputs.push((rel.to_string_lossy().replace('\\', "/"), m));
        }
    }
    if inputs.is_empty() {
        return Err(Error::EmptyDirectory {
            path: shown.to_owned(),
        });
    }
    inputs.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, m) in inputs {
        if m.held.is_none() && matches!(packed(m), Packed::Held(_)) && m.size > 0 {
            sources.skip(
                name,
                "a member too big to hold from a pipe: not read (give the archive as a file)",
            );
            continue;
        }
        let member_shown = format!("{shown}: {name}");
        let result = add_packed_sized(
            sources,
            name.clone(),
            &packed(m),
            &member_shown,
            Some(m.size),
            false,
        );
        match result {
            Ok(_) => {}
            Err(e @ Error::MissingTool { .. }) => return Err(e),
            Err(e) => sources.skip(name, e.to_string()),
        }
    }
    for link in links {
        let name = relative(&link).to_string_lossy().replace('\\', "/");
        sources.skip(name, "a link in the archive: not followed");
    }
    Ok(manifest)
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

/// A manifest is optional metadata: a broken one is reported as unusable,
/// not fatal to the analysis of the logs beside it.
pub fn parse_manifest(bytes: &[u8]) -> Manifest {
    serde_json::from_slice(bytes).unwrap_or_else(|e| Manifest {
        problem: Some(format!("manifest.json is not valid: {e}")),
        ..Manifest::default()
    })
}
