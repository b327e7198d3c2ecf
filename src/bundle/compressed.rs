//! gzip and zstd inputs, recognised by their magic bytes (a rotated
//! `syslog.2.gz`, a bundle packed with `zstd`), not by their names, and
//! unpacked as a stream: what the decoders produce is read as it comes and
//! never held whole, so a 10 GiB bomb costs a block and a zstd window, not
//! 10 GiB.

use std::io::{self, BufRead, BufReader, Cursor, Read};

use flate2::bufread::MultiGzDecoder;
use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// Bytes looked at to tell what an input is: a tar header's magic ends at
/// byte 262.
pub(super) const HEAD: usize = 512;

/// Whether `head` starts a gzip or zstd stream.
pub(super) fn is_compressed(head: &[u8]) -> bool {
    head.starts_with(GZIP_MAGIC) || head.starts_with(ZSTD_MAGIC)
}

/// A compressed file inside a compressed file is unpacked too, this many
/// layers deep at most.
const MAX_LAYERS: usize = 4;

/// An input with its compression layers removed: its first [`HEAD`] bytes,
/// already read to recognise it, and the rest, still to read.
pub(super) struct Decoded {
    pub head: Vec<u8>,
    pub rest: Box<dyn Read + Send>,
    /// How many layers were removed (0: the input was not compressed).
    pub layers: usize,
}

impl Decoded {
    /// The whole stream again, head first.
    pub fn into_reader(self) -> Box<dyn Read + Send> {
        Box::new(Cursor::new(self.head).chain(self.rest))
    }
}

/// `input` with every compression layer removed, as a stream. A corrupt or
/// truncated stream is an error when it is read (named `corrupt gzip
/// stream: …`): the analysis would otherwise silently miss the end of a log.
pub(super) fn decoded(input: Box<dyn Read + Send>) -> io::Result<Decoded> {
    let mut reader = input;
    let mut layers = 0;
    loop {
        let head = peek(&mut reader)?;
        if layers == MAX_LAYERS || !is_compressed(&head) {
            return Ok(Decoded {
                head,
                rest: reader,
                layers,
            });
        }
        let gzip = head.starts_with(GZIP_MAGIC);
        let whole = BufReader::new(Cursor::new(head).chain(reader));
        reader = if gzip {
            Box::new(Labeled {
                inner: MultiGzDecoder::new(whole),
                what: "gzip",
            })
        } else {
            Box::new(Labeled {
                inner: Zstd::new(whole),
                what: "zstd",
            })
        };
        layers += 1;
    }
}

/// The first [`HEAD`] bytes of `r` (fewer at its end).
fn peek(r: &mut dyn Read) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(HEAD);
    r.take(HEAD as u64).read_to_end(&mut head)?;
    Ok(head)
}

/// A decoder whose errors say which format was corrupt.
struct Labeled<R> {
    inner: R,
    what: &'static str,
}

impl<R: Read> Read for Labeled<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::Interrupted {
                e
            } else {
                invalid(format!("corrupt {} stream: {e}", self.what))
            }
        })
    }
}

/// Every frame of a zstd stream, skipping skippable frames, as `zstd -d`
/// does; decoded block by block as it is read, so at most one window (the
/// frame's own, at most 100 MiB: ruzstd refuses more) and what one read
/// asks for are held.
struct Zstd<R> {
    source: R,
    decoder: FrameDecoder,
    in_frame: bool,
}

impl<R: BufRead> Zstd<R> {
    fn new(source: R) -> Zstd<R> {
        Zstd {
            source,
            decoder: FrameDecoder::new(),
            in_frame: false,
        }
    }
}

