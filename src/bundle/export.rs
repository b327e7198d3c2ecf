//! `journalctl -o export` (docs/formats/journal.md) into the JSON lines of
//! `journalctl -o json`, so one parser reads both.
//!
//! Export is binary-safe: a field is `NAME=value\n`, or `NAME\n`, a 64-bit
//! little-endian length, that many raw bytes and `\n`; an empty line ends an
//! entry. The length bytes may be anything, `\n` included, so the format
//! must be read as bytes before any text decoding — which is why this
//! happens here, where inputs are still bytes, and not in a parser. Each
//! entry becomes one JSON object on one line: line N of the converted input
//! is entry N of the export.

use serde_json::{Map, Value};

/// journalctl starts every export entry with its cursor; exports written
/// by hand for `systemd-journal-remote` often start with the time.
pub(super) fn is_export(bytes: &[u8]) -> bool {
    bytes.starts_with(b"__CURSOR=") || bytes.starts_with(b"__REALTIME_TIMESTAMP=")
}

/// One JSON object per entry, in the export's order. A value that is not
/// UTF-8 becomes an array of byte values, and a field that occurs twice an
/// array of its values, as in `-o json`. Bytes after a malformed field are
/// kept as text lines, so the parser counts them instead of losing them.
pub(super) fn to_json_lines(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut entry = Map::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        if rest[0] == b'\n' {
            flush(&mut entry, &mut out);
            rest = &rest[1..];
            continue;
        }
        let Some((name, value, after)) = field(rest) else {
            flush(&mut entry, &mut out);
            out.extend_from_slice(rest);
            if !rest.ends_with(b"\n") {
                out.push(b'\n');
            }
            return out;
        };
        let value = match String::from_utf8(value.to_vec()) {
            Ok(text) => Value::String(text),
            Err(_) => Value::Array(value.iter().map(|&b| Value::from(b)).collect()),
        };
        match entry.get_mut(name) {
            Some(Value::Array(values)) if values.iter().all(|v| !v.is_number()) => {
                values.push(value)
            }
            Some(first) => *first = Value::Array(vec![first.take(), value]),
            None => {
                entry.insert(name.to_owned(), value);
            }
        }
        rest = after;
    }
    flush(&mut entry, &mut out);
    out
}

/// One field at the start of `bytes`: name, raw value and what follows.
fn field(bytes: &[u8]) -> Option<(&str, &[u8], &[u8])> {
    let end = bytes.iter().position(|&b| b == b'=' || b == b'\n')?;
    let name = std::str::from_utf8(&bytes[..end]).ok()?;
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if !valid {
        return None;
    }
    let after_name = &bytes[end + 1..];
    if bytes[end] == b'=' {
        let value_end = after_name
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(after_name.len());
        let rest = after_name.get(value_end + 1..).unwrap_or_default();
        return Some((name, &after_name[..value_end], rest));
    }
    let length: [u8; 8] = after_name.get(..8)?.try_into().ok()?;
    let length = usize::try_from(u64::from_le_bytes(length)).ok()?;
    let value = after_name.get(8..8usize.checked_add(length)?)?;
    let rest = &after_name[8 + length..];
    let rest = rest.strip_prefix(b"\n")?;
    Some((name, value, rest))
}

fn flush(entry: &mut Map<String, Value>, out: &mut Vec<u8>) {
    if entry.is_empty() {
        return;
    }
    let object = Value::Object(std::mem::take(entry));
    // Serialising a `Value` cannot fail: its keys are strings.
    if let Ok(line) = serde_json::to_vec(&object) {
        out.extend_from_slice(&line);
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary(name: &str, value: &[u8]) -> Vec<u8> {
        let mut f = format!("{name}\n").into_bytes();
        f.extend_from_slice(&(value.len() as u64).to_le_bytes());
        f.extend_from_slice(value);
        f.push(b'\n');
        f
    }

    fn converted(bytes: &[u8]) -> Vec<String> {
        String::from_utf8(to_json_lines(bytes))
            .expect("utf-8")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn text_binary_repeated_and_non_utf8_fields() {
        let mut export =
            b"__CURSOR=s=3263;i=4\n__REALTIME_TIMESTAMP=1717243204000100\n_PID=4242\n".to_vec();
        // A multi-line message whose length (10) is itself a newline byte.
        export.extend(binary("MESSAGE", b"a\nb\nc\nd\ne\n"));
        export.extend(b"_SYSTEMD_UNIT=a.service\n_SYSTEMD_UNIT=b.service\n\n");
        export.extend(b"__CURSOR=s=3263;i=5\n");
        export.extend(binary("MESSAGE", b"\x1b[1;36mcolour\xff"));
        export.extend(b"\n");
        assert!(is_export(&export));
        assert_eq!(
            converted(&export),
            vec![
                r#"{"MESSAGE":"a\nb\nc\nd\ne\n","_PID":"4242","_SYSTEMD_UNIT":["a.service","b.service"],"__CURSOR":"s=3263;i=4","__REALTIME_TIMESTAMP":"1717243204000100"}"#,
                r#"{"MESSAGE":[27,91,49,59,51,54,109,99,111,108,111,117,114,255],"__CURSOR":"s=3263;i=5"}"#,
            ]
        );
    }

    #[test]
    fn malformed_tails_are_kept_as_text_and_nothing_panics() {
        let mut export = b"__CURSOR=s=1\nMESSAGE=ok\n\n__CURSOR=s=2\n".to_vec();
        // A binary field whose length runs past the end of the input.
        export.extend(b"MESSAGE\n\xff\x00\x00\x00\x00\x00\x00\x00short");
        let out = to_json_lines(&export);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "{\"MESSAGE\":\"ok\",\"__CURSOR\":\"s=1\"}\n{\"__CURSOR\":\"s=2\"}\nMESSAGE\n\u{fffd}\0\0\0\0\0\0\0short\n"
        );
        for bad in [
            &b"__CURSOR=x\nlower=case\n"[..],
            b"__CURSOR=x\nNOEND",
            b"__CURSOR=x\nMESSAGE\n\x01\x00",
            b"\n\n\n",
            b"",
        ] {
            let _ = to_json_lines(bad);
        }
        assert!(!is_export(b"MESSAGE=x\n"));
        assert!(!is_export(b"{\"__CURSOR\":\"s=1\"}"));
    }
}
