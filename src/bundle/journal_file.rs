//! Binary systemd journal files (a postmortem copy of `/var/log/journal`),
//! read through the system's own `journalctl`: the on-disk format is
//! journald's to define (compressed fields, hash tables, rotation), and
//! `journalctl -o json` turns it into the lines the JSON parser reads.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::error::Error;

/// Every journal file starts with these eight bytes (`Header.signature`).
pub(super) const MAGIC: &[u8; 8] = b"LPKSHHRH";

pub(super) fn is_journal(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The entries of `files`, merged in journalctl's order (by boot and time,
/// as `journalctl --directory` would), as `-o json` lines. `name` is the
/// input the user knows these files as, for errors.
///
/// The files are named one by one with `--file` rather than by
/// `--directory`: detection is by magic bytes, so renamed and `.journal~`
/// files count too, and journalctl does not wander into subdirectories the
/// bundle walk reads on its own.
pub(super) fn read(files: &[PathBuf], name: &str) -> Result<Vec<u8>, Error> {
    read_with("journalctl", files, name)
}

/// [`read`] for a journal file that is only a stream (decompressed, a tar
/// member, piped on stdin): journalctl maps files, so the stream is copied
/// to a temporary one first, never held in memory.
pub(super) fn read_stream(input: &mut dyn io::Read, name: &str) -> Result<Vec<u8>, Error> {
    let io_error = |source| Error::Io {
        path: name.to_owned(),
        source,
    };
    let temp = TempFile::create(input).map_err(io_error)?;
    read(std::slice::from_ref(&temp.0), name)
}

fn read_with(program: &str, files: &[PathBuf], name: &str) -> Result<Vec<u8>, Error> {
    let mut command = Command::new(program);
    // --all: values over 4096 bytes would otherwise be `null`; --utc only
    // pins what journalctl might print about times on stderr.
    command.args(["--no-pager", "--all", "--utc", "--output=json"]);
    for file in files {
        let mut arg = OsString::from("--file=");
        arg.push(file);
        command.arg(arg);
    }
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => Error::MissingTool {
                path: name.to_owned(),
                what: "a binary systemd journal",
                tool: program.to_owned(),
                package: "systemd",
            },
            _ => Error::Io {
                path: name.to_owned(),
                source,
            },
        })?;
    // A damaged file still yields the entries journalctl could read, with a
    // failing status: those are worth analysing. Nothing at all is an error.
    if !output.status.success() && output.stdout.is_empty() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(Error::Tool {
            path: name.to_owned(),
            tool: program.to_owned(),
            message: stderr.trim().lines().last().unwrap_or("failed").to_owned(),
        });
    }
    Ok(output.stdout)
}

/// A file in the system's temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn create(input: &mut dyn io::Read) -> io::Result<TempFile> {
        let dir = std::env::temp_dir();
        for n in 0..1000u32 {
            let path = dir.join(format!("rootcause-{}-{n}.journal", std::process::id()));
            let mut options = fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                // Owner-only: a journal is not every local user's to read.
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            match options.open(&path) {
                Ok(mut file) => {
                    let temp = TempFile(path);
                    io::copy(input, &mut file)?;
                    return Ok(temp);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no free temporary file name",
        ))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_journalctl_names_the_file_and_the_package() {
        let e = read_with(
            "rootcause-test-no-such-journalctl",
            &[PathBuf::from("x.journal")],
            "journal/system.journal",
        )
        .expect_err("no such program");
        assert_eq!(
            e.to_string(),
            "cannot read journal/system.journal: it is a binary systemd journal, which needs `rootcause-test-no-such-journalctl` (apt-get install systemd)"
        );
    }

    #[test]
    fn a_failing_reader_with_no_output_is_an_error() {
        // `false` takes any arguments, prints nothing and fails, as
        // journalctl does on a file it cannot open.
        let e = read_with("false", &[PathBuf::from("x.journal")], "x.journal")
            .expect_err("nothing read");
        assert_eq!(e.to_string(), "cannot read x.journal: false failed: failed");
    }

    #[test]
    fn magic() {
        assert!(is_journal(b"LPKSHHRH\x00\x00"));
        assert!(!is_journal(b"LPKSHHR"));
        assert!(!is_journal(b"__CURSOR=s=1\n"));
    }
}
