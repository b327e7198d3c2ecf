//! Reading a bundle folder: its files recursively, in name order, named by
//! their path inside it. A link is followed only when it leads inside the
//! bundle; a link out of it, a dangling link, a loop, an unreadable file, a
//! FIFO or a device is skipped, with why (a gap of the report), and the rest
//! is read. The journal files of one folder are read together.

use std::fs;
use std::path::{Path, PathBuf};

use super::{add_file, head, io_error, is_bundle_metadata, journal_file};
use crate::error::Error;
use crate::source::{Source, SourceMap};

/// The state of one directory walk: the bundle's root (no link leads out of
/// it) and the folders already read (no link loops).
pub(super) struct Walk {
    pub(super) root: PathBuf,
    pub(super) seen: Vec<PathBuf>,
}

impl Walk {
    /// Adds the files of `dir`, recursively. What cannot be read (a
    /// dangling link, a link out of the bundle, a loop, an unreadable file
    /// or folder, a device or FIFO) is recorded as skipped, with why, and
    /// the rest is read.
    pub(super) fn dir(
        &mut self,
        sources: &mut SourceMap,
        dir: &Path,
        prefix: &Path,
    ) -> Result<(), Error> {
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
