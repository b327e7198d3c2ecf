//! A bundle packed in a tar archive, plain or compressed: its members,
//! under one top folder, read like the folder itself. Nothing is extracted;
//! a member's bytes are read when ingest reaches them, never held whole
//! (small members of an archive that cannot be reopened cheaply aside).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::packed::Packed;
use super::{
    Manifest, add_packed_sized, io_error, is_bundle_metadata, open_nofollow, parse_manifest,
};
use crate::error::Error;
use crate::source::SourceMap;

/// Whether `head` is the start of a tar archive: `ustar` at byte 257 (POSIX
/// and GNU headers alike).
pub(super) fn is_tar(head: &[u8]) -> bool {
    head.get(257..262) == Some(b"ustar")
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
pub(super) fn add_tar(
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
pub(super) fn add_tar_once(
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
