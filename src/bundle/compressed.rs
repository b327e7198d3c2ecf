//! gzip and zstd inputs, recognised by their magic bytes (a rotated
//! `syslog.2.gz`, a bundle packed with `zstd`), not by their names.

use std::io::{self, Read};

use flate2::read::MultiGzDecoder;
use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{FrameDecoder, StreamingDecoder};

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// Whether `head` starts a gzip or zstd stream.
pub(super) fn is_compressed(head: &[u8]) -> bool {
    head.starts_with(GZIP_MAGIC) || head.starts_with(ZSTD_MAGIC)
}

/// A compressed file inside a compressed file is unpacked too, this many
/// layers deep at most.
const MAX_LAYERS: usize = 4;

/// `bytes` with every compression layer removed; `bytes` themselves when
/// they are not compressed. A corrupt or truncated stream is an error: the
/// analysis would otherwise silently miss the end of a log.
pub(super) fn decompress(mut bytes: Vec<u8>) -> io::Result<Vec<u8>> {
    for _ in 0..MAX_LAYERS {
        bytes = if bytes.starts_with(GZIP_MAGIC) {
            gunzip(&bytes)?
        } else if bytes.starts_with(ZSTD_MAGIC) {
            unzstd(&bytes)?
        } else {
            break;
        };
    }
    Ok(bytes)
}

/// Every member: `cat a.gz b.gz` and rotated logs appended with `gzip -c >>`
/// are several gzip members in one file.
fn gunzip(bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|e| invalid(format!("corrupt gzip stream: {e}")))?;
    Ok(out)
}

/// Every frame, skipping skippable frames, as `zstd -d` does.
fn unzstd(bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut input = bytes;
    let mut out = Vec::new();
    let mut decoder = FrameDecoder::new();
    while !input.is_empty() {
        match StreamingDecoder::new_with_decoder(&mut input, &mut decoder) {
            Ok(mut frame) => {
                frame
                    .read_to_end(&mut out)
                    .map_err(|e| invalid(format!("corrupt zstd stream: {e}")))?;
            }
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => {
                input = input
                    .get(length as usize..)
                    .ok_or_else(|| invalid("truncated zstd skippable frame".to_owned()))?;
            }
            Err(e) => return Err(invalid(format!("corrupt zstd stream: {e}"))),
        }
    }
    Ok(out)
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
}
