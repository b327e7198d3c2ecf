//! Writing a bundle: a new folder, or one tar file whose members sit under a
//! top folder (so `tar xf` gives the same folder back). Nothing is written
//! over existing files.

use std::fs;
use std::io::Write;
use std::path::Path;

use crate::error::Error;

/// One file of the bundle, by its name inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub bytes: Vec<u8>,
}

fn output_error(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Output {
        path: path.display().to_string(),
        source,
    }
}

/// Into `dir`, which must not exist yet or be empty.
pub fn write_dir(dir: &Path, members: &[Member]) -> Result<(), Error> {
    if fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Error::OutputNotEmpty {
            path: dir.display().to_string(),
        });
    }
    fs::create_dir_all(dir).map_err(output_error(dir))?;
    for m in members {
        let path = dir.join(&m.name);
        fs::write(&path, &m.bytes).map_err(output_error(&path))?;
    }
    Ok(())
}

/// Into the tar file `path` (not overwritten), under the folder `top`.
pub fn write_tar(path: &Path, top: &str, members: &[Member], mtime: u64) -> Result<(), Error> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(output_error(path))?;
    let mut builder = tar::Builder::new(file);
    for m in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(m.bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(mtime);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, format!("{top}/{}", m.name), m.bytes.as_slice())
            .map_err(output_error(path))?;
    }
    let mut file = builder.into_inner().map_err(output_error(path))?;
    file.flush().map_err(output_error(path))
}

/// Owner-only: the redaction mapping holds the very values it hides.
pub fn write_private(path: &Path, text: &str) -> Result<(), Error> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(output_error(path))?;
    file.write_all(text.as_bytes()).map_err(output_error(path))
}
