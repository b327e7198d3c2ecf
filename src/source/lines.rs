//! Reading a file line by line in large blocks, decoding each line exactly
//! as decoding the whole file would: lossily, with the same count of
//! invalid UTF-8 sequences. A line longer than [`MAX_LINE`] is cut there
//! (at a character boundary) and the rest of it skipped, counted in the
//! summary: one endless line (`/dev/zero`, a 10 GiB bomb of zeros) never
//! costs more than that.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Bytes read from disk at a time.
const BLOCK: usize = 1 << 20;

/// The longest line kept whole; beyond it, a line is cut.
pub const MAX_LINE: usize = 1 << 20;

/// The UTF-8 encoding of U+FFFD, the replacement character.
const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// What one pass over an input found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadSummary {
    pub lines: u32,
    /// Invalid UTF-8 sequences replaced while decoding.
    pub invalid_utf8: usize,
    /// Why reading stopped before the end, if it did.
    pub error: Option<String>,
    /// Lines longer than [`MAX_LINE`], cut to it, and the bytes skipped.
    pub cut_lines: u32,
    pub cut_bytes: u64,
}

/// `line` cut to at most [`MAX_LINE`] bytes, at a character boundary of
/// valid UTF-8 (invalid bytes are cut anywhere), and how many bytes went.
pub(super) fn cut(line: &[u8]) -> (&[u8], usize) {
    if line.len() <= MAX_LINE {
        return (line, 0);
    }
    let mut end = MAX_LINE;
    // Back off to the start of a character, at most 3 continuation bytes.
    while end > MAX_LINE - 3 && (line[end] & 0xc0) == 0x80 {
        end -= 1;
    }
    (&line[..end], line.len() - end)
}

/// Decodes one line. A line never splits a UTF-8 sequence that is valid
/// (`\n` is not part of any), so decoding line by line replaces exactly
/// what decoding the whole text does.
struct Decoder {
    invalid: bool,
    /// Replacement characters in the decoded text, the file's own included:
    /// lossy decoding of the whole counts those too once anything was invalid.
    replacements: usize,
}

impl Decoder {
    fn line<'a>(&mut self, bytes: &'a [u8], scratch: &'a mut String) -> &'a str {
        let text: &str = match std::str::from_utf8(bytes) {
            Ok(s) => s,
            Err(_) => {
                self.invalid = true;
                scratch.clear();
                scratch.push_str(&String::from_utf8_lossy(bytes));
                scratch
            }
        };
        if memchr::memchr(REPLACEMENT[0], text.as_bytes()).is_some() {
            self.replacements += text.matches('\u{FFFD}').count();
        }
        // A line ends at `\n`; `\r\n` loses its `\r` too.
        text.strip_suffix('\r').unwrap_or(text)
    }

    fn invalid_utf8(&self) -> usize {
        if self.invalid { self.replacements } else { 0 }
    }
}

/// Reads `path` block by block and hands each line to `line`.
pub(super) fn read_file(
    path: &Path,
    progress: &mut dyn FnMut(u64),
    line: &mut dyn FnMut(u32, &str),
) -> ReadSummary {
    match File::open(path) {
        Ok(mut file) => read_stream(&mut file, progress, line),
        Err(e) => ReadSummary {
            error: Some(e.to_string()),
            ..ReadSummary::default()
        },
    }
}

/// Reads `input` block by block and hands each line to `line`.
pub(super) fn read_stream(
    input: &mut dyn Read,
    progress: &mut dyn FnMut(u64),
    line: &mut dyn FnMut(u32, &str),
) -> ReadSummary {
    let mut summary = ReadSummary::default();
    let mut decoder = Decoder {
        invalid: false,
        replacements: 0,
    };
    let mut scratch = String::new();
    let mut n: u32 = 0;
    let result = (|| -> io::Result<()> {
        let mut block = vec![0u8; BLOCK];
        // The start of a line the previous block cut, and how much of it
        // was skipped for being over the line cap.
        let mut carry: Vec<u8> = Vec::new();
        let mut skipped: usize = 0;
        let mut total: u64 = 0;
        loop {
            let read = match input.read(&mut block) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            total += read as u64;
            let data = &block[..read];
            let mut start = 0;
            for end in memchr::memchr_iter(b'\n', data) {
                n += 1;
                if carry.is_empty() && skipped == 0 {
                    let (kept, cut_off) = cut(&data[start..end]);
                    if cut_off > 0 {
                        summary.cut_lines += 1;
                        summary.cut_bytes += cut_off as u64;
                    }
                    line(n, decoder.line(kept, &mut scratch));
                } else {
                    append(&mut carry, &mut skipped, &data[start..end]);
                    if skipped > 0 {
                        summary.cut_lines += 1;
                        summary.cut_bytes += skipped as u64;
                    }
                    let whole = std::mem::take(&mut carry);
                    line(n, decoder.line(&whole, &mut scratch));
                    carry = whole;
                    carry.clear();
                    skipped = 0;
                }
                start = end + 1;
            }
            append(&mut carry, &mut skipped, &data[start..]);
            progress(total);
        }
        if !carry.is_empty() || skipped > 0 {
            n += 1;
            if skipped > 0 {
                summary.cut_lines += 1;
                summary.cut_bytes += skipped as u64;
            }
            line(n, decoder.line(&carry, &mut scratch));
        }
        Ok(())
    })();
    summary.lines = n;
    summary.invalid_utf8 = decoder.invalid_utf8();
    summary.error = result.err().map(|e| e.to_string());
    summary
}

/// Appends `more` to the start of a line held in `carry`, up to the line
/// cap; what is over it is only counted in `skipped`.
fn append(carry: &mut Vec<u8>, skipped: &mut usize, more: &[u8]) {
    if *skipped > 0 {
        *skipped += more.len();
        return;
    }
    let room = MAX_LINE.saturating_sub(carry.len());
    if more.len() <= room {
        carry.extend_from_slice(more);
        return;
    }
    // Cut at the start of a character (at most 3 continuation bytes back).
    let mut take = room;
    while take > 0 && take + 3 > room && (more[take] & 0xc0) == 0x80 {
        take -= 1;
    }
    carry.extend_from_slice(&more[..take]);
    *skipped = more.len() - take;
}

/// The raw text of one line of `input`, read again from the start: the slow
/// path for a line no pass kept.
pub(super) fn fetch_line(input: &mut dyn Read, wanted: u32) -> Option<String> {
    let mut found = None;
    read_stream(input, &mut |_| {}, &mut |n, text| {
        if n == wanted {
            found = Some(text.to_owned());
        }
    });
    found
}
