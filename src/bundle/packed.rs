//! Where the bytes of an input that must be opened again come from: a file,
//! bytes held in memory, or a member of an archive (at an offset of the
//! file, or of the archive's decoded stream).

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use super::{compressed, open_nofollow};

/// Where the bytes of an input that must be opened again come from.
#[derive(Clone)]
pub(super) enum Packed {
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
    pub(super) fn open(&self) -> std::io::Result<Box<dyn Read + Send>> {
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
