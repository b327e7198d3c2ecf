//! Reading a file line by line in large blocks, decoding each line exactly
//! as decoding the whole file would: lossily, with the same count of
//! invalid UTF-8 sequences.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Bytes read from disk at a time.
const BLOCK: usize = 1 << 20;

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
        // The start of a line the previous block cut.
        let mut carry: Vec<u8> = Vec::new();
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
                if carry.is_empty() {
                    line(n, decoder.line(&data[start..end], &mut scratch));
                } else {
                    carry.extend_from_slice(&data[start..end]);
                    let whole = std::mem::take(&mut carry);
                    line(n, decoder.line(&whole, &mut scratch));
                    carry = whole;
                    carry.clear();
                }
                start = end + 1;
            }
            carry.extend_from_slice(&data[start..]);
            progress(total);
        }
        if !carry.is_empty() {
            n += 1;
            line(n, decoder.line(&carry, &mut scratch));
        }
        Ok(())
    })();
    summary.lines = n;
    summary.invalid_utf8 = decoder.invalid_utf8();
    summary.error = result.err().map(|e| e.to_string());
    summary
}

/// The raw text of one line of `path`, read again from the start: the slow
/// path for a line no pass kept.
pub(super) fn fetch_line(path: &Path, wanted: u32) -> Option<String> {
    let mut found = None;
    read_file(path, &mut |_| {}, &mut |n, text| {
        if n == wanted {
            found = Some(text.to_owned());
        }
    });
    found
}