impl<R: BufRead> Read for Zstd<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.in_frame {
                let d = &mut self.decoder;
                while d.can_collect() < buf.len() && !d.is_finished() {
                    let wanted = buf.len() - d.can_collect();
                    d.decode_blocks(&mut self.source, BlockDecodingStrategy::UptoBytes(wanted))
                        .map_err(|e| invalid(e.to_string()))?;
                }
                let n = d.read(buf)?;
                if n > 0 {
                    return Ok(n);
                }
                if d.is_finished() && d.can_collect() == 0 {
                    self.in_frame = false;
                }
                continue;
            }
            if self.source.fill_buf()?.is_empty() {
                return Ok(0);
            }
            match self.decoder.init(&mut self.source) {
                Ok(()) => self.in_frame = true,
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let skipped = io::copy(
                        &mut (&mut self.source).take(u64::from(length)),
                        &mut io::sink(),
                    )?;
                    if skipped < u64::from(length) {
                        return Err(invalid("truncated zstd skippable frame".to_owned()));
                    }
                }
                Err(e) => return Err(invalid(e.to_string())),
            }
        }
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::*;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(bytes).expect("gzip");
        e.finish().expect("gzip")
    }

    /// `bytes` with every layer removed, read whole (for the tests).
    fn decompress(bytes: Vec<u8>) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        decoded(Box::new(Cursor::new(bytes)))?
            .into_reader()
            .read_to_end(&mut out)?;
        Ok(out)
    }

    /// One zstd frame holding `bytes` as a single raw block (what `zstd`
    /// writes for incompressible data), with no checksum.
    fn zstd_raw_frame(bytes: &[u8]) -> Vec<u8> {
        let mut f = ZSTD_MAGIC.to_vec();
        // Frame header descriptor: single segment, 1-byte content size.
        f.push(0b0010_0000);
        f.push(bytes.len() as u8);
        // Block header: last block, raw, size.
        let header = 1 | ((bytes.len() as u32) << 3);
        f.extend_from_slice(&header.to_le_bytes()[..3]);
        f.extend_from_slice(bytes);
        f
    }

    #[test]
    fn layers_members_frames_and_plain_text() {
        assert_eq!(decompress(b"plain\n".to_vec()).unwrap(), b"plain\n");
        assert_eq!(decompress(Vec::new()).unwrap(), b"");
        let mut two = gzip(b"one\n");
        two.extend(gzip(b"two\n"));
        assert_eq!(decompress(two).unwrap(), b"one\ntwo\n");
        let mut frames = zstd_raw_frame(b"a\n");
        // A skippable frame between two data frames.
        frames.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 9, 9]);
        frames.extend(zstd_raw_frame(b"b\n"));
        assert_eq!(decompress(frames.clone()).unwrap(), b"a\nb\n");
        assert_eq!(decompress(gzip(&frames)).unwrap(), b"a\nb\n");
        let d = decoded(Box::new(Cursor::new(gzip(&gzip(b"x\n"))))).unwrap();
        assert_eq!((d.head.as_slice(), d.layers), (&b"x\n"[..], 2));
    }

    #[test]
    fn corrupt_and_truncated_streams_are_errors() {
        let gz = gzip(b"some log line\n");
        for bad in [
            gz[..gz.len() - 4].to_vec(),
            vec![0x1f, 0x8b, 0xff],
            zstd_raw_frame(b"abc")[..7].to_vec(),
            vec![0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff],
        ] {
            let e = decompress(bad).expect_err("corrupt");
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        }
    }

    /// Ten megabytes of zeros decode through a bounded buffer: what one read
    /// asks for, never the whole.
    #[test]
    fn a_stream_is_decoded_as_it_is_read() {
        let zeros = vec![0u8; 10 << 20];
        let mut reader = decoded(Box::new(Cursor::new(gzip(&zeros))))
            .unwrap()
            .into_reader();
        let mut block = vec![0u8; 64 << 10];
        let mut total = 0;
        loop {
            let n = reader.read(&mut block).unwrap();
            if n == 0 {
                break;
            }
            total += n;
        }
        assert_eq!(total, 10 << 20);
    }
}
